//! `chronicle bench communities`: community builds on synthetic graphs.
//!
//! A graph of N entities in planted clusters of 20 (one organization, one
//! city, 18 people who work at the one and live in the other and know two
//! neighbours; three bridges to the next cluster) is folded straight into a
//! group's state. Then, offline and with the OpenAI adapter against a local
//! instant fake model that counts every call:
//!
//! * a full build (`BuildCommunities`);
//! * a rebuild with nothing changed;
//! * one episode (a person changes employer, a newcomer moves in), then a
//!   rebuild: only the changed communities are re-summarized;
//! * the same episode decided with incremental maintenance: only the
//!   communities of its entities are touched, in the episode's decision.
//!
//! graphiti's pairwise merging would cost about one model call per member
//! (`entities_in_communities`); here calls scale with changed communities.
//! `record_bytes` is the size of the decision's graph-events record (a
//! decision is one record: mind the broker's message size limit).

use std::sync::Arc;
use std::time::Instant;

use chronicle_codec::EventBatchCodec;
use chronicle_engine::ontology::Ontology;
use chronicle_engine::ports::{Extractor, PromptKind};
use chronicle_engine::{
    Accepted, DecideConfig, Decider, GroupState, OfflineExtractor, apply_batch,
};
use chronicle_llm::fake::{FakeOpenAi, FakeReply, minimal_reply};
use chronicle_llm::{HashEmbedder, OpenAiExtractor};
use chronicle_model::{
    Attributes, Command, Entity, EpisodeType, EventBatch, EventKind, Fact, GroupId, NewEpisode,
    Timestamp,
};
use serde_json::{Value, json};
use uuid::Uuid;

const CLUSTER: usize = 20;
const CONSONANTS: &[u8] = b"bdfgklmnprstvz";
const VOWELS: &[u8] = b"aeiou";

/// A capitalized pseudo-word of `syllables` syllables, distinct for each `i`
/// below 70^syllables.
fn word(mut i: usize, syllables: usize) -> String {
    let mut out = String::new();
    for _ in 0..syllables {
        let s = i % (CONSONANTS.len() * VOWELS.len());
        i /= CONSONANTS.len() * VOWELS.len();
        out.push(CONSONANTS[s / VOWELS.len()] as char);
        out.push(VOWELS[s % VOWELS.len()] as char);
    }
    let mut c = out.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => out,
    }
}

fn person(i: usize) -> String {
    format!("{} {}", word(2 * i, 3), word(2 * i + 1, 3))
}

fn org(k: usize) -> String {
    format!("{} Corp", word(2 * k, 4))
}

fn city(k: usize) -> String {
    word(2 * k + 1, 4)
}

/// The synthetic group: its state and the names the probe episode uses.
struct Synthetic {
    state: GroupState,
    facts: usize,
    mover: String,
    other_org: String,
    first_city: String,
}

