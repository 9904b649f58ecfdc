//! One vector sub-index: the live vectors of one (group, kind).
//!
//! Small sets are scanned exactly; large ones get an HNSW graph. hnsw_rs
//! cannot delete, so a replaced or deleted vector leaves a tombstoned slot
//! the graph still holds; searches over-fetch and drop tombstones, and the
//! set is compacted (graph rebuilt) once tombstones outnumber live vectors.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use hnsw_rs::hnsw::Hnsw;
use uuid::Uuid;

use super::math::{UnitDot, dot};
use crate::HnswParams;

/// Below this many tombstones a set is never compacted (not worth it).
const MIN_DEAD_TO_COMPACT: usize = 64;
/// Upper bound on HNSW layers (hnsw_rs caps it at 16 too).
const MAX_LAYERS: usize = 16;
/// Graph insertions of at least this many vectors run on rayon's pool.
const PARALLEL_INSERT_MIN: usize = 128;

/// Slot-addressed unit vectors with tombstones and an optional graph.
pub(crate) struct VectorSet {
    dimension: usize,
    /// Slot-major vectors: slot `s` is `data[s * dimension..][..dimension]`.
    data: Vec<f32>,
    ids: Vec<Uuid>,
    alive: Vec<bool>,
    slot_of: HashMap<Uuid, usize>,
    graph: Option<Hnsw<'static, f32, UnitDot>>,
    /// Slots below this are in the graph (all of them after `maintain`).
    indexed: usize,
}

impl VectorSet {
    pub(crate) fn new(dimension: usize) -> Self {
        VectorSet {
            dimension,
            data: Vec::new(),
            ids: Vec::new(),
            alive: Vec::new(),
            slot_of: HashMap::new(),
            graph: None,
            indexed: 0,
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

    /// The live vector of `uuid`, if any.
    pub(crate) fn get(&self, uuid: &Uuid) -> Option<&[f32]> {
        self.slot_of.get(uuid).map(|&slot| self.vector(slot))
    }

    fn vector(&self, slot: usize) -> &[f32] {
        &self.data[slot * self.dimension..(slot + 1) * self.dimension]
    }

    /// Sets the vector of `uuid` (a unit vector of the set's dimension). An
    /// unchanged vector costs nothing; a changed one tombstones the old slot.
    pub(crate) fn put(&mut self, uuid: Uuid, vector: &[f32]) {
        debug_assert_eq!(vector.len(), self.dimension);
        if let Some(&slot) = self.slot_of.get(&uuid) {
            if self.vector(slot) == vector {
                return;
            }
            self.alive[slot] = false;
        }
        let slot = self.ids.len();
        self.data.extend_from_slice(vector);
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
    /// compacted if mostly tombstones, graph present iff large enough (with
    /// hysteresis), and every slot in the graph.
    pub(crate) fn maintain(&mut self, brute_force_below: usize, params: &HnswParams) {
        let dead = self.ids.len() - self.live();
        if dead >= MIN_DEAD_TO_COMPACT && dead > self.live() {
            self.compact();
        }
        let wants_graph = if self.graph.is_some() {
            self.live() >= brute_force_below / 2
        } else {
            self.live() >= brute_force_below
        };
        if !wants_graph {
            self.graph = None;
            self.indexed = 0;
            return;
        }
        let graph = self.graph.get_or_insert_with(|| {
            Hnsw::new(
                params.max_connections,
                (self.live() * 2).max(1024),
                MAX_LAYERS,
                params.ef_construction,
                UnitDot,
            )
        });
        let dimension = self.dimension;
        let batch: Vec<(&[f32], usize)> = (self.indexed..self.ids.len())
            .filter(|&slot| self.alive[slot])
            .map(|slot| (&self.data[slot * dimension..(slot + 1) * dimension], slot))
            .collect();
        if batch.len() >= PARALLEL_INSERT_MIN {
            graph.parallel_insert_slice(&batch);
        } else {
            for item in batch {
                graph.insert_slice(item);
            }
        }
        self.indexed = self.ids.len();
    }

    /// Rewrites the slots without tombstones and drops the graph (slots are
    /// the graph's ids, so it must be rebuilt).
    fn compact(&mut self) {
        let mut data = Vec::with_capacity(self.live() * self.dimension);
        let mut ids = Vec::with_capacity(self.live());
        for slot in (0..self.ids.len()).filter(|&slot| self.alive[slot]) {
            data.extend_from_slice(self.vector(slot));
            ids.push(self.ids[slot]);
        }
        self.slot_of = ids.iter().enumerate().map(|(slot, id)| (*id, slot)).collect();
        self.alive = vec![true; ids.len()];
        self.data = data;
        self.ids = ids;
        self.graph = None;
        self.indexed = 0;
    }

    /// The `limit` live vectors most similar to the unit vector `query`,
    /// best first, with their cosine similarity.
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
            let score = dot(query, self.vector(slot));
            if top.len() < limit {
                top.push(Worst { score, slot });
            } else if top.peek().is_some_and(|worst: &Worst| score > worst.score) {
                top.pop();
                top.push(Worst { score, slot });
            }
        }
        let mut hits: Vec<(Uuid, f32)> = top
            .into_iter()
            .map(|w| (self.ids[w.slot], w.score))
            .collect();
        sort_best_first(&mut hits);
        hits
    }

    /// Over-fetches by the tombstone ratio (doubling while short) so that
    /// tombstones never crowd live vectors out of the answer.
    fn approximate(
        &self,
        graph: &Hnsw<'static, f32, UnitDot>,
        query: &[f32],
        limit: usize,
        ef_search: usize,
    ) -> Vec<(Uuid, f32)> {
        let total = self.indexed;
        let mut fetch = ((limit * total).div_ceil(self.live()) + 8).min(total);
        loop {
            let found = graph.search(query, fetch, ef_search.max(fetch));
            let mut hits: Vec<(Uuid, f32)> = found
                .iter()
                .filter(|n| self.alive.get(n.d_id).copied().unwrap_or(false))
                .map(|n| (self.ids[n.d_id], dot(query, self.vector(n.d_id))))
                .collect();
            if hits.len() >= limit || fetch >= total {
                sort_best_first(&mut hits);
                hits.truncate(limit);
                return hits;
            }
            fetch = (fetch * 2).min(total);
        }
    }

    /// Bytes held by the vectors (the graph keeps its own copy on top).
    pub(crate) fn vector_bytes(&self) -> usize {
        let graph_copy = if self.graph.is_some() { self.data.len() } else { 0 };
        (self.data.len() + graph_copy) * size_of::<f32>()
    }
}

fn sort_best_first(hits: &mut [(Uuid, f32)]) {
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
}

/// Heap entry ordered so the heap's top is the worst kept score.
struct Worst {
    score: f32,
    slot: usize,
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
        other.score.total_cmp(&self.score)
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
        set.maintain(100, &HnswParams::default());
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
        set.maintain(100, &HnswParams::default());
        let hits = set.search(&unit(&[1.0, 0.0]), 10, 10);
        assert_eq!(hits.len(), 2);
        let score_of_1 = hits.iter().find(|h| h.0 == id(1)).map(|h| h.1);
        assert!(score_of_1.is_some_and(|s| s < -0.99), "{hits:?}");
    }

