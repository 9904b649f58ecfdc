//! Entity and edge types: what the extractor looks for, and the rules fact
//! resolution applies without asking a model (cardinality).

use chronicle_model::ENTITY_LABEL;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The type system of a deployment, loaded from a JSON or YAML schema file.
///
/// Entity types are passed to the extractor by numeric id; id 0 is always
/// the generic `Entity`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ontology {
    /// Entity types; index = type id, `Entity` first.
    #[serde(default)]
    pub entity_types: Vec<EntityType>,
    /// Edge (relation) types with their rules.
    #[serde(default)]
    pub edge_types: Vec<EdgeType>,
    /// Entity types whose entities are not kept.
    #[serde(default)]
    pub excluded_entity_types: Vec<String>,
    /// Extra instructions appended to the extraction prompt.
    #[serde(default)]
    pub custom_instructions: Option<String>,
}

/// A custom entity type such as `Person`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntityType {
    /// The label, e.g. `Person`.
    pub name: String,
    /// What belongs to it (shown to the model).
    #[serde(default)]
    pub description: String,
    /// Typed attributes its entities carry.
    #[serde(default)]
    pub attributes: Vec<AttributeField>,
}

/// One typed attribute of an entity type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttributeField {
    /// Attribute name.
    pub name: String,
    /// What it means (shown to the model).
    #[serde(default)]
    pub description: String,
    /// Its JSON type.
    #[serde(rename = "type", default)]
    pub kind: AttributeKind,
}

/// JSON type of an attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttributeKind {
    /// Text.
    #[default]
    String,
    /// Whole number.
    Integer,
    /// Any number.
    Number,
    /// True or false.
    Boolean,
}

impl AttributeKind {
    /// Whether a JSON value has this type.
    pub fn accepts(self, v: &serde_json::Value) -> bool {
        match self {
            AttributeKind::String => v.is_string(),
            AttributeKind::Integer => v.is_i64() || v.is_u64(),
            AttributeKind::Number => v.is_number(),
            AttributeKind::Boolean => v.is_boolean(),
        }
    }
}

/// How many current facts of a relation one source entity may have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cardinality {
    /// Any number (likes, owns).
    #[default]
    Many,
    /// At most one at a time (lives in, works at): a new fact invalidates the
    /// previous one deterministically, without a model call.
    One,
}

/// A relation type such as `LIVES_IN`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EdgeType {
    /// SCREAMING_SNAKE_CASE name.
    pub name: String,
    /// What it means (shown to the model).
    #[serde(default)]
    pub description: String,
    /// Cardinality per source entity.
    #[serde(default)]
    pub cardinality: Cardinality,
}

/// Why a schema file was rejected.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum OntologyError {
    /// Not JSON or YAML of the expected shape.
    #[error("schema file is not valid: {0}")]
    Parse(String),
    /// A type name appears twice.
    #[error("type `{0}` is declared twice")]
    Duplicate(String),
    /// An excluded type is not declared.
    #[error("excluded entity type `{0}` is not declared")]
    UnknownExcluded(String),
    /// An empty type name.
    #[error("a type has an empty name")]
    EmptyName,
}

impl Default for Ontology {
    /// People, places and organizations, with `LIVES_IN` and `WORKS_AT` as
    /// one-at-a-time relations.
    fn default() -> Self {
        let ty = |name: &str, description: &str| EntityType {
            name: name.into(),
            description: description.into(),
            attributes: Vec::new(),
        };
        let edge = |name: &str, description: &str, cardinality| EdgeType {
            name: name.into(),
            description: description.into(),
            cardinality,
        };
        Ontology {
            entity_types: vec![
                ty(
                    ENTITY_LABEL,
                    "Anything worth remembering that fits no other type.",
                ),
                ty("Person", "A human being."),
                ty("Location", "A city, country, address or other place."),
                ty("Organization", "A company, institution or group."),
            ],
            edge_types: vec![
                edge("LIVES_IN", "The person's current home.", Cardinality::One),
                edge(
                    "WORKS_AT",
                    "The person's current employer.",
                    Cardinality::One,
                ),
                edge("MARRIED_TO", "Marriage.", Cardinality::One),
                edge("LIKES", "Likes or loves.", Cardinality::Many),
                edge("OWNS", "Owns.", Cardinality::Many),
            ],
            excluded_entity_types: Vec::new(),
            custom_instructions: None,
        }
    }
}

