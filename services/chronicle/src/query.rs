//! The query role: hybrid search, fact listings and timelines over the
//! projected graph. Candidates come from the indices (BM25, cosine) and the
//! store (BFS); records are loaded from the store, filtered (current facts
//! only unless asked otherwise) and ranked by the engine's rerankers.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use chronicle_engine::search::{
    self, Channel, RerankerKind, Scope, SearchConfig, SearchError, SearchFilters, by_mentions,
    by_node_distance, mmr, rrf,
};
use chronicle_engine::temporal;
use chronicle_index::{DocKind, IndexError};
use chronicle_metrics::METRICS;
use chronicle_model::{Entity, Fact, GroupId, Timestamp, normalize_name};
use chronicle_store::StoreError;
use serde::Serialize;
use thiserror::Error;
use uuid::Uuid;

use crate::node::Node;

/// Why a query failed.
#[derive(Debug, Error)]
pub enum QueryError {
    /// The request is invalid (the caller can fix it).
    #[error(transparent)]
    Invalid(#[from] SearchError),
    /// A named entity does not exist in the group.
    #[error("no entity named `{0}` in this group")]
    UnknownEntity(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The indices failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A model call failed.
    #[error(transparent)]
    Model(#[from] chronicle_engine::ports::LlmError),
}

impl QueryError {
    /// Whether the caller caused it (HTTP 4xx).
    pub fn is_client_error(&self) -> bool {
        matches!(self, QueryError::Invalid(_) | QueryError::UnknownEntity(_))
    }
}

/// A search request.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    /// Free text.
    pub query: String,
    /// Recipe name (for metrics) — `custom` for an explicit configuration.
    pub recipe: String,
    /// What to search and how to rank.
    pub config: SearchConfig,
    /// What results may contain.
    pub filters: SearchFilters,
    /// The center entity for BFS and node distance.
    pub center: Option<Uuid>,
}

impl SearchRequest {
    /// A request for a named recipe.
    pub fn recipe(query: &str, recipe: &str, limit: usize) -> Result<Self, QueryError> {
        let mut config =
            search::recipe(recipe).ok_or_else(|| SearchError::UnknownRecipe(recipe.to_owned()))?;
        config.limit = limit;
        Ok(SearchRequest {
            query: query.to_owned(),
            recipe: recipe.to_owned(),
            config,
            filters: SearchFilters::default(),
            center: None,
        })
    }
}

/// An episode that asserted a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// Episode id.
    pub uuid: Uuid,
    /// Episode name.
    pub name: String,
}

/// One result, best first in [`SearchResults`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResultItem {
    /// fact, entity, episode or community.
    pub kind: Scope,
    /// Its id.
    pub uuid: Uuid,
    /// Its score under the recipe's reranker.
    pub score: f32,
    /// Relation (facts) or name (entities, communities, episodes).
    pub name: String,
    /// The fact sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fact: Option<String>,
    /// Source entity name (facts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Target entity name (facts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Summary (entities, communities).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Content (episodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Labels (entities).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Valid-time start (facts; episodes: reference time).
    pub valid_at: Option<Timestamp>,
    /// Valid-time end (facts).
    pub invalid_at: Option<Timestamp>,
    /// Transaction time it was recorded.
    pub created_at: Timestamp,
    /// Transaction time it was invalidated (facts).
    pub expired_at: Option<Timestamp>,
    /// Episodes that assert it (facts), mention it (entities), or itself (episodes).
    pub episodes: Vec<Provenance>,
    /// Mixed search: the matching facts extracted from this episode, best
    /// first (they travel with their turn and cost no result of their own).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<SupportingFact>,
    /// Mixed search: the neighbouring turns around this episode, in order,
    /// this one included; names say which turns the result spans.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<Turn>,
}

/// A fact as it supports an episode result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SupportingFact {
    /// Its id.
    pub uuid: Uuid,
    /// The fact sentence.
    pub fact: String,
    /// Valid-time start.
    pub valid_at: Option<Timestamp>,
    /// Valid-time end.
    pub invalid_at: Option<Timestamp>,
    /// Transaction time it was invalidated, if it was.
    pub expired_at: Option<Timestamp>,
}

