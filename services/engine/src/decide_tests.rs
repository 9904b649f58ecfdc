//! Tests of decide: graphiti's temporal semantics, the resolution funnel, bulk mode.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chronicle_model::testing::{group, ts};
use chronicle_model::{Command, EpisodeType, Fact, GroupId, NewEpisode, Timestamp};
use uuid::Uuid;

use crate::ports::*;
use crate::testing::TrigramEmbedder;
use crate::{Accepted, DecideConfig, Decider, GroupState, OfflineExtractor, apply_batch};

/// Names mapped to chosen vectors (for the embedding tier).
struct ScriptedEmbedder(BTreeMap<String, Vec<f32>>);

#[async_trait]
impl Embedder for ScriptedEmbedder {
    fn describe(&self) -> String {
        "scripted".into()
    }
    fn dimension(&self) -> usize {
        2
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts
            .iter()
            .map(|t| self.0.get(t).cloned().unwrap_or_else(|| vec![0.0, 1.0]))
            .collect())
    }
}

/// The offline extractor, counted as a model, with a scripted entity verdict.
struct ModelLike {
    entity_verdict: Option<usize>,
    calls: Mutex<Vec<&'static str>>,
}

#[async_trait]
impl Extractor for ModelLike {
    fn describe(&self) -> String {
        "model-like".into()
    }
    async fn extract(&self, r: &ExtractionRequest) -> Result<Extraction, LlmError> {
        self.calls.lock().unwrap().push("extract");
        OfflineExtractor.extract(r).await
    }
    async fn resolve_entities(
        &self,
        r: &EntityResolutionRequest,
    ) -> Result<Vec<Option<usize>>, LlmError> {
        self.calls.lock().unwrap().push("resolve_entities");
        Ok(vec![self.entity_verdict; r.entities.len()])
    }
    async fn resolve_facts(
        &self,
        r: &FactResolutionRequest,
    ) -> Result<Vec<FactResolution>, LlmError> {
        self.calls.lock().unwrap().push("resolve_facts");
        Ok(vec![FactResolution::default(); r.facts.len()])
    }
    async fn summarize(&self, r: &SummaryRequest) -> Result<Vec<String>, LlmError> {
        self.calls.lock().unwrap().push("summarize");
        OfflineExtractor.summarize(r).await
    }
}

fn offline() -> Decider {
    Decider::new(
        Arc::new(OfflineExtractor),
        Arc::new(TrigramEmbedder),
        Default::default(),
        DecideConfig::default(),
    )
}

fn episode(g: &GroupId, n: u128, content: &str, at: &str) -> Accepted {
    Accepted {
        command: Command::AddEpisode(NewEpisode {
            uuid: Uuid::from_u128(n),
            group_id: g.clone(),
            name: format!("ep{n}"),
            content: content.into(),
            source: EpisodeType::Message,
            source_description: "chat".into(),
            reference_time: ts(at),
            previous_episode_uuids: None,
            saga: None,
            metadata: Default::default(),
        }),
        // transaction time: when the log accepted it (here: a day after the reference time)
        tx_time: ts(at).saturating_add_micros(86_400_000_000),
        source: None,
    }
}

async fn run(d: &Decider, state: &mut GroupState, items: &[Accepted]) {
    for a in items {
        let batch = d.decide(state, a).await.expect("decides");
        apply_batch(state, &batch);
    }
}

/// One group's history told turn by turn: the decider, the state and the fold
/// that every scenario needs, set up once.
struct Scenario {
    group: GroupId,
    decider: Decider,
    state: GroupState,
}

impl Scenario {
    fn offline(group_name: &str) -> Self {
        Self::with(group_name, offline())
    }

    fn with(group_name: &str, decider: Decider) -> Self {
        let group = group(group_name);
        Scenario {
            state: GroupState::new(group.clone()),
            group,
            decider,
        }
    }

    /// Decides and applies `(n, content, reference time)` turns in order.
    async fn tell(&mut self, turns: &[(u128, &str, &str)]) {
        let items: Vec<Accepted> = turns
            .iter()
            .map(|(n, content, at)| episode(&self.group, *n, content, at))
            .collect();
        self.apply(&items).await;
    }

    /// Decides and applies commands built by the test itself.
    async fn apply(&mut self, items: &[Accepted]) {
        run(&self.decider, &mut self.state, items).await;
    }
}

fn fact_to<'a>(state: &'a GroupState, target: &str) -> Vec<&'a Fact> {
    let target = state
        .entities()
        .find(|e| e.name == target)
        .unwrap_or_else(|| panic!("entity {target}"))
        .uuid;
    state
        .facts()
        .filter(|f| f.target_node_uuid == target)
        .collect()
}

fn lives_at(state: &GroupState, person: &str, t: Timestamp) -> Vec<String> {
    let p = state.entities().find(|e| e.name == person).unwrap().uuid;
    state
        .facts()
        .filter(|f| f.source_node_uuid == p && f.name == "LIVES_IN" && f.is_valid_at(t))
        .map(|f| state.get_entity(&f.target_node_uuid).unwrap().name.clone())
        .collect()
}

#[tokio::test]
async fn alice_moves_from_beijing_to_shanghai() {
    let mut scenario = Scenario::offline("alice");
    scenario
        .tell(&[
            (1, "Alice: I live in Beijing.", "2025-01-10T09:00:00Z"),
            (2, "Alice: I moved to Shanghai.", "2025-03-01T09:00:00Z"),
        ])
        .await;
    let s = scenario.state;
    assert_eq!(
        lives_at(&s, "Alice", ts("2025-02-28T00:00:00Z")),
        ["Beijing"]
    );
    assert_eq!(
        lives_at(&s, "Alice", ts("2026-01-01T00:00:00Z")),
        ["Shanghai"]
    );
    let beijing = fact_to(&s, "Beijing");
    assert_eq!(beijing.len(), 1, "the old fact is kept");
    let b = beijing[0];
    assert_eq!(b.valid_at, Some(ts("2025-01-10T09:00:00Z")));
    assert_eq!(b.invalid_at, Some(ts("2025-03-01T09:00:00Z")));
    assert_eq!(
        b.expired_at,
        Some(ts("2025-03-02T09:00:00Z")),
        "expired at the second episode's transaction time"
    );
    assert_eq!(
        b.invalidated_by.as_ref().unwrap().by_episode,
        Uuid::from_u128(2)
    );
    assert!(
        b.was_known_at(ts("2025-03-01T12:00:00Z")) && !b.was_known_at(ts("2025-03-03T00:00:00Z"))
    );
    assert_eq!(s.entities().count(), 3);
    let alice = s.entities().find(|e| e.name == "Alice").unwrap();
    assert_eq!(alice.entity_type(), "Person");
    assert!(
        alice.summary.contains("Beijing") && alice.summary.contains("Shanghai"),
        "{}",
        alice.summary
    );
    // The second episode lists the fact it invalidated.
    let ep2 = s.get_episode(&Uuid::from_u128(2)).unwrap();
    assert!(ep2.entity_edges.contains(&b.uuid));
}

