//! Communities and saga summaries are decided as events and projected like
//! everything else: a rebuild reproduces them exactly (search results
//! included), incremental maintenance keeps them as episodes arrive, and the
//! CLI builds communities, summarizes sagas with their watermark and shows
//! what episodes produced.

use std::path::Path;
use std::process::Command as Process;

use chronicle::commands::{ingest_file, rebuild, submit_and_wait};
use chronicle::config::{CommunityMode, EmbedderKind, ExtractorKind, Settings};
use chronicle::node::Node;
use chronicle_e2e::{chronicle_binary, data, embedded_node, exact_snapshot};
use chronicle_engine::search::Scope;
use chronicle_model::{Command, GroupId};
use chronicle_query::{Query, SearchRequest};
use serde_json::{Value, json};
use uuid::Uuid;

/// Groups of the synthetic workload, with a query their communities answer.
const GROUPS: [(&str, &str); 3] = [
    ("tenant_06", "Wayne Enterprises"),
    ("tenant_07", "Denver"),
    ("tenant_00", "Maya Whitfield"),
];

fn g(id: &str) -> GroupId {
    GroupId::new(id).unwrap()
}

async fn community_searches(node: &Node) -> Vec<Value> {
    let q = Query::at(
        node.sources().expect("sources"),
        "2030-01-01T00:00:00Z".parse().unwrap(),
    );
    let mut out = Vec::new();
    for (group, text) in GROUPS {
        for recipe in ["COMMUNITY_HYBRID_SEARCH_RRF", "COMMUNITY_HYBRID_SEARCH_MMR"] {
            let r = q
                .search(&g(group), &SearchRequest::recipe(text, recipe, 5).unwrap())
                .await
                .unwrap();
            out.push(serde_json::to_value(&r).unwrap());
        }
    }
    out
}

fn write_jsonl(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn communities_and_saga_summaries_survive_a_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let node = embedded_node(dir.path()).await;
    ingest_file(&node, &data("workload.jsonl")).await.unwrap();
    let saga = dir.path().join("saga.jsonl");
    write_jsonl(
        &saga,
        &[
            json!({"group_id": "tenant_00", "content": "Maya Whitfield moved to Lisbon.", "reference_time": "2025-06-01T00:00:00Z", "saga": "relocation"}),
            json!({"group_id": "tenant_00", "content": "Maya Whitfield works at Initech.", "reference_time": "2025-07-01T00:00:00Z", "saga": "relocation"}),
        ],
    );
    ingest_file(&node, &saga).await.unwrap();

    for (i, (group, _)) in GROUPS.iter().enumerate() {
        submit_and_wait(
            &node,
            Command::BuildCommunities {
                uuid: Uuid::from_u128(0xc0 + i as u128),
                group_id: g(group),
            },
        )
        .await
        .unwrap();
        let communities = node
            .store()
            .expect("store")
            .communities(&g(group))
            .await
            .unwrap();
        assert!(!communities.is_empty(), "{group} has communities");
        for c in &communities {
            assert!(c.members.len() >= 2, "{group}: {c:?}");
            assert!(!c.summary.is_empty() && !c.name.is_empty(), "{c:?}");
            assert!(c.name_embedding.is_some(), "vector-searchable: {}", c.name);
        }
    }
    submit_and_wait(
        &node,
        Command::SummarizeSaga {
            uuid: Uuid::from_u128(0x5a),
            group_id: g("tenant_00"),
            saga: "relocation".into(),
        },
    )
    .await
    .unwrap();
    let relocation = Query::new(node.sources().expect("sources"))
        .saga(&g("tenant_00"), "relocation")
        .await
        .unwrap()
        .expect("saga");
    assert!(
        relocation.summary.contains("Lisbon"),
        "{}",
        relocation.summary
    );
    assert_eq!(
        relocation.last_summarized_episode_valid_at,
        Some("2025-07-01T00:00:00Z".parse().unwrap())
    );

    // Communities are found by search, by their members' facts.
    let live_results = community_searches(&node).await;
    for (i, r) in live_results.iter().enumerate() {
        let results = r["results"].as_array().unwrap();
        assert!(!results.is_empty(), "query {i} finds communities");
        assert!(
            results
                .iter()
                .all(|x| x["kind"] == Scope::Community.as_str()),
            "{r}"
        );
        // RRF keeps the BM25 hits on the summaries (MMR ranks by vectors only).
        let text = GROUPS[i / 2].1;
        if i % 2 == 0 {
            assert!(
                results
                    .iter()
                    .any(|x| x["summary"].as_str().unwrap().contains(text)),
                "query {i}: {r}"
            );
        }
    }

    let live = exact_snapshot(&node).await;
    let report = rebuild(&node).await.unwrap();
    assert!(report.events_applied > 0);
    assert_eq!(
        exact_snapshot(&node).await,
        live,
        "communities and sagas, to the byte"
    );
    assert_eq!(community_searches(&node).await, live_results);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_communities_are_kept_as_episodes_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings::embedded(dir.path(), ExtractorKind::Offline, EmbedderKind::Hash);
    settings.communities = CommunityMode::Incremental;
    let node = Node::open(settings).await.unwrap();
    ingest_file(&node, &data("workload.jsonl")).await.unwrap();
    for (group, _) in GROUPS {
        let communities = node
            .store()
            .expect("store")
            .communities(&g(group))
            .await
            .unwrap();
        assert!(
            !communities.is_empty(),
            "{group}: maintained without any build"
        );
    }
    let stats = chronicle::commands::log_stats(&node, None).await.unwrap();
    assert!(stats.llm_calls.is_empty(), "offline: {:?}", stats.llm_calls);
    assert!(!community_searches(&node).await.is_empty());
    let live = exact_snapshot(&node).await;
    rebuild(&node).await.unwrap();
    assert_eq!(exact_snapshot(&node).await, live);
}

