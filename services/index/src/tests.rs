//! Behaviour of [`SearchIndex`] as the projector and search use it.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chronicle_model::GroupId;
use proptest::prelude::*;
use uuid::Uuid;

use crate::bench::{exact_top, random_unit_vectors};
use crate::{Checkpoint, DocKind, Hit, IndexDoc, IndexError, IndexOptions, SearchIndex};

const DIM: usize = 4;

fn group(id: &str) -> GroupId {
    GroupId::new(id).expect("valid test group")
}

fn id(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn doc(kind: DocKind, n: u128, g: &str, text: &str, vector: Option<[f32; DIM]>) -> IndexDoc {
    IndexDoc {
        kind,
        uuid: id(n),
        group_id: group(g),
        text: text.to_owned(),
        vector: vector.map(|v| v.to_vec()),
    }
}

fn fact(n: u128, g: &str, text: &str) -> IndexDoc {
    doc(DocKind::Fact, n, g, text, None)
}

fn open(dir: &Path) -> SearchIndex {
    SearchIndex::open(dir, DIM).expect("open index")
}

fn cp(offset: u64) -> Checkpoint {
    Checkpoint::from([(0, offset), (1, offset * 2)])
}

fn ids(hits: &[Hit]) -> Vec<Uuid> {
    hits.iter().map(|h| h.uuid).collect()
}

fn text(index: &SearchIndex, g: &str, query: &str) -> Vec<Uuid> {
    ids(&index
        .text_search(&group(g), &[], query, 10)
        .expect("text search"))
}

/// `count` documents of `kind` in `g` with random unit vectors, uuids 0..count.
fn unit_docs(
    count: usize,
    dimension: usize,
    seed: u64,
    kind: DocKind,
    g: &GroupId,
) -> Vec<IndexDoc> {
    random_unit_vectors(count, dimension, seed)
        .into_iter()
        .enumerate()
        .map(|(i, v)| IndexDoc {
            kind,
            uuid: id(i as u128),
            group_id: g.clone(),
            text: String::new(),
            vector: Some(v),
        })
        .collect()
}

fn near(index: &SearchIndex, g: &str, v: [f32; DIM]) -> Vec<Hit> {
    index
        .vector_search(&group(g), &[], &v, 10)
        .expect("vector search")
}

#[test]
fn search_index_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SearchIndex>();
}

