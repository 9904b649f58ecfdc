//! Test fixtures shared across chronicle's crates.
//!
//! [`TestBroker`] gives a test a Kafka-protocol broker on loopback without
//! Docker or a JVM: an external broker when `KAFKA_BROKERS` is set (so CI or a
//! developer can point the same tests at real Kafka), otherwise a
//! [tansu](https://github.com/tansu-io/tansu) broker started inside the test
//! process on a free `127.0.0.1` port, storing in SQLite under a temporary
//! directory that disappears with it.

#![warn(missing_docs)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use tansu_broker::broker::Broker;
use tansu_broker::coordinator::group::administrator::Controller;
use tansu_storage::StorageContainer;
use url::Url;
use uuid::Uuid;

/// The environment variable naming an external broker (`host:port[,...]`).
pub const KAFKA_BROKERS_ENV: &str = "KAFKA_BROKERS";

/// How long an in-process broker may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// How often a start is retried when the free port was taken in between.
const START_ATTEMPTS: usize = 4;

/// Why a test broker could not be provided.
#[derive(Debug)]
pub struct BrokerError(String);

impl std::fmt::Display for BrokerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BrokerError {}

/// A Kafka-protocol broker for one test; an in-process one stops when dropped.
pub struct TestBroker {
    bootstrap: String,
    startup: Duration,
    embedded: Option<Embedded>,
}

/// The parts of an in-process broker that must outlive the test.
struct Embedded {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
    /// Holds the SQLite file; removed after the broker thread has ended.
    dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for TestBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestBroker")
            .field("bootstrap", &self.bootstrap)
            .field("external", &self.is_external())
            .finish()
    }
}

impl TestBroker {
    /// The external broker of `KAFKA_BROKERS`, or a fresh in-process tansu
    /// broker. Panics with the reason when neither can be had: it is a test
    /// fixture, and a test without its broker cannot go on.
    pub fn start() -> TestBroker {
        match TestBroker::try_start() {
            Ok(broker) => broker,
            Err(e) => panic!("no test broker: {e}"),
        }
    }

    /// Like [`TestBroker::start`], returning the failure instead.
    pub fn try_start() -> Result<TestBroker, BrokerError> {
        match std::env::var(KAFKA_BROKERS_ENV) {
            Ok(brokers) if !brokers.trim().is_empty() => Ok(TestBroker {
                bootstrap: brokers.trim().to_owned(),
                startup: Duration::ZERO,
                embedded: None,
            }),
            _ => TestBroker::start_in_process(),
        }
    }

    /// Starts a tansu broker in this process, whatever `KAFKA_BROKERS` says.
    pub fn start_in_process() -> Result<TestBroker, BrokerError> {
        let started = Instant::now();
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            match start_tansu(started) {
                Ok(broker) => return Ok(broker),
                // The port picked as free can be taken before tansu binds it.
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| BrokerError("tansu did not start".into())))
    }

    /// `bootstrap.servers` for clients.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Whether this is the external broker of `KAFKA_BROKERS` (then it is
    /// shared: tests must use their own topic and group names, and it can do
    /// what tansu cannot, such as transactions).
    pub fn is_external(&self) -> bool {
        self.embedded.is_none()
    }

    /// How long the in-process broker took to accept connections (zero for
    /// an external broker).
    pub fn startup(&self) -> Duration {
        self.startup
    }

    /// Where the in-process broker keeps its SQLite database.
    pub fn data_dir(&self) -> Option<&Path> {
        self.embedded
            .as_ref()
            .and_then(|e| e.dir.as_ref())
            .map(|d| d.path())
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(embedded) = &mut self.embedded {
            embedded.shutdown();
        }
    }
}

impl Embedded {
    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        drop(self.dir.take());
    }
}

fn free_port() -> Result<u16, BrokerError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| BrokerError(format!("no free port on 127.0.0.1: {e}")))
}

/// The storage URL of a SQLite file at an absolute `path`.
///
/// tansu joins the URL's host and path onto the current directory; a path
/// that starts with `//` stays absolute after tansu strips one `/`, and
/// joining an absolute path replaces the directory, so the file lands at
/// `path` whatever the test's working directory is.
fn sqlite_url(path: &Path) -> Result<Url, BrokerError> {
    let text = path
        .to_str()
        .ok_or_else(|| BrokerError(format!("{} is not UTF-8", path.display())))?;
    if !path.is_absolute() {
        return Err(BrokerError(format!("{text} is not absolute")));
    }
    let url = Url::parse(&format!("sqlite:///{text}"))
        .map_err(|e| BrokerError(format!("sqlite URL for {text}: {e}")))?;
    // Guard the reasoning above against a change in URL parsing.
    if !url.domain().is_none_or(str::is_empty) || url.path().strip_prefix('/') != Some(text) {
        return Err(BrokerError(format!(
            "sqlite URL {url} would not resolve to {text}"
        )));
    }
    Ok(url)
}

