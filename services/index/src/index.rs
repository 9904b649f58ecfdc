//! [`SearchIndex`]: the text and vector indices behind one writer, one
//! commit and one checkpoint.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Instant;

use chronicle_metrics::METRICS;
use chronicle_model::GroupId;
use serde::{Deserialize, Serialize};
use tantivy::IndexWriter;
use uuid::Uuid;

use crate::text::TextIndex;
use crate::vector::{VectorOp, VectorStore, dot, normalized, stored_unit};
use crate::{Checkpoint, DocKind, Hit, IndexDoc, IndexError, IndexOptions, meta};

/// Where the tantivy files live inside the index directory.
const TEXT_DIR: &str = "text";
/// Vectors coded per step while an index loads them (small in tests, so
/// the reopen tests load in many steps).
const LOAD_CHUNK: usize = if cfg!(test) { 64 } else { 4_096 };

/// The search indices of every group: BM25 (tantivy) and cosine vectors
/// (exact or HNSW per group and kind).
///
/// One writer (the projector) calls [`upsert`](Self::upsert),
/// [`delete`](Self::delete), [`clear`](Self::clear) and
/// [`commit`](Self::commit); any number of threads search at the same
/// time. Searches see the last commit only. Vectors are stored in the text
/// index's documents, so a commit makes text, vectors and the checkpoint
/// durable at once, and a reopen rebuilds exactly that state (HNSW graphs
/// are rebuilt in the background; see [`Self::wait_for_graphs`]).
pub struct SearchIndex {
    dir: PathBuf,
    dimension: usize,
    text: TextIndex,
    options: IndexOptions,
    /// Loaded on first use (see [`Self::vectors`]).
    vectors: OnceLock<VectorStore>,
    loading: Mutex<()>,
    writer: Mutex<Writer>,
    committed: RwLock<Committed>,
}

/// Writer-side state, serialized by one lock.
struct Writer {
    tantivy: IndexWriter,
    /// Vector changes since the last commit, applied at commit.
    pending: Vec<VectorOp>,
    /// Whether anything changed since the last commit.
    dirty: bool,
}

/// What the last durable commit holds.
struct Committed {
    checkpoint: Checkpoint,
    documents: BTreeMap<DocKind, u64>,
}

/// The commit payload: an object, so fields can be added compatibly.
#[derive(Serialize, Deserialize)]
struct Payload {
    checkpoint: Checkpoint,
}

/// Sizes of the index, as of the last commit.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexStats {
    /// Searchable documents per kind (every kind present, zero included).
    pub documents: BTreeMap<DocKind, u64>,
    /// Searchable vectors.
    pub vectors: u64,
    /// (group, kind) vector sub-indices, how many of them use HNSW, and how
    /// many wait for their graph (searched exactly meanwhile).
    pub vector_sets: u64,
    /// Sub-indices searched through their HNSW graph.
    pub hnsw_sets: u64,
    /// Sub-indices large enough for a graph that is still being built.
    pub hnsw_pending: u64,
    /// Memory held by the vectors' int8 codes (HNSW sub-indices hold a
    /// second copy in their graph).
    pub vector_memory_bytes: u64,
    /// Files on disk. Vectors are stored inside the text index, so this
    /// covers both.
    pub disk_bytes: u64,
}

impl SearchIndex {
    /// Opens the index in `dir` with default options; see [`Self::open_with`].
    pub fn open(dir: &Path, dimension: usize) -> Result<Self, IndexError> {
        Self::open_with(dir, dimension, IndexOptions::default())
    }

