//! Episodes: the raw, timestamped inputs every derived fact points back to.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::ContentError;
use crate::{Attributes, GroupId, Timestamp};

/// What kind of data an episode carries; it selects the extraction prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EpisodeType {
    /// A chat message, `actor: text`.
    Message,
    /// Free text (a document, a note).
    Text,
    /// A JSON document.
    Json,
    /// A ready-made triple; needs no extraction.
    FactTriple,
}

impl EpisodeType {
    /// All variants, in schema order.
    pub const ALL: [EpisodeType; 4] = [
        EpisodeType::Message,
        EpisodeType::Text,
        EpisodeType::Json,
        EpisodeType::FactTriple,
    ];

    /// The wire name (`message`, `text`, `json`, `fact_triple`).
    pub fn as_str(self) -> &'static str {
        match self {
            EpisodeType::Message => "message",
            EpisodeType::Text => "text",
            EpisodeType::Json => "json",
            EpisodeType::FactTriple => "fact_triple",
        }
    }

    /// Parses a wire name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// A stored episode (graphiti's `EpisodicNode`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Episode {
    /// Stable id, assigned when the episode is accepted.
    pub uuid: Uuid,
    /// A human-readable name.
    pub name: String,
    /// The tenant.
    pub group_id: GroupId,
    /// What kind of content this is.
    pub source: EpisodeType,
    /// Where it came from, in the caller's words.
    pub source_description: String,
    /// The raw content.
    pub content: String,
    /// The reference time: when the original document was created.
    pub valid_at: Timestamp,
    /// Transaction time: when the log accepted it.
    pub created_at: Timestamp,
    /// Facts this episode created, restated or invalidated.
    pub entity_edges: Vec<Uuid>,
    /// Free-form caller metadata.
    pub metadata: Attributes,
    /// Embedding of the content, computed once by the decision that recorded
    /// the episode and carried on the log, so every projection (live,
    /// rebuilt, replayed) indexes the same vector without a model call.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::embedding::optional"
    )]
    #[schemars(skip)]
    pub content_embedding: Option<Vec<f32>>,
    /// For a conversation message, the end of the turn before it: a reply
    /// ("Yes, last week!") is found through the question it answers, so
    /// this is part of the text the episode is searched by (BM25 and its
    /// embedding). Kept with the episode, so every projection indexes the
    /// same text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub preceding_turn: Option<String>,
}

impl Episode {
    /// The longest end of the turn before a message that is kept.
    pub const MAX_PRECEDING_CHARS: usize = 400;

    /// What a message keeps of the turn before it: its last
    /// [`Episode::MAX_PRECEDING_CHARS`] characters (cut at a char boundary).
    pub fn preceding_of(previous_turn: &str) -> String {
        let skip = (previous_turn.chars().count()).saturating_sub(Self::MAX_PRECEDING_CHARS);
        let start = previous_turn.char_indices().nth(skip).map_or(0, |(i, _)| i);
        previous_turn[start..].to_owned()
    }

    /// The text the episode is searched by: the turn it follows (when it
    /// is a message), then its content.
    pub fn retrieval_text(&self) -> String {
        match &self.preceding_turn {
            Some(preceding) => format!("{preceding}\n{}", self.content),
            None => self.content.clone(),
        }
    }
}

/// A submitted episode, as it travels on the episodes log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewEpisode {
    /// Id assigned at the gateway (or by the caller, for idempotent retries).
    pub uuid: Uuid,
    /// The tenant.
    pub group_id: GroupId,
    /// A human-readable name.
    pub name: String,
    /// The raw content.
    pub content: String,
    /// What kind of content this is.
    pub source: EpisodeType,
    /// Where it came from.
    pub source_description: String,
    /// When the original document was created.
    pub reference_time: Timestamp,
    /// Explicit context episodes; `None` means "the last N of the group".
    pub previous_episode_uuids: Option<Vec<Uuid>>,
    /// The storyline this episode belongs to, by name.
    pub saga: Option<String>,
    /// Free-form caller metadata.
    pub metadata: Attributes,
}

/// The content of a `fact_triple` episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FactTriple {
    /// Source entity name.
    pub source: String,
    /// Relation name, e.g. `LIVES_IN`.
    pub relation: String,
    /// Target entity name.
    pub target: String,
    /// The fact as a sentence; derived from the triple when absent.
    #[serde(default)]
    pub fact: Option<String>,
    /// Labels of the source entity besides `Entity`.
    #[serde(default)]
    pub source_labels: Vec<String>,
    /// Labels of the target entity besides `Entity`.
    #[serde(default)]
    pub target_labels: Vec<String>,
    /// When the fact became true; defaults to the reference time.
    #[serde(default)]
    pub valid_at: Option<Timestamp>,
    /// When it stopped being true.
    #[serde(default)]
    pub invalid_at: Option<Timestamp>,
}

/// Longest entity name, relation or label a triple may carry, in characters.
pub const MAX_TRIPLE_NAME_CHARS: usize = 512;
/// Longest fact sentence a triple may carry, in characters.
pub const MAX_TRIPLE_FACT_CHARS: usize = 4096;

/// What is wrong with a triple, naming the field (`source`, `invalid_at`,
/// `target_labels[2]`, ...).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct TripleError {
    /// The offending field of the triple.
    pub field: String,
    /// What to fix.
    pub message: String,
}

