//! The Kafka adapter against a real Kafka-protocol broker on loopback: the
//! shared conformance suite, then what only a broker can show (placement
//! agreeing with `partition_for`, order under concurrent producers, group
//! offsets surviving a new client, transactions).
//!
//! Each test starts its own in-process tansu broker (or uses the external
//! broker of `KAFKA_BROKERS`, with topic and group names unique per run).

#![cfg(feature = "kafka")]

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chronicle_log::{
    EventLog, KafkaConfig, KafkaLog, LogError, NewRecord, OffsetCommit, Record, partition_for,
    testing,
};
use chronicle_testkit::TestBroker;

/// A name no other test (or earlier run on a shared broker) uses.
fn unique(what: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{what}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn config(broker: &TestBroker) -> KafkaConfig {
    KafkaConfig {
        client_id: unique("client"),
        timeout: Duration::from_secs(20),
        ..KafkaConfig::new(broker.bootstrap())
    }
}

async fn connect(broker: &TestBroker) -> KafkaLog {
    KafkaLog::connect(config(broker)).await.unwrap()
}

fn rec(key: &str, payload: String) -> NewRecord {
    NewRecord {
        key: key.as_bytes().to_vec(),
        payload: payload.into_bytes(),
    }
}

/// Every record of a partition, from `from` to its end offset.
async fn read_to_end(log: &KafkaLog, topic: &str, partition: u32, from: u64) -> Vec<Record> {
    let end = log.end_offset(topic, partition).await.unwrap();
    let mut out: Vec<Record> = Vec::new();
    let mut next = from;
    while next < end {
        let batch = log
            .read(topic, partition, next, 500, Duration::from_secs(5))
            .await
            .unwrap();
        assert!(
            !batch.is_empty(),
            "{topic}/{partition}: stalled at {next} of {end}"
        );
        next = batch.last().unwrap().offset + 1;
        out.extend(batch);
    }
    out
}

#[tokio::test]
async fn conformance() {
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let started = Instant::now();
    testing::run_all(&log, &unique("conf")).await;
    eprintln!(
        "conformance suite on {} took {:?} (broker start {:?})",
        broker.bootstrap(),
        started.elapsed(),
        broker.startup()
    );
}

#[tokio::test]
async fn placement_matches_partition_for() {
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("placement");
    assert_eq!(log.create_topic(&topic, 8).await.unwrap(), 8);
    let keys: Vec<String> = (0..200).map(|i| format!("tenant-{i}")).collect();
    let appended = log
        .append(
            &topic,
            keys.iter().map(|k| rec(k, k.clone())).collect(),
            None,
        )
        .await
        .unwrap();
    for (key, a) in keys.iter().zip(&appended) {
        assert_eq!(a.partition, partition_for(key.as_bytes(), 8), "{key}");
    }
    let mut seen = 0;
    for p in 0..8 {
        for r in read_to_end(&log, &topic, p, 0).await {
            assert_eq!(
                partition_for(&r.key, 8),
                p,
                "the broker stored it where we sent it"
            );
            assert_eq!(r.payload, r.key);
            seen += 1;
        }
    }
    assert_eq!(seen, keys.len());
    let used: std::collections::BTreeSet<u32> = appended.iter().map(|a| a.partition).collect();
    assert_eq!(used.len(), 8, "200 keys spread over every partition");
}

#[tokio::test]
async fn records_beyond_kafkas_1_mb_default_round_trip() {
    // A community rebuild of a 20k-entity group is one ~3 MB record.
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("large");
    log.create_topic(&topic, 1).await.unwrap();
    let payload: String = (0..3_000_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    log.append(&topic, vec![rec("g", payload.clone())], None)
        .await
        .unwrap();
    let read = read_to_end(&log, &topic, 0, 0).await;
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].payload, payload.into_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_key_order_holds_under_concurrent_producers() {
    const PRODUCERS: usize = 6;
    const PER_PRODUCER: usize = 600;
    let broker = TestBroker::start();
    let topic = unique("order");
    // Two clients, i.e. two idempotent producers, three tasks each.
    let clients = [connect(&broker).await, connect(&broker).await];
    clients[0].create_topic(&topic, 4).await.unwrap();

    let mut tasks = Vec::new();
    for producer in 0..PRODUCERS {
        let log = clients[producer % 2].clone();
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut seq = 0;
            while seq < PER_PRODUCER {
                // Batches of 1..=37 records over ten shared keys.
                let n = (seq % 37 + 1).min(PER_PRODUCER - seq);
                let batch: Vec<NewRecord> = (seq..seq + n)
                    .map(|i| rec(&format!("k{}", i % 10), format!("{producer}:{i}")))
                    .collect();
                let a = log.append(&topic, batch.clone(), None).await.unwrap();
                acked.extend(batch.into_iter().zip(a));
                seq += n;
            }
            acked
        }));
    }
    let mut acked = HashMap::new();
    for t in tasks {
        for (record, a) in t.await.unwrap() {
            acked.insert((a.partition, a.offset), record);
        }
    }
    assert_eq!(
        acked.len(),
        PRODUCERS * PER_PRODUCER,
        "every ack is a distinct position"
    );

    let mut stored = 0;
    for p in 0..4 {
        // Per (producer, key): sequence numbers must rise along the partition.
        let mut last: BTreeMap<(String, Vec<u8>), usize> = BTreeMap::new();
        for r in read_to_end(&clients[1], &topic, p, 0).await {
            let expected = acked
                .get(&(p, r.offset))
                .unwrap_or_else(|| panic!("{p}@{} was never acknowledged", r.offset));
            assert_eq!((&r.key, &r.payload), (&expected.key, &expected.payload));
            let text = String::from_utf8(r.payload.clone()).unwrap();
            let (producer, i) = text.split_once(':').unwrap();
            let i: usize = i.parse().unwrap();
            if let Some(prev) = last.insert((producer.to_owned(), r.key.clone()), i) {
                assert!(
                    prev < i,
                    "key {:?}: {producer}:{i} after {producer}:{prev}",
                    r.key
                );
            }
            stored += 1;
        }
    }
    assert_eq!(
        stored,
        PRODUCERS * PER_PRODUCER,
        "nothing lost, nothing duplicated"
    );
}