/// One turn of an episode result's context.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Turn {
    /// Episode id.
    pub uuid: Uuid,
    /// Episode name.
    pub name: String,
    /// Its content.
    pub content: String,
    /// Its reference time.
    pub valid_at: Timestamp,
}

/// Search results.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SearchResults {
    /// Best first.
    pub results: Vec<ResultItem>,
}

fn doc_kind(scope: Scope) -> DocKind {
    match scope {
        Scope::Fact => DocKind::Fact,
        Scope::Entity => DocKind::Entity,
        Scope::Episode => DocKind::Episode,
        Scope::Community => DocKind::Community,
    }
}

/// Loaded and admitted candidates of one scope.
enum Loaded {
    Fact(Fact),
    Entity(Entity),
    Episode(chronicle_model::Episode),
    Community(chronicle_model::Community),
}

impl Loaded {
    fn vector(&self) -> Option<&[f32]> {
        match self {
            Loaded::Fact(f) => f.fact_embedding.as_deref(),
            Loaded::Entity(e) => e.name_embedding.as_deref(),
            Loaded::Community(c) => c.name_embedding.as_deref(),
            Loaded::Episode(_) => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Loaded::Fact(f) => f.fact.clone(),
            Loaded::Entity(e) => format!("{}: {}", e.name, e.summary),
            Loaded::Episode(e) => e.content.clone(),
            Loaded::Community(c) => format!("{}: {}", c.name, c.summary),
        }
    }
}

/// The query role.
pub struct Query<'n> {
    node: &'n Node,
    now: Timestamp,
}

impl<'n> Query<'n> {
    /// Queries at the current wall-clock time.
    pub fn new(node: &'n Node) -> Self {
        Self::at(node, now())
    }

    /// Queries as if it were `now` (what "current" means).
    pub fn at(node: &'n Node, now: Timestamp) -> Self {
        Query { node, now }
    }

    /// Looks an entity up by name (exact normalized name).
    pub async fn entity_named(&self, group: &GroupId, name: &str) -> Result<Entity, QueryError> {
        let mut found = self
            .node
            .store
            .entities_by_name(group, &normalize_name(name))
            .await?;
        found.sort_by_key(|e| (e.created_at, e.uuid));
        found
            .into_iter()
            .next()
            .ok_or_else(|| QueryError::UnknownEntity(name.to_owned()))
    }