#[test]
fn bm25_ranks_relevant_documents_first_with_stemming() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .upsert(vec![
            fact(1, "g", "Alice works at Acme as a software engineer"),
            fact(2, "g", "Bob enjoys hiking in the mountains"),
            fact(3, "g", "Acme sells anvils to coyotes"),
            fact(
                4,
                "g",
                "Carol worked with engineers on the Acme anvil rollout at Acme",
            ),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    let hits = index
        .text_search(
            &group("g"),
            &[DocKind::Fact],
            "engineer working at acme",
            10,
        )
        .unwrap();
    // Stemming matches "works"/"worked" and "engineers"; docs with more of
    // the query's rarer terms rank first, the unrelated doc not at all.
    assert_eq!(hits.len(), 3, "{hits:?}");
    assert!(!ids(&hits).contains(&id(2)));
    assert_eq!(ids(&hits[2..]), [id(3)], "the acme-only doc ranks last");
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    assert!(
        hits.iter()
            .all(|h| h.kind == DocKind::Fact && h.score > 0.0)
    );
    assert_eq!(text(&index, "g", "hike"), [id(2)]);
}

#[test]
fn function_words_do_not_outweigh_the_word_that_matters() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .upsert(vec![
            fact(
                1,
                "g",
                "Melanie: Wow, that's cool, Caroline! What happened? Did you hear anything?",
            ),
            fact(
                2,
                "g",
                "Caroline: Researching adoption agencies, a dream of mine.",
            ),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    // Without stop words the first turn matches "what", "did" and
    // "caroline" and outranks the only turn with the question's one content
    // word.
    assert_eq!(text(&index, "g", "What did Caroline research?")[0], id(2));
    assert!(text(&index, "g", "what did you do there").is_empty());
}

#[test]
fn text_search_never_sees_another_group() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut docs = Vec::new();
    for (i, g) in ["t1", "t10", "t", "t1.0", "T1"].iter().enumerate() {
        docs.push(fact(i as u128, g, "shared words about quarterly revenue"));
    }
    index.upsert(docs).unwrap();
    index.commit(&cp(1)).unwrap();
    for (i, g) in ["t1", "t10", "t", "t1.0", "T1"].iter().enumerate() {
        assert_eq!(
            text(&index, g, "quarterly revenue"),
            [id(i as u128)],
            "group {g}"
        );
    }
    assert!(text(&index, "t2", "quarterly revenue").is_empty());
    // Query text naming groups or scopes is just words.
    assert_eq!(text(&index, "t1", "t10 0:t10 scope:0:t10 revenue"), [id(0)]);
}

#[test]
fn vector_search_never_sees_another_group() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let v = [1.0, 0.0, 0.0, 0.0];
    index
        .upsert(vec![
            doc(DocKind::Fact, 1, "t1", "", Some(v)),
            doc(DocKind::Fact, 2, "t10", "", Some(v)),
            doc(DocKind::Entity, 3, "t10", "", Some(v)),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    assert_eq!(ids(&near(&index, "t1", v)), [id(1)]);
    assert_eq!(ids(&near(&index, "t10", v)).len(), 2);
    assert!(!ids(&near(&index, "t10", v)).contains(&id(1)));
    assert!(near(&index, "t", v).is_empty());
}

#[test]
fn kinds_filter_both_channels_and_empty_means_all() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let v = [0.0, 1.0, 0.0, 0.0];
    index
        .upsert(vec![
            doc(DocKind::Fact, 1, "g", "paris is lovely", Some(v)),
            doc(DocKind::Entity, 2, "g", "paris", Some(v)),
            doc(DocKind::Episode, 3, "g", "we went to paris", None),
            doc(DocKind::Community, 4, "g", "paris travellers", Some(v)),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    let g = group("g");
    let entity = index
        .text_search(&g, &[DocKind::Entity], "paris", 10)
        .unwrap();
    assert_eq!(
        entity.iter().map(|h| (h.kind, h.uuid)).collect::<Vec<_>>(),
        [(DocKind::Entity, id(2))]
    );
    let two = index
        .text_search(&g, &[DocKind::Episode, DocKind::Community], "paris", 10)
        .unwrap();
    assert_eq!(
        ids(&two).into_iter().collect::<HashSet<_>>(),
        HashSet::from([id(3), id(4)])
    );
    assert_eq!(text(&index, "g", "paris").len(), 4);
    let facts = index.vector_search(&g, &[DocKind::Fact], &v, 10).unwrap();
    assert_eq!(ids(&facts), [id(1)]);
    assert_eq!(near(&index, "g", v).len(), 3, "episodes have no vector");
    assert!(
        (facts[0].score - 1.0).abs() < 1e-5,
        "cosine of identical directions"
    );
}

#[test]
fn changes_are_invisible_until_commit() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .upsert(vec![doc(
            DocKind::Fact,
            1,
            "g",
            "pending words",
            Some([1.0, 0.0, 0.0, 0.0]),
        )])
        .unwrap();
    assert!(text(&index, "g", "pending").is_empty());
    assert!(near(&index, "g", [1.0, 0.0, 0.0, 0.0]).is_empty());
    index.commit(&cp(1)).unwrap();
    assert_eq!(text(&index, "g", "pending"), [id(1)]);
    assert_eq!(ids(&near(&index, "g", [1.0, 0.0, 0.0, 0.0])), [id(1)]);
}

#[test]
fn upsert_replaces_text_and_vector() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .upsert(vec![
            doc(
                DocKind::Fact,
                1,
                "g",
                "alice lives in berlin",
                Some([1.0, 0.0, 0.0, 0.0]),
            ),
            doc(
                DocKind::Fact,
                2,
                "g",
                "bob lives in rome",
                Some([0.0, 1.0, 0.0, 0.0]),
            ),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    // Same (kind, uuid): replaced. Same uuid, other kind: a separate doc.
    index
        .upsert(vec![
            doc(
                DocKind::Fact,
                1,
                "g",
                "alice lives in lisbon",
                Some([0.0, 0.0, 1.0, 0.0]),
            ),
            doc(DocKind::Entity, 1, "g", "alice", None),
        ])
        .unwrap();
    index.commit(&cp(2)).unwrap();
    assert!(text(&index, "g", "berlin").is_empty());
    assert_eq!(text(&index, "g", "lisbon"), [id(1)]);
    assert_eq!(index.stats().documents[&DocKind::Fact], 2);
    assert_eq!(index.stats().documents[&DocKind::Entity], 1);
    // The stale vector is gone: the old direction finds doc 1 only at its
    // new cosine (0), below doc 2's... also 0; the new direction finds it at 1.
    let old = near(&index, "g", [1.0, 0.0, 0.0, 0.0]);
    assert_eq!(old.len(), 2);
    assert!(old.iter().all(|h| h.score.abs() < 1e-6), "{old:?}");
    let new = near(&index, "g", [0.0, 0.0, 1.0, 0.0]);
    assert_eq!(
        (new[0].uuid, (new[0].score - 1.0).abs() < 1e-6),
        (id(1), true)
    );
    // Upserting without a vector drops the vector.
    index
        .upsert(vec![fact(1, "g", "alice lives in lisbon")])
        .unwrap();
    index.commit(&cp(3)).unwrap();
    assert_eq!(ids(&near(&index, "g", [0.0, 0.0, 1.0, 0.0])), [id(2)]);
    assert_eq!(index.stats().vectors, 1);
}

#[test]
fn the_same_uuid_in_two_groups_is_two_documents() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let v = [1.0, 1.0, 0.0, 0.0];
    index
        .upsert(vec![
            doc(DocKind::Entity, 1, "a", "x", Some(v)),
            doc(DocKind::Entity, 1, "b", "x", Some(v)),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    index.delete(&group("a"), DocKind::Entity, id(1)).unwrap();
    index.commit(&cp(2)).unwrap();
    assert!(near(&index, "a", v).is_empty());
    assert!(text(&index, "a", "x").is_empty());
    assert_eq!(ids(&near(&index, "b", v)), [id(1)]);
    assert_eq!(text(&index, "b", "x"), [id(1)]);
    drop(index);
    let index = open(dir.path());
    assert_eq!(ids(&near(&index, "b", v)), [id(1)]);
    assert!(near(&index, "a", v).is_empty());
}

#[test]
fn delete_removes_text_and_vector() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let v = [1.0, 0.0, 0.0, 1.0];
    index
        .upsert(vec![
            doc(DocKind::Fact, 1, "g", "doomed fact", Some(v)),
            doc(DocKind::Fact, 2, "g", "surviving fact", Some(v)),
        ])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    index.delete(&group("g"), DocKind::Fact, id(1)).unwrap();
    index.delete(&group("g"), DocKind::Entity, id(2)).unwrap(); // other kind: no effect
    index.delete(&group("g"), DocKind::Fact, id(99)).unwrap(); // absent: no effect
    index.commit(&cp(2)).unwrap();
    assert_eq!(text(&index, "g", "fact"), [id(2)]);
    assert_eq!(ids(&near(&index, "g", v)), [id(2)]);
    let stats = index.stats();
    assert_eq!((stats.documents[&DocKind::Fact], stats.vectors), (1, 1));
}

#[test]
fn reopen_restores_documents_vectors_and_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let v = [0.5, 0.5, 0.5, 0.5];
    {
        let index = open(dir.path());
        assert!(index.checkpoint().is_empty());
        index
            .upsert(vec![
                doc(DocKind::Fact, 1, "g", "kept fact", Some(v)),
                doc(DocKind::Community, 2, "h", "kept community", Some(v)),
                doc(DocKind::Episode, 3, "g", "kept episode", None),
            ])
            .unwrap();
        index.commit(&cp(7)).unwrap();
        index.delete(&group("g"), DocKind::Episode, id(3)).unwrap();
        index.commit(&cp(8)).unwrap();
    }
    let index = open(dir.path());
    assert_eq!(index.checkpoint(), cp(8));
    assert_eq!(text(&index, "g", "kept"), [id(1)]);
    assert_eq!(ids(&near(&index, "g", v)), [id(1)]);
    assert_eq!(ids(&near(&index, "h", v)), [id(2)]);
    let stats = index.stats();
    assert_eq!(stats.vectors, 2);
    assert_eq!(stats.documents.values().sum::<u64>(), 2);
    assert!(stats.disk_bytes > 0);
}

#[test]
fn a_commit_without_changes_still_records_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    {
        let index = open(dir.path());
        index.commit(&cp(3)).unwrap();
        index.commit(&cp(3)).unwrap();
        assert_eq!(index.checkpoint(), cp(3));
    }
    assert_eq!(open(dir.path()).checkpoint(), cp(3));
}

#[test]
fn crash_before_commit_reopens_at_the_previous_commit() {
    let dir = tempfile::tempdir().unwrap();
    let (v1, v2) = ([1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]);
    {
        let index = open(dir.path());
        index
            .upsert(vec![doc(DocKind::Fact, 1, "g", "committed text", Some(v1))])
            .unwrap();
        index.commit(&cp(5)).unwrap();
        // Not committed: a replacement, a new doc, a delete, then a "crash".
        index
            .upsert(vec![
                doc(DocKind::Fact, 1, "g", "replacement text", Some(v2)),
                doc(DocKind::Fact, 2, "g", "uncommitted text", Some(v2)),
            ])
            .unwrap();
        index.delete(&group("g"), DocKind::Fact, id(1)).unwrap();
        drop(index);
    }
    let index = open(dir.path());
    assert_eq!(index.checkpoint(), cp(5));
    assert_eq!(text(&index, "g", "text"), [id(1)]);
    assert!(text(&index, "g", "replacement uncommitted").is_empty());
    let hits = near(&index, "g", v1);
    assert_eq!(ids(&hits), [id(1)]);
    assert!(
        (hits[0].score - 1.0).abs() < 1e-6,
        "the committed vector, not the replacement"
    );
    assert_eq!(index.stats().vectors, 1);
}

#[test]
fn clear_then_replay_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let v = [0.0, 0.0, 0.0, 1.0];
    {
        let index = open(dir.path());
        index
            .upsert(vec![doc(DocKind::Fact, 1, "g", "old world", Some(v))])
            .unwrap();
        index.commit(&cp(9)).unwrap();
        // A clear that is never committed changes nothing durable.
        index.clear().unwrap();
    }
    let index = open(dir.path());
    assert_eq!(text(&index, "g", "old"), [id(1)]);
    index
        .upsert(vec![fact(5, "g", "pending before clear")])
        .unwrap();
    index.clear().unwrap();
    // Searches still see the last commit until the rebuild commits.
    assert_eq!(text(&index, "g", "old"), [id(1)]);
    index
        .upsert(vec![
            doc(DocKind::Fact, 2, "g", "new world", Some(v)),
            doc(DocKind::Fact, 1, "g", "replayed world", None),
        ])
        .unwrap();
    index.commit(&cp(2)).unwrap();
    assert!(text(&index, "g", "old").is_empty());
    assert!(text(&index, "g", "pending").is_empty());
    assert_eq!(text(&index, "g", "new"), [id(2)]);
    assert_eq!(ids(&near(&index, "g", v)), [id(2)]);
    drop(index);
    let index = open(dir.path());
    assert_eq!(index.checkpoint(), cp(2));
    assert_eq!(text(&index, "g", "world").len(), 2);
    assert_eq!(ids(&near(&index, "g", v)), [id(2)]);
}

