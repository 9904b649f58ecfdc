//! Running the processor and the projector in this process, waiting for
//! them to catch up with the log, and the signal that ends a process.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use chronicle_log::Assignment;

use crate::node::{Node, NotInRole};
use crate::processor::{Processor, ProcessorOptions};
use crate::projector::{Projection, ProjectorReport};

/// The background roles of an embedded node.
pub struct Running {
    shutdown: watch::Sender<bool>,
    processor: Option<JoinHandle<anyhow::Result<()>>>,
    projector: Option<JoinHandle<anyhow::Result<ProjectorReport>>>,
}

/// A role (or the face serving it) stopped before it was asked to.
#[derive(Debug)]
pub struct RoleStopped;

impl RoleStopped {
    /// The outcome of a face whose roles stopped on their own: the error
    /// a role ended with, or else one naming `server`.
    pub fn outcome(stopped: anyhow::Result<()>, server: &str) -> anyhow::Result<()> {
        stopped?;
        anyhow::bail!("a role stopped unexpectedly; the {server} shut down")
    }
}

/// The projection of a node's own store and indices.
pub fn projection(node: &Node) -> Result<Projection, NotInRole> {
    Ok(Projection {
        log: node.log.clone(),
        topic: node.topics.graph_events.clone(),
        dlq: node.topics.dlq.clone(),
        store: node.store()?.clone(),
        index: node.index()?.clone(),
        partitions: None,
        status: Some(node.status.clone()),
        index_at_end: false,
    })
}

/// Drops a node's projection and folds the whole graph-events log into it
/// again: what `rebuild` and the benchmarks time. `on_record` ticks per record.
pub async fn reproject(node: &Node, on_record: impl FnMut()) -> anyhow::Result<ProjectorReport> {
    node.store()?.clear().await.context("clearing the store")?;
    node.index()?.clear()?;
    node.index()?.commit(&Default::default())?;
    let rebuild = Projection {
        index_at_end: true,
        ..projection(node)?
    };
    rebuild.run(None, None, None, on_record).await
}

/// Starts the processor and the projector.
pub fn start(node: &Arc<Node>, options: ProcessorOptions) -> Running {
    let (shutdown, rx) = watch::channel(false);
    let processor = {
        let p = Processor::new(node.clone(), options);
        let rx = rx.clone();
        tokio::spawn(async move { p.run(rx).await })
    };
    let projector = {
        let node = node.clone();
        tokio::spawn(async move { run_projector(node, rx).await })
    };
    Running {
        shutdown,
        processor: Some(processor),
        projector: Some(projector),
    }
}

