//! Facts: relations between two entities with a valid-time and a
//! transaction-time window.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Attributes, GroupId, Timestamp, Window};

/// A fact (graphiti's `EntityEdge`).
///
/// A contradicted fact is never deleted: it gets `invalid_at` (valid time)
/// and `expired_at` (transaction time) and stays searchable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// Stable id.
    pub uuid: Uuid,
    /// The tenant.
    pub group_id: GroupId,
    /// Source entity.
    pub source_node_uuid: Uuid,
    /// Target entity.
    pub target_node_uuid: Uuid,
    /// Relation name, e.g. `LIVES_IN`.
    pub name: String,
    /// The fact as a sentence.
    pub fact: String,
    /// Embedding of the sentence.
    #[serde(default, with = "crate::embedding::optional")]
    pub fact_embedding: Option<Vec<f32>>,
    /// Provenance: every episode that asserted it, in order.
    pub episodes: Vec<Uuid>,
    /// Transaction time it was first asserted.
    pub created_at: Timestamp,
    /// When it became true in the world.
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true in the world.
    pub invalid_at: Option<Timestamp>,
    /// When the system learned it no longer holds.
    pub expired_at: Option<Timestamp>,
    /// Reference time of the episode that created it.
    pub reference_time: Timestamp,
    /// Typed attributes.
    pub attributes: Attributes,
    /// Who invalidated it, so a retraction of that episode can restore it.
    pub invalidated_by: Option<Invalidation>,
    /// The windows its episodes stated, once a restatement has widened it
    /// (empty while the fact has only the window it was created with): the
    /// valid window is their hull, and a retraction narrows it again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stated_windows: Vec<StatedWindow>,
}

/// The valid window one episode stated for a fact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatedWindow {
    /// The stating episode.
    pub episode_uuid: Uuid,
    /// The start it stated.
    pub valid_at: Option<Timestamp>,
    /// The end it stated.
    pub invalid_at: Option<Timestamp>,
}

/// The audit record of an invalidation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invalidation {
    /// The newer fact that contradicted this one, if any.
    pub by_fact: Option<Uuid>,
    /// The episode whose decision invalidated it.
    pub by_episode: Uuid,
    /// `invalid_at` before the invalidation.
    pub prior_invalid_at: Option<Timestamp>,
}

impl Fact {
    /// `[valid_at, invalid_at)`.
    pub fn valid_window(&self) -> Window {
        Window::new(self.valid_at, self.invalid_at)
    }

    /// The window a restatement stating `stated` widens this fact to, or
    /// `None` if it adds nothing: a known start moves earlier and a known end
    /// later (the union of overlapping or adjacent windows); an unknown bound
    /// in the restatement says nothing and widens nothing. An invalidated
    /// fact is never widened: its end is a contradiction's, not a statement's.
    pub fn widened_by(&self, stated: &Window) -> Option<Window> {
        if self.invalidated_by.is_some() || !self.valid_window().touches(stated) {
            return None;
        }
        let start = match (self.valid_at, stated.start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, _) => a,
        };
        let end = match (self.invalid_at, stated.end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, _) => a,
        };
        let widened = Window::new(start, end);
        (widened != self.valid_window()).then_some(widened)
    }

    /// Records that `episode` stated `stated` for this fact and widens the
    /// valid window to the hull of every stated window.
    pub fn restate(&mut self, episode: Uuid, stated: Window) {
        if self.widened_by(&stated).is_none() {
            return;
        }
        if self.stated_windows.is_empty()
            && let Some(first) = self.episodes.first()
        {
            self.stated_windows.push(StatedWindow {
                episode_uuid: *first,
                valid_at: self.valid_at,
                invalid_at: self.invalid_at,
            });
        }
        // An unknown bound says nothing: it stands for the fact's own.
        self.stated_windows.retain(|w| w.episode_uuid != episode);
        self.stated_windows.push(StatedWindow {
            episode_uuid: episode,
            valid_at: stated.start.or(self.valid_at),
            invalid_at: stated.end.or(self.invalid_at),
        });
        let hull = self.stated_hull();
        (self.valid_at, self.invalid_at) = (hull.start, hull.end);
    }

    /// Forgets the window `episode` stated (its retraction): the valid
    /// window shrinks to the hull of the others; an invalidation keeps its
    /// end unless the hull now ends earlier.
    pub fn forget_statement(&mut self, episode: Uuid) {
        let before = self.stated_windows.len();
        self.stated_windows.retain(|w| w.episode_uuid != episode);
        if self.stated_windows.len() == before || self.stated_windows.is_empty() {
            return;
        }
        let hull = self.stated_hull();
        if self.stated_windows.len() == 1 {
            self.stated_windows.clear();
        }
        self.valid_at = hull.start;
        match self.invalidated_by.as_mut() {
            Some(inv) => {
                inv.prior_invalid_at = hull.end;
                if let (Some(end), Some(at)) = (hull.end, self.invalid_at) {
                    self.invalid_at = Some(at.min(end));
                }
            }
            None => self.invalid_at = hull.end,
        }
    }

    /// The smallest window holding every stated window.
    fn stated_hull(&self) -> Window {
        let start = self
            .stated_windows
            .iter()
            .map(|w| w.valid_at)
            .reduce(|a, b| a.zip(b).map(|(a, b)| a.min(b)))
            .flatten();
        let end = self
            .stated_windows
            .iter()
            .map(|w| w.invalid_at)
            .reduce(|a, b| a.zip(b).map(|(a, b)| a.max(b)))
            .flatten();
        Window::new(start, end)
    }

    /// `[created_at, expired_at)`.
    pub fn known_window(&self) -> Window {
        Window::new(Some(self.created_at), self.expired_at)
    }

    /// Was the fact true in the world at instant `t`?
    pub fn is_valid_at(&self, t: Timestamp) -> bool {
        self.valid_window().contains(t)
    }

    /// Did the system hold this fact (not yet expired) at transaction time `t`?
    pub fn was_known_at(&self, t: Timestamp) -> bool {
        self.known_window().contains(t)
    }

    /// Neither invalidated nor ended in the world.
    pub fn is_current(&self) -> bool {
        self.invalid_at.is_none() && self.expired_at.is_none()
    }

    /// The fact as the system recorded it at transaction time `t`: `None` if
    /// it was not yet asserted, without a later invalidation otherwise.
    /// (Provenance is left whole; filter it by the episodes' `created_at`.)
    pub fn as_known_at(&self, t: Timestamp) -> Option<Fact> {
        if self.created_at > t {
            return None;
        }
        let mut fact = self.clone();
        if fact.expired_at.is_some_and(|e| e > t) {
            fact.invalid_at = fact
                .invalidated_by
                .as_ref()
                .and_then(|i| i.prior_invalid_at);
            fact.expired_at = None;
            fact.invalidated_by = None;
        }
        Some(fact)
    }
}

