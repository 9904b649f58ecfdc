//! Avro single-object encoding of chronicle's log records.
//!
//! Each record starts with the two marker bytes `C3 01` and the 8-byte
//! CRC-64-AVRO (Rabin) fingerprint of its writer schema, so a reader can tell
//! schema versions apart: it resolves any writer schema it knows to its own
//! reader schema and rejects an unknown fingerprint with a typed error.
//!
//! The schemas live in `schemas/avro/`; the mapping between the model and Avro
//! values is written out by hand in [`command`] and [`event`] so that every
//! field's encoding is explicit and reviewable.

#![warn(missing_docs)]

mod command;
mod error;
mod event;
mod value;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use apache_avro::Schema;
use apache_avro::rabin::Rabin;
use apache_avro::types::Value;

pub use error::CodecError;

/// The episodes-log record schema (`schemas/avro/command.avsc`).
pub const COMMAND_SCHEMA: &str = include_str!("../../../schemas/avro/command.avsc");
/// The graph-events record schema (`schemas/avro/event_batch.avsc`).
pub const EVENT_BATCH_SCHEMA: &str = include_str!("../../../schemas/avro/event_batch.avsc");
/// Earlier graph-events schemas (`schemas/avro/history/`): the log is
/// immutable, so every version that ever wrote to it stays readable.
pub const EVENT_BATCH_EARLIER_SCHEMAS: &[&str] = &[
    include_str!("../../../schemas/avro/history/event_batch.v1.avsc"),
    // v2 → v3: episodes carry their content embedding.
    include_str!("../../../schemas/avro/history/event_batch.v2.avsc"),
    // v3 → v4: restatements that widen a fact carry the window they stated.
    include_str!("../../../schemas/avro/history/event_batch.v3.avsc"),
    // v4 → v5: a message carries the end of the turn before it.
    include_str!("../../../schemas/avro/history/event_batch.v4.avsc"),
    // v5 → v6: embeddings as bytes (two a component), not lists of floats.
    include_str!("../../../schemas/avro/history/event_batch.v5.avsc"),
];

/// Single-object encoding marker.
const MARKER: [u8; 2] = [0xC3, 0x01];
const HEADER_LEN: usize = 10;

/// No single decoded string, byte array or array may claim more than this;
/// it bounds memory on hostile input.
const MAX_ALLOCATION_BYTES: usize = 64 * 1024 * 1024;

/// A model type with a hand-written Avro mapping.
pub trait AvroRecord: Sized {
    /// The writer (and default reader) schema, as JSON.
    const SCHEMA_JSON: &'static str;
    /// Every earlier writer schema still found in logs; a new codec reads
    /// them, resolving to [`Self::SCHEMA_JSON`].
    const EARLIER_SCHEMAS: &'static [&'static str] = &[];
    /// The model value as an Avro value of [`Self::SCHEMA_JSON`].
    fn to_avro(&self) -> Value;
    /// Reads a value resolved to [`Self::SCHEMA_JSON`] (fields are taken by
    /// name, so a newer reader schema with extra fields reads fine).
    fn from_avro(value: Value) -> Result<Self, CodecError>;
}

/// Encoder and decoder for one record type.
pub struct AvroCodec<T> {
    reader: Arc<Schema>,
    fingerprint: [u8; 8],
    writers: HashMap<[u8; 8], Arc<Schema>>,
    _record: PhantomData<fn() -> T>,
}

