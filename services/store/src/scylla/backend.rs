//! The queries the store sends, one method per prepared statement (or per
//! group of them), so the store's logic — fold, planning, listings,
//! ordering — is written once over them. [`super::cql::CqlBackend`] runs
//! them on ScyllaDB; the unit tests run them on an in-memory model of the
//! same tables.

use async_trait::async_trait;
use uuid::Uuid;

use super::plan::Mutation;
use super::rows::{CommunityRow, EntityRow, EpisodeRow, FactRow, SagaRow};
use crate::StoreError;

/// Row access by full partition keys (and clustering prefixes).
#[async_trait]
pub(crate) trait Backend: Send + Sync + 'static {
    /// `episodes` row.
    async fn episode(&self, group: &str, uuid: Uuid) -> Result<Option<EpisodeRow>, StoreError>;
    /// `entities` row.
    async fn entity(&self, group: &str, uuid: Uuid) -> Result<Option<EntityRow>, StoreError>;
    /// `facts` row.
    async fn fact(&self, group: &str, uuid: Uuid) -> Result<Option<FactRow>, StoreError>;
    /// `sagas` row.
    async fn saga(&self, group: &str, uuid: Uuid) -> Result<Option<SagaRow>, StoreError>;
    /// `communities` row.
    async fn community(&self, group: &str, uuid: Uuid) -> Result<Option<CommunityRow>, StoreError>;
    /// `entities_by_name` partition: entity uuids.
    async fn entity_ids_by_name(&self, group: &str, name: &str) -> Result<Vec<Uuid>, StoreError>;
    /// `facts_by_entity` partition (or its `other` slice): `(other end, fact)`.
    async fn fact_ends(
        &self,
        group: &str,
        entity: Uuid,
        other: Option<Uuid>,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError>;
    /// `mentions` partition: entities.
    async fn mentions(&self, group: &str, episode: Uuid) -> Result<Vec<Uuid>, StoreError>;
    /// `mentioned_by` partition: episodes.
    async fn mentioned_by(&self, group: &str, entity: Uuid) -> Result<Vec<Uuid>, StoreError>;
    /// `saga_of_episode` row.
    async fn saga_of_episode(&self, group: &str, episode: Uuid)
    -> Result<Option<Uuid>, StoreError>;
    /// `applied_events` partition: event ids.
    async fn applied_events(&self, group: &str, episode: Uuid) -> Result<Vec<Uuid>, StoreError>;
    /// `group_totals` row: the group's totals as JSON.
    async fn totals(&self, group: &str) -> Result<Option<String>, StoreError>;
    /// `positions` partition: `(log partition, next offset)`.
    async fn positions(&self) -> Result<Vec<(i32, i64)>, StoreError>;
    /// `groups` partition.
    async fn groups_in_shard(&self, shard: i16) -> Result<Vec<String>, StoreError>;
    /// `group_buckets` slice of one kind.
    async fn buckets(&self, group: &str, kind: &str) -> Result<Vec<i32>, StoreError>;
    /// `group_records` partition: `(uuid, is_current)`.
    async fn records(
        &self,
        group: &str,
        kind: &str,
        bucket: i32,
    ) -> Result<Vec<(Uuid, Option<bool>)>, StoreError>;
    /// `episodes_by_time` rows of a month from `from` on, at most `limit`:
    /// `(valid_at, uuid)`. Newest first: `valid_at <= from`, descending;
    /// else `valid_at >= from`, ascending.
    async fn episodes_from(
        &self,
        group: &str,
        bucket: i32,
        from: i64,
        newest_first: bool,
        limit: i32,
    ) -> Result<Vec<(i64, Uuid)>, StoreError>;
    /// `episodes_by_time` rows of a month with `valid_at = at`.
    async fn episodes_at(
        &self,
        group: &str,
        bucket: i32,
        at: i64,
    ) -> Result<Vec<(i64, Uuid)>, StoreError>;
    /// Writes one record's mutations atomically (a logged batch).
    async fn write(&self, mutations: &[Mutation]) -> Result<(), StoreError>;
    /// Empties every table.
    async fn truncate(&self) -> Result<(), StoreError>;
}
