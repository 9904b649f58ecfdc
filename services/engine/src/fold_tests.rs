//! Property tests of the fold: idempotence under re-delivery, determinism.

use chronicle_model::testing::{entity, episode, fact, group, ts};
use chronicle_model::{EventBatch, EventKind, GraphEvent, GroupId, Timestamp};
use proptest::prelude::*;
use uuid::Uuid;

use crate::{Applied, GroupState, apply};

/// One step of a random history over a small universe of ids, so that steps
/// often touch records that earlier steps created (or removed).
#[derive(Clone, Debug)]
enum Step {
    Episode(u8),
    Entity(u8),
    UpdateEntity(u8, u8),
    Fact(u8, u8, u8),
    Provenance(u8, u8),
    Invalidate(u8, u8),
    Mentions(u8, Vec<u8>),
    Saga(u8, u8),
    Retract(u8),
    Community(u8, Vec<u8>),
    Dissolve(u8),
    SummarizeSaga(u8),
}

fn id(kind: u128, n: u8) -> Uuid {
    Uuid::from_u128((kind << 64) | n as u128)
}

fn step() -> impl Strategy<Value = Step> {
    let small = 0u8..6;
    prop_oneof![
        small.clone().prop_map(Step::Episode),
        small.clone().prop_map(Step::Entity),
        (small.clone(), any::<u8>()).prop_map(|(a, b)| Step::UpdateEntity(a, b)),
        (small.clone(), small.clone(), small.clone()).prop_map(|(f, a, b)| Step::Fact(f, a, b)),
        (small.clone(), small.clone()).prop_map(|(f, e)| Step::Provenance(f, e)),
        (small.clone(), small.clone()).prop_map(|(f, e)| Step::Invalidate(f, e)),
        (
            small.clone(),
            proptest::collection::vec(small.clone(), 0..4)
        )
            .prop_map(|(e, es)| Step::Mentions(e, es)),
        (0u8..2, small.clone()).prop_map(|(s, e)| Step::Saga(s, e)),
        small.clone().prop_map(Step::Retract),
        (0u8..3, proptest::collection::vec(small.clone(), 0..4))
            .prop_map(|(c, m)| Step::Community(c, m)),
        (0u8..3).prop_map(Step::Dissolve),
        (0u8..2).prop_map(Step::SummarizeSaga),
    ]
}

fn kind_of(g: &GroupId, s: &Step, t: Timestamp) -> EventKind {
    match s {
        Step::Episode(n) => {
            let mut e = episode(g, id(1, *n));
            e.valid_at = t;
            e.entity_edges = (0..6).map(|f| id(3, f)).filter(|_| n % 2 == 0).collect();
            EventKind::EpisodeRecorded { episode: e }
        }
        Step::Entity(n) => EventKind::EntityCreated {
            entity: entity(g, id(2, *n), &format!("Entity {n}")),
        },
        Step::UpdateEntity(n, v) => EventKind::EntityUpdated {
            entity_uuid: id(2, *n),
            summary: Some(format!("summary {v}")),
            attributes: None,
            labels: (v % 2 == 0).then(|| vec!["Entity".into(), format!("T{v}")]),
            name_embedding: (v % 3 == 0).then(|| vec![*v as f32]),
        },
        Step::Fact(f, a, b) => {
            let mut x = fact(g, id(3, *f), id(2, *a), id(2, *b));
            x.episodes = vec![id(1, *f % 3)];
            x.invalid_at = None;
            x.expired_at = None;
            x.invalidated_by = None;
            x.stated_windows.clear();
            EventKind::FactCreated { fact: x }
        }
        Step::Provenance(f, e) => EventKind::FactProvenanceAdded {
            fact_uuid: id(3, *f),
            episode_uuid: id(1, *e),
            // Even episodes state an earlier start and an end: a widening.
            stated_window: (e % 2 == 0)
                .then(|| chronicle_model::Window::new(Some(ts("2024-06-01T00:00:00Z")), Some(t))),
        },
        Step::Invalidate(f, e) => EventKind::FactInvalidated {
            fact_uuid: id(3, *f),
            invalid_at: t,
            expired_at: t,
            by_fact: Some(id(3, *e)),
            by_episode: id(1, *e),
        },
        Step::Mentions(e, es) => EventKind::MentionsRecorded {
            episode_uuid: id(1, *e),
            entity_uuids: es.iter().map(|n| id(2, *n)).collect(),
        },
        Step::Saga(s, e) => EventKind::SagaLinked {
            saga_uuid: id(4, *s),
            saga_name: format!("saga {s}"),
            episode_uuid: id(1, *e),
            previous_episode_uuid: None,
        },
        Step::Retract(e) => EventKind::EpisodeRetracted {
            episode_uuid: id(1, *e),
        },
        Step::Community(c, m) => EventKind::CommunityBuilt {
            community: chronicle_model::Community {
                uuid: id(5, *c),
                group_id: g.clone(),
                name: format!("c{c}"),
                summary: String::new(),
                members: m.iter().map(|n| id(2, *n)).collect(),
                name_embedding: None,
                created_at: t,
            },
        },
        Step::Dissolve(c) => EventKind::CommunityDissolved {
            community_uuid: id(5, *c),
        },
        Step::SummarizeSaga(s) => EventKind::SagaSummarized {
            saga_uuid: id(4, *s),
            summary: format!("saga {s} so far"),
            last_summarized_episode_valid_at: t,
        },
    }
}

