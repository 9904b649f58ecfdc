//! Running the processor and the projector in this process, and waiting
//! for them to catch up with the log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::node::Node;
use crate::processor::{Processor, ProcessorOptions};
use crate::projector::{Projection, ProjectorReport};

/// The background roles of an embedded node.
pub struct Running {
    shutdown: watch::Sender<bool>,
    processor: Option<JoinHandle<anyhow::Result<()>>>,
    projector: Option<JoinHandle<anyhow::Result<ProjectorReport>>>,
}

/// The projection of a node's own store and indices.
pub fn projection(node: &Node) -> Projection {
    Projection {
        log: node.log.clone(),
        topic: node.topics.graph_events.clone(),
        dlq: node.topics.dlq.clone(),
        store: node.store.clone(),
        index: node.index.clone(),
        partitions: None,
    }
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
        tokio::spawn(async move {
            projection(&node)
                .run(None, Some(rx), Some(&node.progress.projected), || {})
                .await
        })
    };
    Running {
        shutdown,
        processor: Some(processor),
        projector: Some(projector),
    }
}

fn reached(progress: &BTreeMap<u32, u64>, targets: &BTreeMap<u32, u64>) -> bool {
    targets
        .iter()
        .all(|(p, end)| *end == 0 || progress.get(p).is_some_and(|o| o >= end))
}

impl Running {
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
