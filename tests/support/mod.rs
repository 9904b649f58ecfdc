//! Shared fixtures of the end-to-end tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chronicle::config::{EmbedderKind, ExtractorKind, Settings};
use chronicle::node::Node;
use chronicle_model::{Fact, Timestamp};
use chronicle_store::GraphStore;
use serde::Serialize;

/// A file of `tests/data/`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data")
        .join(name)
}

/// The synthetic workload three times over, under distinct group names
/// (`r0-tenant_00`, …): 900 episodes, long enough to be interrupted.
pub fn tripled_workload(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(data("workload.jsonl")).expect("workload");
    let mut out = String::new();
    for round in 0..3 {
        for line in text.lines() {
            out.push_str(&line.replace("\"tenant_", &format!("\"r{round}-tenant_")));
            out.push('\n');
        }
    }
    let path = dir.join("workload-x3.jsonl");
    std::fs::write(&path, out).expect("writable scratch dir");
    path
}

/// An embedded node in `dir` with the offline extractor and the hashed embedder.
pub async fn embedded_node(dir: &Path) -> Arc<Node> {
    Node::open(Settings::embedded(
        dir,
        ExtractorKind::Offline,
        EmbedderKind::Hash,
    ))
    .await
    .expect("node opens")
}

/// The chronicle binary built next to the test binaries.
pub fn chronicle_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = dir.join("chronicle");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p chronicle -p chronicle-bench` first (scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// Every record of the projection, exactly (for rebuild equality).
pub async fn exact_snapshot(node: &Node) -> serde_json::Value {
    let mut out = BTreeMap::new();
    for g in node.store().expect("store").groups().await.expect("groups") {
        let mut entities = node
            .store()
            .expect("store")
            .entities(&g)
            .await
            .expect("entities");
        entities.sort_by_key(|e| e.uuid);
        let mut facts = node.store().expect("store").facts(&g).await.expect("facts");
        facts.sort_by_key(|f| f.uuid);
        let episodes = node
            .store()
            .expect("store")
            .episodes_by_time(&g, None, usize::MAX)
            .await
            .expect("episodes");
        let mut sagas = node.store().expect("store").sagas(&g).await.expect("sagas");
        sagas.sort_by_key(|s| s.uuid);
        let mut communities = node
            .store()
            .expect("store")
            .communities(&g)
            .await
            .expect("communities");
        communities.sort_by_key(|c| c.uuid);
        out.insert(
            g.to_string(),
            serde_json::json!({
                "entities": entities, "facts": facts, "episodes": episodes,
                "sagas": sagas, "communities": communities,
            }),
        );
    }
    serde_json::to_value(out).expect("serializes")
}

/// A fact without its transaction times, by names (for comparing runs whose
/// wall clocks differ).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PlainFact {
    /// Source entity name.
    pub source: String,
    /// Relation.
    pub relation: String,
    /// Target entity name.
    pub target: String,
    /// Sentence.
    pub fact: String,
    /// Valid-time window.
    pub valid: (Option<Timestamp>, Option<Timestamp>),
    /// Whether a later fact invalidated it.
    pub invalidated: bool,
    /// Provenance, by episode name.
    pub episodes: Vec<String>,
}

/// A group's entities (name, labels, summary) and plain facts.
pub type PlainGroup = (Vec<(String, Vec<String>, String)>, Vec<PlainFact>);

/// Each group's entities and plain facts.
pub async fn plain_snapshot(node: &Node) -> BTreeMap<String, PlainGroup> {
    plain_snapshot_of(node.store().expect("store").as_ref()).await
}

/// Each group's entities and plain facts, from any store.
pub async fn plain_snapshot_of(store: &dyn GraphStore) -> BTreeMap<String, PlainGroup> {
    let mut out = BTreeMap::new();
    for g in store.groups().await.expect("groups") {
        let entities = store.entities(&g).await.expect("entities");
        let names: BTreeMap<_, _> = entities.iter().map(|e| (e.uuid, e.name.clone())).collect();
        let mut ents: Vec<_> = entities
            .iter()
            .map(|e| (e.name.clone(), e.labels.clone(), e.summary.clone()))
            .collect();
        ents.sort();
        let mut facts = Vec::new();
        for f in store.facts(&g).await.expect("facts") {
            facts.push(plain(store, &g, &names, &f).await);
        }
        facts.sort();
        out.insert(g.to_string(), (ents, facts));
    }
    out
}

async fn plain(
    store: &dyn GraphStore,
    g: &chronicle_model::GroupId,
    names: &BTreeMap<uuid::Uuid, String>,
    f: &Fact,
) -> PlainFact {
    let mut episodes = Vec::new();
    for e in &f.episodes {
        episodes.push(
            store
                .episode(g, *e)
                .await
                .expect("episode")
                .map(|e| e.name)
                .unwrap_or_default(),
        );
    }
    PlainFact {
        source: names[&f.source_node_uuid].clone(),
        relation: f.name.clone(),
        target: names[&f.target_node_uuid].clone(),
        fact: f.fact.clone(),
        valid: (f.valid_at, f.invalid_at),
        invalidated: f.expired_at.is_some(),
        episodes,
    }
}
