//! chronicle's `GraphStore`: the projected graph, partitioned by group.
//!
//! A store is written only by folding graph-event records through the one
//! `evolve` fold, together with the position of the last record applied, so a
//! restarted projector resumes exactly and a re-delivered record changes
//! nothing. It answers the lookups that search, the API and the audit tools
//! need. [`EmbeddedStore`] (redb) is the default; [`scylla::ScyllaStore`]
//! (feature `scylla`, on by default) runs the very same conformance suite
//! ([`testing`]).

#![warn(missing_docs)]

mod embedded;
mod error;
#[cfg(feature = "scylla")]
pub mod scylla;
mod state;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod totals;

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use chronicle_model::{
    Community, Entity, Episode, EventBatch, Fact, GroupId, LogPosition, Saga, Timestamp,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use embedded::{EmbeddedStore, EmbeddedStoreOptions};
pub use error::{BoxError, StoreError};
#[cfg(feature = "scylla")]
pub use scylla::ScyllaStore;
pub use state::{Decision, LoadedGroup, StateStore};
pub use totals::Totals;

/// A stored embedding (`chronicle_model::embedding_to_bytes`); bytes of any
/// other shape are a corrupt record.
pub(crate) fn embedding_of(bytes: &[u8]) -> Result<Vec<f32>, StoreError> {
    chronicle_model::embedding_from_bytes(bytes).ok_or_else(|| {
        StoreError::Corrupt(format!("{} bytes are no embedding encoding", bytes.len()))
    })
}

/// Next offset to apply, per graph-events partition.
pub type Positions = BTreeMap<u32, u64>;

/// Which records a fold touched (put or removed): what the indices must refresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// Episodes.
    pub episodes: BTreeSet<Uuid>,
    /// Entities.
    pub entities: BTreeSet<Uuid>,
    /// Facts.
    pub facts: BTreeSet<Uuid>,
    /// Communities.
    pub communities: BTreeSet<Uuid>,
}

impl Touched {
    /// Adds another set of touched ids.
    pub fn merge(&mut self, other: Touched) {
        self.episodes.extend(other.episodes);
        self.entities.extend(other.entities);
        self.facts.extend(other.facts);
        self.communities.extend(other.communities);
    }

    /// Nothing was touched.
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
            && self.entities.is_empty()
            && self.facts.is_empty()
            && self.communities.is_empty()
    }
}

/// The result of applying one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// The record's group.
    pub group_id: GroupId,
    /// False when the record was at or below the stored position (skipped).
    pub applied: bool,
    /// Events that changed something.
    pub events_applied: usize,
    /// What changed.
    pub touched: Touched,
}

/// Sizes of the projection (one group, or all).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Counts {
    /// Episodes.
    pub episodes: u64,
    /// Entities.
    pub entities: u64,
    /// Facts.
    pub facts: u64,
    /// Facts neither ended nor invalidated.
    pub facts_valid: u64,
    /// Facts ended or invalidated (kept as history).
    pub facts_invalidated: u64,
    /// Communities.
    pub communities: u64,
    /// Sagas.
    pub sagas: u64,
}

/// An entity's neighbour through one fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Neighbour {
    /// The connecting fact.
    pub fact: Uuid,
    /// The entity at the other end.
    pub entity: Uuid,
}

/// The projected graph.
#[async_trait]
pub trait GraphStore: Send + Sync + 'static {
    /// Folds graph-event records into the store through `evolve`, each
    /// atomically with its position. A record whose offset is below the
    /// stored next offset of its partition is skipped.
    async fn apply(
        &self,
        records: &[(LogPosition, EventBatch)],
    ) -> Result<Vec<ApplyOutcome>, StoreError>;

    /// Makes everything applied so far durable (stores may defer fsyncs
    /// between calls; a crash then rolls data and positions back together).
    async fn flush(&self) -> Result<(), StoreError>;

    /// Next offset to apply per graph-events partition.
    async fn positions(&self) -> Result<Positions, StoreError>;

    /// Drops the whole projection (for a rebuild).
    async fn clear(&self) -> Result<(), StoreError>;

    /// Groups with any record.
    async fn groups(&self) -> Result<Vec<GroupId>, StoreError>;

    /// An episode.
    async fn episode(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Episode>, StoreError>;
    /// An entity.
    async fn entity(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Entity>, StoreError>;
    /// A fact.
    async fn fact(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Fact>, StoreError>;
    /// A community.
    async fn community(&self, group: &GroupId, uuid: Uuid)
    -> Result<Option<Community>, StoreError>;
    /// A saga.
    async fn saga(&self, group: &GroupId, uuid: Uuid) -> Result<Option<Saga>, StoreError>;

    /// Entities whose normalized name is `normalized`.
    async fn entities_by_name(
        &self,
        group: &GroupId,
        normalized: &str,
    ) -> Result<Vec<Entity>, StoreError>;
    /// Facts between two entities, either direction.
    async fn facts_between(
        &self,
        group: &GroupId,
        a: Uuid,
        b: Uuid,
    ) -> Result<Vec<Fact>, StoreError>;
    /// Facts with the entity at either end.
    async fn facts_of_entity(&self, group: &GroupId, entity: Uuid)
    -> Result<Vec<Fact>, StoreError>;
    /// Neighbours for BFS: every (fact, other end) of an entity.
    async fn neighbours(&self, group: &GroupId, entity: Uuid)
    -> Result<Vec<Neighbour>, StoreError>;
    /// Episodes with `valid_at <= before` (all when `None`), newest first, at most `limit`.
    async fn episodes_by_time(
        &self,
        group: &GroupId,
        before: Option<Timestamp>,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError>;
    /// Episodes with `valid_at >= after`, oldest first, at most `limit`: the
    /// turns that follow one (a result's context), where
    /// [`GraphStore::episodes_by_time`] gives those before it.
    async fn episodes_after(
        &self,
        group: &GroupId,
        after: Timestamp,
        limit: usize,
    ) -> Result<Vec<Episode>, StoreError>;
    /// Entities an episode mentions.
    async fn mentions(&self, group: &GroupId, episode: Uuid) -> Result<Vec<Uuid>, StoreError>;
    /// Episodes mentioning an entity.
    async fn mentioning_episodes(
        &self,
        group: &GroupId,
        entity: Uuid,
    ) -> Result<Vec<Uuid>, StoreError>;

    /// Every entity of a group.
    async fn entities(&self, group: &GroupId) -> Result<Vec<Entity>, StoreError>;
    /// Every fact of a group.
    async fn facts(&self, group: &GroupId) -> Result<Vec<Fact>, StoreError>;
    /// Every community of a group.
    async fn communities(&self, group: &GroupId) -> Result<Vec<Community>, StoreError>;
    /// Every saga of a group.
    async fn sagas(&self, group: &GroupId) -> Result<Vec<Saga>, StoreError>;

    /// Running totals of one group or of all (one row a group, whatever
    /// its history).
    async fn totals(&self, group: Option<&GroupId>) -> Result<Totals, StoreError>;

    /// Sizes of one group or of all.
    async fn counts(&self, group: Option<&GroupId>) -> Result<Counts, StoreError> {
        Ok(self.totals(group).await?.counts)
    }
}
