//! MCP over streamable HTTP at `/mcp` under the embedded server, driven by
//! the SDK's client on loopback: the same bearer tokens as the HTTP API
//! (401 before MCP without one), every tool scoped to the token's groups
//! (forbidden, never data, for another group), and the tools end to end.

mod http_support;
mod mcp_support;

use mcp_support::{
    ACME, ACME_READER, Client, FORBIDDEN, GLOBEX, TOKENS, call, every_tool_forbidden, fail, settled,
};
use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

/// An MCP client of the server's `/mcp`, presenting `token` (if any).
async fn connect(url: &str, token: Option<&str>) -> Result<Client, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp"));
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client");
    ().serve(StreamableHttpClientTransport::with_client(http, config))
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_mcp_is_scoped_by_bearer_tokens() {
    let s = http_support::start(Some(TOKENS), None).await;

    // No token, or an unknown one: refused by HTTP before MCP runs.
    let bare = s
        .send(
            reqwest::Method::POST,
            "/mcp",
            None,
            Some(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_vec()),
        )
        .await;
    assert_eq!(bare.status, StatusCode::UNAUTHORIZED, "{}", bare.text);
    assert_eq!(
        bare.headers
            .get(reqwest::header::WWW_AUTHENTICATE)
            .map(|v| v.as_bytes()),
        Some(&b"Bearer"[..])
    );
    assert!(
        connect(&s.url, None).await.is_err(),
        "no session without a token"
    );
    assert!(
        connect(&s.url, Some("not-a-known-token-at-all"))
            .await
            .is_err()
    );

    let acme = connect(&s.url, Some(ACME)).await.expect("acme connects");
    let tools = acme.peer().list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 13);

    let accepted = call(
        &acme,
        "add_memory",
        json!({"group_id": "acme", "name": "ada-1", "episode_body": "Ada Lovelace lives in Oslo.",
               "source": "message", "reference_time": "2024-01-01T09:00:00Z"}),
    )
    .await;
    assert_eq!(accepted["status"], "pending", "{accepted}");
    let uuid = accepted["uuid"].as_str().expect("uuid").to_owned();
    let done = settled(&acme, "acme", &uuid).await;
    assert_eq!(done["status"], "processed", "{done}");
    assert_eq!(done["counts"]["facts_created"], 1, "{done}");
    let found = call(
        &acme,
        "search_memory_facts",
        json!({"group_id": "acme", "query": "where does Ada Lovelace live"}),
    )
    .await;
    assert!(
        found["facts"][0]["fact"]
            .as_str()
            .is_some_and(|f| f.contains("Oslo")),
        "{found}"
    );
    assert_eq!(found["facts"][0]["episodes"][0]["uuid"], uuid.as_str());

    // The same memory through the HTTP API's status route: one system.
    let status = s
        .get(&format!("/v1/groups/acme/episodes/{uuid}"), Some(ACME))
        .await;
    assert_eq!(status.json()["status"], "processed");

    // globex's token: every acme tool is forbidden; its own group is empty.
    let globex = connect(&s.url, Some(GLOBEX))
        .await
        .expect("globex connects");
    every_tool_forbidden(&globex, "acme", &uuid).await;
    let own = call(
        &globex,
        "search_memory_facts",
        json!({"group_id": "globex", "query": "where does Ada Lovelace live"}),
    )
    .await;
    assert_eq!(own["facts"].as_array().map(Vec::len), Some(0), "{own}");
    let e = fail(
        &globex,
        "get_entity_edge",
        json!({"group_id": "globex", "uuid": found["facts"][0]["uuid"]}),
    )
    .await;
    assert_eq!(e.status, 404, "acme's ids are unknown in globex: {e:?}");

    // And acme's token on globex, the other way round.
    every_tool_forbidden(&acme, "globex", &uuid).await;

    // A read-only token reads acme and may not write it.
    let reader = connect(&s.url, Some(ACME_READER))
        .await
        .expect("reader connects");
    let episodes = call(&reader, "get_episodes", json!({"group_id": "acme"})).await;
    assert_eq!(episodes["episodes"][0]["uuid"], uuid.as_str());
    let e = fail(
        &reader,
        "add_triplet",
        json!({"group_id": "acme", "source": "A", "relation": "R", "target": "B"}),
    )
    .await;
    assert_eq!((e.code, e.status), (FORBIDDEN, 403), "{e:?}");
    assert!(e.message.contains("may only read"), "{e:?}");
    assert_eq!(s.appended().await, 1, "nothing refused reached the log");

    for c in [acme, globex, reader] {
        c.cancel().await.expect("clean close");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_mcp_without_tokens_on_loopback() {
    let s = http_support::start(None, None).await;
    let client = connect(&s.url, None)
        .await
        .expect("connects without a token");
    let accepted = call(
        &client,
        "add_triplet",
        json!({"group_id": "solo", "source": "Ada Lovelace", "relation": "WORKS_AT",
               "target": "Analytical Engines Ltd"}),
    )
    .await;
    let uuid = accepted["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(settled(&client, "solo", &uuid).await["status"], "processed");
    let nodes = call(
        &client,
        "search_nodes",
        json!({"group_id": "solo", "query": "Analytical Engines"}),
    )
    .await;
    assert!(
        nodes["nodes"]
            .as_array()
            .is_some_and(|n| n.iter().any(|n| n["name"] == "Analytical Engines Ltd")),
        "{nodes}"
    );
    client.cancel().await.expect("clean close");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_episodes_over_mcp_neither_stop_the_server_nor_the_group() {
    let s = http_support::start(None, None).await;
    let client = connect(&s.url, None).await.expect("connects");
    let kelvin = "\u{212A}".repeat(8);
    for content in [
        "Alice moved to Paris since 300000000 days ago.".to_owned(),
        format!("Alice lives in Paris{kelvin} and moved to Rome."),
    ] {
        let accepted = call(
            &client,
            "add_memory",
            json!({"group_id": "acme", "episode_body": content,
                   "reference_time": "2025-01-01T00:00:00Z"}),
        )
        .await;
        let uuid = accepted["uuid"].as_str().expect("uuid").to_owned();
        let status = settled(&client, "acme", &uuid).await;
        assert!(
            status["status"] == "processed" || status["status"] == "dead_lettered",
            "{status}"
        );
    }
    let after = call(
        &client,
        "add_memory",
        json!({"group_id": "acme", "episode_body": "Ben: I work at Initech.", "source": "message"}),
    )
    .await;
    let uuid = after["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(settled(&client, "acme", &uuid).await["status"], "processed");
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client");
    let health = http.get(format!("{}/healthz", s.url)).send().await;
    assert_eq!(health.expect("healthz").status(), StatusCode::OK);
    client.cancel().await.expect("clean close");
    s.stop().await;
}