#[test]
fn dimension_is_fixed_per_directory() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    match SearchIndex::open(dir.path(), DIM + 1) {
        Err(IndexError::DimensionMismatch {
            on_disk, requested, ..
        }) => {
            assert_eq!((on_disk, requested), (DIM, DIM + 1));
        }
        other => panic!("expected a dimension mismatch, got {:?}", other.err()),
    }
    assert!(matches!(
        SearchIndex::open(dir.path(), 0),
        Err(IndexError::ZeroDimension)
    ));
    open(dir.path());
}

#[test]
fn an_index_of_an_older_format_is_cleared_and_a_newer_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index.upsert(vec![fact(1, "g", "hello world")]).unwrap();
    index.commit(&cp(3)).unwrap();
    drop(index);
    let meta = dir.path().join("chronicle-index.json");
    let with_format = |format: u32| {
        std::fs::write(&meta, format!(r#"{{"format":{format},"dimension":{DIM}}}"#)).unwrap();
    };
    with_format(2);
    // Cleared: no documents and no checkpoint, so the projector re-fills
    // it from the store.
    let index = open(dir.path());
    assert_eq!(index.checkpoint(), Checkpoint::new());
    assert!(text(&index, "g", "hello").is_empty());
    index.upsert(vec![fact(1, "g", "hello world")]).unwrap();
    index.commit(&cp(3)).unwrap();
    drop(index);
    assert_eq!(text(&open(dir.path()), "g", "hello"), [id(1)]);
    with_format(99);
    assert!(matches!(
        SearchIndex::open(dir.path(), DIM),
        Err(IndexError::UnsupportedFormat { found: 99, .. })
    ));
}

#[test]
fn invalid_vectors_reject_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let mut short = fact(2, "g", "short");
    short.vector = Some(vec![1.0; DIM - 1]);
    let err = index.upsert(vec![fact(1, "g", "fine"), short]).unwrap_err();
    assert!(
        matches!(err, IndexError::VectorDimension { actual: 3, .. }),
        "{err}"
    );
    let zero = doc(DocKind::Fact, 3, "g", "zero", Some([0.0; DIM]));
    assert!(matches!(
        index.upsert(vec![zero]),
        Err(IndexError::InvalidVector { .. })
    ));
    let nan = doc(
        DocKind::Fact,
        4,
        "g",
        "nan",
        Some([f32::NAN, 1.0, 0.0, 0.0]),
    );
    assert!(matches!(
        index.upsert(vec![nan]),
        Err(IndexError::InvalidVector { .. })
    ));
    index.commit(&cp(1)).unwrap();
    assert!(text(&index, "g", "fine short zero nan").is_empty());
    let g = group("g");
    assert!(matches!(
        index.vector_search(&g, &[], &[1.0; DIM + 1], 5),
        Err(IndexError::QueryDimension {
            expected: DIM,
            actual: 5
        })
    ));
    assert!(matches!(
        index.vector_search(&g, &[], &[0.0; DIM], 5),
        Err(IndexError::InvalidQueryVector)
    ));
}