    /// The group's episodes with `valid_at <= before` (all when `None`),
    /// newest first, at most `n`, as callers see them (no embeddings).
    pub async fn recent_episodes(
        &self,
        group: &GroupId,
        before: Option<Timestamp>,
        n: usize,
    ) -> Result<Vec<chronicle_model::Episode>, QueryError> {
        let mut episodes = self.node.store.episodes_by_time(group, before, n).await?;
        for e in &mut episodes {
            e.content_embedding = None;
        }
        Ok(episodes)
    }

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
                .node
                .decider
                .embedder()
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
            if scope_config.reranker == RerankerKind::CrossEncoder && self.node.reranker.is_none() {
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
                    .node
                    .index
                    .text_search(group, &kinds, &request.query, fetch)?;
                exhausted &= hits.len() < fetch;
                lists.push(hits.into_iter().map(|h| h.uuid).collect());
            }
            if sc.channels.contains(&Channel::Cosine)
                && let Some(v) = query_vector
            {
                let hits = self.node.index.vector_search(group, &kinds, v, fetch)?;
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
            let mut loaded: BTreeMap<Uuid, Loaded> = BTreeMap::new();
            let candidates: BTreeSet<Uuid> = lists.iter().flatten().copied().collect();
            for u in candidates {
                if let Some(x) = self.load(group, scope, u, &request.filters).await? {
                    loaded.insert(u, x);
                }
            }
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
                                .node
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
                        .node
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
            let mut out = Vec::new();
            for (u, score) in ranked.into_iter().take(limit) {
                if let Some(x) = loaded.remove(&u) {
                    out.push(self.item(group, x, score).await?);
                }
            }
            return Ok(out);
        }
    }

    /// The mixed list (see [`SearchConfig::mixed`]): episodes by their own
    /// channels and by the votes of the facts extracted from them.
    async fn search_mixed(
        &self,
        group: &GroupId,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
    ) -> Result<Vec<ResultItem>, QueryError> {
        let config = &request.config;
        let limit = config.limit.max(1);
        let fetch = (limit * 5).max(50);
        let text = request.query.trim();
        let channel_lists = |sc: Option<&search::ScopeConfig>, kind: DocKind| {
            let mut lists: Vec<Vec<Uuid>> = Vec::new();
            let Some(sc) = sc else {
                return Ok::<_, QueryError>(lists);
            };
            if sc.channels.contains(&Channel::Bm25) && !text.is_empty() {
                let hits = self.node.index.text_search(group, &[kind], text, fetch)?;
                lists.push(hits.into_iter().map(|h| h.uuid).collect());
            }
            if sc.channels.contains(&Channel::Cosine)
                && let Some(v) = query_vector
            {
                let hits = self.node.index.vector_search(group, &[kind], v, fetch)?;
                lists.push(hits.into_iter().map(|h| h.uuid).collect());
            }
            Ok(lists)
        };
        let episode_lists = channel_lists(config.episodes.as_ref(), DocKind::Episode)?;
        let fact_lists = channel_lists(config.facts.as_ref(), DocKind::Fact)?;

        // Facts that pass the filters, and the order they rank in.
        let mut facts: BTreeMap<Uuid, Fact> = BTreeMap::new();
        for u in fact_lists
            .iter()
            .flatten()
            .copied()
            .collect::<BTreeSet<_>>()
        {
            if let Some(Loaded::Fact(f)) =
                self.load(group, Scope::Fact, u, &request.filters).await?
            {
                facts.insert(u, f);
            }
        }
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
        let mut weighted: Vec<(&[Uuid], f32)> =
            episode_lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
        weighted.extend(
            vote_lists
                .iter()
                .map(|l| (l.as_slice(), search::FACT_VOTE_WEIGHT)),
        );
        let mut fused = search::weighted_rrf(&weighted, search::MIXED_RRF_K);

        // Candidates load once: for the time channel and for the results.
        let mut episodes: BTreeMap<Uuid, Option<chronicle_model::Episode>> = BTreeMap::new();
        if let Some(period) = temporal::period_in(text, self.now) {
            for (u, _) in fused.iter().take(fetch) {
                let e = self.load_episode(group, *u, &request.filters).await?;
                episodes.insert(*u, e);
            }
            let timed = search::in_period(&fused[..fused.len().min(fetch)], &period, |u| {
                episodes.get(u).and_then(|e| e.as_ref()).map(|e| e.valid_at)
            });
            weighted.push((timed.as_slice(), search::PERIOD_WEIGHT));
            fused = search::weighted_rrf(&weighted, search::MIXED_RRF_K);
        }

        let mut out = Vec::new();
        for (u, score) in fused {
            if out.len() >= limit {
                break;
            }
            let e = match episodes.remove(&u) {
                Some(e) => e,
                None => self.load_episode(group, u, &request.filters).await?,
            };
            let Some(e) = e else {
                continue;
            };
            let context = if config.context_turns > 0 {
                self.turns_around(group, &e, config.context_turns).await?
            } else {
                Vec::new()
            };
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

    /// A ready-to-paste memory block for `query` within `max_chars`: the
    /// matching facts (valid at `as_of`, default now) with their validity
    /// windows, then the turns that support them, best first, each once.
    pub async fn context(
        &self,
        group: &GroupId,
        query: &str,
        max_chars: usize,
        as_of: Option<Timestamp>,
    ) -> Result<MemoryContext, QueryError> {
        let mut request = SearchRequest::recipe(query, search::MEMORY_RECIPE, CONTEXT_RESULTS)?;
        request.filters.as_of = as_of;
        let results = self.search(group, &request).await?.results;
        let mut out = MemoryContext::default();
        let (mut facts_text, mut turns_text) = (String::new(), String::new());
        let mut seen_facts = BTreeSet::new();
        let mut seen_turns = BTreeSet::new();
        let fits = |a: &str, b: &str, line: &str| a.len() + b.len() + line.len() + 32 <= max_chars;
        for r in &results {
            for f in &r.facts {
                let line = format!("- {} ({})\n", f.fact, window(f.valid_at, f.invalid_at));
                if seen_facts.insert(f.uuid) && fits(&facts_text, &turns_text, &line) {
                    facts_text.push_str(&line);
                    out.facts.push(f.clone());
                }
            }
            let turns = if r.context.is_empty() {
                r.content
                    .clone()
                    .map(|content| Turn {
                        uuid: r.uuid,
                        name: r.name.clone(),
                        content,
                        valid_at: r.valid_at.unwrap_or(r.created_at),
                    })
                    .into_iter()
                    .collect()
            } else {
                r.context.clone()
            };
            let mut block = String::new();
            let mut taken = Vec::new();
            for t in turns.into_iter().filter(|t| !seen_turns.contains(&t.uuid)) {
                block.push_str(&format!("[{} {}] {}\n", t.name, t.valid_at, t.content));
                taken.push(t);
            }
            if taken.is_empty() || !fits(&facts_text, &turns_text, &block) {
                continue;
            }
            turns_text.push_str(&block);
            turns_text.push('\n');
            seen_turns.extend(taken.iter().map(|t| t.uuid));
            out.turns.extend(taken);
        }
        if !facts_text.is_empty() {
            out.context.push_str("Facts (valid from – until):\n");
            out.context.push_str(&facts_text);
            out.context.push('\n');
        }
        if !turns_text.is_empty() {
            out.context.push_str("What was said:\n");
            out.context.push_str(&turns_text);
        }
        Ok(out)
    }

    /// The `n` turns before and after an episode in the group's order
    /// (reference time, then log order), the episode itself included. Turns
    /// are looked up among the episodes at or before its reference time
    /// (a conversation's session shares one), so later turns come only from
    /// the same reference time.
    async fn turns_around(
        &self,
        group: &GroupId,
        center: &chronicle_model::Episode,
        n: usize,
    ) -> Result<Vec<Turn>, QueryError> {
        // Enough for a session's turns that share one reference time.
        const WINDOW: usize = 64;
        let mut around = self
            .node
            .store
            .episodes_by_time(group, Some(center.valid_at), WINDOW)
            .await?;
        around.sort_by_key(|e| (e.valid_at, e.created_at, e.uuid));
        let Some(at) = around.iter().position(|e| e.uuid == center.uuid) else {
            return Ok(vec![turn(center.clone())]);
        };
        let from = at.saturating_sub(n);
        let to = (at + n + 1).min(around.len());
        Ok(around.drain(from..to).map(turn).collect())
    }

    /// Loads an episode candidate and applies the filters.
    async fn load_episode(
        &self,
        group: &GroupId,
        uuid: Uuid,
        filters: &SearchFilters,
    ) -> Result<Option<chronicle_model::Episode>, QueryError> {
        Ok(
            match self.load(group, Scope::Episode, uuid, filters).await? {
                Some(Loaded::Episode(e)) => Some(e),
                _ => None,
            },
        )
    }

    /// Loads a candidate and applies the filters; `None` when filtered out or gone.
    async fn load(
        &self,
        group: &GroupId,
        scope: Scope,
        u: Uuid,
        filters: &SearchFilters,
    ) -> Result<Option<Loaded>, QueryError> {
        let store = &self.node.store;
        Ok(match scope {
            Scope::Fact => {
                let Some(f) = store.fact(group, u).await? else {
                    return Ok(None);
                };
                let mut labels = Vec::new();
                if filters.node_labels.is_some() {
                    for end in [f.source_node_uuid, f.target_node_uuid] {
                        labels.push(
                            store
                                .entity(group, end)
                                .await?
                                .map(|e| e.labels)
                                .unwrap_or_default(),
                        );
                    }
                }
                let label_refs: Vec<&[String]> = labels.iter().map(Vec::as_slice).collect();
                filters
                    .admit_fact(&f, &label_refs, self.now)
                    .map(Loaded::Fact)
            }
            Scope::Entity => store
                .entity(group, u)
                .await?
                .filter(|e| filters.admit_entity(e))
                .map(Loaded::Entity),
            Scope::Episode => store
                .episode(group, u)
                .await?
                .filter(|e| filters.admit_episode(e))
                .map(Loaded::Episode),
            Scope::Community => store
                .community(group, u)
                .await?
                .filter(|c| filters.known_at.is_none_or(|t| c.created_at <= t))
                .map(Loaded::Community),
        })
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
            self.node
                .index
                .text_search(group, &[DocKind::Entity], &request.query, 3)?
                .into_iter()
                .map(|h| h.uuid)
                .collect::<Vec<_>>(),
        ];
        if let Some(v) = query_vector {
            lists.push(
                self.node
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
            for n in self.node.store.neighbours(group, e).await? {
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

    async fn item(&self, group: &GroupId, x: Loaded, score: f32) -> Result<ResultItem, QueryError> {
        let store = &self.node.store;
        let provenance = |ids: Vec<Uuid>| async move {
            let mut out = Vec::new();
            for u in ids {
                if let Some(e) = store.episode(group, u).await? {
                    out.push(Provenance {
                        uuid: u,
                        name: e.name,
                    });
                }
            }
            Ok::<_, QueryError>(out)
        };
        let name_of = |u: Uuid| async move {
            Ok::<_, QueryError>(store.entity(group, u).await?.map(|e| e.name))
        };
        Ok(match x {
            Loaded::Fact(f) => ResultItem {
                kind: Scope::Fact,
                uuid: f.uuid,
                score,
                name: f.name.clone(),
                source: name_of(f.source_node_uuid).await?,
                target: name_of(f.target_node_uuid).await?,
                fact: Some(f.fact.clone()),
                summary: None,
                content: None,
                labels: Vec::new(),
                valid_at: f.valid_at,
                invalid_at: f.invalid_at,
                created_at: f.created_at,
                expired_at: f.expired_at,
                episodes: provenance(f.episodes.clone()).await?,
                facts: Vec::new(),
                context: Vec::new(),
            },
            Loaded::Entity(e) => {
                let mut mentioning = store.mentioning_episodes(group, e.uuid).await?;
                mentioning.truncate(10);
                ResultItem {
                    kind: Scope::Entity,
                    uuid: e.uuid,
                    score,
                    name: e.name.clone(),
                    fact: None,
                    source: None,
                    target: None,
                    summary: Some(e.summary.clone()),
                    content: None,
                    labels: e.labels.clone(),
                    valid_at: None,
                    invalid_at: None,
                    created_at: e.created_at,
                    expired_at: None,
                    episodes: provenance(mentioning).await?,
                    facts: Vec::new(),
                    context: Vec::new(),
                }
            }
            Loaded::Episode(e) => ResultItem {
                kind: Scope::Episode,
                uuid: e.uuid,
                score,
                name: e.name.clone(),
                fact: None,
                source: None,
                target: None,
                summary: None,
                content: Some(e.content.clone()),
                labels: Vec::new(),
                valid_at: Some(e.valid_at),
                invalid_at: None,
                created_at: e.created_at,
                expired_at: None,
                episodes: vec![Provenance {
                    uuid: e.uuid,
                    name: e.name,
                }],
                facts: Vec::new(),
                context: Vec::new(),
            },
            Loaded::Community(c) => ResultItem {
                kind: Scope::Community,
                uuid: c.uuid,
                score,
                name: c.name.clone(),
                fact: None,
                source: None,
                target: None,
                summary: Some(c.summary.clone()),
                content: None,
                labels: Vec::new(),
                valid_at: None,
                invalid_at: None,
                created_at: c.created_at,
                expired_at: None,
                episodes: Vec::new(),
                facts: Vec::new(),
                context: Vec::new(),
            },
        })
    }

    /// Facts of a group (or of one entity), filtered like search, ordered by
    /// valid time then creation.
    pub async fn facts(
        &self,
        group: &GroupId,
        entity: Option<&str>,
        filters: &SearchFilters,
    ) -> Result<Vec<ResultItem>, QueryError> {
        let entity = match entity {
            Some(name) => Some(self.entity_named(group, name).await?.uuid),
            None => None,
        };
        Ok(self
            .facts_limited(group, entity, filters, usize::MAX)
            .await?
            .0)
    }

    /// Facts of a group, or of one entity (by id), filtered like search and
    /// ordered by valid time then creation: the first `limit`, and whether
    /// more matched (only those returned are loaded in full).
    pub async fn facts_limited(
        &self,
        group: &GroupId,
        entity: Option<Uuid>,
        filters: &SearchFilters,
        limit: usize,
    ) -> Result<(Vec<ResultItem>, bool), QueryError> {
        let facts = match entity {
            Some(uuid) => self.node.store.facts_of_entity(group, uuid).await?,
            None => self.node.store.facts(group).await?,
        };
        let mut admitted: Vec<Fact> = facts
            .iter()
            .filter_map(|f| filters.admit_fact(f, &[], self.now))
            .collect();
        admitted.sort_by_key(|f| (f.valid_at, f.created_at, f.uuid));
        let truncated = admitted.len() > limit;
        admitted.truncate(limit);
        let mut out = Vec::with_capacity(admitted.len());
        for f in admitted {
            out.push(self.item(group, Loaded::Fact(f), 1.0).await?);
        }
        Ok((out, truncated))
    }

    /// Every fact about an entity over time, history included.
    pub async fn timeline(
        &self,
        group: &GroupId,
        entity: &str,
    ) -> Result<(Entity, Vec<ResultItem>), QueryError> {
        let e = self.entity_named(group, entity).await?;
        let filters = SearchFilters {
            include_history: true,
            ..Default::default()
        };
        let items = self.facts(group, Some(entity), &filters).await?;
        Ok((e, items))
    }

    /// What episodes produced (graphiti's `get_nodes_and_edges_by_episode`):
    /// the entities they mention and the facts they created, restated or
    /// invalidated (whatever their validity now), each once, in the order
    /// the episodes list them. Episodes not in the group's graph (unknown,
    /// not yet projected, retracted) contribute nothing and are left out
    /// of [`EpisodeProducts::episodes`].
    pub async fn produced_by(
        &self,
        group: &GroupId,
        episodes: &[Uuid],
    ) -> Result<EpisodeProducts, QueryError> {
        let store = &self.node.store;
        let mut out = EpisodeProducts::default();
        let (mut entity_ids, mut fact_ids) = (Vec::new(), Vec::new());
        let (mut seen_entities, mut seen_facts) = (BTreeSet::new(), BTreeSet::new());
        for &u in episodes {
            let Some(episode) = store.episode(group, u).await? else {
                continue;
            };
            out.episodes.push(u);
            for e in store.mentions(group, u).await? {
                if seen_entities.insert(e) {
                    entity_ids.push(e);
                }
            }
            for f in episode.entity_edges {
                if seen_facts.insert(f) {
                    fact_ids.push(f);
                }
            }
        }
        for u in entity_ids {
            if let Some(e) = store.entity(group, u).await? {
                out.entities
                    .push(self.item(group, Loaded::Entity(e), 1.0).await?);
            }
        }
        for u in fact_ids {
            if let Some(f) = store.fact(group, u).await? {
                out.facts
                    .push(self.item(group, Loaded::Fact(f), 1.0).await?);
            }
        }
        Ok(out)
    }
}

/// What episodes produced; see [`Query::produced_by`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EpisodeProducts {
    /// The episodes found in the group's graph, of those asked for.
    pub episodes: Vec<Uuid>,
    /// Entities they mention.
    pub entities: Vec<ResultItem>,
    /// Facts they created, restated or invalidated.
    pub facts: Vec<ResultItem>,
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

/// Default budget of a context block, in characters (about 1,000 tokens).
pub const DEFAULT_CONTEXT_CHARS: usize = 4_000;

/// Results a context block draws from.
const CONTEXT_RESULTS: usize = 10;

/// A context block; see [`Query::context`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryContext {
    /// Ready to paste into a prompt.
    pub context: String,
    /// The facts it states.
    pub facts: Vec<SupportingFact>,
    /// The turns it quotes, in the order they appear.
    pub turns: Vec<Turn>,
}

/// A validity window as people read it.
fn window(from: Option<Timestamp>, until: Option<Timestamp>) -> String {
    let from = from.map_or_else(|| "unknown".to_owned(), |t| t.to_string());
    let until = until.map_or_else(|| "present".to_owned(), |t| t.to_string());
    format!("{from} – {until}")
}

fn turn(e: chronicle_model::Episode) -> Turn {
    Turn {
        uuid: e.uuid,
        name: e.name,
        content: e.content,
        valid_at: e.valid_at,
    }
}

/// A community as read back: its members by id and name (no embedding).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommunityView {
    /// Its id.
    pub uuid: Uuid,
    /// Its name (its most central members).
    pub name: String,
    /// What its members have in common.
    pub summary: String,
    /// Its members.
    pub members: Vec<Member>,
    /// Transaction time it was first built.
    pub created_at: Timestamp,
}

/// An entity of a community, or an episode of a saga, by id and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    /// Its id.
    pub uuid: Uuid,
    /// Its name (empty when it no longer exists).
    pub name: String,
}

/// A saga as read back.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SagaView {
    /// Its id (derived from the group and the name).
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// The summary of the episodes absorbed so far.
    pub summary: String,
    /// Reference time of the newest episode the summary absorbed.
    pub last_summarized_episode_valid_at: Option<Timestamp>,
    /// Its episodes in link order (`HAS_EPISODE`; consecutive ones are `NEXT_EPISODE`).
    pub episodes: Vec<SagaEpisode>,
    /// Transaction time it was first linked.
    pub created_at: Timestamp,
}

