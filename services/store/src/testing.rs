//! The GraphStore conformance suite: every store runs exactly these checks.
//!
//! The reference is the in-memory fold (`GroupState`) of the same decided
//! batches: a store must hold record-for-record what the fold holds.

use chronicle_engine::GroupState;
use chronicle_engine::testing::two_tenant_story;
use chronicle_model::testing::{entity, episode, group};
use chronicle_model::{EventBatch, EventKind, Fact, GroupId, LogPosition, Timestamp};
use uuid::Uuid;

use crate::GraphStore;

/// Runs every check against an empty store.
pub async fn run_all(store: &dyn GraphStore) {
    store.clear().await.expect("clear");
    matches_the_in_memory_fold(store).await;
    store.clear().await.expect("clear");
    reapplying_changes_nothing(store).await;
    store.clear().await.expect("clear");
    groups_are_isolated(store).await;
    store.clear().await.expect("clear");
    lookups_and_ordering(store).await;
    store.clear().await.expect("clear");
    clear_empties_everything(store).await;
}

fn sorted_facts(mut f: Vec<Fact>) -> Vec<Fact> {
    f.sort_by_key(|x| x.uuid);
    f
}

async fn assert_matches(store: &dyn GraphStore, state: &GroupState) {
    let g = state.group_id().expect("group");
    let mut entities = store.entities(g).await.unwrap();
    entities.sort_by_key(|e| e.uuid);
    let expected: Vec<_> = state.entities().cloned().collect();
    assert_eq!(entities, expected, "entities of {g}");
    assert_eq!(
        sorted_facts(store.facts(g).await.unwrap()),
        state.facts().cloned().collect::<Vec<_>>(),
        "facts of {g}"
    );
    for e in state.episodes() {
        // The fold's in-memory state keeps no episode vectors or preceding
        // turns (decisions never read them); the store keeps what the event
        // carried.
        let stored = store.episode(g, e.uuid).await.unwrap().map(|mut s| {
            s.content_embedding = None;
            s.preceding_turn = None;
            s
        });
        assert_eq!(stored.as_ref(), Some(e), "episode {}", e.name);
    }
    let mut sagas = store.sagas(g).await.unwrap();
    sagas.sort_by_key(|s| s.uuid);
    assert_eq!(sagas, state.sagas().cloned().collect::<Vec<_>>());
    for e in state.entities() {
        let mut mentioning = store.mentioning_episodes(g, e.uuid).await.unwrap();
        mentioning.sort();
        assert_eq!(
            mentioning.len(),
            state.mention_count(&e.uuid),
            "mentions of {}",
            e.name
        );
    }
}

/// A store holds exactly what the in-memory fold holds, embeddings included.
pub async fn matches_the_in_memory_fold(store: &dyn GraphStore) {
    let (records, states) = two_tenant_story().await;
    // one record at a time, and the rest in one call
    for r in &records[..3] {
        let out = store.apply(std::slice::from_ref(r)).await.unwrap();
        assert!(out[0].applied);
    }
    let out = store.apply(&records[3..]).await.unwrap();
    assert!(out.iter().all(|o| o.applied));
    assert!(out.iter().any(|o| !o.touched.facts.is_empty()));
    store.flush().await.unwrap();
    for s in &states {
        assert_matches(store, s).await;
    }
    let positions = store.positions().await.unwrap();
    assert_eq!(
        positions.get(&0),
        Some(
            &(records
                .iter()
                .filter(|r| r.0.partition == 0)
                .map(|r| r.0.offset)
                .max()
                .unwrap()
                + 1)
        )
    );
    let totals = store.totals(None).await.unwrap();
    assert_eq!(totals.decisions as usize, records.len());
    let events: usize = records.iter().map(|r| r.1.events.len()).sum();
    assert_eq!(totals.events as usize, events);
    // The running totals agree with the rows they count, group by group.
    let mut summed = crate::Totals::default();
    for g in store.groups().await.unwrap() {
        let t = store.totals(Some(&g)).await.unwrap();
        assert_eq!(
            t.counts.entities as usize,
            store.entities(&g).await.unwrap().len()
        );
        let facts = store.facts(&g).await.unwrap();
        assert_eq!(t.counts.facts as usize, facts.len());
        let current = facts.iter().filter(|f| f.is_current()).count();
        assert_eq!(t.counts.facts_valid as usize, current);
        summed.merge(&t);
    }
    assert_eq!(summed, totals);
    let counts = totals.counts;
    let facts: usize = states.iter().map(|s| s.facts().count()).sum();
    assert_eq!(counts.facts as usize, facts);
    assert_eq!(counts.facts_valid + counts.facts_invalidated, counts.facts);
    assert!(counts.facts_invalidated > 0, "the story invalidates facts");
}

