//! The embedded store: the projected graph in redb tables.
//!
//! Records are JSON without their embeddings; embeddings live as raw `f32`
//! bytes in their own table, so the frequent read-modify-writes of the fold
//! (provenance, invalidations, summaries) never copy vectors. Every table is
//! keyed by `(group, ...)`, so a group's records are contiguous and a lookup
//! can never reach another group.
//!
//! Applying records commits one write transaction holding the data and the
//! new positions. Commits between [`GraphStore::flush`] calls skip the fsync
//! (`Durability::None`): a crash rolls data and positions back together to
//! the last durable commit, and the projector re-applies from there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use chronicle_engine::GraphRecords;
use chronicle_engine::evolve::apply_batch;
use chronicle_model::{
    Community, Entity, Episode, EventBatch, Fact, GroupId, LogPosition, Saga, Timestamp,
    normalize_name,
};
use redb::{
    Database, Durability, MultimapTableDefinition, ReadableDatabase, ReadableMultimapTable,
    ReadableTable, Table, TableDefinition, WriteTransaction,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::{ApplyOutcome, Counts, GraphStore, Neighbour, Positions, StoreError, Touched};

type Key<'a> = (&'a str, u128);

const POSITIONS: TableDefinition<u32, u64> = TableDefinition::new("positions");
const GROUPS: TableDefinition<&str, ()> = TableDefinition::new("groups");
const APPLIED: TableDefinition<Key, ()> = TableDefinition::new("applied_events");
const EPISODES: TableDefinition<Key, &[u8]> = TableDefinition::new("episodes");
/// `(group, valid_at µs, episode)`: episodes by reference time.
const EPISODES_BY_TIME: TableDefinition<(&str, i64, u128), ()> =
    TableDefinition::new("episodes_by_time");
const ENTITIES: TableDefinition<Key, &[u8]> = TableDefinition::new("entities");
/// `(group, normalized name, entity)`.
const ENTITIES_BY_NAME: TableDefinition<(&str, &str, u128), ()> =
    TableDefinition::new("entities_by_name");
const FACTS: TableDefinition<Key, &[u8]> = TableDefinition::new("facts");
/// `(group, entity, fact) -> other end`: facts of an entity, and neighbours.
const FACTS_BY_ENTITY: TableDefinition<(&str, u128, u128), u128> =
    TableDefinition::new("facts_by_entity");
/// `(group, kind, id) -> f32 LE bytes`.
const EMBEDDINGS: TableDefinition<(&str, u8, u128), &[u8]> = TableDefinition::new("embeddings");
/// `(group, episode) -> entities`.
const MENTIONS: MultimapTableDefinition<Key, u128> = MultimapTableDefinition::new("mentions");
/// `(group, entity) -> episodes`.
const MENTIONED_BY: MultimapTableDefinition<Key, u128> =
    MultimapTableDefinition::new("mentioned_by");
const SAGAS: TableDefinition<Key, &[u8]> = TableDefinition::new("sagas");
const SAGA_OF_EPISODE: TableDefinition<Key, u128> = TableDefinition::new("saga_of_episode");
const COMMUNITIES: TableDefinition<Key, &[u8]> = TableDefinition::new("communities");

const KIND_ENTITY: u8 = 0;
const KIND_FACT: u8 = 1;
const KIND_COMMUNITY: u8 = 2;

/// Tuning of the embedded store.
#[derive(Clone, Debug)]
pub struct EmbeddedStoreOptions {
    /// redb page cache, in bytes.
    pub cache_bytes: usize,
}

impl Default for EmbeddedStoreOptions {
    fn default() -> Self {
        EmbeddedStoreOptions {
            cache_bytes: 256 * 1024 * 1024,
        }
    }
}

/// The projected graph in one redb file.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    path: PathBuf,
    unflushed: Arc<AtomicU64>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EmbeddedStore({})", self.path.display())
    }
}