impl FactTriple {
    /// Parses and validates the content of a `fact_triple` episode.
    pub fn parse(content: &str) -> Result<Self, ContentError> {
        let triple: FactTriple =
            serde_json::from_str(content).map_err(|e| ContentError::BadTriple(e.to_string()))?;
        triple
            .validate()
            .map_err(|e| ContentError::BadTriple(e.to_string()))?;
        Ok(triple)
    }

    /// The one check of a triple, whichever way it arrives (`/triplets`,
    /// a `fact_triple` episode, MCP, the CLI): names present and bounded, a
    /// given sentence not blank, and a window that ends after it starts (an
    /// empty or inverted window is refused, never stored as open-ended).
    pub fn validate(&self) -> Result<(), TripleError> {
        let bad = |field: &str, message: String| TripleError {
            field: field.to_owned(),
            message,
        };
        let name = |field: &str, value: &str| {
            if value.trim().is_empty() {
                Err(bad(field, "must not be empty".into()))
            } else if value.chars().count() > MAX_TRIPLE_NAME_CHARS {
                Err(bad(
                    field,
                    format!("longer than {MAX_TRIPLE_NAME_CHARS} characters"),
                ))
            } else {
                Ok(())
            }
        };
        name("source", &self.source)?;
        name("relation", &self.relation)?;
        name("target", &self.target)?;
        for (field, labels) in [
            ("source_labels", &self.source_labels),
            ("target_labels", &self.target_labels),
        ] {
            for (i, label) in labels.iter().enumerate() {
                name(&format!("{field}[{i}]"), label)?;
            }
        }
        if let Some(fact) = &self.fact {
            if fact.trim().is_empty() {
                return Err(bad("fact", "must not be empty when given".into()));
            }
            if fact.chars().count() > MAX_TRIPLE_FACT_CHARS {
                return Err(bad(
                    "fact",
                    format!("longer than {MAX_TRIPLE_FACT_CHARS} characters"),
                ));
            }
        }
        if let (Some(valid), Some(invalid)) = (self.valid_at, self.invalid_at)
            && invalid <= valid
        {
            return Err(bad(
                "invalid_at",
                "must be after valid_at (a fact true for no time is no fact)".into(),
            ));
        }
        Ok(())
    }

    /// The fact sentence, written from the triple when none was given
    /// (`playsFor` reads "plays for").
    pub fn sentence(&self) -> String {
        match &self.fact {
            Some(f) if !f.trim().is_empty() => f.clone(),
            _ => format!(
                "{} {} {}",
                self.source,
                crate::normalize_relation(&self.relation)
                    .to_lowercase()
                    .replace('_', " "),
                self.target
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_keeps_the_end_of_the_turn_before_it_at_char_boundaries() {
        let long = "é".repeat(1_000) + " the question?";
        let kept = Episode::preceding_of(&long);
        assert_eq!(kept.chars().count(), Episode::MAX_PRECEDING_CHARS);
        assert!(kept.ends_with("é the question?"));
        assert_eq!(Episode::preceding_of("short"), "short");

        let mut e = crate::testing::episode(&GroupId::new("g").unwrap(), uuid::Uuid::nil());
        assert_eq!(
            e.retrieval_text(),
            "Alice: how are you?\nalice: I moved to Shanghai"
        );
        e.preceding_turn = None;
        assert_eq!(e.retrieval_text(), e.content);
    }

    #[test]
    fn triple_parsing() {
        let t = FactTriple::parse(r#"{"source":"Alice","relation":"LIVES_IN","target":"Beijing"}"#)
            .unwrap();
        assert_eq!(t.sentence(), "Alice lives in Beijing");
        let t = FactTriple::parse(
            r#"{"source":"Ann Smith","relation":"playsFor","target":"FC Barcelona"}"#,
        )
        .unwrap();
        assert_eq!(t.sentence(), "Ann Smith plays for FC Barcelona");
        assert!(FactTriple::parse(r#"{"source":"Alice"}"#).is_err());
        assert!(FactTriple::parse(r#"{"source":"","relation":"R","target":"B"}"#).is_err());
        let field = |json: &str| {
            let t: FactTriple = serde_json::from_str(json).unwrap();
            t.validate().err().map(|e| e.field)
        };
        let long = "x".repeat(MAX_TRIPLE_NAME_CHARS + 1);
        assert_eq!(
            field(&format!(
                r#"{{"source":"{long}","relation":"R","target":"B"}}"#
            )),
            Some("source".into())
        );
        assert_eq!(
            field(r#"{"source":"A","relation":"R","target":"B","fact":""}"#),
            Some("fact".into())
        );
        for (valid, invalid, wrong) in [
            ("2024-01-02T00:00:00Z", "2024-01-01T00:00:00Z", true),
            ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", true),
            ("2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", false),
        ] {
            let json = format!(
                r#"{{"source":"A","relation":"R","target":"B","valid_at":"{valid}","invalid_at":"{invalid}"}}"#
            );
            assert_eq!(field(&json), wrong.then(|| "invalid_at".into()), "{json}");
            assert_eq!(FactTriple::parse(&json).is_err(), wrong);
        }
        assert!(FactTriple::parse("not json").is_err());
    }

    #[test]
    fn episode_type_names() {
        for t in EpisodeType::ALL {
            assert_eq!(EpisodeType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EpisodeType::parse("audio"), None);
    }
}
