//! Reads by name and by time: entities, fact listings and timelines, what
//! episodes produced, communities and sagas.

use std::collections::BTreeSet;

use chronicle_engine::search::SearchFilters;
use chronicle_model::{Entity, Episode, Fact, GroupId, Timestamp, normalize_name};
use uuid::Uuid;

use crate::load::Loaded;
use crate::results::{CommunityView, EpisodeProducts, Member, ResultItem, SagaEpisode, SagaView};
use crate::{Query, QueryError};

impl Query<'_> {
    /// Looks an entity up by name (exact normalized name).
    pub async fn entity_named(&self, group: &GroupId, name: &str) -> Result<Entity, QueryError> {
        let mut found = self
            .sources
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
    ) -> Result<Vec<Episode>, QueryError> {
        let mut episodes = self
            .sources
            .store
            .episodes_by_time(group, before, n)
            .await?;
        // What search keys an episode by is the index's business.
        for e in &mut episodes {
            e.content_embedding = None;
            e.preceding_turn = None;
        }
        Ok(episodes)
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
            Some(uuid) => self.sources.store.facts_of_entity(group, uuid).await?,
            None => self.sources.store.facts(group).await?,
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
        let store = &self.sources.store;
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

    /// The group's communities, largest first (then by name).
    pub async fn communities(&self, group: &GroupId) -> Result<Vec<CommunityView>, QueryError> {
        let store = &self.sources.store;
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
        let store = &self.sources.store;
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
