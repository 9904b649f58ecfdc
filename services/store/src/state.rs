//! The processor's state at rest, so that neither its memory nor its restart
//! grows with the log.
//!
//! `decide` needs a group's whole graph (read-your-writes between episodes).
//! The processor keeps only hot groups in memory; the rest live here, one
//! redb file per processor:
//!
//! * per group a **base** — a [`GroupSnapshot`] (MessagePack) — and the
//!   **deltas** since: the encoded decisions appended after it, keyed by
//!   their graph-events offset. Loading a cold group restores the base and
//!   folds the deltas; a group whose deltas outgrow its base is compacted
//!   into a new base, so writes stay proportional to the decisions and a
//!   load to the group's size.
//! * the **decided** commands, by group, so a command re-read after a lost
//!   offset commit is skipped without any state in memory;
//! * per (episodes partition, graph-events partition) a **checkpoint**: the
//!   graph-events offset below which every decision of the partition's
//!   groups is here. Deltas and decided rows are written without `fsync`
//!   (`Durability::None`); a checkpoint is a durable commit, which makes
//!   everything before it durable too. A restart replays only the
//!   graph-events after the checkpoint; folding a decision twice is a
//!   no-op, so replaying one that is already in a base is harmless.

use std::path::{Path, PathBuf};

use chronicle_engine::GroupSnapshot;
use chronicle_model::GroupId;
use redb::{Database, Durability, ReadableDatabase, TableDefinition};
use uuid::Uuid;

use crate::StoreError;
use crate::embedded::err;

const BASES: TableDefinition<&str, &[u8]> = TableDefinition::new("bases");
const DELTAS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("deltas");
const DECIDED: TableDefinition<(&str, u128), u64> = TableDefinition::new("decided");
const CHECKPOINTS: TableDefinition<(u32, u32), u64> = TableDefinition::new("checkpoints");

/// One decision as the state store keeps it.
#[derive(Clone, Copy, Debug)]
pub struct Decision<'a> {
    /// Its group.
    pub group: &'a GroupId,
    /// The command it decided.
    pub command: Uuid,
    /// Its offset on the group's graph-events partition.
    pub offset: u64,
    /// The encoded event batch, as appended to the log.
    pub payload: &'a [u8],
}

/// A group as stored: what to restore and fold, and how big it is.
#[derive(Debug, Default)]
pub struct LoadedGroup {
    /// The last base, if the group was ever compacted.
    pub base: Option<GroupSnapshot>,
    /// Encoded decisions since the base, in log order.
    pub deltas: Vec<Vec<u8>>,
    /// Size of the base, in bytes.
    pub base_bytes: u64,
    /// Size of the deltas, in bytes.
    pub delta_bytes: u64,
    /// Offset of the last delta.
    pub last_offset: Option<u64>,
}

/// The processor's state store (see the module documentation).
pub struct StateStore {
    db: Database,
    path: PathBuf,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateStore({})", self.path.display())
    }
}

