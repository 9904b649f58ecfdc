//! The projector: folds the graph-events log into a graph store and the
//! search indices, through the one `evolve` fold.
//!
//! Positions live with the data: the store commits each record's position
//! in the same transaction as its changes, and the indices commit their
//! checkpoint in the same commit as their documents. The indices are always
//! committed before the store is made durable, so after a crash the index
//! checkpoint is at or past the store's position and re-applying the gap to
//! the store is enough. A rebuild or an audit replay is the same projector
//! pointed at an empty store and index, optionally stopping at a bound.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronicle_codec::EventBatchCodec;
use chronicle_index::{DocKind, IndexDoc, SearchIndex};
use chronicle_log::EventLog;
use chronicle_metrics::METRICS;
use chronicle_model::{EventBatch, GroupId, LogPosition};
use chronicle_store::{GraphStore, Positions, Touched};
use tokio::sync::watch;

/// Where a projection reads from and writes to.
#[derive(Clone)]
pub struct Projection {
    /// The log holding the graph-events topic.
    pub log: Arc<dyn EventLog>,
    /// The graph-events topic.
    pub topic: String,
    /// The dead-letter topic for undecodable records.
    pub dlq: String,
    /// The graph store.
    pub store: Arc<dyn GraphStore>,
    /// The search indices.
    pub index: Arc<SearchIndex>,
    /// Partitions to project; all when `None` (distributed projectors own some).
    pub partitions: Option<Vec<u32>>,
    /// Where decisions seen here are recorded (a distributed projector answers
    /// status requests for its groups).
    pub status: Option<std::sync::Arc<crate::status::StatusBoard>>,
    /// Fill the indices once from the store when the fold is done, not
    /// record by record: for a rebuild or an audit replay into empty
    /// indices, which nobody searches before the run ends. The indices'
    /// checkpoint stays behind the store until then, so a crash mid-run
    /// re-indexes on the next open (`align_index`).
    pub index_at_end: bool,
}

/// Counts of one projector run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectorReport {
    /// Records read.
    pub records: u64,
    /// Events that changed something.
    pub events_applied: u64,
    /// Records dead-lettered.
    pub dead_lettered: u64,
}

/// Records per store transaction.
const READ_BATCH: usize = 512;
/// Records per store transaction when the indices are filled at the end:
/// fewer, larger commits rewrite fewer copy-on-write pages per record.
const BULK_READ_BATCH: usize = 16384;
/// Records between durable commits while catching up.
const COMMIT_EVERY: u64 = 4096;
/// Longest time between durable commits while serving.
const COMMIT_INTERVAL: Duration = Duration::from_millis(500);

impl Projection {
    async fn partitions(&self) -> anyhow::Result<Vec<u32>> {
        Ok(match &self.partitions {
            Some(ps) => ps.clone(),
            None => (0..self.log.partition_count(&self.topic).await?).collect(),
        })
    }

    /// Re-indexes the groups of every partition whose index checkpoint is
    /// behind the store's position (a lost or new index directory, or a
    /// partition this instance just took over) — before projecting on.
    async fn align_index(&self, partitions: &[u32], positions: &Positions) -> anyhow::Result<()> {
        let checkpoint = self.index.checkpoint();
        let behind: Vec<u32> = partitions
            .iter()
            .copied()
            .filter(|p| {
                checkpoint.get(p).copied().unwrap_or(0) < positions.get(p).copied().unwrap_or(0)
            })
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        tracing::info!(
            ?behind,
            "search indices are behind the store; re-indexing those partitions' groups"
        );
        let count = self.log.partition_count(&self.topic).await?;
        for group in self.store.groups().await? {
            if !behind.contains(&chronicle_log::partition_for(
                group.as_str().as_bytes(),
                count,
            )) {
                continue;
            }
            let mut docs = Vec::new();
            for f in self.store.facts(&group).await? {
                docs.push(IndexDoc::fact(&group, &f));
            }
            for e in self.store.entities(&group).await? {
                docs.push(IndexDoc::entity(&group, &e));
            }
            for e in self
                .store
                .episodes_by_time(&group, None, usize::MAX)
                .await?
            {
                docs.extend(IndexDoc::of_episode(&group, &e));
            }
            for c in self.store.communities(&group).await? {
                docs.push(IndexDoc::community(&group, &c));
            }
            self.index.upsert(docs)?;
        }
        let mut aligned = checkpoint;
        for p in behind {
            aligned.insert(p, positions[&p]);
        }
        self.index.commit(&aligned)?;
        Ok(())
    }

    /// Brings the indices' documents for the touched records up to date.
    async fn refresh_index(&self, touched: BTreeMap<GroupId, Touched>) -> anyhow::Result<()> {
        for (group, t) in touched {
            let mut docs = Vec::new();
            for u in t.facts {
                match self.store.fact(&group, u).await? {
                    Some(f) => docs.push(IndexDoc::fact(&group, &f)),
                    None => self.index.delete(&group, DocKind::Fact, u)?,
                }
            }
            for u in t.entities {
                match self.store.entity(&group, u).await? {
                    Some(e) => docs.push(IndexDoc::entity(&group, &e)),
                    None => self.index.delete(&group, DocKind::Entity, u)?,
                }
            }
            for u in t.episodes {
                match self.store.episode(&group, u).await? {
                    Some(e) => docs.extend(IndexDoc::of_episode(&group, &e)),
                    None => {
                        for kind in DocKind::OF_EPISODE {
                            self.index.delete(&group, kind, u)?;
                        }
                    }
                }
            }
            for u in t.communities {
                match self.store.community(&group, u).await? {
                    Some(c) => docs.push(IndexDoc::community(&group, &c)),
                    None => self.index.delete(&group, DocKind::Community, u)?,
                }
            }
            self.index.upsert(docs)?;
        }
        Ok(())
    }

