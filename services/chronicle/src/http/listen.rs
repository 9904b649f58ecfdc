//! The accept loop (HTTP/1.1): a bound on open connections and on how long
//! a client may take to send a request head (also while a kept-alive
//! connection idles), so slow or idle clients cannot exhaust the server. Bodies have
//! their own read deadline where they are read (`handlers::Body`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Default bound on open connections (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default time a client has to send a request head (`--header-timeout-ms`).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for requests in flight.
const DRAIN: Duration = Duration::from_secs(10);

/// Connection limits of one listener.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Time to receive a whole request head, counted from the connection's
    /// start or the end of its previous response.
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets requests
/// in flight finish (up to a drain deadline).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // HTTP/1.1 only: its head deadline runs from the first byte the
    // connection could send (an HTTP/2-sniffing server would wait for bytes
    // before any deadline starts, so a silent connection would stay).
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors and the like: back off, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(
                max = limits.max_connections,
                "connection limit reached; closing a new connection"
            );
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still in flight at shutdown were cut off");
    }
    Ok(())
}
