//! Loading candidates: each record read once, admitted by the filters, and
//! turned into the result a caller sees (provenance and end names attached).

use std::collections::BTreeMap;

use chronicle_engine::search::{Scope, SearchFilters};
use chronicle_model::{Entity, Episode, Fact, GroupId};
use futures::{StreamExt, TryStreamExt};
use uuid::Uuid;

use crate::results::{Provenance, ResultItem};
use crate::{Query, QueryError};

/// Candidate reads in flight at once: a remote store (ScyllaDB) answers
/// them in overlapping round trips; the embedded one answers each at once.
pub(crate) const LOAD_CONCURRENCY: usize = 32;

/// Loaded and admitted candidates of one scope.
pub(crate) enum Loaded {
    Fact(Fact),
    Entity(Entity),
    Episode(Episode),
    Community(chronicle_model::Community),
}

impl Loaded {
    pub(crate) fn vector(&self) -> Option<&[f32]> {
        match self {
            Loaded::Fact(f) => f.fact_embedding.as_deref(),
            Loaded::Entity(e) => e.name_embedding.as_deref(),
            Loaded::Community(c) => c.name_embedding.as_deref(),
            Loaded::Episode(_) => None,
        }
    }

    pub(crate) fn text(&self) -> String {
        match self {
            Loaded::Fact(f) => f.fact.clone(),
            Loaded::Entity(e) => format!("{}: {}", e.name, e.summary),
            Loaded::Episode(e) => e.content.clone(),
            Loaded::Community(c) => format!("{}: {}", c.name, c.summary),
        }
    }
}

impl Query<'_> {
    /// Loads an episode candidate and applies the filters.
    pub(crate) async fn load_episode(
        &self,
        group: &GroupId,
        uuid: Uuid,
        filters: &SearchFilters,
    ) -> Result<Option<Episode>, QueryError> {
        Ok(
            match self.load(group, Scope::Episode, uuid, filters).await? {
                Some(Loaded::Episode(e)) => Some(e),
                _ => None,
            },
        )
    }

    /// Loads candidates concurrently and applies the filters; those filtered
    /// out or gone are absent from the map.
    pub(crate) async fn load_all(
        &self,
        group: &GroupId,
        scope: Scope,
        uuids: impl IntoIterator<Item = Uuid>,
        filters: &SearchFilters,
    ) -> Result<BTreeMap<Uuid, Loaded>, QueryError> {
        futures::stream::iter(uuids)
            .map(|u| async move { Ok::<_, QueryError>((u, self.load(group, scope, u, filters).await?)) })
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_filter_map(|(u, x)| async move { Ok(x.map(|x| (u, x))) })
            .try_collect()
            .await
    }

    /// Loads episode candidates concurrently; each maps to `None` when
    /// filtered out or gone, so none is read twice.
    pub(crate) async fn load_episodes(
        &self,
        group: &GroupId,
        uuids: &[Uuid],
        filters: &SearchFilters,
    ) -> Result<BTreeMap<Uuid, Option<Episode>>, QueryError> {
        let mut loaded = self
            .load_all(group, Scope::Episode, uuids.iter().copied(), filters)
            .await?;
        Ok(uuids
            .iter()
            .map(|u| match loaded.remove(u) {
                Some(Loaded::Episode(e)) => (*u, Some(e)),
                _ => (*u, None),
            })
            .collect())
    }

    /// Loads a candidate and applies the filters; `None` when filtered out or gone.
    pub(crate) async fn load(
        &self,
        group: &GroupId,
        scope: Scope,
        u: Uuid,
        filters: &SearchFilters,
    ) -> Result<Option<Loaded>, QueryError> {
        let store = &self.sources.store;
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

    pub(crate) async fn item(
        &self,
        group: &GroupId,
        x: Loaded,
        score: f32,
    ) -> Result<ResultItem, QueryError> {
        let store = &self.sources.store;
        let provenance = |ids: Vec<Uuid>| async move {
            futures::stream::iter(ids)
                .map(|u| async move {
                    Ok::<_, QueryError>(store.episode(group, u).await?.map(|e| Provenance {
                        uuid: u,
                        name: e.name,
                    }))
                })
                .buffered(LOAD_CONCURRENCY)
                .try_filter_map(|p| async move { Ok(p) })
                .try_collect::<Vec<_>>()
                .await
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
}
