//! Entities: the anchors at both ends of facts.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Attributes, GroupId, Timestamp};

/// The label every entity carries; custom types add a more specific one.
pub const ENTITY_LABEL: &str = "Entity";

/// An entity (graphiti's `EntityNode`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entity {
    /// Stable id.
    pub uuid: Uuid,
    /// Display name as first extracted.
    pub name: String,
    /// The tenant.
    pub group_id: GroupId,
    /// `Entity` plus custom types such as `Person`.
    pub labels: Vec<String>,
    /// Transaction time of the episode that created it.
    pub created_at: Timestamp,
    /// Embedding of the name, for resolution and search.
    #[schemars(with = "Option<()>", description = "Never returned by the API (null).")]
    #[serde(default, with = "crate::embedding::optional")]
    pub name_embedding: Option<Vec<f32>>,
    /// A rolling summary of its facts.
    pub summary: String,
    /// Typed attributes (by label).
    pub attributes: Attributes,
}

impl Entity {
    /// The most specific label (a custom type when there is one).
    pub fn entity_type(&self) -> &str {
        self.labels
            .iter()
            .find(|l| l.as_str() != ENTITY_LABEL)
            .map(String::as_str)
            .unwrap_or(ENTITY_LABEL)
    }
}

/// Lower-cases, trims and collapses inner whitespace: the key of the exact
/// tier of entity resolution (two names with the same key are one entity).
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for word in name
        .split(|c: char| c.is_whitespace())
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization() {
        assert_eq!(normalize_name("  Alice   Smith "), "alice smith");
        assert_eq!(normalize_name("ALICE smith."), "alice smith");
        assert_eq!(normalize_name("\"Acme Corp\""), "acme corp");
        assert_eq!(normalize_name("O'Brien"), "o'brien");
    }
}