fn cli(data_dir: &Path, args: &[&str]) -> String {
    let out = Process::new(chronicle_binary())
        .arg("--data")
        .arg(data_dir)
        .args(["--embedder", "hash"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chronicle {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn cli_json(data_dir: &Path, args: &[&str]) -> Value {
    let text = cli(data_dir, args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

#[test]
fn cli_builds_communities_summarizes_sagas_and_shows_provenance() {
    let scratch = tempfile::tempdir().unwrap();
    let data_dir = scratch.path().join("data");
    let first = scratch.path().join("first.jsonl");
    let works = Uuid::from_u128(0xe2);
    write_jsonl(
        &first,
        &[
            json!({"group_id": "g1", "uuid": Uuid::from_u128(0xe1), "content": "Ada Stone lives in Oslo.", "reference_time": "2025-01-10T00:00:00Z", "saga": "trip"}),
            json!({"group_id": "g1", "uuid": works, "content": "Ada Stone works at Initech.", "reference_time": "2025-02-10T00:00:00Z", "saga": "trip"}),
            json!({"group_id": "g1", "content": "Ben Okafor works at Initech. Ben Okafor lives in Oslo.", "reference_time": "2025-02-11T00:00:00Z"}),
        ],
    );
    cli(&data_dir, &["ingest", first.to_str().unwrap()]);
    let saga = cli_json(
        &data_dir,
        &["saga", "summarize", "--group", "g1", "trip", "--json"],
    );
    assert_eq!(
        saga["last_summarized_episode_valid_at"],
        "2025-02-10T00:00:00Z"
    );
    let summary = saga["summary"].as_str().unwrap();
    assert!(
        summary.contains("Oslo") && summary.contains("Initech"),
        "{saga}"
    );

    // A newer episode, and a late one from before the watermark.
    let second = scratch.path().join("second.jsonl");
    write_jsonl(
        &second,
        &[
            json!({"group_id": "g1", "content": "Ada Stone moved to Lima.", "reference_time": "2025-03-10T00:00:00Z", "saga": "trip"}),
            json!({"group_id": "g1", "content": "Ada Stone likes chess.", "reference_time": "2025-01-01T00:00:00Z", "saga": "trip"}),
        ],
    );
    cli(&data_dir, &["ingest", second.to_str().unwrap()]);
    let saga = cli_json(
        &data_dir,
        &["saga", "summarize", "--group", "g1", "trip", "--json"],
    );
    assert_eq!(
        saga["last_summarized_episode_valid_at"],
        "2025-03-10T00:00:00Z"
    );
    let summary = saga["summary"].as_str().unwrap();
    assert!(
        summary.contains("Lima") && !summary.contains("chess"),
        "{saga}"
    );
    let shown = cli_json(
        &data_dir,
        &["saga", "show", "--group", "g1", "trip", "--json"],
    );
    assert_eq!(shown, saga, "show reads what summarize printed");
    assert_eq!(shown["episodes"].as_array().unwrap().len(), 4);

    let built = cli_json(
        &data_dir,
        &["communities", "build", "--group", "g1", "--json"],
    );
    let communities = built["communities"].as_array().unwrap();
    assert!(!communities.is_empty(), "{built}");
    let member_names = |c: &Value| -> Vec<String> {
        c["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        communities.iter().all(|c| member_names(c).len() >= 2),
        "{built}"
    );
    assert!(
        communities
            .iter()
            .any(|c| member_names(c).contains(&"Ada Stone".to_owned())),
        "{built}"
    );
    let listed = cli(&data_dir, &["communities", "list", "--group", "g1"]);
    for c in communities {
        assert!(listed.contains(c["name"].as_str().unwrap()), "{listed}");
    }

    let produced = cli_json(
        &data_dir,
        &["provenance", "--group", "g1", &works.to_string(), "--json"],
    );
    let mut names: Vec<&str> = produced["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["Ada Stone", "Initech"], "{produced}");
    let facts: Vec<&str> = produced["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fact"].as_str().unwrap())
        .collect();
    assert_eq!(facts, ["Ada Stone works at Initech"], "{produced}");
    assert_eq!(produced["episodes"], json!([works]));
}