#[tokio::test]
async fn group_offsets_resume_in_a_new_client() {
    let broker = TestBroker::start();
    let topic = unique("resume");
    let out_topic = format!("{topic}.out");
    let group = unique("processor");
    let first = {
        let log = connect(&broker).await;
        log.create_topic(&topic, 1).await.unwrap();
        log.create_topic(&out_topic, 1).await.unwrap();
        log.append(
            &topic,
            (0..10).map(|i| rec("g", format!("e{i}"))).collect(),
            None,
        )
        .await
        .unwrap();
        // Process four records; commit with the output, as the processor does.
        let batch = log
            .read(&topic, 0, 0, 4, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(batch.len(), 4);
        log.append(
            &out_topic,
            vec![rec("g", "decided e0..e3".into())],
            Some(OffsetCommit {
                group: group.clone(),
                topic: topic.clone(),
                partition: 0,
                next_offset: batch[3].offset + 1,
            }),
        )
        .await
        .unwrap();
        batch[3].offset + 1
    };

    let log = connect(&broker).await;
    assert_eq!(log.partition_count(&topic).await.unwrap(), 1);
    let resume = log.committed_offset(&group, &topic, 0).await.unwrap();
    assert_eq!(resume, Some(first));
    let rest = read_to_end(&log, &topic, 0, first).await;
    assert_eq!(
        rest.iter().map(|r| r.payload.clone()).collect::<Vec<_>>(),
        (4..10)
            .map(|i| format!("e{i}").into_bytes())
            .collect::<Vec<_>>()
    );
    log.commit_offset(OffsetCommit {
        group: group.clone(),
        topic: topic.clone(),
        partition: 0,
        next_offset: 10,
    })
    .await
    .unwrap();
    let again = connect(&broker).await;
    assert_eq!(
        again.committed_offset(&group, &topic, 0).await.unwrap(),
        Some(10)
    );
}

#[tokio::test]
async fn a_fresh_group_replays_from_zero() {
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("replay");
    log.create_topic(&topic, 2).await.unwrap();
    let appended = log
        .append(
            &topic,
            (0..300)
                .map(|i| rec(&format!("g{}", i % 5), format!("{i}")))
                .collect(),
            None,
        )
        .await
        .unwrap();
    let live = unique("projector");
    let mut first_pass = Vec::new();
    for p in 0..2 {
        let records = read_to_end(&log, &topic, p, 0).await;
        let end = records.last().map_or(0, |r| r.offset + 1);
        log.commit_offset(OffsetCommit {
            group: live.clone(),
            topic: topic.clone(),
            partition: p,
            next_offset: end,
        })
        .await
        .unwrap();
        first_pass.extend(records);
    }
    assert_eq!(first_pass.len(), appended.len());

    // A rebuild: a new group has no offsets and replays everything, identically.
    let rebuild = unique("rebuild");
    let replayer = connect(&broker).await;
    let mut second_pass = Vec::new();
    for p in 0..2 {
        let from = replayer
            .committed_offset(&rebuild, &topic, p)
            .await
            .unwrap();
        assert_eq!(from, None);
        second_pass.extend(read_to_end(&replayer, &topic, p, from.unwrap_or(0)).await);
        assert_eq!(
            replayer.committed_offset(&live, &topic, p).await.unwrap(),
            Some(replayer.end_offset(&topic, p).await.unwrap()),
            "the live group's offsets are untouched"
        );
    }
    assert_eq!(second_pass, first_pass);
}

#[tokio::test]
async fn reads_after_seeks_neither_lose_nor_duplicate() {
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("seek");
    log.create_topic(&topic, 1).await.unwrap();
    let appended = log
        .append(
            &topic,
            (0..500).map(|i| rec("g", format!("{i}"))).collect(),
            None,
        )
        .await
        .unwrap();
    let end = appended.last().unwrap().offset + 1;
    let expect = |from: u64, n: usize| -> Vec<Vec<u8>> {
        (from..(from + n as u64).min(end))
            .map(|o| format!("{o}").into_bytes())
            .collect()
    };
    let wait = Duration::from_secs(5);
    // Jumps backwards, forwards, to the same place, to the last record.
    for (from, max) in [
        (0, 50),
        (50, 50),
        (400, 30),
        (10, 5),
        (15, 300),
        (15, 10),
        (499, 10),
        (200, 1),
        (201, 1),
        (0, 1000),
    ] {
        let got = log.read(&topic, 0, from, max, wait).await.unwrap();
        assert_eq!(got.first().map(|r| r.offset), Some(from), "read at {from}");
        // A read may return fewer than `max`; whatever it returns is contiguous.
        assert!(!got.is_empty() && got.len() <= max);
        assert_eq!(
            got.iter().map(|r| r.payload.clone()).collect::<Vec<_>>(),
            expect(from, got.len()),
            "read at {from}"
        );
        for w in got.windows(2) {
            assert_eq!(w[1].offset, w[0].offset + 1);
        }
    }
    // At and past the end: nothing, after waiting, and no error.
    for from in [end, end + 10] {
        let t = Instant::now();
        let got = log
            .read(&topic, 0, from, 10, Duration::from_millis(200))
            .await
            .unwrap();
        assert!(got.is_empty(), "read at {from} past the end");
        assert!(t.elapsed() >= Duration::from_millis(150), "it waited");
    }
    // And the reader recovers from that for a normal read.
    let got = log.read(&topic, 0, 123, 3, wait).await.unwrap();
    assert_eq!(
        got.iter().map(|r| r.payload.clone()).collect::<Vec<_>>(),
        expect(123, got.len())
    );
    // Zero wait still returns records the broker already has.
    let got = log.read(&topic, 0, 321, 2, Duration::ZERO).await.unwrap();
    assert_eq!(got.first().map(|r| r.offset), Some(321));
}

#[tokio::test]
async fn broker_failures_are_typed_errors() {
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("errors");
    assert!(matches!(
        log.partition_count(&topic).await,
        Err(LogError::UnknownTopic(t)) if t == topic
    ));
    assert!(matches!(
        log.read(&topic, 0, 0, 1, Duration::ZERO).await,
        Err(LogError::UnknownTopic(_))
    ));
    assert!(matches!(
        log.committed_offset("g", &topic, 0).await,
        Err(LogError::UnknownTopic(_))
    ));
    log.create_topic(&topic, 1).await.unwrap();
    assert!(matches!(
        log.commit_offset(OffsetCommit {
            group: "g".into(),
            topic: topic.clone(),
            partition: 1,
            next_offset: 0,
        })
        .await,
        Err(LogError::NoSuchPartition {
            partition: 1,
            count: 1,
            ..
        })
    ));

    // Nobody listens here: connecting fails with the address, not a panic.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = dead.local_addr().unwrap().to_string();
    drop(dead);
    let err = KafkaLog::connect(KafkaConfig {
        timeout: Duration::from_secs(2),
        ..KafkaConfig::new(addr.clone())
    })
    .await
    .unwrap_err();
    assert!(
        matches!(&err, LogError::Kafka { .. }) && with_causes(&err).contains(&addr),
        "unexpected: {}",
        with_causes(&err)
    );
}

#[tokio::test]
async fn transactions_commit_records_and_offset_together() {
    let broker = TestBroker::start();
    if !broker.is_external() {
        // Straight to stderr, past the harness's capture: a skip must show.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED transactions_commit_records_and_offset_together: the in-process \
             tansu 0.6.0 broker does not implement EndTxn; set KAFKA_BROKERS to run it"
        );
        return;
    }
    let log = KafkaLog::connect(KafkaConfig {
        transactional: true,
        ..config(&broker)
    })
    .await
    .unwrap();
    let source = unique("tx-source");
    let sink = unique("tx-sink");
    let group = unique("tx-processor");
    log.create_topic(&source, 1).await.unwrap();
    log.create_topic(&sink, 1).await.unwrap();
    for round in 0..3u64 {
        let appended = log
            .append(
                &sink,
                (0..3).map(|i| rec("g", format!("{round}.{i}"))).collect(),
                Some(OffsetCommit {
                    group: group.clone(),
                    topic: source.clone(),
                    partition: 0,
                    next_offset: round + 1,
                }),
            )
            .await
            .unwrap();
        assert_eq!(appended.len(), 3);
        assert_eq!(
            log.committed_offset(&group, &source, 0).await.unwrap(),
            Some(round + 1),
            "the offset commits with the transaction"
        );
    }
    // A read_committed reader sees all nine records, and nothing else
    // (the transaction markers between them take offsets but are not records).
    let reader = KafkaLog::connect(KafkaConfig {
        transactional: true,
        ..config(&broker)
    })
    .await
    .unwrap();
    let mut got = Vec::new();
    let mut next = 0;
    loop {
        let batch = reader
            .read(&sink, 0, next, 100, Duration::from_secs(2))
            .await
            .unwrap();
        let Some(last) = batch.last() else { break };
        next = last.offset + 1;
        got.extend(batch.into_iter().map(|r| r.payload));
    }
    let expected: Vec<Vec<u8>> = (0..3)
        .flat_map(|round| (0..3).map(move |i| format!("{round}.{i}").into_bytes()))
        .collect();
    assert_eq!(got, expected);
}

