//! `chronicle bench kafka`: episodes end to end through a Kafka-protocol
//! broker — gateway appends, processor decides, projector projects — with
//! consumer lag sampled over time and per-group ordering verified at the end;
//! plus the broker's own produce/consume rate for 1 KiB records beside it.
//!
//! Uses the cluster of `--log kafka://…`; otherwise (when built with the
//! `bench-broker` feature) an in-process tansu broker on loopback.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chronicle_log::{EventLog, KafkaConfig, KafkaLog, NewRecord};
use serde_json::json;

use chronicle::config::{EmbedderKind, ExtractorKind, LogUri, Settings};
use chronicle::gateway::Gateway;
use chronicle::node::Node;
use chronicle::processor::ProcessorOptions;
use chronicle::runtime;

/// Produce and consume rate of 1 KiB records (the broker's own ceiling).
async fn raw_rates(brokers: &str, records: usize) -> anyhow::Result<(f64, f64)> {
    let log = KafkaLog::connect(KafkaConfig::new(brokers)).await?;
    let topic = format!("bench-raw-{}", std::process::id());
    log.create_topic(&topic, 4).await?;
    let payload = vec![b'x'; 1024];
    let started = Instant::now();
    for chunk in 0..records.div_ceil(500) {
        let batch = (0..500)
            .map(|i| NewRecord {
                key: format!("k{}", (chunk * 500 + i) % 64).into_bytes(),
                payload: payload.clone(),
            })
            .collect();
        log.append(&topic, batch, None).await?;
    }
    let produce = records as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut read = 0usize;
    for p in 0..4 {
        let end = log.end_offset(&topic, p).await?;
        let mut offset = 0;
        while offset < end {
            let batch = log
                .read(&topic, p, offset, 2000, Duration::from_secs(5))
                .await?;
            offset = batch.last().map(|r| r.offset + 1).unwrap_or(end);
            read += batch.len();
        }
    }
    let consume = read as f64 / started.elapsed().as_secs_f64();
    Ok((produce, consume))
}

/// Runs the benchmark.
pub async fn run(settings: &Settings, episodes: usize, groups: usize) -> anyhow::Result<()> {
    #[cfg(feature = "bench-broker")]
    let mut _broker = None;
    let brokers = match &settings.log {
        LogUri::Kafka(b) => b.clone(),
        LogUri::Embedded => {
            #[cfg(feature = "bench-broker")]
            {
                let b = chronicle_testkit::TestBroker::start_in_process()
                    .map_err(|e| anyhow::anyhow!("starting the in-process broker: {e}"))?;
                let addr = b.bootstrap().to_owned();
                _broker = Some(b);
                addr
            }
            #[cfg(not(feature = "bench-broker"))]
            anyhow::bail!(
                "bench kafka needs a broker: pass --log kafka://HOST:PORT, or build with --features bench-broker for an in-process one"
            )
        }
    };
    let (produce, consume) = raw_rates(&brokers, 20_000).await?;

    let dir = tempfile::tempdir()?;
    let mut s = Settings::embedded(dir.path(), ExtractorKind::Offline, EmbedderKind::Hash);
    s.log = LogUri::Kafka(brokers.clone());
    s.topic_prefix = format!("bench{}", std::process::id());
    s.partitions = settings.partitions;
    let node = Node::open_with(s, super::offline_ports()).await?;
    let commands = super::synthetic_commands(episodes, groups, 7);
    let mut running = runtime::start(&node, ProcessorOptions::default());
    let started = Instant::now();
    let gateway = Gateway::new(node.clone());
    for chunk in commands.chunks(500) {
        gateway.submit(chunk.to_vec()).await?;
    }
    let appended = started.elapsed();
    // Lag over time: episodes appended but not yet decided, sampled while catching up.
    let mut lag = Vec::new();
    let total = episodes as u64;
    let sampler = {
        let node = node.clone();
        let decided = node.progress.decided.subscribe();
        tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                let done: u64 = decided.borrow().values().sum();
                samples.push((started.elapsed().as_secs_f64(), total.saturating_sub(done)));
                if done >= total {
                    return samples;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };
    running.wait_caught_up(&node, |_, _| {}).await?;
    let elapsed = started.elapsed();
    lag.extend(sampler.await.unwrap_or_default());
    running.stop().await?;

    // Per-group order: decisions of a group follow its commands' log offsets.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut decisions = 0usize;
    let mut out_of_order = 0usize;
    let topic = &node.topics.graph_events;
    for p in 0..node.log.partition_count(topic).await? {
        let end = node.log.end_offset(topic, p).await?;
        let mut offset = 0;
        while offset < end {
            let batch = node
                .log
                .read(topic, p, offset, 2000, Duration::from_secs(5))
                .await?;
            offset = batch.last().map(|r| r.offset + 1).unwrap_or(end);
            for r in batch {
                let b = node.events.decode(&r.payload)?;
                decisions += 1;
                let at = b.source.map(|s| s.offset).unwrap_or(0);
                if let Some(prev) = last.insert(b.group_id.to_string(), at)
                    && at <= prev
                {
                    out_of_order += 1;
                }
            }
        }
    }
    println!(
        "{}",
        json!({
            "bench": "kafka",
            "brokers": brokers,
            "episodes": episodes,
            "groups": groups,
            "partitions": node.log.partition_count(&node.topics.episodes).await?,
            "append_seconds": appended.as_secs_f64(),
            "end_to_end_seconds": elapsed.as_secs_f64(),
            "episodes_per_s": episodes as f64 / elapsed.as_secs_f64(),
            "decisions": decisions,
            "per_group_order_violations": out_of_order,
            "lag_over_time": lag.iter().map(|(t, l)| json!([t, l])).collect::<Vec<_>>(),
            "broker_produce_1kib_per_s": produce,
            "broker_consume_1kib_per_s": consume,
            "peak_rss_bytes": super::memory().0,
        })
    );
    anyhow::ensure!(
        decisions == episodes && out_of_order == 0,
        "ordering or completeness violated"
    );
    Ok(())
}
