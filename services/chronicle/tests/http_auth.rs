//! Tenancy: every route refuses a token of another group (403, no data),
//! refuses requests without a valid token (401), and a group's own token
//! cannot reach another group's records by id.

mod http_support;

use std::collections::BTreeSet;

use http_support::{Reply, TestServer, start};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const ACME_RW: &str = "acme-writer-0123456789";
const ACME_RO: &str = "acme-reader-0123456789";
const GLOBEX_RW: &str = "globex-writer-0123456789";
const TEAMS_RW: &str = "teams-writer-0123456789";

const AUTH: &str = r#"
[[tokens]]
name = "acme-rw"
secret = "acme-writer-0123456789"
groups = ["acme"]
access = "write"

[[tokens]]
name = "acme-ro"
secret = "acme-reader-0123456789"
groups = ["acme"]
access = "read"

[[tokens]]
name = "globex-rw"
secret = "globex-writer-0123456789"
groups = ["globex"]
access = "write"

[[tokens]]
name = "teams"
secret = "teams-writer-0123456789"
groups = ["team-*"]
access = "write"
"#;

/// Text that only acme's data contains.
const ACME_SECRETS: &[&str] = &["Zorblax", "Quarnville", "Vexcorp"];

fn sample_body(path: &str) -> Option<Vec<u8>> {
    let v = if path.ends_with("/episodes") {
        json!({"content": "Zorblax: I moved to Quarnville.", "reference_time": "2025-02-01T00:00:00Z"})
    } else if path.ends_with("/triplets") {
        json!({"source": "Zorblax", "relation": "WORKS_AT", "target": "Vexcorp"})
    } else if path.ends_with("/search") || path.ends_with("/context") {
        json!({"query": "Zorblax Quarnville Vexcorp"})
    } else {
        return None;
    };
    Some(serde_json::to_vec(&v).expect("json"))
}

/// Every documented group route, filled in for `group` with real ids.
async fn group_routes(
    s: &TestServer,
    group: &str,
    episode: &str,
    entity: &str,
) -> Vec<(Method, String, Option<Vec<u8>>, String)> {
    let doc = s.get("/openapi.json", None).await.json();
    let mut out = Vec::new();
    for (template, ops) in doc["paths"].as_object().expect("paths") {
        if !template.starts_with("/v1/groups/") {
            continue;
        }
        for (method, op) in ops.as_object().expect("ops") {
            let uuid = if template.contains("/entities/") {
                entity
            } else {
                episode
            };
            let path = template
                .replace("{group_id}", group)
                .replace("{uuid}", uuid)
                .replace("{name}", "trip");
            let access = op["x-chronicle-access"]
                .as_str()
                .expect("group routes state their access")
                .to_owned();
            out.push((
                Method::from_bytes(method.to_uppercase().as_bytes()).expect("method"),
                path.clone(),
                sample_body(&path),
                access,
            ));
        }
    }
    assert_eq!(out.len(), 17, "every group route is walked");
    out
}

fn assert_no_acme_data(r: &Reply, what: &str, ids: &[&str]) {
    for s in ACME_SECRETS.iter().chain(ids) {
        assert!(
            !r.text.contains(s),
            "{what}: {} leaks `{s}`: {}",
            r.status,
            r.text
        );
    }
}

