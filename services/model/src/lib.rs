//! chronicle's domain model: bitemporal entities, facts and episodes, the
//! commands that enter the log and the events that change the graph.
//!
//! Pure data and rules; this crate performs no I/O.

#![warn(missing_docs)]

mod command;
mod community;
mod embedding;
mod entity;
mod episode;
mod error;
mod event;
mod fact;
mod group;
mod ids;
mod time;

pub use command::Command;
pub use community::{Community, Saga};
pub use embedding::{embedding_from_bytes, embedding_to_bytes, round_to_half};
pub use entity::{ENTITY_LABEL, Entity, normalize_name};
pub use episode::{
    Episode, EpisodeType, FactTriple, MAX_TRIPLE_FACT_CHARS, MAX_TRIPLE_NAME_CHARS, NewEpisode,
    TripleError,
};
pub use error::{ContentError, GroupIdError, TimestampError};
pub use event::{DecisionStats, EventBatch, EventKind, GraphEvent, LogPosition};
pub use fact::{Fact, Invalidation, StatedWindow, normalize_relation};
pub use group::GroupId;
pub use ids::{IdKind, NAMESPACE, derive_id, derive_named_id};
pub use time::{Timestamp, Window};

/// Typed attributes of entities and facts, and episode metadata: a JSON
/// object (sorted keys, so serialization is deterministic).
pub type Attributes = serde_json::Map<String, serde_json::Value>;

#[cfg(any(test, feature = "testing"))]
pub mod testing;
