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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::num::NonZeroUsize;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use chronicle_engine::{Accepted, DecideError, GroupState, apply_batch};
use chronicle_log::{Assignment, EventLog, NewRecord, OffsetCommit, Record};
use chronicle_metrics::METRICS;
use chronicle_model::{
    Command, EventBatch, EventKind, GroupId, IdKind, LogPosition, Timestamp, derive_named_id,
};
use chronicle_store::{Decision, StateStore};
use futures::FutureExt;
use lru::LruCache;
use serde::Serialize;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;
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

/// A dead-letter record (JSON on the DLQ topic).
#[derive(Debug, Serialize)]
pub struct DeadLetter<'a> {
    /// Why it could not be processed.
    pub reason: &'a str,
    /// Source topic.
    pub topic: &'a str,
    /// Source partition.
    pub partition: u32,
    /// Source offset.
    pub offset: u64,
    /// The record key, as text.
    pub key: String,
    /// The original payload, base64.
    pub payload_base64: String,
}

/// Appends a dead-letter record for a log record.
///
/// One writer for the processor (undecodable commands, failed decisions)
/// and the projector (undecodable graph events).
pub async fn dead_letter(
    log: &dyn EventLog,
    dlq: &str,
    topic: &str,
    record: &Record,
    reason: &str,
) -> anyhow::Result<()> {
    let letter = DeadLetter {
        reason,
        topic,
        partition: record.partition,
        offset: record.offset,
        key: String::from_utf8_lossy(&record.key).into_owned(),
        payload_base64: base64::engine::general_purpose::STANDARD.encode(&record.payload),
    };
    log.append(
        dlq,
        vec![NewRecord {
            key: record.key.clone(),
            payload: serde_json::to_vec(&letter)?,
        }],
        None,
    )
    .await?;
    METRICS.log_appends.with_label_values(&["dlq"]).inc();
    tracing::warn!(
        topic,
        partition = record.partition,
        offset = record.offset,
        reason,
        "dead-lettered"
    );
    Ok(())
}

/// A group whose state is in memory, with what its stored form weighs.
struct Hot {
    state: GroupState,
    base_bytes: u64,
    delta_bytes: u64,
    last_offset: Option<u64>,
}

/// A delta log that outgrows its base (and this floor) is compacted into a
/// new base: stored bytes stay within twice the state, writes amortized
/// proportional to the decisions.
const COMPACT_FLOOR_BYTES: u64 = 64 << 10;

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

impl Shared {
    /// The graph-events partitions holding the decisions of episodes
    /// partition `p`'s groups: the same one when the topics have equal
    /// partition counts.
    async fn event_partitions(&self, p: u32) -> anyhow::Result<(Vec<u32>, u32)> {
        let node = &self.node;
        let events = node.log.partition_count(&node.topics.graph_events).await?;
        let episodes = node.log.partition_count(&node.topics.episodes).await?;
        let partitions = if events == episodes {
            vec![p]
        } else {
            (0..events).collect()
        };
        Ok((partitions, episodes))
    }

