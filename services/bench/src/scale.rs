//! `chronicle bench scale`: what every cost does as the history grows — the
//! ingest rate and memory per window of episodes, restart, disk per fact,
//! a CLI read at rest, search and rebuild — on a generated multi-tenant
//! workload of moves, job changes, restatements and conversational turns.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use chronicle_model::{Command, EpisodeType, GroupId, NewEpisode, Timestamp};
use clap::ValueEnum;
use serde_json::json;
use uuid::Uuid;

use chronicle::config::{LogUri, Settings, StoreUri};
use chronicle::gateway::Gateway;
use chronicle::node::Node;
use chronicle::processor::ProcessorOptions;
use chronicle::runtime;
use chronicle::status::CommandStatus;
use chronicle_query::{Query, SearchRequest};

use super::mix;

const FIRST: [&str; 24] = [
    "Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jade", "Kofi", "Lena",
    "Milo", "Nora", "Omar", "Pia", "Quinn", "Rosa", "Sami", "Tara", "Umar", "Vera", "Wes", "Yara",
];
const LAST: [&str; 16] = [
    "Stone", "Okafor", "Ruiz", "Patel", "Novak", "Berg", "Costa", "Tanaka", "Weiss", "Adeyemi",
    "Lind", "Moreau", "Haddad", "Sato", "Kowal", "Mensah",
];
const CITIES: [&str; 16] = [
    "Oslo", "Lima", "Kyiv", "Pune", "Nice", "Accra", "Quito", "Hanoi", "Perth", "Cork", "Porto",
    "Dakar", "Bergen", "Cusco", "Turin", "Davao",
];
const ORGS: [&str; 12] = [
    "Initech",
    "Globex",
    "Umbrella",
    "Hooli",
    "Acme",
    "Vandelay",
    "Wonka",
    "Stark",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Massive",
];
const HOBBIES: [&str; 8] = [
    "hiking", "chess", "pottery", "surfing", "baking", "climbing", "painting", "cycling",
];

/// Episode `i` of the scale workload: tenants take turns; each has a small
/// cast whose members move, change jobs, restate where they live and chat.
pub fn scale_episode(i: u64, tenants: u64, seed: u64) -> Command {
    let tenants = tenants.max(1);
    let tenant = i % tenants;
    let turn = i / tenants;
    let r = mix(seed ^ mix(i));
    let cast = |k: u64| {
        let h = mix(seed ^ (tenant << 8) ^ k);
        format!(
            "{} {}",
            FIRST[(h % 24) as usize],
            LAST[((h >> 8) % 16) as usize]
        )
    };
    let person = cast(r % 4);
    let city = CITIES[((r >> 8) % 16) as usize];
    let org = ORGS[((r >> 16) % 12) as usize];
    let (content, source) = match (r >> 24) % 20 {
        0..=4 => (format!("{person} moved to {city}."), EpisodeType::Text),
        5..=8 => (
            format!("{person} started working at {org}."),
            EpisodeType::Text,
        ),
        9..=11 => (format!("{person} lives in {city}."), EpisodeType::Text),
        12..=13 => (
            format!(
                "{person} left {org} and joined {}.",
                ORGS[((r >> 32) % 12) as usize]
            ),
            EpisodeType::Text,
        ),
        _ => {
            let friend = cast((r >> 40) % 4);
            let hobby = HOBBIES[((r >> 44) % 8) as usize];
            let line = match (r >> 48) % 4 {
                0 => format!("I went {hobby} with {friend} in {city} last weekend."),
                1 => format!("Have you tried {hobby}? {friend} loves it."),
                2 => format!("Sounds like fun! I visited {city} in May."),
                _ => format!("My sister works at {org} now."),
            };
            (format!("{person}: {line}"), EpisodeType::Message)
        }
    };
    let base: Timestamp = "2023-01-01T00:00:00Z".parse().expect("valid");
    Command::AddEpisode(NewEpisode {
        uuid: Uuid::from_u64_pair(seed, i),
        group_id: GroupId::new(format!("tenant-{tenant:05}")).expect("valid"),
        name: format!("turn-{turn}"),
        content,
        source,
        source_description: "scale".into(),
        reference_time: base.saturating_add_micros(turn as i64 * 3_600_000_000),
        previous_episode_uuids: None,
        saga: None,
        metadata: Default::default(),
    })
}

