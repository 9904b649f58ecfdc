//! Unit tests per stage, on a real embedded store and a real index fed by
//! the offline pipeline (decide → evolve → store → index docs).

use std::sync::Arc;

use chronicle_engine::search::{MEMORY_RECIPE, Scope, SearchFilters};
use chronicle_engine::testing::{TrigramEmbedder, message, offline_decider};
use chronicle_engine::{Accepted, GroupState, apply_batch};
use chronicle_index::{Checkpoint, IndexDoc, SearchIndex};
use chronicle_model::{GroupId, LogPosition, Timestamp};
use chronicle_store::{EmbeddedStore, GraphStore};
use tempfile::TempDir;
use uuid::Uuid;

use crate::{Query, QueryError, SearchRequest, Sources};

struct Fixture {
    _dir: TempDir,
    sources: Sources,
}

fn group(name: &str) -> GroupId {
    GroupId::new(name).expect("valid group")
}

fn at(s: &str) -> Timestamp {
    s.parse().expect("valid timestamp")
}

/// Projects `items` (in order, one log record each) into a fresh store and
/// index, the way the projector does.
async fn project(items: Vec<Accepted>) -> Fixture {
    let dir = TempDir::new().expect("tempdir");
    let store = EmbeddedStore::open(dir.path().join("graph.redb")).expect("store");
    let index = SearchIndex::open(&dir.path().join("index"), 64).expect("index");
    let decider = offline_decider();
    let mut states: Vec<GroupState> = Vec::new();
    let mut records = Vec::new();
    for (offset, item) in items.iter().enumerate() {
        let g = item.command.group_id().clone();
        let state = match states.iter().position(|s| s.group_id() == Some(&g)) {
            Some(i) => &mut states[i],
            None => {
                states.push(GroupState::new(g));
                states.last_mut().expect("just pushed")
            }
        };
        let batch = decider.decide(state, item).await.expect("decides");
        apply_batch(state, &batch);
        let position = LogPosition {
            partition: 0,
            offset: offset as u64,
        };
        records.push((position, batch));
    }
    store.apply(&records).await.expect("applies");
    let mut docs = Vec::new();
    for g in store.groups().await.expect("groups") {
        for e in store.episodes_by_time(&g, None, usize::MAX).await.unwrap() {
            docs.extend(IndexDoc::of_episode(&g, &e));
        }
        for e in store.entities(&g).await.unwrap() {
            docs.push(IndexDoc::entity(&g, &e));
        }
        for f in store.facts(&g).await.unwrap() {
            docs.push(IndexDoc::fact(&g, &f));
        }
        for c in store.communities(&g).await.unwrap() {
            docs.push(IndexDoc::community(&g, &c));
        }
    }
    index.upsert(docs).expect("indexes");
    index.commit(&Checkpoint::new()).expect("commits");
    Fixture {
        _dir: dir,
        sources: Sources {
            store: Arc::new(store),
            index: Arc::new(index),
            embedder: Arc::new(TrigramEmbedder),
            reranker: None,
        },
    }
}

/// One conversation session: every turn shares the session's reference
/// time, as LoCoMo sessions do.
fn session(g: &GroupId, first: u128, turns: &[&str], when: &str) -> Vec<Accepted> {
    turns
        .iter()
        .enumerate()
        .map(|(i, t)| message(g, first + i as u128, t, when))
        .collect()
}

fn alice_story() -> Vec<Accepted> {
    let a = group("tenant-a");
    let mut items = session(
        &a,
        1,
        &[
            "Alice: Hi Bob, how was your week?",
            "Bob: Busy, I painted the kitchen.",
            "Alice: I live in Beijing.",
            "Bob: That sounds great.",
            "Alice: I work at ByteDance.",
        ],
        "2025-01-10T09:00:00Z",
    );
    items.extend(session(
        &a,
        10,
        &["Alice: I moved to Shanghai.", "Bob: Congratulations!"],
        "2025-03-01T09:00:00Z",
    ));
    items
}

fn memory(query: &str, limit: usize) -> SearchRequest {
    SearchRequest::recipe(query, MEMORY_RECIPE, limit).expect("known recipe")
}

fn now() -> Timestamp {
    at("2025-06-01T00:00:00Z")
}

