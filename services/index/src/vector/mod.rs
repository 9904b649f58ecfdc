//! Vector search: one sub-index per (group, kind), so a tenant's query never
//! walks another tenant's graph and small tenants are scanned exactly.
//!
//! Changes are staged by the writer and applied here at commit, so vector
//! search, like text search, sees committed data only.

mod builder;
mod math;
mod set;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chronicle_model::GroupId;
use uuid::Uuid;

use crate::{DocKind, Hit, IndexError, IndexOptions};
use builder::GraphBuilder;
pub(crate) use math::{dot, normalized, stored_unit};
use set::VectorSet;

/// A staged change to the vectors, applied at commit in order.
#[derive(Clone, Debug)]
pub(crate) enum VectorOp {
    /// The document now has this vector (a unit vector), or none.
    Put {
        kind: DocKind,
        uuid: Uuid,
        group: GroupId,
        vector: Option<Arc<[f32]>>,
    },
    Delete {
        kind: DocKind,
        uuid: Uuid,
        group: GroupId,
    },
    /// Everything before it is gone.
    Clear,
}

type Shared = Arc<RwLock<VectorSet>>;

/// Every sub-index, behind per-set locks so that applying a commit to one
/// tenant does not stall searches of the others.
pub(crate) struct VectorStore {
    dimension: usize,
    options: IndexOptions,
    groups: RwLock<HashMap<GroupId, HashMap<DocKind, Shared>>>,
    builder: GraphBuilder,
}

/// Figures over all sub-indices.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct VectorFigures {
    pub vectors: u64,
    pub sets: u64,
    pub graphs: u64,
    /// Sets large enough for a graph still being built (searched exactly).
    pub graphs_pending: u64,
    pub memory_bytes: u64,
}

enum SetOp {
    Put(Uuid, Arc<[f32]>),
    Remove(Uuid),
}

impl VectorStore {
    pub(crate) fn new(dimension: usize, options: IndexOptions) -> Result<Self, IndexError> {
        Ok(VectorStore {
            dimension,
            builder: GraphBuilder::start(options.hnsw.clone())?,
            options,
            groups: RwLock::new(HashMap::new()),
        })
    }

    /// Blocks until the graphs wanted so far are built.
    pub(crate) fn wait_for_graphs(&self) {
        self.builder.wait_idle();
    }

    /// Applies staged ops. Sets that grow large enough get their graph from
    /// the builder thread, later.
    pub(crate) fn apply(&self, ops: Vec<VectorOp>) -> Result<(), IndexError> {
        let (cleared, per_set) = route(ops);
        let mut wanting = Vec::new();
        if cleared {
            let mut fresh: HashMap<GroupId, HashMap<DocKind, Shared>> = HashMap::new();
            for ((group, kind), ops) in per_set {
                let mut set = VectorSet::new(self.dimension);
                let wants = self.change(&mut set, ops);
                if set.live() > 0 {
                    let shared = Arc::new(RwLock::new(set));
                    if wants {
                        wanting.push(Arc::clone(&shared));
                    }
                    fresh.entry(group).or_default().insert(kind, shared);
                }
            }
            *self.groups.write()? = fresh;
        } else {
            for ((group, kind), ops) in per_set {
                let existing = self
                    .groups
                    .read()?
                    .get(&group)
                    .and_then(|sets| sets.get(&kind))
                    .cloned();
                let (shared, live) = match existing {
                    Some(shared) => {
                        let mut set = shared.write()?;
                        if self.change(&mut set, ops) {
                            wanting.push(Arc::clone(&shared));
                        }
                        let live = set.live();
                        drop(set);
                        (shared, live)
                    }
                    None => {
                        let mut set = VectorSet::new(self.dimension);
                        let wants = self.change(&mut set, ops);
                        let live = set.live();
                        let shared = Arc::new(RwLock::new(set));
                        if wants {
                            wanting.push(Arc::clone(&shared));
                        }
                        (shared, live)
                    }
                };
                let mut groups = self.groups.write()?;
                if live > 0 {
                    groups.entry(group).or_default().insert(kind, shared);
                } else if let Some(sets) = groups.get_mut(&group) {
                    sets.remove(&kind);
                    if sets.is_empty() {
                        groups.remove(&group);
                    }
                }
            }
        }
        for set in &wanting {
            self.builder.request(set);
        }
        Ok(())
    }

    /// Applies one set's changes; true if it newly wants a graph.
    fn change(&self, set: &mut VectorSet, ops: Vec<SetOp>) -> bool {
        for op in ops {
            match op {
                SetOp::Put(uuid, vector) => set.put(uuid, &vector),
                SetOp::Remove(uuid) => set.remove(&uuid),
            }
        }
        set.maintain(self.options.brute_force_below)
    }

    /// The `limit` documents of `group` (of any of `kinds`) most similar to
    /// the unit vector `query`, best first.
    pub(crate) fn search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let sets: Vec<(DocKind, Shared)> = match self.groups.read()?.get(group) {
            Some(sets) => kinds
                .iter()
                .filter_map(|kind| sets.get(kind).map(|set| (*kind, Arc::clone(set))))
                .collect(),
            None => return Ok(Vec::new()),
        };
        let mut hits = Vec::new();
        for (kind, set) in sets {
            let found = set
                .read()?
                .search(query, limit, self.options.hnsw.ef_search);
            hits.extend(found.into_iter().map(|(uuid, score)| (kind, uuid, score)));
        }
        // Equal scores by uuid then kind, as text search ranks them. Each set
        // returned its top `limit` in this order, so the merge is exact.
        hits.sort_by(|a, b| {
            b.2.total_cmp(&a.2)
                .then_with(|| (a.1, a.0).cmp(&(b.1, b.0)))
        });
        hits.truncate(limit);
        Ok(hits
            .into_iter()
            .map(|(kind, uuid, score)| Hit { kind, uuid, score })
            .collect())
    }

    /// Counts and sizes, skipping any set whose lock is poisoned.
    pub(crate) fn figures(&self) -> VectorFigures {
        let mut figures = VectorFigures::default();
        let Ok(groups) = self.groups.read() else {
            return figures;
        };
        for set in groups.values().flat_map(HashMap::values) {
            if let Ok(set) = set.read() {
                figures.vectors += set.live() as u64;
                figures.sets += 1;
                figures.graphs += u64::from(set.has_graph());
                figures.graphs_pending += u64::from(set.wants_graph());
                figures.memory_bytes += set.vector_bytes() as u64;
            }
        }
        figures
    }
}

/// Resolves ops into per-set changes in order; returns whether a `Clear`
/// came first (then the changes rebuild from nothing).
fn route(ops: Vec<VectorOp>) -> (bool, HashMap<(GroupId, DocKind), Vec<SetOp>>) {
    let mut cleared = false;
    let mut per_set: HashMap<(GroupId, DocKind), Vec<SetOp>> = HashMap::new();
    for op in ops {
        match op {
            VectorOp::Clear => {
                cleared = true;
                per_set.clear();
            }
            VectorOp::Put {
                kind,
                uuid,
                group,
                vector,
            } => {
                let change = match vector {
                    Some(vector) => SetOp::Put(uuid, vector),
                    None => SetOp::Remove(uuid),
                };
                per_set.entry((group, kind)).or_default().push(change);
            }
            VectorOp::Delete { kind, uuid, group } => {
                per_set
                    .entry((group, kind))
                    .or_default()
                    .push(SetOp::Remove(uuid));
            }
        }
    }
    (cleared, per_set)
}