/// What the benchmark is asked for.
#[derive(Clone, Debug)]
pub struct ScaleArgs {
    /// Episodes to ingest.
    pub episodes: u64,
    /// Tenants (groups) they are spread over.
    pub tenants: u64,
    /// Episodes per reported window.
    pub window: u64,
    /// Where the data goes (a temporary directory when `None`).
    pub data: Option<PathBuf>,
    /// Workload seed.
    pub seed: u64,
    /// The `chronicle` binary the CLI read is timed with.
    pub cli: PathBuf,
}

/// Runs the benchmark and prints its JSON line; the per-window table goes to
/// stderr as it is measured.
pub async fn run(settings: &Settings, args: &ScaleArgs) -> anyhow::Result<serde_json::Value> {
    let temp = tempfile::tempdir()?;
    let dir = match &args.data {
        Some(d) => {
            anyhow::ensure!(
                std::fs::read_dir(d).map_or(true, |mut e| e.next().is_none()),
                "--data {}: bench scale needs a new or empty directory",
                d.display()
            );
            d.clone()
        }
        None => temp.path().to_path_buf(),
    };
    let mut s = settings.clone();
    s.data = dir.clone();
    s.log = LogUri::Embedded;
    s.store = StoreUri::Embedded;
    let window = args.window.clamp(1, args.episodes.max(1));

    let node = Node::open(s.clone()).await?;
    let mut running = runtime::start(&node, ProcessorOptions::default());
    let gateway = Gateway::new(node.clone());
    let mut windows = Vec::new();
    eprintln!("episodes\tep/s\trss_MB\tvectors\tvector_MB");
    let mut at = 0;
    while at < args.episodes {
        let end = (at + window).min(args.episodes);
        let started = Instant::now();
        let mut i = at;
        while i < end {
            let chunk: Vec<Command> = (i..(i + 1000).min(end))
                .map(|j| scale_episode(j, args.tenants, args.seed))
                .collect();
            i += chunk.len() as u64;
            gateway.submit(chunk).await?;
        }
        running.wait_caught_up(&node, |_, _| {}).await?;
        let rate = (end - at) as f64 / started.elapsed().as_secs_f64();
        let rss = super::memory().1;
        let index = node.index()?.stats();
        eprintln!(
            "{end}\t{rate:.0}\t{}\t{}\t{}",
            rss >> 20,
            index.vectors,
            index.vector_memory_bytes >> 20
        );
        windows.push(json!({
            "episodes": end,
            "episodes_per_s": rate,
            "rss_bytes": rss,
            "vectors": index.vectors,
            "vector_memory_bytes": index.vector_memory_bytes,
        }));
        at = end;
    }
    let search = search_p95(&node, args.tenants, 200).await?;
    running.stop().await?;
    drop(gateway);
    drop(node);

    // Restart: open, start, and decide one new episode.
    let replayed_before = chronicle_metrics::METRICS.processor_replayed.get();
    let started = Instant::now();
    let node = Node::open(s.clone()).await?;
    let running = runtime::start(&node, ProcessorOptions::default());
    let probe = scale_episode(args.episodes, args.tenants, args.seed);
    let (group, uuid) = (probe.group_id().clone(), probe.uuid());
    Gateway::new(node.clone()).submit(vec![probe]).await?;
    while !matches!(
        node.status.get(&group, uuid),
        Some(CommandStatus::Processed { .. } | CommandStatus::DeadLettered { .. })
    ) {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the restarted processor decided nothing in 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let restart = started.elapsed();
    let replayed = chronicle_metrics::METRICS.processor_replayed.get() - replayed_before;
    running.stop().await?;

    let counts = node.store()?.counts(None).await?;
    let disk = super::disk_usage(&dir);
    let started = Instant::now();
    let rebuilt = runtime::reproject(&node, || {}).await?;
    let rebuild = started.elapsed();
    drop(node);

    let facts_p50 = cli_p50(
        &args.cli,
        settings,
        &dir,
        &["facts", "--json", "--group", group.as_str()],
    )?;
    let stats_p50 = cli_p50(&args.cli, settings, &dir, &["stats", "--json"])?;
    let rate = |w: Option<&serde_json::Value>| w.map(|w| w["episodes_per_s"].clone());
    let out = json!({
        "bench": "scale",
        "episodes": args.episodes,
        "tenants": args.tenants,
        "window": window,
        "episodes_per_s_first_window": rate(windows.first()),
        "episodes_per_s_last_window": rate(windows.last()),
        "peak_rss_bytes": super::memory().0,
        "facts": counts.facts,
        "disk_bytes": disk,
        "disk_bytes_per_fact": disk as f64 / counts.facts.max(1) as f64,
        "restart_seconds": restart.as_secs_f64(),
        "restart_replayed_records": replayed,
        "facts_query_p50_ms": facts_p50,
        "stats_query_p50_ms": stats_p50,
        "search_p95_ms": search,
        "rebuild_events_per_s": rebuilt.events_applied as f64 / rebuild.as_secs_f64(),
        "windows": windows,
    });
    println!("{out}");
    Ok(out)
}

/// p95 of the combined recipe over the tenants, in milliseconds.
async fn search_p95(node: &Node, tenants: u64, queries: u64) -> anyhow::Result<f64> {
    let query = Query::new(node.sources()?);
    let mut samples = Vec::new();
    for q in 0..queries {
        let r = mix(q ^ 0x5ca1e);
        let group = GroupId::new(format!("tenant-{:05}", r % tenants.max(1)))?;
        let text = match q % 3 {
            0 => format!("where does {} live", FIRST[((r >> 8) % 24) as usize]),
            1 => format!("who works at {}", ORGS[((r >> 16) % 12) as usize]),
            _ => format!(
                "{} in {}",
                HOBBIES[((r >> 24) % 8) as usize],
                CITIES[((r >> 28) % 16) as usize]
            ),
        };
        let request = SearchRequest::recipe(&text, "COMBINED_HYBRID_SEARCH_RRF", 10)?;
        let started = Instant::now();
        query.search(&group, &request).await?;
        samples.push(started.elapsed());
    }
    Ok(super::quantile(&mut samples, 0.95))
}

/// p50 over ten runs of a chronicle read command (`args`), each a separate
/// process on the data at rest, in milliseconds.
fn cli_p50(exe: &Path, settings: &Settings, dir: &Path, args: &[&str]) -> anyhow::Result<f64> {
    let embedder = settings
        .embedder
        .to_possible_value()
        .context("embedder name")?;
    let mut samples = Vec::with_capacity(10);
    for _ in 0..10 {
        let started = Instant::now();
        let out = std::process::Command::new(exe)
            .arg("--data")
            .arg(dir)
            .args(["--embedder", embedder.get_name()])
            .args(args)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "chronicle {} failed: {}",
            args[0],
            String::from_utf8_lossy(&out.stderr)
        );
        samples.push(started.elapsed());
    }
    Ok(super::percentiles(&mut samples).0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_is_deterministic_and_spreads_over_tenants() {
        let a: Vec<Command> = (0..300).map(|i| scale_episode(i, 30, 7)).collect();
        let b: Vec<Command> = (0..300).map(|i| scale_episode(i, 30, 7)).collect();
        assert_eq!(a, b);
        let groups: std::collections::BTreeSet<_> =
            a.iter().map(|c| c.group_id().clone()).collect();
        assert_eq!(groups.len(), 30);
        let text = |c: &Command| match c {
            Command::AddEpisode(e) => e.content.clone(),
            _ => String::new(),
        };
        let all: Vec<String> = a.iter().map(text).collect();
        for kind in ["moved to", "started working at", "lives in", "joined", ": "] {
            assert!(all.iter().any(|t| t.contains(kind)), "no `{kind}` episode");
        }
    }
}
