//! Aggregates: communities of entities and sagas of episodes.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{GroupId, Timestamp};

/// A label-propagation cluster of entities with a summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Community {
    /// Stable id.
    pub uuid: Uuid,
    /// The tenant.
    pub group_id: GroupId,
    /// A short name.
    pub name: String,
    /// What the members have in common.
    pub summary: String,
    /// Member entities, sorted.
    pub members: Vec<Uuid>,
    /// Embedding of the name, for search.
    #[serde(default, with = "crate::embedding::optional")]
    pub name_embedding: Option<Vec<f32>>,
    /// Transaction time it was first built.
    pub created_at: Timestamp,
}

/// A storyline of episodes (`HAS_EPISODE`, `NEXT_EPISODE`) with a
/// watermark of how far its summary has absorbed them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Saga {
    /// Stable id, derived from the group and the name.
    pub uuid: Uuid,
    /// The tenant.
    pub group_id: GroupId,
    /// The caller's name for it.
    pub name: String,
    /// Summary of the episodes absorbed so far.
    pub summary: String,
    /// Episodes in link order: `HAS_EPISODE`, and consecutive pairs are `NEXT_EPISODE`.
    pub episodes: Vec<Uuid>,
    /// Reference time of the newest episode the summary has absorbed.
    pub last_summarized_episode_valid_at: Option<Timestamp>,
    /// Transaction time it was first linked.
    pub created_at: Timestamp,
}