/// Re-applying a record, or a copy of it at a later position, changes nothing.
pub async fn reapplying_changes_nothing(store: &dyn GraphStore) {
    let (records, states) = two_tenant_story().await;
    store.apply(&records).await.unwrap();
    let again = store.apply(&records).await.unwrap();
    assert!(
        again.iter().all(|o| !o.applied),
        "positions skip what was applied"
    );
    // The same decisions re-delivered at new offsets: event ids make them no-ops.
    let moved: Vec<(LogPosition, EventBatch)> = records
        .iter()
        .map(|(p, b)| {
            (
                LogPosition {
                    partition: p.partition,
                    offset: p.offset + 1000,
                },
                b.clone(),
            )
        })
        .collect();
    let out = store.apply(&moved).await.unwrap();
    assert!(out.iter().all(|o| o.events_applied == 0));
    for s in &states {
        assert_matches(store, s).await;
    }
}

/// No lookup through one group reaches another group's records.
pub async fn groups_are_isolated(store: &dyn GraphStore) {
    let (records, states) = two_tenant_story().await;
    store.apply(&records).await.unwrap();
    let a = states[0].group_id().unwrap().clone();
    let b = states[1].group_id().unwrap().clone();
    let mut groups = store.groups().await.unwrap();
    groups.sort();
    assert_eq!(groups, vec![a.clone(), b.clone()]);
    for e in states[0].entities() {
        assert!(store.entity(&b, e.uuid).await.unwrap().is_none());
        assert!(store.facts_of_entity(&b, e.uuid).await.unwrap().is_empty());
        assert!(store.neighbours(&b, e.uuid).await.unwrap().is_empty());
        assert!(
            store
                .entities_by_name(&b, &chronicle_model::normalize_name(&e.name))
                .await
                .unwrap()
                .is_empty()
        );
    }
    for f in states[0].facts() {
        assert!(store.fact(&b, f.uuid).await.unwrap().is_none());
    }
    for e in states[0].episodes() {
        assert!(store.episode(&b, e.uuid).await.unwrap().is_none());
        assert!(store.mentions(&b, e.uuid).await.unwrap().is_empty());
    }
    // a group whose id is a prefix of another's
    let prefix = GroupId::new("tenant").unwrap();
    assert!(store.entities(&prefix).await.unwrap().is_empty());
    assert!(
        store
            .episodes_by_time(&prefix, None, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.counts(Some(&prefix)).await.unwrap().entities, 0);
}

/// Name, endpoint, neighbour and time lookups.
pub async fn lookups_and_ordering(store: &dyn GraphStore) {
    let (records, states) = two_tenant_story().await;
    store.apply(&records).await.unwrap();
    let s = &states[0];
    let g = s.group_id().unwrap();
    let alice = s.entities().find(|e| e.name == "Alice").unwrap();
    assert_eq!(
        store.entities_by_name(g, "alice").await.unwrap(),
        vec![alice.clone()]
    );
    let mut of_alice = sorted_facts(store.facts_of_entity(g, alice.uuid).await.unwrap());
    let expected: Vec<Fact> = s.facts_of(&alice.uuid).cloned().collect();
    of_alice.sort_by_key(|f| f.uuid);
    assert_eq!(of_alice, sorted_facts(expected));
    let beijing = s.entities().find(|e| e.name == "Beijing").unwrap();
    let between = store
        .facts_between(g, beijing.uuid, alice.uuid)
        .await
        .unwrap();
    assert_eq!(between.len(), 1);
    assert_eq!(between[0].name, "LIVES_IN");
    let neighbours = store.neighbours(g, alice.uuid).await.unwrap();
    assert!(
        neighbours
            .iter()
            .any(|n| n.entity == beijing.uuid && n.fact == between[0].uuid)
    );
    // newest first, bounded, and filtered by reference time
    let all = store.episodes_by_time(g, None, 100).await.unwrap();
    assert_eq!(all.len(), s.episode_count());
    assert!(all.windows(2).all(|w| w[0].valid_at >= w[1].valid_at));
    let before: Timestamp = "2025-02-15T00:00:00Z".parse().unwrap();
    let early = store.episodes_by_time(g, Some(before), 2).await.unwrap();
    assert_eq!(early.len(), 2);
    assert!(early.iter().all(|e| e.valid_at <= before));
    assert_eq!(early[0].valid_at, "2025-02-01T09:00:00Z".parse().unwrap());
    // oldest first from a time on, bounded; with the ones before, every episode
    let after = store.episodes_after(g, before, 100).await.unwrap();
    assert!(after.iter().all(|e| e.valid_at >= before));
    assert!(after.windows(2).all(|w| w[0].valid_at <= w[1].valid_at));
    let first_at = store.episodes_by_time(g, None, usize::MAX).await.unwrap();
    let oldest = first_at.last().unwrap().valid_at;
    let from_start = store.episodes_after(g, oldest, 100).await.unwrap();
    assert_eq!(from_start.len(), s.episode_count());
    let mut reversed = from_start.clone();
    reversed.reverse();
    assert_eq!(
        reversed.iter().map(|e| e.valid_at).collect::<Vec<_>>(),
        first_at.iter().map(|e| e.valid_at).collect::<Vec<_>>()
    );
    let next = store.episodes_after(g, oldest, 1).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].valid_at, oldest);
    let up_to = store.episodes_by_time(g, Some(before), 100).await.unwrap();
    let later = after.iter().filter(|e| e.valid_at > before).count();
    assert_eq!(up_to.len() + later, s.episode_count());
    // mentions both ways
    let first = s.episodes().find(|e| e.name == "ep-1").unwrap();
    let mentioned = store.mentions(g, first.uuid).await.unwrap();
    assert!(mentioned.contains(&alice.uuid) && mentioned.contains(&beijing.uuid));
    assert!(
        store
            .mentioning_episodes(g, alice.uuid)
            .await
            .unwrap()
            .contains(&first.uuid)
    );
    // an entity update keeps the stored embedding
    let g2 = group("embeddings");
    let mut e = entity(&g2, Uuid::from_u128(77), "Vera");
    e.name_embedding = Some(vec![0.5, 0.25]);
    let create = EventBatch::new(
        Uuid::from_u128(500),
        g2.clone(),
        before,
        None,
        vec![EventKind::EntityCreated { entity: e.clone() }],
    );
    let update = EventBatch::new(
        Uuid::from_u128(501),
        g2.clone(),
        before,
        None,
        vec![EventKind::EntityUpdated {
            entity_uuid: e.uuid,
            summary: Some("new".into()),
            attributes: None,
            labels: None,
            name_embedding: None,
        }],
    );
    store
        .apply(&[
            (
                LogPosition {
                    partition: 9,
                    offset: 0,
                },
                create,
            ),
            (
                LogPosition {
                    partition: 9,
                    offset: 1,
                },
                update,
            ),
        ])
        .await
        .unwrap();
    let got = store.entity(&g2, e.uuid).await.unwrap().unwrap();
    assert_eq!(got.summary, "new");
    assert_eq!(got.name_embedding, Some(vec![0.5, 0.25]));
    // an episode keeps the vector its event carried, read one by one or by
    // time (the projector indexes it from there)
    let mut turn = episode(&g2, Uuid::from_u128(78));
    turn.content_embedding = Some(vec![-1.25, 0.125]);
    let recorded = EventBatch::new(
        Uuid::from_u128(502),
        g2.clone(),
        before,
        None,
        vec![EventKind::EpisodeRecorded {
            episode: turn.clone(),
        }],
    );
    let at = LogPosition {
        partition: 9,
        offset: 2,
    };
    store.apply(&[(at, recorded)]).await.unwrap();
    let got = store.episode(&g2, turn.uuid).await.unwrap();
    assert_eq!(got.as_ref(), Some(&turn));
    let by_time = store.episodes_by_time(&g2, None, 10).await.unwrap();
    assert_eq!(by_time, vec![turn]);
}

/// Clearing drops records and positions.
pub async fn clear_empties_everything(store: &dyn GraphStore) {
    let (records, _) = two_tenant_story().await;
    store.apply(&records).await.unwrap();
    store.clear().await.unwrap();
    assert!(store.groups().await.unwrap().is_empty());
    assert!(store.positions().await.unwrap().is_empty());
    assert_eq!(store.counts(None).await.unwrap(), Default::default());
    // and it can be rebuilt
    store.apply(&records).await.unwrap();
    assert!(!store.groups().await.unwrap().is_empty());
}
