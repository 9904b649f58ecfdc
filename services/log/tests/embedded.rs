//! The embedded log: conformance, reopen, and durability under `kill -9`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chronicle_log::{EmbeddedLog, EventLog, NewRecord, testing};

#[tokio::test]
async fn conformance() {
    let dir = tempfile::tempdir().unwrap();
    let log = EmbeddedLog::open(dir.path().join("log.redb")).unwrap();
    testing::run_all(&log, "t").await;
}

#[tokio::test]
async fn records_and_offsets_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    {
        let log = EmbeddedLog::open(&path).unwrap();
        log.create_topic("t", 2).await.unwrap();
        for i in 0..10 {
            log.append(
                "t",
                vec![NewRecord {
                    key: b"g".to_vec(),
                    payload: vec![i],
                }],
                None,
            )
            .await
            .unwrap();
        }
    }
    let log = EmbeddedLog::open(&path).unwrap();
    assert_eq!(log.partition_count("t").await.unwrap(), 2);
    let p = chronicle_log::partition_for(b"g", 2);
    let records = log.read("t", p, 0, 100, Duration::ZERO).await.unwrap();
    assert_eq!(
        records.iter().map(|r| r.payload[0]).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
}

const CHILD_ENV: &str = "CHRONICLE_LOG_KILL9_CHILD";

/// The child half of `acknowledged_appends_survive_kill_9`: appends forever,
/// printing each acknowledged offset.
#[tokio::test]
async fn kill9_child_appender() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return; // only meaningful when spawned by the parent test
    };
    let log = EmbeddedLog::open(&path).unwrap();
    log.create_topic("t", 4).await.unwrap();
    let mut out = std::io::stdout();
    for i in 0u64.. {
        // Concurrent appenders exercise group commit too.
        let key = format!("g{}", i % 3);
        let payload = format!("{key}:{i}:{}", "x".repeat((i % 200) as usize));
        let a = log
            .append(
                "t",
                vec![NewRecord {
                    key: key.into_bytes(),
                    payload: payload.clone().into_bytes(),
                }],
                None,
            )
            .await
            .unwrap();
        writeln!(out, "ACK {} {} {}", a[0].partition, a[0].offset, payload).unwrap();
        out.flush().unwrap();
    }
}

#[tokio::test]
async fn acknowledged_appends_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.redb");
    let exe = std::env::current_exe().unwrap();
    let mut acked: Vec<(u32, u64, String)> = Vec::new();
    for round in 0..3 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "kill9_child_appender",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let started = Instant::now();
        let kill_after = Duration::from_millis(300 + 250 * round);
        let mut this_round = 0;
        while let Some(Ok(line)) = lines.next() {
            if let Some(rest) = line.strip_prefix("ACK ") {
                let mut parts = rest.splitn(3, ' ');
                let p: u32 = parts.next().unwrap().parse().unwrap();
                let o: u64 = parts.next().unwrap().parse().unwrap();
                acked.push((p, o, parts.next().unwrap().to_owned()));
                this_round += 1;
            }
            if started.elapsed() > kill_after && this_round > 20 {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
        child.wait().unwrap();
        assert!(this_round > 20, "round {round}: child appended too little");
    }

    let log = EmbeddedLog::open(&path).unwrap();
    let mut by_partition: std::collections::BTreeMap<u32, Vec<(u64, String)>> = Default::default();
    for (p, o, payload) in &acked {
        by_partition
            .entry(*p)
            .or_default()
            .push((*o, payload.clone()));
    }
    for (p, expected) in by_partition {
        let end = log.end_offset("t", p).await.unwrap();
        let stored = log
            .read("t", p, 0, usize::MAX, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(stored.len() as u64, end, "no gap, no torn record");
        for (i, r) in stored.iter().enumerate() {
            assert_eq!(r.offset, i as u64);
            let text = String::from_utf8(r.payload.clone()).expect("whole payload");
            let mut fields = text.splitn(3, ':');
            let key = fields.next().unwrap();
            assert_eq!(r.key, key.as_bytes());
            let n: u64 = fields.next().unwrap().parse().unwrap();
            assert_eq!(
                fields.next().unwrap().len(),
                (n % 200) as usize,
                "payload intact"
            );
        }
        for (offset, payload) in expected {
            let r = &stored[offset as usize];
            assert_eq!(
                String::from_utf8_lossy(&r.payload),
                payload,
                "acknowledged record {p}/{offset}"
            );
        }
    }
}