#[tokio::test]
async fn a_late_arrival_is_born_invalid_and_ends_the_older_fact() {
    let mut scenario = Scenario::offline("late");
    scenario
        .tell(&[
            (1, "Alice lives in Beijing.", "2025-01-01T00:00:00Z"),
            (2, "Alice moved to Shanghai.", "2025-03-01T00:00:00Z"),
            // arrives last, but talks about February
            (3, "Alice lives in Hangzhou.", "2025-02-01T00:00:00Z"),
        ])
        .await;
    let s = scenario.state;
    let hz = fact_to(&s, "Hangzhou")[0];
    assert_eq!(
        (hz.valid_at, hz.invalid_at),
        (
            Some(ts("2025-02-01T00:00:00Z")),
            Some(ts("2025-03-01T00:00:00Z"))
        )
    );
    assert_eq!(
        hz.expired_at, None,
        "born ended, but the system still holds it as history"
    );
    let bj = fact_to(&s, "Beijing")[0];
    assert_eq!(bj.invalid_at, Some(ts("2025-02-01T00:00:00Z")));
    assert_eq!(
        bj.invalidated_by.as_ref().unwrap().prior_invalid_at,
        Some(ts("2025-03-01T00:00:00Z"))
    );
    assert!(fact_to(&s, "Shanghai")[0].is_current());
    assert_eq!(
        lives_at(&s, "Alice", ts("2025-02-15T00:00:00Z")),
        ["Hangzhou"]
    );
}

#[tokio::test]
async fn windows_that_do_not_overlap_never_contradict() {
    let mut scenario = Scenario::offline("windows");
    scenario
        .tell(&[
            (1, "Erin lived in Paris until 2020.", "2024-05-01T00:00:00Z"),
            (2, "Erin lives in Rome.", "2024-06-01T00:00:00Z"),
        ])
        .await;
    let s = scenario.state;
    let paris = fact_to(&s, "Paris")[0];
    assert_eq!(paris.invalid_at, Some(ts("2020-01-01T00:00:00Z")));
    assert!(paris.invalidated_by.is_none() && paris.expired_at.is_none());
    assert!(fact_to(&s, "Rome")[0].is_current());
}

#[tokio::test]
async fn restatements_add_provenance_and_endings_end_facts() {
    let mut scenario = Scenario::offline("restate");
    scenario
        .tell(&[
            (1, "Bob works at Initech.", "2024-01-01T00:00:00Z"),
            (2, "Bob works at Initech.", "2024-02-01T00:00:00Z"),
            (3, "Bob left Initech.", "2024-06-01T00:00:00Z"),
        ])
        .await;
    let s = scenario.state;
    let f = fact_to(&s, "Initech");
    assert_eq!(f.len(), 1, "no duplicate fact");
    assert_eq!(
        f[0].episodes,
        vec![Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3)]
    );
    assert_eq!(f[0].invalid_at, Some(ts("2024-06-01T00:00:00Z")));
}

#[tokio::test]
async fn cardinality_one_invalidates_without_a_model_and_many_does_not() {
    let x = Arc::new(ModelLike {
        entity_verdict: None,
        calls: Mutex::new(Vec::new()),
    });
    let mut scenario = Scenario::with(
        "card",
        Decider::new(
            x.clone(),
            Arc::new(TrigramEmbedder),
            Default::default(),
            DecideConfig::default(),
        ),
    );
    scenario
        .tell(&[
            (1, "Carol works at Initech.", "2024-01-01T00:00:00Z"),
            (2, "Carol works at Globex.", "2024-03-01T00:00:00Z"),
        ])
        .await;
    let s = &scenario.state;
    assert!(!fact_to(s, "Initech")[0].is_current());
    assert!(fact_to(s, "Globex")[0].is_current());
    assert_eq!(
        *x.calls.lock().unwrap(),
        ["extract", "extract"],
        "no resolution call for cardinality-one"
    );

    scenario
        .tell(&[
            (3, "Carol likes green tea.", "2024-04-01T00:00:00Z"),
            (4, "Carol likes coffee.", "2024-05-01T00:00:00Z"),
        ])
        .await;
    let s = &scenario.state;
    assert!(
        fact_to(s, "green tea")[0].is_current(),
        "the model said no contradiction"
    );
    assert!(fact_to(s, "coffee")[0].is_current());
    assert_eq!(
        x.calls.lock().unwrap().last(),
        Some(&"resolve_facts"),
        "a many-relation asks the model"
    );
}

#[tokio::test]
async fn resolution_tiers() {
    let g = group("tiers");
    let d = offline();
    let mut s = GroupState::new(g.clone());
    let stats_of = |b: &chronicle_model::EventBatch| b.stats.clone().unwrap().resolutions;
    let b = d
        .decide(
            &s,
            &episode(
                &g,
                1,
                "Maximilian Oberhauser works at International Business Machines Corporation.",
                "2024-01-01T00:00:00Z",
            ),
        )
        .await
        .unwrap();
    assert_eq!(stats_of(&b).get("new"), Some(&2));
    apply_batch(&mut s, &b);
    // exact: case and spacing differ
    let b = d
        .decide(
            &s,
            &episode(
                &g,
                2,
                "MAXIMILIAN  OBERHAUSER likes chess.",
                "2024-01-02T00:00:00Z",
            ),
        )
        .await
        .unwrap();
    assert_eq!(stats_of(&b).get("exact"), Some(&1));
    apply_batch(&mut s, &b);
    // fuzzy: one letter missing from a long name
    let b = d
        .decide(
            &s,
            &episode(
                &g,
                3,
                "Maximilian Oberhauser works at International Business Machines Corporatio.",
                "2024-01-03T00:00:00Z",
            ),
        )
        .await
        .unwrap();
    assert_eq!(stats_of(&b).get("fuzzy"), Some(&1), "{:?}", stats_of(&b));
    apply_batch(&mut s, &b);
    assert_eq!(
        s.entities().count(),
        3,
        "no duplicate entity: {:?}",
        s.entities().map(|e| &e.name).collect::<Vec<_>>()
    );

    // embedding and model tiers, with chosen vectors
    let vectors = BTreeMap::from([
        ("Robert Paulson".to_string(), vec![1.0, 0.0]),
        ("Bob Paulson".to_string(), vec![0.99, 0.141]),
        ("Rob P".to_string(), vec![0.92, 0.39]),
    ]);
    let model = Arc::new(ModelLike {
        entity_verdict: Some(0),
        calls: Mutex::new(Vec::new()),
    });
    let d = Decider::new(
        model.clone(),
        Arc::new(ScriptedEmbedder(vectors)),
        Default::default(),
        DecideConfig::default(),
    );
    let mut s = GroupState::new(g.clone());
    for (n, text, tier) in [
        (10, "Robert Paulson likes soap.", "new"),
        (11, "Bob Paulson likes soap.", "embedding"),
        (12, "Rob P likes soap.", "llm"),
    ] {
        let b = d
            .decide(&s, &episode(&g, n, text, "2024-02-01T00:00:00Z"))
            .await
            .unwrap();
        assert!(
            stats_of(&b).get(tier).is_some_and(|n| *n >= 1),
            "{text}: {:?}",
            stats_of(&b)
        );
        apply_batch(&mut s, &b);
    }
    assert_eq!(
        s.entities().filter(|e| e.entity_type() == "Person").count(),
        1
    );
    assert!(model.calls.lock().unwrap().contains(&"resolve_entities"));
}

