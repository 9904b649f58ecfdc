//! Projections are rebuildable: a rebuild equals the live projection, an
//! audit replay to T equals the live projection as known at T, and tenants
//! never see each other's data.

use chronicle_e2e::{data, embedded_node, exact_snapshot};
use chronicle_engine::search::SearchFilters;
use chronicle_model::GroupId;
use chronicle_query::{Query, QueryError, SearchRequest};

const QUERIES: [(&str, &str); 6] = [
    ("tenant_00", "Where does Maya Whitfield live?"),
    ("tenant_03", "Jonas Whitfield"),
    ("tenant_06", "Who works at Wayne Enterprises?"),
    ("tenant_07", "Who lives in Denver?"),
    ("tenant_01", "Tara Castillo"),
    ("tenant_09", "moved to Lisbon"),
];

async fn fixed_queries(node: &chronicle::node::Node) -> Vec<serde_json::Value> {
    let q = Query::at(
        node.sources().expect("sources"),
        "2030-01-01T00:00:00Z".parse().unwrap(),
    );
    let mut out = Vec::new();
    for (g, text) in QUERIES {
        for recipe in [
            "COMBINED_HYBRID_SEARCH_RRF",
            "EDGE_HYBRID_SEARCH_RRF",
            "NODE_HYBRID_SEARCH_MMR",
        ] {
            let r = q
                .search(
                    &GroupId::new(g).unwrap(),
                    &SearchRequest::recipe(text, recipe, 5).unwrap(),
                )
                .await
                .unwrap();
            out.push(serde_json::to_value(&r).unwrap());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_equals_the_live_projection() {
    let dir = tempfile::tempdir().unwrap();
    let node = embedded_node(dir.path()).await;
    chronicle::commands::ingest_file(&node, &data("workload.jsonl"))
        .await
        .unwrap();
    let live = exact_snapshot(&node).await;
    let live_results = fixed_queries(&node).await;
    assert!(
        live_results
            .iter()
            .any(|r| !r["results"].as_array().unwrap().is_empty())
    );

    let report = chronicle::commands::rebuild(&node).await.unwrap();
    assert!(report.events_applied > 0);
    assert_eq!(
        exact_snapshot(&node).await,
        live,
        "every entity, fact and timestamp"
    );
    let rebuilt = fixed_queries(&node).await;
    for (i, (a, b)) in rebuilt.iter().zip(&live_results).enumerate() {
        let view = |v: &serde_json::Value| -> Vec<(String, String)> {
            v["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| (r["uuid"].to_string(), r["score"].to_string()))
                .collect()
        };
        assert_eq!(
            view(a),
            view(b),
            "query {i}: identical results after the rebuild"
        );
    }
    assert_eq!(
        rebuilt, live_results,
        "identical results for the fixed queries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_to_t_equals_what_was_known_at_t() {
    let dir = tempfile::tempdir().unwrap();
    let node = embedded_node(dir.path()).await;
    let text = std::fs::read_to_string(data("workload.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (first, second) = lines.split_at(150);
    let f1 = dir.path().join("first.jsonl");
    let f2 = dir.path().join("second.jsonl");
    std::fs::write(&f1, first.join("\n")).unwrap();
    std::fs::write(&f2, second.join("\n")).unwrap();
    chronicle::commands::ingest_file(&node, &f1).await.unwrap();
    let at_t = exact_snapshot(&node).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let t = chronicle_query::now();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    chronicle::commands::ingest_file(&node, &f2).await.unwrap();
    assert_ne!(
        exact_snapshot(&node).await,
        at_t,
        "the second half changed the graph"
    );

    // The audit replay reproduces the graph as it was at T, summaries included.
    let out = tempfile::tempdir().unwrap();
    chronicle::commands::replay(&node, &t.to_rfc3339(), out.path())
        .await
        .unwrap();
    let replayed = embedded_node(out.path()).await;
    assert_eq!(exact_snapshot(&replayed).await, at_t);

    // And the live projection restricted to transaction time T says the same about facts.
    let known = SearchFilters {
        known_at: Some(t),
        include_history: true,
        ..Default::default()
    };
    for g in replayed.store().expect("store").groups().await.unwrap() {
        let mut live: Vec<_> = node
            .store()
            .expect("store")
            .facts(&g)
            .await
            .unwrap()
            .iter()
            .filter_map(|f| known.admit_fact(f, &[], t))
            .map(|mut f| {
                // provenance as known at T: the episodes recorded by then
                f.episodes.retain(|e| replayed_has(&at_t, &g, e));
                f
            })
            .collect();
        live.sort_by_key(|f| f.uuid);
        let mut then = replayed.store().expect("store").facts(&g).await.unwrap();
        then.sort_by_key(|f| f.uuid);
        assert_eq!(live, then, "facts of {g} as known at T");
    }
}

fn replayed_has(snapshot: &serde_json::Value, g: &GroupId, episode: &uuid::Uuid) -> bool {
    snapshot[g.as_str()]["episodes"]
        .as_array()
        .is_some_and(|eps| eps.iter().any(|e| e["uuid"] == serde_json::json!(episode)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_never_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let node = embedded_node(dir.path()).await;
    chronicle::commands::ingest_file(&node, &data("workload.jsonl"))
        .await
        .unwrap();
    let q = Query::new(node.sources().expect("sources"));
    let groups = node.store().expect("store").groups().await.unwrap();
    for g in &groups {
        let mine: std::collections::BTreeSet<String> = node
            .store()
            .expect("store")
            .entities(g)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        for other in groups.iter().filter(|o| *o != g) {
            let theirs = node.store().expect("store").entities(other).await.unwrap();
            for e in theirs.iter().filter(|e| !mine.contains(&e.name)).take(3) {
                let r = q
                    .search(
                        g,
                        &SearchRequest::recipe(&e.name, "COMBINED_HYBRID_SEARCH_RRF", 10).unwrap(),
                    )
                    .await
                    .unwrap();
                for item in &r.results {
                    assert!(
                        node.store()
                            .expect("store")
                            .fact(other, item.uuid)
                            .await
                            .unwrap()
                            .is_none()
                    );
                    assert!(
                        node.store()
                            .expect("store")
                            .entity(other, item.uuid)
                            .await
                            .unwrap()
                            .is_none()
                    );
                    assert!(
                        node.store()
                            .expect("store")
                            .episode(other, item.uuid)
                            .await
                            .unwrap()
                            .is_none()
                    );
                }
                assert!(matches!(
                    q.facts(g, Some(&e.name), &SearchFilters::default()).await,
                    Err(QueryError::UnknownEntity(_))
                ));
            }
        }
    }
}
