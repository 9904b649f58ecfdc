//! One vector sub-index: the live vectors of one (group, kind).
//!
//! Small sets are scanned exactly; large ones get an HNSW graph. hnsw_rs
//! cannot delete, so a replaced or deleted vector leaves a tombstoned slot
//! the graph still holds; searches over-fetch and drop tombstones, and the
//! set is compacted (graph rebuilt) once tombstones outnumber live vectors.
//!
//! A graph is never built from scratch under the set's lock: `maintain`
//! only marks the set as wanting one, a builder copies a [`Snapshot`],
//! builds off-lock and `install`s it, adding slots appended meanwhile. Until
//! then the set is scanned exactly: slower, never wrong.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use hnsw_rs::hnsw::Hnsw;
use uuid::Uuid;

use super::math::{CodeDot, code_len, quantize, query_dot};
use crate::HnswParams;

/// Below this many tombstones a set is never compacted (not worth it).
const MIN_DEAD_TO_COMPACT: usize = 64;
/// Upper bound on HNSW layers (hnsw_rs caps it at 16 too).
const MAX_LAYERS: usize = 16;
/// Graph insertions of at least this many vectors run on rayon's pool.
const PARALLEL_INSERT_MIN: usize = 128;
/// A from-scratch build checks for cancellation between chunks this large.
const BUILD_CHUNK: usize = 2_048;

pub(crate) type Graph = Hnsw<'static, i8, CodeDot>;

/// The live vectors of a set at one moment, for an off-lock graph build.
pub(crate) struct Snapshot {
    epoch: u64,
    len: usize,
    items: Vec<(Vec<i8>, usize)>,
}

/// Slot-addressed unit vectors, as int8 codes (`math::quantize`), with
/// tombstones and an optional graph. Scores are approximate; the index
/// rescores the best of them exactly.
pub(crate) struct VectorSet {
    /// Length of one code.
    stride: usize,
    /// Slot-major codes: slot `s` is `data[s * stride..][..stride]`.
    data: Vec<i8>,
    ids: Vec<Uuid>,
    alive: Vec<bool>,
    slot_of: HashMap<Uuid, usize>,
    graph: Option<Graph>,
    /// Slots below this are in the graph (all of them after `maintain`).
    indexed: usize,
    /// Set when the set is large enough for a graph that is not built yet.
    wants_graph: bool,
    /// Bumped by compaction, which renumbers slots: a snapshot of another
    /// epoch cannot be installed.
    epoch: u64,
}

impl VectorSet {
    pub(crate) fn new(dimension: usize) -> Self {
        VectorSet {
            stride: code_len(dimension),
            data: Vec::new(),
            ids: Vec::new(),
            alive: Vec::new(),
            slot_of: HashMap::new(),
            graph: None,
            indexed: 0,
            wants_graph: false,
            epoch: 0,
        }
    }

    /// Live vectors.
    pub(crate) fn live(&self) -> usize {
        self.slot_of.len()
    }

    /// Whether searches go through an HNSW graph.
    pub(crate) fn has_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// The live code of `uuid`, if any.
    #[cfg(test)]
    pub(crate) fn get(&self, uuid: &Uuid) -> Option<&[i8]> {
        self.slot_of.get(uuid).map(|&slot| self.code(slot))
    }

    fn code(&self, slot: usize) -> &[i8] {
        &self.data[slot * self.stride..(slot + 1) * self.stride]
    }

    /// Sets the vector of `uuid` (a unit vector of the set's dimension). An
    /// unchanged code costs nothing; a changed one tombstones the old slot.
    pub(crate) fn put(&mut self, uuid: Uuid, vector: &[f32]) {
        let code = quantize(vector);
        debug_assert_eq!(code.len(), self.stride);
        if let Some(&slot) = self.slot_of.get(&uuid) {
            if self.code(slot) == code.as_slice() {
                return;
            }
            self.alive[slot] = false;
        }
        let slot = self.ids.len();
        self.data.extend_from_slice(&code);
        self.ids.push(uuid);
        self.alive.push(true);
        self.slot_of.insert(uuid, slot);
    }

    /// Drops the vector of `uuid`, if any.
    pub(crate) fn remove(&mut self, uuid: &Uuid) {
        if let Some(slot) = self.slot_of.remove(uuid) {
            self.alive[slot] = false;
        }
    }