#[tokio::test]
async fn triples_and_structured_json_need_no_extraction_call() {
    let g = group("triples");
    let model = Arc::new(ModelLike {
        entity_verdict: None,
        calls: Mutex::new(Vec::new()),
    });
    let d = Decider::new(
        model.clone(),
        Arc::new(TrigramEmbedder),
        Default::default(),
        DecideConfig::default(),
    );
    let mut s = GroupState::new(g.clone());
    let mut a = episode(
        &g,
        1,
        r#"{"source":"Dana","relation":"LIVES_IN","target":"Oslo","source_labels":["Person"]}"#,
        "2024-01-01T00:00:00Z",
    );
    let mut b = episode(
        &g,
        2,
        r#"{"entities":[{"name":"Dana","entity_type_id":1},{"name":"Bergen","entity_type_id":2}],"facts":[{"source":"Dana","target":"Bergen","relation":"LIVES_IN","fact":"Dana moved to Bergen"}]}"#,
        "2024-05-01T00:00:00Z",
    );
    if let Command::AddEpisode(e) = &mut a.command {
        e.source = EpisodeType::FactTriple;
    }
    if let Command::AddEpisode(e) = &mut b.command {
        e.source = EpisodeType::Json;
    }
    run(&d, &mut s, &[a, b]).await;
    assert!(
        model.calls.lock().unwrap().is_empty(),
        "{:?}",
        model.calls.lock().unwrap()
    );
    assert!(
        !fact_to(&s, "Oslo")[0].is_current(),
        "triples go through invalidation too"
    );
    assert_eq!(lives_at(&s, "Dana", ts("2024-06-01T00:00:00Z")), ["Bergen"]);

    let mut bad = episode(&g, 3, "not a triple", "2024-01-01T00:00:00Z");
    if let Command::AddEpisode(e) = &mut bad.command {
        e.source = EpisodeType::FactTriple;
    }
    assert!(matches!(
        d.decide(&s, &bad).await,
        Err(crate::DecideError::Content(_))
    ));
}

#[tokio::test]
async fn episode_duplicates_collapse_and_retraction_undoes() {
    let mut scenario = Scenario::offline("collapse");
    scenario
        .tell(&[
            (
                1,
                "Frank lives in Oslo. Frank works at Equinor.",
                "2024-01-01T00:00:00Z",
            ),
            (2, "Frank moved to Bergen.", "2024-02-01T00:00:00Z"),
        ])
        .await;
    assert_eq!(
        scenario
            .state
            .entities()
            .filter(|e| e.name == "Frank")
            .count(),
        1
    );
    let before = scenario.state.clone();
    let retract = Accepted {
        command: Command::RetractEpisode {
            uuid: Uuid::from_u128(99),
            group_id: scenario.group.clone(),
            episode_uuid: Uuid::from_u128(2),
        },
        tx_time: ts("2024-03-01T00:00:00Z"),
        source: None,
    };
    scenario.apply(&[retract]).await;
    let s = &scenario.state;
    assert!(s.entities().all(|e| e.name != "Bergen"));
    assert!(
        fact_to(s, "Oslo")[0].is_current(),
        "the move's invalidation is undone"
    );
    assert!(before.entities().any(|e| e.name == "Bergen"));
    // Deciding the same episode again is a no-op.
    let again = scenario
        .decider
        .decide(
            s,
            &episode(
                &scenario.group,
                1,
                "Frank lives in Oslo.",
                "2024-01-01T00:00:00Z",
            ),
        )
        .await
        .unwrap();
    assert!(again.events.is_empty());
}

/// Deterministic ids and times: the same commands give byte-identical batches.
#[tokio::test]
async fn deciding_is_deterministic() {
    let g = group("det");
    let items = [
        episode(
            &g,
            1,
            "Gina lives in Lima. Gina works at Andina.",
            "2024-01-01T00:00:00Z",
        ),
        episode(&g, 2, "Gina moved to Quito.", "2024-02-01T00:00:00Z"),
    ];
    let mut a = GroupState::new(g.clone());
    let mut b = GroupState::new(g.clone());
    let mut batches = Vec::new();
    for s in [&mut a, &mut b] {
        for it in &items {
            let mut batch = offline().decide(s, it).await.unwrap();
            batch.stats = None;
            apply_batch(s, &batch);
            batches.push(batch);
        }
    }
    assert_eq!(batches[0], batches[2]);
    assert_eq!(batches[1], batches[3]);
    assert_eq!(a.to_canonical_json(), b.to_canonical_json());
}

#[tokio::test]
async fn a_decision_times_each_of_its_stages() {
    let g = group("stages");
    let items = [
        episode(&g, 1, "Hana lives in Osaka.", "2024-01-01T00:00:00Z"),
        episode(&g, 2, "Hana moved to Kobe.", "2024-02-01T00:00:00Z"),
    ];
    let expected = [
        crate::decide::stage::CONTEXT,
        crate::decide::stage::EXTRACT,
        crate::decide::stage::EXTRACT_FACTS,
        crate::decide::stage::RESOLVE_ENTITIES,
        crate::decide::stage::RESOLVE_FACTS,
        crate::decide::stage::SUMMARIES,
    ];
    let d = offline();
    let mut sequential = GroupState::new(g.clone());
    let mut bulk = sequential.clone();
    for it in &items {
        let batch = d.decide(&sequential, it).await.unwrap();
        let stats = batch.stats.clone().unwrap();
        let stages: Vec<&str> = stats.stage_micros.keys().map(String::as_str).collect();
        for stage in expected {
            assert!(stages.contains(&stage), "{stage} missing from {stages:?}");
        }
        let staged: u64 = stats.stage_micros.values().sum();
        assert!(
            staged <= stats.decide_micros,
            "stages are inside the decision"
        );
        apply_batch(&mut sequential, &batch);
    }
    for batch in d.decide_bulk(&mut bulk, &items).await {
        let stats = batch.unwrap().stats.unwrap();
        for stage in expected {
            assert!(stats.stage_micros.contains_key(stage), "bulk: {stage}");
        }
    }
}

