//! The processor: consumes the episodes log and appends decisions to the
//! graph-events log.
//!
//! * One group is strictly ordered; different groups run concurrently (a
//!   bounded number of decisions at a time). Each partition's records are
//!   dispatched to per-group queues; queued episodes of a group are decided
//!   together (bulk extraction), then resolved one by one.
//! * Effectively once: the graph-events log is the source of truth. Each
//!   decision is one record; on start the processor folds that log into its
//!   per-group state (read-your-writes) and learns which commands were
//!   decided, skipping them even when an offset commit was lost. Offsets are
//!   committed with each decision, only up to the lowest record of the
//!   partition not yet decided.
//! * A command that cannot be decoded or decided (after retries) goes to the
//!   dead-letter topic with its reason, and a dead-letter decision records it
//!   on the graph-events log; the group continues.
//!
//! [`partition`] reads a partition and dispatches its records, [`group`]
//! decides one group's queue, [`recovery`] keeps the state store in step
//! with the graph-events log, [`dead_letter`] writes the dead-letter topic.

mod dead_letter;
mod group;
mod partition;
mod recovery;

pub use dead_letter::{DeadLetter, dead_letter};
use group::Hot;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use chronicle_log::Assignment;
use chronicle_model::{Command, GroupId, Timestamp};
use chronicle_store::StateStore;
use tokio::sync::{Semaphore, mpsc, watch};
use uuid::Uuid;

use crate::node::Node;

/// How the processor runs.
#[derive(Clone, Debug)]
pub struct ProcessorOptions {
    /// Consumer group name for offset commits.
    pub consumer_group: String,
    /// Decisions in flight across groups.
    pub max_parallel: usize,
    /// Episodes of one group decided together at most.
    pub bulk: usize,
    /// Queued commands per group before the partition reader waits.
    pub queue: usize,
    /// Attempts for a decision that fails on a model error.
    pub attempts: u32,
    /// Partitions to consume; all when `None`.
    pub partitions: Option<Vec<u32>>,
    /// Groups with queued work per partition (each holds its state).
    pub active_groups: usize,
    /// How often the state store's checkpoint moves up to the log.
    pub checkpoint_every: Duration,
}

impl Default for ProcessorOptions {
    fn default() -> Self {
        ProcessorOptions {
            consumer_group: "chronicle-processor".into(),
            max_parallel: 16,
            bulk: 8,
            queue: 256,
            attempts: 3,
            partitions: None,
            active_groups: 64,
            checkpoint_every: Duration::from_secs(2),
        }
    }
}

struct Job {
    command: Command,
    offset: u64,
    timestamp: Timestamp,
}

/// Per-partition bookkeeping shared by the reader and the group workers.
struct PartitionTrack {
    partition: u32,
    inflight: Mutex<BTreeSet<u64>>,
    next_read: AtomicU64,
    /// Held (shared) by a worker from appending a decision until it is in
    /// the state store; taken (exclusive) by a checkpoint to read the
    /// graph-events end offsets below which every decision is stored.
    storing: tokio::sync::RwLock<()>,
}

impl PartitionTrack {
    /// The offset everything below which is decided, not counting `excluding`.
    fn low_watermark(&self, excluding: Option<u64>) -> u64 {
        let inflight = self.inflight.lock().expect("inflight lock");
        inflight
            .iter()
            .find(|o| Some(**o) != excluding)
            .copied()
            .unwrap_or_else(|| self.next_read.load(Ordering::SeqCst))
    }
}

/// What a group worker hands back when its queue runs dry.
type Parked = (GroupId, Hot, mpsc::Receiver<Job>);

/// The processor role.
pub struct Processor {
    node: Arc<Node>,
    options: ProcessorOptions,
}

/// A running processor: the role plus its state store.
struct Shared {
    node: Arc<Node>,
    options: ProcessorOptions,
    state: Arc<StateStore>,
    /// Commands admitted and not yet stored as decided: a second record of
    /// one of them is skipped.
    admitted: Mutex<HashSet<(GroupId, Uuid)>>,
    permits: Semaphore,
}

impl Processor {
    /// A processor on a node.
    pub fn new(node: Arc<Node>, options: ProcessorOptions) -> Arc<Self> {
        Arc::new(Processor { node, options })
    }

    /// Runs until `shutdown` turns true (finishing decisions in flight) or a
    /// log error stops it. Works on the partitions its consumer-group
    /// membership assigns (all of them in embedded mode): on assignment it
    /// brings the partition's state store up to the log's end (replaying
    /// only what follows its checkpoint); on revocation it finishes or drops
    /// in-flight work and checkpoints before releasing.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        self.node.decider()?;
        let path = self.node.settings.path("processor-state.redb");
        let state = tokio::task::spawn_blocking(move || StateStore::open(path))
            .await?
            .context("opening the processor's state store")?;
        let this = Arc::new(Shared {
            permits: Semaphore::new(self.options.max_parallel.max(1)),
            node: self.node.clone(),
            options: self.options.clone(),
            state: Arc::new(state),
            admitted: Mutex::new(HashSet::new()),
        });
        let members = format!("{}.members", this.options.consumer_group);
        let mut membership = this
            .node
            .log
            .join(&members, &this.node.topics.episodes)
            .await?;
        let mut running: HashMap<
            u32,
            (
                watch::Sender<bool>,
                tokio::task::JoinHandle<anyhow::Result<()>>,
            ),
        > = HashMap::new();
        let result = loop {
            let finished = running
                .iter()
                .find(|(_, (_, h))| h.is_finished())
                .map(|(p, _)| *p);
            if let Some(p) = finished {
                let (_, h) = running.remove(&p).expect("found above");
                match h.await {
                    Ok(Ok(())) => continue,
                    Ok(Err(e)) => break Err(e),
                    Err(e) => break Err(anyhow::anyhow!("partition {p} task panicked: {e}")),
                }
            }
            tokio::select! {
                _ = shutdown.changed() => {
                    if *shutdown.borrow() { break Ok(()) }
                }
                change = membership.next() => match change? {
                    Assignment::Assigned(partitions) => {
                        for p in partitions {
                            if this.options.partitions.as_ref().is_some_and(|only| !only.contains(&p)) || running.contains_key(&p) {
                                continue;
                            }
                            let started = std::time::Instant::now();
                            let replayed = this.catch_up(p).await.context("recovering processor state")?;
                            tracing::info!(partition = p, replayed, seconds = started.elapsed().as_secs_f64(), "partition assigned");
                            let (stop, stop_rx) = watch::channel(false);
                            let this = this.clone();
                            let handle = tokio::spawn(async move { this.partition_loop(p, stop_rx).await });
                            running.insert(p, (stop, handle));
                        }
                    }
                    Assignment::Revoked { partitions, release } => {
                        for p in partitions {
                            if let Some((stop, handle)) = running.remove(&p) {
                                let _ = stop.send(true);
                                handle.await.context("partition task panicked")??;
                                tracing::info!(partition = p, "partition released");
                            }
                        }
                        release.done();
                    }
                },
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        };
        for (_, (stop, _)) in running.iter() {
            let _ = stop.send(true);
        }
        for (p, (_, handle)) in running {
            handle
                .await
                .with_context(|| format!("partition {p} task panicked"))??;
        }
        result
    }
}