#[tokio::test]
async fn the_memory_list_counts_each_turn_once_against_the_limit() {
    let f = project(alice_story()).await;
    let q = Query::at(&f.sources, now());
    for limit in [1, 2, 3, 5] {
        let results = q
            .search(&group("tenant-a"), &memory("Alice Beijing Shanghai", limit))
            .await
            .unwrap()
            .results;
        assert!(!results.is_empty());
        assert!(results.len() <= limit, "{} > {limit}", results.len());
        assert!(results.iter().all(|r| r.kind == Scope::Episode));
        let mut ids: Vec<Uuid> = results.iter().map(|r| r.uuid).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), results.len(), "a turn appears twice");
    }
}

#[tokio::test]
async fn the_turn_that_said_it_comes_first_with_its_facts() {
    let f = project(alice_story()).await;
    let g = group("tenant-a");
    let results = Query::at(&f.sources, now())
        .search(&g, &memory("Who works at ByteDance?", 3))
        .await
        .unwrap()
        .results;
    let top = &results[0];
    assert_eq!(top.uuid, Uuid::from_u128(5));
    assert!(top.content.as_deref().unwrap().contains("ByteDance"));
    assert!(
        top.facts.iter().any(|s| s.fact.contains("ByteDance")),
        "{:?}",
        top.facts
    );
    // Every supporting fact was asserted by the turn it travels with.
    for r in &results {
        for s in &r.facts {
            let fact = f.sources.store.fact(&g, s.uuid).await.unwrap().unwrap();
            assert!(fact.episodes.contains(&r.uuid));
        }
    }
}

/// A question, the turn that answers it, and a reply.
fn sunday_session() -> Vec<Accepted> {
    session(
        &group("tenant-a"),
        20,
        &[
            "Bob: What did you do on Sunday?",
            "Alice: Went hiking with my sister.",
            "Bob: Sounds lovely, I envy you.",
            "Alice: It was, thanks.",
        ],
        "2025-05-04T09:00:00Z",
    )
}

#[tokio::test]
async fn a_reply_is_found_through_the_turn_it_answers() {
    let f = project(sunday_session()).await;
    let results = Query::at(&f.sources, now())
        .search(
            &group("tenant-a"),
            &memory("What did Alice do on Sunday", 2),
        )
        .await
        .unwrap()
        .results;
    // "Went hiking" has none of the question's words; its preceding turn does.
    let ids: Vec<Uuid> = results.iter().map(|r| r.uuid).collect();
    assert!(ids.contains(&Uuid::from_u128(21)), "{ids:?}");
    // The key is what is searched, not what is shown.
    let answer = results.iter().find(|r| r.uuid == Uuid::from_u128(21));
    assert_eq!(
        answer.and_then(|r| r.content.as_deref()),
        Some("Alice: Went hiking with my sister.")
    );
}

#[tokio::test]
async fn a_result_spans_its_neighbouring_turns_in_order() {
    let f = project(alice_story()).await;
    let g = group("tenant-a");
    let results = Query::at(&f.sources, now())
        .search(&g, &memory("Beijing", 1))
        .await
        .unwrap()
        .results;
    assert_eq!(results[0].uuid, Uuid::from_u128(3));
    let spanned: Vec<Uuid> = results[0].context.iter().map(|t| t.uuid).collect();
    assert_eq!(spanned, [2, 3, 4].map(Uuid::from_u128));
    // The first turn of a session has no turn before it in the session.
    let around = Query::at(&f.sources, now())
        .turns_around(
            &g,
            &f.sources
                .store
                .episode(&g, Uuid::from_u128(10))
                .await
                .unwrap()
                .unwrap(),
            1,
        )
        .await
        .unwrap();
    let spanned: Vec<Uuid> = around.iter().map(|t| t.uuid).collect();
    assert_eq!(spanned[1..], [10, 11].map(Uuid::from_u128));
}

#[tokio::test]
async fn turns_after_a_hit_join_its_context_when_each_message_has_its_own_time() {
    let g = group("tenant-a");
    let turns = [
        "Alice: Morning!",
        "Bob: Did you find a flat?",
        "Alice: Yes, a flat in Lisbon.",
        "Bob: Lovely.",
        "Alice: Moving next week.",
    ];
    let items = (turns.iter().enumerate())
        .map(|(i, t)| message(&g, 30 + i as u128, t, &format!("2025-06-01T09:0{i}:00Z")))
        .collect();
    let f = project(items).await;
    let results = Query::at(&f.sources, now())
        .search(&g, &memory("flat in Lisbon", 1))
        .await
        .unwrap()
        .results;
    assert_eq!(results[0].uuid, Uuid::from_u128(32));
    let spanned: Vec<Uuid> = results[0].context.iter().map(|t| t.uuid).collect();
    assert_eq!(spanned, [31, 32, 33].map(Uuid::from_u128));
}

