//! The EventLog conformance suite: every adapter runs these same checks.
//!
//! Each check takes a fresh topic prefix so adapters that share a broker
//! between tests do not see each other's records.

use std::time::Duration;

use chronicle_model::Timestamp;

use crate::{EventLog, LogError, NewRecord, OffsetCommit, partition_for};

fn rec(key: &str, payload: String) -> NewRecord {
    NewRecord {
        key: key.as_bytes().to_vec(),
        payload: payload.into_bytes(),
    }
}

/// Runs every check against `log`, using topics under `prefix`.
pub async fn run_all(log: &dyn EventLog, prefix: &str) {
    append_and_read_back_in_order(log, &format!("{prefix}.order")).await;
    keys_stay_on_their_partition(log, &format!("{prefix}.keys")).await;
    consumer_offsets_persist_per_group(log, &format!("{prefix}.offsets")).await;
    append_commits_offset(log, &format!("{prefix}.atomic")).await;
    replay_from_a_timestamp(log, &format!("{prefix}.time")).await;
    read_waits_for_new_records(log, &format!("{prefix}.wait")).await;
    bad_topics_and_partitions_are_errors(log, &format!("{prefix}.bad")).await;
}

/// Appended records come back in order with their offsets, keys and payloads.
pub async fn append_and_read_back_in_order(log: &dyn EventLog, topic: &str) {
    assert_eq!(log.create_topic(topic, 3).await.unwrap(), 3);
    assert_eq!(
        log.create_topic(topic, 5).await.unwrap(),
        3,
        "existing topic keeps its count"
    );
    let p = partition_for(b"g1", 3);
    let mut acked = Vec::new();
    for i in 0..20 {
        let a = log
            .append(topic, vec![rec("g1", format!("r{i}"))], None)
            .await
            .unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].partition, p);
        acked.push(a[0]);
    }
    let many = log
        .append(
            topic,
            (20..25).map(|i| rec("g1", format!("r{i}"))).collect(),
            None,
        )
        .await
        .unwrap();
    acked.extend(many);
    for w in acked.windows(2) {
        assert_eq!(w[1].offset, w[0].offset + 1, "offsets are consecutive");
        assert!(w[1].timestamp >= w[0].timestamp, "timestamps never go back");
    }
    let first = acked[0].offset;
    let mut got = Vec::new();
    while got.len() < 25 {
        let batch = log
            .read(
                topic,
                p,
                first + got.len() as u64,
                7,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert!(!batch.is_empty(), "records are readable");
        got.extend(batch);
    }
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.payload, format!("r{i}").into_bytes());
        assert_eq!(r.key, b"g1");
        assert_eq!(r.offset, acked[i].offset);
        assert_eq!(r.timestamp, acked[i].timestamp);
    }
    assert_eq!(
        log.end_offset(topic, p).await.unwrap(),
        acked[24].offset + 1
    );
}

/// The same key always lands on the same partition, Kafka's way.
pub async fn keys_stay_on_their_partition(log: &dyn EventLog, topic: &str) {
    log.create_topic(topic, 4).await.unwrap();
    for g in ["tenant_00", "tenant_01", "tenant_02", "conv-26", "a"] {
        let a = log
            .append(topic, vec![rec(g, "x".into())], None)
            .await
            .unwrap();
        assert_eq!(a[0].partition, partition_for(g.as_bytes(), 4), "{g}");
    }
}

/// Committed offsets are kept per consumer group.
pub async fn consumer_offsets_persist_per_group(log: &dyn EventLog, topic: &str) {
    log.create_topic(topic, 2).await.unwrap();
    assert_eq!(log.committed_offset("cg-a", topic, 1).await.unwrap(), None);
    for (group, offset) in [("cg-a", 5), ("cg-b", 9), ("cg-a", 7)] {
        log.commit_offset(OffsetCommit {
            group: group.into(),
            topic: topic.into(),
            partition: 1,
            next_offset: offset,
        })
        .await
        .unwrap();
    }
    assert_eq!(
        log.committed_offset("cg-a", topic, 1).await.unwrap(),
        Some(7)
    );
    assert_eq!(
        log.committed_offset("cg-b", topic, 1).await.unwrap(),
        Some(9)
    );
    assert_eq!(log.committed_offset("cg-a", topic, 0).await.unwrap(), None);
}

/// An append can carry a consumer offset commit.
pub async fn append_commits_offset(log: &dyn EventLog, topic: &str) {
    let source = format!("{topic}.src");
    log.create_topic(topic, 1).await.unwrap();
    log.create_topic(&source, 1).await.unwrap();
    log.append(
        topic,
        vec![rec("g", "decided".into())],
        Some(OffsetCommit {
            group: "processor".into(),
            topic: source.clone(),
            partition: 0,
            next_offset: 3,
        }),
    )
    .await
    .unwrap();
    assert_eq!(
        log.committed_offset("processor", &source, 0).await.unwrap(),
        Some(3)
    );
}

/// Replay can start at the first record at or after a timestamp.
pub async fn replay_from_a_timestamp(log: &dyn EventLog, topic: &str) {
    log.create_topic(topic, 1).await.unwrap();
    let mut stamps = Vec::new();
    for i in 0..6 {
        let a = log
            .append(topic, vec![rec("g", format!("{i}"))], None)
            .await
            .unwrap();
        stamps.push(a[0]);
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let at = stamps[3].timestamp;
    let from = log.offset_for_timestamp(topic, 0, at).await.unwrap();
    assert!(
        from <= stamps[3].offset,
        "never skips a record at the timestamp"
    );
    let records = log.read(topic, 0, from, 100, Duration::ZERO).await.unwrap();
    assert!(records.iter().all(|r| r.timestamp >= at));
    assert!(records.iter().any(|r| r.offset == stamps[3].offset));
    let past_end = log
        .offset_for_timestamp(topic, 0, Timestamp::MAX)
        .await
        .unwrap();
    assert_eq!(past_end, log.end_offset(topic, 0).await.unwrap());
    assert_eq!(
        log.offset_for_timestamp(topic, 0, Timestamp::MIN)
            .await
            .unwrap(),
        stamps[0].offset
    );
}

/// A read at the end waits for the next append instead of spinning.
pub async fn read_waits_for_new_records(log: &dyn EventLog, topic: &str) {
    log.create_topic(topic, 1).await.unwrap();
    let end = log.end_offset(topic, 0).await.unwrap();
    assert!(
        log.read(topic, 0, end, 10, Duration::from_millis(50))
            .await
            .unwrap()
            .is_empty()
    );
    let (records, _) = tokio::join!(
        log.read(topic, 0, end, 10, Duration::from_secs(10)),
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            log.append(topic, vec![rec("g", "late".into())], None)
                .await
                .unwrap();
        }
    );
    let records = records.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].payload, b"late");
}

/// Unknown topics and partitions are typed errors.
pub async fn bad_topics_and_partitions_are_errors(log: &dyn EventLog, topic: &str) {
    assert!(matches!(
        log.append(
            &format!("{topic}.missing"),
            vec![rec("g", "x".into())],
            None
        )
        .await,
        Err(LogError::UnknownTopic(_))
    ));
    log.create_topic(topic, 2).await.unwrap();
    assert!(matches!(
        log.read(topic, 2, 0, 1, Duration::ZERO).await,
        Err(LogError::NoSuchPartition {
            partition: 2,
            count: 2,
            ..
        })
    ));
    assert!(matches!(
        log.create_topic(&format!("{topic}.zero"), 0).await,
        Err(LogError::NoPartitions)
    ));
}
