//! The memory list (the default recipe): turns ranked by their own
//! channels, by the votes of the facts extracted from them, when the query
//! names a period by being inside it, and when it asks "when" by naming a
//! time; each turn one result, with its facts and neighbouring turns
//! attached.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_engine::search::{self, Channel, Scope, rrf};
use chronicle_engine::temporal;
use chronicle_index::DocKind;
use chronicle_model::{Episode, Fact, GroupId};
use futures::{StreamExt, TryStreamExt};
use uuid::Uuid;

use crate::load::{LOAD_CONCURRENCY, Loaded};
use crate::results::{ResultItem, SearchRequest, SupportingFact, Turn};
use crate::{Query, QueryError};

impl Query<'_> {
    /// The mixed list (see [`SearchConfig::mixed`]): episodes by their own
    /// channels and by the votes of the facts extracted from them.
    pub(crate) async fn search_mixed(
        &self,
        group: &GroupId,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
    ) -> Result<Vec<ResultItem>, QueryError> {
        let config = &request.config;
        let limit = config.limit.max(1);
        let fetch = (limit * 5).max(50);
        let text = request.query.trim();
        // Each channel's list for a kind of document, with its weight in
        // the fusion: (kind, BM25 weight, cosine weight), 0 = not asked.
        let channel_lists = |sc: Option<&search::ScopeConfig>, kinds: &[(DocKind, f32, f32)]| {
            let mut lists: Vec<(Vec<Uuid>, f32)> = Vec::new();
            let Some(sc) = sc else {
                return Ok::<_, QueryError>(lists);
            };
            let index = &self.sources.index;
            for &(kind, bm25, cosine) in kinds {
                if sc.channels.contains(&Channel::Bm25) && !text.is_empty() && bm25 > 0.0 {
                    let hits = index.text_search(group, &[kind], text, fetch)?;
                    lists.push((hits.into_iter().map(|h| h.uuid).collect(), bm25));
                }
                if sc.channels.contains(&Channel::Cosine)
                    && let Some(v) = query_vector
                    && cosine > 0.0
                {
                    let hits = index.vector_search(group, &[kind], v, fetch)?;
                    lists.push((hits.into_iter().map(|h| h.uuid).collect(), cosine));
                }
            }
            Ok(lists)
        };
        // An episode by its key (with the turn before it), by meaning, and
        // by its own words.
        let episode_lists = channel_lists(
            config.episodes.as_ref(),
            &[
                (DocKind::Episode, 1.0, search::EPISODE_COSINE_WEIGHT),
                (DocKind::Turn, search::OWN_WORDS_WEIGHT, 0.0),
            ],
        )?;
        let fact_lists: Vec<Vec<Uuid>> =
            channel_lists(config.facts.as_ref(), &[(DocKind::Fact, 1.0, 1.0)])?
                .into_iter()
                .map(|(l, _)| l)
                .collect();

        // Facts that pass the filters, and the order they rank in.
        let candidates: BTreeSet<Uuid> = fact_lists.iter().flatten().copied().collect();
        let facts: BTreeMap<Uuid, Fact> = self
            .load_all(group, Scope::Fact, candidates, &request.filters)
            .await?
            .into_iter()
            .filter_map(|(u, x)| match x {
                Loaded::Fact(f) => Some((u, f)),
                _ => None,
            })
            .collect();
        let fact_lists: Vec<Vec<Uuid>> = fact_lists
            .into_iter()
            .map(|l| l.into_iter().filter(|u| facts.contains_key(u)).collect())
            .collect();
        let fact_order = rrf(&fact_lists, 1.0);
        let no_episodes: &[Uuid] = &[];
        let vote_lists: Vec<Vec<Uuid>> = fact_lists
            .iter()
            .map(|l| search::votes(l, |f| facts.get(f).map_or(no_episodes, |f| &f.episodes)))
            .collect();
        let mut weighted: Vec<(&[Uuid], f32)> = (episode_lists.iter())
            .map(|(l, w)| (l.as_slice(), *w))
            .collect();
        weighted.extend(
            vote_lists
                .iter()
                .map(|l| (l.as_slice(), search::FACT_VOTE_WEIGHT)),
        );
        let mut fused = search::weighted_rrf(&weighted, search::MIXED_RRF_K);

        // Candidates load once: for the time channel and for the results.
        let mut episodes: BTreeMap<Uuid, Option<Episode>> = BTreeMap::new();
        // A named period, and a "when" question: channels over the
        // candidates' times and words.
        let period = temporal::period_in(text, self.now);
        let asks_when = search::asks_when(text);
        if period.is_some() || asks_when {
            let head = &fused[..fused.len().min(fetch)];
            let candidates: Vec<Uuid> = head.iter().map(|(u, _)| *u).collect();
            episodes.extend(
                self.load_episodes(group, &candidates, &request.filters)
                    .await?,
            );
            let loaded = |u: &Uuid| episodes.get(u).and_then(|e| e.as_ref());
            let timed = period
                .map(|period| search::in_period(head, &period, |u| loaded(u).map(|e| e.valid_at)));
            let says_when = asks_when.then(|| {
                search::says_when(head, |u| {
                    loaded(u).map(|e| (e.content.as_str(), e.valid_at))
                })
            });
            if let Some(timed) = &timed {
                weighted.push((timed.as_slice(), search::PERIOD_WEIGHT));
            }
            if let Some(says_when) = &says_when {
                weighted.push((says_when.as_slice(), search::SAYS_WHEN_WEIGHT));
            }
            fused = search::weighted_rrf(&weighted, search::MIXED_RRF_K);
        }

        // The first `limit` candidates load together; later ones only when
        // the filters drop some of those.
        let first: Vec<Uuid> = (fused.iter().take(limit))
            .map(|(u, _)| *u)
            .filter(|u| !episodes.contains_key(u))
            .collect();
        episodes.extend(self.load_episodes(group, &first, &request.filters).await?);
        let mut selected = Vec::new();
        for (u, score) in fused {
            if selected.len() >= limit {
                break;
            }
            let e = match episodes.remove(&u) {
                Some(e) => e,
                None => self.load_episode(group, u, &request.filters).await?,
            };
            if let Some(e) = e {
                selected.push((e, score));
            }
        }
        // Each result's neighbouring turns, read concurrently, in rank order.
        let n = config.context_turns;
        let contexts: Vec<Vec<Turn>> = if n > 0 {
            let reads: Vec<_> = (selected.iter())
                .map(|(e, _)| self.turns_around(group, e, n))
                .collect();
            futures::stream::iter(reads)
                .buffered(LOAD_CONCURRENCY)
                .try_collect()
                .await?
        } else {
            vec![Vec::new(); selected.len()]
        };
        let mut out = Vec::with_capacity(selected.len());
        for ((e, score), context) in selected.into_iter().zip(contexts) {
            let u = e.uuid;
            let mut item = self.item(group, Loaded::Episode(e), score).await?;
            item.context = context;
            item.facts = fact_order
                .iter()
                .filter_map(|(f, _)| facts.get(f))
                .filter(|f| f.episodes.contains(&u))
                .map(|f| SupportingFact {
                    uuid: f.uuid,
                    fact: f.fact.clone(),
                    valid_at: f.valid_at,
                    invalid_at: f.invalid_at,
                    expired_at: f.expired_at,
                })
                .collect();
            out.push(item);
        }
        Ok(out)
    }

    /// The `n` turns before and after an episode in the group's order
    /// (reference time, then log order), the episode itself included: the
    /// episodes at or before its reference time and those at or after it,
    /// read together.
    pub(crate) async fn turns_around(
        &self,
        group: &GroupId,
        center: &Episode,
        n: usize,
    ) -> Result<Vec<Turn>, QueryError> {
        // Enough for a session's turns that share one reference time.
        const WINDOW: usize = 64;
        let store = &self.sources.store;
        let (before, after) = futures::try_join!(
            store.episodes_by_time(group, Some(center.valid_at), WINDOW),
            store.episodes_after(group, center.valid_at, WINDOW),
        )?;
        let mut around = before;
        around.extend(after);
        around.sort_by_key(|e| (e.valid_at, e.created_at, e.uuid));
        around.dedup_by_key(|e| e.uuid);
        let Some(at) = around.iter().position(|e| e.uuid == center.uuid) else {
            return Ok(vec![turn(center.clone())]);
        };
        let from = at.saturating_sub(n);
        let to = (at + n + 1).min(around.len());
        Ok(around.drain(from..to).map(turn).collect())
    }
}

fn turn(e: Episode) -> Turn {
    Turn {
        uuid: e.uuid,
        name: e.name,
        content: e.content,
        valid_at: e.valid_at,
    }
}
