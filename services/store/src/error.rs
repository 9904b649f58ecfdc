//! Store errors.

use thiserror::Error;

/// Why a store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The storage engine failed.
    #[error("graph store at {path}: {message}")]
    Storage {
        /// Where.
        path: String,
        /// The engine's explanation.
        message: String,
    },
    /// A stored record does not decode (written by another version, or corrupted).
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The remote database is unreachable or answered with an error.
    #[error("database: {0}")]
    Database(String),
    /// The request took longer than the configured timeout.
    #[error("database request timed out after {0:?}")]
    Timeout(std::time::Duration),
}
