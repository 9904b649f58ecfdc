//! `chronicle bench search`: projection (index build) rate, search latency
//! at scale, rebuild rate, size on disk and memory.
//!
//! Facts are generated as graph events (people, places, organizations and
//! things with relations), appended to the embedded log as decisions, and
//! projected; vectors come from the hashed embedder so model cost is
//! excluded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chronicle_engine::ports::Embedder;
use chronicle_llm::HashEmbedder;
use chronicle_log::NewRecord;
use chronicle_model::{
    Attributes, Entity, Episode, EpisodeType, EventBatch, EventKind, Fact, GroupId, IdKind,
    Timestamp, derive_id,
};
use serde_json::json;
use uuid::Uuid;

use chronicle::config::{EmbedderKind, ExtractorKind, Settings, StoreUri};
use chronicle::node::Node;
use chronicle_query::{Query, SearchRequest};

const RELATIONS: [(&str, &str); 6] = [
    ("LIVES_IN", "lives in"),
    ("WORKS_AT", "works at"),
    ("LIKES", "likes"),
    ("OWNS", "owns"),
    ("VISITED", "visited"),
    ("KNOWS", "knows"),
];
const THINGS: [&str; 24] = [
    "Oslo",
    "Lima",
    "Kyiv",
    "Pune",
    "Nice",
    "Accra",
    "Quito",
    "Hanoi",
    "Initech",
    "Globex",
    "Umbrella",
    "Hooli",
    "jazz",
    "chess",
    "sailing",
    "espresso",
    "a bicycle",
    "a piano",
    "a cabin",
    "the opera",
    "Perth",
    "Cork",
    "Acme",
    "Wonka",
];
const FIRST: [&str; 20] = [
    "Ada", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jade", "Kofi", "Lena",
    "Milo", "Nora", "Omar", "Pia", "Quinn", "Rosa", "Sami", "Tove",
];
const LAST: [&str; 20] = [
    "Stone", "Okafor", "Ruiz", "Patel", "Novak", "Berg", "Costa", "Tanaka", "Weiss", "Adeyemi",
    "Lind", "Moreau", "Silva", "Kowalski", "Haddad", "Nguyen", "Olsen", "Rossi", "Sato", "Yilmaz",
];

use super::mix;

fn person(i: u64) -> String {
    format!(
        "{} {} {}",
        FIRST[(i % 20) as usize],
        LAST[((i / 20) % 20) as usize],
        i / 400
    )
}

