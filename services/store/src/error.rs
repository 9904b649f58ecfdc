//! Store errors.

use thiserror::Error;

/// A driver error kept as the cause of a [`StoreError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The storage engine failed.
    #[error("graph store at {path}")]
    Storage {
        /// Where.
        path: String,
        /// The engine's error.
        #[source]
        source: BoxError,
    },
    /// A stored record does not decode (written by another version, or corrupted).
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The store could not complete an operation for a reason of its own (a
    /// value outside a column's range, a fold that would not converge): no
    /// driver error stands behind it.
    #[error("graph store: {0}")]
    Internal(String),
    /// The request took longer than the configured timeout.
    #[error("database request timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// No database node could serve the request: nodes down or unreachable,
    /// too few replicas alive for the consistency level, or overloaded.
    /// Worth retrying later.
    #[error("database unavailable while {op}")]
    Unavailable {
        /// What the store was doing.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// Replicas did not answer in time (a server-side timeout). A write may
    /// or may not have been applied; retrying it is safe because every
    /// write of the store is idempotent.
    #[error("database replicas timed out while {op}")]
    ReplicaTimeout {
        /// What the store was doing.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// The database refused the request (invalid statement or schema, batch
    /// too large, unauthorized): retrying will not help.
    #[error("database rejected the request while {op}")]
    Rejected {
        /// What the store was doing.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// A database request failed for another reason (a driver or protocol
    /// error, a server bug).
    #[error("database request failed while {op}")]
    Request {
        /// What the store was doing.
        op: &'static str,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// The keyspace does not exist or lacks chronicle's tables.
    #[error(
        "keyspace `{keyspace}` has no chronicle schema; run `chronicle --store scylla://HOST:PORT/{keyspace} migrate`"
    )]
    SchemaMissing {
        /// The keyspace.
        keyspace: String,
        /// The driver's error.
        #[source]
        source: BoxError,
    },
    /// A store setting is invalid (URI, consistency, replication).
    #[error("invalid store configuration: {0}")]
    Config(String),
}
