//! The roles of distributed mode, each its own process: they run until
//! SIGINT or SIGTERM, then finish their in-flight work and leave their
//! consumer group cleanly.

use std::sync::Arc;

use tokio::sync::watch;

use crate::node::Node;
use crate::processor::{Processor, ProcessorOptions};

/// A channel that turns true on SIGINT or SIGTERM.
pub fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let term = std::future::pending::<()>();
        tokio::select! {
            _ = ctrl_c => {}
            _ = term => {}
        }
        tracing::info!("shutting down");
        let _ = tx.send(true);
    });
    rx
}

/// `chronicle processor`.
pub async fn processor(node: Arc<Node>) -> anyhow::Result<()> {
    eprintln!(
        "processor: consuming {} as a member of chronicle-processor",
        node.topics.episodes
    );
    Processor::new(node, ProcessorOptions::default())
        .run(shutdown_signal())
        .await
}

/// `chronicle projector`.
pub async fn projector(node: Arc<Node>) -> anyhow::Result<()> {
    eprintln!(
        "projector: projecting {} as a member of chronicle-projector",
        node.topics.graph_events
    );
    crate::runtime::run_projector(node, shutdown_signal())
        .await
        .map(drop)
}