    /// Creates the index in `dir`, or reopens it at its last commit with
    /// every committed vector back. Refuses a directory built for another
    /// dimension: mixing embedding models would silently rank garbage.
    pub fn open_with(
        dir: &Path,
        dimension: usize,
        options: IndexOptions,
    ) -> Result<Self, IndexError> {
        if dimension == 0 {
            return Err(IndexError::ZeroDimension);
        }
        validate(&options)?;
        let started = Instant::now();
        let text_dir = dir.join(TEXT_DIR);
        meta::ensure(dir, &text_dir, dimension)?;
        let (text, tantivy) = TextIndex::open(&text_dir, &options)?;
        let checkpoint = match text.committed_payload()? {
            Some(payload) if !payload.is_empty() => {
                serde_json::from_str::<Payload>(&payload)
                    .map_err(IndexError::Checkpoint)?
                    .checkpoint
            }
            _ => Checkpoint::new(),
        };
        let documents = counts(&text)?;
        let index = SearchIndex {
            dir: dir.to_path_buf(),
            dimension,
            text,
            options,
            vectors: OnceLock::new(),
            loading: Mutex::new(()),
            writer: Mutex::new(Writer {
                tantivy,
                pending: Vec::new(),
                dirty: false,
            }),
            committed: RwLock::new(Committed {
                checkpoint,
                documents,
            }),
        };
        tracing::info!(
            dir = %dir.display(),
            documents = index.committed.read()?.documents.values().sum::<u64>(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "search index opened"
        );
        Ok(index)
    }

    /// The vectors, loaded from the committed documents on first use: a
    /// process that only reads the text index (or nothing, like a CLI
    /// `facts`) never pays for them. A writer loads them before its first
    /// commit, so they always start from the committed state.
    fn vectors(&self) -> Result<&VectorStore, IndexError> {
        if let Some(v) = self.vectors.get() {
            return Ok(v);
        }
        let _loading = self.loading.lock()?;
        if let Some(v) = self.vectors.get() {
            return Ok(v);
        }
        let started = Instant::now();
        // Applied in chunks as the documents stream by: holding every `f32`
        // vector before coding them would double the memory of a large
        // index for the length of the load.
        let vectors = VectorStore::new(self.dimension, self.options.clone())?;
        let mut chunk = Vec::with_capacity(LOAD_CHUNK);
        let mut loaded = 0;
        let mut failed = None;
        self.text.for_each_vector(|kind, uuid, group, vector| {
            if failed.is_some() {
                return;
            }
            if vector.len() != self.dimension {
                failed = Some(IndexError::Corrupt("stored vector of another dimension"));
                return;
            }
            loaded += 1;
            chunk.push(VectorOp::Put {
                kind,
                uuid,
                group,
                vector: Some(Arc::from(vector)),
            });
            if chunk.len() >= LOAD_CHUNK
                && let Err(e) = vectors.apply(std::mem::take(&mut chunk))
            {
                failed = Some(e);
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        vectors.apply(chunk)?;
        tracing::info!(
            dir = %self.dir.display(),
            vectors = loaded,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "vectors loaded"
        );
        Ok(self.vectors.get_or_init(|| vectors))
    }

    /// Blocks until every HNSW graph wanted so far is built. Graphs are
    /// built in the background (after open, or when a sub-index grows past
    /// [`IndexOptions::brute_force_below`] or is compacted); until then that
    /// sub-index is searched exactly, so this is for benchmarks and tests,
    /// never needed for correct results.
    pub fn wait_for_graphs(&self) {
        if let Some(v) = self.vectors.get() {
            v.wait_for_graphs();
        }
    }

    /// The embedding dimension this index was built for.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// Adds documents, replacing any with the same (group, kind, uuid); visible
    /// after the next commit. The batch is validated first: an invalid
    /// vector rejects the whole batch and changes nothing.
    pub fn upsert(&self, docs: Vec<IndexDoc>) -> Result<(), IndexError> {
        let mut prepared = Vec::with_capacity(docs.len());
        for doc in docs {
            let unit = match &doc.vector {
                None => None,
                Some(v) if v.len() != self.dimension => {
                    return Err(IndexError::VectorDimension {
                        kind: doc.kind,
                        uuid: doc.uuid,
                        expected: self.dimension,
                        actual: v.len(),
                    });
                }
                Some(v) => Some(Arc::<[f32]>::from(stored_unit(v).ok_or(
                    IndexError::InvalidVector {
                        kind: doc.kind,
                        uuid: doc.uuid,
                    },
                )?)),
            };
            prepared.push((doc, unit));
        }
        let mut writer = self.writer.lock()?;
        writer.dirty |= !prepared.is_empty();
        for (doc, unit) in prepared {
            writer
                .tantivy
                .delete_term(self.text.key_term(doc.kind, &doc.group_id, doc.uuid));
            writer
                .tantivy
                .add_document(self.text.document(&doc, unit.as_deref()))?;
            writer.pending.push(VectorOp::Put {
                kind: doc.kind,
                uuid: doc.uuid,
                group: doc.group_id,
                vector: unit,
            });
        }
        Ok(())
    }

    /// Removes a document of `group` (a no-op if absent); visible after the
    /// next commit. Ids are per group: the same uuid elsewhere is untouched.
    pub fn delete(&self, group: &GroupId, kind: DocKind, uuid: Uuid) -> Result<(), IndexError> {
        let mut writer = self.writer.lock()?;
        writer
            .tantivy
            .delete_term(self.text.key_term(kind, group, uuid));
        writer.pending.push(VectorOp::Delete {
            kind,
            uuid,
            group: group.clone(),
        });
        writer.dirty = true;
        Ok(())
    }

    /// Drops every document, committed or pending, for a rebuild by replay;
    /// durable (and visible) at the next commit, which would normally carry
    /// the replay's checkpoint.
    pub fn clear(&self) -> Result<(), IndexError> {
        let mut writer = self.writer.lock()?;
        // Rolling back first discards queued adds and deletes, so none of
        // them can land after (or renumber around) the clear.
        writer.tantivy.rollback()?;
        writer.tantivy.delete_all_documents()?;
        writer.pending.clear();
        writer.pending.push(VectorOp::Clear);
        writer.dirty = true;
        Ok(())
    }

    /// Makes every change so far durable together with `checkpoint` (in the
    /// same tantivy commit), then visible to searches. A no-op when nothing
    /// changed and the checkpoint is the committed one.
    pub fn commit(&self, checkpoint: &Checkpoint) -> Result<(), IndexError> {
        let started = Instant::now();
        let mut writer = self.writer.lock()?;
        if !writer.dirty && self.committed.read()?.checkpoint == *checkpoint {
            return Ok(());
        }
        let vectors = self.vectors()?;
        let payload = serde_json::to_string(&Payload {
            checkpoint: checkpoint.clone(),
        })
        .map_err(IndexError::Checkpoint)?;
        let mut prepared = writer.tantivy.prepare_commit()?;
        prepared.set_payload(&payload);
        prepared.commit()?;
        let durable_ms = started.elapsed().as_secs_f64() * 1e3;
        let ops = std::mem::take(&mut writer.pending);
        let changes = ops.len();
        vectors.apply(ops)?;
        self.text.reload()?;
        let documents = counts(&self.text)?;
        *self.committed.write()? = Committed {
            checkpoint: checkpoint.clone(),
            documents,
        };
        writer.dirty = false;
        self.publish(&self.stats());
        tracing::debug!(
            changes,
            durable_ms,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "search index committed"
        );
        Ok(())
    }

    /// The checkpoint of the last durable commit (empty for a new index).
    pub fn checkpoint(&self) -> Checkpoint {
        match self.committed.read() {
            Ok(committed) => committed.checkpoint.clone(),
            // Replaced whole under the lock, so never half-written.
            Err(poisoned) => poisoned.into_inner().checkpoint.clone(),
        }
    }

    /// BM25 over `group`'s documents of `kinds` (every kind when empty),
    /// best first, equal scores by uuid then kind. `query` is free text:
    /// every input is valid, and text without any word matches nothing.
    ///
    /// Scores depend only on the searchable documents, not on how they got
    /// there (deleted versions, segment layout), so an index rebuilt by
    /// replay ranks exactly like the live one.
    pub fn text_search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        query: &str,
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        self.text.search(group, kinds_or_all(kinds), query, limit)
    }

    /// `group`'s documents of `kinds` (every kind when empty) whose vectors
    /// are most similar to `vector`, best first, equal scores by uuid then
    /// kind; the score is the exact cosine similarity. Candidates come from
    /// the vectors' int8 codes in memory (a scan below
    /// [`IndexOptions::brute_force_below`] vectors per group and kind, the
    /// HNSW graph above, which depends on insertion history) and the best
    /// of them are rescored with their stored `f32` vectors, so the same
    /// documents give the same answer.
    pub fn vector_search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        vector: &[f32],
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        if vector.len() != self.dimension {
            return Err(IndexError::QueryDimension {
                expected: self.dimension,
                actual: vector.len(),
            });
        }
        let query = normalized(vector).ok_or(IndexError::InvalidQueryVector)?;
        let candidates =
            self.vectors()?
                .search(group, kinds_or_all(kinds), &query, rescore_pool(limit))?;
        let documents: Vec<(DocKind, Uuid)> =
            candidates.iter().map(|hit| (hit.kind, hit.uuid)).collect();
        let stored = self.text.stored_vectors(group, &documents)?;
        let mut hits: Vec<Hit> = candidates
            .into_iter()
            .zip(stored)
            .map(|(hit, stored)| Hit {
                score: stored.map_or(hit.score, |v| dot(&query, &v)),
                ..hit
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| (a.uuid, a.kind).cmp(&(b.uuid, b.kind)))
        });
        hits.truncate(limit);
        Ok(hits)
    }

    /// Deleted documents still held by the searched segments.
    #[cfg(test)]
    pub(crate) fn deleted_documents(&self) -> u64 {
        self.text.deleted_documents()
    }

    /// Sizes as of the last commit (disk usage as of now).
    pub fn stats(&self) -> IndexStats {
        let documents = match self.committed.read() {
            Ok(committed) => committed.documents.clone(),
            Err(poisoned) => poisoned.into_inner().documents.clone(),
        };
        // Stats count the vectors, so they load them (a reader asking for
        // sizes wants them all).
        let figures = self.vectors().map(|v| v.figures()).unwrap_or_default();
        IndexStats {
            documents,
            vectors: figures.vectors,
            vector_sets: figures.sets,
            hnsw_sets: figures.graphs,
            hnsw_pending: figures.graphs_pending,
            vector_memory_bytes: figures.memory_bytes,
            disk_bytes: dir_size(&self.dir.join(TEXT_DIR)),
        }
    }

    /// Sets the index metrics. The on-disk split between text and vectors
    /// is an estimate (vectors live in the text index's doc store, roughly
    /// uncompressed: 4 bytes per component).
    fn publish(&self, stats: &IndexStats) {
        for (kind, count) in &stats.documents {
            METRICS
                .index_documents
                .with_label_values(&[kind.as_str()])
                .set(saturating_i64(*count));
        }
        let vector_bytes = stats.vectors * self.dimension as u64 * 4;
        METRICS
            .index_size_bytes
            .with_label_values(&["vector"])
            .set(saturating_i64(vector_bytes.min(stats.disk_bytes)));
        METRICS
            .index_size_bytes
            .with_label_values(&["text"])
            .set(saturating_i64(
                stats.disk_bytes.saturating_sub(vector_bytes),
            ));
    }
}

/// How many coded candidates are rescored exactly for `limit` results: the
/// codes' error (under 0.01 in cosine) only reorders near-ties, so a margin
/// of the same size as the answer (at least 16) catches every true top hit.
fn rescore_pool(limit: usize) -> usize {
    limit.saturating_add(limit.max(16))
}

fn validate(options: &IndexOptions) -> Result<(), IndexError> {
    // hnsw_rs exits the process on more than 256 connections.
    if !(2..=256).contains(&options.hnsw.max_connections) {
        return Err(IndexError::InvalidOptions(
            "hnsw.max_connections must be in 2..=256",
        ));
    }
    if options.hnsw.ef_construction == 0 || options.hnsw.ef_search == 0 {
        return Err(IndexError::InvalidOptions(
            "hnsw ef values must be positive",
        ));
    }
    if options.writer_threads == 0 {
        return Err(IndexError::InvalidOptions(
            "writer_threads must be positive",
        ));
    }
    Ok(())
}

fn kinds_or_all(kinds: &[DocKind]) -> &[DocKind] {
    if kinds.is_empty() {
        &DocKind::ALL
    } else {
        kinds
    }
}

fn counts(text: &TextIndex) -> Result<BTreeMap<DocKind, u64>, IndexError> {
    DocKind::ALL
        .iter()
        .map(|kind| Ok((*kind, text.count(*kind)?)))
        .collect()
}

fn saturating_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Total size of the files under `dir`; files vanishing mid-walk (merges,
/// garbage collection) are skipped.
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => dir_size(&entry.path()),
            Ok(meta) => meta.len(),
            Err(_) => 0,
        })
        .sum()
}