/// Generates the decisions of `facts` facts over `groups` groups, ten facts per decision.
async fn generate(
    facts: usize,
    groups: usize,
    embedder: &HashEmbedder,
) -> anyhow::Result<Vec<EventBatch>> {
    let base: Timestamp = "2025-01-01T00:00:00Z".parse()?;
    let per_group = facts.div_ceil(groups.max(1));
    let people_per_group = (per_group / 4).max(1) as u64;
    let mut out = Vec::new();
    for g in 0..groups {
        let group = GroupId::new(format!("bench-{g:03}"))?;
        let mut known: std::collections::HashMap<String, Uuid> = Default::default();
        let mut made = 0usize;
        let mut episode_no = 0u64;
        // Every candidate draws a fresh number, so a skipped self-loop never
        // repeats (keying on `made` did, forever, when a whole episode's
        // candidates were self-loops).
        let mut draw = 0u64;
        let quota = per_group.min(facts.saturating_sub(g * per_group));
        while made < quota {
            let episode = Uuid::from_u64_pair(g as u64, episode_no);
            let tx = base.saturating_add_micros(((g * per_group + made) as i64) * 1_000);
            let mut kinds = Vec::new();
            let mut fact_kinds = Vec::new();
            let mut texts = Vec::new();
            let mut pending: Vec<(String, String, &str, String)> = Vec::new();
            for _ in 0..10.min(quota - made) {
                let r = mix((g as u64) << 32 | draw);
                draw += 1;
                let subject = person(r % people_per_group);
                let (rel, verb) = RELATIONS[((r >> 8) % RELATIONS.len() as u64) as usize];
                let object = if rel == "KNOWS" {
                    person((r >> 16) % people_per_group)
                } else {
                    THINGS[((r >> 16) % THINGS.len() as u64) as usize].to_owned()
                };
                if object == subject {
                    continue;
                }
                let sentence = format!("{subject} {verb} {object}");
                texts.push(sentence.clone());
                pending.push((subject, object, rel, sentence));
            }
            let mut names: Vec<String> = pending
                .iter()
                .flat_map(|(s, o, _, _)| [s.clone(), o.clone()])
                .filter(|n| !known.contains_key(n))
                .collect();
            names.sort();
            names.dedup();
            let name_vectors = embedder.embed(&names).await?;
            let fact_vectors = embedder.embed(&texts).await?;
            let mut mentioned = Vec::new();
            for (i, (name, v)) in names.iter().zip(name_vectors).enumerate() {
                let uuid = derive_id(episode, IdKind::Entity, i as u32);
                known.insert(name.clone(), uuid);
                kinds.push(EventKind::EntityCreated {
                    entity: Entity {
                        uuid,
                        name: name.clone(),
                        group_id: group.clone(),
                        labels: vec!["Entity".into()],
                        created_at: tx,
                        name_embedding: Some(v),
                        summary: String::new(),
                        attributes: Attributes::new(),
                    },
                });
            }
            let mut edges = Vec::new();
            for (k, ((s, o, rel, sentence), v)) in pending.into_iter().zip(fact_vectors).enumerate()
            {
                let uuid = derive_id(episode, IdKind::Fact, k as u32);
                edges.push(uuid);
                mentioned.extend([known[&s], known[&o]]);
                fact_kinds.push(EventKind::FactCreated {
                    fact: Fact {
                        uuid,
                        group_id: group.clone(),
                        source_node_uuid: known[&s],
                        target_node_uuid: known[&o],
                        name: rel.into(),
                        fact: sentence,
                        fact_embedding: Some(v),
                        episodes: vec![episode],
                        created_at: tx,
                        valid_at: Some(tx),
                        invalid_at: None,
                        expired_at: None,
                        reference_time: tx,
                        attributes: Attributes::new(),
                        invalidated_by: None,
                        stated_windows: Vec::new(),
                    },
                });
                made += 1;
            }
            mentioned.sort();
            mentioned.dedup();
            let mut all = vec![EventKind::EpisodeRecorded {
                episode: Episode {
                    uuid: episode,
                    name: format!("bench-{g}-{episode_no}"),
                    group_id: group.clone(),
                    source: EpisodeType::Text,
                    source_description: "bench".into(),
                    content: texts.join(". "),
                    valid_at: tx,
                    created_at: tx,
                    entity_edges: edges,
                    metadata: Attributes::new(),
                    content_embedding: None,
                    preceding_turn: None,
                },
            }];
            all.extend(kinds);
            all.extend(fact_kinds);
            all.push(EventKind::MentionsRecorded {
                episode_uuid: episode,
                entity_uuids: mentioned,
            });
            out.push(EventBatch::new(episode, group.clone(), tx, None, all));
            episode_no += 1;
        }
    }
    Ok(out)
}

async fn latency(
    node: &Node,
    recipe: &str,
    queries: usize,
    groups: usize,
) -> anyhow::Result<serde_json::Value> {
    let query = Query::new(node.sources()?);
    let mut samples = Vec::with_capacity(queries);
    let mut hits = 0usize;
    for i in 0..queries as u64 {
        let r = mix(i ^ 0xabcdef);
        let group = GroupId::new(format!("bench-{:03}", r % groups as u64))?;
        let text = match i % 3 {
            0 => format!("where does {} live", person((r >> 8) % 50)),
            1 => format!("who works at {}", THINGS[((r >> 12) % 12) as usize]),
            _ => format!(
                "{} {}",
                RELATIONS[((r >> 4) % 6) as usize].1,
                THINGS[((r >> 20) % 24) as usize]
            ),
        };
        let request = SearchRequest::recipe(&text, recipe, 10)?;
        let started = Instant::now();
        let results = query.search(&group, &request).await?;
        samples.push(started.elapsed());
        hits += results.results.len();
    }
    let (p50, p99) = super::percentiles(&mut samples);
    let p95 = super::quantile(&mut samples, 0.95);
    Ok(
        json!({"p50_ms": p50, "p95_ms": p95, "p99_ms": p99, "mean_results": hits as f64 / queries.max(1) as f64}),
    )
}

