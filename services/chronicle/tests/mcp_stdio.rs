//! `chronicle mcp` over stdio, driven by the SDK's client through the built
//! binary: the tool list, every tool end to end (memory in, processed,
//! searched by valid and transaction time, provenance, retraction), field-
//! named errors, and group scoping with `--auth` and `CHRONICLE_TOKEN`.

mod mcp_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;

use mcp_support::{
    ACME, ACME_READER, Client, FORBIDDEN, INVALID_PARAMS, NOT_FOUND, TOKENS, call,
    every_tool_forbidden, fail, settled,
};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// `chronicle --data DIR … mcp EXTRA…`, offline and hashed, with no
/// settings or token leaking in from the test's environment.
fn command(data: &Path, extra: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_chronicle"));
    c.arg("--data")
        .arg(data)
        .args(["--extractor", "offline", "--embedder", "hash", "mcp"])
        .args(extra);
    for (k, _) in std::env::vars() {
        if k.starts_with("CHRONICLE_") {
            c.env_remove(k);
        }
    }
    c
}

async fn connect(command: tokio::process::Command) -> Client {
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn chronicle mcp");
    ().serve(transport).await.expect("MCP handshake")
}

fn uuid_of(v: &Value) -> String {
    v["uuid"].as_str().expect("a uuid").to_owned()
}

/// Adds a memory (of the saga `ada`) and waits until it is processed and
/// searchable.
async fn remember(client: &Client, group: &str, body: &str, at: &str) -> String {
    let accepted = call(
        client,
        "add_memory",
        json!({"group_id": group, "name": body, "episode_body": body, "reference_time": at,
               "saga": "ada"}),
    )
    .await;
    assert_eq!(accepted["status"], "pending", "{accepted}");
    assert_eq!(accepted["group_id"], group);
    assert!(accepted["position"]["offset"].is_u64(), "{accepted}");
    let uuid = uuid_of(&accepted);
    let done = settled(client, group, &uuid).await;
    assert_eq!(done["status"], "processed", "{done}");
    uuid
}