fn synthetic_group(n_episodes: usize) -> (GroupId, Vec<Accepted>) {
    let g = group("bulk");
    let people = [
        "Ada Stone",
        "Ben Okafor",
        "Cleo Ruiz",
        "Dev Patel",
        "Eli Novak",
    ];
    let cities = ["Oslo", "Lima", "Kyiv", "Pune", "Nice"];
    let orgs = ["Initech", "Globex", "Umbrella"];
    let items = (0..n_episodes)
        .map(|i| {
            let p = people[i % people.len()];
            let text = match i % 3 {
                0 => format!("{p} lives in {}.", cities[(i / 2) % cities.len()]),
                1 => format!("{p} works at {}.", orgs[(i / 3) % orgs.len()]),
                _ => format!("{p} moved to {}.", cities[(i * 7) % cities.len()]),
            };
            let day = 1 + (i * 13) % 27; // not in arrival order
            episode(
                &g,
                1000 + i as u128,
                &text,
                &format!("2024-{:02}-{day:02}T10:00:00Z", 1 + i % 12),
            )
        })
        .collect();
    (g, items)
}

#[tokio::test]
async fn bulk_equals_sequential() {
    let (g, items) = synthetic_group(60);
    let d = offline();
    let mut sequential = GroupState::new(g.clone());
    run(&d, &mut sequential, &items).await;
    let mut bulk = GroupState::new(g.clone());
    for chunk in items.chunks(17) {
        for r in d.decide_bulk(&mut bulk, chunk).await {
            r.unwrap();
        }
    }
    assert_eq!(bulk.to_canonical_json(), sequential.to_canonical_json());
    // and no fact is duplicated: same endpoints and relation never overlap in time
    let facts: Vec<&Fact> = sequential.facts().collect();
    for (i, a) in facts.iter().enumerate() {
        for b in &facts[i + 1..] {
            let same = a.source_node_uuid == b.source_node_uuid
                && a.target_node_uuid == b.target_node_uuid
                && a.name == b.name;
            assert!(
                !(same && a.valid_window().overlaps(&b.valid_window())),
                "{} / {}",
                a.fact,
                b.fact
            );
        }
    }
    // each person lives in at most one place at any time
    for t in [
        "2024-03-15T00:00:00Z",
        "2024-08-01T00:00:00Z",
        "2025-01-01T00:00:00Z",
    ] {
        for p in [
            "Ada Stone",
            "Ben Okafor",
            "Cleo Ruiz",
            "Dev Patel",
            "Eli Novak",
        ] {
            assert!(lives_at(&sequential, p, ts(t)).len() <= 1, "{p} at {t}");
        }
    }
}

// ---- Communities and sagas ----

fn decider_with(extractor: Arc<dyn Extractor>, incremental: bool) -> Decider {
    let mut config = DecideConfig::default();
    config.communities.incremental = incremental;
    Decider::new(
        extractor,
        Arc::new(TrigramEmbedder),
        Default::default(),
        config,
    )
}

fn build(g: &GroupId, n: u128, at: &str) -> Accepted {
    Accepted {
        command: Command::BuildCommunities {
            uuid: Uuid::from_u128(n),
            group_id: g.clone(),
        },
        tx_time: ts(at),
        source: None,
    }
}

fn summarize_saga(g: &GroupId, n: u128, saga: &str, at: &str) -> Accepted {
    Accepted {
        command: Command::SummarizeSaga {
            uuid: Uuid::from_u128(n),
            group_id: g.clone(),
            saga: saga.into(),
        },
        tx_time: ts(at),
        source: None,
    }
}

/// Decides and applies one command; returns its batch.
async fn step(d: &Decider, s: &mut GroupState, a: &Accepted) -> chronicle_model::EventBatch {
    let batch = d.decide(s, a).await.expect("decides");
    apply_batch(s, &batch);
    batch
}

/// The community events of a batch, by kind name, with member names.
fn community_events(s: &GroupState, b: &chronicle_model::EventBatch) -> Vec<(String, Vec<String>)> {
    use chronicle_model::EventKind;
    b.events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::CommunityBuilt { community } | EventKind::CommunityUpdated { community } => {
                let mut names: Vec<String> = community
                    .members
                    .iter()
                    .map(|m| s.get_entity(m).map_or("?".into(), |x| x.name.clone()))
                    .collect();
                names.sort();
                Some((e.kind.name().to_owned(), names))
            }
            EventKind::CommunityDissolved { community_uuid } => {
                Some((e.kind.name().to_owned(), vec![community_uuid.to_string()]))
            }
            _ => None,
        })
        .collect()
}

const CLUSTER_A: [&str; 2] = [
    "Ada Stone works at Initech. Ada Stone lives in Oslo.",
    "Ben Okafor works at Initech. Ben Okafor lives in Oslo.",
];
const CLUSTER_B: [&str; 2] = [
    "Cleo Ruiz works at Globex. Cleo Ruiz lives in Lima.",
    "Dev Patel works at Globex. Dev Patel lives in Lima.",
];

async fn two_clusters(d: &Decider, g: &GroupId) -> GroupState {
    let mut s = GroupState::new(g.clone());
    let texts = CLUSTER_A.iter().chain(&CLUSTER_B);
    let items: Vec<Accepted> = texts
        .enumerate()
        .map(|(i, t)| {
            episode(
                g,
                100 + i as u128,
                t,
                &format!("2024-01-{:02}T00:00:00Z", i + 1),
            )
        })
        .collect();
    run(d, &mut s, &items).await;
    s
}

fn names(v: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    out.sort();
    out
}

