//! The fold's view of a write transaction: `GraphRecords` over redb tables.

use std::path::Path;

use chronicle_engine::GraphRecords;
use chronicle_model::{Community, Entity, Episode, Fact, Saga, embedding_to_bytes, normalize_name};
use redb::{ReadableMultimapTable, ReadableTable, Table, WriteTransaction};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{
    APPLIED, COMMUNITIES, EMBEDDINGS, ENTITIES, ENTITIES_BY_NAME, EPISODES, EPISODES_BY_TIME,
    FACTS, FACTS_BY_ENTITY, GROUPS, KIND_COMMUNITY, KIND_ENTITY, KIND_EPISODE, KIND_FACT, Key,
    MENTIONED_BY, MENTIONS, POSITIONS, SAGA_OF_EPISODE, SAGAS, TOTALS, err, from_json, to_json,
};
use crate::{StoreError, Totals, Touched};

/// Every table of a write transaction, opened once.
pub(super) struct Tables<'t> {
    pub(super) path: &'t Path,
    pub(super) positions: Table<'t, u32, u64>,
    pub(super) groups: Table<'t, &'static str, ()>,
    pub(super) applied: Table<'t, Key<'static>, ()>,
    pub(super) episodes: Table<'t, Key<'static>, &'static [u8]>,
    pub(super) episodes_by_time: Table<'t, (&'static str, i64, u128), ()>,
    pub(super) entities: Table<'t, Key<'static>, &'static [u8]>,
    pub(super) entities_by_name: Table<'t, (&'static str, &'static str, u128), ()>,
    pub(super) facts: Table<'t, Key<'static>, &'static [u8]>,
    pub(super) facts_by_entity: Table<'t, (&'static str, u128, u128), u128>,
    pub(super) embeddings: Table<'t, (&'static str, u8, u128), &'static [u8]>,
    pub(super) mentions: redb::MultimapTable<'t, Key<'static>, u128>,
    pub(super) mentioned_by: redb::MultimapTable<'t, Key<'static>, u128>,
    pub(super) sagas: Table<'t, Key<'static>, &'static [u8]>,
    pub(super) saga_of_episode: Table<'t, Key<'static>, u128>,
    pub(super) communities: Table<'t, Key<'static>, &'static [u8]>,
    pub(super) totals: Table<'t, &'static str, &'static [u8]>,
}

impl<'t> Tables<'t> {
    pub(super) fn open(txn: &'t WriteTransaction, path: &'t Path) -> Result<Self, StoreError> {
        let e = |x: redb::TableError| err(path, x);
        Ok(Tables {
            path,
            positions: txn.open_table(POSITIONS).map_err(e)?,
            groups: txn.open_table(GROUPS).map_err(e)?,
            applied: txn.open_table(APPLIED).map_err(e)?,
            episodes: txn.open_table(EPISODES).map_err(e)?,
            episodes_by_time: txn.open_table(EPISODES_BY_TIME).map_err(e)?,
            entities: txn.open_table(ENTITIES).map_err(e)?,
            entities_by_name: txn.open_table(ENTITIES_BY_NAME).map_err(e)?,
            facts: txn.open_table(FACTS).map_err(e)?,
            facts_by_entity: txn.open_table(FACTS_BY_ENTITY).map_err(e)?,
            embeddings: txn.open_table(EMBEDDINGS).map_err(e)?,
            mentions: txn.open_multimap_table(MENTIONS).map_err(e)?,
            mentioned_by: txn.open_multimap_table(MENTIONED_BY).map_err(e)?,
            sagas: txn.open_table(SAGAS).map_err(e)?,
            saga_of_episode: txn.open_table(SAGA_OF_EPISODE).map_err(e)?,
            communities: txn.open_table(COMMUNITIES).map_err(e)?,
            totals: txn.open_table(TOTALS).map_err(e)?,
        })
    }
}

/// One group's records inside a write transaction: the fold's view of redb.
///
/// `GraphRecords` cannot fail, so the first storage error is kept and every
/// later operation becomes a no-op; the caller aborts the transaction.
pub(super) struct TxnRecords<'a, 't> {
    pub(super) tables: &'a mut Tables<'t>,
    pub(super) group: &'a str,
    pub(super) touched: Touched,
    /// The group's totals, moved by every put and remove.
    pub(super) totals: Totals,
    pub(super) failure: Option<StoreError>,
}