    /// Durable commit: indices (with their checkpoint) first, then the store.
    async fn commit(&self, next: &Positions) -> anyhow::Result<()> {
        if self.index_at_end {
            return Ok(self.store.flush().await?);
        }
        let started = Instant::now();
        let mut checkpoint = self.index.checkpoint();
        checkpoint.extend(next.iter().map(|(p, o)| (*p, *o)));
        self.index.commit(&checkpoint)?;
        self.store.flush().await?;
        METRICS
            .stage_duration
            .with_label_values(&["project_commit"])
            .observe(started.elapsed().as_secs_f64());
        let stats = self.index.stats();
        for (kind, n) in &stats.documents {
            METRICS
                .index_documents
                .with_label_values(&[kind.as_str()])
                .set(*n as i64);
        }
        METRICS
            .index_size_bytes
            .with_label_values(&["disk"])
            .set(stats.disk_bytes as i64);
        METRICS
            .index_size_bytes
            .with_label_values(&["vector_memory"])
            .set(stats.vector_memory_bytes as i64);
        Ok(())
    }

    /// Projects until every partition reaches `until` (or its end when
    /// `None`), or until `shutdown` turns true when `serve` is set; keeps
    /// `progress` up to date.
    pub async fn run(
        &self,
        until: Option<&BTreeMap<u32, u64>>,
        serve: Option<watch::Receiver<bool>>,
        progress: Option<&watch::Sender<BTreeMap<u32, u64>>>,
        mut on_record: impl FnMut(),
    ) -> anyhow::Result<ProjectorReport> {
        let codec = EventBatchCodec::new();
        let partitions = self.partitions().await?;
        let stored = self.store.positions().await?;
        self.align_index(&partitions, &stored).await?;
        let checkpoint = self.index.checkpoint();
        let mut next: Positions = partitions
            .iter()
            .map(|p| (*p, stored.get(p).copied().unwrap_or(0)))
            .collect();
        let mut report = ProjectorReport::default();
        let mut uncommitted = 0u64;
        let mut last_commit = Instant::now();
        if let Some(tx) = progress {
            tx.send_modify(|m| m.extend(next.iter().map(|(k, v)| (*k, *v))));
        }
        loop {
            if serve.as_ref().is_some_and(|s| *s.borrow()) {
                break;
            }
            let mut touched: BTreeMap<GroupId, Touched> = BTreeMap::new();
            let mut progressed = false;
            for &p in &partitions {
                let from = next[&p];
                let bound = until.and_then(|u| u.get(&p).copied());
                if bound.is_some_and(|b| from >= b) {
                    continue;
                }
                let batch = if self.index_at_end {
                    BULK_READ_BATCH
                } else {
                    READ_BATCH
                };
                let max = bound.map_or(batch, |b| batch.min((b - from) as usize));
                let records = self
                    .log
                    .read(&self.topic, p, from, max, Duration::ZERO)
                    .await?;
                if records.is_empty() {
                    continue;
                }
                progressed = true;
                let mut batches: Vec<(LogPosition, EventBatch)> = Vec::with_capacity(records.len());
                for r in &records {
                    report.records += 1;
                    on_record();
                    match codec.decode(&r.payload) {
                        Ok(b) => {
                            if let Some(status) = &self.status {
                                status.decided(&b);
                            }
                            batches.push((
                                LogPosition {
                                    partition: p,
                                    offset: r.offset,
                                },
                                b,
                            ));
                        }
                        Err(e) => {
                            report.dead_lettered += 1;
                            crate::processor::dead_letter(
                                &*self.log,
                                &self.dlq,
                                &self.topic,
                                r,
                                &format!("undecodable graph-events record: {e}"),
                            )
                            .await?;
                        }
                    }
                }
                let outcomes = self.store.apply(&batches).await?;
                for ((pos, _), outcome) in batches.iter().zip(outcomes) {
                    report.events_applied += outcome.events_applied as u64;
                    METRICS
                        .projector_events_applied
                        .inc_by(outcome.events_applied as u64);
                    if !self.index_at_end && pos.offset >= checkpoint.get(&p).copied().unwrap_or(0)
                    {
                        touched
                            .entry(outcome.group_id)
                            .or_default()
                            .merge(outcome.touched);
                    }
                }
                let last = records.last().map(|r| r.offset + 1).unwrap_or(from);
                next.insert(p, last);
                uncommitted += records.len() as u64;
            }
            self.refresh_index(touched).await?;
            let caught_up = !progressed;
            if uncommitted > 0
                && (uncommitted >= COMMIT_EVERY
                    || caught_up
                    || last_commit.elapsed() >= COMMIT_INTERVAL)
            {
                self.commit(&next).await?;
                uncommitted = 0;
                last_commit = Instant::now();
                if let Some(tx) = progress {
                    tx.send_modify(|m| m.extend(next.iter().map(|(k, v)| (*k, *v))));
                }
            }
            if caught_up {
                for &p in &partitions {
                    let end = self.log.end_offset(&self.topic, p).await.unwrap_or(0);
                    METRICS
                        .projector_lag
                        .with_label_values(&[&p.to_string()])
                        .set(end.saturating_sub(next[&p]) as i64);
                }
                match &serve {
                    None => break,
                    Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
        }
        if uncommitted > 0 {
            self.commit(&next).await?;
            if let Some(tx) = progress {
                tx.send_modify(|m| m.extend(next.iter().map(|(k, v)| (*k, *v))));
            }
        }
        if self.index_at_end {
            self.align_index(&partitions, &self.store.positions().await?)
                .await?;
        }
        Ok(report)
    }
}