#[tokio::test]
async fn two_clear_clusters_become_two_communities_deterministically() {
    let g = group("clusters");
    let d = offline();
    let mut s = two_clusters(&d, &g).await;
    let first = d
        .decide(&s, &build(&g, 900, "2024-02-01T00:00:00Z"))
        .await
        .unwrap();
    let again = d
        .decide(&s, &build(&g, 900, "2024-02-01T00:00:00Z"))
        .await
        .unwrap();
    let strip = |mut b: chronicle_model::EventBatch| {
        b.stats = None;
        b
    };
    assert_eq!(strip(first.clone()), strip(again), "deterministic");
    assert_eq!(
        community_events(&s, &first),
        vec![
            (
                "community_built".into(),
                names(&["Ada Stone", "Ben Okafor", "Initech", "Oslo"])
            ),
            (
                "community_built".into(),
                names(&["Cleo Ruiz", "Dev Patel", "Globex", "Lima"])
            ),
        ]
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
    );
    assert!(
        first.stats.as_ref().unwrap().llm_calls.is_empty(),
        "offline: no model calls"
    );
    apply_batch(&mut s, &first);
    let communities: Vec<_> = s.communities().cloned().collect();
    assert_eq!(communities.len(), 2);
    for c in &communities {
        assert!(c.name_embedding.is_some(), "names are embedded for search");
        assert_eq!(c.created_at, ts("2024-02-01T00:00:00Z"));
        // Named after three central members (equally central here: by name).
        let member_names: Vec<&str> = c
            .members
            .iter()
            .map(|m| s.get_entity(m).unwrap().name.as_str())
            .collect();
        let named: Vec<&str> = c.name.split(", ").collect();
        assert_eq!(named.len(), 3, "{}", c.name);
        assert!(named.iter().all(|n| member_names.contains(n)), "{}", c.name);
        // Offline: an extractive summary of the internal facts.
        let employer = if member_names.contains(&"Initech") {
            "works at Initech"
        } else {
            "works at Globex"
        };
        assert!(c.summary.contains(employer), "{}", c.summary);
    }

    // Nothing changed: a rebuild decides nothing.
    let unchanged = step(&d, &mut s, &build(&g, 901, "2024-02-02T00:00:00Z")).await;
    assert!(unchanged.events.is_empty(), "{:?}", unchanged.events);

    // A new member for one cluster: only that community is updated, same id.
    let a_uuid = s
        .communities()
        .find(|c| c.summary.contains("Initech"))
        .unwrap()
        .uuid;
    step(
        &d,
        &mut s,
        &episode(
            &g,
            110,
            "Eli Novak works at Initech.",
            "2024-02-03T00:00:00Z",
        ),
    )
    .await;
    let grown = step(&d, &mut s, &build(&g, 902, "2024-02-04T00:00:00Z")).await;
    assert_eq!(
        community_events(&s, &grown),
        vec![(
            "community_updated".into(),
            names(&["Ada Stone", "Ben Okafor", "Eli Novak", "Initech", "Oslo"])
        )]
    );
    let a = s.get_community(&a_uuid).expect("kept its id");
    assert_eq!(a.created_at, ts("2024-02-01T00:00:00Z"), "first built then");

    // A cluster whose facts are all retracted is dissolved; the other stays untouched.
    let b_uuid = s
        .communities()
        .find(|c| c.summary.contains("Globex"))
        .unwrap()
        .uuid;
    for (k, ep) in [102u128, 103].into_iter().enumerate() {
        let retract = Accepted {
            command: Command::RetractEpisode {
                uuid: Uuid::from_u128(950 + k as u128),
                group_id: g.clone(),
                episode_uuid: Uuid::from_u128(ep),
            },
            tx_time: ts("2024-03-01T00:00:00Z").saturating_add_micros(k as i64),
            source: None,
        };
        step(&d, &mut s, &retract).await;
    }
    let dissolved = step(&d, &mut s, &build(&g, 903, "2024-03-02T00:00:00Z")).await;
    assert_eq!(
        community_events(&s, &dissolved),
        vec![("community_dissolved".into(), vec![b_uuid.to_string()])]
    );
    assert_eq!(s.communities().count(), 1);
}

#[tokio::test]
async fn a_rebuild_calls_the_model_only_for_changed_communities() {
    let g = group("calls");
    let model = Arc::new(ModelLike {
        entity_verdict: None,
        calls: Mutex::new(Vec::new()),
    });
    let d = decider_with(model.clone(), false);
    let mut s = two_clusters(&d, &g).await;
    let summarize_calls = || {
        model
            .calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| **c == "summarize")
            .count()
    };
    let calls = |b: &chronicle_model::EventBatch| {
        b.stats
            .as_ref()
            .unwrap()
            .llm_calls
            .get("summarize_communities")
            .copied()
            .unwrap_or(0)
    };
    let before = summarize_calls();
    let built = step(&d, &mut s, &build(&g, 900, "2024-02-01T00:00:00Z")).await;
    assert_eq!(calls(&built), 1, "both communities in one call");
    assert_eq!(summarize_calls() - before, 1);
    let unchanged = step(&d, &mut s, &build(&g, 901, "2024-02-02T00:00:00Z")).await;
    assert_eq!(calls(&unchanged), 0);
    step(
        &d,
        &mut s,
        &episode(
            &g,
            110,
            "Cleo Ruiz likes Dev Patel.",
            "2024-02-03T00:00:00Z",
        ),
    )
    .await;
    let changed = step(&d, &mut s, &build(&g, 902, "2024-02-04T00:00:00Z")).await;
    assert_eq!(
        community_events(&s, &changed),
        vec![(
            "community_updated".into(),
            names(&["Cleo Ruiz", "Dev Patel", "Globex", "Lima"])
        )],
        "same members, new internal fact: re-summarized"
    );
    assert_eq!(calls(&changed), 1);
    // A model is also given the central members' summaries.
    let globex = s
        .communities()
        .find(|c| c.summary.contains("Globex"))
        .unwrap();
    assert!(globex.summary.contains(':'), "{}", globex.summary);
}

#[tokio::test]
async fn incremental_maintenance_touches_only_the_episodes_communities() {
    let g = group("incremental");
    let d = offline();
    let mut s = two_clusters(&d, &g).await;
    step(&d, &mut s, &build(&g, 900, "2024-02-01T00:00:00Z")).await;
    let before: BTreeMap<Uuid, chronicle_model::Community> =
        s.communities().map(|c| (c.uuid, c.clone())).collect();
    let model = Arc::new(ModelLike {
        entity_verdict: None,
        calls: Mutex::new(Vec::new()),
    });
    let inc = decider_with(model.clone(), true);

    // A new person at Initech joins Initech's community; Globex's is not touched.
    let joined = step(
        &inc,
        &mut s,
        &episode(
            &g,
            110,
            "Eli Novak works at Initech.",
            "2024-02-03T00:00:00Z",
        ),
    )
    .await;
    assert_eq!(
        community_events(&s, &joined),
        vec![(
            "community_updated".into(),
            names(&["Ada Stone", "Ben Okafor", "Eli Novak", "Initech", "Oslo"])
        )]
    );
    assert_eq!(
        joined
            .stats
            .as_ref()
            .unwrap()
            .llm_calls
            .get("summarize_communities"),
        Some(&1)
    );
    let globex = before
        .values()
        .find(|c| c.summary.contains("Globex"))
        .unwrap();
    assert_eq!(s.get_community(&globex.uuid), Some(globex));

    // Strangers form a community of their own, with an id derived from the episode.
    let fresh = step(
        &inc,
        &mut s,
        &episode(&g, 111, "Fay Berg lives in Kyiv.", "2024-02-04T00:00:00Z"),
    )
    .await;
    assert_eq!(
        community_events(&s, &fresh),
        vec![("community_built".into(), names(&["Fay Berg", "Kyiv"]))]
    );
    let kyiv = s
        .communities()
        .find(|c| c.summary.contains("Kyiv"))
        .unwrap();
    assert_eq!(
        kyiv.uuid,
        chronicle_model::derive_id(Uuid::from_u128(111), chronicle_model::IdKind::Community, 0)
    );

    // A restatement changes no community.
    let restated = step(
        &inc,
        &mut s,
        &episode(&g, 112, "Fay Berg lives in Kyiv.", "2024-02-05T00:00:00Z"),
    )
    .await;
    assert!(community_events(&s, &restated).is_empty());

    // The fold's view of the communities agrees with the incremental one:
    // a full rebuild finds nothing to change.
    let rebuilt = step(&d, &mut s, &build(&g, 901, "2024-02-06T00:00:00Z")).await;
    assert!(
        rebuilt.events.is_empty(),
        "{:?}",
        community_events(&s, &rebuilt)
    );
}