/// A redb failure at `path`, as a store error (also the state store's).
pub(crate) fn err(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

fn from_json<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn vector_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn vector_of(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl EmbeddedStore {
    /// Opens (or creates) the store at `path` (a file).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, EmbeddedStoreOptions::default())
    }

    /// Opens with explicit options.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: EmbeddedStoreOptions,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(&path, e))?;
        }
        let db = Database::builder()
            .set_cache_size(options.cache_bytes)
            .create(&path)
            .map_err(|e| err(&path, e))?;
        let store = EmbeddedStore {
            db: Arc::new(db),
            path,
            unflushed: Arc::new(AtomicU64::new(0)),
        };
        store.write(Durability::Immediate, |tables| {
            let _ = tables;
            Ok(())
        })?;
        Ok(store)
    }

    /// Runs `f` over every table in one write transaction and commits.
    fn write<T>(
        &self,
        durability: Durability,
        f: impl FnOnce(&mut Tables<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        txn.set_durability(durability)
            .map_err(|e| err(&self.path, e))?;
        let out = {
            let mut tables = Tables::open(&txn, &self.path)?;
            f(&mut tables)?
        };
        txn.commit().map_err(|e| err(&self.path, e))?;
        Ok(out)
    }

    fn read<T>(&self, f: impl FnOnce(&Reader) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let txn = self.db.begin_read().map_err(|e| err(&self.path, e))?;
        f(&Reader {
            txn,
            path: &self.path,
        })
    }

    fn apply_now(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError> {
        self.unflushed.fetch_add(1, Ordering::Relaxed);
        self.write(Durability::None, |tables| {
            let mut outcomes = Vec::with_capacity(records.len());
            for (position, batch) in records {
                let next = tables
                    .positions
                    .get(position.partition)
                    .map_err(|e| err(tables.path, e))?
                    .map(|v| v.value())
                    .unwrap_or(0);
                if position.offset < next {
                    outcomes.push(ApplyOutcome {
                        group_id: batch.group_id.clone(),
                        applied: false,
                        events_applied: 0,
                        touched: Touched::default(),
                    });
                    continue;
                }
                let mut records = TxnRecords {
                    tables: &mut *tables,
                    group: batch.group_id.as_str(),
                    touched: Touched::default(),
                    failure: None,
                };
                let events_applied = apply_batch(&mut records, batch);
                let TxnRecords {
                    touched, failure, ..
                } = records;
                if let Some(e) = failure {
                    return Err(e);
                }
                tables
                    .positions
                    .insert(position.partition, position.offset + 1)
                    .map_err(|e| err(tables.path, e))?;
                tables
                    .groups
                    .insert(batch.group_id.as_str(), ())
                    .map_err(|e| err(tables.path, e))?;
                outcomes.push(ApplyOutcome {
                    group_id: batch.group_id.clone(),
                    applied: true,
                    events_applied,
                    touched,
                });
            }
            Ok(outcomes)
        })
    }
}

/// Every table of a write transaction, opened once.
struct Tables<'t> {
    path: &'t Path,
    positions: Table<'t, u32, u64>,
    groups: Table<'t, &'static str, ()>,
    applied: Table<'t, Key<'static>, ()>,
    episodes: Table<'t, Key<'static>, &'static [u8]>,
    episodes_by_time: Table<'t, (&'static str, i64, u128), ()>,
    entities: Table<'t, Key<'static>, &'static [u8]>,
    entities_by_name: Table<'t, (&'static str, &'static str, u128), ()>,
    facts: Table<'t, Key<'static>, &'static [u8]>,
    facts_by_entity: Table<'t, (&'static str, u128, u128), u128>,
    embeddings: Table<'t, (&'static str, u8, u128), &'static [u8]>,
    mentions: redb::MultimapTable<'t, Key<'static>, u128>,
    mentioned_by: redb::MultimapTable<'t, Key<'static>, u128>,
    sagas: Table<'t, Key<'static>, &'static [u8]>,
    saga_of_episode: Table<'t, Key<'static>, u128>,
    communities: Table<'t, Key<'static>, &'static [u8]>,
}

impl<'t> Tables<'t> {
    fn open(txn: &'t WriteTransaction, path: &'t Path) -> Result<Self, StoreError> {
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
        })
    }
}

