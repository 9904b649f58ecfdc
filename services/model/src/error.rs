//! Typed errors of the model layer.

use thiserror::Error;

/// Why a timestamp was rejected.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum TimestampError {
    /// Not RFC 3339.
    #[error(
        "`{input}` is not an RFC 3339 timestamp ({reason}); expected e.g. 2025-03-01T09:30:00Z"
    )]
    Parse {
        /// The offending text (at most 64 characters).
        input: String,
        /// The parser's explanation.
        reason: String,
    },
    /// Outside years 1..=9999.
    #[error("timestamp {0} µs since the epoch is outside years 0001..=9999")]
    OutOfRange(i64),
}

/// Why a group id was rejected.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GroupIdError {
    /// The empty string.
    #[error("group_id must not be empty")]
    Empty,
    /// Longer than [`crate::GroupId::MAX_LEN`].
    #[error("group_id is {len} bytes long; at most {max} are allowed")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A character outside `[A-Za-z0-9_.-]`.
    #[error(
        "group_id contains {ch:?} at position {position}; only ASCII letters, digits, '_', '-' and '.' are allowed"
    )]
    InvalidChar {
        /// The character.
        ch: char,
        /// Its char index.
        position: usize,
    },
    /// Starts with '.' or '-': `.`/`..` read as paths and `-x` as a flag
    /// wherever the id becomes a file name or a command-line argument.
    #[error("group_id must start with an ASCII letter, digit or '_', not {first:?}")]
    BadStart {
        /// The first character.
        first: char,
    },
}

/// Why an episode's content could not be understood.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ContentError {
    /// A `fact_triple` episode whose content is not a triple.
    #[error(
        "fact_triple content must be JSON {{\"source\", \"relation\", \"target\"[, \"fact\", \"valid_at\", \"invalid_at\"]}}: {0}"
    )]
    BadTriple(String),
    /// A `json` episode whose content is not JSON.
    #[error("json episode content is not valid JSON: {0}")]
    BadJson(String),
}