    /// Brings the set to its invariant after a batch of `put`/`remove`:
    /// compacted if mostly tombstones, an existing graph extended with the
    /// new slots (or dropped below half the threshold, hysteresis). Returns
    /// true when the set newly wants a graph built (see [`Self::snapshot`]).
    pub(crate) fn maintain(&mut self, brute_force_below: usize) -> bool {
        let dead = self.ids.len() - self.live();
        if dead >= MIN_DEAD_TO_COMPACT && dead > self.live() {
            self.compact();
        }
        let large = if self.graph.is_some() {
            self.live() >= brute_force_below / 2
        } else {
            self.live() >= brute_force_below
        };
        if !large {
            self.graph = None;
            self.indexed = 0;
            self.wants_graph = false;
            return false;
        }
        if self.graph.is_some() {
            self.extend_graph();
            return false;
        }
        let newly = !self.wants_graph;
        self.wants_graph = true;
        newly
    }

    /// Whether the set waits for a graph.
    pub(crate) fn wants_graph(&self) -> bool {
        self.wants_graph
    }

    /// A copy of the live vectors to build a graph from, if one is wanted.
    pub(crate) fn snapshot(&self) -> Option<Snapshot> {
        if !self.wants_graph || self.graph.is_some() {
            return None;
        }
        let items = (0..self.ids.len())
            .filter(|&slot| self.alive[slot])
            .map(|slot| (self.code(slot).to_vec(), slot))
            .collect();
        Some(Snapshot {
            epoch: self.epoch,
            len: self.ids.len(),
            items,
        })
    }

    /// Installs a graph built from `snapshot` and adds the slots appended
    /// since. Refused (false) if the set was compacted or no longer wants a
    /// graph; the caller takes a new snapshot if [`Self::wants_graph`].
    pub(crate) fn install(&mut self, snapshot: &Snapshot, graph: Graph) -> bool {
        if snapshot.epoch != self.epoch || !self.wants_graph || self.graph.is_some() {
            return false;
        }
        self.graph = Some(graph);
        self.indexed = snapshot.len;
        self.wants_graph = false;
        self.extend_graph();
        true
    }

    /// Inserts the slots past `indexed` into the graph.
    fn extend_graph(&mut self) {
        let Some(graph) = &self.graph else {
            return;
        };
        let batch: Vec<(&[i8], usize)> = (self.indexed..self.ids.len())
            .filter(|&slot| self.alive[slot])
            .map(|slot| (self.code(slot), slot))
            .collect();
        insert(graph, &batch);
        self.indexed = self.ids.len();
    }

    /// Rewrites the slots without tombstones and drops the graph (slots are
    /// the graph's ids, so it must be rebuilt).
    fn compact(&mut self) {
        let mut data = Vec::with_capacity(self.live() * self.stride);
        let mut ids = Vec::with_capacity(self.live());
        for slot in (0..self.ids.len()).filter(|&slot| self.alive[slot]) {
            data.extend_from_slice(self.code(slot));
            ids.push(self.ids[slot]);
        }
        self.slot_of = ids
            .iter()
            .enumerate()
            .map(|(slot, id)| (*id, slot))
            .collect();
        self.alive = vec![true; ids.len()];
        self.data = data;
        self.ids = ids;
        self.graph = None;
        self.indexed = 0;
        self.epoch += 1;
    }

    /// The `limit` live vectors most similar to the unit vector `query`,
    /// best first, with their cosine similarity to the query as coded.
    pub(crate) fn search(&self, query: &[f32], limit: usize, ef_search: usize) -> Vec<(Uuid, f32)> {
        if limit == 0 || self.live() == 0 {
            return Vec::new();
        }
        match &self.graph {
            Some(graph) => self.approximate(graph, query, limit, ef_search),
            None => self.exact(query, limit),
        }
    }

    fn exact(&self, query: &[f32], limit: usize) -> Vec<(Uuid, f32)> {
        let mut top = BinaryHeap::with_capacity(limit + 1);
        for slot in (0..self.ids.len()).filter(|&slot| self.alive[slot]) {
            let candidate = Worst {
                score: query_dot(query, self.code(slot)),
                uuid: self.ids[slot],
            };
            if top.len() < limit {
                top.push(candidate);
            } else if top.peek().is_some_and(|worst: &Worst| candidate < *worst) {
                top.pop();
                top.push(candidate);
            }
        }
        let mut hits: Vec<(Uuid, f32)> = top.into_iter().map(|w| (w.uuid, w.score)).collect();
        sort_best_first(&mut hits);
        hits
    }