#[test]
fn hostile_or_empty_queries_are_plain_text() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    index
        .upsert(vec![fact(1, "g", "title: the AND gate (digital logic)")])
        .unwrap();
    index.commit(&cp(1)).unwrap();
    for query in ["", "   ", "!!! ??? ---", "()", "\"", "*", "~", "\\"] {
        assert!(text(&index, "g", query).is_empty(), "{query:?}");
    }
    for query in [
        "title:gate",
        "GATE",
        "gate AND",
        "\"digital logic",
        "(logic",
        "gate^3",
        "[a TO logic]",
        "logic~2",
        "+gate -logic",
        "text:gate",
    ] {
        assert_eq!(text(&index, "g", query), [id(1)], "{query:?}");
    }
    assert!(
        index
            .text_search(&group("g"), &[], "gate", 0)
            .unwrap()
            .is_empty()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn random_query_strings_never_fail(query in ".{0,200}", syntax in r#"[a-z:"()\[\]{}^~*?+\-!&|\\/ ]{0,60}"#) {
        let index = shared_index();
        for q in [&query, &syntax] {
            let hits = index.text_search(&group("g"), &[], q, 10);
            prop_assert!(hits.is_ok(), "{:?}: {:?}", q, hits.err());
        }
    }
}

/// One small index for the proptest cases (opening is the slow part).
fn shared_index() -> &'static SearchIndex {
    static INDEX: std::sync::OnceLock<(tempfile::TempDir, SearchIndex)> =
        std::sync::OnceLock::new();
    &INDEX
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let index = open(dir.path());
            index
                .upsert(vec![
                    fact(1, "g", "the quick brown fox"),
                    fact(2, "g", "jumps over the lazy dog"),
                ])
                .unwrap();
            index.commit(&cp(1)).unwrap();
            (dir, index)
        })
        .1
}