#[tokio::test]
async fn a_named_period_lifts_the_turns_inside_it_and_a_bare_month_any_year() {
    let a = group("tenant-a");
    let mut items = session(
        &a,
        1,
        &["Alice: I went hiking today."],
        "2023-05-10T09:00:00Z",
    );
    items.extend(session(
        &a,
        2,
        &["Bob: Nice weather this week."],
        "2023-06-10T09:00:00Z",
    ));
    items.extend(session(
        &a,
        3,
        &["Alice: I went hiking again today."],
        "2023-08-10T09:00:00Z",
    ));
    let f = project(items).await;
    let q = Query::at(&f.sources, at("2024-01-01T00:00:00Z"));
    for (query, expected) in [
        ("hiking in May 2023", 1u128),
        ("hiking in August 2023", 3u128),
    ] {
        let results = q.search(&a, &memory(query, 2)).await.unwrap().results;
        assert_eq!(results[0].uuid, Uuid::from_u128(expected), "{query}");
    }
    // A month without its year is that month of any year: asked years
    // later, when the most recent May (2026) holds nothing.
    let later = Query::at(&f.sources, at("2026-12-01T00:00:00Z"));
    for (query, expected) in [("hiking in May", 1u128), ("hiking in August", 3u128)] {
        let results = later.search(&a, &memory(query, 2)).await.unwrap().results;
        assert_eq!(results[0].uuid, Uuid::from_u128(expected), "{query}");
    }
}

#[tokio::test]
async fn a_when_question_lifts_the_turn_that_says_when() {
    let a = group("tenant-a");
    let mut items = session(
        &a,
        1,
        &["Alice: Hiking, hiking boots, I could talk about hiking all day."],
        "2023-05-10T09:00:00Z",
    );
    items.extend(session(
        &a,
        2,
        &["Alice: We went hiking yesterday."],
        "2023-06-10T09:00:00Z",
    ));
    let f = project(items).await;
    let q = Query::at(&f.sources, at("2024-01-01T00:00:00Z"));
    let first = |query: &'static str| {
        let q = &q;
        let a = &a;
        async move { q.search(a, &memory(query, 2)).await.unwrap().results[0].uuid }
    };
    assert_eq!(first("what about hiking boots").await, Uuid::from_u128(1));
    assert_eq!(first("when did Alice go hiking").await, Uuid::from_u128(2));
}

#[tokio::test]
async fn the_context_block_keeps_its_budget_and_lists_each_fact_once() {
    let f = project(alice_story()).await;
    let g = group("tenant-a");
    let q = Query::at(&f.sources, now());
    let full = q.context(&g, "Alice ByteDance", 4_000, None).await.unwrap();
    assert!(full.context.starts_with("Facts (valid from – until):\n"));
    assert!(full.context.contains("What was said:\n"));
    assert!(full.context.contains("I work at ByteDance."));
    let mut ids: Vec<Uuid> = full.facts.iter().map(|s| s.uuid).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), full.facts.len());
    let mut turns: Vec<Uuid> = full.turns.iter().map(|t| t.uuid).collect();
    turns.sort();
    turns.dedup();
    assert_eq!(turns.len(), full.turns.len(), "a turn is pasted twice");

    for budget in [0, 80, 200, 400] {
        let small = q
            .context(&g, "Alice ByteDance", budget, None)
            .await
            .unwrap();
        assert!(
            small.context.len() <= budget,
            "{} > {budget}",
            small.context.len()
        );
    }
}