    /// Over-fetches by the tombstone ratio (doubling while short) so that
    /// tombstones never crowd live vectors out of the answer.
    fn approximate(
        &self,
        graph: &Graph,
        query: &[f32],
        limit: usize,
        ef_search: usize,
    ) -> Vec<(Uuid, f32)> {
        let total = self.indexed;
        let mut fetch = ((limit * total).div_ceil(self.live()) + 8).min(total);
        let coded = quantize(query);
        loop {
            let found = graph.search(&coded, fetch, ef_search.max(fetch));
            let mut hits: Vec<(Uuid, f32)> = found
                .iter()
                .filter(|n| self.alive.get(n.d_id).copied().unwrap_or(false))
                .map(|n| (self.ids[n.d_id], query_dot(query, self.code(n.d_id))))
                .collect();
            if hits.len() >= limit || fetch >= total {
                sort_best_first(&mut hits);
                hits.truncate(limit);
                return hits;
            }
            fetch = (fetch * 2).min(total);
        }
    }

    /// Bytes held by the codes (the graph keeps its own copy on top).
    pub(crate) fn vector_bytes(&self) -> usize {
        let graph_copy = if self.graph.is_some() {
            self.data.len()
        } else {
            0
        };
        self.data.len() + graph_copy
    }
}

/// Builds a graph over `snapshot` without any lock; `None` if `cancel` was
/// raised meanwhile (the index is closing).
pub(crate) fn build_graph(
    snapshot: &Snapshot,
    params: &HnswParams,
    cancel: &AtomicBool,
) -> Option<Graph> {
    let graph = Hnsw::new(
        params.max_connections,
        (snapshot.items.len() * 2).max(1024),
        MAX_LAYERS,
        params.ef_construction,
        CodeDot,
    );
    for chunk in snapshot.items.chunks(BUILD_CHUNK) {
        if cancel.load(AtomicOrdering::Relaxed) {
            return None;
        }
        let batch: Vec<(&[i8], usize)> = chunk
            .iter()
            .map(|(v, slot)| (v.as_slice(), *slot))
            .collect();
        insert(&graph, &batch);
    }
    Some(graph)
}

fn insert(graph: &Graph, batch: &[(&[i8], usize)]) {
    if batch.len() >= PARALLEL_INSERT_MIN {
        graph.parallel_insert_slice(&batch.to_vec());
    } else {
        for item in batch {
            graph.insert_slice(*item);
        }
    }
}