/// `lives in` / `livesIn` / `LIVES-IN` → `LIVES_IN`: one spelling per
/// relation, so restatements and contradictions compare equal names.
pub fn normalize_relation(relation: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in relation.trim().chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                out.push('_');
            }
            out.extend(c.to_uppercase());
            prev_lower = c.is_lowercase();
        } else {
            if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_end_matches('_').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relation_names() {
        assert_eq!(normalize_relation("lives in"), "LIVES_IN");
        assert_eq!(normalize_relation("livesIn"), "LIVES_IN");
        assert_eq!(normalize_relation("LIVES-IN"), "LIVES_IN");
        assert_eq!(normalize_relation("  "), "");
    }

    use crate::GroupId;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn fact() -> Fact {
        Fact {
            uuid: Uuid::from_u128(1),
            group_id: GroupId::new("g").unwrap(),
            source_node_uuid: Uuid::from_u128(2),
            target_node_uuid: Uuid::from_u128(3),
            name: "LIVES_IN".into(),
            fact: "Alice lives in Beijing".into(),
            fact_embedding: None,
            episodes: vec![Uuid::from_u128(9)],
            created_at: ts("2025-01-10T00:00:00Z"),
            valid_at: Some(ts("2025-01-05T00:00:00Z")),
            invalid_at: Some(ts("2025-03-01T00:00:00Z")),
            expired_at: Some(ts("2025-03-02T00:00:00Z")),
            reference_time: ts("2025-01-05T00:00:00Z"),
            attributes: Default::default(),
            invalidated_by: Some(Invalidation {
                by_fact: Some(Uuid::from_u128(4)),
                by_episode: Uuid::from_u128(10),
                prior_invalid_at: None,
            }),
            stated_windows: Vec::new(),
        }
    }

    #[test]
    fn valid_and_known_time() {
        let f = fact();
        assert!(f.is_valid_at(ts("2025-02-28T00:00:00Z")));
        assert!(!f.is_valid_at(ts("2025-03-01T00:00:00Z")));
        assert!(!f.is_valid_at(ts("2025-01-01T00:00:00Z")));
        assert!(!f.was_known_at(ts("2025-01-09T00:00:00Z")));
        assert!(f.was_known_at(ts("2025-03-01T12:00:00Z")));
        assert!(!f.was_known_at(ts("2025-03-02T00:00:00Z")));
        assert!(!f.is_current());
    }

    #[test]
    fn as_known_at_undoes_later_invalidations() {
        let f = fact();
        assert!(f.as_known_at(ts("2025-01-01T00:00:00Z")).is_none());
        let before = f.as_known_at(ts("2025-02-01T00:00:00Z")).unwrap();
        assert!(before.is_current());
        assert_eq!(f.as_known_at(ts("2025-04-01T00:00:00Z")).unwrap(), f);
    }
}
