//! The state store against the graph-events log: catching up on assignment
//! and checkpoints, so a restart or takeover replays only what follows.

use std::time::Duration;

use chronicle_metrics::METRICS;
use chronicle_model::GroupId;
use chronicle_store::Decision;
use uuid::Uuid;

use super::{PartitionTrack, Shared};

impl Shared {
    /// The graph-events partitions holding the decisions of episodes
    /// partition `p`'s groups: the same one when the topics have equal
    /// partition counts.
    pub(super) async fn event_partitions(&self, p: u32) -> anyhow::Result<(Vec<u32>, u32)> {
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
    pub(super) async fn catch_up(&self, p: u32) -> anyhow::Result<u64> {
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
    pub(super) async fn checkpoint(
        &self,
        track: &PartitionTrack,
        partitions: &[u32],
    ) -> anyhow::Result<()> {
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
}
