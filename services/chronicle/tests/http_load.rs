//! Many tenants writing and reading at once on one server: no response
//! ever carries another group's data, and every group ends with exactly
//! its own graph.

mod http_support;

use std::sync::Arc;

use http_support::{TestServer, start};
use reqwest::StatusCode;
use serde_json::json;

const GROUPS: usize = 12;
const ROUNDS: usize = 8;

/// A capitalized, letters-only word unique to group `g`: no group's marker
/// is a substring of another group's text, and none is hex (uuids).
fn marker(g: usize) -> String {
    let a = (b'a' + (g / 26) as u8) as char;
    let b = (b'a' + (g % 26) as u8) as char;
    format!("Qx{a}{b}")
}

fn token(g: usize) -> String {
    format!("tenant-{g:02}-secret-0123456789")
}

fn auth() -> String {
    (0..GROUPS)
        .map(|g| {
            format!(
                "[[tokens]]\nsecret = \"{}\"\ngroups = [\"tenant-{g:02}\"]\naccess = \"write\"\n",
                token(g)
            )
        })
        .collect()
}

/// Fails if `text` mentions any group's marker but `own`'s.
fn check_foreign(text: &str, own: usize, what: &str) {
    let lower = text.to_lowercase();
    for other in (0..GROUPS).filter(|o| *o != own) {
        let m = marker(other).to_lowercase();
        assert!(
            !lower.contains(&m),
            "tenant-{own:02} {what} carries tenant-{other:02}'s data: {text}"
        );
    }
}

async fn tenant(s: Arc<TestServer>, g: usize) -> usize {
    let group = format!("tenant-{g:02}");
    let t = token(g);
    let m = marker(g);
    let mut checked = 0;
    for round in 0..ROUNDS {
        // Writes: a single episode, a batch, a triple.
        let r = s
            .post(
                &format!("/v1/groups/{group}/episodes"),
                Some(&t),
                &json!({"content": format!("{m}: I moved to {m}ton{round}."), "reference_time": format!("2025-01-{:02}T00:00:00Z", round + 1)}),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
        check_foreign(&r.text, g, "POST episodes");
        let r = s
            .post(
                &format!("/v1/groups/{group}/episodes"),
                Some(&t),
                &json!({"episodes": [
                    {"content": format!("{m}a works at {m}corp{round}."), "reference_time": "2025-02-01T00:00:00Z"},
                    {"content": format!("{m}b likes {m}jazz{round}."), "reference_time": "2025-02-02T00:00:00Z"},
                ]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
        let r = s
            .post(
                &format!("/v1/groups/{group}/triplets"),
                Some(&t),
                &json!({"source": format!("{m}c"), "relation": "OWNS", "target": format!("{m}boat{round}")}),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
        // Reads, asking on purpose for other tenants' words.
        let other = marker((g + 1) % GROUPS);
        for query in [
            format!("where does {m} live"),
            format!("{other} {other}ton{round} {other}corp"),
            "moved lives works likes owns".to_owned(),
        ] {
            let r = s
                .post(
                    &format!("/v1/groups/{group}/search"),
                    Some(&t),
                    &json!({"query": query, "include_history": true, "limit": 50}),
                )
                .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            check_foreign(&r.text, g, "search");
            checked += 1;
        }
        for path in [
            format!("/v1/groups/{group}/facts?include_history=true&limit=1000"),
            format!("/v1/groups/{group}/episodes?last_n=1000"),
        ] {
            let r = s.get(&path, Some(&t)).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            check_foreign(&r.text, g, &path);
            checked += 1;
        }
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_tenants_never_see_each_other() {
    let s = Arc::new(start(Some(&auth()), None).await);
    let tasks: Vec<_> = (0..GROUPS)
        .map(|g| tokio::spawn(tenant(s.clone(), g)))
        .collect();
    let mut checked = 0;
    for t in tasks {
        checked += t.await.expect("tenant task");
    }
    assert_eq!(checked, GROUPS * ROUNDS * 5);
    let mut s = Arc::into_inner(s).expect("tasks done");
    s.settle().await;
    for g in 0..GROUPS {
        let group = format!("tenant-{g:02}");
        let r = s
            .get(
                &format!("/v1/groups/{group}/facts?include_history=true&limit=1000"),
                Some(&token(g)),
            )
            .await;
        check_foreign(&r.text, g, "final facts");
        let facts = r.json();
        let n = facts["facts"].as_array().map(Vec::len).unwrap_or(0);
        // Per round: a move (LIVES_IN), a job, a like, a triple; moves
        // invalidate earlier ones but stay as history.
        assert_eq!(n, ROUNDS * 4, "{group}: {facts}");
        let episodes = s
            .get(
                &format!("/v1/groups/{group}/episodes?last_n=1000"),
                Some(&token(g)),
            )
            .await
            .json();
        assert_eq!(
            episodes["episodes"].as_array().map(Vec::len),
            Some(ROUNDS * 4),
            "{group}"
        );
    }
    s.stop().await;
}
