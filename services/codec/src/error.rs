//! Decoding errors.

use thiserror::Error;

/// Why a log record could not be decoded (or a value not encoded).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// Shorter than the single-object header.
    #[error("record is {len} bytes long, shorter than the {need}-byte Avro single-object header")]
    Truncated {
        /// Bytes present.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Does not start with `C3 01`.
    #[error("record does not start with the Avro single-object marker C3 01 (found {0:02X?})")]
    NotSingleObject([u8; 2]),
    /// Written with a schema this reader does not know.
    #[error(
        "record was written with an unknown schema (fingerprint {0}); upgrade this reader or register the writer schema"
    )]
    UnknownFingerprint(String),
    /// The Avro body is malformed.
    #[error("malformed Avro body: {0}")]
    Avro(String),
    /// Bytes left after the datum.
    #[error("{0} unexpected bytes after the Avro datum")]
    TrailingBytes(usize),
    /// The datum decoded but a field does not fit the model.
    #[error("field `{field}`: {reason}")]
    Field {
        /// Dotted path of the field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl CodecError {
    pub(crate) fn field(field: impl Into<String>, reason: impl ToString) -> Self {
        CodecError::Field {
            field: field.into(),
            reason: reason.to_string(),
        }
    }
}