impl TxnRecords<'_, '_> {
    fn ok<T: Default>(&mut self, r: Result<T, StoreError>) -> T {
        match r {
            Ok(v) => v,
            Err(e) => {
                self.failure.get_or_insert(e);
                T::default()
            }
        }
    }

    fn get_json<T: DeserializeOwned>(
        &self,
        table: &Table<'_, Key<'static>, &'static [u8]>,
        uuid: Uuid,
        what: &str,
    ) -> Result<Option<T>, StoreError> {
        match table
            .get((self.group, uuid.as_u128()))
            .map_err(|e| err(self.tables.path, e))?
        {
            Some(v) => from_json(v.value(), what).map(Some),
            None => Ok(None),
        }
    }

    fn put_embedding(
        &mut self,
        kind: u8,
        uuid: Uuid,
        v: Option<&Vec<f32>>,
    ) -> Result<(), StoreError> {
        if let Some(v) = v {
            self.tables
                .embeddings
                .insert(
                    (self.group, kind, uuid.as_u128()),
                    embedding_to_bytes(v).as_slice(),
                )
                .map_err(|e| err(self.tables.path, e))?;
        }
        Ok(())
    }

    fn drop_embedding(&mut self, kind: u8, uuid: Uuid) -> Result<(), StoreError> {
        self.tables
            .embeddings
            .remove((self.group, kind, uuid.as_u128()))
            .map_err(|e| err(self.tables.path, e))?;
        Ok(())
    }

    fn put_entity_now(&mut self, mut entity: Entity) -> Result<(), StoreError> {
        let old = self.remove_entity_index(entity.uuid)?;
        self.totals.entity(old.is_some(), true);
        let (g, u) = (self.group, entity.uuid.as_u128());
        let path = self.tables.path;
        self.put_embedding(KIND_ENTITY, entity.uuid, entity.name_embedding.as_ref())?;
        let name = normalize_name(&entity.name);
        self.tables
            .entities_by_name
            .insert((g, name.as_str(), u), ())
            .map_err(|e| err(path, e))?;
        entity.name_embedding = None;
        self.tables
            .entities
            .insert((g, u), to_json(&entity).as_slice())
            .map_err(|e| err(path, e))?;
        self.touched.entities.insert(entity.uuid);
        Ok(())
    }

    /// Removes an entity's name index entry (before a rename or removal).
    fn remove_entity_index(&mut self, uuid: Uuid) -> Result<Option<Entity>, StoreError> {
        let old: Option<Entity> = self.get_json(&self.tables.entities, uuid, "entity")?;
        if let Some(old) = &old {
            let name = normalize_name(&old.name);
            self.tables
                .entities_by_name
                .remove((self.group, name.as_str(), uuid.as_u128()))
                .map_err(|e| err(self.tables.path, e))?;
        }
        Ok(old)
    }

    fn put_fact_now(&mut self, mut fact: Fact) -> Result<(), StoreError> {
        let (g, u) = (self.group, fact.uuid.as_u128());
        let path = self.tables.path;
        self.put_embedding(KIND_FACT, fact.uuid, fact.fact_embedding.as_ref())?;
        let (s, t) = (
            fact.source_node_uuid.as_u128(),
            fact.target_node_uuid.as_u128(),
        );
        self.tables
            .facts_by_entity
            .insert((g, s, u), t)
            .map_err(|e| err(path, e))?;
        self.tables
            .facts_by_entity
            .insert((g, t, u), s)
            .map_err(|e| err(path, e))?;
        fact.fact_embedding = None;
        let was = match (self.tables.facts)
            .insert((g, u), to_json(&fact).as_slice())
            .map_err(|e| err(path, e))?
        {
            Some(old) => Some(from_json::<Fact>(old.value(), "fact")?.is_current()),
            None => None,
        };
        self.totals.fact(was, Some(fact.is_current()));
        self.touched.facts.insert(fact.uuid);
        Ok(())
    }

    fn remove_fact_now(&mut self, uuid: Uuid) -> Result<(), StoreError> {
        let old: Option<Fact> = self.get_json(&self.tables.facts, uuid, "fact")?;
        let (g, u) = (self.group, uuid.as_u128());
        let path = self.tables.path;
        if let Some(old) = old {
            self.totals.fact(Some(old.is_current()), None);
            for end in [old.source_node_uuid, old.target_node_uuid] {
                self.tables
                    .facts_by_entity
                    .remove((g, end.as_u128(), u))
                    .map_err(|e| err(path, e))?;
            }
            self.tables.facts.remove((g, u)).map_err(|e| err(path, e))?;
            self.drop_embedding(KIND_FACT, uuid)?;
            self.touched.facts.insert(uuid);
        }
        Ok(())
    }
}