#[test]
fn searches_run_while_the_writer_upserts_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let index = Arc::new(open(dir.path()));
    let done = Arc::new(AtomicBool::new(false));
    let v = [1.0, 0.0, 1.0, 0.0];
    index
        .upsert(vec![doc(
            DocKind::Fact,
            0,
            "mine",
            "steady document",
            Some(v),
        )])
        .unwrap();
    index.commit(&cp(0)).unwrap();
    let searchers: Vec<_> = (0..3)
        .map(|_| {
            let (index, done) = (Arc::clone(&index), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut rounds = 0;
                while !done.load(Ordering::Relaxed) || rounds < 10 {
                    let hits = text(&index, "mine", "steady document");
                    assert_eq!(hits.first(), Some(&id(0)), "{hits:?}");
                    assert!(
                        hits.iter().all(|u| u.as_u128() < 1_000_000),
                        "other group leaked"
                    );
                    let near = near(&index, "mine", v);
                    assert!(near.iter().all(|h| h.uuid.as_u128() < 1_000_000));
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    for batch in 0..30u128 {
        let docs = (0..20u128)
            .flat_map(|i| {
                let n = batch * 100 + i + 1;
                let w = [1.0, (n % 7) as f32, 1.0, 0.5];
                [
                    doc(DocKind::Fact, n, "mine", "another document", Some(w)),
                    doc(
                        DocKind::Fact,
                        1_000_000 + n,
                        "mine0",
                        "document elsewhere",
                        Some(w),
                    ),
                ]
            })
            .collect();
        index.upsert(docs).unwrap();
        index.commit(&cp(batch as u64 + 1)).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    for searcher in searchers {
        assert!(searcher.join().expect("searcher panicked") >= 10);
    }
    assert_eq!(index.stats().documents[&DocKind::Fact], 1 + 30 * 40);
}

/// Recall of the HNSW path against exact search, before and after reopen.
#[test]
fn hnsw_recall_at_10_against_brute_force() {
    const N: usize = 3_000;
    const DIMENSION: usize = 32;
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions {
        brute_force_below: 1_000,
        ..IndexOptions::default()
    };
    let g = group("one");
    let docs: Vec<IndexDoc> = unit_docs(N, DIMENSION, 42, DocKind::Entity, &g);
    let queries = random_unit_vectors(100, DIMENSION, 7);
    let recall = |index: &SearchIndex| {
        let mut found = 0;
        for q in &queries {
            let truth: HashSet<Uuid> = exact_top(&docs, &g, &[DocKind::Entity], q, 10)
                .into_iter()
                .collect();
            let got = index.vector_search(&g, &[DocKind::Entity], q, 10).unwrap();
            assert_eq!(got.len(), 10);
            found += got.iter().filter(|h| truth.contains(&h.uuid)).count();
        }
        found as f64 / (queries.len() * 10) as f64
    };
    {
        let index = SearchIndex::open_with(dir.path(), DIMENSION, options.clone()).unwrap();
        // Two commits: the graph is built at the first, extended at the second.
        index.upsert(docs[..N / 2].to_vec()).unwrap();
        index.commit(&cp(1)).unwrap();
        index.upsert(docs[N / 2..].to_vec()).unwrap();
        index.commit(&cp(2)).unwrap();
        index.wait_for_graphs();
        assert_eq!(index.stats().hnsw_sets, 1);
        let r = recall(&index);
        assert!(r >= 0.95, "recall@10 {r}");
    }
    let index = SearchIndex::open_with(dir.path(), DIMENSION, options).unwrap();
    // Searches are exact until the background build lands, then HNSW.
    assert!(recall(&index) >= 0.95);
    index.wait_for_graphs();
    assert_eq!(
        (index.stats().hnsw_sets, index.stats().hnsw_pending),
        (1, 0)
    );
    let r = recall(&index);
    assert!(r >= 0.95, "recall@10 after reopen {r}");
}

/// Vectors are held as int8 codes, but the answer is the exact one: the
/// same documents in the same order with their `f32` cosines, as a scan of
/// the full vectors gives.
#[test]
fn coded_vectors_answer_exactly_after_rescoring() {
    const DIMENSION: usize = 384;
    let dir = tempfile::tempdir().unwrap();
    let g = group("one");
    let docs: Vec<IndexDoc> = unit_docs(2_000, DIMENSION, 11, DocKind::Fact, &g);
    let index = SearchIndex::open(dir.path(), DIMENSION).unwrap();
    index.upsert(docs.clone()).unwrap();
    index.commit(&cp(1)).unwrap();
    // Queries near a document, where the top neighbours crowd together.
    for q in random_unit_vectors(30, DIMENSION, 5).iter().zip(&docs) {
        let query: Vec<f32> =
            q.0.iter()
                .zip(q.1.vector.as_ref().unwrap())
                .map(|(a, b)| 0.3 * a + b)
                .collect();
        let got = index
            .vector_search(&g, &[DocKind::Fact], &query, 10)
            .unwrap();
        assert_eq!(
            ids(&got),
            exact_top(&docs, &g, &[DocKind::Fact], &query, 10)
        );
        let unit = crate::vector::normalized(&query).unwrap();
        for hit in &got {
            let v = crate::vector::stored_unit(
                docs[hit.uuid.as_u128() as usize].vector.as_ref().unwrap(),
            )
            .unwrap();
            let exact: f32 = unit.iter().zip(v.iter()).map(|(a, b)| a * b).sum();
            assert!((hit.score - exact).abs() < 1e-5, "{} vs {exact}", hit.score);
        }
    }
    assert!(index.stats().vector_memory_bytes < 2_000 * (DIMENSION as u64 + 8));
}

/// Replacing vectors in an HNSW sub-index never returns a stale one, also
/// across the compaction that tombstones trigger.
#[test]
fn hnsw_sets_drop_stale_vectors() {
    const DIMENSION: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions {
        brute_force_below: 100,
        ..IndexOptions::default()
    };
    let index = SearchIndex::open_with(dir.path(), DIMENSION, options).unwrap();
    let g = group("g");
    let make = |seed: u64| -> Vec<IndexDoc> {
        random_unit_vectors(300, DIMENSION, seed)
            .into_iter()
            .enumerate()
            .map(|(i, v)| IndexDoc {
                kind: DocKind::Fact,
                uuid: id(i as u128),
                group_id: g.clone(),
                text: String::new(),
                vector: Some(v),
            })
            .collect()
    };
    for (round, seed) in [1u64, 2, 3].into_iter().enumerate() {
        let docs = make(seed);
        index.upsert(docs.clone()).unwrap();
        index.commit(&cp(round as u64 + 1)).unwrap();
        // Round 0 builds the graph, round 1 extends it with replacements,
        // round 2 compacts and rebuilds it.
        index.wait_for_graphs();
        assert_eq!(index.stats().vectors, 300);
        assert_eq!(index.stats().hnsw_sets, 1);
        for d in docs.iter().take(40) {
            let hits = index
                .vector_search(&g, &[], d.vector.as_deref().unwrap(), 3)
                .unwrap();
            assert_eq!(hits.len(), 3);
            assert_eq!(hits[0].uuid, d.uuid, "round {round}");
            assert!((hits[0].score - 1.0).abs() < 1e-3);
            let unique: HashSet<Uuid> = ids(&hits).into_iter().collect();
            assert_eq!(unique.len(), 3, "a document appears once");
        }
    }
    assert_eq!(index.stats().hnsw_sets, 1);
}

/// Dropping an index while its graphs are being built neither hangs nor
/// loses anything; the reopened index builds them again.
#[test]
fn dropping_during_a_graph_build_is_harmless() {
    const DIMENSION: usize = 16;
    let dir = tempfile::tempdir().unwrap();
    let options = IndexOptions {
        brute_force_below: 100,
        ..IndexOptions::default()
    };
    let g = group("g");
    let docs: Vec<IndexDoc> = unit_docs(2_000, DIMENSION, 11, DocKind::Fact, &g);
    {
        let index = SearchIndex::open_with(dir.path(), DIMENSION, options.clone()).unwrap();
        index.upsert(docs.clone()).unwrap();
        index.commit(&cp(1)).unwrap();
    }
    let index = SearchIndex::open_with(dir.path(), DIMENSION, options).unwrap();
    let probe = docs[123].vector.as_deref().unwrap();
    assert_eq!(
        index.vector_search(&g, &[], probe, 1).unwrap()[0].uuid,
        id(123)
    );
    index.wait_for_graphs();
    let stats = index.stats();
    assert_eq!(
        (stats.vectors, stats.hnsw_sets, stats.hnsw_pending),
        (2_000, 1, 0)
    );
    assert_eq!(
        index.vector_search(&g, &[], probe, 1).unwrap()[0].uuid,
        id(123)
    );
}

/// The final documents of [`history_matches_a_single_insert`]: ties in
/// text and in vectors, two groups, three kinds, one uuid in two kinds.
fn final_docs() -> Vec<IndexDoc> {
    const TEXTS: [&str; 6] = [
        "alice works at acme in berlin",
        "bob moved to lisbon and works remotely",
        "acme acme acme builds anvils",
        "the quarterly report mentions acme and lisbon",
        "carol hikes in the mountains near berlin every weekend with friends",
        "acme",
    ];
    let vectors = [
        [1.0, 0.0, 0.0, 0.0],
        [0.6, 0.8, 0.0, 0.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.3, 0.3, 0.3, 0.3],
    ];
    let mut docs = Vec::new();
    for n in 0..48u128 {
        let kind = if n % 3 == 0 {
            DocKind::Entity
        } else {
            DocKind::Fact
        };
        let g = if n % 4 == 3 { "h" } else { "g" };
        let vector = (n % 5 != 0).then(|| vectors[(n % 4) as usize]);
        // Uuids scattered so that uuid order is not insertion order.
        let uuid = (n * 7_919) % 97 + 1;
        docs.push(doc(kind, uuid, g, TEXTS[(n % 6) as usize], vector));
    }
    // The same uuid as another document, of another kind, same text.
    let twin = docs[1].clone();
    docs.push(IndexDoc {
        kind: DocKind::Community,
        ..twin
    });
    docs
}

fn hits_of(index: &SearchIndex) -> Vec<Vec<Hit>> {
    let mut out = Vec::new();
    for g in ["g", "h"] {
        for query in [
            "acme",
            "works at acme",
            "lisbon berlin",
            "mountains",
            "report acme anvils lisbon",
        ] {
            for limit in [1, 3, 5, 50] {
                out.push(index.text_search(&group(g), &[], query, limit).unwrap());
                out.push(
                    index
                        .text_search(&group(g), &[DocKind::Fact], query, limit)
                        .unwrap(),
                );
            }
        }
        for v in [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.2, 0.2, 0.3, 0.3],
        ] {
            for limit in [1, 3, 50] {
                out.push(index.vector_search(&group(g), &[], &v, limit).unwrap());
            }
        }
    }
    out
}

/// Bitwise view of hits, so that scores compare exactly.
fn exact(hits: &[Vec<Hit>]) -> Vec<Vec<(DocKind, Uuid, u32)>> {
    hits.iter()
        .map(|hits| {
            hits.iter()
                .map(|h| (h.kind, h.uuid, h.score.to_bits()))
                .collect()
        })
        .collect()
}

/// The promise behind rebuild by replay: the same live documents rank the
/// same (ids, order, exact scores) whatever history produced them: deleted
/// versions still in tantivy's segments, other segment layouts, other
/// insertion orders.
#[test]
fn history_matches_a_single_insert() {
    let docs = final_docs();
    let once_dir = tempfile::tempdir().unwrap();
    let once = open(once_dir.path());
    once.upsert(docs.clone()).unwrap();
    once.commit(&cp(1)).unwrap();

    let lived_dir = tempfile::tempdir().unwrap();
    let lived = open(lived_dir.path());
    let mut offset = 0;
    let mut commit = |index: &SearchIndex| {
        offset += 1;
        index.commit(&cp(offset)).unwrap();
    };
    let version = |d: &IndexDoc, text: String, vector: Option<Vec<f32>>| IndexDoc {
        text,
        vector,
        ..d.clone()
    };
    // Earlier versions of everything: other texts (longer, sharing the query
    // words) and vectors, in reverse order, a commit every few documents.
    for (i, d) in docs.iter().rev().enumerate() {
        let text = format!("{} acme lisbon draft {i} with many more words", d.text);
        lived
            .upsert(vec![version(d, text, Some(vec![0.1, 0.2, 0.3, i as f32]))])
            .unwrap();
        if i % 7 == 0 {
            commit(&lived);
        }
    }
    commit(&lived);
    // Even documents reach their final version early and mostly stay: their
    // segment keeps live documents next to the deleted ones below.
    let (even, odd): (Vec<_>, Vec<_>) = docs
        .iter()
        .cloned()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    let even: Vec<IndexDoc> = even.into_iter().map(|(_, d)| d).collect();
    let odd: Vec<IndexDoc> = odd.into_iter().map(|(_, d)| d).collect();
    lived.upsert(even.clone()).unwrap();
    commit(&lived);
    // Documents that end up deleted, next to live ones in their segment.
    let doomed: Vec<IndexDoc> = (0..20u128)
        .map(|n| {
            doc(
                DocKind::Fact,
                500 + n,
                "g",
                "acme berlin acme lisbon",
                Some([1.0; DIM]),
            )
        })
        .collect();
    lived.upsert(doomed.clone()).unwrap();
    lived.upsert(odd[..4].to_vec()).unwrap();
    commit(&lived);
    for round in 0..3 {
        let batch: Vec<IndexDoc> = odd
            .iter()
            .skip(4)
            .map(|d| version(d, format!("{} round {round} mountains acme", d.text), None))
            .collect();
        lived.upsert(batch).unwrap();
        commit(&lived);
    }
    for d in &doomed {
        lived.delete(&d.group_id, d.kind, d.uuid).unwrap();
    }
    for d in even.iter().step_by(3) {
        lived.delete(&d.group_id, d.kind, d.uuid).unwrap();
    }
    commit(&lived);
    // The rest of the final versions, in another order, over two commits.
    lived
        .upsert(odd[4..].iter().rev().cloned().collect())
        .unwrap();
    commit(&lived);
    lived
        .upsert(even.iter().step_by(3).cloned().collect())
        .unwrap();
    commit(&lived);
    assert!(
        lived.deleted_documents() > 0,
        "the history must leave deleted documents in live segments"
    );

    let expected = exact(&hits_of(&once));
    assert!(expected.iter().filter(|h| h.len() > 1).count() > 20);
    let same = |index: &SearchIndex, when: &str| {
        for (i, (got, want)) in exact(&hits_of(index)).iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "search {i} {when}");
        }
    };
    same(&lived, "after the history");
    // Reopening (vectors reloaded, segments as merged by now) changes nothing.
    drop(lived);
    same(&open(lived_dir.path()), "after reopening");
}

/// Equal scores rank by uuid, then kind, in both channels, and the cut
/// keeps the smallest uuids whatever the insertion order or segment.
#[test]
fn ties_rank_by_uuid() {
    let dir = tempfile::tempdir().unwrap();
    let index = open(dir.path());
    let v = [0.0, 0.0, 1.0, 0.0];
    for batch in [[9u128, 4, 7], [2, 8, 5], [6, 3, 1]] {
        index
            .upsert(
                batch
                    .iter()
                    .map(|n| doc(DocKind::Fact, *n, "g", "equal words", Some(v)))
                    .collect(),
            )
            .unwrap();
        index.commit(&cp(batch[0] as u64)).unwrap();
    }
    index
        .upsert(vec![doc(DocKind::Entity, 2, "g", "equal words", Some(v))])
        .unwrap();
    index.commit(&cp(20)).unwrap();
    let g = group("g");
    let text = index.text_search(&g, &[], "words", 4).unwrap();
    let near = index.vector_search(&g, &[], &v, 4).unwrap();
    for hits in [&text, &near] {
        assert_eq!(
            hits.iter().map(|h| (h.uuid, h.kind)).collect::<Vec<_>>(),
            [
                (id(1), DocKind::Fact),
                (id(2), DocKind::Fact),
                (id(2), DocKind::Entity),
                (id(3), DocKind::Fact),
            ],
            "{hits:?}"
        );
        assert!(hits.iter().all(|h| h.score == hits[0].score), "{hits:?}");
    }
    // A single kind's cut too.
    let facts = index.text_search(&g, &[DocKind::Fact], "equal", 2).unwrap();
    assert_eq!(ids(&facts), [id(1), id(2)]);
    let facts = index.vector_search(&g, &[DocKind::Fact], &v, 2).unwrap();
    assert_eq!(ids(&facts), [id(1), id(2)]);
}
