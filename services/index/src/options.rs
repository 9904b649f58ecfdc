//! Tuning knobs, with defaults measured on 384-dimension embeddings.

/// How the index is built; [`Default`] suits the projector.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexOptions {
    /// A (group, kind) vector sub-index with fewer live vectors than this is
    /// scanned exactly; at or above it an HNSW graph is built (and dropped
    /// again below half of it). At 384 dimensions an exact scan costs about
    /// 70 ns per vector (memory-bound) with perfect recall: 0.7 ms at 10k,
    /// 1.4 ms at 20k, where hnsw_rs is no faster; at 50k HNSW is 2-4x faster
    /// but costs ~1 ms of CPU per inserted vector and its rebuild on open.
    pub brute_force_below: usize,
    /// HNSW parameters for sub-indices above the threshold.
    pub hnsw: HnswParams,
    /// Memory budget of the tantivy writer, in bytes (at least 15 MB per
    /// thread).
    pub writer_memory_bytes: usize,
    /// tantivy indexing threads. One keeps small frequent commits to one
    /// new segment each.
    pub writer_threads: usize,
}

impl Default for IndexOptions {
    fn default() -> Self {
        IndexOptions {
            brute_force_below: 20_000,
            hnsw: HnswParams::default(),
            writer_memory_bytes: 64 << 20,
            writer_threads: 1,
        }
    }
}

/// Parameters of the HNSW graphs (Malkov & Yashunin).
#[derive(Clone, Debug, PartialEq)]
pub struct HnswParams {
    /// Neighbours kept per node and layer (`M`); at most 256.
    pub max_connections: usize,
    /// Candidate list size while inserting; higher builds slower. 200 found
    /// no better neighbours than 100 on embedding-like data, at 1.5-2x the
    /// build time.
    pub ef_construction: usize,
    /// Candidate list size while searching (raised to the fetch size); 128
    /// keeps recall@10 at about 0.98 on embedding-like data at 20k vectors.
    pub ef_search: usize,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            max_connections: 16,
            ef_construction: 100,
            ef_search: 128,
        }
    }
}
