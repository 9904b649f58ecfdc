//! What happened to each accepted command: pending, processed (with
//! counts), or dead-lettered (with the reason). An accepted episode is never
//! silently dropped: it is pending until a decision or a dead-letter record
//! for it is on the graph-events log.

use std::collections::HashMap;
use std::sync::RwLock;

use chronicle_model::{EventBatch, EventKind, GroupId, LogPosition};
use serde::Serialize;
use uuid::Uuid;

/// Counts of what one decision changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DecisionCounts {
    /// Events in the decision.
    pub events: usize,
    /// Entities created.
    pub entities_created: usize,
    /// Facts created.
    pub facts_created: usize,
    /// Existing facts restated.
    pub facts_restated: usize,
    /// Facts invalidated.
    pub facts_invalidated: usize,
}

impl DecisionCounts {
    /// Counts the events of a batch.
    pub fn of(batch: &EventBatch) -> Self {
        let mut c = DecisionCounts {
            events: batch.events.len(),
            ..Default::default()
        };
        for e in &batch.events {
            match e.kind {
                EventKind::EntityCreated { .. } => c.entities_created += 1,
                EventKind::FactCreated { .. } => c.facts_created += 1,
                EventKind::FactProvenanceAdded { .. } => c.facts_restated += 1,
                EventKind::FactInvalidated { .. } => c.facts_invalidated += 1,
                _ => {}
            }
        }
        c
    }
}

/// The life of one command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CommandStatus {
    /// Accepted on the log, not decided yet.
    Pending {
        /// Where it is on the episodes log.
        position: LogPosition,
    },
    /// Decided; its events are on the graph-events log.
    Processed {
        /// What the decision changed.
        counts: DecisionCounts,
    },
    /// Could not be processed; the record is on the dead-letter topic.
    DeadLettered {
        /// Why.
        reason: String,
    },
}

/// Statuses of the commands this process has seen, by (group, command id):
/// ids are scoped to a tenant, so the same uuid in two groups is two
/// commands, and nothing here tells one group about the other's.
#[derive(Debug, Default)]
pub struct StatusBoard {
    map: RwLock<HashMap<(GroupId, Uuid), CommandStatus>>,
}

impl StatusBoard {
    /// Records a command as pending unless it is already decided.
    pub fn pending(&self, uuid: Uuid, group: &GroupId, position: LogPosition) {
        let mut map = self.map.write().expect("status lock");
        map.entry((group.clone(), uuid))
            .or_insert(CommandStatus::Pending { position });
    }

    /// Records a decision (or a dead letter) found on the graph-events log.
    pub fn decided(&self, batch: &EventBatch) {
        let status = match &batch.dead_letter {
            Some(reason) => CommandStatus::DeadLettered {
                reason: reason.clone(),
            },
            None => CommandStatus::Processed {
                counts: DecisionCounts::of(batch),
            },
        };
        self.map
            .write()
            .expect("status lock")
            .insert((batch.group_id.clone(), batch.command_uuid), status);
    }

    /// The status of a command of `group`; another group's command is unknown.
    pub fn get(&self, group: &GroupId, uuid: Uuid) -> Option<CommandStatus> {
        self.map
            .read()
            .expect("status lock")
            .get(&(group.clone(), uuid))
            .cloned()
    }

    /// Pending, processed and dead-lettered counts, for one group or all.
    pub fn summary(&self, group: Option<&GroupId>) -> (usize, usize, usize) {
        let map = self.map.read().expect("status lock");
        let mut out = (0, 0, 0);
        for ((g, _), s) in map.iter() {
            if group.is_some_and(|x| x != g) {
                continue;
            }
            match s {
                CommandStatus::Pending { .. } => out.0 += 1,
                CommandStatus::Processed { .. } => out.1 += 1,
                CommandStatus::DeadLettered { .. } => out.2 += 1,
            }
        }
        out
    }
}
