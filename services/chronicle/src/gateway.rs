//! The gateway: validates submissions at the edge and appends them to the
//! episodes log, keyed by group. Nothing is accepted unless it is durably on
//! the log; nothing malformed gets that far.

use std::sync::Arc;

use chronicle_log::NewRecord;
use chronicle_metrics::METRICS;
use chronicle_model::{
    Attributes, Command, ContentError, EpisodeType, FactTriple, GroupId, IdKind, LogPosition,
    NewEpisode, Timestamp, derive_named_id,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use uuid::Uuid;

use crate::node::Node;

/// Longest episode content accepted, in bytes.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024;
/// Longest name, description or saga name accepted, in characters.
pub const MAX_NAME_CHARS: usize = 512;

/// A submitted episode as JSON (one line of an ingest file, or an HTTP body).
#[derive(Clone, Debug, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeInput {
    /// The tenant (an ingest line carries it; HTTP takes it from the path).
    #[serde(default)]
    pub group_id: Option<String>,
    /// A human-readable name.
    #[serde(default)]
    pub name: Option<String>,
    /// The content (`actor: text` for messages); at most 256 KiB.
    #[serde(default)]
    #[schemars(required)]
    pub content: Option<String>,
    /// When the original document was created (RFC 3339); now by default.
    /// Give it (or `uuid`) to make retries idempotent.
    #[serde(default)]
    #[schemars(with = "Option<chronicle_model::Timestamp>")]
    pub reference_time: Option<String>,
    /// `message` (default), `text`, `json` or `fact_triple`.
    #[serde(default)]
    #[schemars(with = "Option<chronicle_model::EpisodeType>")]
    pub source: Option<String>,
    /// Where it came from.
    #[serde(default)]
    pub source_description: Option<String>,
    /// A caller-chosen id (makes retries idempotent); derived from the content otherwise.
    #[serde(default)]
    pub uuid: Option<Uuid>,
    /// Explicit context episodes.
    #[serde(default)]
    pub previous_episode_uuids: Option<Vec<Uuid>>,
    /// The storyline it belongs to.
    #[serde(default)]
    pub saga: Option<String>,
    /// Free-form metadata (a JSON object).
    #[serde(default)]
    pub metadata: Option<Attributes>,
}

/// A field that failed validation.
#[derive(Clone, Debug, Error, PartialEq, Eq, Serialize)]
#[error("{field}: {message}")]
pub struct InputError {
    /// The offending field.
    pub field: String,
    /// What is wrong and what is expected.
    pub message: String,
}

impl InputError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            field: field.into(),
            message: message.into(),
        }
    }
}