/// An extractor that records the summary requests it gets (and is counted as a model).
struct SummaryRecorder(Mutex<Vec<SummaryRequest>>);

#[async_trait]
impl Extractor for SummaryRecorder {
    fn describe(&self) -> String {
        "recorder".into()
    }
    async fn extract(&self, r: &ExtractionRequest) -> Result<Extraction, LlmError> {
        OfflineExtractor.extract(r).await
    }
    async fn resolve_entities(
        &self,
        r: &EntityResolutionRequest,
    ) -> Result<Vec<Option<usize>>, LlmError> {
        Ok(vec![None; r.entities.len()])
    }
    async fn resolve_facts(
        &self,
        r: &FactResolutionRequest,
    ) -> Result<Vec<FactResolution>, LlmError> {
        Ok(vec![FactResolution::default(); r.facts.len()])
    }
    async fn summarize(&self, r: &SummaryRequest) -> Result<Vec<String>, LlmError> {
        self.0.lock().unwrap().push(r.clone());
        OfflineExtractor.summarize(r).await
    }
}

fn in_saga(mut a: Accepted, saga: &str) -> Accepted {
    if let Command::AddEpisode(e) = &mut a.command {
        e.saga = Some(saga.into());
    }
    a
}

#[tokio::test]
async fn a_saga_summary_absorbs_only_episodes_newer_than_its_watermark() {
    for model in [false, true] {
        let g = group("saga");
        let recorder = Arc::new(SummaryRecorder(Mutex::new(Vec::new())));
        let d = if model {
            decider_with(recorder.clone(), false)
        } else {
            offline()
        };
        let mut s = GroupState::new(g.clone());
        run(
            &d,
            &mut s,
            &[
                in_saga(
                    episode(&g, 1, "Ada Stone lives in Oslo.", "2025-01-10T00:00:00Z"),
                    "trip",
                ),
                in_saga(
                    episode(&g, 2, "Ada Stone works at Initech.", "2025-02-10T00:00:00Z"),
                    "trip",
                ),
                episode(&g, 3, "Ada Stone likes jazz.", "2025-02-11T00:00:00Z"),
            ],
        )
        .await;
        let first = step(
            &d,
            &mut s,
            &summarize_saga(&g, 10, "trip", "2025-02-20T00:00:00Z"),
        )
        .await;
        assert_eq!(first.events.len(), 1);
        let saga = s.saga_by_name("trip").unwrap().clone();
        assert_eq!(
            saga.last_summarized_episode_valid_at,
            Some(ts("2025-02-10T00:00:00Z"))
        );
        assert!(
            saga.summary.contains("Oslo") && saga.summary.contains("Initech"),
            "{}",
            saga.summary
        );
        assert!(!saga.summary.contains("jazz"), "not a saga episode");

        // A newer episode and a late one from before the watermark.
        run(
            &d,
            &mut s,
            &[
                in_saga(
                    episode(&g, 4, "Ada Stone moved to Lima.", "2025-03-10T00:00:00Z"),
                    "trip",
                ),
                in_saga(
                    episode(&g, 5, "Ada Stone likes chess.", "2025-01-01T00:00:00Z"),
                    "trip",
                ),
            ],
        )
        .await;
        recorder.0.lock().unwrap().clear();
        let second = step(
            &d,
            &mut s,
            &summarize_saga(&g, 11, "trip", "2025-03-20T00:00:00Z"),
        )
        .await;
        let saga = s.saga_by_name("trip").unwrap();
        assert_eq!(
            saga.last_summarized_episode_valid_at,
            Some(ts("2025-03-10T00:00:00Z"))
        );
        assert!(saga.summary.contains("Lima"), "{}", saga.summary);
        assert!(!saga.summary.contains("chess"), "{}", saga.summary);
        let stats = second.stats.as_ref().unwrap();
        if model {
            assert_eq!(stats.llm_calls.get("summarize_saga"), Some(&1));
            let requests = recorder.0.lock().unwrap();
            assert_eq!(requests.len(), 1);
            let material = &requests[0].items[0].new_material;
            assert_eq!(material.len(), 1, "only the newer episode: {material:?}");
            assert!(material[0].contains("Lima"));
            assert!(requests[0].items[0].current.contains("Initech"));
        } else {
            assert!(stats.llm_calls.is_empty());
        }
        // Nothing newer: nothing decided; an unknown saga likewise.
        let third = step(
            &d,
            &mut s,
            &summarize_saga(&g, 12, "trip", "2025-03-21T00:00:00Z"),
        )
        .await;
        assert!(third.events.is_empty());
        let unknown = step(
            &d,
            &mut s,
            &summarize_saga(&g, 13, "nope", "2025-03-22T00:00:00Z"),
        )
        .await;
        assert!(unknown.events.is_empty());
    }
}

#[tokio::test]
async fn bulk_equals_sequential_with_incremental_communities() {
    let (g, items) = synthetic_group(60);
    let d = decider_with(Arc::new(OfflineExtractor), true);
    let mut sequential = GroupState::new(g.clone());
    run(&d, &mut sequential, &items).await;
    assert!(
        sequential.communities().count() > 0,
        "communities were maintained"
    );
    let mut bulk = GroupState::new(g.clone());
    for chunk in items.chunks(17) {
        for r in d.decide_bulk(&mut bulk, chunk).await {
            r.unwrap();
        }
    }
    assert_eq!(bulk.to_canonical_json(), sequential.to_canonical_json());
}