fn start_tansu(started: Instant) -> Result<TestBroker, BrokerError> {
    let dir = tempfile::Builder::new()
        .prefix("chronicle-tansu-")
        .tempdir()
        .map_err(|e| BrokerError(format!("temporary directory: {e}")))?;
    let storage = sqlite_url(&dir.path().join("tansu.db"))?;
    let port = free_port()?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let listener = Url::parse(&format!("tcp://{addr}"))
        .map_err(|e| BrokerError(format!("listener URL: {e}")))?;

    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = thread::Builder::new()
        .name(format!("tansu-{port}"))
        .spawn(move || run_tansu(listener, storage, ready_tx, stop_rx))
        .map_err(|e| BrokerError(format!("broker thread: {e}")))?;
    let mut embedded = Embedded {
        stop: Some(stop_tx),
        thread: Some(thread),
        dir: Some(dir),
    };

    let built = ready_rx
        .recv_timeout(READY_TIMEOUT)
        .map_err(|_| "tansu did not finish building".to_owned())
        .and_then(|r| r);
    if let Err(e) = built {
        embedded.shutdown();
        return Err(BrokerError(format!("tansu on {addr}: {e}")));
    }
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            break;
        }
        let exited = embedded.thread.as_ref().is_none_or(|t| t.is_finished());
        if exited || Instant::now() > deadline {
            embedded.shutdown();
            return Err(BrokerError(format!(
                "tansu on {addr} never accepted a connection"
            )));
        }
        thread::sleep(Duration::from_millis(5));
    }
    Ok(TestBroker {
        bootstrap: addr.to_string(),
        startup: started.elapsed(),
        embedded: Some(embedded),
    })
}

/// The broker thread: its own runtime, so blocking client calls in the test
/// (rdkafka) can never starve the broker.
fn run_tansu(
    listener: Url,
    storage: Url,
    ready: mpsc::Sender<Result<(), String>>,
    stop: tokio::sync::oneshot::Receiver<()>,
) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tansu-worker")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(format!("tokio runtime: {e}")));
            return;
        }
    };
    runtime.block_on(async move {
        let built = Broker::<Controller<StorageContainer>, StorageContainer>::builder()
            .node_id(tansu_broker::NODE_ID)
            .cluster_id("chronicle-test")
            .incarnation_id(Uuid::new_v4())
            // Clients connect where metadata says: exactly the listener.
            .advertised_listener(listener.clone())
            .storage(storage)
            .listener(listener)
            .silent(true)
            .build()
            .await;
        let mut broker = match built {
            Ok(b) => b,
            Err(e) => {
                let _ = ready.send(Err(format!("{e:?}")));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        tokio::select! {
            result = broker.serve(tokio::time::Instant::now()) => {
                if let Err(e) = result {
                    eprintln!("tansu broker stopped: {e:?}");
                }
            }
            _ = stop => {}
        }
    });
    // Dropping the runtime aborts the connection tasks the broker spawned.
    runtime.shutdown_timeout(Duration::from_secs(2));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_url_keeps_absolute_paths() {
        let url = sqlite_url(Path::new("/tmp/x/tansu.db")).unwrap();
        assert!(url.domain().is_none_or(str::is_empty));
        assert_eq!(url.path(), "//tmp/x/tansu.db");
        assert!(sqlite_url(Path::new("relative/tansu.db")).is_err());
    }

    #[test]
    fn in_process_broker_starts_accepts_and_stops() {
        let broker = TestBroker::start_in_process().unwrap();
        assert!(!broker.is_external());
        let dir = broker.data_dir().unwrap().to_path_buf();
        assert!(
            dir.join("tansu.db").exists(),
            "SQLite lives in the broker's temp dir, not the working directory"
        );
        let addr: SocketAddr = broker.bootstrap().parse().unwrap();
        assert!(addr.ip().is_loopback());
        TcpStream::connect(addr).unwrap();
        eprintln!("tansu started in {:?}", broker.startup());
        drop(broker);
        assert!(!dir.exists(), "the data directory goes with the broker");
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
            "the listener closes when the broker is dropped"
        );
    }
}
