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
    /// A fact (an edge between two entities), by its sentence and embedding.
    Fact,
    /// An entity, by its name and summary and its name's embedding.
    Entity,
    /// An episode by what it is searched by (a message with the turn
    /// before it), with its embedding.
    Episode,
    /// A community of entities, by its name and summary and its name's
    /// embedding.
    Community,
    /// An episode by its own words alone (BM25, no vector): a reply repeats
    /// its question's words, and this is how the turn that said them ranks
    /// above the one that only followed it.
    Turn,
}

impl DocKind {
    /// Every kind, in code order.
    pub const ALL: [DocKind; 5] = [
        DocKind::Fact,
        DocKind::Entity,
        DocKind::Episode,
        DocKind::Community,
        DocKind::Turn,
    ];

    /// The documents an episode is indexed as.
    pub const OF_EPISODE: [DocKind; 2] = [DocKind::Episode, DocKind::Turn];

    /// Lower-case name, also the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Fact => "fact",
            DocKind::Entity => "entity",
            DocKind::Episode => "episode",
            DocKind::Community => "community",
            DocKind::Turn => "turn",
        }
    }

    /// Stable code persisted in the index; never renumber.
    pub(crate) fn code(self) -> u8 {
        match self {
            DocKind::Fact => 0,
            DocKind::Entity => 1,
            DocKind::Episode => 2,
            DocKind::Community => 3,
            DocKind::Turn => 4,
        }
    }

    pub(crate) fn from_code(code: u64) -> Option<DocKind> {
        Some(match code {
            0 => DocKind::Fact,
            1 => DocKind::Entity,
            2 => DocKind::Episode,
            3 => DocKind::Community,
            4 => DocKind::Turn,
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
    /// With `group_id` and `uuid`, the document's key: an upsert replaces
    /// the document with the same three.
    pub kind: DocKind,
    /// The record's id in the graph store; one episode has a document per
    /// kind in [`DocKind::OF_EPISODE`] under the same id.
    pub uuid: Uuid,
    /// The tenant it belongs to; every search is filtered to one group.
    pub group_id: GroupId,
    /// What BM25 ranks; the constructors below compose it per kind.
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

    /// The documents of an episode (see [`DocKind::OF_EPISODE`]): by what
    /// it is searched by, and by its own words.
    pub fn of_episode(group: &GroupId, e: &Episode) -> [Self; 2] {
        [Self::episode(group, e), Self::turn(group, e)]
    }

    /// An episode: its name and what it is searched by (a message's
    /// preceding turn and its content; measured on LoCoMo, BM25 over a
    /// turn with the one before it finds 0.63 of the evidence turns at 5
    /// against 0.48 over the turn alone), and its retrieval embedding.
    pub fn episode(group: &GroupId, e: &Episode) -> Self {
        IndexDoc {
            kind: DocKind::Episode,
            uuid: e.uuid,
            group_id: group.clone(),
            text: format!("{}\n{}", e.name, e.retrieval_text()),
            vector: e.content_embedding.clone(),
        }
    }

    /// An episode's own words: its name and content, no vector.
    pub fn turn(group: &GroupId, e: &Episode) -> Self {
        IndexDoc {
            kind: DocKind::Turn,
            uuid: e.uuid,
            group_id: group.clone(),
            text: format!("{}\n{}", e.name, e.content),
            vector: None,
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
    /// Which kind of record `uuid` names (an episode hits as `Episode` or
    /// `Turn`).
    pub kind: DocKind,
    /// The record to load from the graph store.
    pub uuid: Uuid,
    /// BM25 for text search, cosine similarity for vector search; higher is
    /// better, comparable only within one call.
    pub score: f32,
}

/// Graph-events partition → next offset to apply, committed with the data
/// so a restart resumes exactly where the durable index stands.
pub type Checkpoint = BTreeMap<u32, u64>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_is_indexed_by_its_key_with_a_vector_and_by_its_own_words_without() {
        let g = GroupId::new("g").unwrap();
        let e = chronicle_model::testing::episode(&g, Uuid::from_u128(1));
        let [key, own] = IndexDoc::of_episode(&g, &e);
        assert_eq!([key.kind, own.kind], DocKind::OF_EPISODE);
        assert_eq!(
            key.text,
            "ep-1\nAlice: how are you?\nalice: I moved to Shanghai"
        );
        assert_eq!(key.vector, e.content_embedding);
        assert_eq!(own.text, "ep-1\nalice: I moved to Shanghai");
        assert_eq!(own.vector, None);
        for kind in DocKind::ALL {
            assert_eq!(DocKind::from_code(kind.code().into()), Some(kind));
        }
    }
}
