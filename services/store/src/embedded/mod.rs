//! The embedded store: the projected graph in redb tables.
//!
//! Records are JSON without their embeddings; embeddings live as bytes in
//! their own table (`chronicle_model::embedding_to_bytes`; an episode's too;
//! an episode row written by an earlier version keeps its vector in its
//! JSON and still reads), so the frequent read-modify-writes of the fold
//! (provenance, invalidations, summaries) never copy vectors, and a vector
//! costs 2 bytes a component (half precision) instead of JSON's 10 to 12. Every table is
//! keyed by `(group, ...)`, so a group's records are contiguous and a lookup
//! can never reach another group.
//!
//! Applying records commits one write transaction holding the data and the
//! new positions. Commits between [`GraphStore::flush`] calls skip the fsync
//! (`Durability::None`): a crash rolls data and positions back together to
//! the last durable commit, and the projector re-applies from there.
//!
//! [`records`] is the fold's view of a write transaction, [`reader`] the
//! typed lookups of a read transaction, [`graph_store`] the port on both.

mod graph_store;
mod reader;
mod records;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chronicle_engine::evolve::apply_batch;
use chronicle_model::{EventBatch, LogPosition};
use redb::{
    Database, Durability, MultimapTableDefinition, ReadableDatabase, ReadableTable,
    ReadableTableMetadata, TableDefinition,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{ApplyOutcome, BoxError, StoreError, Totals, Touched};
use reader::Reader;
use records::{Tables, TxnRecords};

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
/// `(group, kind, id) -> embedding bytes`.
const EMBEDDINGS: TableDefinition<(&str, u8, u128), &[u8]> = TableDefinition::new("embeddings");
/// `(group, episode) -> entities`.
const MENTIONS: MultimapTableDefinition<Key, u128> = MultimapTableDefinition::new("mentions");
/// `(group, entity) -> episodes`.
const MENTIONED_BY: MultimapTableDefinition<Key, u128> =
    MultimapTableDefinition::new("mentioned_by");
const SAGAS: TableDefinition<Key, &[u8]> = TableDefinition::new("sagas");
const SAGA_OF_EPISODE: TableDefinition<Key, u128> = TableDefinition::new("saga_of_episode");
const COMMUNITIES: TableDefinition<Key, &[u8]> = TableDefinition::new("communities");
/// `group -> Totals` (JSON): the group's running totals.
const TOTALS: TableDefinition<&str, &[u8]> = TableDefinition::new("totals");

const KIND_ENTITY: u8 = 0;
const KIND_FACT: u8 = 1;
const KIND_COMMUNITY: u8 = 2;
const KIND_EPISODE: u8 = 3;

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
pub(crate) fn err(path: &Path, e: impl Into<BoxError>) -> StoreError {
    StoreError::Storage {
        path: path.display().to_string(),
        source: e.into(),
    }
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("records serialize")
}

fn from_json<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
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
        store.count_if_uncounted()?;
        Ok(store)
    }

    /// A store written before totals were kept has groups and no totals:
    /// their sizes are counted once, row by row; what deciding cost
    /// (decisions, model calls) is on the log only, and starts at zero
    /// until a `chronicle rebuild` folds the log again.
    fn count_if_uncounted(&self) -> Result<(), StoreError> {
        let counts = self.read(|r| {
            if !r.table(TOTALS)?.is_empty().map_err(|x| r.e(x))? {
                return Ok(Vec::new());
            }
            let groups = r.groups()?;
            (groups.iter())
                .map(|g| Ok((g.as_str().to_owned(), r.recount(g.as_str())?)))
                .collect::<Result<Vec<_>, StoreError>>()
        })?;
        if counts.is_empty() {
            return Ok(());
        }
        tracing::warn!(
            path = %self.path.display(),
            groups = counts.len(),
            "counted the groups of a store written before totals were kept; \
             decisions and model calls start at zero until `chronicle rebuild`"
        );
        self.write(Durability::Immediate, |tables| {
            for (group, counts) in counts {
                let t = Totals {
                    counts,
                    ..Totals::default()
                };
                (tables.totals)
                    .insert(group.as_str(), to_json(&t).as_slice())
                    .map_err(|e| err(tables.path, e))?;
            }
            Ok(())
        })
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

    /// Runs `f` on a blocking thread: commits and whole-group scans take
    /// milliseconds, and an async runtime thread must not stall on them.
    /// Point lookups (microseconds, from the page cache) stay inline.
    async fn off_runtime<T: Send + 'static>(
        &self,
        f: impl FnOnce(&EmbeddedStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| err(&self.path, e))?
    }

    fn read<T>(&self, f: impl FnOnce(&Reader) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let txn = self.db.begin_read().map_err(|e| err(&self.path, e))?;
        f(&Reader {
            txn,
            path: &self.path,
        })
    }

    /// Drops every table and recreates them empty, in one durable commit.
    fn clear_now(&self) -> Result<(), StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        txn.set_durability(Durability::Immediate)
            .map_err(|e| err(&self.path, e))?;
        {
            // Every table there is, then the fold's set afresh: the list of
            // tables lives in one place (`Tables::open`).
            let e = |x: redb::TableError| err(&self.path, x);
            let tables: Vec<_> = txn.list_tables().map_err(|x| err(&self.path, x))?.collect();
            for table in tables {
                txn.delete_table(table).map_err(e)?;
            }
            let multimaps: Vec<_> = (txn.list_multimap_tables())
                .map_err(|x| err(&self.path, x))?
                .collect();
            for table in multimaps {
                txn.delete_multimap_table(table).map_err(e)?;
            }
            Tables::open(&txn, &self.path)?;
        }
        txn.commit().map_err(|e| err(&self.path, e))
    }

    fn apply_now(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError> {
        self.unflushed.fetch_add(1, Ordering::Relaxed);
        self.write(Durability::None, |tables| {
            let mut outcomes = Vec::with_capacity(records.len());
            let mut totals: HashMap<&str, Totals> = HashMap::new();
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
                let group = batch.group_id.as_str();
                let before = match totals.remove(group) {
                    Some(t) => t,
                    None => stored_totals(&tables.totals, group, tables.path)?,
                };
                let mut records = TxnRecords {
                    tables: &mut *tables,
                    group,
                    touched: Touched::default(),
                    totals: before,
                    failure: None,
                };
                let events_applied = apply_batch(&mut records, batch);
                let TxnRecords {
                    touched,
                    totals: mut after,
                    failure,
                    ..
                } = records;
                if let Some(e) = failure {
                    return Err(e);
                }
                after.record(batch);
                totals.insert(group, after);
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
            for (group, t) in totals {
                (tables.totals)
                    .insert(group, to_json(&t).as_slice())
                    .map_err(|e| err(tables.path, e))?;
            }
            Ok(outcomes)
        })
    }
}

/// A group's stored totals (zero before its first record).
fn stored_totals(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    group: &str,
    path: &Path,
) -> Result<Totals, StoreError> {
    match table.get(group).map_err(|e| err(path, e))? {
        Some(v) => from_json(v.value(), "totals"),
        None => Ok(Totals::default()),
    }
}
