//! Typed lookups in a read transaction.

use std::path::Path;

use chronicle_model::{Community, Entity, Episode, Fact, GroupId};
use redb::{MultimapTableDefinition, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{
    COMMUNITIES, EMBEDDINGS, ENTITIES, EPISODES, EPISODES_BY_TIME, FACTS, FACTS_BY_ENTITY, GROUPS,
    KIND_COMMUNITY, KIND_ENTITY, KIND_EPISODE, KIND_FACT, Key, SAGAS, err, from_json,
};
use crate::{Counts, Neighbour, StoreError, embedding_of};

/// A read transaction with typed lookups.
pub(super) struct Reader<'p> {
    pub(super) txn: redb::ReadTransaction,
    pub(super) path: &'p Path,
}

impl Reader<'_> {
    pub(super) fn e(&self, x: impl Into<crate::BoxError>) -> StoreError {
        err(self.path, x)
    }

    pub(super) fn table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: TableDefinition<K, V>,
    ) -> Result<redb::ReadOnlyTable<K, V>, StoreError> {
        self.txn.open_table(def).map_err(|x| self.e(x))
    }

    pub(super) fn embedding(
        &self,
        group: &str,
        kind: u8,
        uuid: Uuid,
    ) -> Result<Option<Vec<f32>>, StoreError> {
        let t = self.table(EMBEDDINGS)?;
        t.get((group, kind, uuid.as_u128()))
            .map_err(|x| self.e(x))?
            .map(|v| embedding_of(v.value()))
            .transpose()
    }

    pub(super) fn record<T: DeserializeOwned>(
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

    /// A group's episodes with `lower <= valid_at <= upper` (micros), in
    /// time-then-uuid order or its reverse, at most `limit`.
    pub(super) fn episodes_between(
        &self,
        group: &str,
        lower: i64,
        upper: i64,
        newest_first: bool,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError> {
        let t = self.table(EPISODES_BY_TIME)?;
        let rows =
            (t.range((group, lower, 0u128)..=(group, upper, u128::MAX))).map_err(|x| self.e(x))?;
        let rows: Box<dyn Iterator<Item = _>> = match newest_first {
            true => Box::new(rows.rev()),
            false => Box::new(rows),
        };
        let mut out = Vec::new();
        for row in rows {
            if out.len() >= limit {
                break;
            }
            let (k, _) = row.map_err(|x| self.e(x))?;
            if let Some(e) = self.episode(group, Uuid::from_u128(k.value().2))? {
                out.push(e);
            }
        }
        Ok(out)
    }

    pub(super) fn episode(&self, group: &str, uuid: Uuid) -> Result<Option<Episode>, StoreError> {
        let Some(mut e): Option<Episode> = self.record(EPISODES, group, uuid, "episode")? else {
            return Ok(None);
        };
        if let Some(v) = self.embedding(group, KIND_EPISODE, uuid)? {
            e.content_embedding = Some(v);
        }
        Ok(Some(e))
    }

    pub(super) fn entity(&self, group: &str, uuid: Uuid) -> Result<Option<Entity>, StoreError> {
        let Some(mut e): Option<Entity> = self.record(ENTITIES, group, uuid, "entity")? else {
            return Ok(None);
        };
        e.name_embedding = self.embedding(group, KIND_ENTITY, uuid)?;
        Ok(Some(e))
    }

    pub(super) fn fact(&self, group: &str, uuid: Uuid) -> Result<Option<Fact>, StoreError> {
        let Some(mut f): Option<Fact> = self.record(FACTS, group, uuid, "fact")? else {
            return Ok(None);
        };
        f.fact_embedding = self.embedding(group, KIND_FACT, uuid)?;
        Ok(Some(f))
    }

    pub(super) fn community(
        &self,
        group: &str,
        uuid: Uuid,
    ) -> Result<Option<Community>, StoreError> {
        let Some(mut c): Option<Community> = self.record(COMMUNITIES, group, uuid, "community")?
        else {
            return Ok(None);
        };
        c.name_embedding = self.embedding(group, KIND_COMMUNITY, uuid)?;
        Ok(Some(c))
    }

    /// Every id of a group in a `(group, uuid)` table.
    pub(super) fn ids(
        &self,
        def: TableDefinition<Key, &[u8]>,
        group: &str,
    ) -> Result<Vec<Uuid>, StoreError> {
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

    pub(super) fn fact_ids_of(
        &self,
        group: &str,
        entity: Uuid,
    ) -> Result<Vec<Neighbour>, StoreError> {
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

    pub(super) fn multimap(
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

    /// Every group with projected records.
    pub(super) fn groups(&self) -> Result<Vec<GroupId>, StoreError> {
        let t = self.table(GROUPS)?;
        let mut out = Vec::new();
        for row in t.iter().map_err(|x| self.e(x))? {
            let (k, _) = row.map_err(|x| self.e(x))?;
            out.push(GroupId::new(k.value()).map_err(|e| StoreError::Corrupt(e.to_string()))?);
        }
        Ok(out)
    }

    /// A group's sizes counted row by row: the totals of a store written
    /// before they were kept (see [`super::EmbeddedStore::open_with`]).
    pub(super) fn recount(&self, g: &str) -> Result<Counts, StoreError> {
        let count = |t: TableDefinition<Key, &[u8]>| -> Result<u64, StoreError> {
            let t = self.table(t)?;
            let rows = t
                .range((g, 0u128)..=(g, u128::MAX))
                .map_err(|x| self.e(x))?;
            Ok(rows.count() as u64)
        };
        let mut c = Counts {
            episodes: count(EPISODES)?,
            entities: count(ENTITIES)?,
            communities: count(COMMUNITIES)?,
            sagas: count(SAGAS)?,
            ..Counts::default()
        };
        let facts = self.table(FACTS)?;
        for row in (facts.range((g, 0u128)..=(g, u128::MAX))).map_err(|x| self.e(x))? {
            let (_, v) = row.map_err(|x| self.e(x))?;
            let f: Fact = from_json(v.value(), "fact")?;
            c.facts += 1;
            if f.is_current() {
                c.facts_valid += 1;
            } else {
                c.facts_invalidated += 1;
            }
        }
        Ok(c)
    }
}
