//! `rebuild` and `replay --until T`: projections rebuilt from the log.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use chronicle_index::SearchIndex;
use chronicle_model::Timestamp;
use chronicle_store::{EmbeddedStore, GraphStore};
use indicatif::{ProgressBar, ProgressStyle};

use crate::gateway::parse_time;
use crate::node::Node;
use crate::projector::{Projection, ProjectorReport};
use crate::runtime::projection;

fn bar(total: u64, what: &str) -> ProgressBar {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {what} {{pos}}/{{len}} records {{wide_bar}} {{elapsed}}"
        ))
        .expect("valid template"),
    );
    b
}

fn report(what: &str, r: &ProjectorReport, started: Instant) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "command": what,
            "records": r.records,
            "events_applied": r.events_applied,
            "dead_lettered": r.dead_lettered,
            "seconds": secs,
            "events_per_second": if secs > 0.0 { r.events_applied as f64 / secs } else { 0.0 },
        })
    );
}

/// Drops the node's projection and replays the whole graph-events log into it.
pub async fn rebuild(node: &Node) -> anyhow::Result<ProjectorReport> {
    let started = Instant::now();
    let total: u64 = node
        .end_offsets(&node.topics.graph_events)
        .await?
        .values()
        .sum();
    let b = bar(total, "rebuilding");
    let r = crate::runtime::reproject(node, || b.inc(1)).await?;
    b.finish_and_clear();
    report("rebuild", &r, started);
    Ok(r)
}

/// Builds, in `out`, the projection as known at transaction time `until`:
/// every graph-events record logged at or before it.
pub async fn replay(node: &Node, until: &str, out: &Path) -> anyhow::Result<ProjectorReport> {
    let until: Timestamp =
        parse_time("--until", until).map_err(|e| anyhow::anyhow!("--until: {}", e.message))?;
    let started = Instant::now();
    if out.join("graph.redb").exists() {
        anyhow::bail!(
            "{} already holds a projection; choose an empty --out directory",
            out.display()
        );
    }
    fs_err::create_dir_all(out)?;
    let meta = node.settings.path("meta.json");
    if meta.exists() {
        fs_err::copy(&meta, out.join("meta.json"))?;
    }
    let topic = &node.topics.graph_events;
    let mut bounds = std::collections::BTreeMap::new();
    for p in 0..node.log.partition_count(topic).await? {
        let bound = node
            .log
            .offset_for_timestamp(topic, p, until.saturating_add_micros(1))
            .await?;
        bounds.insert(p, bound);
    }
    let store: Arc<dyn GraphStore> = Arc::new(EmbeddedStore::open(out.join("graph.redb"))?);
    let index = Arc::new(SearchIndex::open(
        &out.join("index"),
        node.decider()?.embedder().dimension(),
    )?);
    let audit = Projection {
        store,
        index,
        index_at_end: true,
        ..projection(node)?
    };
    let b = bar(bounds.values().sum(), "replaying");
    let r = audit.run(Some(&bounds), None, None, || b.inc(1)).await?;
    b.finish_and_clear();
    report("replay", &r, started);
    Ok(r)
}