/// Where the broker lacks transactions (tansu 0.6: no EndTxn), a
/// transactional append fails with a typed error, promptly, and so does every
/// later one — no panic, no hang.
#[tokio::test]
async fn transactions_fail_cleanly_without_broker_support() {
    let broker = TestBroker::start();
    if broker.is_external() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED transactions_fail_cleanly_without_broker_support: \
             the external broker may well support transactions"
        );
        return;
    }
    let log = KafkaLog::connect(KafkaConfig {
        transactional: true,
        timeout: Duration::from_secs(5),
        ..config(&broker)
    })
    .await
    .unwrap();
    let topic = unique("no-tx");
    log.create_topic(&topic, 1).await.unwrap();
    for attempt in 0..2 {
        let started = Instant::now();
        let err = log
            .append(&topic, vec![rec("g", format!("{attempt}"))], None)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, LogError::Kafka { .. }) && with_causes(&err).contains("EndTxn"),
            "attempt {attempt}: {}",
            with_causes(&err)
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "it did not hang"
        );
    }
}

/// Produce and consume rate of 1 KiB records through the test broker.
/// `cargo test -p chronicle-log --test kafka -- --ignored --nocapture throughput`
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement, not a check; run by hand"]
async fn throughput_of_1kib_records() {
    const RECORDS: usize = 40_000;
    const BATCH: usize = 500;
    const PARTITIONS: u32 = 4;
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("throughput");
    log.create_topic(&topic, PARTITIONS).await.unwrap();
    let payload = "x".repeat(1024);

    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..4 {
        let (log, topic, payload) = (log.clone(), topic.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            for b in 0..RECORDS / BATCH / 4 {
                let batch = (0..BATCH)
                    .map(|i| rec(&format!("g{t}-{b}-{i}"), payload.clone()))
                    .collect();
                log.append(&topic, batch, None).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let produce = started.elapsed();

    let consumer = connect(&broker).await;
    let started = Instant::now();
    let mut consumed = 0;
    for p in 0..PARTITIONS {
        consumed += read_to_end(&consumer, &topic, p, 0).await.len();
    }
    let consume = started.elapsed();
    assert_eq!(consumed, RECORDS);
    let rate = |d: Duration| RECORDS as f64 / d.as_secs_f64();
    println!(
        "{{\"records\":{RECORDS},\"record_bytes\":1024,\"batch\":{BATCH},\"partitions\":{PARTITIONS},\
         \"produce_msgs_per_s\":{:.0},\"consume_msgs_per_s\":{:.0},\"broker_start_ms\":{}}}",
        rate(produce),
        rate(consume),
        broker.startup().as_millis()
    );
}

/// Two members of one group split the partitions; when one leaves, the
/// other is given them — after the leaver released them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_split_partitions_and_take_over() {
    use chronicle_log::{Assignment, Membership};
    use std::collections::BTreeSet;

    /// Applies ownership changes until none arrives for `quiet`, or `done` holds.
    async fn follow(
        m: &mut Box<dyn Membership>,
        mine: &mut BTreeSet<u32>,
        quiet: Duration,
        done: impl Fn(&BTreeSet<u32>) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match tokio::time::timeout(quiet, m.next()).await {
                Err(_) if done(mine) => return,
                Err(_) => continue,
                Ok(change) => match change.unwrap() {
                    Assignment::Assigned(ps) => mine.extend(ps),
                    Assignment::Revoked {
                        partitions,
                        release,
                    } => {
                        for p in partitions {
                            mine.remove(&p);
                        }
                        release.done();
                    }
                },
            }
        }
        panic!("ownership did not settle: {mine:?}");
    }

    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("members");
    let group = unique("group");
    log.create_topic(&topic, 4).await.unwrap();

    let mut a = log.join(&group, &topic).await.unwrap();
    let mut mine_a = BTreeSet::new();
    follow(&mut a, &mut mine_a, Duration::from_millis(500), |m| {
        m.len() == 4
    })
    .await;

    let other = connect(&broker).await;
    let mut b = other.join(&group, &topic).await.unwrap();
    let mut mine_b = BTreeSet::new();
    tokio::join!(
        follow(&mut a, &mut mine_a, Duration::from_secs(3), |m| !m
            .is_empty()
            && m.len() < 4),
        follow(&mut b, &mut mine_b, Duration::from_secs(3), |m| !m
            .is_empty()),
    );
    assert!(mine_a.is_disjoint(&mine_b), "{mine_a:?} / {mine_b:?}");
    assert_eq!(mine_a.len() + mine_b.len(), 4, "{mine_a:?} / {mine_b:?}");

    // a leaves: b ends up with everything.
    drop(a);
    follow(&mut b, &mut mine_b, Duration::from_millis(500), |m| {
        m.len() == 4
    })
    .await;
}

const MEMBER_CHILD: &str = "CHRONICLE_KAFKA_MEMBER_CHILD";

/// The child half of `a_killed_member_is_replaced`: joins and prints what it owns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_child() {
    let Ok(spec) = std::env::var(MEMBER_CHILD) else {
        return; // only meaningful when spawned by the parent test
    };
    let mut parts = spec.split('|');
    let (bootstrap, group, topic) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let log = KafkaLog::connect(KafkaConfig::new(bootstrap))
        .await
        .unwrap();
    let mut m = log.join(group, topic).await.unwrap();
    loop {
        match m.next().await.unwrap() {
            chronicle_log::Assignment::Assigned(ps) => println!("ASSIGNED {ps:?}"),
            chronicle_log::Assignment::Revoked {
                partitions,
                release,
            } => {
                println!("REVOKED {partitions:?}");
                release.done();
            }
        }
        std::io::stdout().flush().unwrap();
    }
}