impl StateStore {
    /// Opens (or creates) the store at `path` (a file).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(&path, e))?;
        }
        let db = Database::builder()
            .set_cache_size(64 << 20)
            .create(&path)
            .map_err(|e| err(&path, e))?;
        let store = StateStore { db, path };
        store.write(Durability::Immediate, |txn, path| {
            txn.open_table(BASES).map_err(|e| err(path, e))?;
            txn.open_table(DELTAS).map_err(|e| err(path, e))?;
            txn.open_table(DECIDED).map_err(|e| err(path, e))?;
            txn.open_table(CHECKPOINTS).map_err(|e| err(path, e))?;
            Ok(())
        })?;
        Ok(store)
    }

    fn write<T>(
        &self,
        durability: Durability,
        f: impl FnOnce(&redb::WriteTransaction, &Path) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut txn = self.db.begin_write().map_err(|e| err(&self.path, e))?;
        txn.set_durability(durability)
            .map_err(|e| err(&self.path, e))?;
        let out = f(&txn, &self.path)?;
        txn.commit().map_err(|e| err(&self.path, e))?;
        Ok(out)
    }

    fn read_txn(&self) -> Result<redb::ReadTransaction, StoreError> {
        self.db.begin_read().map_err(|e| err(&self.path, e))
    }

    /// The graph-events offset below which every decision of the groups of
    /// `episodes_partition` that live on `events_partition` is stored (0
    /// when none was recorded).
    pub fn checkpoint(
        &self,
        episodes_partition: u32,
        events_partition: u32,
    ) -> Result<u64, StoreError> {
        let txn = self.read_txn()?;
        let table = txn
            .open_table(CHECKPOINTS)
            .map_err(|e| err(&self.path, e))?;
        Ok(table
            .get((episodes_partition, events_partition))
            .map_err(|e| err(&self.path, e))?
            .map_or(0, |v| v.value()))
    }

    /// Records checkpoints `(episodes partition, graph-events partition,
    /// offset)` durably, with everything written before.
    pub fn set_checkpoints(&self, checkpoints: &[(u32, u32, u64)]) -> Result<(), StoreError> {
        self.write(Durability::Immediate, |txn, path| {
            let mut table = txn.open_table(CHECKPOINTS).map_err(|e| err(path, e))?;
            for (p, q, offset) in checkpoints {
                table.insert((*p, *q), *offset).map_err(|e| err(path, e))?;
            }
            Ok(())
        })
    }

    /// Stores decisions (deltas and decided commands), not yet durably.
    pub fn record(&self, decisions: &[Decision<'_>]) -> Result<(), StoreError> {
        if decisions.is_empty() {
            return Ok(());
        }
        self.write(Durability::None, |txn, path| {
            let mut deltas = txn.open_table(DELTAS).map_err(|e| err(path, e))?;
            let mut decided = txn.open_table(DECIDED).map_err(|e| err(path, e))?;
            for d in decisions {
                let group = d.group.as_str();
                deltas
                    .insert((group, d.offset), d.payload)
                    .map_err(|e| err(path, e))?;
                decided
                    .insert((group, d.command.as_u128()), d.offset)
                    .map_err(|e| err(path, e))?;
            }
            Ok(())
        })
    }

    /// Which of these commands were decided.
    pub fn decided(&self, commands: &[(&GroupId, Uuid)]) -> Result<Vec<bool>, StoreError> {
        let txn = self.read_txn()?;
        let table = txn.open_table(DECIDED).map_err(|e| err(&self.path, e))?;
        commands
            .iter()
            .map(|(g, c)| {
                Ok(table
                    .get((g.as_str(), c.as_u128()))
                    .map_err(|e| err(&self.path, e))?
                    .is_some())
            })
            .collect()
    }

    /// A group's base and deltas.
    pub fn load(&self, group: &GroupId) -> Result<LoadedGroup, StoreError> {
        let txn = self.read_txn()?;
        let bases = txn.open_table(BASES).map_err(|e| err(&self.path, e))?;
        let mut out = LoadedGroup::default();
        if let Some(bytes) = bases.get(group.as_str()).map_err(|e| err(&self.path, e))? {
            let bytes = bytes.value();
            out.base_bytes = bytes.len() as u64;
            out.base = Some(rmp_serde::from_slice(bytes).map_err(|e| {
                StoreError::Corrupt(format!("processor state of group {group}: {e}"))
            })?);
        }
        let deltas = txn.open_table(DELTAS).map_err(|e| err(&self.path, e))?;
        let g = group.as_str();
        for row in deltas
            .range((g, 0)..=(g, u64::MAX))
            .map_err(|e| err(&self.path, e))?
        {
            let (key, value) = row.map_err(|e| err(&self.path, e))?;
            out.delta_bytes += value.value().len() as u64;
            out.last_offset = Some(key.value().1);
            out.deltas.push(value.value().to_vec());
        }
        Ok(out)
    }

    /// Replaces a group's base with `snapshot` and drops its deltas up to
    /// `through` (the snapshot includes them). Returns the base's size.
    pub fn compact(
        &self,
        group: &GroupId,
        snapshot: &GroupSnapshot,
        through: u64,
    ) -> Result<u64, StoreError> {
        let bytes = rmp_serde::to_vec_named(snapshot)
            .map_err(|e| StoreError::Corrupt(format!("encoding group {group}: {e}")))?;
        self.write(Durability::None, |txn, path| {
            let g = group.as_str();
            txn.open_table(BASES)
                .map_err(|e| err(path, e))?
                .insert(g, bytes.as_slice())
                .map_err(|e| err(path, e))?;
            txn.open_table(DELTAS)
                .map_err(|e| err(path, e))?
                .retain_in((g, 0)..=(g, through), |_, _| false)
                .map_err(|e| err(path, e))?;
            Ok(())
        })?;
        Ok(bytes.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use chronicle_engine::{GraphRecords, GroupState};
    use chronicle_model::testing::{entity, episode, group};

    use super::*;

    fn state_with(g: &GroupId, names: &[&str]) -> GroupState {
        let mut s = GroupState::new(g.clone());
        for (i, name) in names.iter().enumerate() {
            s.put_entity(entity(g, Uuid::from_u128(100 + i as u128), name));
            s.put_episode(episode(g, Uuid::from_u128(200 + i as u128)));
            s.mark_applied(Uuid::from_u128(300 + i as u128));
        }
        s
    }

    #[test]
    fn a_group_survives_a_reopen_as_base_plus_deltas() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        let (a, b) = (group("a"), group("b"));
        {
            let store = StateStore::open(&path).unwrap();
            assert_eq!(store.checkpoint(0, 0).unwrap(), 0);
            let snapshot = state_with(&a, &["Alice", "Bob"]).snapshot();
            store
                .record(&[
                    Decision {
                        group: &a,
                        command: Uuid::from_u128(1),
                        offset: 3,
                        payload: b"one",
                    },
                    Decision {
                        group: &b,
                        command: Uuid::from_u128(2),
                        offset: 4,
                        payload: b"other",
                    },
                    Decision {
                        group: &a,
                        command: Uuid::from_u128(3),
                        offset: 5,
                        payload: b"two",
                    },
                ])
                .unwrap();
            store.compact(&a, &snapshot, 3).unwrap();
            store.set_checkpoints(&[(0, 0, 6)]).unwrap();
        }
        let store = StateStore::open(&path).unwrap();
        assert_eq!(store.checkpoint(0, 0).unwrap(), 6);
        assert_eq!(store.checkpoint(1, 0).unwrap(), 0);
        let loaded = store.load(&a).unwrap();
        let restored = GroupState::from_snapshot(loaded.base.unwrap());
        assert_eq!(
            restored.to_canonical_json(),
            state_with(&a, &["Alice", "Bob"]).to_canonical_json()
        );
        assert_eq!(loaded.deltas, vec![b"two".to_vec()]);
        assert_eq!(loaded.last_offset, Some(5));
        let other = store.load(&b).unwrap();
        assert!(other.base.is_none());
        assert_eq!(other.deltas, vec![b"other".to_vec()]);
        let decided = store
            .decided(&[
                (&a, Uuid::from_u128(1)),
                (&b, Uuid::from_u128(1)),
                (&b, Uuid::from_u128(2)),
            ])
            .unwrap();
        assert_eq!(decided, vec![true, false, true], "decided is per group");
        assert!(store.load(&group("c")).unwrap().base.is_none());
    }
}