#[tokio::test]
async fn a_message_is_keyed_with_the_turn_before_it_and_a_document_alone() {
    let g = group("g");
    let d = offline();
    let mut s = GroupState::new(g.clone());
    let at = "2023-05-08T13:56:00Z";
    let question = "Caroline: Did you go to the support group?";
    let answer = "Melanie: Yes, yesterday!";
    let mut document = episode(&g, 3, "Melanie runs a pottery class.", at);
    if let Command::AddEpisode(e) = &mut document.command {
        e.source = EpisodeType::Text;
    }
    // The vectors ride on the decisions (the state keeps none: see
    // `GroupState::put_episode`).
    let mut vectors = std::collections::BTreeMap::new();
    for a in [
        episode(&g, 1, question, at),
        episode(&g, 2, answer, at),
        document,
    ] {
        let batch = d.decide(&s, &a).await.expect("decides");
        for e in &batch.events {
            if let chronicle_model::EventKind::EpisodeRecorded { episode } = &e.kind {
                vectors.insert(episode.uuid, episode.content_embedding.clone());
            }
        }
        apply_batch(&mut s, &batch);
    }
    let vector = |n: u128| vectors[&Uuid::from_u128(n)].clone().expect("embedded");
    // as every embedding enters the graph: rounded to half precision
    let embed = |t: String| async move {
        let mut v = TrigramEmbedder.embed(&[t]).await.unwrap().remove(0);
        chronicle_model::round_to_half(&mut v).unwrap();
        v
    };
    assert_eq!(vector(1), embed(question.into()).await);
    assert_eq!(vector(2), embed(format!("{question}\n{answer}")).await);
    assert_eq!(
        vector(3),
        embed("Melanie runs a pottery class.".into()).await
    );
}

#[test]
fn a_retrieval_key_is_bounded_and_cut_at_char_boundaries() {
    let long_previous = "é".repeat(1_000) + " the question?";
    let key = crate::decide::retrieval_key(Some(&long_previous), &"ü".repeat(5_000));
    assert_eq!(key.chars().count(), 2_000);
    assert!(key.starts_with(&"é".repeat(386)));
    assert!(key.contains(" the question?\nü"));
    assert_eq!(crate::decide::retrieval_key(None, "hi"), "hi");
}

fn triple(g: &GroupId, n: u128, json: &str, at: &str) -> Accepted {
    let mut a = episode(g, n, json, at);
    if let Command::AddEpisode(e) = &mut a.command {
        e.source = EpisodeType::FactTriple;
    }
    a
}

