//! One partition's reader: admits its records and dispatches them to
//! per-group workers, bounding the groups held in memory.

use std::collections::{BTreeSet, HashMap};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use chronicle_log::Record;
use chronicle_metrics::METRICS;
use chronicle_model::{EventBatch, GroupId, IdKind, LogPosition, derive_named_id};
use lru::LruCache;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::group::Hot;
use super::{Job, Parked, PartitionTrack, Shared, dead_letter};

impl Shared {
    pub(super) async fn partition_loop(
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
    pub(super) fn park(
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
    pub(super) async fn admit_all(
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
    pub(super) async fn reject(
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

    pub(super) fn finish(&self, track: &PartitionTrack, offset: u64) {
        track
            .inflight
            .lock()
            .expect("inflight lock")
            .remove(&offset);
    }

    pub(super) fn publish(&self, track: &PartitionTrack) {
        let low = track.low_watermark(None);
        self.node.progress.decided.send_modify(|m| {
            m.insert(track.partition, low);
        });
    }
}
