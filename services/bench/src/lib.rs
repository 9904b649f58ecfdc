//! Benchmarks: figures printed as JSON, one object per line. Their own
//! crate and binary (`chronicle-bench`, which `chronicle bench …` runs), so
//! the product carries none of their code, fakes or broker.

pub mod api;
pub mod cli;
#[cfg(feature = "bench-fakes")]
pub mod communities;
pub mod ingest;
pub mod kafka;
pub mod log;
pub mod recall;
pub mod scale;
pub mod search;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use chronicle::config::{ExtractorKind, GlobalArgs};

use chronicle_engine::{
    Accepted, DecideConfig, Decider, GroupState, OfflineExtractor, apply_batch,
};
use chronicle_llm::HashEmbedder;
use chronicle_model::{Command, EpisodeType, EventBatch, GroupId, NewEpisode, Timestamp};
use uuid::Uuid;

/// The models of a benchmark node that needs no model files: the offline
/// extractor and the hash embedder.
pub(crate) fn offline_ports() -> chronicle::node::Ports {
    chronicle::node::Ports {
        extractor: Arc::new(OfflineExtractor),
        embedder: Arc::new(HashEmbedder::new(384)),
        reranker: None,
    }
}

const FIRST: [&str; 16] = [
    "Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jade", "Kofi", "Lena",
    "Milo", "Nora", "Omar", "Pia",
];
const LAST: [&str; 12] = [
    "Stone", "Okafor", "Ruiz", "Patel", "Novak", "Berg", "Costa", "Tanaka", "Weiss", "Adeyemi",
    "Lind", "Moreau",
];
const CITIES: [&str; 12] = [
    "Oslo", "Lima", "Kyiv", "Pune", "Nice", "Accra", "Quito", "Hanoi", "Perth", "Cork", "Porto",
    "Dakar",
];
const ORGS: [&str; 8] = [
    "Initech", "Globex", "Umbrella", "Hooli", "Acme", "Vandelay", "Wonka", "Stark",
];

/// A synthetic chat workload: people who live, work and move, spread over groups.
pub fn synthetic_commands(episodes: usize, groups: usize, salt: u64) -> Vec<Command> {
    let base: Timestamp = "2024-01-01T00:00:00Z".parse().expect("valid");
    (0..episodes)
        .map(|i| {
            let g = i % groups.max(1);
            let person = format!(
                "{} {}",
                FIRST[(i / groups.max(1)) % FIRST.len()],
                LAST[(i * 7 + g) % LAST.len()]
            );
            let content = match i % 3 {
                0 => format!("{person} lives in {}.", CITIES[(i / 3) % CITIES.len()]),
                1 => format!("{person} works at {}.", ORGS[(i / 5) % ORGS.len()]),
                _ => format!("{person} moved to {}.", CITIES[(i * 5) % CITIES.len()]),
            };
            Command::AddEpisode(NewEpisode {
                uuid: Uuid::from_u64_pair(salt, i as u64),
                group_id: GroupId::new(format!("tenant-{g:03}")).expect("valid"),
                name: format!("ep-{salt}-{i}"),
                content,
                source: EpisodeType::Message,
                source_description: "synthetic".into(),
                reference_time: base.saturating_add_micros(i as i64 * 60_000_000),
                previous_episode_uuids: None,
                saga: None,
                metadata: Default::default(),
            })
        })
        .collect()
}

/// Decided batches of a synthetic workload (offline extractor, hashed embedder).
pub async fn decided_batches(episodes: usize, groups: usize) -> anyhow::Result<Vec<EventBatch>> {
    let decider = Decider::new(
        Arc::new(OfflineExtractor),
        Arc::new(HashEmbedder::new(384)),
        Default::default(),
        DecideConfig::default(),
    );
    let mut states: std::collections::HashMap<GroupId, GroupState> = Default::default();
    let mut out = Vec::with_capacity(episodes);
    for (i, command) in synthetic_commands(episodes, groups, 1)
        .into_iter()
        .enumerate()
    {
        let g = command.group_id().clone();
        let state = states
            .entry(g.clone())
            .or_insert_with(|| GroupState::new(g));
        let accepted = Accepted {
            tx_time: "2025-01-01T00:00:00Z"
                .parse::<Timestamp>()?
                .saturating_add_micros(i as i64 * 1000),
            command,
            source: None,
        };
        let batch = decider.decide(state, &accepted).await?;
        apply_batch(state, &batch);
        out.push(batch);
    }
    Ok(out)
}

/// Peak and current resident memory of this process, in bytes (Linux).
pub fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// p50 and p99 of durations, in milliseconds.
pub fn percentiles(samples: &mut [Duration]) -> (f64, f64) {
    (quantile(samples, 0.50), quantile(samples, 0.99))
}

/// The `q` quantile of durations (nearest rank), in milliseconds; 0 when empty.
pub fn quantile(samples: &mut [Duration], q: f64) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1000.0
}

/// SplitMix64: a deterministic, well-mixed sequence for generated workloads
/// and queries (no dependency, no seed state).
pub(crate) fn mix(i: u64) -> u64 {
    let mut x = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Bytes under a directory.
pub fn disk_usage(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Runs one benchmark.
pub async fn run(cli: cli::BenchCli) -> anyhow::Result<ExitCode> {
    let cli::BenchCli { global, command } = cli;
    let cli::Top::Bench { which } = command;
    use cli::BenchCommand;
    if let BenchCommand::Ingest {
        workload,
        repeat,
        fake_llm: true,
    } = &which
    {
        let mut settings = GlobalArgs {
            extractor: None,
            llm_base_url: None,
            ..global
        }
        .resolve()?;
        settings.extractor = ExtractorKind::Openai;
        ingest::run(&settings, workload, *repeat).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let explicit_data = global.data.clone();
    let settings = global.resolve()?;
    match which {
        BenchCommand::Log { records, size } => crate::log::run(&settings, records, size).await?,
        BenchCommand::Ingest {
            workload, repeat, ..
        } => crate::ingest::run(&settings, &workload, repeat).await?,
        BenchCommand::Api {
            clients,
            requests,
            groups,
        } => crate::api::run(&settings, clients, requests, groups).await?,
        BenchCommand::Kafka { episodes, groups } => {
            crate::kafka::run(&settings, episodes, groups).await?
        }
        BenchCommand::Search {
            facts,
            groups,
            queries,
        } => crate::search::run(&settings, &facts, groups, queries).await?,
        BenchCommand::Scale {
            episodes,
            tenants,
            window,
            seed,
        } => {
            let args = crate::scale::ScaleArgs {
                episodes,
                tenants,
                window,
                data: explicit_data,
                seed,
                // What `bench scale` times as a user runs it: a restart, a
                // CLI read at rest.
                cli: chronicle::commands::sibling_binary("chronicle")?,
            };
            crate::scale::run(&settings, &args).await?;
        }
        BenchCommand::Recall {
            episodes,
            questions,
            k,
            recipes,
            ranks,
        } => {
            crate::recall::run(
                &settings,
                &episodes,
                &questions,
                &k,
                &recipes,
                ranks.as_deref(),
            )
            .await?
        }
        #[cfg(feature = "bench-fakes")]
        BenchCommand::Communities { entities } => crate::communities::run(&entities).await?,
        #[cfg(not(feature = "bench-fakes"))]
        BenchCommand::Communities { .. } => anyhow::bail!(
            "bench communities counts calls on an instant fake model: build with --features bench-fakes"
        ),
    }
    Ok(ExitCode::SUCCESS)
}