fn facts(v: &Value) -> Vec<String> {
    v["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .map(|f| f["fact"].as_str().expect("fact text").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_tools_end_to_end() {
    let dir = tempfile::tempdir().expect("temp dir");
    let client = connect(command(dir.path(), &[])).await;

    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected: BTreeSet<&str> = [
        "add_memory",
        "search_memory",
        "get_context",
        "search_nodes",
        "search_memory_facts",
        "get_episodes",
        "get_episode_entities",
        "get_entity_edge",
        "delete_episode",
        "add_triplet",
        "build_communities",
        "summarize_saga",
        "get_status",
    ]
    .into();
    assert_eq!(names, expected);
    for t in &tools {
        assert_eq!(
            t.input_schema["required"][0], "group_id",
            "{} takes group_id",
            t.name
        );
        assert!(t.description.as_deref().is_some_and(|d| d.len() > 40));
    }

    // A memory in, processed, found, with its provenance.
    let oslo = remember(
        &client,
        "acme",
        "Ada Lovelace lives in Oslo.",
        "2024-01-01T09:00:00Z",
    )
    .await;
    let found = call(
        &client,
        "search_memory_facts",
        json!({"group_id": "acme", "query": "where does Ada Lovelace live"}),
    )
    .await;
    assert!(facts(&found).iter().any(|f| f.contains("Oslo")), "{found}");
    let fact = &found["facts"][0];
    assert_eq!(fact["episodes"][0]["uuid"], oslo.as_str(), "{found}");
    let fact_uuid = fact["uuid"].as_str().expect("fact uuid").to_owned();

    let nodes = call(
        &client,
        "search_nodes",
        json!({"group_id": "acme", "query": "Ada Lovelace", "max_nodes": 5}),
    )
    .await;
    let ada = nodes["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["name"] == "Ada Lovelace"))
        .unwrap_or_else(|| panic!("Ada among the nodes: {nodes}"))
        .clone();
    assert!(ada["labels"].as_array().is_some_and(|l| !l.is_empty()));

    let edge = call(
        &client,
        "get_entity_edge",
        json!({"group_id": "acme", "uuid": fact_uuid}),
    )
    .await;
    assert_eq!(edge["name"], "LIVES_IN", "{edge}");
    assert_eq!(edge["source_node_name"], "Ada Lovelace", "{edge}");
    assert_eq!(edge["target_node_name"], "Oslo", "{edge}");
    assert!(edge["fact_embedding"].is_null(), "no embedding: {edge}");

    let produced = call(
        &client,
        "get_episode_entities",
        json!({"group_id": "acme", "episode_uuid": oslo}),
    )
    .await;
    let entity_names: BTreeSet<&str> = produced["entities"]
        .as_array()
        .expect("entities")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert_eq!(entity_names, ["Ada Lovelace", "Oslo"].into(), "{produced}");
    assert_eq!(produced["facts"][0]["uuid"], fact_uuid.as_str());

    // A move: the old fact is invalidated, not deleted; time travel sees both.
    let bergen = remember(
        &client,
        "acme",
        "Ada Lovelace moved to Bergen.",
        "2025-02-01T09:00:00Z",
    )
    .await;
    let query = json!({"group_id": "acme", "query": "where does Ada Lovelace live", "edge_types": ["LIVES_IN"]});
    let now = facts(&call(&client, "search_memory_facts", query.clone()).await);
    assert!(now.iter().any(|f| f.contains("Bergen")), "{now:?}");
    assert!(!now.iter().any(|f| f.contains("Oslo")), "{now:?}");
    let mut then = query.clone();
    then["as_of"] = json!("2024-06-01T00:00:00Z");
    let then = facts(&call(&client, "search_memory_facts", then).await);
    assert!(then.iter().any(|f| f.contains("Oslo")), "{then:?}");
    assert!(!then.iter().any(|f| f.contains("Bergen")), "{then:?}");
    let mut history = query.clone();
    history["include_history"] = json!(true);
    let history = call(&client, "search_memory_facts", history).await;
    let all = facts(&history);
    assert!(
        all.iter().any(|f| f.contains("Oslo")) && all.iter().any(|f| f.contains("Bergen")),
        "{all:?}"
    );
    let old = history["facts"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["uuid"] == fact_uuid.as_str()))
        .expect("the Oslo fact in the history");
    assert_eq!(old["invalid_at"], "2025-02-01T09:00:00Z", "{old}");
    assert!(old["expired_at"].is_string(), "{old}");
    let mut centered = query.clone();
    centered["center_node_uuid"] = ada["uuid"].clone();
    assert!(
        facts(&call(&client, "search_memory_facts", centered).await)
            .iter()
            .any(|f| f.contains("Bergen"))
    );
    // Transaction time: before the move was recorded, the system knew Oslo.
    let edge = call(
        &client,
        "get_entity_edge",
        json!({"group_id": "acme", "uuid": fact_uuid}),
    )
    .await;
    let mut known = query.clone();
    known["known_at"] = edge["created_at"].clone();
    let known = facts(&call(&client, "search_memory_facts", known).await);
    assert!(known.iter().any(|f| f.contains("Oslo")), "{known:?}");

    let episodes = call(
        &client,
        "get_episodes",
        json!({"group_id": "acme", "max_episodes": 1}),
    )
    .await;
    assert_eq!(episodes["episodes"].as_array().map(Vec::len), Some(1));
    assert_eq!(episodes["episodes"][0]["uuid"], bergen.as_str());

    // A triple: no model call, processed like an episode.
    let triple = call(
        &client,
        "add_triplet",
        json!({"group_id": "acme", "source": "Ada Lovelace", "relation": "WORKS_AT",
               "target": "Analytical Engines Ltd", "valid_at": "2024-03-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(
        settled(&client, "acme", &uuid_of(&triple)).await["status"],
        "processed"
    );
    let works = call(
        &client,
        "search_memory_facts",
        json!({"group_id": "acme", "query": "Analytical Engines", "edge_types": ["WORKS_AT"]}),
    )
    .await;
    assert_eq!(works["facts"][0]["name"], "WORKS_AT", "{works}");

    // Retraction: the triple's fact disappears once processed; retrying is the same command.
    let retract = call(
        &client,
        "delete_episode",
        json!({"group_id": "acme", "uuid": uuid_of(&triple)}),
    )
    .await;
    assert_eq!(retract["episode_uuid"], triple["uuid"]);
    let again = call(
        &client,
        "delete_episode",
        json!({"group_id": "acme", "uuid": uuid_of(&triple)}),
    )
    .await;
    assert_eq!(again["uuid"], retract["uuid"], "retrying is idempotent");
    assert_eq!(
        settled(&client, "acme", &uuid_of(&retract)).await["status"],
        "processed"
    );
    let works = call(
        &client,
        "search_memory_facts",
        json!({"group_id": "acme", "query": "Analytical Engines", "edge_types": ["WORKS_AT"]}),
    )
    .await;
    assert_eq!(works["facts"].as_array().map(Vec::len), Some(0), "{works}");

    // Communities and saga summaries are commands like any other: accepted,
    // then decided.
    for (tool, args) in [
        ("build_communities", json!({"group_id": "acme"})),
        ("summarize_saga", json!({"group_id": "acme", "saga": "ada"})),
    ] {
        let accepted = call(&client, tool, args).await;
        assert_eq!(accepted["status"], "pending", "{tool}: {accepted}");
        let done = settled(&client, "acme", &uuid_of(&accepted)).await;
        assert_eq!(done["status"], "processed", "{tool}: {done}");
    }

    let status = call(&client, "get_status", json!({"group_id": "acme"})).await;
    assert_eq!(status["pending"], 0, "{status}");
    assert!(
        status["processed"].as_u64().is_some_and(|n| n >= 4),
        "{status}"
    );
    assert_eq!(status["projector_lag"], 0, "{status}");

    // Mistakes are errors that name the field; unknown ids are not-found.
    let cases = [
        ("add_memory", json!({"group_id": "acme"}), "episode_body"),
        (
            "add_memory",
            json!({"group_id": "acme", "episode_body": "  "}),
            "episode_body",
        ),
        (
            "add_memory",
            json!({"group_id": "acme", "episode_body": "x", "source": "audio"}),
            "source",
        ),
        (
            "add_memory",
            json!({"group_id": "acme", "episode_body": "x", "reference_time": "yesterday"}),
            "reference_time",
        ),
        ("search_nodes", json!({"query": "x"}), "group_id"),
        (
            "search_nodes",
            json!({"group_id": "no spaces", "query": "x"}),
            "group_id",
        ),
        (
            "search_nodes",
            json!({"group_id": "acme", "query": "x", "max_nodes": 0}),
            "max_nodes",
        ),
        (
            "search_memory_facts",
            json!({"group_id": "acme", "query": "x", "as_of": "soon"}),
            "as_of",
        ),
        (
            "search_memory_facts",
            json!({"group_id": "acme", "query": "x", "edge_types": ["A", ""]}),
            "edge_types[1]",
        ),
        (
            "search_memory_facts",
            json!({"group_id": "acme", "query": "x", "colour": "red"}),
            "colour",
        ),
        (
            "get_entity_edge",
            json!({"group_id": "acme", "uuid": "nope"}),
            "uuid",
        ),
        (
            "add_triplet",
            json!({"group_id": "acme", "source": "A", "relation": "R"}),
            "target",
        ),
        (
            "summarize_saga",
            json!({"group_id": "acme", "saga": ""}),
            "saga",
        ),
    ];
    for (tool, args, field) in cases {
        let e = fail(&client, tool, args.clone()).await;
        assert_eq!(e.code, INVALID_PARAMS, "{tool} {args}: {e:?}");
        assert_eq!(e.status, 400, "{tool} {args}: {e:?}");
        assert_eq!(e.field.as_deref(), Some(field), "{tool} {args}: {e:?}");
        assert!(e.message.starts_with(field), "{tool}: {e:?}");
    }
    let unknown = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    for (tool, args, field) in [
        (
            "get_entity_edge",
            json!({"group_id": "acme", "uuid": unknown}),
            "uuid",
        ),
        (
            "get_status",
            json!({"group_id": "acme", "uuid": unknown}),
            "uuid",
        ),
        (
            "delete_episode",
            json!({"group_id": "acme", "uuid": unknown}),
            "uuid",
        ),
        (
            "get_episode_entities",
            json!({"group_id": "acme", "episode_uuid": unknown}),
            "episode_uuid",
        ),
        (
            "search_nodes",
            json!({"group_id": "acme", "query": "x", "center": "Nobody"}),
            "center",
        ),
        (
            "summarize_saga",
            json!({"group_id": "acme", "saga": "nobody's story"}),
            "saga",
        ),
    ] {
        let e = fail(&client, tool, args).await;
        assert_eq!((e.status, e.field.as_deref()), (404, Some(field)), "{e:?}");
        assert!(
            e.code == NOT_FOUND || e.code == INVALID_PARAMS,
            "{tool}: {e:?}"
        );
    }
    // Another group's records are unknown here, not leaked.
    let e = fail(
        &client,
        "get_entity_edge",
        json!({"group_id": "other", "uuid": fact_uuid}),
    )
    .await;
    assert_eq!(e.status, 404, "{e:?}");

    client.cancel().await.expect("clean close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_callers_are_scoped_by_their_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, TOKENS).expect("tokens file");
    let data = dir.path().join("data");
    let auth = ["--auth", tokens.to_str().expect("utf-8 path")];

    let mut c = command(&data, &auth);
    c.env("CHRONICLE_TOKEN", ACME);
    let acme = connect(c).await;
    let ada = remember(
        &acme,
        "acme",
        "Ada Lovelace lives in Oslo.",
        "2024-01-01T09:00:00Z",
    )
    .await;
    let found = call(
        &acme,
        "search_memory_facts",
        json!({"group_id": "acme", "query": "Ada Lovelace"}),
    )
    .await;
    assert!(!facts(&found).is_empty(), "{found}");
    // Every tool, on a group the token does not cover: forbidden, no data.
    every_tool_forbidden(&acme, "globex", &ada).await;
    acme.cancel().await.expect("clean close");

    // A read-only token reads, and may not write.
    let mut c = command(&data, &auth);
    c.env("CHRONICLE_TOKEN", ACME_READER);
    let reader = connect(c).await;
    let found = call(
        &reader,
        "search_memory_facts",
        json!({"group_id": "acme", "query": "Ada Lovelace"}),
    )
    .await;
    assert!(
        facts(&found).iter().any(|f| f.contains("Oslo")),
        "kept across restarts: {found}"
    );
    for (tool, args) in [
        (
            "add_memory",
            json!({"group_id": "acme", "episode_body": "Ada Lovelace lives in Rome."}),
        ),
        ("delete_episode", json!({"group_id": "acme", "uuid": ada})),
        ("build_communities", json!({"group_id": "acme"})),
    ] {
        let e = fail(&reader, tool, args).await;
        assert_eq!((e.code, e.status), (FORBIDDEN, 403), "{tool}: {e:?}");
        assert!(e.message.contains("may only read"), "{tool}: {e:?}");
    }
    reader.cancel().await.expect("clean close");
}

#[test]
fn stdio_refuses_to_start_without_a_known_token() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, TOKENS).expect("tokens file");
    let run = |token: Option<&str>| {
        let mut c = command(
            &dir.path().join("data"),
            &["--auth", tokens.to_str().expect("utf-8")],
        )
        .into_std();
        if let Some(t) = token {
            c.env("CHRONICLE_TOKEN", t);
        }
        let out = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .expect("run chronicle mcp");
        assert!(!out.status.success(), "refused");
        assert!(out.stdout.is_empty(), "nothing on the protocol stream");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(run(None).contains("CHRONICLE_TOKEN"));
    assert!(run(Some("not-a-token-of-the-file")).contains("is not in"));
}