    #[test]
    fn graph_appears_above_threshold_and_survives_compaction() {
        let params = HnswParams::default();
        let mut set = VectorSet::new(3);
        let vector = |i: u128| unit(&[(i as f32).sin(), (i as f32).cos(), 0.5]);
        for i in 0..200 {
            set.put(id(i), &vector(i));
        }
        set.maintain(100, &params);
        assert!(set.has_graph());
        // Replace every vector twice: tombstones outnumber live slots.
        for round in 1..=2 {
            for i in 0..200 {
                set.put(id(i), &vector(i + round * 1000));
            }
        }
        set.maintain(100, &params);
        assert!(set.has_graph());
        assert_eq!(set.ids.len(), 200, "compacted");
        let hits = set.search(&vector(2000 + 7), 1, 50);
        assert_eq!(hits[0].0, id(7));
        // Shrinking below half the threshold falls back to exact scans.
        for i in 0..160 {
            set.remove(&id(i));
        }
        set.maintain(100, &params);
        assert!(!set.has_graph());
        assert_eq!(set.search(&vector(2000 + 170), 1, 50)[0].0, id(170));
    }

    #[test]
    fn unchanged_put_leaves_no_tombstone() {
        let mut set = VectorSet::new(2);
        set.put(id(1), &unit(&[1.0, 2.0]));
        set.put(id(1), &unit(&[1.0, 2.0]));
        assert_eq!(set.ids.len(), 1);
        assert_eq!(set.get(&id(1)), Some(unit(&[1.0, 2.0]).as_slice()));
    }
}