async fn seed(s: &mut TestServer) -> (String, String) {
    let r = s
        .post(
            "/v1/groups/acme/episodes",
            Some(ACME_RW),
            &json!({"content": "Zorblax: I moved to Quarnville.", "reference_time": "2025-01-01T00:00:00Z", "saga": "trip"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    let episode = r.json()["uuid"].as_str().expect("uuid").to_owned();
    let t = s
        .post(
            "/v1/groups/acme/triplets",
            Some(ACME_RW),
            &json!({"source": "Zorblax", "relation": "WORKS_AT", "target": "Vexcorp"}),
        )
        .await;
    assert_eq!(t.status, StatusCode::ACCEPTED, "{}", t.text);
    s.settle().await;
    let found = s
        .post(
            "/v1/groups/acme/search",
            Some(ACME_RO),
            &json!({"query": "Zorblax", "recipe": "NODE_HYBRID_SEARCH_RRF"}),
        )
        .await
        .json();
    let entity = found["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["name"] == "Zorblax")
        .and_then(|r| r["uuid"].as_str())
        .unwrap_or_else(|| panic!("Zorblax is an entity: {found}"))
        .to_owned();
    (episode, entity)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_route_refuses_other_groups_and_missing_tokens() {
    let mut s = start(Some(AUTH), None).await;
    let (episode, entity) = seed(&mut s).await;
    let before = s.appended().await;
    let ids = [episode.as_str(), entity.as_str()];
    let routes = group_routes(&s, "acme", &episode, &entity).await;
    // Totals over every group are not served where tokens are checked.
    for token in [Some(GLOBEX_RW), Some(ACME_RW), None] {
        let r = s.get("/v1/stats", token).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.text);
        assert_no_acme_data(&r, "GET /v1/stats", &ids);
    }

    for (method, path, body, access) in &routes {
        let what = format!("{method} {path}");
        // Another group's token: 403, and nothing of acme's in the body.
        let r = s
            .send(method.clone(), path, Some(GLOBEX_RW), body.clone())
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {}", r.text);
        assert_eq!(r.json()["field"], "group_id", "{what}");
        assert_no_acme_data(&r, &what, &ids);
        // A prefix token whose prefix does not cover acme: 403.
        let r = s
            .send(method.clone(), path, Some(TEAMS_RW), body.clone())
            .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {}", r.text);
        assert_no_acme_data(&r, &what, &ids);
        // No token, a malformed header, an unknown token: 401.
        for token in [None, Some("not-a-token-at-all-xx")] {
            let r = s.send(method.clone(), path, token, body.clone()).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{what}: {}", r.text);
            assert_eq!(
                r.headers
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok()),
                Some("Bearer"),
                "{what}"
            );
            assert_no_acme_data(&r, &what, &ids);
        }
        let r = s
            .client
            .request(method.clone(), format!("{}{path}", s.url))
            .header("authorization", format!("Basic {ACME_RW}"))
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{what}");
        // The read-only token reads but does not write.
        let r = s
            .send(method.clone(), path, Some(ACME_RO), body.clone())
            .await;
        if access == "write" {
            assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {}", r.text);
        } else {
            assert!(r.status.is_success(), "{what}: {} {}", r.status, r.text);
        }
    }
    assert_eq!(
        s.appended().await,
        before,
        "no refused request appended anything"
    );

    // Open routes stay open and name no group.
    for path in ["/healthz", "/readyz", "/openapi.json", "/metrics"] {
        let r = s.get(path, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        assert_no_acme_data(&r, path, &ids);
        assert!(!r.text.contains("acme"), "{path} names a group");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn own_token_cannot_reach_other_groups_records_by_id() {
    let mut s = start(Some(AUTH), None).await;
    let (episode, entity) = seed(&mut s).await;
    let ids = [episode.as_str(), entity.as_str()];
    // globex, with its own valid token, asks for acme's ids in globex.
    for (method, path, body, _) in group_routes(&s, "globex", &episode, &entity).await {
        let what = format!("{method} {path}");
        if method == Method::POST {
            continue; // writes to globex are globex's own; searched below
        }
        let r = s.send(method.clone(), &path, Some(GLOBEX_RW), body).await;
        assert!(
            r.status == StatusCode::NOT_FOUND || r.status == StatusCode::OK,
            "{what}: {} {}",
            r.status,
            r.text
        );
        assert_no_acme_data(&r, &what, &ids);
    }
    let r = s
        .post(
            "/v1/groups/globex/search",
            Some(GLOBEX_RW),
            &json!({"query": "Zorblax Quarnville Vexcorp", "center": entity}),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::BAD_REQUEST,
        "an acme entity is no globex center"
    );
    assert_no_acme_data(&r, "search with acme's center", &ids);
    let r = s
        .post(
            "/v1/groups/globex/search",
            Some(GLOBEX_RW),
            &json!({"query": "Zorblax Quarnville Vexcorp", "include_history": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.json()["results"],
        json!([]),
        "globex sees none of acme's graph"
    );

    // Ids are per group: another group may use the same uuid for an episode
    // of its own (no 409 oracle, no pre-claiming), both are decided, and
    // each group's status, graph and search see only its own.
    let theirs_first = s
        .get(
            &format!("/v1/groups/acme/episodes/{episode}"),
            Some(ACME_RO),
        )
        .await
        .json();
    let same_id = s
        .post(
            "/v1/groups/globex/episodes",
            Some(GLOBEX_RW),
            &json!({"episodes": [{"content": "Quibbit: I joined Plonkco.", "uuid": episode}]}),
        )
        .await;
    assert_eq!(same_id.status, StatusCode::ACCEPTED, "{}", same_id.text);
    assert_no_acme_data(&same_id, "reused uuid", &[]);
    s.settle().await;
    let mine = s
        .get(
            &format!("/v1/groups/globex/episodes/{episode}"),
            Some(GLOBEX_RW),
        )
        .await;
    assert_eq!(mine.status, StatusCode::OK, "{}", mine.text);
    assert_eq!(mine.json()["status"], "processed", "{}", mine.text);
    assert_no_acme_data(&mine, "globex's status of the shared uuid", &[]);
    let acme_after = s
        .get(
            &format!("/v1/groups/acme/episodes/{episode}"),
            Some(ACME_RO),
        )
        .await
        .json();
    assert_eq!(acme_after, theirs_first, "acme's status is untouched");
    let graph = s
        .get(
            &format!("/v1/groups/globex/episodes/{episode}/graph"),
            Some(GLOBEX_RW),
        )
        .await;
    assert!(graph.text.contains("Plonkco"), "{}", graph.text);
    assert_no_acme_data(&graph, "globex's graph of the shared uuid", &[]);
    let acme_graph = s
        .get(
            &format!("/v1/groups/acme/episodes/{episode}/graph"),
            Some(ACME_RO),
        )
        .await;
    assert!(
        acme_graph.text.contains("Quarnville"),
        "{}",
        acme_graph.text
    );
    assert!(!acme_graph.text.contains("Plonkco"), "{}", acme_graph.text);
    let found = s
        .post(
            "/v1/groups/acme/search",
            Some(ACME_RO),
            &json!({"query": "Quarnville Plonkco"}),
        )
        .await;
    assert!(found.text.contains("Quarnville"), "{}", found.text);
    assert!(!found.text.contains("Plonkco"), "{}", found.text);
    let retry = s
        .post(
            "/v1/groups/acme/episodes",
            Some(ACME_RW),
            &json!({"content": "Zorblax: I moved to Quarnville.", "uuid": episode}),
        )
        .await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.text);

    // Prefix tokens cover their prefix only.
    let mine = s
        .post(
            "/v1/groups/team-blue/episodes",
            Some(TEAMS_RW),
            &json!({"content": "Ivo: I joined Hooli."}),
        )
        .await;
    assert_eq!(mine.status, StatusCode::ACCEPTED, "{}", mine.text);
    let theirs = s
        .post(
            "/v1/groups/teams/episodes",
            Some(TEAMS_RW),
            &json!({"content": "Ivo: I joined Hooli."}),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::FORBIDDEN);
    // The metrics never carry a group id.
    let metrics = s.get("/metrics", None).await.text;
    let groups: BTreeSet<&str> = ["acme", "globex", "team-blue"].into();
    for g in groups {
        assert!(!metrics.contains(g), "/metrics names group {g}");
    }
    let stats: Value = serde_json::from_str(&s.get("/readyz", None).await.text).expect("json");
    assert!(stats["ready"].is_boolean());
    s.stop().await;
}