impl<T> Clone for AvroCodec<T> {
    fn clone(&self) -> Self {
        AvroCodec {
            reader: self.reader.clone(),
            fingerprint: self.fingerprint,
            writers: self.writers.clone(),
            _record: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for AvroCodec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AvroCodec(fingerprint={})", hex(&self.fingerprint))
    }
}

/// The 8-byte Rabin fingerprint of a schema's parsing canonical form.
pub fn fingerprint(schema: &Schema) -> [u8; 8] {
    let bytes = schema.fingerprint::<Rabin>().bytes;
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[..8]);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl<T: AvroRecord> Default for AvroCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: AvroRecord> AvroCodec<T> {
    /// A codec that writes and reads the current schema.
    pub fn new() -> Self {
        apache_avro::util::max_allocation_bytes(MAX_ALLOCATION_BYTES);
        let schema = Schema::parse_str(T::SCHEMA_JSON).expect("bundled schema parses");
        T::EARLIER_SCHEMAS
            .iter()
            .fold(Self::with_reader_schema(schema), |codec, earlier| {
                codec
                    .with_known_writer(earlier)
                    .expect("bundled schema parses")
            })
    }

    /// A codec whose reader (and writer) schema is `schema` — for tests of
    /// schema evolution and for tools that pin an older version.
    pub fn with_reader_schema(schema: Schema) -> Self {
        let fingerprint = fingerprint(&schema);
        let reader = Arc::new(schema);
        let mut writers = HashMap::new();
        writers.insert(fingerprint, reader.clone());
        AvroCodec {
            reader,
            fingerprint,
            writers,
            _record: PhantomData,
        }
    }

    /// Teaches the reader another writer schema (an older or newer version).
    pub fn with_known_writer(mut self, schema_json: &str) -> Result<Self, CodecError> {
        let schema = Schema::parse_str(schema_json).map_err(|e| CodecError::Avro(e.to_string()))?;
        self.writers.insert(fingerprint(&schema), Arc::new(schema));
        Ok(self)
    }

    /// The fingerprint this codec writes.
    pub fn fingerprint(&self) -> [u8; 8] {
        self.fingerprint
    }

    /// Encodes one record: header plus Avro binary datum.
    pub fn encode(&self, record: &T) -> Vec<u8> {
        self.encode_value(record.to_avro())
            .expect("the hand-written mapping produces values of its own schema")
    }

    /// Encodes an Avro value of the reader schema (used by evolution tests).
    pub fn encode_value(&self, value: Value) -> Result<Vec<u8>, CodecError> {
        let body = apache_avro::to_avro_datum(&self.reader, value)
            .map_err(|e| CodecError::Avro(e.to_string()))?;
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        out.extend_from_slice(&MARKER);
        out.extend_from_slice(&self.fingerprint);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Decodes one record, resolving its writer schema to the reader schema.
    pub fn decode(&self, bytes: &[u8]) -> Result<T, CodecError> {
        T::from_avro(self.decode_value(bytes)?)
    }

    /// Decodes one record to an Avro value of the reader schema.
    pub fn decode_value(&self, bytes: &[u8]) -> Result<Value, CodecError> {
        if bytes.len() < HEADER_LEN {
            return Err(CodecError::Truncated {
                len: bytes.len(),
                need: HEADER_LEN,
            });
        }
        if bytes[..2] != MARKER {
            return Err(CodecError::NotSingleObject([bytes[0], bytes[1]]));
        }
        let mut fp = [0u8; 8];
        fp.copy_from_slice(&bytes[2..HEADER_LEN]);
        let writer = self
            .writers
            .get(&fp)
            .ok_or_else(|| CodecError::UnknownFingerprint(hex(&fp)))?;
        let mut body = &bytes[HEADER_LEN..];
        let reader = (fp != self.fingerprint).then_some(self.reader.as_ref());
        let value = apache_avro::from_avro_datum(writer, &mut body, reader)
            .map_err(|e| CodecError::Avro(e.to_string()))?;
        if !body.is_empty() {
            return Err(CodecError::TrailingBytes(body.len()));
        }
        Ok(value)
    }
}

/// The codec of the episodes (commands) log.
pub type CommandCodec = AvroCodec<chronicle_model::Command>;
/// The codec of the graph-events log.
pub type EventBatchCodec = AvroCodec<chronicle_model::EventBatch>;

#[cfg(test)]
mod tests;
