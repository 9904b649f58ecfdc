//! `chronicle bench api`: requests per second and p50/p99 latency of
//! `POST /episodes` and `POST /search` under concurrent clients, against an
//! embedded server (with token auth) on loopback. The server runs in this
//! process, so clients and server share the machine's cores.
//!
//! Model cost is excluded (offline extractor, hashed embedder): the figures
//! are the API, the gateway's durable append and the query path.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use chronicle::app::auth::Auth;
use chronicle::config::{EmbedderKind, ExtractorKind, Settings};
use chronicle::http::{HttpOptions, Server};
use chronicle::node::Node;

const TOKEN: &str = "bench-token-0123456789";
const PEOPLE: [&str; 8] = ["Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana"];
const CITIES: [&str; 8] = [
    "Oslo", "Lima", "Kyiv", "Pune", "Nice", "Accra", "Quito", "Hanoi",
];

/// Latencies and failures of one phase.
struct Phase {
    latencies: Vec<Duration>,
    failures: usize,
    elapsed: Duration,
}

impl Phase {
    fn figures(mut self) -> Value {
        let (p50, p99) = super::percentiles(&mut self.latencies);
        let ok = self.latencies.len();
        json!({
            "requests": ok + self.failures,
            "failures": self.failures,
            "seconds": self.elapsed.as_secs_f64(),
            "requests_per_s": ok as f64 / self.elapsed.as_secs_f64().max(1e-9),
            "p50_ms": p50,
            "p99_ms": p99,
        })
    }
}

/// Runs `requests` requests from `clients` concurrent tasks; `make(i)`
/// gives the i-th request's path and body, `expect` its success status.
async fn phase(
    client: &reqwest::Client,
    base: &str,
    clients: usize,
    requests: usize,
    expect: u16,
    make: Arc<dyn Fn(usize) -> (String, Value) + Send + Sync>,
) -> anyhow::Result<Phase> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients.max(1) {
        let client = client.clone();
        let base = base.to_owned();
        let next = next.clone();
        let make = make.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break;
                }
                let (path, body) = make(i);
                let t = Instant::now();
                let response = client
                    .post(format!("{base}{path}"))
                    .bearer_auth(TOKEN)
                    .json(&body)
                    .send()
                    .await;
                let ok = match response {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        r.bytes().await.is_ok() && status == expect
                    }
                    Err(_) => false,
                };
                if ok {
                    latencies.push(t.elapsed());
                } else {
                    failures += 1;
                }
            }
            (latencies, failures)
        });
    }
    let mut out = Phase {
        latencies: Vec::with_capacity(requests),
        failures: 0,
        elapsed: Duration::ZERO,
    };
    while let Some(done) = tasks.join_next().await {
        let (l, f) = done?;
        out.latencies.extend(l);
        out.failures += f;
    }
    out.elapsed = started.elapsed();
    Ok(out)
}

/// Runs the benchmark and prints one JSON object.
pub async fn run(
    settings: &Settings,
    clients: usize,
    requests: usize,
    groups: usize,
) -> anyhow::Result<()> {
    let groups = groups.max(1);
    let dir = tempfile::tempdir()?;
    let mut s = Settings::embedded(dir.path(), ExtractorKind::Offline, EmbedderKind::Hash);
    s.partitions = settings.partitions;
    let node = Node::open_with(s, super::offline_ports()).await?;
    let auth = Auth::parse(&format!(
        "[[tokens]]\nsecret = \"{TOKEN}\"\ngroups = [\"bench-*\"]\naccess = \"write\"\n"
    ))?;
    let options = HttpOptions {
        auth: Some(auth),
        ..HttpOptions::default()
    };
    let mut server = Server::start(node, options, "127.0.0.1:0".parse()?).await?;
    let base = server.url();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients.max(1))
        .build()?;

    let episodes = phase(
        &client,
        &base,
        clients,
        requests,
        202,
        Arc::new(move |i| {
            let person = PEOPLE[(i / groups) % PEOPLE.len()];
            let city = CITIES[(i / 3) % CITIES.len()];
            (
                format!("/v1/groups/bench-{:03}/episodes", i % groups),
                json!({
                    "name": format!("ep-{i}"),
                    "content": format!("{person}: I moved to {city} last week. (#{i})"),
                    "reference_time": "2025-01-01T00:00:00Z",
                }),
            )
        }),
    )
    .await?;
    let started = Instant::now();
    server.wait_caught_up().await?;
    let catch_up = started.elapsed();

    let search = phase(
        &client,
        &base,
        clients,
        requests,
        200,
        Arc::new(move |i| {
            let person = PEOPLE[i % PEOPLE.len()];
            (
                format!("/v1/groups/bench-{:03}/search", i % groups),
                json!({ "query": format!("where does {person} live"), "limit": 10 }),
            )
        }),
    )
    .await?;
    server.stop().await?;
    println!(
        "{}",
        json!({
            "bench": "api",
            "clients": clients,
            "groups": groups,
            "post_episodes": episodes.figures(),
            "processing_catch_up_seconds": catch_up.as_secs_f64(),
            "post_search": search.figures(),
            "peak_rss_bytes": super::memory().0,
        })
    );
    Ok(())
}
