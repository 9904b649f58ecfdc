//! Graph events: the only way the graph changes.
//!
//! A decision about one command (usually an episode) is one [`EventBatch`];
//! the fold applies its events in order. Every event carries a deterministic
//! id and the transaction time of the log record that caused it, so a replay
//! reproduces identical state, timestamps included.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Attributes, Community, Entity, Episode, Fact, GroupId, Timestamp};

/// One change to a group's graph.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphEvent {
    /// Derived from `episode_uuid` and the event's index in its batch.
    pub event_id: Uuid,
    /// The tenant.
    pub group_id: GroupId,
    /// The episode (or command) whose decision produced this event.
    pub episode_uuid: Uuid,
    /// Transaction time: the append timestamp of the causing log record.
    pub tx_time: Timestamp,
    /// What changed.
    pub kind: EventKind,
}

/// The changes a fold understands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// An episode was accepted into the graph.
    EpisodeRecorded {
        /// The stored episode.
        episode: Episode,
    },
    /// A new entity.
    EntityCreated {
        /// The entity as created.
        entity: Entity,
    },
    /// Some fields of an entity changed; `None` leaves a field as it is.
    EntityUpdated {
        /// Which entity.
        entity_uuid: Uuid,
        /// New summary.
        summary: Option<String>,
        /// New attributes (replacing the old map).
        attributes: Option<Attributes>,
        /// New labels.
        labels: Option<Vec<String>>,
        /// New name embedding.
        name_embedding: Option<Vec<f32>>,
    },
    /// A new fact.
    FactCreated {
        /// The fact as created.
        fact: Fact,
    },
    /// An existing fact was asserted again by another episode.
    FactProvenanceAdded {
        /// Which fact.
        fact_uuid: Uuid,
        /// The asserting episode.
        episode_uuid: Uuid,
        /// The window it stated, when that widens the fact (see
        /// [`crate::Fact::restate`]); `None` adds provenance only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stated_window: Option<crate::Window>,
    },
    /// A fact stopped holding: a newer fact contradicted it.
    FactInvalidated {
        /// Which fact.
        fact_uuid: Uuid,
        /// When it stopped being true in the world.
        invalid_at: Timestamp,
        /// When the system learned it (the causing record's transaction time).
        expired_at: Timestamp,
        /// The contradicting fact.
        by_fact: Option<Uuid>,
        /// The episode whose decision invalidated it.
        by_episode: Uuid,
    },
    /// An episode mentions these entities.
    MentionsRecorded {
        /// The mentioning episode.
        episode_uuid: Uuid,
        /// The mentioned entities.
        entity_uuids: Vec<Uuid>,
    },
    /// An episode joined a saga (`HAS_EPISODE`), after its previous episode (`NEXT_EPISODE`).
    SagaLinked {
        /// The saga (created on first link).
        saga_uuid: Uuid,
        /// Its name.
        saga_name: String,
        /// The joining episode.
        episode_uuid: Uuid,
        /// The saga's episode before it.
        previous_episode_uuid: Option<Uuid>,
    },
    /// An episode was withdrawn: its provenance goes, and what only it supported disappears.
    EpisodeRetracted {
        /// The withdrawn episode.
        episode_uuid: Uuid,
    },
    /// A new community.
    CommunityBuilt {
        /// The community as built.
        community: Community,
    },
    /// A community's membership or summary changed.
    CommunityUpdated {
        /// The community as it is now.
        community: Community,
    },
    /// A community no longer exists.
    CommunityDissolved {
        /// Which community.
        community_uuid: Uuid,
    },
    /// A saga's summary absorbed episodes up to a watermark.
    SagaSummarized {
        /// Which saga.
        saga_uuid: Uuid,
        /// The new summary.
        summary: String,
        /// Reference time of the newest absorbed episode.
        last_summarized_episode_valid_at: Timestamp,
    },
}