/// What holds at `t`, by names: order-free, so arrivals in any order compare.
fn truth_at(state: &GroupState, t: Timestamp) -> Vec<(String, String, String)> {
    let name = |u: &Uuid| {
        state
            .get_entity(u)
            .map(|e| e.name.clone())
            .unwrap_or_default()
    };
    let mut out: Vec<_> = state
        .facts()
        .filter(|f| f.is_valid_at(t))
        .map(|f| {
            (
                name(&f.source_node_uuid),
                f.name.clone(),
                name(&f.target_node_uuid),
            )
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn a_reserve_team_is_never_its_club_in_either_order() {
    let d = offline();
    let plays = |n: u128, who: &str, team: &str| {
        triple(
            &group("teams"),
            n,
            &format!(r#"{{"source":"{who}","relation":"PLAYS_FOR","target":"{team}"}}"#),
            "2020-01-01T00:00:00Z",
        )
    };
    let one = [
        plays(1, "Ann Smith", "FC Barcelona"),
        plays(2, "Bea Jones", "FC Barcelona B"),
    ];
    let other = [
        plays(2, "Bea Jones", "FC Barcelona B"),
        plays(1, "Ann Smith", "FC Barcelona"),
    ];
    for order in [one, other] {
        let mut s = GroupState::new(group("teams"));
        run(&d, &mut s, &order).await;
        let mut names: Vec<_> = s.entities().map(|e| e.name.clone()).collect();
        names.sort();
        assert_eq!(
            names,
            ["Ann Smith", "Bea Jones", "FC Barcelona", "FC Barcelona B"]
        );
    }
}

#[tokio::test]
async fn facts_with_the_same_start_both_stand_whatever_arrives_first() {
    let d = offline();
    let lives = |n: u128, city: &str| {
        triple(
            &group("ties"),
            n,
            &format!(
                r#"{{"source":"Cai","relation":"LIVES_IN","target":"{city}","valid_at":"2020-01-01T00:00:00Z"}}"#
            ),
            "2024-01-01T00:00:00Z",
        )
    };
    let mut answers = Vec::new();
    for order in [
        [lives(1, "Oslo"), lives(2, "Bergen")],
        [lives(2, "Bergen"), lives(1, "Oslo")],
    ] {
        let mut s = GroupState::new(group("ties"));
        run(&d, &mut s, &order).await;
        assert!(
            s.facts().all(|f| f.invalid_at.is_none()),
            "neither is cut to zero length"
        );
        answers.push(truth_at(&s, ts("2021-01-01T00:00:00Z")));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].len(), 2);
}

#[tokio::test]
async fn an_extracted_fact_that_ends_before_it_starts_is_dropped_not_made_eternal() {
    let g = group("inverted");
    let d = offline();
    let mut s = GroupState::new(g.clone());
    let mut a = episode(
        &g,
        1,
        r#"{"entities":[{"name":"Dana","entity_type_id":1},{"name":"Bergen","entity_type_id":2}],"facts":[{"source":"Dana","target":"Bergen","relation":"LIVES_IN","fact":"Dana lived in Bergen","valid_at":"2020-01-01T00:00:00Z","invalid_at":"2019-01-01T00:00:00Z"}]}"#,
        "2024-05-01T00:00:00Z",
    );
    if let Command::AddEpisode(e) = &mut a.command {
        e.source = EpisodeType::Json;
    }
    run(&d, &mut s, &[a]).await;
    assert_eq!(s.facts().count(), 0);
}

#[tokio::test]
async fn one_huge_episode_contributes_a_bounded_graph() {
    let g = group("huge");
    let d = offline();
    let config = DecideConfig::default();
    let mut content = String::new();
    let mut n = 0;
    while content.len() < 256 * 1024 - 64 {
        content.push_str(&format!("Person{n} Walker lives in Town{n}. "));
        n += 1;
    }
    assert!(n > 5_000, "{n} sentences");
    let mut s = GroupState::new(g.clone());
    let started = std::time::Instant::now();
    run(
        &d,
        &mut s,
        &[episode(&g, 1, &content, "2024-01-01T00:00:00Z")],
    )
    .await;
    let took = started.elapsed();
    assert!(s.entities().count() <= config.max_entities_per_episode);
    assert!(s.facts().count() <= config.max_facts_per_episode);
    assert!(s.facts().count() > 10, "the first facts are kept");
    eprintln!(
        "{n} sentences, {} bytes: {} entities, {} facts in {took:?}",
        content.len(),
        s.entities().count(),
        s.facts().count()
    );
}

fn plays_for(n: u128, from: i32, to: i32) -> Accepted {
    triple(
        &group("windows"),
        n,
        &format!(
            r#"{{"source":"Ann Smith","relation":"PLAYS_FOR","target":"FC Barcelona","valid_at":"{from}-01-01T00:00:00Z","invalid_at":"{to}-01-01T00:00:00Z"}}"#
        ),
        "2024-01-01T00:00:00Z",
    )
}

fn year(y: i32) -> Timestamp {
    ts(&format!("{y}-07-01T00:00:00Z"))
}

#[tokio::test]
async fn a_restatement_widens_the_window_and_its_retraction_narrows_it() {
    let d = offline();
    let mut s = GroupState::new(group("windows"));
    run(
        &d,
        &mut s,
        &[plays_for(1, 1990, 1995), plays_for(2, 1994, 2000)],
    )
    .await;
    let facts: Vec<_> = s.facts().collect();
    assert_eq!(facts.len(), 1, "one fact, both episodes its provenance");
    let f = facts[0];
    assert_eq!(
        (f.valid_at, f.invalid_at),
        (
            Some(ts("1990-01-01T00:00:00Z")),
            Some(ts("2000-01-01T00:00:00Z"))
        )
    );
    assert_eq!(f.episodes, [Uuid::from_u128(1), Uuid::from_u128(2)]);
    assert_eq!(
        truth_at(&s, year(1997)).len(),
        1,
        "as of 1997 she plays there"
    );

    // Adjacent windows join too; a window inside the fact changes nothing.
    run(
        &d,
        &mut s,
        &[plays_for(3, 2000, 2003), plays_for(4, 1991, 1992)],
    )
    .await;
    let f = s.facts().next().unwrap();
    assert_eq!(f.invalid_at, Some(ts("2003-01-01T00:00:00Z")));
    assert_eq!(s.facts().count(), 1);

    // Retracting the widening episodes narrows the fact again.
    for n in [3, 2] {
        let retract = Accepted {
            command: Command::RetractEpisode {
                group_id: group("windows"),
                episode_uuid: Uuid::from_u128(n),
                uuid: Uuid::from_u128(100 + n),
            },
            tx_time: ts("2024-02-01T00:00:00Z"),
            source: None,
        };
        run(&d, &mut s, &[retract]).await;
    }
    let f = s.facts().next().unwrap();
    assert_eq!(
        (f.valid_at, f.invalid_at),
        (
            Some(ts("1990-01-01T00:00:00Z")),
            Some(ts("1995-01-01T00:00:00Z"))
        )
    );
    assert!(
        f.stated_windows.len() != 1,
        "a single window is the fact's own"
    );
    assert!(truth_at(&s, year(1997)).is_empty());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// However restatements of one fact arrive, the fact holds exactly in
    /// the union of the windows stated.
    #[test]
    fn restatements_in_any_order_hold_in_the_union_of_their_windows(
        windows in proptest::collection::vec((1980i32..2020, 1i32..8), 1..6),
        order in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        let mut items: Vec<Accepted> = windows
            .iter()
            .enumerate()
            .map(|(i, (from, len))| plays_for(i as u128 + 1, *from, from + len))
            .collect();
        let k = order.index(items.len());
        items.rotate_left(k);
        if k % 2 == 1 {
            items.reverse();
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let s = rt.block_on(async {
            let mut s = GroupState::new(group("windows"));
            run(&offline(), &mut s, &items).await;
            s
        });
        for y in 1979..2030 {
            let expected = windows.iter().any(|(from, len)| (*from..from + len).contains(&y));
            proptest::prop_assert_eq!(!truth_at(&s, ts(&format!("{y}-07-01T00:00:00Z"))).is_empty(), expected, "year {}", y);
        }
    }

    /// Moves of one person (one place at a time), in any arrival order, give
    /// the same answer at every instant.
    #[test]
    fn moves_in_any_order_give_the_same_truth(
        starts in proptest::collection::vec(2000i32..2010, 2..6),
        order in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        let lives = |n: usize, city: usize, from: i32| triple(
            &group("moves"),
            n as u128 + 1,
            &format!(r#"{{"source":"Cai","relation":"LIVES_IN","target":"City {city}","valid_at":"{from}-01-01T00:00:00Z"}}"#),
            "2024-01-01T00:00:00Z",
        );
        let items: Vec<Accepted> = starts.iter().enumerate().map(|(i, y)| lives(i, i, *y)).collect();
        let mut shuffled = items.clone();
        shuffled.rotate_left(order.index(items.len()));
        shuffled.reverse();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let truth = |items: Vec<Accepted>| rt.block_on(async {
            let mut s = GroupState::new(group("moves"));
            run(&offline(), &mut s, &items).await;
            (1999..2012).map(|y| truth_at(&s, year(y))).collect::<Vec<_>>()
        });
        proptest::prop_assert_eq!(truth(items), truth(shuffled));
    }
}

/// Text that mixes arbitrary Unicode (including characters whose case
/// mappings change their byte length) with time expressions of any size.
fn hostile_content() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        "\\PC{0,40}",
        "[A-Z][a-z]{1,8} (moved to|lives in|works at|left) [A-Z][a-z]{1,8}",
        (0i64..i64::MAX, "(days|weeks|months|years|hours) ago")
            .prop_map(|(n, u)| format!("since {n} {u}")),
        (-100_000i32..100_000, 1u32..13).prop_map(|(y, m)| format!("in {y}-{m:02}")),
        Just("\u{212A}\u{0130}\u{1E9E}ﬃ".to_owned()),
        Just("Alice: I moved to Paris last summer.\n".to_owned()),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|p| p.join(" "))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// No content and no reference time makes a decision panic, and what
    /// it decides folds without panicking either.
    #[test]
    fn deciding_any_text_at_any_time_never_panics(
        contents in proptest::collection::vec(hostile_content(), 1..4),
        micros in Timestamp::MIN.as_micros()..=Timestamp::MAX.as_micros(),
        message in proptest::prelude::any::<bool>(),
    ) {
        let g = group("hostile");
        let at = Timestamp::from_micros(micros).expect("in range");
        let items: Vec<Accepted> = contents
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut a = episode(&g, i as u128 + 1, c, "2024-01-01T00:00:00Z");
                if let Command::AddEpisode(e) = &mut a.command {
                    e.reference_time = at;
                    if !message {
                        e.source = EpisodeType::Text;
                    }
                }
                a
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let d = offline();
            let mut s = GroupState::new(g.clone());
            for a in &items {
                if let Ok(batch) = d.decide(&s, a).await {
                    apply_batch(&mut s, &batch);
                }
            }
        });
    }
}

/// An embedder that answers NaN.
struct NanEmbedder;

#[async_trait]
impl Embedder for NanEmbedder {
    fn describe(&self) -> String {
        "nan".into()
    }
    fn dimension(&self) -> usize {
        2
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts.iter().map(|_| vec![0.5, f32::NAN]).collect())
    }
}

#[tokio::test]
async fn a_non_finite_embedding_fails_the_decision_instead_of_reaching_the_log() {
    let d = Decider::new(
        Arc::new(OfflineExtractor),
        Arc::new(NanEmbedder),
        Default::default(),
        DecideConfig::default(),
    );
    let g = group("nan");
    let s = GroupState::new(g.clone());
    let a = episode(&g, 1, "Alice: I moved to Paris.", "2024-01-01T00:00:00Z");
    assert!(matches!(
        d.decide(&s, &a).await,
        Err(crate::DecideError::NonFiniteEmbedding { .. })
    ));
}
