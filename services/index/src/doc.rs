//! What the index stores and returns.

use std::collections::BTreeMap;
use std::fmt;

use chronicle_model::{Community, Entity, Episode, Fact, GroupId};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The kind of record a document stands for; search asks per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocKind {
    Fact,
    Entity,
    Episode,
    Community,
}

impl DocKind {
    /// Every kind, in code order.
    pub const ALL: [DocKind; 4] = [
        DocKind::Fact,
        DocKind::Entity,
        DocKind::Episode,
        DocKind::Community,
    ];

    /// Lower-case name, also the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Fact => "fact",
            DocKind::Entity => "entity",
            DocKind::Episode => "episode",
            DocKind::Community => "community",
        }
    }

    /// Stable code persisted in the index; never renumber.
    pub(crate) fn code(self) -> u8 {
        match self {
            DocKind::Fact => 0,
            DocKind::Entity => 1,
            DocKind::Episode => 2,
            DocKind::Community => 3,
        }
    }

    pub(crate) fn from_code(code: u64) -> Option<DocKind> {
        Some(match code {
            0 => DocKind::Fact,
            1 => DocKind::Entity,
            2 => DocKind::Episode,
            3 => DocKind::Community,
            _ => return None,
        })
    }
}

impl fmt::Display for DocKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One searchable record: only what ranking needs. The caller composes
/// `text` (a fact's sentence, an entity's name and summary, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexDoc {
    pub kind: DocKind,
    pub uuid: Uuid,
    pub group_id: GroupId,
    pub text: String,
    /// Embedding, any norm (it is normalized; scores are cosine).
    pub vector: Option<Vec<f32>>,
}

/// The documents the projection indexes, one composition per record kind
/// (the live projector, rebuild and replay all index exactly these).
impl IndexDoc {
    /// A fact: its sentence and its embedding.
    pub fn fact(group: &GroupId, f: &Fact) -> Self {
        IndexDoc {
            kind: DocKind::Fact,
            uuid: f.uuid,
            group_id: group.clone(),
            text: f.fact.clone(),
            vector: f.fact_embedding.clone(),
        }
    }

    /// An entity: its name and summary, and its name's embedding.
    pub fn entity(group: &GroupId, e: &Entity) -> Self {
        IndexDoc {
            kind: DocKind::Entity,
            uuid: e.uuid,
            group_id: group.clone(),
            text: format!("{}\n{}", e.name, e.summary),
            vector: e.name_embedding.clone(),
        }
    }

    /// An episode: its name and content, and its retrieval embedding.
    pub fn episode(group: &GroupId, e: &Episode) -> Self {
        IndexDoc {
            kind: DocKind::Episode,
            uuid: e.uuid,
            group_id: group.clone(),
            text: format!("{}\n{}", e.name, e.content),
            vector: e.content_embedding.clone(),
        }
    }

    /// A community: its name and summary, and its name's embedding.
    pub fn community(group: &GroupId, c: &Community) -> Self {
        IndexDoc {
            kind: DocKind::Community,
            uuid: c.uuid,
            group_id: group.clone(),
            text: format!("{}\n{}", c.name, c.summary),
            vector: c.name_embedding.clone(),
        }
    }
}

/// A candidate from one channel; the caller loads the record by `uuid`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub kind: DocKind,
    pub uuid: Uuid,
    /// BM25 for text search, cosine similarity for vector search; higher is
    /// better, comparable only within one call.
    pub score: f32,
}

/// Graph-events partition → next offset to apply, committed with the data
/// so a restart resumes exactly where the durable index stands.
pub type Checkpoint = BTreeMap<u32, u64>;
