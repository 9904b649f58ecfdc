//! The one error type of this crate.

use std::path::PathBuf;

use uuid::Uuid;

use crate::DocKind;

/// Why an index operation failed.
///
/// Input errors (`VectorDimension`, `InvalidVector`, `QueryDimension`) leave
/// the index untouched; the others are service errors the caller should
/// surface (and, for the projector, stop on).
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The directory holds an index built for another embedding dimension.
    #[error("index at {path} was built with dimension {on_disk}, opened with {requested}")]
    DimensionMismatch {
        /// The index directory.
        path: PathBuf,
        /// The dimension recorded in the directory's metadata.
        on_disk: usize,
        /// The dimension the caller opened it with.
        requested: usize,
    },
    /// The directory was written by an incompatible version of this crate.
    #[error("index at {path} has format {found}, this build reads format {supported}")]
    UnsupportedFormat {
        /// The index directory.
        path: PathBuf,
        /// The format version recorded in the directory's metadata.
        found: u32,
        /// The only format version this build reads.
        supported: u32,
    },
    /// The options cannot work (named in the message).
    #[error("invalid index options: {0}")]
    InvalidOptions(&'static str),
    /// A dimension of zero was requested.
    #[error("vector dimension must be at least 1")]
    ZeroDimension,
    /// A document's vector does not have the index's dimension.
    #[error("{kind} {uuid}: vector has {actual} dimensions, index expects {expected}")]
    VectorDimension {
        /// The rejected document's kind.
        kind: DocKind,
        /// The rejected document's id.
        uuid: Uuid,
        /// The index's dimension.
        expected: usize,
        /// The length of the document's vector.
        actual: usize,
    },
    /// A document's vector has a zero norm or a non-finite component, so it
    /// has no direction to compare.
    #[error("{kind} {uuid}: vector is zero or not finite")]
    InvalidVector {
        /// The rejected document's kind.
        kind: DocKind,
        /// The rejected document's id.
        uuid: Uuid,
    },
    /// A query vector does not have the index's dimension.
    #[error("query vector has {actual} dimensions, index expects {expected}")]
    QueryDimension {
        /// The index's dimension.
        expected: usize,
        /// The length of the query vector.
        actual: usize,
    },
    /// A query vector has a zero norm or a non-finite component.
    #[error("query vector is zero or not finite")]
    InvalidQueryVector,
    /// Reading or writing a file of the index failed.
    #[error("i/o on {path}")]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// What the operating system reported.
        #[source]
        source: std::io::Error,
    },
    /// The index metadata file cannot be parsed.
    #[error("index metadata at {path} is unreadable")]
    Meta {
        /// The metadata file.
        path: PathBuf,
        /// Why its JSON could not be read (or written).
        #[source]
        source: serde_json::Error,
    },
    /// The directory holds a text index but no metadata: not ours, or damaged.
    #[error("{path} holds a text index but no metadata file")]
    MissingMeta {
        /// The index directory.
        path: PathBuf,
    },
    /// The checkpoint stored in the last commit cannot be parsed.
    #[error("checkpoint in the last commit is unreadable")]
    Checkpoint(#[source] serde_json::Error),
    /// A stored document lacks a field this crate always writes.
    #[error("stored document is malformed: {0}")]
    Corrupt(&'static str),
    /// The HNSW builder thread could not be started.
    #[error("spawning the graph builder thread")]
    Thread(#[source] std::io::Error),
    /// tantivy failed.
    #[error("text index")]
    Tantivy(#[from] tantivy::TantivyError),
    /// A thread panicked while holding an index lock; the in-memory state
    /// may be inconsistent, so reopen the index.
    #[error("index lock poisoned by a panic")]
    Poisoned,
}

impl<T> From<std::sync::PoisonError<T>> for IndexError {
    fn from(_: std::sync::PoisonError<T>) -> Self {
        IndexError::Poisoned
    }
}
