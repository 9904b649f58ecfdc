//! What happened to each accepted command: pending, processed (with
//! counts), or dead-lettered (with the reason). An accepted episode is never
//! silently dropped: it is pending until a decision or a dead-letter record
//! for it is on the graph-events log.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::RwLock;

use lru::LruCache;

use chronicle_model::{EventBatch, EventKind, GroupId, LogPosition};
use serde::Serialize;
use uuid::Uuid;

/// Counts of what one decision changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CommandStatus {
    /// Accepted on the log, not decided yet.
    Pending {
        /// Where it is on the episodes log.
        position: LogPosition,
    },
    /// Decided; its events are on the graph-events log.
    Processed {
        /// What the decision changed; absent for a command decided before
        /// this process's status window (its episode is in the graph).
        #[serde(skip_serializing_if = "Option::is_none")]
        counts: Option<DecisionCounts>,
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
///
/// Bounded: pending commands stay until decided (an accepted command is
/// never forgotten), decided ones are kept for the most recent
/// [`StatusBoard::DEFAULT_DECIDED`]; an older one is answered from the
/// graph (see `app::command_status`).
#[derive(Debug)]
pub struct StatusBoard {
    inner: RwLock<Board>,
}

#[derive(Debug)]
struct Board {
    pending: HashMap<(GroupId, Uuid), LogPosition>,
    decided: LruCache<(GroupId, Uuid), CommandStatus>,
}

impl Default for StatusBoard {
    fn default() -> Self {
        Self::with_capacity(Self::DEFAULT_DECIDED)
    }
}

impl StatusBoard {
    /// Decided commands remembered by default.
    pub const DEFAULT_DECIDED: usize = 100_000;

    /// A board remembering the last `decided` decisions.
    pub fn with_capacity(decided: usize) -> Self {
        StatusBoard {
            inner: RwLock::new(Board {
                pending: HashMap::new(),
                decided: LruCache::new(NonZeroUsize::new(decided.max(1)).expect("at least one")),
            }),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Board> {
        // A panic elsewhere while holding the lock leaves consistent maps.
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Board> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a command as pending unless it is already decided.
    pub fn pending(&self, uuid: Uuid, group: &GroupId, position: LogPosition) {
        let mut board = self.write();
        let key = (group.clone(), uuid);
        if !board.decided.contains(&key) {
            board.pending.entry(key).or_insert(position);
        }
    }

    /// Records a decision (or a dead letter) found on the graph-events log.
    pub fn decided(&self, batch: &EventBatch) {
        let status = match &batch.dead_letter {
            Some(reason) => CommandStatus::DeadLettered {
                reason: reason.clone(),
            },
            None => CommandStatus::Processed {
                counts: Some(DecisionCounts::of(batch)),
            },
        };
        let mut board = self.write();
        let key = (batch.group_id.clone(), batch.command_uuid);
        board.pending.remove(&key);
        board.decided.put(key, status);
    }

    /// The status of a command of `group` if this board knows it; another
    /// group's command is unknown.
    pub fn get(&self, group: &GroupId, uuid: Uuid) -> Option<CommandStatus> {
        let board = self.read();
        let key = (group.clone(), uuid);
        if let Some(position) = board.pending.get(&key) {
            return Some(CommandStatus::Pending {
                position: *position,
            });
        }
        board.decided.peek(&key).cloned()
    }

    /// Pending, processed and dead-lettered counts, for one group or all
    /// (decided ones within the board's window).
    pub fn summary(&self, group: Option<&GroupId>) -> (usize, usize, usize) {
        let board = self.read();
        let mine = |g: &GroupId| group.is_none_or(|x| x == g);
        let mut out = (board.pending.keys().filter(|(g, _)| mine(g)).count(), 0, 0);
        for ((g, _), s) in board.decided.iter() {
            if !mine(g) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decided_commands_are_bounded_and_pending_ones_are_never_forgotten() {
        let board = StatusBoard::with_capacity(2);
        let g = GroupId::new("g").unwrap();
        let at = |offset| LogPosition {
            partition: 0,
            offset,
        };
        for i in 0..5u128 {
            board.pending(Uuid::from_u128(i), &g, at(i as u64));
        }
        for i in 0..3u128 {
            board.decided(&EventBatch::new(
                Uuid::from_u128(i),
                g.clone(),
                "2025-01-01T00:00:00Z".parse().unwrap(),
                None,
                vec![],
            ));
        }
        assert_eq!(board.get(&g, Uuid::from_u128(0)), None, "evicted");
        assert!(matches!(
            board.get(&g, Uuid::from_u128(2)),
            Some(CommandStatus::Processed { .. })
        ));
        assert!(matches!(
            board.get(&g, Uuid::from_u128(4)),
            Some(CommandStatus::Pending { .. })
        ));
        assert_eq!(board.summary(Some(&g)), (2, 2, 0));
        assert_eq!(
            board.get(&GroupId::new("h").unwrap(), Uuid::from_u128(4)),
            None
        );
        // a decided command re-read from the log does not turn pending again
        board.pending(Uuid::from_u128(2), &g, at(9));
        assert!(matches!(
            board.get(&g, Uuid::from_u128(2)),
            Some(CommandStatus::Processed { .. })
        ));
    }
}