/// One group's records inside a write transaction: the fold's view of redb.
///
/// `GraphRecords` cannot fail, so the first storage error is kept and every
/// later operation becomes a no-op; the caller aborts the transaction.
struct TxnRecords<'a, 't> {
    tables: &'a mut Tables<'t>,
    group: &'a str,
    touched: Touched,
    failure: Option<StoreError>,
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
                    vector_bytes(v).as_slice(),
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
        self.remove_entity_index(entity.uuid)?;
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
        self.tables
            .facts
            .insert((g, u), to_json(&fact).as_slice())
            .map_err(|e| err(path, e))?;
        self.touched.facts.insert(fact.uuid);
        Ok(())
    }

    fn remove_fact_now(&mut self, uuid: Uuid) -> Result<(), StoreError> {
        let old: Option<Fact> = self.get_json(&self.tables.facts, uuid, "fact")?;
        let (g, u) = (self.group, uuid.as_u128());
        let path = self.tables.path;
        if let Some(old) = old {
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

    fn put_episode(&mut self, episode: Episode) {
        let r = (|| {
            self.remove_episode_now(episode.uuid)?;
            let (g, u) = (self.group, episode.uuid.as_u128());
            let path = self.tables.path;
            self.tables
                .episodes_by_time
                .insert((g, episode.valid_at.as_micros(), u), ())
                .map_err(|e| err(path, e))?;
            self.tables
                .episodes
                .insert((g, u), to_json(&episode).as_slice())
                .map_err(|e| err(path, e))?;
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
            self.tables
                .communities
                .insert((g, u), to_json(&community).as_slice())
                .map_err(|e| err(self.tables.path, e))?;
            self.touched.communities.insert(community.uuid);
            Ok(())
        })();
        self.ok(r)
    }

    fn remove_community(&mut self, uuid: Uuid) {
        let r = (|| {
            self.tables
                .communities
                .remove((self.group, uuid.as_u128()))
                .map_err(|e| err(self.tables.path, e))?;
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
            self.touched.episodes.insert(uuid);
        }
        Ok(())
    }
}

/// A read transaction with typed lookups.
struct Reader<'p> {
    txn: redb::ReadTransaction,
    path: &'p Path,
}

impl Reader<'_> {
    fn e(&self, x: impl std::fmt::Display) -> StoreError {
        err(self.path, x)
    }

    fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<redb::ReadOnlyTable<K, V>, StoreError> {
        self.txn.open_table(def).map_err(|x| self.e(x))
    }

    fn embedding(&self, group: &str, kind: u8, uuid: Uuid) -> Result<Option<Vec<f32>>, StoreError> {
        let t = self.table(EMBEDDINGS)?;
        Ok(t.get((group, kind, uuid.as_u128()))
            .map_err(|x| self.e(x))?
            .map(|v| vector_of(v.value())))
    }

    fn record<T: DeserializeOwned>(
        &self,
        def: TableDefinition<Key, &[u8]>,
        group: &str,
        uuid: Uuid,
        what: &str,
    ) -> Result<Option<T>, StoreError> {
        let t = self.table(def)?;
        match t.get((group, uuid.as_u128())).map_err(|x| self.e(x))? {
            Some(v) => from_json(v.value(), what).map(Some),
            None => Ok(None),
        }
    }

    fn entity(&self, group: &str, uuid: Uuid) -> Result<Option<Entity>, StoreError> {
        let Some(mut e): Option<Entity> = self.record(ENTITIES, group, uuid, "entity")? else {
            return Ok(None);
        };
        e.name_embedding = self.embedding(group, KIND_ENTITY, uuid)?;
        Ok(Some(e))
    }

    fn fact(&self, group: &str, uuid: Uuid) -> Result<Option<Fact>, StoreError> {
        let Some(mut f): Option<Fact> = self.record(FACTS, group, uuid, "fact")? else {
            return Ok(None);
        };
        f.fact_embedding = self.embedding(group, KIND_FACT, uuid)?;
        Ok(Some(f))
    }

    fn community(&self, group: &str, uuid: Uuid) -> Result<Option<Community>, StoreError> {
        let Some(mut c): Option<Community> = self.record(COMMUNITIES, group, uuid, "community")?
        else {
            return Ok(None);
        };
        c.name_embedding = self.embedding(group, KIND_COMMUNITY, uuid)?;
        Ok(Some(c))
    }

    /// Every id of a group in a `(group, uuid)` table.
    fn ids(&self, def: TableDefinition<Key, &[u8]>, group: &str) -> Result<Vec<Uuid>, StoreError> {
        let t = self.table(def)?;
        let mut out = Vec::new();
        for row in t
            .range((group, 0u128)..=(group, u128::MAX))
            .map_err(|x| self.e(x))?
        {
            let (k, _) = row.map_err(|x| self.e(x))?;
            out.push(Uuid::from_u128(k.value().1));
        }
        Ok(out)
    }

    fn fact_ids_of(&self, group: &str, entity: Uuid) -> Result<Vec<Neighbour>, StoreError> {
        let t = self.table(FACTS_BY_ENTITY)?;
        let e = entity.as_u128();
        let mut out = Vec::new();
        for row in t
            .range((group, e, 0u128)..=(group, e, u128::MAX))
            .map_err(|x| self.e(x))?
        {
            let (k, v) = row.map_err(|x| self.e(x))?;
            out.push(Neighbour {
                fact: Uuid::from_u128(k.value().2),
                entity: Uuid::from_u128(v.value()),
            });
        }
        Ok(out)
    }

    fn multimap(
        &self,
        def: MultimapTableDefinition<Key, u128>,
        group: &str,
        uuid: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        let t = self.txn.open_multimap_table(def).map_err(|x| self.e(x))?;
        let mut out = Vec::new();
        for v in t.get((group, uuid.as_u128())).map_err(|x| self.e(x))? {
            out.push(Uuid::from_u128(v.map_err(|x| self.e(x))?.value()));
        }
        Ok(out)
    }
}