/// Runs the projector as a member of the projector group: it projects the
/// graph-events partitions it owns (all of them in embedded mode), and on a
/// rebalance stops, commits, releases, and resumes with its new partitions.
pub async fn run_projector(
    node: Arc<Node>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<ProjectorReport> {
    projection(&node)?;
    let mut membership = node
        .log
        .join("chronicle-projector.members", &node.topics.graph_events)
        .await?;
    let mut owned: std::collections::BTreeSet<u32> = Default::default();
    let mut report = ProjectorReport::default();
    loop {
        let (stop, stop_rx) = watch::channel(false);
        // Announce ownership only once the indices cover the partitions (the
        // projection publishes its positions after re-indexing a new one).
        {
            let (node, owned, mut projected) = (
                node.clone(),
                owned.clone(),
                node.progress.projected.subscribe(),
            );
            let mut stop = stop_rx.clone();
            tokio::spawn(async move {
                let ready = |m: &BTreeMap<u32, u64>| owned.iter().all(|p| m.contains_key(p));
                tokio::select! {
                    r = projected.wait_for(ready) => if r.is_ok() { node.owned.send_replace(owned); },
                    _ = stop.wait_for(|v| *v) => {}
                }
            });
        }
        let mut task = (!owned.is_empty()).then(|| {
            let node = node.clone();
            let partitions: Vec<u32> = owned.iter().copied().collect();
            tokio::spawn(async move {
                Projection {
                    partitions: Some(partitions),
                    ..projection(&node)?
                }
                .run(None, Some(stop_rx), Some(&node.progress.projected), || {})
                .await
            })
        });
        let change = tokio::select! {
            _ = shutdown.changed() => None,
            change = membership.next() => Some(change?),
            done = async { task.as_mut().expect("guarded").await }, if task.is_some() => {
                done.context("projector panicked")??;
                anyhow::bail!("the projector stopped unexpectedly");
            }
        };
        let _ = stop.send(true);
        if let Some(t) = task {
            let r = t.await.context("projector panicked")??;
            report.records += r.records;
            report.events_applied += r.events_applied;
            report.dead_lettered += r.dead_lettered;
        }
        match change {
            None if *shutdown.borrow() => return Ok(report),
            None => {}
            Some(Assignment::Assigned(ps)) => owned.extend(ps),
            Some(Assignment::Revoked {
                partitions,
                release,
            }) => {
                for p in &partitions {
                    owned.remove(p);
                }
                node.owned.send_replace(owned.clone());
                node.progress.projected.send_modify(|m| {
                    for p in &partitions {
                        m.remove(p);
                    }
                });
                release.done();
            }
        }
    }
}

fn reached(progress: &BTreeMap<u32, u64>, targets: &BTreeMap<u32, u64>) -> bool {
    targets
        .iter()
        .all(|(p, end)| *end == 0 || progress.get(p).is_some_and(|o| o >= end))
}

impl Running {
    /// Whether a role has stopped on its own (a server must not keep
    /// accepting episodes nobody will process); [`Running::stop`] says why.
    pub fn stopped(&self) -> bool {
        self.processor.as_ref().is_none_or(|h| h.is_finished())
            || self.projector.as_ref().is_none_or(|h| h.is_finished())
    }

    /// Waits for `until` (a signal, a closed session: a clean end) while
    /// watching the roles and `other_stopped` (say, the HTTP listener);
    /// `Err(RoleStopped)` when something stopped on its own first. Shared by
    /// every long-running face (HTTP, MCP over stdio).
    pub async fn supervise<F: Future>(
        &self,
        until: F,
        other_stopped: impl Fn() -> bool,
    ) -> Result<F::Output, RoleStopped> {
        tokio::pin!(until);
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                out = &mut until => return Ok(out),
                _ = tick.tick() => {
                    if self.stopped() || other_stopped() {
                        return Err(RoleStopped);
                    }
                }
            }
        }
    }

    /// Fails if a role stopped on its own (an error or a panic).
    async fn check_alive(&mut self) -> anyhow::Result<()> {
        if self.processor.as_ref().is_some_and(|h| h.is_finished()) {
            let h = self.processor.take().expect("checked");
            h.await.context("processor panicked")??;
            anyhow::bail!("the processor stopped unexpectedly");
        }
        if self.projector.as_ref().is_some_and(|h| h.is_finished()) {
            let h = self.projector.take().expect("checked");
            h.await.context("projector panicked")??;
            anyhow::bail!("the projector stopped unexpectedly");
        }
        Ok(())
    }

    /// Waits until every command appended so far is decided and projected;
    /// `tick` is called with (decided, total) as decisions land.
    pub async fn wait_caught_up(
        &mut self,
        node: &Node,
        mut tick: impl FnMut(u64, u64),
    ) -> anyhow::Result<()> {
        let episodes = node.end_offsets(&node.topics.episodes).await?;
        let total: u64 = episodes.values().sum();
        let mut decided = node.progress.decided.subscribe();
        loop {
            self.check_alive().await?;
            let done = {
                let d = decided.borrow_and_update();
                tick(
                    episodes
                        .keys()
                        .map(|p| d.get(p).copied().unwrap_or(0))
                        .sum::<u64>()
                        .min(total),
                    total,
                );
                reached(&d, &episodes)
            };
            if done {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), decided.changed()).await;
        }
        let events = node.end_offsets(&node.topics.graph_events).await?;
        let mut projected = node.progress.projected.subscribe();
        loop {
            self.check_alive().await?;
            if reached(&projected.borrow_and_update(), &events) {
                return Ok(());
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), projected.changed()).await;
        }
    }

    /// Stops both roles, letting in-flight work finish.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        if let Some(h) = self.processor.take() {
            h.await.context("processor panicked")??;
        }
        if let Some(h) = self.projector.take() {
            h.await.context("projector panicked")??;
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

/// Resolves when the process is asked to stop: Ctrl-C, or SIGTERM on Unix
/// (what `docker stop` and Kubernetes send).
pub async fn terminated() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