#[tokio::test]
async fn listings_keep_history_out_unless_asked_and_truncate_in_time_order() {
    let f = project(alice_story()).await;
    let g = group("tenant-a");
    let q = Query::at(&f.sources, now());
    let current = q
        .facts(&g, Some("Alice"), &SearchFilters::default())
        .await
        .unwrap();
    let sentences: Vec<&str> = current.iter().filter_map(|r| r.fact.as_deref()).collect();
    assert!(
        sentences.iter().any(|s| s.contains("Shanghai")),
        "{sentences:?}"
    );
    assert!(
        !sentences.iter().any(|s| s.contains("Beijing")),
        "{sentences:?}"
    );

    let (alice, timeline) = q.timeline(&g, "alice").await.unwrap();
    assert_eq!(alice.name, "Alice");
    let beijing = timeline
        .iter()
        .find(|r| r.fact.as_deref().is_some_and(|s| s.contains("Beijing")))
        .expect("history kept");
    assert!(beijing.invalid_at.is_some() || beijing.expired_at.is_some());
    let starts: Vec<_> = timeline.iter().map(|r| r.valid_at).collect();
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted);

    let history = SearchFilters {
        include_history: true,
        ..Default::default()
    };
    let (first, more) = q
        .facts_limited(&g, Some(alice.uuid), &history, 1)
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    assert!(more);
    assert_eq!(first[0].uuid, timeline[0].uuid);
    let (all, more) = q
        .facts_limited(&g, Some(alice.uuid), &history, timeline.len())
        .await
        .unwrap();
    assert_eq!(all.len(), timeline.len());
    assert!(!more);

    // As of a day before the move, Beijing was true.
    let before_move = SearchFilters {
        as_of: Some(at("2025-02-01T00:00:00Z")),
        ..Default::default()
    };
    let then = q.facts(&g, Some("Alice"), &before_move).await.unwrap();
    assert!(
        then.iter()
            .any(|r| r.fact.as_deref().is_some_and(|s| s.contains("Beijing")))
    );
}

#[tokio::test]
async fn scoped_recipes_return_only_their_scope() {
    let f = project(alice_story()).await;
    let g = group("tenant-a");
    let q = Query::at(&f.sources, now());
    for (recipe, kind) in [
        ("EDGE_HYBRID_SEARCH_RRF", Scope::Fact),
        ("NODE_HYBRID_SEARCH_RRF", Scope::Entity),
        ("EPISODE_HYBRID_SEARCH_RRF", Scope::Episode),
    ] {
        let request = SearchRequest::recipe("Alice ByteDance", recipe, 3).unwrap();
        let results = q.search(&g, &request).await.unwrap().results;
        assert!(!results.is_empty(), "{recipe}");
        assert!(results.len() <= 3);
        assert!(results.iter().all(|r| r.kind == kind), "{recipe}");
    }
    let err = SearchRequest::recipe("x", "NO_SUCH_RECIPE", 3).unwrap_err();
    assert!(err.is_client_error());
}

#[tokio::test]
async fn what_episodes_produced_skips_unknown_ones() {
    let f = project(alice_story()).await;
    let g = group("tenant-a");
    let q = Query::at(&f.sources, now());
    let products = q
        .produced_by(&g, &[Uuid::from_u128(5), Uuid::from_u128(999)])
        .await
        .unwrap();
    assert_eq!(products.episodes, [Uuid::from_u128(5)]);
    assert!(products.entities.iter().any(|e| e.name == "ByteDance"));
    assert!(
        products
            .facts
            .iter()
            .all(|r| r.episodes.iter().any(|p| p.uuid == Uuid::from_u128(5)))
    );
    let saga = q
        .saga(&g, "story")
        .await
        .unwrap()
        .expect("saga of the story");
    assert_eq!(saga.episodes.len(), 7);
    assert!(q.saga(&g, "other").await.unwrap().is_none());
}

#[tokio::test]
async fn a_tenant_sees_nothing_of_another() {
    let mut items = alice_story();
    let b = group("tenant-b");
    items.extend(session(
        &b,
        100,
        &["Carol: I live in Oslo."],
        "2025-01-10T09:00:00Z",
    ));
    let f = project(items).await;
    let q = Query::at(&f.sources, now());
    let results = q
        .search(&b, &memory("Alice Beijing ByteDance", 10))
        .await
        .unwrap()
        .results;
    assert!(results.iter().all(|r| r.uuid == Uuid::from_u128(100)));
    for recipe in ["COMBINED_HYBRID_SEARCH_RRF", "EPISODE_HYBRID_SEARCH_RRF"] {
        let request = SearchRequest::recipe("Alice Beijing", recipe, 10).unwrap();
        for r in q.search(&b, &request).await.unwrap().results {
            assert!(!r.name.contains("Alice") && r.fact.is_none_or(|s| !s.contains("Alice")));
        }
    }
    assert!(matches!(
        q.entity_named(&b, "Alice").await,
        Err(QueryError::UnknownEntity(_))
    ));
    let products = q.produced_by(&b, &[Uuid::from_u128(5)]).await.unwrap();
    assert!(products.episodes.is_empty() && products.facts.is_empty());
    assert!(
        q.context(&b, "Alice", 4_000, None)
            .await
            .unwrap()
            .context
            .lines()
            .all(|l| !l.contains("Alice"))
    );
}