/// One episode of a saga.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SagaEpisode {
    /// Its id.
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// Its reference time.
    pub valid_at: Timestamp,
}

impl Query<'_> {
    /// The group's communities, largest first (then by name).
    pub async fn communities(&self, group: &GroupId) -> Result<Vec<CommunityView>, QueryError> {
        let store = &self.node.store;
        let mut out = Vec::new();
        for c in store.communities(group).await? {
            let mut members = Vec::with_capacity(c.members.len());
            for m in &c.members {
                let name = store.entity(group, *m).await?.map(|e| e.name);
                members.push(Member {
                    uuid: *m,
                    name: name.unwrap_or_default(),
                });
            }
            out.push(CommunityView {
                uuid: c.uuid,
                name: c.name,
                summary: c.summary,
                members,
                created_at: c.created_at,
            });
        }
        out.sort_by(|a, b| {
            b.members
                .len()
                .cmp(&a.members.len())
                .then_with(|| a.name.cmp(&b.name))
                .then(a.uuid.cmp(&b.uuid))
        });
        Ok(out)
    }

    /// A saga by name; `None` when the group has none of that name.
    pub async fn saga(&self, group: &GroupId, name: &str) -> Result<Option<SagaView>, QueryError> {
        let store = &self.node.store;
        let uuid =
            chronicle_model::derive_named_id(group.as_str(), chronicle_model::IdKind::Saga, name);
        let Some(saga) = store.saga(group, uuid).await? else {
            return Ok(None);
        };
        let mut episodes = Vec::with_capacity(saga.episodes.len());
        for u in &saga.episodes {
            if let Some(e) = store.episode(group, *u).await? {
                episodes.push(SagaEpisode {
                    uuid: e.uuid,
                    name: e.name,
                    valid_at: e.valid_at,
                });
            }
        }
        Ok(Some(SagaView {
            uuid: saga.uuid,
            name: saga.name,
            summary: saga.summary,
            last_summarized_episode_valid_at: saga.last_summarized_episode_valid_at,
            episodes,
            created_at: saga.created_at,
        }))
    }
}

/// The wall clock as a timestamp.
pub fn now() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now()).unwrap_or(Timestamp::EPOCH)
}
