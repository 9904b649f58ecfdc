//! chronicle's `EventLog`: an immutable, partitioned log of keyed records.
//!
//! Two adapters share one contract (and one conformance suite):
//! [`EmbeddedLog`] on redb for the single-process default, and `KafkaLog`
//! (cargo feature `kafka`, on by default) for distributed mode. Records are placed with Kafka's default
//! (murmur2) partitioner, so a group keeps its partition when it moves from
//! one to the other.

#![warn(missing_docs)]

mod embedded;
mod error;
#[cfg(feature = "kafka")]
mod kafka;
mod membership;
#[cfg(feature = "testing")]
pub mod testing;

use std::time::Duration;

use async_trait::async_trait;
use chronicle_model::Timestamp;

pub use embedded::{EmbeddedLog, EmbeddedLogOptions};
pub use error::{BoxError, LogError};
#[cfg(feature = "kafka")]
pub use kafka::{KafkaConfig, KafkaLog};
pub use membership::{Assignment, Membership, RELEASE_TIMEOUT, Release};

/// The standard topic names under a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topics {
    /// Commands (episodes) appended by the gateway.
    pub episodes: String,
    /// Decisions appended by the processor.
    pub graph_events: String,
    /// Records that could not be processed, with their reason.
    pub dlq: String,
}

impl Topics {
    /// `<prefix>.episodes`, `<prefix>.graph-events`, `<prefix>.dlq`.
    pub fn with_prefix(prefix: &str) -> Self {
        Topics {
            episodes: format!("{prefix}.episodes"),
            graph_events: format!("{prefix}.graph-events"),
            dlq: format!("{prefix}.dlq"),
        }
    }
}

impl Default for Topics {
    fn default() -> Self {
        Topics::with_prefix("chronicle")
    }
}

/// A record to append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    /// Partitioning key (the group id).
    pub key: Vec<u8>,
    /// Opaque payload (an Avro single-object record).
    pub payload: Vec<u8>,
}

/// Where an appended record landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Its partition.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: u64,
    /// The log's timestamp for it (the transaction time of what it causes).
    pub timestamp: Timestamp,
}

/// A record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its partition.
    pub partition: u32,
    /// Its offset in the partition.
    pub offset: u64,
    /// The log's timestamp for it.
    pub timestamp: Timestamp,
    /// Partitioning key.
    pub key: Vec<u8>,
    /// Payload.
    pub payload: Vec<u8>,
}

/// A consumer-group offset to commit together with an append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommit {
    /// Consumer group.
    pub group: String,
    /// Consumed topic.
    pub topic: String,
    /// Consumed partition.
    pub partition: u32,
    /// The next offset to consume.
    pub next_offset: u64,
}

/// An immutable, partitioned log with consumer-group offsets.
#[async_trait]
pub trait EventLog: Send + Sync + 'static {
    /// Creates `topic` with `partitions` partitions unless it exists; returns
    /// its partition count (an existing topic keeps its own).
    async fn create_topic(&self, topic: &str, partitions: u32) -> Result<u32, LogError>;

    /// The partition count of an existing topic.
    async fn partition_count(&self, topic: &str) -> Result<u32, LogError>;

    /// Appends records durably and in order: when this returns, every record
    /// survives a crash. Records with the same key go to the same partition in
    /// call order. With `commit`, the consumer offset is committed atomically
    /// with the records where the adapter can (embedded: one write
    /// transaction), and right after them otherwise.
    async fn append(
        &self,
        topic: &str,
        records: Vec<NewRecord>,
        commit: Option<OffsetCommit>,
    ) -> Result<Vec<Appended>, LogError>;

    /// Up to `max` records of a partition from `offset` on; waits up to `wait`
    /// for the first one when there is none yet.
    async fn read(
        &self,
        topic: &str,
        partition: u32,
        offset: u64,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<Record>, LogError>;

    /// The offset the next record appended to the partition will get.
    async fn end_offset(&self, topic: &str, partition: u32) -> Result<u64, LogError>;

    /// The first offset whose timestamp is at or after `at` (the end offset
    /// when there is none).
    async fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        at: Timestamp,
    ) -> Result<u64, LogError>;

    /// Records that `group` has consumed `topic`/`partition` up to `next_offset`.
    async fn commit_offset(&self, commit: OffsetCommit) -> Result<(), LogError>;

    /// Joins consumer group `group` on `topic`: the partitions this process
    /// should work on, and changes of them. Different members of one group
    /// own disjoint partitions.
    async fn join(&self, group: &str, topic: &str) -> Result<Box<dyn Membership>, LogError>;

    /// The next offset `group` should consume, if it ever committed one.
    async fn committed_offset(
        &self,
        group: &str,
        topic: &str,
        partition: u32,
    ) -> Result<Option<u64>, LogError>;
}

/// Records per read of [`scan`].
const SCAN_CHUNK: usize = 1024;

/// Hands each record of `topic`/`partition` from `from` up to the end offset
/// the partition has when the scan starts to `visit`, in order; returns the
/// offset after the last record visited. Recovery and the read commands scan
/// partitions this way. It stops early when a read finds nothing (a
/// transaction marker can hold the last offsets before the end).
pub async fn scan(
    log: &dyn EventLog,
    topic: &str,
    partition: u32,
    from: u64,
    mut visit: impl FnMut(Record) + Send,
) -> Result<u64, LogError> {
    let end = log.end_offset(topic, partition).await?;
    let mut offset = from;
    while offset < end {
        let records = log
            .read(topic, partition, offset, SCAN_CHUNK, Duration::ZERO)
            .await?;
        if records.is_empty() {
            break;
        }
        for record in records {
            if record.offset >= end {
                return Ok(offset);
            }
            offset = record.offset + 1;
            visit(record);
        }
    }
    Ok(offset)
}

/// Kafka's default partitioner for keyed records: `toPositive(murmur2(key)) % partitions`.
pub fn partition_for(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2::murmur2(key, murmur2::KAFKA_SEED) & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitioner_matches_kafka() {
        // Values of org.apache.kafka.common.utils.Utils.murmur2 (Kafka's UtilsTest).
        let cases: [(&str, i32); 4] = [
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(
                murmur2::murmur2(key.as_bytes(), murmur2::KAFKA_SEED) as i32,
                expected,
                "{key}"
            );
        }
        assert_eq!(
            partition_for(b"21", 7),
            ((-973932308i32 as u32) & 0x7fff_ffff) % 7
        );
    }
}
