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
        path: PathBuf,
        on_disk: usize,
        requested: usize,
    },
    /// The directory was written by an incompatible version of this crate.
    #[error("index at {path} has format {found}, this build reads format {supported}")]
    UnsupportedFormat {
        path: PathBuf,
        found: u32,
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
        kind: DocKind,
        uuid: Uuid,
        expected: usize,
        actual: usize,
    },
    /// A document's vector has a zero norm or a non-finite component, so it
    /// has no direction to compare.
    #[error("{kind} {uuid}: vector is zero or not finite")]
    InvalidVector { kind: DocKind, uuid: Uuid },
    /// A query vector does not have the index's dimension.
    #[error("query vector has {actual} dimensions, index expects {expected}")]
    QueryDimension { expected: usize, actual: usize },
    /// A query vector has a zero norm or a non-finite component.
    #[error("query vector is zero or not finite")]
    InvalidQueryVector,
    /// Reading or writing a file of the index failed.
    #[error("i/o on {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The index metadata file cannot be parsed.
    #[error("index metadata at {path} is unreadable")]
    Meta {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The directory holds a text index but no metadata: not ours, or damaged.
    #[error("{path} holds a text index but no metadata file")]
    MissingMeta { path: PathBuf },
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