fn synthetic(group: &GroupId, entities: usize) -> anyhow::Result<Synthetic> {
    let clusters = entities.div_ceil(CLUSTER).max(2);
    let t0: Timestamp = "2024-01-01T00:00:00Z".parse()?;
    let mut state = GroupState::new(group.clone());
    let id = |kind: u64, n: usize| Uuid::from_u64_pair(kind, n as u64);
    let entity = |uuid: Uuid, name: String, label: &str, summary: String| Entity {
        uuid,
        name,
        group_id: group.clone(),
        labels: vec!["Entity".into(), label.into()],
        created_at: t0,
        name_embedding: None,
        summary,
        attributes: Attributes::new(),
    };
    let mut facts = 0usize;
    let mut fact = |s: Uuid, t: Uuid, relation: &str, sentence: String, citations: usize| {
        facts += 1;
        EventKind::FactCreated {
            fact: Fact {
                uuid: id(3, facts),
                group_id: group.clone(),
                source_node_uuid: s,
                target_node_uuid: t,
                name: relation.into(),
                fact: sentence,
                fact_embedding: None,
                episodes: (0..citations).map(|c| id(9, facts * 4 + c)).collect(),
                created_at: t0,
                valid_at: Some(t0),
                invalid_at: None,
                expired_at: None,
                reference_time: t0,
                attributes: Attributes::new(),
                invalidated_by: None,
                stated_windows: Vec::new(),
            },
        }
    };
    let people = CLUSTER - 2;
    for k in 0..clusters {
        let (o, c) = (id(1, 2 * k), id(1, 2 * k + 1));
        let mut kinds = vec![
            EventKind::EntityCreated {
                entity: entity(o, org(k), "Organization", String::new()),
            },
            EventKind::EntityCreated {
                entity: entity(c, city(k), "Location", String::new()),
            },
        ];
        for j in 0..people {
            let i = k * people + j;
            let (p, name) = (id(2, i), person(i));
            let summary = format!("{name} works at {}. {name} lives in {}.", org(k), city(k));
            kinds.push(EventKind::EntityCreated {
                entity: entity(p, name.clone(), "Person", summary),
            });
            kinds.push(fact(
                p,
                o,
                "WORKS_AT",
                format!("{name} works at {}", org(k)),
                1 + j % 3,
            ));
            kinds.push(fact(
                p,
                c,
                "LIVES_IN",
                format!("{name} lives in {}", city(k)),
                1 + j % 2,
            ));
            if j > 0 {
                let prev = person(i - 1);
                kinds.push(fact(
                    p,
                    id(2, i - 1),
                    "KNOWS",
                    format!("{name} knows {prev}"),
                    1,
                ));
            }
            // Bridges to the next cluster.
            if j % 6 == 5 && k + 1 < clusters {
                let there = (k + 1) * people + j;
                kinds.push(fact(
                    p,
                    id(2, there),
                    "KNOWS",
                    format!("{name} knows {}", person(there)),
                    1,
                ));
            }
        }
        let batch = EventBatch::new(id(8, k), group.clone(), t0, None, kinds);
        apply_batch(&mut state, &batch);
    }
    Ok(Synthetic {
        state,
        facts,
        mover: person(3),
        other_org: org(1),
        first_city: city(0),
    })
}

/// A local OpenAI-compatible server answering instantly: extraction with the
/// offline extractor's reading, summaries with a placeholder per item.
async fn counting_llm() -> anyhow::Result<FakeOpenAi> {
    let ontology = Ontology::default();
    let fake = FakeOpenAi::start().await?;
    fake.set_responder(Arc::new(move |req| match req.kind() {
        Some(PromptKind::Extract) => crate::ingest::offline_extraction(req, &ontology),
        Some(
            PromptKind::SummarizeCommunities
            | PromptKind::SummarizeEntities
            | PromptKind::SummarizeSaga,
        ) => FakeReply::Json(json!({
            "answers": (0..req.item_count())
                .map(|i| json!({"id": i, "summary": format!("Summary {i}.")}))
                .collect::<Vec<_>>(),
        })),
        _ => minimal_reply(req),
    }));
    Ok(fake)
}

fn decider(extractor: Arc<dyn Extractor>, incremental: bool) -> Decider {
    let mut config = DecideConfig::default();
    config.communities.incremental = incremental;
    Decider::new(
        extractor,
        Arc::new(HashEmbedder::new(384)),
        Ontology::default(),
        config,
    )
}

fn build(group: &GroupId, n: u64, tx: Timestamp) -> Accepted {
    Accepted {
        command: Command::BuildCommunities {
            uuid: Uuid::from_u64_pair(0xb0, n),
            group_id: group.clone(),
        },
        tx_time: tx,
        source: None,
    }
}

/// What one decision did and cost.
struct Run {
    seconds: f64,
    batch: EventBatch,
    http_requests: Option<usize>,
}

impl Run {
    fn calls(&self, kind: Option<PromptKind>) -> u64 {
        let stats = self.batch.stats.clone().unwrap_or_default();
        match kind {
            Some(k) => stats.llm_calls.get(k.as_str()).copied().unwrap_or(0),
            None => stats.llm_calls.values().sum(),
        }
    }

