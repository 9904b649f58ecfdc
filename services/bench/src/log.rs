//! `chronicle bench log`: embedded log append/read rates and the fold rate.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chronicle_engine::{GroupState, apply_batch};
use chronicle_log::{EmbeddedLog, EventLog, NewRecord};

use chronicle::config::Settings;

/// Runs the log benchmark in a temporary directory.
pub async fn run(_settings: &Settings, records: u64, size: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let log = Arc::new(EmbeddedLog::open(dir.path().join("log.redb"))?);
    log.create_topic("bench", 8).await?;
    let payload = vec![b'x'; size];
    let record = move |i: u64| NewRecord {
        key: format!("group-{}", i % 100).into_bytes(),
        payload: payload.clone(),
    };

    // One producer, one durable acknowledgement per record.
    let single = records.min(2_000);
    let started = Instant::now();
    for i in 0..single {
        log.append("bench", vec![record(i)], None).await?;
    }
    let single_rate = single as f64 / started.elapsed().as_secs_f64();

    // Many producers: the writer folds concurrent appends into one commit.
    let producers = 64u64;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..producers {
        let log = log.clone();
        let per = records / producers;
        let record = record.clone();
        tasks.spawn(async move {
            for i in 0..per {
                log.append("bench", vec![record(t * per + i)], None).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let concurrent = (records / producers) * producers;
    let concurrent_rate = concurrent as f64 / started.elapsed().as_secs_f64();

    // Batched appends (one call, many records).
    let started = Instant::now();
    for chunk in 0..(records / 1000) {
        log.append(
            "bench",
            (0..1000).map(|i| record(chunk * 1000 + i)).collect(),
            None,
        )
        .await?;
    }
    let batched_rate = (records / 1000 * 1000) as f64 / started.elapsed().as_secs_f64();

    // Sequential reads of everything.
    let started = Instant::now();
    let mut read = 0u64;
    for p in 0..8 {
        let end = log.end_offset("bench", p).await?;
        let mut offset = 0;
        while offset < end {
            let batch = log.read("bench", p, offset, 4096, Duration::ZERO).await?;
            offset = batch.last().map(|r| r.offset + 1).unwrap_or(end);
            read += batch.len() as u64;
        }
    }
    let read_rate = read as f64 / started.elapsed().as_secs_f64();

    // The fold: events/s into in-memory group state.
    let batches = super::decided_batches(2_000, 20).await?;
    let events: usize = batches.iter().map(|b| b.events.len()).sum();
    let rounds = 5;
    let started = Instant::now();
    for _ in 0..rounds {
        let mut states: std::collections::HashMap<_, GroupState> = Default::default();
        for b in &batches {
            let s = states
                .entry(b.group_id.clone())
                .or_insert_with(|| GroupState::new(b.group_id.clone()));
            apply_batch(s, b);
        }
    }
    let fold_rate = (events * rounds) as f64 / started.elapsed().as_secs_f64();

    println!(
        "{}",
        serde_json::json!({
            "bench": "log",
            "record_bytes": size,
            "append_durable_single_producer_records_per_s": single_rate,
            "append_durable_64_producers_records_per_s": concurrent_rate,
            "append_durable_batches_of_1000_records_per_s": batched_rate,
            "read_records_per_s": read_rate,
            "records_read": read,
            "fold_events_per_s": fold_rate,
            "fold_events": events,
            "peak_rss_bytes": super::memory().0,
        })
    );
    Ok(())
}