impl Ontology {
    /// Parses a schema file (YAML, or JSON which is YAML too) and validates it.
    pub fn parse(text: &str) -> Result<Self, OntologyError> {
        let mut o: Ontology =
            serde_norway::from_str(text).map_err(|e| OntologyError::Parse(e.to_string()))?;
        if o.entity_types
            .first()
            .is_none_or(|t| t.name != ENTITY_LABEL)
        {
            o.entity_types.retain(|t| t.name != ENTITY_LABEL);
            o.entity_types.insert(
                0,
                EntityType {
                    name: ENTITY_LABEL.into(),
                    description: "Anything worth remembering that fits no other type.".into(),
                    attributes: Vec::new(),
                },
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for name in o
            .entity_types
            .iter()
            .map(|t| &t.name)
            .chain(o.edge_types.iter().map(|t| &t.name))
        {
            if name.trim().is_empty() {
                return Err(OntologyError::EmptyName);
            }
            if !seen.insert(name.clone()) {
                return Err(OntologyError::Duplicate(name.clone()));
            }
        }
        for x in &o.excluded_entity_types {
            if !o.entity_types.iter().any(|t| &t.name == x) {
                return Err(OntologyError::UnknownExcluded(x.clone()));
            }
        }
        Ok(o)
    }

    /// The type name of an id; unknown ids are `Entity`.
    pub fn entity_type_name(&self, id: u32) -> &str {
        self.entity_types
            .get(id as usize)
            .map(|t| t.name.as_str())
            .unwrap_or(ENTITY_LABEL)
    }

    /// The id of a type name.
    pub fn entity_type_id(&self, name: &str) -> Option<u32> {
        self.entity_types
            .iter()
            .position(|t| t.name == name)
            .map(|i| i as u32)
    }

    /// Whether entities of this type are dropped.
    pub fn is_excluded(&self, type_name: &str) -> bool {
        self.excluded_entity_types.iter().any(|x| x == type_name)
    }

    /// A declared edge type.
    pub fn edge_type(&self, name: &str) -> Option<&EdgeType> {
        self.edge_types.iter().find(|t| t.name == name)
    }

    /// Cardinality of a relation (`Many` when undeclared).
    pub fn cardinality(&self, relation: &str) -> Cardinality {
        self.edge_type(relation)
            .map(|t| t.cardinality)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_and_json_schema_files() {
        let yaml = r#"
entity_types:
  - name: Person
    description: A human.
    attributes:
      - {name: age, type: integer, description: Age in years}
edge_types:
  - {name: LIVES_IN, cardinality: one}
excluded_entity_types: [Person]
custom_instructions: Prefer full names.
"#;
        let o = Ontology::parse(yaml).unwrap();
        assert_eq!(o.entity_types[0].name, "Entity");
        assert_eq!(o.entity_type_id("Person"), Some(1));
        assert_eq!(o.cardinality("LIVES_IN"), Cardinality::One);
        assert_eq!(o.cardinality("LIKES"), Cardinality::Many);
        assert!(o.is_excluded("Person"));
        let json = r#"{"entity_types":[{"name":"Pet","attributes":[{"name":"species"}]}]}"#;
        assert_eq!(Ontology::parse(json).unwrap().entity_type_name(1), "Pet");
    }

    #[test]
    fn bad_schemas() {
        assert!(matches!(
            Ontology::parse("entity_types: 3"),
            Err(OntologyError::Parse(_))
        ));
        assert!(matches!(
            Ontology::parse("unknown_key: 1"),
            Err(OntologyError::Parse(_))
        ));
        assert_eq!(
            Ontology::parse("entity_types: [{name: A}, {name: A}]"),
            Err(OntologyError::Duplicate("A".into()))
        );
        assert_eq!(
            Ontology::parse("excluded_entity_types: [Ghost]"),
            Err(OntologyError::UnknownExcluded("Ghost".into()))
        );
    }
}
