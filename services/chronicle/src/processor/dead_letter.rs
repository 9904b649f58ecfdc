//! The dead-letter topic: where a record that cannot be processed goes, with
//! its reason, so that the log moves on without losing it.

use base64::Engine;
use chronicle_log::{EventLog, NewRecord, Record};
use chronicle_metrics::METRICS;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct DeadLetter<'a> {
    /// Why it could not be processed.
    pub reason: &'a str,
    /// Source topic.
    pub topic: &'a str,
    /// Source partition.
    pub partition: u32,
    /// Source offset.
    pub offset: u64,
    /// The record key, as text.
    pub key: String,
    /// The original payload, base64.
    pub payload_base64: String,
}

/// Appends a dead-letter record for a log record.
///
/// One writer for the processor (undecodable commands, failed decisions)
/// and the projector (undecodable graph events).
pub async fn dead_letter(
    log: &dyn EventLog,
    dlq: &str,
    topic: &str,
    record: &Record,
    reason: &str,
) -> anyhow::Result<()> {
    let letter = DeadLetter {
        reason,
        topic,
        partition: record.partition,
        offset: record.offset,
        key: String::from_utf8_lossy(&record.key).into_owned(),
        payload_base64: base64::engine::general_purpose::STANDARD.encode(&record.payload),
    };
    log.append(
        dlq,
        vec![NewRecord {
            key: record.key.clone(),
            payload: serde_json::to_vec(&letter)?,
        }],
        None,
    )
    .await?;
    METRICS.log_appends.with_label_values(&["dlq"]).inc();
    tracing::warn!(
        topic,
        partition = record.partition,
        offset = record.offset,
        reason,
        "dead-lettered"
    );
    Ok(())
}