fn sort_best_first(hits: &mut [(Uuid, f32)]) {
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

/// Heap entry ordered so the heap's top is the worst kept hit: lowest
/// score, then highest uuid (the order of [`sort_best_first`]), so the cut
/// does not depend on slot order, which is history.
struct Worst {
    score: f32,
    uuid: Uuid,
}

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Worst {}

impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.uuid.cmp(&other.uuid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::math::normalized;

    fn unit(v: &[f32]) -> Vec<f32> {
        normalized(v).expect("test vectors have a direction")
    }

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn exact_search_ranks_by_cosine() {
        let mut set = VectorSet::new(2);
        set.put(id(1), &unit(&[1.0, 0.0]));
        set.put(id(2), &unit(&[1.0, 1.0]));
        set.put(id(3), &unit(&[0.0, 1.0]));
        set.maintain(100);
        let hits = set.search(&unit(&[1.0, 0.1]), 2, 10);
        assert_eq!(hits.iter().map(|h| h.0).collect::<Vec<_>>(), [id(1), id(2)]);
        assert!(hits[0].1 > hits[1].1);
    }

    #[test]
    fn replaced_vector_is_never_returned() {
        let mut set = VectorSet::new(2);
        set.put(id(1), &unit(&[1.0, 0.0]));
        set.put(id(2), &unit(&[0.0, 1.0]));
        set.put(id(1), &unit(&[-1.0, 0.0]));
        set.maintain(100);
        let hits = set.search(&unit(&[1.0, 0.0]), 10, 10);
        assert_eq!(hits.len(), 2);
        let score_of_1 = hits.iter().find(|h| h.0 == id(1)).map(|h| h.1);
        assert!(score_of_1.is_some_and(|s| s < -0.99), "{hits:?}");
    }

    /// Whether `want` is among the top 3 for `query`: these 3-dimensional
    /// test vectors lie close together on a circle, where the codes' rounding
    /// can swap neighbours (the index rescores exactly; sets rank by codes).
    fn finds(set: &VectorSet, query: &[f32], want: Uuid) -> bool {
        set.search(query, 3, 50).iter().any(|hit| hit.0 == want)
    }

    /// Builds the wanted graph inline, as the background builder does.
    fn build_now(set: &mut VectorSet) {
        let snapshot = set.snapshot().expect("set wants a graph");
        let graph = build_graph(&snapshot, &HnswParams::default(), &AtomicBool::new(false))
            .expect("not cancelled");
        assert!(set.install(&snapshot, graph));
    }

    #[test]
    fn graph_is_wanted_above_threshold_and_rebuilt_after_compaction() {
        let mut set = VectorSet::new(3);
        let vector = |i: u128| unit(&[(i as f32).sin(), (i as f32).cos(), 0.5]);
        for i in 0..200 {
            set.put(id(i), &vector(i));
        }
        assert!(set.maintain(100), "newly wants a graph");
        assert!(!set.maintain(100), "already wanted");
        assert!(!set.has_graph());
        assert!(finds(&set, &vector(7), id(7)), "scanned meanwhile");
        build_now(&mut set);
        assert!(set.has_graph() && !set.wants_graph());
        // Replace every vector twice: tombstones outnumber live slots, the
        // compaction renumbers slots and drops the graph.
        for round in 1..=2 {
            for i in 0..200 {
                set.put(id(i), &vector(i + round * 1000));
            }
        }
        assert!(set.maintain(100));
        assert_eq!(set.ids.len(), 200, "compacted");
        build_now(&mut set);
        assert!(finds(&set, &vector(2000 + 7), id(7)));
        // Shrinking below half the threshold falls back to exact scans.
        for i in 0..160 {
            set.remove(&id(i));
        }
        assert!(!set.maintain(100));
        assert!(!set.has_graph() && !set.wants_graph());
        assert!(finds(&set, &vector(2000 + 170), id(170)));
    }

    #[test]
    fn install_adds_slots_appended_after_the_snapshot_and_refuses_stale_epochs() {
        let mut set = VectorSet::new(3);
        let vector = |i: u128| unit(&[(i as f32).sin(), (i as f32).cos(), 0.5]);
        for i in 0..150 {
            set.put(id(i), &vector(i));
        }
        set.maintain(100);
        let snapshot = set.snapshot().expect("wanted");
        set.put(id(500), &vector(500));
        set.maintain(100);
        let graph = build_graph(&snapshot, &HnswParams::default(), &AtomicBool::new(false));
        assert!(set.install(&snapshot, graph.expect("built")));
        assert!(finds(&set, &vector(500), id(500)));
        // A snapshot taken before a compaction cannot be installed.
        let mut set = VectorSet::new(3);
        for i in 0..150 {
            set.put(id(i), &vector(i));
        }
        set.maintain(100);
        let stale = set.snapshot().expect("wanted");
        for round in 1..=2 {
            for i in 0..150 {
                set.put(id(i), &vector(i + round * 1000));
            }
        }
        set.maintain(100);
        assert_eq!(set.ids.len(), 150, "compacted");
        let graph = build_graph(&stale, &HnswParams::default(), &AtomicBool::new(false));
        assert!(!set.install(&stale, graph.expect("built")));
        assert!(set.wants_graph());
        let cancelled = build_graph(
            &set.snapshot().expect("wanted"),
            &HnswParams::default(),
            &AtomicBool::new(true),
        );
        assert!(cancelled.is_none());
    }

    #[test]
    fn unchanged_put_leaves_no_tombstone() {
        let mut set = VectorSet::new(2);
        set.put(id(1), &unit(&[1.0, 2.0]));
        set.put(id(1), &unit(&[1.0, 2.0]));
        assert_eq!(set.ids.len(), 1);
        assert_eq!(
            set.get(&id(1)),
            Some(quantize(&unit(&[1.0, 2.0])).as_slice())
        );
    }
}