    /// Stores the decisions of partition `p`'s groups appended since the
    /// state store's checkpoint (by another owner, or before a crash), then
    /// checkpoints. Returns how many records it read.
    async fn catch_up(&self, p: u32) -> anyhow::Result<u64> {
        let node = &self.node;
        let topic = &node.topics.graph_events;
        let (partitions, episodes) = self.event_partitions(p).await?;
        let mut read = 0;
        let mut checkpoints = Vec::new();
        for q in partitions {
            let state = self.state.clone();
            let from = tokio::task::spawn_blocking(move || state.checkpoint(p, q)).await??;
            let end = node.log.end_offset(topic, q).await?;
            let mut offset = from;
            while offset < end {
                let records = node
                    .log
                    .read(topic, q, offset, 1024, Duration::ZERO)
                    .await?;
                if records.is_empty() {
                    break;
                }
                let mut rows: Vec<(GroupId, Uuid, u64, Vec<u8>)> = Vec::new();
                for r in records.into_iter().take_while(|r| r.offset < end) {
                    read += 1;
                    offset = r.offset + 1;
                    match node.events.decode(&r.payload) {
                        Ok(batch)
                            if chronicle_log::partition_for(
                                batch.group_id.as_str().as_bytes(),
                                episodes,
                            ) == p =>
                        {
                            node.status.decided(&batch);
                            rows.push((batch.group_id, batch.command_uuid, r.offset, r.payload));
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::error!(partition = q, offset = r.offset, error = %e, "skipping undecodable graph-events record")
                        }
                    }
                }
                // Stored chunk by chunk: a takeover at any history size
                // holds one chunk in memory.
                let state = self.state.clone();
                tokio::task::spawn_blocking(move || {
                    let decisions: Vec<Decision<'_>> = rows
                        .iter()
                        .map(|(group, command, offset, payload)| Decision {
                            group,
                            command: *command,
                            offset: *offset,
                            payload,
                        })
                        .collect();
                    state.record(&decisions)
                })
                .await??;
            }
            checkpoints.push((p, q, offset));
        }
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || state.set_checkpoints(&checkpoints)).await??;
        METRICS.processor_replayed.inc_by(read);
        Ok(read)
    }

    /// Records that every decision of partition `track`'s groups below the
    /// graph-events end offsets is in the state store (durably, with them).
    async fn checkpoint(&self, track: &PartitionTrack, partitions: &[u32]) -> anyhow::Result<()> {
        let node = &self.node;
        let mut checkpoints = Vec::with_capacity(partitions.len());
        {
            let _quiet = track.storing.write().await;
            for &q in partitions {
                let end = node.log.end_offset(&node.topics.graph_events, q).await?;
                checkpoints.push((track.partition, q, end));
            }
        }
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || state.set_checkpoints(&checkpoints)).await??;
        Ok(())
    }

    async fn partition_loop(
        self: Arc<Self>,
        partition: u32,
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<()> {
        let node = &self.node;
        let topic = node.topics.episodes.clone();
        let start = node
            .log
            .committed_offset(&self.options.consumer_group, &topic, partition)
            .await?
            .unwrap_or(0);
        let track = Arc::new(PartitionTrack {
            partition,
            inflight: Mutex::new(BTreeSet::new()),
            next_read: AtomicU64::new(start),
            storing: tokio::sync::RwLock::new(()),
        });
        let mut next = start;
        // The configured cache is shared out evenly over the partitions.
        let settings = &node.settings;
        let per_partition = settings
            .processor_cache_groups
            .div_ceil(settings.partitions.max(1) as usize);
        let mut hot: LruCache<GroupId, Hot> =
            LruCache::new(NonZeroUsize::new(per_partition.max(1)).expect("at least one"));
        let mut workers: HashMap<GroupId, mpsc::Sender<Job>> = HashMap::new();
        let mut tasks: JoinSet<anyhow::Result<Parked>> = JoinSet::new();
        let (event_partitions, _) = self.event_partitions(partition).await?;
        let mut checkpoints = tokio::time::interval(self.options.checkpoint_every);
        checkpoints.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.publish(&track);
        loop {
            if *shutdown.borrow() {
                break;
            }
            let records = tokio::select! {
                r = node.log.read(&topic, partition, next, 256, Duration::from_millis(250)) => r?,
                _ = shutdown.changed() => continue,
                _ = checkpoints.tick() => {
                    self.checkpoint(&track, &event_partitions).await?;
                    continue;
                }
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    self.park(done, &mut hot, &mut workers, &mut tasks, &track)?;
                    continue;
                }
            };
            let end = node.log.end_offset(&topic, partition).await.unwrap_or(next);
            for (r, job) in self.admit_all(records, &track).await? {
                next = r + 1;
                let Some(job) = job else {
                    self.finish(&track, r);
                    continue;
                };
                let group = job.command.group_id().clone();
                let mut job = Some(job);
                while let Some(j) = job.take() {
                    if !workers.contains_key(&group) {
                        // Groups with work are bounded: wait for one to park.
                        while tasks.len() >= self.options.active_groups.max(1) {
                            let done = tasks.join_next().await.expect("tasks are running");
                            self.park(done, &mut hot, &mut workers, &mut tasks, &track)?;
                        }
                        let (tx, rx) = mpsc::channel(self.options.queue.max(1));
                        let warm = hot.pop(&group);
                        let (this, track, g) = (self.clone(), track.clone(), group.clone());
                        tasks.spawn(async move { this.group_worker(g, warm, rx, track).await });
                        workers.insert(group.clone(), tx);
                    }
                    let tx = workers[&group].clone();
                    match tx.try_send(j) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Closed(j)) => {
                            // its worker parked and left; start another
                            workers.remove(&group);
                            job = Some(j);
                        }
                        Err(mpsc::error::TrySendError::Full(j)) => {
                            // A full queue waits for its worker, which may
                            // instead park: only this loop restarts parked
                            // workers, so it must keep collecting them.
                            tokio::select! {
                                permit = tx.reserve() => match permit {
                                    Ok(permit) => permit.send(j),
                                    Err(_) => {
                                        workers.remove(&group);
                                        job = Some(j);
                                    }
                                },
                                Some(done) = tasks.join_next() => {
                                    self.park(done, &mut hot, &mut workers, &mut tasks, &track)?;
                                    job = Some(j);
                                }
                            }
                        }
                    }
                }
            }
            METRICS
                .consumer_lag
                .with_label_values(&["processor", &partition.to_string()])
                .set(end.saturating_sub(track.low_watermark(None)) as i64);
            self.publish(&track);
        }
        // Finish what was dispatched before releasing the partition.
        drop(workers);
        while let Some(done) = tasks.join_next().await {
            done.context("group worker panicked")??;
        }
        self.checkpoint(&track, &event_partitions).await?;
        self.publish(&track);
        Ok(())
    }

    /// A worker ran dry: its group goes back to the hot cache, or, when jobs
    /// arrived meanwhile, the worker starts again.
    fn park(
        self: &Arc<Self>,
        done: Result<anyhow::Result<Parked>, tokio::task::JoinError>,
        hot: &mut LruCache<GroupId, Hot>,
        workers: &mut HashMap<GroupId, mpsc::Sender<Job>>,
        tasks: &mut JoinSet<anyhow::Result<Parked>>,
        track: &Arc<PartitionTrack>,
    ) -> anyhow::Result<()> {
        let (group, state, rx) = done.context("group worker panicked")??;
        if rx.is_empty() {
            workers.remove(&group);
            hot.put(group, state);
        } else {
            let (this, track) = (self.clone(), track.clone());
            tasks.spawn(async move { this.group_worker(group, Some(state), rx, track).await });
        }
        Ok(())
    }

    /// Decodes a read of records into jobs; dead-letters what does not
    /// decode and skips commands already decided (`None`).
    async fn admit_all(
        &self,
        records: Vec<Record>,
        track: &PartitionTrack,
    ) -> anyhow::Result<Vec<(u64, Option<Job>)>> {
        let node = &self.node;
        let mut out = Vec::with_capacity(records.len());
        let mut decoded = Vec::with_capacity(records.len());
        for r in records {
            track
                .inflight
                .lock()
                .expect("inflight lock")
                .insert(r.offset);
            track.next_read.store(r.offset + 1, Ordering::SeqCst);
            let key_group = std::str::from_utf8(&r.key)
                .ok()
                .and_then(|k| GroupId::new(k).ok());
            match (node.commands.decode(&r.payload), key_group) {
                (Ok(cmd), Some(g)) if cmd.group_id() == &g => decoded.push((r, cmd)),
                (Ok(cmd), key_group) => {
                    let reason = format!(
                        "record key `{}` does not match the command's group `{}`",
                        String::from_utf8_lossy(&r.key),
                        cmd.group_id()
                    );
                    self.reject(&r, key_group, reason, track).await?;
                    out.push((r.offset, None));
                }
                (Err(e), key_group) => {
                    self.reject(&r, key_group, format!("undecodable command: {e}"), track)
                        .await?;
                    out.push((r.offset, None));
                }
            }
        }
        // Claimed before the state store is asked: a worker stores its
        // decision before it releases the claim, so a second record of a
        // command either finds the claim or finds the decision stored.
        let claimed: Vec<bool> = {
            let mut admitted = self.admitted.lock().expect("admitted lock");
            decoded
                .iter()
                .map(|(_, c)| admitted.insert((c.group_id().clone(), c.uuid())))
                .collect()
        };
        let keys: Vec<(GroupId, Uuid)> = decoded
            .iter()
            .map(|(_, c)| (c.group_id().clone(), c.uuid()))
            .collect();
        let state = self.state.clone();
        let stored = tokio::task::spawn_blocking(move || {
            let keys: Vec<(&GroupId, Uuid)> = keys.iter().map(|(g, c)| (g, *c)).collect();
            state.decided(&keys)
        })
        .await??;
        for (((r, cmd), decided), claimed) in decoded.into_iter().zip(stored).zip(claimed) {
            if claimed && decided {
                self.admitted
                    .lock()
                    .expect("admitted lock")
                    .remove(&(cmd.group_id().clone(), cmd.uuid()));
            }
            if !claimed || decided {
                METRICS
                    .episodes_processed
                    .with_label_values(&["skipped"])
                    .inc();
                out.push((r.offset, None));
                continue;
            }
            node.status.pending(
                cmd.uuid(),
                cmd.group_id(),
                LogPosition {
                    partition: r.partition,
                    offset: r.offset,
                },
            );
            out.push((
                r.offset,
                Some(Job {
                    command: cmd,
                    offset: r.offset,
                    timestamp: r.timestamp,
                }),
            ));
        }
        out.sort_by_key(|(offset, _)| *offset);
        Ok(out)
    }

    /// Dead-letters a record that is not a command of its key's group, and
    /// records the dead letter as that group's decision.
    async fn reject(
        &self,
        r: &Record,
        key_group: Option<GroupId>,
        reason: String,
        track: &PartitionTrack,
    ) -> anyhow::Result<()> {
        let node = &self.node;
        let topic = &node.topics.episodes;
        dead_letter(node.log.as_ref(), &node.topics.dlq, topic, r, &reason).await?;
        if let Some(group) = key_group {
            let uuid = derive_named_id(
                topic,
                IdKind::DeadLetter,
                &format!("{}:{}", r.partition, r.offset),
            );
            let position = LogPosition {
                partition: r.partition,
                offset: r.offset,
            };
            let batch = EventBatch::dead_lettered(uuid, group, r.timestamp, Some(position), reason);
            self.store_decision(&batch, None, track).await?;
        }
        METRICS
            .episodes_processed
            .with_label_values(&["dead_lettered"])
            .inc();
        Ok(())
    }

    fn finish(&self, track: &PartitionTrack, offset: u64) {
        track
            .inflight
            .lock()
            .expect("inflight lock")
            .remove(&offset);
    }

    fn publish(&self, track: &PartitionTrack) {
        let low = track.low_watermark(None);
        self.node.progress.decided.send_modify(|m| {
            m.insert(track.partition, low);
        });
    }

    /// Appends a decision to the graph-events log (with the offset commit)
    /// and stores it in the state store; returns its offset and bytes.
    async fn store_decision(
        &self,
        batch: &EventBatch,
        commit: Option<OffsetCommit>,
        track: &PartitionTrack,
    ) -> anyhow::Result<(u64, u64)> {
        let node = &self.node;
        let started = std::time::Instant::now();
        let payload = node.events.encode(batch);
        let bytes = payload.len() as u64;
        let _storing = track.storing.read().await;
        let appended = node
            .log
            .append(
                &node.topics.graph_events,
                vec![NewRecord {
                    key: batch.group_id.as_str().as_bytes().to_vec(),
                    payload: payload.clone(),
                }],
                commit,
            )
            .await
            .context("appending a decision to the graph-events log")?;
        let offset = appended
            .first()
            .context("the log appended no record")?
            .offset;
        METRICS
            .stage_duration
            .with_label_values(&["emit"])
            .observe(started.elapsed().as_secs_f64());
        METRICS
            .log_appends
            .with_label_values(&["graph-events"])
            .inc();
        let (state, group, command) = (
            self.state.clone(),
            batch.group_id.clone(),
            batch.command_uuid,
        );
        tokio::task::spawn_blocking(move || {
            state.record(&[Decision {
                group: &group,
                command,
                offset,
                payload: &payload,
            }])
        })
        .await??;
        self.admitted
            .lock()
            .expect("admitted lock")
            .remove(&(batch.group_id.clone(), batch.command_uuid));
        node.status.decided(batch);
        Ok((offset, bytes))
    }

    /// A group's state: from the hot cache, or its base and deltas.
    async fn load(&self, group: &GroupId) -> anyhow::Result<Hot> {
        let (state, g) = (self.state.clone(), group.clone());
        let loaded = tokio::task::spawn_blocking(move || state.load(&g)).await??;
        let mut state = loaded
            .base
            .map(GroupState::from_snapshot)
            .unwrap_or_else(|| GroupState::new(group.clone()));
        for delta in &loaded.deltas {
            let batch =
                self.node.events.decode(delta).with_context(|| {
                    format!("a stored decision of group {group} does not decode")
                })?;
            apply_batch(&mut state, &batch);
        }
        Ok(Hot {
            state,
            base_bytes: loaded.base_bytes,
            delta_bytes: loaded.delta_bytes,
            last_offset: loaded.last_offset,
        })
    }

    /// Compacts a group whose deltas outgrew its base.
    async fn maybe_compact(&self, hot: &mut Hot) -> anyhow::Result<()> {
        let Some(through) = hot.last_offset else {
            return Ok(());
        };
        if hot.delta_bytes <= hot.base_bytes.max(COMPACT_FLOOR_BYTES) {
            return Ok(());
        }
        let snapshot = hot.state.snapshot();
        let Some(group) = hot.state.group_id().cloned() else {
            return Ok(());
        };
        let state = self.state.clone();
        hot.base_bytes =
            tokio::task::spawn_blocking(move || state.compact(&group, &snapshot, through))
                .await??;
        hot.delta_bytes = 0;
        Ok(())
    }

    /// One group's worker: decides its queue in order, then parks.
    async fn group_worker(
        self: Arc<Self>,
        group: GroupId,
        warm: Option<Hot>,
        mut rx: mpsc::Receiver<Job>,
        track: Arc<PartitionTrack>,
    ) -> anyhow::Result<Parked> {
        let node = self.node.clone();
        let decider = node.decider.clone();
        let mut hot = match warm {
            Some(hot) => hot,
            None => self.load(&group).await?,
        };
        while let Ok(first) = rx.try_recv() {
            let mut jobs = vec![first];
            while jobs.len() < self.options.bulk.max(1) {
                match rx.try_recv() {
                    Ok(j) => jobs.push(j),
                    Err(_) => break,
                }
            }
            let _permit = self.permits.acquire().await.context("processor closed")?;
            // Transaction times strictly increase within a group, even when
            // the log stamps several records with the same instant.
            let mut last = hot.state.latest_tx();
            let accepted: Vec<Accepted> = jobs
                .iter()
                .map(|j| {
                    let tx = match last {
                        Some(l) if j.timestamp <= l => l.saturating_add_micros(1),
                        _ => j.timestamp,
                    };
                    last = Some(tx);
                    (j, tx)
                })
                .map(|(j, tx)| Accepted {
                    command: j.command.clone(),
                    tx_time: tx,
                    source: Some(LogPosition {
                        partition: track.partition,
                        offset: j.offset,
                    }),
                })
                .collect();
            let state = &hot.state;
            let mut bulk = if accepted.len() > 1 {
                let started = std::time::Instant::now();
                // A panic while preparing the batch falls back to deciding
                // one by one, where it dead-letters only its own episode.
                let prepared = AssertUnwindSafe(decider.prepare_bulk(state, &accepted))
                    .catch_unwind()
                    .await;
                METRICS
                    .stage_duration
                    .with_label_values(&["extract_bulk"])
                    .observe(started.elapsed().as_secs_f64());
                prepared.ok()
            } else {
                None
            };
            for (i, (job, a)) in jobs.iter().zip(&accepted).enumerate() {
                let started = std::time::Instant::now();
                let mut result = match bulk.as_mut() {
                    Some(b) => guarded(b.decide(&decider, &hot.state, i, a)).await,
                    None => guarded(decider.decide(&hot.state, a)).await,
                };
                let mut attempt = 1;
                while let Err(Failure::Decide(e)) = &result {
                    if !retryable(e) || attempt >= self.options.attempts {
                        break;
                    }
                    tracing::warn!(group = %a.command.group_id(), error = %e, attempt, "decision failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * (1 << attempt))).await;
                    attempt += 1;
                    result = guarded(decider.decide(&hot.state, a)).await;
                }
                let batch = match result {
                    Ok(batch) => batch,
                    Err(e) => {
                        let reason =
                            format!("{} {} failed: {e}", a.command.name(), a.command.uuid());
                        let record = Record {
                            partition: track.partition,
                            offset: job.offset,
                            timestamp: job.timestamp,
                            key: a.command.group_id().as_str().as_bytes().to_vec(),
                            payload: node.commands.encode(&a.command),
                        };
                        dead_letter(
                            node.log.as_ref(),
                            &node.topics.dlq,
                            &node.topics.episodes,
                            &record,
                            &reason,
                        )
                        .await?;
                        METRICS
                            .episodes_processed
                            .with_label_values(&["dead_lettered"])
                            .inc();
                        EventBatch::dead_lettered(
                            a.command.uuid(),
                            a.command.group_id().clone(),
                            a.tx_time,
                            a.source,
                            reason,
                        )
                    }
                };
                let commit = OffsetCommit {
                    group: self.options.consumer_group.clone(),
                    topic: node.topics.episodes.clone(),
                    partition: track.partition,
                    next_offset: track.low_watermark(Some(job.offset)),
                };
                let (offset, bytes) = self.store_decision(&batch, Some(commit), &track).await?;
                apply_batch(&mut hot.state, &batch);
                hot.delta_bytes += bytes;
                hot.last_offset = Some(offset);
                record_metrics(&batch, started.elapsed());
                self.finish(&track, job.offset);
                self.publish(&track);
            }
            drop(bulk);
            self.maybe_compact(&mut hot).await?;
        }
        Ok((group, hot, rx))
    }
}

