//! Distributed mode end to end: gateway, processors and projector as
//! separate OS processes around a real Kafka-protocol broker (tansu,
//! in-process on loopback, or `KAFKA_BROKERS`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chronicle_codec::EventBatchCodec;
use chronicle_e2e::{chronicle_binary, data, embedded_node, plain_snapshot, plain_snapshot_of};
use chronicle_log::{EventLog, KafkaConfig, KafkaLog, NewRecord, Topics};
use chronicle_model::EventBatch;
use chronicle_store::{EmbeddedStore, GraphStore};
use chronicle_testkit::TestBroker;

struct Cluster {
    broker: TestBroker,
    prefix: String,
    dir: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let broker = TestBroker::start();
        let prefix = format!(
            "e2e{}",
            std::process::id() ^ (Instant::now().elapsed().subsec_nanos())
        );
        Cluster {
            broker,
            prefix,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn data(&self, role: &str) -> PathBuf {
        self.dir.path().join(role)
    }

    /// A chronicle command against the broker, with its own data directory.
    fn chronicle(&self, role: &str, args: &[&str]) -> Command {
        let mut c = Command::new(chronicle_binary());
        c.arg("--log")
            .arg(format!("kafka://{}", self.broker.bootstrap()))
            .arg("--topic-prefix")
            .arg(&self.prefix)
            .arg("--partitions")
            .arg("4")
            .arg("--data")
            .arg(self.data(role))
            .args(["--embedder", "hash"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        c
    }

    fn spawn(&self, role: &str, args: &[&str]) -> Role {
        Role(self.chronicle(role, args).spawn().unwrap())
    }

    /// Spawns with info logs going to `<role>.log` in the cluster's directory.
    fn spawn_logged(&self, role: &str, args: &[&str]) -> Role {
        std::fs::create_dir_all(self.dir.path()).unwrap();
        let log = std::fs::File::create(self.dir.path().join(format!("{role}.log"))).unwrap();
        self.chronicle(role, args)
            .env("CHRONICLE_LOG_LEVEL", "info")
            .stderr(log)
            .spawn()
            .map(Role)
            .unwrap()
    }

    fn log_of(&self, role: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{role}.log"))).unwrap_or_default()
    }

    fn gateway_ingest(&self, file: &Path) {
        let status = self
            .chronicle("gateway", &["ingest", "--no-wait", file.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(status.success(), "gateway ingest failed");
    }

    async fn log(&self) -> KafkaLog {
        KafkaLog::connect(KafkaConfig::new(self.broker.bootstrap()))
            .await
            .unwrap()
    }

    fn topics(&self) -> Topics {
        Topics::with_prefix(&self.prefix)
    }

    /// Every decision on the graph-events topic (retrying through a busy
    /// broker's transient errors).
    async fn decisions(&self) -> Vec<(u32, EventBatch)> {
        let mut last = None;
        for _ in 0..10 {
            match self.try_decisions().await {
                Ok(d) => return d,
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!("reading the graph-events topic: {last:?}");
    }

    async fn try_decisions(&self) -> Result<Vec<(u32, EventBatch)>, chronicle_log::LogError> {
        let log = KafkaLog::connect(KafkaConfig::new(self.broker.bootstrap())).await?;
        let topic = self.topics().graph_events;
        let codec = EventBatchCodec::new();
        let mut out = Vec::new();
        for p in 0..log.partition_count(&topic).await? {
            chronicle_log::scan(&log, &topic, p, 0, |r| {
                out.push((p, codec.decode(&r.payload).expect("decisions decode")));
            })
            .await?;
        }
        Ok(out)
    }

    async fn wait_for_decisions(&self, n: usize, within: Duration) -> Vec<(u32, EventBatch)> {
        let deadline = Instant::now() + within;
        loop {
            let d = self.decisions().await;
            if d.len() >= n || Instant::now() > deadline {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// A role's process, killed when dropped so a failing test leaves no
/// process behind.
struct Role(Child);

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn terminate(mut role: Role) {
    let child = &mut role.0;
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    panic!("process did not stop on SIGTERM");
}

fn kill9(mut role: Role) {
    role.0.kill().unwrap();
    role.0.wait().unwrap();
}

/// The embedded single-process run of the same input.
async fn reference(file: &Path) -> BTreeMap<String, chronicle_e2e::PlainGroup> {
    let dir = tempfile::tempdir().unwrap();
    let node = embedded_node(dir.path()).await;
    chronicle::commands::ingest_file(&node, file).await.unwrap();
    plain_snapshot(&node).await
}

/// Every decision of a group follows its commands' log order, once each.
fn assert_ordered_once(decisions: &[(u32, EventBatch)], expected: usize) {
    let mut seen = std::collections::BTreeSet::new();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    // decisions of one group are on one partition, in append order
    for (_, b) in decisions {
        assert!(
            seen.insert(b.command_uuid),
            "command {} decided twice",
            b.command_uuid
        );
        let offset = b.source.expect("decisions carry their source").offset;
        if let Some(prev) = last.insert(b.group_id.to_string(), offset) {
            assert!(
                offset > prev,
                "group {} decided out of order ({prev} then {offset})",
                b.group_id
            );
        }
    }
    assert_eq!(seen.len(), expected, "every episode decided");
}

async fn projected(
    cluster: &Cluster,
    projector: Role,
) -> BTreeMap<String, chronicle_e2e::PlainGroup> {
    // SIGTERM: the projector finishes, commits and leaves; then its store can be opened.
    tokio::time::sleep(Duration::from_secs(2)).await;
    terminate(projector);
    let store = EmbeddedStore::open(cluster.data("projector").join("graph.redb")).unwrap();
    let positions = store.positions().await.unwrap();
    assert!(!positions.is_empty());
    plain_snapshot_of(&store).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn separate_processes_equal_the_embedded_run() {
    let cluster = Cluster::start();
    let file = data("workload.jsonl");
    cluster.gateway_ingest(&file);
    let processor = cluster.spawn("processor", &["processor"]);
    let projector = cluster.spawn("projector", &["projector"]);
    let decisions = cluster
        .wait_for_decisions(300, Duration::from_secs(240))
        .await;
    assert_ordered_once(&decisions, 300);
    terminate(processor);
    let distributed = projected(&cluster, projector).await;
    assert_eq!(distributed, reference(&file).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_processor_and_projector_repeatedly_loses_and_duplicates_nothing() {
    let cluster = Cluster::start();
    let file = data("workload.jsonl");
    cluster.gateway_ingest(&file);
    for round in 0..4u64 {
        let processor = cluster.spawn("processor", &["processor"]);
        let projector = cluster.spawn("projector", &["projector"]);
        std::thread::sleep(Duration::from_millis(1500 + 700 * round));
        kill9(processor);
        kill9(projector);
    }
    // The last pair starts once the dead members' sessions (6 s) have run
    // out, so their joins open a new generation. tansu 0.6 drops a member
    // that misses its session during a heartbeat without starting one: the
    // survivors keep the old assignment and the dead member's partitions stay
    // orphaned (Kafka rebalances them).
    std::thread::sleep(Duration::from_secs(8));
    let processor = cluster.spawn_logged("processor", &["processor"]);
    let projector = cluster.spawn("projector", &["projector"]);
    let decisions = cluster
        .wait_for_decisions(300, Duration::from_secs(240))
        .await;
    assert!(
        decisions.len() >= 300,
        "{} of 300 decided; the last processor's log:\n{}",
        decisions.len(),
        cluster.log_of("processor")
    );
    assert_ordered_once(&decisions, 300);
    terminate(processor);
    let distributed = projected(&cluster, projector).await;
    assert_eq!(distributed, reference(&file).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_is_dead_lettered_and_the_group_continues() {
    let cluster = Cluster::start();
    let log = cluster.log().await;
    let topics = cluster.topics();
    for t in [&topics.episodes, &topics.graph_events, &topics.dlq] {
        log.create_topic(t, 4).await.unwrap();
    }
    log.append(
        &topics.episodes,
        vec![NewRecord {
            key: b"tenant_00".to_vec(),
            payload: b"\xC3\x01not an avro record".to_vec(),
        }],
        None,
    )
    .await
    .unwrap();
    let line = r#"{"group_id":"tenant_00","name":"after-poison","content":"Ada Stone lives in Oslo.","reference_time":"2024-01-01T00:00:00Z"}"#;
    let file = cluster.dir.path().join("one.jsonl");
    std::fs::write(&file, line).unwrap();
    cluster.gateway_ingest(&file);
    let processor = cluster.spawn("processor", &["processor"]);
    let decisions = cluster
        .wait_for_decisions(2, Duration::from_secs(120))
        .await;
    terminate(processor);
    assert_eq!(decisions.len(), 2);
    let dead = decisions
        .iter()
        .find(|(_, b)| b.dead_letter.is_some())
        .expect("a dead-letter decision");
    assert!(
        dead.1.dead_letter.as_ref().unwrap().contains("undecodable"),
        "{:?}",
        dead.1.dead_letter
    );
    assert!(
        decisions
            .iter()
            .any(|(_, b)| b.dead_letter.is_none() && !b.events.is_empty()),
        "the group continued"
    );
    // The DLQ holds the record with its reason.
    let p = chronicle_log::partition_for(b"tenant_00", 4);
    let dlq = log
        .read(&topics.dlq, p, 0, 10, Duration::from_secs(5))
        .await
        .unwrap();
    let letter: serde_json::Value = serde_json::from_slice(&dlq[0].payload).unwrap();
    assert!(letter["reason"].as_str().unwrap().contains("undecodable"));
    assert_eq!(letter["topic"], topics.episodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processors_split_partitions_and_one_takes_over() {
    let cluster = Cluster::start();
    let file = chronicle_e2e::tripled_workload(cluster.dir.path());
    let first = cluster.spawn_logged("processor-a", &["processor"]);
    let second = cluster.spawn_logged("processor-b", &["processor"]);
    // Let both join before any work arrives, so the partitions are split.
    std::thread::sleep(Duration::from_secs(8));
    cluster.gateway_ingest(&file);
    let before = cluster
        .wait_for_decisions(100, Duration::from_secs(120))
        .await
        .len();
    for role in ["processor-a", "processor-b"] {
        assert!(
            cluster.log_of(role).contains("partition assigned"),
            "{role} got no partition:\n{}",
            cluster.log_of(role)
        );
    }
    // Stopped mid-ingest. (SIGTERM: tansu 0.6 expires a SIGKILLed member
    // without a new generation, so its partitions would stay orphaned; see
    // the kill test. Against Kafka the session timeout does the same.)
    terminate(first);
    let decisions = cluster
        .wait_for_decisions(900, Duration::from_secs(300))
        .await;
    terminate(second);
    assert!(
        before < 900,
        "the first processor was stopped before the work was done"
    );
    assert_ordered_once(&decisions, 900);
    let assigned = cluster
        .log_of("processor-b")
        .matches("partition assigned")
        .count();
    assert!(
        assigned >= 4,
        "processor-b took over:\n{}",
        cluster.log_of("processor-b")
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Every role its own process, reached over HTTP: episodes in through the
/// gateway, reads through the query router, answered by the projector that
/// owns the group's partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_and_query_route_to_the_owning_projector() {
    let cluster = Cluster::start();
    let (gw, pj, q) = (free_port(), free_port(), free_port());
    let processor = cluster.spawn("processor", &["processor"]);
    let projector = cluster.spawn(
        "projector",
        &["projector", "--listen", &format!("127.0.0.1:{pj}")],
    );
    let gateway = cluster.spawn(
        "gateway",
        &["gateway", "--listen", &format!("127.0.0.1:{gw}")],
    );
    let query = cluster.spawn("query", &["query", "--listen", &format!("127.0.0.1:{q}")]);
    let http = reqwest::Client::new();
    let body = serde_json::json!({"episodes": [
        {"name": "a1", "content": "Alice: I live in Beijing.", "reference_time": "2025-01-10T09:00:00Z"},
        {"name": "a2", "content": "Alice: I moved to Shanghai.", "reference_time": "2025-03-01T09:00:00Z"}
    ]});
    let deadline = Instant::now() + Duration::from_secs(60);
    let accepted: serde_json::Value = loop {
        match http
            .post(format!("http://127.0.0.1:{gw}/v1/groups/alice/episodes"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().as_u16() == 202 => break r.json().await.unwrap(),
            _ if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(300)).await,
            other => panic!("gateway never accepted: {other:?}"),
        }
    };
    let second = accepted["episodes"][1]["uuid"].as_str().unwrap().to_owned();
    // The status, through the gateway, comes from the owner once it is decided.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let r = http
            .get(format!(
                "http://127.0.0.1:{gw}/v1/groups/alice/episodes/{second}"
            ))
            .send()
            .await;
        if let Ok(r) = r
            && r.status().is_success()
        {
            let v: serde_json::Value = r.json().await.unwrap();
            if v["status"] == "processed" {
                break;
            }
        }
        assert!(Instant::now() < deadline, "episode never processed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // "processed" means decided; the owner's search shows it once the
    // projector commits (every 500 ms while busy).
    let search =
        serde_json::json!({"query": "Where does Alice live?", "recipe": "EDGE_HYBRID_SEARCH_RRF"});
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let found: serde_json::Value = http
            .post(format!("http://127.0.0.1:{q}/v1/groups/alice/search"))
            .json(&search)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let empty = found["results"].as_array().is_none_or(|r| r.is_empty());
        if !empty || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let facts: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["fact"].as_str())
        .collect();
    assert!(facts.iter().any(|f| f.contains("Shanghai")), "{found}");
    assert!(
        !facts.iter().any(|f| f.contains("Beijing")),
        "current facts only: {found}"
    );
    for child in [query, gateway, projector, processor] {
        terminate(child);
    }
}