fn bounded(field: &str, value: Option<String>) -> Result<String, InputError> {
    let v = value.unwrap_or_default();
    if v.chars().count() > MAX_NAME_CHARS {
        return Err(InputError::new(
            field,
            format!("longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(v)
}

/// Parses a group id, naming the field on error.
pub fn parse_group(field: &str, id: &str) -> Result<GroupId, InputError> {
    GroupId::new(id).map_err(|e| InputError::new(field, e.to_string()))
}

/// Parses an RFC 3339 timestamp, naming the field on error.
pub fn parse_time(field: &str, text: &str) -> Result<Timestamp, InputError> {
    text.parse()
        .map_err(|e: chronicle_model::TimestampError| InputError::new(field, e.to_string()))
}

impl EpisodeInput {
    /// Validates the input into a command. `group` overrides the body's
    /// group (HTTP path); `now` is the default reference time when allowed.
    pub fn into_command(
        self,
        group: Option<&GroupId>,
        now: Option<Timestamp>,
    ) -> Result<NewEpisode, InputError> {
        let group_id = match (group, &self.group_id) {
            (Some(g), Some(body)) if body != g.as_str() => {
                return Err(InputError::new(
                    "group_id",
                    format!("`{body}` does not match the group in the path `{g}`"),
                ));
            }
            (Some(g), _) => g.clone(),
            (None, Some(body)) => parse_group("group_id", body)?,
            (None, None) => return Err(InputError::new("group_id", "missing")),
        };
        let content = self.content.unwrap_or_default();
        if content.trim().is_empty() {
            return Err(InputError::new("content", "must not be empty"));
        }
        if content.len() > MAX_CONTENT_BYTES {
            return Err(InputError::new(
                "content",
                format!(
                    "{} bytes; at most {MAX_CONTENT_BYTES} are accepted",
                    content.len()
                ),
            ));
        }
        let source = match self.source.as_deref() {
            None => EpisodeType::Message,
            Some(s) => EpisodeType::parse(s).ok_or_else(|| {
                InputError::new(
                    "source",
                    format!("`{s}` is not one of message, text, json, fact_triple"),
                )
            })?,
        };
        match source {
            EpisodeType::FactTriple => {
                let triple: FactTriple = serde_json::from_str(&content).map_err(|e| {
                    InputError::new(
                        "content",
                        ContentError::BadTriple(e.to_string()).to_string(),
                    )
                })?;
                triple
                    .validate()
                    .map_err(|e| InputError::new(format!("content.{}", e.field), e.message))?;
            }
            EpisodeType::Json => {
                serde_json::from_str::<serde_json::Value>(&content).map_err(|e| {
                    InputError::new(
                        "content",
                        format!("source is json but content is not JSON: {e}"),
                    )
                })?;
            }
            _ => {}
        }
        let reference_time = match (self.reference_time.as_deref(), now) {
            (Some(t), _) => parse_time("reference_time", t)?,
            (None, Some(now)) => now,
            (None, None) => {
                return Err(InputError::new(
                    "reference_time",
                    "missing (RFC 3339, e.g. 2025-03-01T09:30:00Z)",
                ));
            }
        };
        let name = bounded("name", self.name)?;
        let source_description = bounded("source_description", self.source_description)?;
        let saga = match self.saga {
            Some(s) if s.trim().is_empty() => {
                return Err(InputError::new("saga", "must not be empty when given"));
            }
            Some(s) => Some(bounded("saga", Some(s))?),
            None => None,
        };
        let uuid = self.uuid.unwrap_or_else(|| {
            let key = format!(
                "{}\u{0}{}\u{0}{}\u{0}{}",
                name,
                reference_time.as_micros(),
                source.as_str(),
                content
            );
            derive_named_id(group_id.as_str(), IdKind::Episode, &key)
        });
        if uuid.is_nil() {
            return Err(InputError::new("uuid", "must not be the nil uuid"));
        }
        Ok(NewEpisode {
            uuid,
            group_id,
            name,
            content,
            source,
            source_description,
            reference_time,
            previous_episode_uuids: self.previous_episode_uuids,
            saga,
            metadata: self.metadata.unwrap_or_default(),
        })
    }
}

/// The id of the retraction of an episode. Derived, not random: retrying a
/// retraction (over HTTP or MCP) appends the same command, which is decided once.
pub fn retraction_id(group: &GroupId, episode_uuid: Uuid) -> Uuid {
    derive_named_id(
        group.as_str(),
        IdKind::Episode,
        &format!("retract\u{0}{episode_uuid}"),
    )
}

/// Where an accepted command landed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Receipt {
    /// The command (episode) id.
    pub uuid: Uuid,
    /// Its partition on the episodes log.
    pub partition: u32,
    /// Its offset.
    pub offset: u64,
}

/// Appends commands to the episodes log.
#[derive(Clone)]
pub struct Gateway {
    node: Arc<Node>,
}

impl Gateway {
    /// A gateway on a node.
    pub fn new(node: Arc<Node>) -> Self {
        Gateway { node }
    }

    /// Appends commands durably (in order per group); returns their positions.
    pub async fn submit(&self, commands: Vec<Command>) -> anyhow::Result<Vec<Receipt>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        let records = commands
            .iter()
            .map(|c| NewRecord {
                key: c.group_id().as_str().as_bytes().to_vec(),
                payload: self.node.commands.encode(c),
            })
            .collect();
        // Counted before the append is awaited: the processor may decide a
        // record before this call returns, and `processed` must never read
        // ahead of `appended`. A failed append (the caller gets a 5xx) is the
        // rare over-count, and `chronicle_log_append_failures_total` says so.
        for c in &commands {
            METRICS
                .episodes_appended
                .with_label_values(&[c.name()])
                .inc();
            METRICS.log_appends.with_label_values(&["episodes"]).inc();
        }
        let appended = self
            .node
            .log
            .append(&self.node.topics.episodes, records, None)
            .await
            .inspect_err(|_| {
                METRICS
                    .log_append_failures
                    .with_label_values(&["episodes"])
                    .inc_by(commands.len() as u64)
            })?;
        let mut receipts = Vec::with_capacity(commands.len());
        for (c, a) in commands.iter().zip(appended) {
            let position = LogPosition {
                partition: a.partition,
                offset: a.offset,
            };
            self.node.status.pending(c.uuid(), c.group_id(), position);
            receipts.push(Receipt {
                uuid: c.uuid(),
                partition: a.partition,
                offset: a.offset,
            });
        }
        Ok(receipts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(json: &str) -> Result<NewEpisode, InputError> {
        serde_json::from_str::<EpisodeInput>(json)
            .map_err(|e| InputError::new("body", e.to_string()))?
            .into_command(None, None)
    }

    #[test]
    fn valid_input_and_stable_ids() {
        let a = input(
            r#"{"group_id":"g1","content":"Alice: hi","reference_time":"2025-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        let b = input(
            r#"{"group_id":"g1","content":"Alice: hi","reference_time":"2025-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(a.uuid, b.uuid, "a retried submission keeps its id");
        assert_eq!(a.source, EpisodeType::Message);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                r#"{"content":"x","reference_time":"2025-01-01T00:00:00Z"}"#,
                "group_id",
            ),
            (
                r#"{"group_id":"bad id","content":"x","reference_time":"2025-01-01T00:00:00Z"}"#,
                "group_id",
            ),
            (
                r#"{"group_id":"g","content":"  ","reference_time":"2025-01-01T00:00:00Z"}"#,
                "content",
            ),
            (
                r#"{"group_id":"g","content":"x","reference_time":"yesterday"}"#,
                "reference_time",
            ),
            (r#"{"group_id":"g","content":"x"}"#, "reference_time"),
            (
                r#"{"group_id":"g","content":"x","reference_time":"2025-01-01T00:00:00Z","source":"audio"}"#,
                "source",
            ),
            (
                r#"{"group_id":"g","content":"x","reference_time":"2025-01-01T00:00:00Z","source":"fact_triple"}"#,
                "content",
            ),
            (
                r#"{"group_id":"g","content":"{","reference_time":"2025-01-01T00:00:00Z","source":"json"}"#,
                "content",
            ),
            (
                r#"{"group_id":"g","content":"x","reference_time":"2025-01-01T00:00:00Z","bogus":1}"#,
                "body",
            ),
            (
                r#"{"group_id":"g","content":"x","reference_time":"2025-01-01T00:00:00Z","saga":""}"#,
                "saga",
            ),
        ];
        for (json, field) in cases {
            assert_eq!(input(json).unwrap_err().field, field, "{json}");
        }
        let g = GroupId::new("other").unwrap();
        let e = serde_json::from_str::<EpisodeInput>(r#"{"group_id":"g","content":"x"}"#)
            .unwrap()
            .into_command(Some(&g), Some("2025-01-01T00:00:00Z".parse().unwrap()))
            .unwrap_err();
        assert_eq!(e.field, "group_id");
    }
}
