//! One group's worker: decides its queued episodes in order (bulk
//! extraction, then one resolution at a time), stores each decision and
//! keeps the group's state and its stored form compact.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chronicle_engine::{Accepted, DecideError, GroupState, apply_batch};
use chronicle_log::{NewRecord, OffsetCommit, Record};
use chronicle_metrics::METRICS;
use chronicle_model::{EventBatch, EventKind, GroupId, LogPosition};
use chronicle_store::Decision;
use futures::FutureExt;
use tokio::sync::mpsc;

use super::{Job, Parked, PartitionTrack, Shared, dead_letter};

/// A group whose state is in memory, with what its stored form weighs.
pub(super) struct Hot {
    state: GroupState,
    base_bytes: u64,
    delta_bytes: u64,
    last_offset: Option<u64>,
}

/// A delta log that outgrows a quarter of its base (and this floor) is
/// compacted into a new base: a cold load reads at most 1.25 times the
/// state, and decoding deltas (Avro, one fold each) is what a load costs
/// most — `bench scale` with tenants taking turns (every episode a cold
/// load), 150k episodes: 1,130 -> 1,438 ep/s in the last 50k against
/// compacting at the base's full size. Writes stay proportional to the
/// decisions (a base rewritten per quarter of its size).
const COMPACT_FLOOR_BYTES: u64 = 16 << 10;

impl Shared {
    /// Appends a decision to the graph-events log (with the offset commit)
    /// and stores it in the state store; returns its offset and bytes.
    pub(super) async fn store_decision(
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
        if hot.delta_bytes <= (hot.base_bytes / 4).max(COMPACT_FLOOR_BYTES) {
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
    pub(super) async fn group_worker(
        self: Arc<Self>,
        group: GroupId,
        warm: Option<Hot>,
        mut rx: mpsc::Receiver<Job>,
        track: Arc<PartitionTrack>,
    ) -> anyhow::Result<Parked> {
        let node = self.node.clone();
        let decider = node.decider()?.clone();
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
