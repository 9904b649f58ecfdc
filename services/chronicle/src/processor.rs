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
use futures::FutureExt;
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

/// What the processor learned from the graph-events log at start.
#[derive(Default)]
pub struct Recovered {
    /// Each group's folded state.
    pub states: HashMap<GroupId, GroupState>,
    /// Commands already decided, by group (ids are only unique within a group).
    pub decided: HashSet<(GroupId, Uuid)>,
    /// Records read.
    pub records: u64,
}

/// Folds the graph-events log into per-group state, for the groups whose
/// commands live on episodes partition `partition` (all groups when `None`).
pub async fn recover(node: &Node, partition: Option<u32>) -> anyhow::Result<Recovered> {
    let mut out = Recovered::default();
    let topic = &node.topics.graph_events;
    let events = node.log.partition_count(topic).await?;
    let episodes = node.log.partition_count(&node.topics.episodes).await?;
    let mine = |g: &GroupId| {
        partition.is_none_or(|p| chronicle_log::partition_for(g.as_str().as_bytes(), episodes) == p)
    };
    // With equal partition counts a group sits on the same partition of both topics.
    let partitions: Vec<u32> = match partition {
        Some(p) if events == episodes => vec![p],
        _ => (0..events).collect(),
    };
    for p in partitions {
        chronicle_log::scan(node.log.as_ref(), topic, p, 0, |r| {
            out.records += 1;
            match node.events.decode(&r.payload) {
                Ok(batch) if mine(&batch.group_id) => {
                    out.decided
                        .insert((batch.group_id.clone(), batch.command_uuid));
                    node.status.decided(&batch);
                    let state = out
                        .states
                        .entry(batch.group_id.clone())
                        .or_insert_with(|| GroupState::new(batch.group_id.clone()));
                    apply_batch(state, &batch);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(partition = p, offset = r.offset, error = %e, "skipping undecodable graph-events record")
                }
            }
        })
        .await?;
    }
    Ok(out)
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

/// The processor role.
pub struct Processor {
    node: Arc<Node>,
    options: ProcessorOptions,
    decided: Mutex<HashSet<(GroupId, Uuid)>>,
    permits: Semaphore,
}

impl Processor {
    /// A processor on a node.
    pub fn new(node: Arc<Node>, options: ProcessorOptions) -> Arc<Self> {
        Arc::new(Processor {
            permits: Semaphore::new(options.max_parallel.max(1)),
            node,
            options,
            decided: Mutex::new(HashSet::new()),
        })
    }

    /// Runs until `shutdown` turns true (finishing decisions in flight) or a
    /// log error stops it. Works on the partitions its consumer-group
    /// membership assigns (all of them in embedded mode): on assignment it
    /// rebuilds the partition's group states from the graph-events log; on
    /// revocation it finishes or drops in-flight work before releasing.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) -> anyhow::Result<()> {
        let members = format!("{}.members", self.options.consumer_group);
        let mut membership = self
            .node
            .log
            .join(&members, &self.node.topics.episodes)
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
                            if self.options.partitions.as_ref().is_some_and(|only| !only.contains(&p)) || running.contains_key(&p) {
                                continue;
                            }
                            let recovered = recover(&self.node, Some(p)).await.context("recovering processor state")?;
                            tracing::info!(partition = p, records = recovered.records, groups = recovered.states.len(), "partition assigned");
                            self.decided.lock().expect("decided lock").extend(recovered.decided);
                            let (stop, stop_rx) = watch::channel(false);
                            let this = self.clone();
                            let handle = tokio::spawn(async move { this.partition_loop(p, recovered.states, stop_rx).await });
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

    async fn partition_loop(
        self: Arc<Self>,
        partition: u32,
        mut states: HashMap<GroupId, GroupState>,
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
        });
        let mut next = start;
        let mut workers: HashMap<GroupId, mpsc::Sender<Job>> = HashMap::new();
        let mut tasks: JoinSet<anyhow::Result<()>> = JoinSet::new();
        self.publish(&track);
        loop {
            if *shutdown.borrow() {
                break;
            }
            let records = tokio::select! {
                r = node.log.read(&topic, partition, next, 256, Duration::from_millis(250)) => r?,
                _ = shutdown.changed() => continue,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    done.context("group worker panicked")??;
                    continue;
                }
            };
            let end = node.log.end_offset(&topic, partition).await.unwrap_or(next);
            for r in records {
                next = r.offset + 1;
                track
                    .inflight
                    .lock()
                    .expect("inflight lock")
                    .insert(r.offset);
                track.next_read.store(next, Ordering::SeqCst);
                let Some(job) = self.admit(&r).await? else {
                    self.finish(&track, r.offset);
                    continue;
                };
                let group = job.command.group_id().clone();
                let sender = match workers.get(&group) {
                    Some(s) => s.clone(),
                    None => {
                        let (tx, rx) = mpsc::channel(self.options.queue.max(1));
                        let state = states
                            .remove(&group)
                            .unwrap_or_else(|| GroupState::new(group.clone()));
                        let this = self.clone();
                        let track = track.clone();
                        tasks.spawn(async move { this.group_worker(state, rx, track).await });
                        workers.insert(group.clone(), tx.clone());
                        tx
                    }
                };
                sender.send(job).await.context("group worker stopped")?;
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
        self.publish(&track);
        Ok(())
    }

    /// Decodes a record into a job, or dead-letters it (`None`).
    async fn admit(&self, r: &Record) -> anyhow::Result<Option<Job>> {
        let node = &self.node;
        let topic = &node.topics.episodes;
        let key_group = std::str::from_utf8(&r.key)
            .ok()
            .and_then(|k| GroupId::new(k).ok());
        let reason = match (node.commands.decode(&r.payload), &key_group) {
            (Ok(cmd), Some(g)) if cmd.group_id() == g => {
                if self
                    .decided
                    .lock()
                    .expect("decided lock")
                    .contains(&(g.clone(), cmd.uuid()))
                {
                    METRICS
                        .episodes_processed
                        .with_label_values(&["skipped"])
                        .inc();
                    return Ok(None);
                }
                node.status.pending(
                    cmd.uuid(),
                    g,
                    LogPosition {
                        partition: r.partition,
                        offset: r.offset,
                    },
                );
                return Ok(Some(Job {
                    command: cmd,
                    offset: r.offset,
                    timestamp: r.timestamp,
                }));
            }
            (Ok(cmd), _) => format!(
                "record key `{}` does not match the command's group `{}`",
                String::from_utf8_lossy(&r.key),
                cmd.group_id()
            ),
            (Err(e), _) => format!("undecodable command: {e}"),
        };
        dead_letter(&*node.log, &node.topics.dlq, topic, r, &reason).await?;
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
            self.append_decision(&batch, None).await?;
        }
        METRICS
            .episodes_processed
            .with_label_values(&["dead_lettered"])
            .inc();
        Ok(None)
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

    async fn append_decision(
        &self,
        batch: &EventBatch,
        commit: Option<OffsetCommit>,
    ) -> anyhow::Result<()> {
        let node = &self.node;
        let started = std::time::Instant::now();
        node.log
            .append(
                &node.topics.graph_events,
                vec![NewRecord {
                    key: batch.group_id.as_str().as_bytes().to_vec(),
                    payload: node.events.encode(batch),
                }],
                commit,
            )
            .await
            .context("appending a decision to the graph-events log")?;
        METRICS
            .stage_duration
            .with_label_values(&["emit"])
            .observe(started.elapsed().as_secs_f64());
        METRICS
            .log_appends
            .with_label_values(&["graph-events"])
            .inc();
        self.decided
            .lock()
            .expect("decided lock")
            .insert((batch.group_id.clone(), batch.command_uuid));
        node.status.decided(batch);
        Ok(())
    }

    /// One group's worker: decides its queue in order.
    async fn group_worker(
        self: Arc<Self>,
        mut state: GroupState,
        mut rx: mpsc::Receiver<Job>,
        track: Arc<PartitionTrack>,
    ) -> anyhow::Result<()> {
        let node = self.node.clone();
        let decider = node.decider.clone();
        while let Some(first) = rx.recv().await {
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
            let mut last = state.latest_tx();
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
            let mut bulk = if accepted.len() > 1 {
                let started = std::time::Instant::now();
                // A panic while preparing the batch falls back to deciding
                // one by one, where it dead-letters only its own episode.
                let prepared = AssertUnwindSafe(decider.prepare_bulk(&state, &accepted))
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
                if self
                    .decided
                    .lock()
                    .expect("decided lock")
                    .contains(&(a.command.group_id().clone(), a.command.uuid()))
                {
                    // the same command appended twice: decided once
                    METRICS
                        .episodes_processed
                        .with_label_values(&["skipped"])
                        .inc();
                    self.finish(&track, job.offset);
                    continue;
                }
                let started = std::time::Instant::now();
                let mut result = match bulk.as_mut() {
                    Some(b) => guarded(b.decide(&decider, &state, i, a)).await,
                    None => guarded(decider.decide(&state, a)).await,
                };
                let mut attempt = 1;
                while let Err(Failure::Decide(e)) = &result {
                    if !retryable(e) || attempt >= self.options.attempts {
                        break;
                    }
                    tracing::warn!(group = %a.command.group_id(), error = %e, attempt, "decision failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * (1 << attempt))).await;
                    attempt += 1;
                    result = guarded(decider.decide(&state, a)).await;
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
                            &*node.log,
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
                self.append_decision(&batch, Some(commit)).await?;
                apply_batch(&mut state, &batch);
                record_metrics(&batch, started.elapsed());
                self.finish(&track, job.offset);
                self.publish(&track);
            }
        }
        Ok(())
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
