//! Acceptance on the shared synthetic multi-tenant workload (on which
//! graphiti stored 50 duplicate edges and missed 19 of 50 invalidations in
//! bulk mode): exactly 408 entities, no duplicated fact, every move seen
//! before and after, and search naming the queried subject.

use chronicle::commands::IngestOutcome;
use chronicle_e2e::{data, embedded_node};
use chronicle_engine::search::SearchFilters;
use chronicle_model::{GroupId, Timestamp};
use chronicle_query::{Query, SearchRequest};
use serde::Deserialize;

#[derive(Deserialize)]
struct Move {
    group_id: String,
    person: String,
    old_city: String,
    new_city: String,
    query_before: Timestamp,
    query_after: Timestamp,
}

#[derive(Deserialize)]
struct SearchCase {
    group_id: String,
    query: String,
    kind: String,
    subject: String,
}

fn lines<T: serde::de::DeserializeOwned>(name: &str) -> Vec<T> {
    std::fs::read_to_string(data(name))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_workload_gives_the_expected_graph() {
    let dir = tempfile::tempdir().unwrap();
    let node = embedded_node(dir.path()).await;
    let outcome = chronicle::commands::ingest_file(&node, &data("workload.jsonl"))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        IngestOutcome {
            accepted: 300,
            rejected: 0
        }
    );

    let counts = node.store().expect("store").counts(None).await.unwrap();
    assert_eq!(
        counts.entities, 408,
        "exactly the workload's people, places and organizations"
    );
    assert_eq!(counts.episodes, 300);

    // No two facts with the same endpoints and relation overlap in valid time.
    for g in node.store().expect("store").groups().await.unwrap() {
        let facts = node.store().expect("store").facts(&g).await.unwrap();
        for (i, a) in facts.iter().enumerate() {
            for b in &facts[i + 1..] {
                let same = a.source_node_uuid == b.source_node_uuid
                    && a.target_node_uuid == b.target_node_uuid
                    && a.name == b.name;
                assert!(
                    !(same && a.valid_window().overlaps(&b.valid_window())),
                    "duplicated fact in {g}: {} / {}",
                    a.fact,
                    b.fact
                );
            }
        }
    }

    // Every move: the old city before, the new city after, the old fact kept.
    let query = Query::new(node.sources().expect("sources"));
    let moves: Vec<Move> = lines("workload_moves.jsonl");
    assert_eq!(moves.len(), 50);
    let mut correct = 0;
    for m in &moves {
        let g = GroupId::new(&m.group_id).unwrap();
        let lives = |as_of| SearchFilters {
            edge_types: Some(vec!["LIVES_IN".into()]),
            as_of: Some(as_of),
            ..Default::default()
        };
        let before = query
            .facts(&g, Some(&m.person), &lives(m.query_before))
            .await
            .unwrap();
        let after = query
            .facts(&g, Some(&m.person), &lives(m.query_after))
            .await
            .unwrap();
        let targets = |xs: &[chronicle_query::ResultItem]| {
            xs.iter()
                .filter_map(|f| f.target.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            targets(&before),
            vec![m.old_city.clone()],
            "{} before moving",
            m.person
        );
        assert_eq!(
            targets(&after),
            vec![m.new_city.clone()],
            "{} after moving",
            m.person
        );
        let history = SearchFilters {
            include_history: true,
            edge_types: Some(vec!["LIVES_IN".into()]),
            ..Default::default()
        };
        let all = query.facts(&g, Some(&m.person), &history).await.unwrap();
        let old = all
            .iter()
            .find(|f| f.target.as_deref() == Some(&m.old_city))
            .expect("old fact kept");
        assert!(
            old.invalid_at.is_some() && old.expired_at.is_some(),
            "old fact invalidated, not deleted"
        );
        correct += 2;
    }
    assert_eq!(correct, 100, "100/100 before-and-after answers");

    // Search names the queried subject among the top results.
    let cases: Vec<SearchCase> = lines("queries.jsonl");
    let mut misses = Vec::new();
    for c in &cases {
        let g = GroupId::new(&c.group_id).unwrap();
        let request = SearchRequest::recipe(&c.query, "COMBINED_HYBRID_SEARCH_RRF", 5).unwrap();
        let results = query.search(&g, &request).await.unwrap();
        let top: Vec<String> = results
            .results
            .iter()
            .take(5)
            .map(|r| {
                format!(
                    "{} {} {}",
                    r.name,
                    r.fact.as_deref().unwrap_or(""),
                    r.content.as_deref().unwrap_or("")
                )
            })
            .collect();
        if !top.iter().any(|t| t.contains(&c.subject)) {
            misses.push(format!("{} ({}): {:?}", c.query, c.kind, top));
        }
    }
    assert!(
        misses.is_empty(),
        "{} of {} queries missed their subject: {:#?}",
        misses.len(),
        cases.len(),
        &misses[..misses.len().min(5)]
    );
}