impl EventKind {
    /// The variant's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::EpisodeRecorded { .. } => "episode_recorded",
            EventKind::EntityCreated { .. } => "entity_created",
            EventKind::EntityUpdated { .. } => "entity_updated",
            EventKind::FactCreated { .. } => "fact_created",
            EventKind::FactProvenanceAdded { .. } => "fact_provenance_added",
            EventKind::FactInvalidated { .. } => "fact_invalidated",
            EventKind::MentionsRecorded { .. } => "mentions_recorded",
            EventKind::SagaLinked { .. } => "saga_linked",
            EventKind::EpisodeRetracted { .. } => "episode_retracted",
            EventKind::CommunityBuilt { .. } => "community_built",
            EventKind::CommunityUpdated { .. } => "community_updated",
            EventKind::CommunityDissolved { .. } => "community_dissolved",
            EventKind::SagaSummarized { .. } => "saga_summarized",
        }
    }
}

/// Where a record sits in a log.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub struct LogPosition {
    /// Partition number.
    pub partition: u32,
    /// Offset inside the partition.
    pub offset: u64,
}

/// Everything one decision produced: one record on the graph-events log.
///
/// Writing a decision as one record makes it atomic, and lets a restarted
/// processor learn from the log which commands were already decided.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventBatch {
    /// The decided command (for episodes, the episode uuid).
    pub command_uuid: Uuid,
    /// The tenant.
    pub group_id: GroupId,
    /// Transaction time of the command record.
    pub tx_time: Timestamp,
    /// Position of the command record on the commands log.
    pub source: Option<LogPosition>,
    /// Set when the command was dead-lettered instead of decided.
    pub dead_letter: Option<String>,
    /// The events, in application order.
    pub events: Vec<GraphEvent>,
    /// What the decision cost (not part of the graph; for status and stats).
    pub stats: Option<DecisionStats>,
}

/// What one decision cost: model calls, resolutions by tier, embeddings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionStats {
    /// Model calls by prompt kind.
    pub llm_calls: std::collections::BTreeMap<String, u64>,
    /// Characters of prompt sent to the model.
    pub prompt_chars: u64,
    /// Entity resolutions by tier (`new`, `exact`, `fuzzy`, `embedding`, `llm`).
    pub resolutions: std::collections::BTreeMap<String, u64>,
    /// Texts embedded.
    pub embeddings: u64,
    /// Wall time of the decision, in microseconds.
    pub decide_micros: u64,
    /// Wall time by pipeline stage, in microseconds, so an operator sees
    /// where a slow decision spent its time (see [`DecisionStats::stage`]).
    #[serde(default)]
    pub stage_micros: std::collections::BTreeMap<String, u64>,
}

impl DecisionStats {
    /// Adds `micros` to `stage`'s time.
    pub fn stage(&mut self, stage: &'static str, micros: u64) {
        *self.stage_micros.entry(stage.to_owned()).or_default() += micros;
    }
}

impl EventBatch {
    /// Builds a batch, numbering events and deriving their ids from the command.
    pub fn new(
        command_uuid: Uuid,
        group_id: GroupId,
        tx_time: Timestamp,
        source: Option<LogPosition>,
        kinds: Vec<EventKind>,
    ) -> Self {
        let events = kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| GraphEvent {
                event_id: crate::derive_id(command_uuid, crate::IdKind::Event, i as u32),
                group_id: group_id.clone(),
                episode_uuid: command_uuid,
                tx_time,
                kind,
            })
            .collect();
        EventBatch {
            command_uuid,
            group_id,
            tx_time,
            source,
            dead_letter: None,
            events,
            stats: None,
        }
    }

    /// A batch recording that the command went to the dead-letter topic.
    pub fn dead_lettered(
        command_uuid: Uuid,
        group_id: GroupId,
        tx_time: Timestamp,
        source: Option<LogPosition>,
        reason: String,
    ) -> Self {
        EventBatch {
            dead_letter: Some(reason),
            ..EventBatch::new(command_uuid, group_id, tx_time, source, Vec::new())
        }
    }
}