/// A member killed with SIGKILL (no goodbye) loses its partitions to the
/// survivor once its session times out. The in-process tansu 0.6 broker never
/// expires such a member (its partitions stay assigned to the dead process),
/// so this runs only against an external broker (`KAFKA_BROKERS`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_is_replaced() {
    use chronicle_log::Assignment;
    use std::io::BufRead;
    if std::env::var(chronicle_testkit::KAFKA_BROKERS_ENV).is_err() {
        println!(
            "SKIPPED a_killed_member_is_replaced: tansu 0.6 does not expire members killed without leaving their group; set KAFKA_BROKERS to run it against Kafka"
        );
        return;
    }
    let broker = TestBroker::start();
    let log = connect(&broker).await;
    let topic = unique("killed");
    let group = unique("group");
    log.create_topic(&topic, 4).await.unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "member_child", "--nocapture", "--test-threads=1"])
        .env(
            MEMBER_CHILD,
            format!("{}|{group}|{topic}", broker.bootstrap()),
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().unwrap().unwrap();
        if line.contains("ASSIGNED") {
            break;
        }
    }
    let mut m = log.join(&group, &topic).await.unwrap();
    let mut mine = std::collections::BTreeSet::new();
    // wait until the survivor owns something, then kill the child
    let deadline = Instant::now() + Duration::from_secs(60);
    while mine.is_empty() && Instant::now() < deadline {
        if let Ok(Ok(change)) = tokio::time::timeout(Duration::from_secs(1), m.next()).await {
            match change {
                Assignment::Assigned(ps) => mine.extend(ps),
                Assignment::Revoked {
                    partitions,
                    release,
                } => {
                    partitions.iter().for_each(|p| {
                        mine.remove(p);
                    });
                    release.done();
                }
            }
        }
    }
    assert!(
        !mine.is_empty() && mine.len() < 4,
        "split before the kill: {mine:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while mine.len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the survivor never took over: {mine:?}"
        );
        if let Ok(Ok(change)) = tokio::time::timeout(Duration::from_secs(1), m.next()).await {
            match change {
                Assignment::Assigned(ps) => mine.extend(ps),
                Assignment::Revoked {
                    partitions,
                    release,
                } => {
                    partitions.iter().for_each(|p| {
                        mine.remove(p);
                    });
                    release.done();
                }
            }
        }
    }
}

/// An error and its causes, as one line.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