impl GraphRecords for TxnRecords<'_, '_> {
    fn episode(&self, uuid: Uuid) -> Option<Episode> {
        self.get_json(&self.tables.episodes, uuid, "episode")
            .ok()
            .flatten()
    }

    fn entity(&self, uuid: Uuid) -> Option<Entity> {
        // Embeddings stay in their table; `put_entity` keeps them unless replaced.
        self.get_json(&self.tables.entities, uuid, "entity")
            .ok()
            .flatten()
    }

    fn fact(&self, uuid: Uuid) -> Option<Fact> {
        self.get_json(&self.tables.facts, uuid, "fact")
            .ok()
            .flatten()
    }

    fn saga(&self, uuid: Uuid) -> Option<Saga> {
        self.get_json(&self.tables.sagas, uuid, "saga")
            .ok()
            .flatten()
    }

    fn saga_of_episode(&self, episode: Uuid) -> Option<Uuid> {
        self.tables
            .saga_of_episode
            .get((self.group, episode.as_u128()))
            .ok()
            .flatten()
            .map(|v| Uuid::from_u128(v.value()))
    }

    fn community(&self, uuid: Uuid) -> Option<Community> {
        self.get_json(&self.tables.communities, uuid, "community")
            .ok()
            .flatten()
    }

    fn mentioned_entities(&self, episode: Uuid) -> Vec<Uuid> {
        let Ok(values) = self.tables.mentions.get((self.group, episode.as_u128())) else {
            return Vec::new();
        };
        values
            .filter_map(|v| v.ok())
            .map(|v| Uuid::from_u128(v.value()))
            .collect()
    }

    fn mentioning_episodes(&self, entity: Uuid) -> Vec<Uuid> {
        let Ok(values) = self.tables.mentioned_by.get((self.group, entity.as_u128())) else {
            return Vec::new();
        };
        values
            .filter_map(|v| v.ok())
            .map(|v| Uuid::from_u128(v.value()))
            .collect()
    }

    fn is_applied(&self, event_id: Uuid) -> bool {
        self.tables
            .applied
            .get((self.group, event_id.as_u128()))
            .map(|v| v.is_some())
            .unwrap_or(false)
    }

    fn put_episode(&mut self, mut episode: Episode) {
        let r = (|| {
            self.remove_episode_now(episode.uuid)?;
            let (g, u) = (self.group, episode.uuid.as_u128());
            let path = self.tables.path;
            self.put_embedding(
                KIND_EPISODE,
                episode.uuid,
                episode.content_embedding.as_ref(),
            )?;
            episode.content_embedding = None;
            self.tables
                .episodes_by_time
                .insert((g, episode.valid_at.as_micros(), u), ())
                .map_err(|e| err(path, e))?;
            self.tables
                .episodes
                .insert((g, u), to_json(&episode).as_slice())
                .map_err(|e| err(path, e))?;
            self.totals.episode(false, true);
            self.touched.episodes.insert(episode.uuid);
            Ok(())
        })();
        self.ok(r)
    }

    fn remove_episode(&mut self, uuid: Uuid) {
        let r = self.remove_episode_now(uuid);
        self.ok(r)
    }

    fn put_entity(&mut self, entity: Entity) {
        let r = self.put_entity_now(entity);
        self.ok(r)
    }

    fn remove_entity(&mut self, uuid: Uuid) {
        let r = (|| {
            if self.remove_entity_index(uuid)?.is_some() {
                self.tables
                    .entities
                    .remove((self.group, uuid.as_u128()))
                    .map_err(|e| err(self.tables.path, e))?;
                self.drop_embedding(KIND_ENTITY, uuid)?;
                self.totals.entity(true, false);
                self.touched.entities.insert(uuid);
            }
            Ok(())
        })();
        self.ok(r)
    }

    fn put_fact(&mut self, fact: Fact) {
        let r = self.put_fact_now(fact);
        self.ok(r)
    }

    fn remove_fact(&mut self, uuid: Uuid) {
        let r = self.remove_fact_now(uuid);
        self.ok(r)
    }

