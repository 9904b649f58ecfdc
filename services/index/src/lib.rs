//! chronicle's search indices: BM25 over text (tantivy) and cosine
//! similarity over embeddings (exact scans for small sub-indices, hnsw_rs
//! for large ones), both filtered by group.
//!
//! The index ranks; it does not hold records. The projector upserts
//! [`IndexDoc`]s (ids, group, kind, text, vector) and commits them together
//! with its graph-events [`Checkpoint`]; search asks for [`Hit`]s and loads
//! the records from the graph store.
//!
//! Modules, in reading order: `doc` (what is indexed), `index`
//! ([`SearchIndex`]: writer, commit, checkpoint), `text` (tantivy schema
//! and queries), `vector` (per-(group, kind) sub-indices, exact or HNSW,
//! graphs built by a background thread), `meta` (the dimension a directory
//! was built for), [`mod@bench`] (timing helpers).

#![warn(missing_docs)]

pub mod bench;
mod doc;
mod error;
mod index;
mod meta;
mod options;
mod text;
mod vector;

pub use doc::{Checkpoint, DocKind, Hit, IndexDoc};
pub use error::IndexError;
pub use index::{IndexStats, SearchIndex};
pub use options::{HnswParams, IndexOptions};

#[cfg(test)]
mod tests;