/// A history: batches of steps, each batch one decision with derived event ids.
fn history() -> impl Strategy<Value = Vec<GraphEvent>> {
    proptest::collection::vec(proptest::collection::vec(step(), 1..5), 1..25).prop_map(|batches| {
        let g = group("g");
        let base = ts("2025-01-01T00:00:00Z");
        batches
            .iter()
            .enumerate()
            .flat_map(|(i, steps)| {
                let t = base.saturating_add_micros(i as i64 * 1_000_000);
                let kinds = steps.iter().map(|s| kind_of(&g, s, t)).collect();
                EventBatch::new(Uuid::from_u128(1000 + i as u128), g.clone(), t, None, kinds).events
            })
            .collect()
    })
}

fn fold(events: &[GraphEvent]) -> GroupState {
    let mut state = GroupState::new(group("g"));
    for e in events {
        apply(&mut state, e);
    }
    state
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Re-delivering earlier events at random later points changes nothing.
    #[test]
    fn redelivery_is_a_no_op(events in history(), dups in proptest::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>()), 0..30)) {
        let once = fold(&events);
        let mut with_dups: Vec<GraphEvent> = events.clone();
        for (at, which) in dups {
            let pos = at.index(with_dups.len() + 1);
            // only events already delivered before `pos` may be re-delivered there
            if pos == 0 { continue; }
            let dup = with_dups[which.index(pos)].clone();
            with_dups.insert(pos, dup);
        }
        let twice = fold(&with_dups);
        prop_assert_eq!(once.to_canonical_json(), twice.to_canonical_json());
    }

    /// The same input folds to byte-identical state.
    #[test]
    fn folding_is_deterministic(events in history()) {
        prop_assert_eq!(fold(&events).to_canonical_json(), fold(&events).to_canonical_json());
    }

    /// A state restored from its snapshot at any point of a history folds
    /// the rest of it (re-delivered from the cut or earlier) to the same
    /// state, derived values included: what the processor's state store
    /// relies on when it loads a cold group and replays the log's tail.
    #[test]
    fn a_snapshot_restores_the_state_at_any_point(events in history(), cut in any::<prop::sample::Index>(), back in any::<prop::sample::Index>()) {
        let cut = cut.index(events.len() + 1);
        let mut restored = GroupState::from_snapshot(fold(&events[..cut]).snapshot());
        for e in &events[back.index(cut + 1)..] {
            apply(&mut restored, e);
        }
        let whole = fold(&events);
        prop_assert_eq!(restored.snapshot(), whole.snapshot());
        prop_assert_eq!(restored.latest_tx(), whole.latest_tx());
        let again = GroupState::from_snapshot(whole.snapshot());
        prop_assert_eq!(again.to_canonical_json(), whole.to_canonical_json());
        for c in whole.communities() {
            prop_assert_eq!(again.community_facts_fingerprint(&c.uuid), whole.community_facts_fingerprint(&c.uuid));
        }
    }

    /// Derived indexes agree with the primary data after any history.
    #[test]
    fn indexes_agree_with_records(events in history()) {
        let s = fold(&events);
        for e in s.entities() {
            prop_assert!(s.entities_named(&chronicle_model::normalize_name(&e.name)).any(|x| x.uuid == e.uuid));
        }
        for f in s.facts() {
            prop_assert!(s.facts_of(&f.source_node_uuid).any(|x| x.uuid == f.uuid));
            prop_assert!(s.facts_of(&f.target_node_uuid).any(|x| x.uuid == f.uuid));
        }
        let by_time = s.episodes_before(Timestamp::MAX, usize::MAX).len();
        prop_assert_eq!(by_time, s.episode_count());
    }
}

