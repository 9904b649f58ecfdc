//! The roles of distributed mode, each its own process: they run until
//! SIGINT or SIGTERM, then finish their in-flight work and leave their
//! consumer group cleanly.
//!
//! * `processor` — decides episodes of its assigned partitions;
//! * `projector` — projects its assigned graph-events partitions into its
//!   store and indices, serves their groups' API, and announces ownership on
//!   `<prefix>.owners` so other roles can find it;
//! * `gateway` — appends episodes (and retractions, triplets) over HTTP and
//!   forwards reads to owners;
//! * `query` — forwards every group request to its owner.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::middleware::from_fn_with_state;
use tokio::sync::watch;

use crate::app::auth::Auth;
use crate::http::proxy::{self, Directory};
use crate::http::{self as api, HttpOptions};
use crate::node::Node;
use crate::processor::{Processor, ProcessorOptions};

/// A channel that turns true on SIGINT or SIGTERM.
pub fn shutdown_signal() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        crate::runtime::terminated().await;
        tracing::info!("shutting down");
        let _ = tx.send(true);
    });
    rx
}

async fn until(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Serves `app` on `listen` until the shutdown signal.
async fn serve(
    listen: SocketAddr,
    app: axum::Router,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}; pick another --listen"))?;
    Ok(tokio::spawn(api::listen::serve(
        listener,
        app,
        api::listen::ConnectionLimits::default(),
        until(shutdown),
    )))
}

fn options(
    auth: Option<PathBuf>,
    listen: SocketAddr,
    max_body_bytes: usize,
) -> anyhow::Result<HttpOptions> {
    api::check_listen(listen, auth.is_some())?;
    Ok(HttpOptions {
        auth: auth.as_deref().map(Auth::load).transpose()?,
        max_body_bytes,
        processor_in_process: false,
        ..Default::default()
    })
}

/// `chronicle processor`.
pub async fn processor(node: Arc<Node>, metrics: Option<SocketAddr>) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    if let Some(addr) = metrics {
        api::serve_ops(addr, until(shutdown.clone())).await?;
    }
    eprintln!(
        "processor: consuming {} as a member of chronicle-processor",
        node.topics.episodes
    );
    Processor::new(node, ProcessorOptions::default())
        .run(shutdown)
        .await
}

/// `chronicle projector`.
pub async fn projector(
    node: Arc<Node>,
    listen: Option<SocketAddr>,
    advertise: Option<String>,
    auth: Option<PathBuf>,
) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let owners = proxy::owners_topic(&node.settings.topic_prefix);
    node.log.create_topic(&owners, 1).await?;
    let server = match listen {
        Some(addr) => {
            let app = api::router(
                node.clone(),
                options(auth, addr, api::DEFAULT_MAX_BODY_BYTES)?,
            );
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}; pick another --listen"))?;
            let url = advertise.unwrap_or_else(|| {
                format!(
                    "http://{}",
                    listener
                        .local_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default()
                )
            });
            let stop = shutdown.clone();
            let http = tokio::spawn(api::listen::serve(
                listener,
                app,
                api::listen::ConnectionLimits::default(),
                until(stop),
            ));
            // Announce what this projector owns: on every change, and every few seconds.
            let (node2, mut stop) = (node.clone(), shutdown.clone());
            tokio::spawn(async move {
                let mut owned = node2.owned.subscribe();
                loop {
                    let partitions: Vec<u32> = owned.borrow_and_update().iter().copied().collect();
                    if let Err(e) =
                        proxy::announce(node2.log.as_ref(), &owners, &url, &partitions).await
                    {
                        tracing::warn!(error = %e, "announcing partition ownership");
                    }
                    tokio::select! {
                        _ = owned.changed() => {}
                        _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                        _ = stop.wait_for(|v| *v) => break,
                    }
                }
            });
            eprintln!("projector: serving its partitions' groups on {addr}");
            Some(http)
        }
        None => None,
    };
    eprintln!(
        "projector: projecting {} as a member of chronicle-projector",
        node.topics.graph_events
    );
    let result = crate::runtime::run_projector(node, shutdown)
        .await
        .map(drop);
    if let Some(h) = server {
        let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
    }
    result
}

/// `chronicle gateway`.
pub async fn gateway(
    node: Arc<Node>,
    listen: SocketAddr,
    auth: Option<PathBuf>,
    max_body_bytes: usize,
) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let directory = Arc::new(Directory::new(
        node.log.clone(),
        &node.settings.topic_prefix,
    ));
    let app = api::router(node.clone(), options(auth, listen, max_body_bytes)?)
        .layer(from_fn_with_state(directory, proxy::forward_reads));
    eprintln!("gateway: accepting episodes on {listen}; reads go to the owning projectors");
    serve(listen, app, shutdown)
        .await?
        .await
        .context("gateway server")??;
    Ok(())
}

/// `chronicle query`.
pub async fn query(node: Arc<Node>, listen: SocketAddr) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let directory = Arc::new(Directory::new(
        node.log.clone(),
        &node.settings.topic_prefix,
    ));
    let app = api::ops_router().merge(
        axum::Router::new()
            .route("/v1/groups/{*rest}", axum::routing::any(proxy::forward_all))
            .with_state(directory),
    );
    eprintln!("query: routing group requests on {listen} to the owning projectors");
    serve(listen, app, shutdown)
        .await?
        .await
        .context("query server")??;
    Ok(())
}