/// Runs the benchmark at each scale.
pub async fn run(
    settings: &Settings,
    scales: &[usize],
    groups: usize,
    queries: usize,
) -> anyhow::Result<()> {
    let embedder = HashEmbedder::new(384);
    for &facts in scales {
        let dir = tempfile::tempdir()?;
        let mut s = Settings::embedded(dir.path(), ExtractorKind::Offline, EmbedderKind::Hash);
        s.partitions = settings.partitions;
        // --store scylla://... benchmarks that store; the log and indices stay local.
        s.store = settings.store.clone();
        let node = Node::open_with(s, super::offline_ports()).await?;
        // A ScyllaDB keyspace may hold an earlier run's projection and positions.
        node.store()?.clear().await?;
        let started = Instant::now();
        let batches = generate(facts, groups, &embedder).await?;
        let generate_s = started.elapsed().as_secs_f64();
        let events: usize = batches.iter().map(|b| b.events.len()).sum();
        for chunk in batches.chunks(512) {
            let records = chunk
                .iter()
                .map(|b| NewRecord {
                    key: b.group_id.as_str().as_bytes().to_vec(),
                    payload: node.events.encode(b),
                })
                .collect();
            node.log
                .append(&node.topics.graph_events, records, None)
                .await?;
        }
        let projection = chronicle::runtime::projection(&node)?;
        let started = Instant::now();
        projection.run(None, None, None, || {}).await?;
        let project = started.elapsed();
        let combined = latency(&node, "COMBINED_HYBRID_SEARCH_RRF", queries, groups).await?;
        let edge = latency(&node, "EDGE_HYBRID_SEARCH_RRF", queries, groups).await?;
        let started = Instant::now();
        let rebuilt = chronicle::runtime::reproject(&node, || {}).await?;
        let rebuild = started.elapsed();
        // The fold alone, from the log into a store without indices.
        let replay_dir = tempfile::tempdir()?;
        let store: Arc<dyn chronicle_store::GraphStore> = match settings.store {
            StoreUri::Embedded => Arc::new(chronicle_store::EmbeddedStore::open(
                replay_dir.path().join("graph.redb"),
            )?),
            StoreUri::Scylla { .. } => {
                node.store()?.clear().await?;
                node.store()?.clone()
            }
        };
        let started = Instant::now();
        let topic = &node.topics.graph_events;
        let codec = chronicle_codec::EventBatchCodec::new();
        for p in 0..node.log.partition_count(topic).await? {
            let mut offset = 0;
            loop {
                let records = node.log.read(topic, p, offset, 512, Duration::ZERO).await?;
                let Some(last) = records.last() else { break };
                offset = last.offset + 1;
                let batch: Vec<_> = records
                    .iter()
                    .map(|r| {
                        let b = codec.decode(&r.payload)?;
                        Ok((
                            chronicle_model::LogPosition {
                                partition: p,
                                offset: r.offset,
                            },
                            b,
                        ))
                    })
                    .collect::<anyhow::Result<_>>()?;
                store.apply(&batch).await?;
            }
        }
        store.flush().await?;
        let store_only = started.elapsed();
        println!(
            "{}",
            json!({
                "bench": "search",
                "store": if matches!(settings.store, StoreUri::Embedded) { "embedded" } else { "scylla" },
                "facts": facts,
                "groups": groups,
                "events": events,
                "generate_seconds": generate_s,
                "project_seconds": project.as_secs_f64(),
                "index_build_facts_per_s": facts as f64 / project.as_secs_f64(),
                "rebuild_events_per_s": rebuilt.events_applied as f64 / rebuild.as_secs_f64(),
                "replay_store_only_events_per_s": events as f64 / store_only.as_secs_f64(),
                "combined_hybrid_search_rrf": combined,
                "edge_hybrid_search_rrf": edge,
                "disk_bytes": super::disk_usage(dir.path()),
                "peak_rss_bytes": super::memory().0,
            })
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size makes exactly the facts asked for and ends: 30k over 100
    /// groups once looped forever on an episode of self-loops.
    #[tokio::test]
    async fn the_generator_makes_exactly_the_facts_asked_for() {
        let embedder = HashEmbedder::new(16);
        for (facts, groups) in [(30_000, 100), (1_000, 7), (5, 3)] {
            let batches = generate(facts, groups, &embedder).await.unwrap();
            let made = batches
                .iter()
                .flat_map(|b| &b.events)
                .filter(|e| matches!(e.kind, EventKind::FactCreated { .. }))
                .count();
            assert_eq!(made, facts, "{facts} facts over {groups} groups");
        }
    }
}