#[test]
fn duplicate_is_reported() {
    let g = group("g");
    let batch = EventBatch::new(
        Uuid::from_u128(1),
        g.clone(),
        ts("2025-01-01T00:00:00Z"),
        None,
        vec![EventKind::EntityCreated {
            entity: entity(&g, Uuid::from_u128(2), "Alice"),
        }],
    );
    let mut s = GroupState::new(g);
    assert_eq!(apply(&mut s, &batch.events[0]), Applied::Changed);
    assert_eq!(apply(&mut s, &batch.events[0]), Applied::Duplicate);
}

#[test]
fn retraction_drops_sole_support_and_restores_invalidations() {
    let g = group("g");
    let (alice, beijing, shanghai) = (Uuid::from_u128(2), Uuid::from_u128(3), Uuid::from_u128(4));
    let (ep1, ep2) = (Uuid::from_u128(10), Uuid::from_u128(11));
    let (f_bj, f_sh) = (Uuid::from_u128(20), Uuid::from_u128(21));
    let jan = ts("2025-01-01T00:00:00Z");
    let mar = ts("2025-03-01T00:00:00Z");
    let mut e1 = episode(&g, ep1);
    e1.entity_edges = vec![f_bj];
    let mut e2 = episode(&g, ep2);
    e2.entity_edges = vec![f_sh, f_bj];
    let mk_fact = |uuid, target, ep, at| {
        let mut x = fact(&g, uuid, alice, target);
        x.episodes = vec![ep];
        x.valid_at = Some(at);
        x.invalid_at = None;
        x.expired_at = None;
        x.invalidated_by = None;
        x
    };
    let b1 = EventBatch::new(
        ep1,
        g.clone(),
        jan,
        None,
        vec![
            EventKind::EpisodeRecorded { episode: e1 },
            EventKind::EntityCreated {
                entity: entity(&g, alice, "Alice"),
            },
            EventKind::EntityCreated {
                entity: entity(&g, beijing, "Beijing"),
            },
            EventKind::FactCreated {
                fact: mk_fact(f_bj, beijing, ep1, jan),
            },
            EventKind::MentionsRecorded {
                episode_uuid: ep1,
                entity_uuids: vec![alice, beijing],
            },
        ],
    );
    let b2 = EventBatch::new(
        ep2,
        g.clone(),
        mar,
        None,
        vec![
            EventKind::EpisodeRecorded { episode: e2 },
            EventKind::EntityCreated {
                entity: entity(&g, shanghai, "Shanghai"),
            },
            EventKind::FactCreated {
                fact: mk_fact(f_sh, shanghai, ep2, mar),
            },
            EventKind::FactInvalidated {
                fact_uuid: f_bj,
                invalid_at: mar,
                expired_at: mar,
                by_fact: Some(f_sh),
                by_episode: ep2,
            },
            EventKind::MentionsRecorded {
                episode_uuid: ep2,
                entity_uuids: vec![alice, shanghai],
            },
        ],
    );
    let mut s = GroupState::new(g.clone());
    crate::apply_batch(&mut s, &b1);
    let before_second = s.to_canonical_json();
    crate::apply_batch(&mut s, &b2);
    assert_eq!(s.get_fact(&f_bj).unwrap().invalid_at, Some(mar));

    let r = EventBatch::new(
        Uuid::from_u128(99),
        g,
        mar,
        None,
        vec![EventKind::EpisodeRetracted { episode_uuid: ep2 }],
    );
    crate::apply_batch(&mut s, &r);
    assert!(
        s.get_fact(&f_sh).is_none(),
        "fact only ep2 supported is gone"
    );
    assert!(
        s.get_entity(&shanghai).is_none(),
        "entity only ep2 mentioned is gone"
    );
    let bj = s.get_fact(&f_bj).unwrap();
    assert!(
        bj.is_current(),
        "invalidation by the retracted episode is undone"
    );
    assert!(s.get_entity(&alice).is_some());
    // Apart from the applied-event ids, the graph is as it was before ep2.
    let mut expected: serde_json::Value = serde_json::from_slice(&before_second).unwrap();
    let mut actual: serde_json::Value = serde_json::from_slice(&s.to_canonical_json()).unwrap();
    expected["applied"] = serde_json::Value::Null;
    actual["applied"] = serde_json::Value::Null;
    assert_eq!(actual, expected);
}
