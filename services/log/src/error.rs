//! Log errors.

use thiserror::Error;

/// A client error kept as the cause of a [`LogError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a log operation failed.
#[derive(Debug, Error)]
pub enum LogError {
    /// The topic does not exist (topics are created explicitly).
    #[error("topic `{0}` does not exist; create it first")]
    UnknownTopic(String),
    /// The partition number is not below the topic's partition count.
    #[error("topic `{topic}` has {count} partitions; partition {partition} does not exist")]
    NoSuchPartition {
        /// The topic.
        topic: String,
        /// The requested partition.
        partition: u32,
        /// The topic's partition count.
        count: u32,
    },
    /// A topic needs at least one partition.
    #[error("a topic needs at least one partition")]
    NoPartitions,
    /// The embedded storage engine failed.
    #[error("embedded log storage at {path}")]
    Storage {
        /// The database file.
        path: String,
        /// The engine's error.
        #[source]
        source: BoxError,
    },
    /// A stored record is malformed (the file was corrupted outside chronicle).
    #[error("corrupt record at {topic}/{partition}@{offset}: {reason}")]
    Corrupt {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The log was closed while the call was in flight.
    #[error("the log is closed")]
    Closed,
    /// The Kafka client or broker failed.
    #[error("kafka: {context}")]
    Kafka {
        /// What the log was doing, and with what.
        context: String,
        /// The client's error, when it raised one.
        #[source]
        source: Option<BoxError>,
    },
}