    fn put_saga(&mut self, saga: Saga) {
        let r = (|| {
            let (g, u) = (self.group, saga.uuid.as_u128());
            let path = self.tables.path;
            let old: Option<Saga> = self.get_json(&self.tables.sagas, saga.uuid, "saga")?;
            self.totals.saga(old.is_some(), true);
            for ep in old
                .iter()
                .flat_map(|o| o.episodes.iter())
                .filter(|e| !saga.episodes.contains(e))
            {
                self.tables
                    .saga_of_episode
                    .remove((g, ep.as_u128()))
                    .map_err(|e| err(path, e))?;
            }
            for ep in &saga.episodes {
                self.tables
                    .saga_of_episode
                    .insert((g, ep.as_u128()), u)
                    .map_err(|e| err(path, e))?;
            }
            self.tables
                .sagas
                .insert((g, u), to_json(&saga).as_slice())
                .map_err(|e| err(path, e))?;
            Ok(())
        })();
        self.ok(r)
    }

    fn put_community(&mut self, mut community: Community) {
        let r = (|| {
            let (g, u) = (self.group, community.uuid.as_u128());
            self.put_embedding(
                KIND_COMMUNITY,
                community.uuid,
                community.name_embedding.as_ref(),
            )?;
            community.name_embedding = None;
            let was = (self.tables.communities)
                .insert((g, u), to_json(&community).as_slice())
                .map_err(|e| err(self.tables.path, e))?
                .is_some();
            self.totals.community(was, true);
            self.touched.communities.insert(community.uuid);
            Ok(())
        })();
        self.ok(r)
    }

    fn remove_community(&mut self, uuid: Uuid) {
        let r = (|| {
            let was = (self.tables.communities)
                .remove((self.group, uuid.as_u128()))
                .map_err(|e| err(self.tables.path, e))?
                .is_some();
            self.totals.community(was, false);
            self.drop_embedding(KIND_COMMUNITY, uuid)?;
            self.touched.communities.insert(uuid);
            Ok(())
        })();
        self.ok(r)
    }

    fn add_mentions(&mut self, episode: Uuid, entities: &[Uuid]) {
        let r = (|| {
            let (g, ep) = (self.group, episode.as_u128());
            let path = self.tables.path;
            for e in entities {
                self.tables
                    .mentions
                    .insert((g, ep), e.as_u128())
                    .map_err(|x| err(path, x))?;
                self.tables
                    .mentioned_by
                    .insert((g, e.as_u128()), ep)
                    .map_err(|x| err(path, x))?;
                self.touched.entities.insert(*e);
            }
            Ok(())
        })();
        self.ok(r)
    }

    fn remove_mentions(&mut self, episode: Uuid) {
        let r = (|| {
            let (g, ep) = (self.group, episode.as_u128());
            let path = self.tables.path;
            let entities: Vec<u128> = self
                .tables
                .mentions
                .remove_all((g, ep))
                .map_err(|x| err(path, x))?
                .filter_map(|v| v.ok().map(|v| v.value()))
                .collect();
            for e in entities {
                self.tables
                    .mentioned_by
                    .remove((g, e), ep)
                    .map_err(|x| err(path, x))?;
                self.touched.entities.insert(Uuid::from_u128(e));
            }
            Ok(())
        })();
        self.ok(r)
    }

    fn mark_applied(&mut self, event_id: Uuid) {
        let r = self
            .tables
            .applied
            .insert((self.group, event_id.as_u128()), ())
            .map(|_| ())
            .map_err(|e| err(self.tables.path, e));
        self.ok(r)
    }
}

impl TxnRecords<'_, '_> {
    fn remove_episode_now(&mut self, uuid: Uuid) -> Result<(), StoreError> {
        let old: Option<Episode> = self.get_json(&self.tables.episodes, uuid, "episode")?;
        if let Some(old) = old {
            let (g, u) = (self.group, uuid.as_u128());
            let path = self.tables.path;
            self.tables
                .episodes_by_time
                .remove((g, old.valid_at.as_micros(), u))
                .map_err(|e| err(path, e))?;
            self.tables
                .episodes
                .remove((g, u))
                .map_err(|e| err(path, e))?;
            self.drop_embedding(KIND_EPISODE, uuid)?;
            self.totals.episode(true, false);
            self.touched.episodes.insert(uuid);
        }
        Ok(())
    }
}
