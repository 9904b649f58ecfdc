//! One scope at a time (graphiti's recipes): per-scope channels (BM25,
//! cosine, BFS), fused by RRF, then the scope's reranker.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use chronicle_engine::search::{
    self, Channel, RerankerKind, Scope, SearchError, by_mentions, by_node_distance, mmr, rrf,
};
use chronicle_index::DocKind;
use chronicle_metrics::METRICS;
use chronicle_model::GroupId;
use futures::{StreamExt, TryStreamExt};
use uuid::Uuid;

use crate::load::{LOAD_CONCURRENCY, Loaded};
use crate::results::{ResultItem, SearchRequest, SearchResults};
use crate::{Query, QueryError};

fn doc_kind(scope: Scope) -> DocKind {
    match scope {
        Scope::Fact => DocKind::Fact,
        Scope::Entity => DocKind::Entity,
        Scope::Episode => DocKind::Episode,
        Scope::Community => DocKind::Community,
    }
}

impl Query<'_> {
    /// Runs a search.
    pub async fn search(
        &self,
        group: &GroupId,
        request: &SearchRequest,
    ) -> Result<SearchResults, QueryError> {
        let started = Instant::now();
        let config = &request.config;
        let query_vector = if config.needs_query_vector() && !request.query.trim().is_empty() {
            let mut v = self
                .sources
                .embedder
                .embed(std::slice::from_ref(&request.query))
                .await?;
            v.pop()
        } else {
            None
        };
        let mut results = Vec::new();
        let scopes = if config.mixed {
            results = self
                .search_mixed(group, request, query_vector.as_deref())
                .await?;
            Vec::new()
        } else {
            config.scopes()
        };
        for (scope, scope_config) in scopes {
            if scope_config.reranker == RerankerKind::CrossEncoder
                && self.sources.reranker.is_none()
            {
                return Err(SearchError::NoCrossEncoder.into());
            }
            if scope_config.reranker == RerankerKind::NodeDistance && request.center.is_none() {
                return Err(SearchError::NoCenter.into());
            }
            results.extend(
                self.search_scope(group, request, scope, scope_config, query_vector.as_deref())
                    .await?,
            );
        }
        results.sort_by(|a, b| b.score.total_cmp(&a.score));
        METRICS
            .search_duration
            .with_label_values(&[&request.recipe])
            .observe(started.elapsed().as_secs_f64());
        Ok(SearchResults { results })
    }

    async fn search_scope(
        &self,
        group: &GroupId,
        request: &SearchRequest,
        scope: Scope,
        sc: &search::ScopeConfig,
        query_vector: Option<&[f32]>,
    ) -> Result<Vec<ResultItem>, QueryError> {
        let limit = request.config.limit.max(1);
        let mut fetch = (limit * 4).max(20);
        loop {
            let mut lists: Vec<Vec<Uuid>> = Vec::new();
            let mut exhausted = true;
            let kinds = [doc_kind(scope)];
            if sc.channels.contains(&Channel::Bm25) && !request.query.trim().is_empty() {
                let hits = self
                    .sources
                    .index
                    .text_search(group, &kinds, &request.query, fetch)?;
                exhausted &= hits.len() < fetch;
                lists.push(hits.into_iter().map(|h| h.uuid).collect());
            }
            if sc.channels.contains(&Channel::Cosine)
                && let Some(v) = query_vector
            {
                let hits = self.sources.index.vector_search(group, &kinds, v, fetch)?;
                exhausted &= hits.len() < fetch;
                lists.push(hits.into_iter().map(|h| h.uuid).collect());
            }
            let hops = if sc.channels.contains(&Channel::Bfs)
                || sc.reranker == RerankerKind::NodeDistance
            {
                let origins = self.bfs_origins(group, request, query_vector).await?;
                Some(
                    self.bfs(group, &origins, request.config.bfs_max_depth)
                        .await?,
                )
            } else {
                None
            };
            if sc.channels.contains(&Channel::Bfs)
                && let Some(h) = &hops
            {
                lists.push(h.reached(scope));
            }
            // Load and filter every candidate once.
            let candidates: BTreeSet<Uuid> = lists.iter().flatten().copied().collect();
            let mut loaded = self
                .load_all(group, scope, candidates, &request.filters)
                .await?;
            let lists: Vec<Vec<Uuid>> = lists
                .into_iter()
                .map(|l| l.into_iter().filter(|u| loaded.contains_key(u)).collect())
                .collect();
            let fused = rrf(&lists, 1.0);
            if fused.len() < limit && !exhausted && fetch < 4096 {
                fetch *= 4;
                continue;
            }
            let ranked = match sc.reranker {
                RerankerKind::Rrf => fused,
                RerankerKind::Mmr => match query_vector {
                    Some(q) => {
                        let cands: Vec<(Uuid, Option<&[f32]>)> = fused
                            .iter()
                            .map(|(u, _)| (*u, loaded[u].vector()))
                            .collect();
                        mmr(q, &cands, request.config.mmr_lambda, limit)
                    }
                    None => fused,
                },
                RerankerKind::NodeDistance => {
                    let h = hops.as_ref().expect("computed above for node distance");
                    by_node_distance(&fused, &h.distance_of(scope, &loaded))
                }
                RerankerKind::EpisodeMentions => {
                    let mut counts = BTreeMap::new();
                    for (u, x) in &loaded {
                        let n = match x {
                            Loaded::Fact(f) => f.episodes.len(),
                            Loaded::Entity(e) => self
                                .sources
                                .store
                                .mentioning_episodes(group, e.uuid)
                                .await?
                                .len(),
                            Loaded::Community(c) => c.members.len(),
                            Loaded::Episode(_) => 0,
                        };
                        counts.insert(*u, n);
                    }
                    by_mentions(&fused, &counts)
                }
                RerankerKind::CrossEncoder => {
                    let top: Vec<(Uuid, f32)> = fused.into_iter().take(limit * 3).collect();
                    let texts: Vec<String> = top.iter().map(|(u, _)| loaded[u].text()).collect();
                    let reranker = self
                        .sources
                        .reranker
                        .as_ref()
                        .ok_or(SearchError::NoCrossEncoder)?;
                    let scores = reranker.rerank(&request.query, &texts).await?;
                    let mut scored: Vec<(Uuid, f32)> =
                        top.iter().map(|(u, _)| *u).zip(scores).collect();
                    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
                    scored
                }
            };
            // Results (their end names and provenance) read concurrently, in
            // rank order.
            let chosen: Vec<(Loaded, f32)> = ranked
                .into_iter()
                .take(limit)
                .filter_map(|(u, score)| loaded.remove(&u).map(|x| (x, score)))
                .collect();
            return futures::stream::iter(chosen)
                .map(|(x, score)| self.item(group, x, score))
                .buffered(LOAD_CONCURRENCY)
                .try_collect()
                .await;
        }
    }

    /// BFS origins: the center, or else the best entity matches of the query.
    async fn bfs_origins(
        &self,
        group: &GroupId,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
    ) -> Result<Vec<Uuid>, QueryError> {
        if let Some(c) = request.center {
            return Ok(vec![c]);
        }
        let mut lists = vec![
            self.sources
                .index
                .text_search(group, &[DocKind::Entity], &request.query, 3)?
                .into_iter()
                .map(|h| h.uuid)
                .collect::<Vec<_>>(),
        ];
        if let Some(v) = query_vector {
            lists.push(
                self.sources
                    .index
                    .vector_search(group, &[DocKind::Entity], v, 3)?
                    .into_iter()
                    .map(|h| h.uuid)
                    .collect(),
            );
        }
        Ok(rrf(&lists, 1.0)
            .into_iter()
            .take(3)
            .map(|(u, _)| u)
            .collect())
    }

    async fn bfs(
        &self,
        group: &GroupId,
        origins: &[Uuid],
        depth: usize,
    ) -> Result<Hops, QueryError> {
        let mut hops = Hops::default();
        let mut queue: VecDeque<(Uuid, usize)> = VecDeque::new();
        for o in origins {
            if hops.entities.insert(*o, 0).is_none() {
                hops.order_entities.push(*o);
                queue.push_back((*o, 0));
            }
        }
        while let Some((e, d)) = queue.pop_front() {
            if d >= depth {
                continue;
            }
            for n in self.sources.store.neighbours(group, e).await? {
                if let std::collections::btree_map::Entry::Vacant(v) = hops.facts.entry(n.fact) {
                    v.insert(d);
                    hops.order_facts.push(n.fact);
                }
                if let std::collections::btree_map::Entry::Vacant(v) = hops.entities.entry(n.entity)
                {
                    v.insert(d + 1);
                    hops.order_entities.push(n.entity);
                    queue.push_back((n.entity, d + 1));
                }
            }
        }
        Ok(hops)
    }
}

/// BFS reach: hop counts of entities and facts, in discovery order.
#[derive(Default)]
struct Hops {
    entities: BTreeMap<Uuid, usize>,
    facts: BTreeMap<Uuid, usize>,
    order_entities: Vec<Uuid>,
    order_facts: Vec<Uuid>,
}

impl Hops {
    fn reached(&self, scope: Scope) -> Vec<Uuid> {
        match scope {
            Scope::Fact => self.order_facts.clone(),
            Scope::Entity => self.order_entities.clone(),
            Scope::Episode | Scope::Community => Vec::new(),
        }
    }

    fn distance_of(&self, scope: Scope, loaded: &BTreeMap<Uuid, Loaded>) -> BTreeMap<Uuid, usize> {
        match scope {
            Scope::Fact => self.facts.clone(),
            Scope::Entity => self.entities.clone(),
            Scope::Community => loaded
                .iter()
                .filter_map(|(u, x)| match x {
                    Loaded::Community(c) => c
                        .members
                        .iter()
                        .filter_map(|m| self.entities.get(m))
                        .min()
                        .map(|h| (*u, *h)),
                    _ => None,
                })
                .collect(),
            Scope::Episode => BTreeMap::new(),
        }
    }
}