/// Why a decision produced no batch.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// It failed.
    #[error(transparent)]
    Decide(#[from] DecideError),
    /// It panicked: a bug met by this input. The episode is dead-lettered and
    /// the group goes on — no input may stop the process or make it
    /// crash-loop on restart.
    #[error("the decision panicked: {0}")]
    Panicked(String),
}

/// Runs a decision, turning a panic into a [`Failure`].
async fn guarded<T>(
    decision: impl std::future::Future<Output = Result<T, DecideError>>,
) -> Result<T, Failure> {
    match AssertUnwindSafe(decision).catch_unwind().await {
        Ok(result) => Ok(result?),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-text panic payload".to_owned());
            Err(Failure::Panicked(message))
        }
    }
}

fn retryable(e: &DecideError) -> bool {
    matches!(
        e,
        DecideError::Llm(_)
            | DecideError::EmbeddingCount { .. }
            | DecideError::NonFiniteEmbedding { .. }
    )
}

fn record_metrics(batch: &EventBatch, took: Duration) {
    if batch.dead_letter.is_none() {
        METRICS
            .episodes_processed
            .with_label_values(&["processed"])
            .inc();
    }
    METRICS
        .stage_duration
        .with_label_values(&["decide"])
        .observe(took.as_secs_f64());
    let invalidations = batch
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::FactInvalidated { .. }))
        .count();
    METRICS.invalidations.inc_by(invalidations as u64);
    if let Some(stats) = &batch.stats {
        for (stage, micros) in &stats.stage_micros {
            METRICS
                .stage_duration
                .with_label_values(&[stage])
                .observe(*micros as f64 / 1e6);
        }
        for (tier, n) in &stats.resolutions {
            METRICS.resolutions.with_label_values(&[tier]).inc_by(*n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_decision_becomes_a_failure_with_its_message() {
        let panicking = async {
            let depth: Option<u32> = None;
            if depth.is_none() {
                panic!("out of bounds at {}", 7);
            }
            Ok::<u32, DecideError>(1)
        };
        match guarded(panicking).await {
            Err(Failure::Panicked(m)) => assert_eq!(m, "out of bounds at 7"),
            other => panic!("expected a panic failure, got {other:?}"),
        }
        assert_eq!(guarded(async { Ok::<_, DecideError>(3) }).await.unwrap(), 3);
        let failed =
            guarded(async { Err::<u32, _>(DecideError::EmbeddingCount { got: 1, want: 2 }) }).await;
        assert!(matches!(failed, Err(Failure::Decide(_))));
    }
}