    fn changed(&self) -> usize {
        self.batch
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    EventKind::CommunityBuilt { .. }
                        | EventKind::CommunityUpdated { .. }
                        | EventKind::CommunityDissolved { .. }
                )
            })
            .count()
    }

    fn json(&self) -> Value {
        json!({
            "seconds": self.seconds,
            "record_bytes": EventBatchCodec::new().encode(&self.batch).len(),
            "communities_changed": self.changed(),
            "llm_calls_summarize_communities": self.calls(Some(PromptKind::SummarizeCommunities)),
            "llm_calls_total": self.calls(None),
            "llm_http_requests": self.http_requests,
        })
    }
}

async fn decide(
    d: &Decider,
    state: &mut GroupState,
    a: &Accepted,
    fake: Option<&FakeOpenAi>,
) -> anyhow::Result<Run> {
    if let Some(f) = fake {
        f.reset();
    }
    let started = Instant::now();
    let batch = d.decide(state, a).await?;
    let seconds = started.elapsed().as_secs_f64();
    apply_batch(state, &batch);
    Ok(Run {
        seconds,
        batch,
        http_requests: fake.map(|f| f.stats().chat_requests),
    })
}

/// Runs the benchmark at each size; one JSON object per size and extractor.
pub async fn run(sizes: &[usize]) -> anyhow::Result<()> {
    let fake = counting_llm().await?;
    let group = GroupId::new("bench-communities")?;
    for &n in sizes {
        let started = Instant::now();
        let synthetic = synthetic(&group, n)?;
        let fold_seconds = started.elapsed().as_secs_f64();
        let entities = synthetic.state.entities().count();
        for model in [false, true] {
            let extractor: Arc<dyn Extractor> = if model {
                Arc::new(OpenAiExtractor::new(fake.config())?)
            } else {
                Arc::new(OfflineExtractor)
            };
            let counted = model.then_some(&fake);
            let manual = decider(extractor.clone(), false);
            let incremental = decider(extractor, true);
            let tx = |s: i64| {
                "2025-01-01T00:00:00Z"
                    .parse::<Timestamp>()
                    .map(|t| t.saturating_add_micros(s * 1_000_000))
            };
            let mut state = synthetic.state.clone();
            let built = decide(&manual, &mut state, &build(&group, 1, tx(0)?), counted).await?;
            let communities: Vec<usize> = state.communities().map(|c| c.members.len()).collect();
            let unchanged = decide(&manual, &mut state, &build(&group, 2, tx(1)?), counted).await?;

            let episode = Accepted {
                command: Command::AddEpisode(NewEpisode {
                    uuid: Uuid::from_u64_pair(0xe0, n as u64),
                    group_id: group.clone(),
                    name: "probe".into(),
                    content: format!(
                        "{} works at {}. Zeno Quill lives in {}.",
                        synthetic.mover, synthetic.other_org, synthetic.first_city
                    ),
                    source: EpisodeType::Message,
                    source_description: "bench".into(),
                    reference_time: "2025-01-01T00:00:00Z".parse()?,
                    previous_episode_uuids: Some(Vec::new()),
                    saga: None,
                    metadata: Default::default(),
                }),
                tx_time: tx(2)?,
                source: None,
            };
            // Incremental: the episode's own decision maintains its communities.
            let mut inc_state = state.clone();
            let inc = decide(&incremental, &mut inc_state, &episode, counted).await?;
            // Manual: the episode, then a rebuild.
            decide(&manual, &mut state, &episode, counted).await?;
            let rebuilt = decide(&manual, &mut state, &build(&group, 3, tx(3)?), counted).await?;

            let in_communities: usize = communities.iter().sum();
            println!(
                "{}",
                json!({
                    "bench": "communities",
                    "extractor": if model { "openai (instant fake, counted)" } else { "offline" },
                    "entities": entities,
                    "facts": synthetic.facts,
                    "fold_seconds": fold_seconds,
                    "communities": communities.len(),
                    "largest_community": communities.iter().max(),
                    "entities_in_communities": in_communities,
                    "build": built.json(),
                    "rebuild_unchanged": unchanged.json(),
                    "rebuild_after_one_episode": rebuilt.json(),
                    "incremental_episode": inc.json(),
                })
            );
        }
    }
    Ok(())
}