fn group_str(g: &GroupId) -> &str {
    g.as_str()
}

#[async_trait]
impl GraphStore for EmbeddedStore {
    async fn apply(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError> {
        self.apply_now(records)
    }

    async fn flush(&self) -> Result<(), StoreError> {
        if self.unflushed.swap(0, Ordering::Relaxed) == 0 {
            return Ok(());
        }
        self.write(Durability::Immediate, |_| Ok(()))
    }

    async fn positions(&self) -> Result<Positions, StoreError> {
        self.read(|r| {
            let t = r.table(POSITIONS)?;
            let mut out = Positions::new();
            for row in t.iter().map_err(|x| r.e(x))? {
                let (k, v) = row.map_err(|x| r.e(x))?;
                out.insert(k.value(), v.value());
            }
            Ok(out)
        })
    }

    async fn clear(&self) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| err(&self.path, e))?;
        {
            let e = |x: redb::TableError| err(&self.path, x);
            txn.delete_table(POSITIONS).map_err(e)?;
            txn.delete_table(GROUPS).map_err(e)?;
            txn.delete_table(APPLIED).map_err(e)?;
            txn.delete_table(EPISODES).map_err(e)?;
            txn.delete_table(EPISODES_BY_TIME).map_err(e)?;
            txn.delete_table(ENTITIES).map_err(e)?;
            txn.delete_table(ENTITIES_BY_NAME).map_err(e)?;
            txn.delete_table(FACTS).map_err(e)?;
            txn.delete_table(FACTS_BY_ENTITY).map_err(e)?;
            txn.delete_table(EMBEDDINGS).map_err(e)?;
            txn.delete_multimap_table(MENTIONS).map_err(e)?;
            txn.delete_multimap_table(MENTIONED_BY).map_err(e)?;
            txn.delete_table(SAGAS).map_err(e)?;
            txn.delete_table(SAGA_OF_EPISODE).map_err(e)?;
            txn.delete_table(COMMUNITIES).map_err(e)?;
            Tables::open(&txn, &self.path)?;
        }
        txn.commit().map_err(|e| err(&self.path, e))
    }

    async fn groups(&self) -> Result<Vec<GroupId>, StoreError> {
        self.read(|r| {
            let t = r.table(GROUPS)?;
            let mut out = Vec::new();
            for row in t.iter().map_err(|x| r.e(x))? {
                let (k, _) = row.map_err(|x| r.e(x))?;
                out.push(GroupId::new(k.value()).map_err(|e| StoreError::Corrupt(e.to_string()))?);
            }
            Ok(out)
        })
    }

    async fn episode(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Episode>, StoreError> {
        self.read(|r| r.record(EPISODES, group_str(group), uuid, "episode"))
    }

    async fn entity(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Entity>, StoreError> {
        self.read(|r| r.entity(group_str(group), uuid))
    }

    async fn fact(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Fact>, StoreError> {
        self.read(|r| r.fact(group_str(group), uuid))
    }

    async fn community(
        &self,
        group: &GroupId,
        uuid: Uuid,
    ) -> Result<Option<Community>, StoreError> {
        self.read(|r| r.community(group_str(group), uuid))
    }

    async fn saga(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Saga>, StoreError> {
        self.read(|r| r.record(SAGAS, group_str(group), uuid, "saga"))
    }

    async fn entities_by_name(
        &self,
        group: &GroupId,
        normalized: &str,
    ) -> Result<Vec<Entity>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            let t = r.table(ENTITIES_BY_NAME)?;
            let mut ids = Vec::new();
            for row in t
                .range((g, normalized, 0u128)..=(g, normalized, u128::MAX))
                .map_err(|x| r.e(x))?
            {
                let (k, _) = row.map_err(|x| r.e(x))?;
                ids.push(Uuid::from_u128(k.value().2));
            }
            ids.into_iter()
                .filter_map(|u| r.entity(g, u).transpose())
                .collect()
        })
    }

    async fn facts_between(
        &self,
        group: &GroupId,
        a: Uuid,
        b: Uuid,
    ) -> Result<Vec<Fact>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            r.fact_ids_of(g, a)?
                .into_iter()
                .filter(|n| n.entity == b)
                .filter_map(|n| r.fact(g, n.fact).transpose())
                .collect()
        })
    }

    async fn facts_of_entity(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Fact>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            let ids: BTreeSet<Uuid> = r
                .fact_ids_of(g, entity)?
                .into_iter()
                .map(|n| n.fact)
                .collect();
            ids.into_iter()
                .filter_map(|u| r.fact(g, u).transpose())
                .collect()
        })
    }

    async fn neighbours(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Neighbour>, StoreError> {
        self.read(|r| r.fact_ids_of(group_str(group), entity))
    }

    async fn episodes_by_time(
        &self,
        group: &GroupId,
        before: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            let t = r.table(EPISODES_BY_TIME)?;
            let upper = before.map_or(i64::MAX, |b| b.as_micros());
            let mut out = Vec::new();
            for row in t
                .range((g, i64::MIN, 0u128)..=(g, upper, u128::MAX))
                .map_err(|x| r.e(x))?
                .rev()
            {
                if out.len() >= limit {
                    break;
                }
                let (k, _) = row.map_err(|x| r.e(x))?;
                if let Some(e) = r.record(EPISODES, g, Uuid::from_u128(k.value().2), "episode")? {
                    out.push(e);
                }
            }
            Ok(out)
        })
    }

    async fn mentions(&self, group: &GroupId, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        self.read(|r| r.multimap(MENTIONS, group_str(group), episode))
    }

    async fn mentioning_episodes(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.read(|r| r.multimap(MENTIONED_BY, group_str(group), entity))
    }

    async fn entities(&self, group: &GroupId) -> Result<Vec<Entity>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            r.ids(ENTITIES, g)?
                .into_iter()
                .filter_map(|u| r.entity(g, u).transpose())
                .collect()
        })
    }

    async fn facts(&self, group: &GroupId) -> Result<Vec<Fact>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            r.ids(FACTS, g)?
                .into_iter()
                .filter_map(|u| r.fact(g, u).transpose())
                .collect()
        })
    }

    async fn communities(&self, group: &GroupId) -> Result<Vec<Community>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            r.ids(COMMUNITIES, g)?
                .into_iter()
                .filter_map(|u| r.community(g, u).transpose())
                .collect()
        })
    }

    async fn sagas(&self, group: &GroupId) -> Result<Vec<Saga>, StoreError> {
        self.read(|r| {
            let g = group_str(group);
            r.ids(SAGAS, g)?
                .into_iter()
                .filter_map(|u| r.record(SAGAS, g, u, "saga").transpose())
                .collect()
        })
    }

    async fn counts(&self, group: Option<&GroupId>) -> Result<Counts, StoreError> {
        let groups = match group {
            Some(g) => vec![g.clone()],
            None => self.groups().await?,
        };
        self.read(|r| {
            let mut c = Counts::default();
            let episodes = r.table(EPISODES)?;
            let entities = r.table(ENTITIES)?;
            let facts = r.table(FACTS)?;
            let communities = r.table(COMMUNITIES)?;
            let sagas = r.table(SAGAS)?;
            let count = |t: &redb::ReadOnlyTable<Key, &[u8]>, g: &str| -> Result<u64, StoreError> {
                Ok(t.range((g, 0u128)..=(g, u128::MAX))
                    .map_err(|x| r.e(x))?
                    .count() as u64)
            };
            for g in &groups {
                let g = g.as_str();
                c.episodes += count(&episodes, g)?;
                c.entities += count(&entities, g)?;
                c.communities += count(&communities, g)?;
                c.sagas += count(&sagas, g)?;
                for row in facts
                    .range((g, 0u128)..=(g, u128::MAX))
                    .map_err(|x| r.e(x))?
                {
                    let (_, v) = row.map_err(|x| r.e(x))?;
                    let f: Fact = from_json(v.value(), "fact")?;
                    c.facts += 1;
                    if f.is_current() {
                        c.facts_valid += 1;
                    } else {
                        c.facts_invalidated += 1;
                    }
                }
            }
            Ok(c)
        })
    }
}
