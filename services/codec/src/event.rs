//! `EventBatch` ⇄ `schemas/avro/event_batch.avsc`.

use apache_avro::types::Value;
use chronicle_model::{
    Community, DecisionStats, Entity, Episode, EventBatch, EventKind, Fact, GraphEvent,
    Invalidation, LogPosition, StatedWindow, Window,
};

use crate::command::{episode_type, parse_episode_type};
use crate::value::{Fields, embedding, json, opt, record, string, strings, ts, uuid, uuids};
use crate::{AvroRecord, CodecError, EVENT_BATCH_EARLIER_SCHEMAS, EVENT_BATCH_SCHEMA};

impl AvroRecord for EventBatch {
    const SCHEMA_JSON: &'static str = EVENT_BATCH_SCHEMA;
    const EARLIER_SCHEMAS: &'static [&'static str] = EVENT_BATCH_EARLIER_SCHEMAS;

    fn to_avro(&self) -> Value {
        record(vec![
            ("command_uuid", uuid(self.command_uuid)),
            ("group_id", string(self.group_id.as_str())),
            ("tx_time", ts(self.tx_time)),
            (
                "source",
                opt(self.source, |p| {
                    record(vec![
                        ("partition", Value::Int(p.partition as i32)),
                        ("offset", Value::Long(p.offset as i64)),
                    ])
                }),
            ),
            ("dead_letter", opt(self.dead_letter.as_deref(), string)),
            ("stats", opt(self.stats.as_ref(), stats_to_avro)),
            (
                "events",
                Value::Array(self.events.iter().map(event_to_avro).collect()),
            ),
        ])
    }

    fn from_avro(value: Value) -> Result<Self, CodecError> {
        let mut f = Fields::of(value, "EventBatch")?;
        let source = match f.optional("source")? {
            None => None,
            Some(v) => {
                let mut p = Fields::of(v, "EventBatch.source")?;
                let partition = p.int("partition")?;
                let offset = p.long("offset")?;
                Some(LogPosition {
                    partition: u32::try_from(partition).map_err(|_| {
                        CodecError::field("EventBatch.source.partition", "negative")
                    })?,
                    offset: u64::try_from(offset)
                        .map_err(|_| CodecError::field("EventBatch.source.offset", "negative"))?,
                })
            }
        };
        Ok(EventBatch {
            command_uuid: f.uuid("command_uuid")?,
            group_id: f.group("group_id")?,
            tx_time: f.ts("tx_time")?,
            source,
            dead_letter: f.opt_string("dead_letter")?,
            stats: f.optional("stats")?.map(stats_from_avro).transpose()?,
            events: f
                .array("events")?
                .into_iter()
                .map(event_from_avro)
                .collect::<Result<_, _>>()?,
        })
    }
}

fn counts_to_avro(m: &std::collections::BTreeMap<String, u64>) -> Value {
    Value::Map(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::Long(*v as i64)))
            .collect(),
    )
}

fn stats_to_avro(s: &DecisionStats) -> Value {
    record(vec![
        ("llm_calls", counts_to_avro(&s.llm_calls)),
        ("prompt_chars", Value::Long(s.prompt_chars as i64)),
        ("resolutions", counts_to_avro(&s.resolutions)),
        ("embeddings", Value::Long(s.embeddings as i64)),
        ("decide_micros", Value::Long(s.decide_micros as i64)),
        ("stage_micros", counts_to_avro(&s.stage_micros)),
    ])
}

fn counts_from_avro(
    path: &str,
    v: Value,
) -> Result<std::collections::BTreeMap<String, u64>, CodecError> {
    match v {
        Value::Map(m) => m
            .into_iter()
            .map(|(k, v)| match v {
                Value::Long(n) if n >= 0 => Ok((k, n as u64)),
                other => Err(CodecError::field(
                    path,
                    format!("expected a count, found {other:?}"),
                )),
            })
            .collect(),
        other => Err(CodecError::field(
            path,
            format!("expected a map, found {other:?}"),
        )),
    }
}

fn stats_from_avro(v: Value) -> Result<DecisionStats, CodecError> {
    let mut f = Fields::of(v, "EventBatch.stats")?;
    let count = |n: i64, name: &str| {
        u64::try_from(n)
            .map_err(|_| CodecError::field(format!("EventBatch.stats.{name}"), "negative"))
    };
    Ok(DecisionStats {
        llm_calls: counts_from_avro("EventBatch.stats.llm_calls", f.take("llm_calls")?)?,
        prompt_chars: count(f.long("prompt_chars")?, "prompt_chars")?,
        resolutions: counts_from_avro("EventBatch.stats.resolutions", f.take("resolutions")?)?,
        embeddings: count(f.long("embeddings")?, "embeddings")?,
        decide_micros: count(f.long("decide_micros")?, "decide_micros")?,
        stage_micros: counts_from_avro("EventBatch.stats.stage_micros", f.take("stage_micros")?)?,
    })
}

fn event_to_avro(e: &GraphEvent) -> Value {
    let (branch, body) = kind_to_avro(&e.kind);
    record(vec![
        ("event_id", uuid(e.event_id)),
        ("group_id", string(e.group_id.as_str())),
        ("episode_uuid", uuid(e.episode_uuid)),
        ("tx_time", ts(e.tx_time)),
        ("body", Value::Union(branch, Box::new(body))),
    ])
}

fn event_from_avro(value: Value) -> Result<GraphEvent, CodecError> {
    let mut f = Fields::of(value, "GraphEvent")?;
    let event_id = f.uuid("event_id")?;
    let group_id = f.group("group_id")?;
    let episode_uuid = f.uuid("episode_uuid")?;
    let tx_time = f.ts("tx_time")?;
    let (branch, body) = f.union("body")?;
    Ok(GraphEvent {
        event_id,
        group_id,
        episode_uuid,
        tx_time,
        kind: kind_from_avro(branch, body)?,
    })
}

fn episode_to_avro(e: &Episode) -> Value {
    record(vec![
        ("uuid", uuid(e.uuid)),
        ("name", string(&e.name)),
        ("group_id", string(e.group_id.as_str())),
        ("source", episode_type(e.source)),
        ("source_description", string(&e.source_description)),
        ("content", string(&e.content)),
        ("valid_at", ts(e.valid_at)),
        ("created_at", ts(e.created_at)),
        ("entity_edges", uuids(&e.entity_edges)),
        ("metadata_json", json(&e.metadata)),
        (
            "content_embedding",
            embedding(e.content_embedding.as_deref()),
        ),
        ("preceding_turn", opt(e.preceding_turn.as_deref(), string)),
    ])
}

fn episode_from_avro(v: Value) -> Result<Episode, CodecError> {
    let mut f = Fields::of(v, "Episode")?;
    Ok(Episode {
        uuid: f.uuid("uuid")?,
        name: f.string("name")?,
        group_id: f.group("group_id")?,
        source: parse_episode_type(&mut f, "source")?,
        source_description: f.string("source_description")?,
        content: f.string("content")?,
        valid_at: f.ts("valid_at")?,
        created_at: f.ts("created_at")?,
        entity_edges: f.uuids("entity_edges")?,
        metadata: f.json("metadata_json")?,
        content_embedding: f.opt_embedding("content_embedding")?,
        preceding_turn: f.opt_string("preceding_turn")?,
    })
}

fn entity_to_avro(e: &Entity) -> Value {
    record(vec![
        ("uuid", uuid(e.uuid)),
        ("name", string(&e.name)),
        ("group_id", string(e.group_id.as_str())),
        ("labels", strings(&e.labels)),
        ("created_at", ts(e.created_at)),
        ("name_embedding", embedding(e.name_embedding.as_deref())),
        ("summary", string(&e.summary)),
        ("attributes_json", json(&e.attributes)),
    ])
}

fn entity_from_avro(v: Value) -> Result<Entity, CodecError> {
    let mut f = Fields::of(v, "Entity")?;
    Ok(Entity {
        uuid: f.uuid("uuid")?,
        name: f.string("name")?,
        group_id: f.group("group_id")?,
        labels: f.strings("labels")?,
        created_at: f.ts("created_at")?,
        name_embedding: f.opt_embedding("name_embedding")?,
        summary: f.string("summary")?,
        attributes: f.json("attributes_json")?,
    })
}

fn fact_to_avro(x: &Fact) -> Value {
    record(vec![
        ("uuid", uuid(x.uuid)),
        ("group_id", string(x.group_id.as_str())),
        ("source_node_uuid", uuid(x.source_node_uuid)),
        ("target_node_uuid", uuid(x.target_node_uuid)),
        ("name", string(&x.name)),
        ("fact", string(&x.fact)),
        ("fact_embedding", embedding(x.fact_embedding.as_deref())),
        ("episodes", uuids(&x.episodes)),
        ("created_at", ts(x.created_at)),
        ("valid_at", opt(x.valid_at, ts)),
        ("invalid_at", opt(x.invalid_at, ts)),
        ("expired_at", opt(x.expired_at, ts)),
        ("reference_time", ts(x.reference_time)),
        ("attributes_json", json(&x.attributes)),
        (
            "invalidated_by",
            opt(x.invalidated_by.as_ref(), |i| {
                record(vec![
                    ("by_fact", opt(i.by_fact, uuid)),
                    ("by_episode", uuid(i.by_episode)),
                    ("prior_invalid_at", opt(i.prior_invalid_at, ts)),
                ])
            }),
        ),
        (
            "stated_windows",
            Value::Array(
                x.stated_windows
                    .iter()
                    .map(|w| {
                        record(vec![
                            ("episode_uuid", uuid(w.episode_uuid)),
                            ("valid_at", opt(w.valid_at, ts)),
                            ("invalid_at", opt(w.invalid_at, ts)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

fn fact_from_avro(v: Value) -> Result<Fact, CodecError> {
    let mut f = Fields::of(v, "Fact")?;
    Ok(Fact {
        uuid: f.uuid("uuid")?,
        group_id: f.group("group_id")?,
        source_node_uuid: f.uuid("source_node_uuid")?,
        target_node_uuid: f.uuid("target_node_uuid")?,
        name: f.string("name")?,
        fact: f.string("fact")?,
        fact_embedding: f.opt_embedding("fact_embedding")?,
        episodes: f.uuids("episodes")?,
        created_at: f.ts("created_at")?,
        valid_at: f.opt_ts("valid_at")?,
        invalid_at: f.opt_ts("invalid_at")?,
        expired_at: f.opt_ts("expired_at")?,
        reference_time: f.ts("reference_time")?,
        attributes: f.json("attributes_json")?,
        invalidated_by: match f.optional("invalidated_by")? {
            None => None,
            Some(v) => {
                let mut i = Fields::of(v, "Fact.invalidated_by")?;
                Some(Invalidation {
                    by_fact: i.opt_uuid("by_fact")?,
                    by_episode: i.uuid("by_episode")?,
                    prior_invalid_at: i.opt_ts("prior_invalid_at")?,
                })
            }
        },
        stated_windows: f
            .array("stated_windows")?
            .into_iter()
            .map(|v| {
                let mut w = Fields::of(v, "Fact.stated_windows")?;
                Ok(StatedWindow {
                    episode_uuid: w.uuid("episode_uuid")?,
                    valid_at: w.opt_ts("valid_at")?,
                    invalid_at: w.opt_ts("invalid_at")?,
                })
            })
            .collect::<Result<_, CodecError>>()?,
    })
}

fn community_to_avro(c: &Community) -> Value {
    record(vec![
        ("uuid", uuid(c.uuid)),
        ("group_id", string(c.group_id.as_str())),
        ("name", string(&c.name)),
        ("summary", string(&c.summary)),
        ("members", uuids(&c.members)),
        ("name_embedding", embedding(c.name_embedding.as_deref())),
        ("created_at", ts(c.created_at)),
    ])
}

fn community_from_avro(v: Value) -> Result<Community, CodecError> {
    let mut f = Fields::of(v, "Community")?;
    Ok(Community {
        uuid: f.uuid("uuid")?,
        group_id: f.group("group_id")?,
        name: f.string("name")?,
        summary: f.string("summary")?,
        members: f.uuids("members")?,
        name_embedding: f.opt_embedding("name_embedding")?,
        created_at: f.ts("created_at")?,
    })
}

/// Branch order must match the `body` union in `event_batch.avsc`.
fn kind_to_avro(kind: &EventKind) -> (u32, Value) {
    match kind {
        EventKind::EpisodeRecorded { episode } => {
            (0, record(vec![("episode", episode_to_avro(episode))]))
        }
        EventKind::EntityCreated { entity } => {
            (1, record(vec![("entity", entity_to_avro(entity))]))
        }
        EventKind::EntityUpdated {
            entity_uuid,
            summary,
            attributes,
            labels,
            name_embedding,
        } => (
            2,
            record(vec![
                ("entity_uuid", uuid(*entity_uuid)),
                ("summary", opt(summary.as_deref(), string)),
                ("attributes_json", opt(attributes.as_ref(), json)),
                ("labels", opt(labels.as_deref(), strings)),
                ("name_embedding", embedding(name_embedding.as_deref())),
            ]),
        ),
        EventKind::FactCreated { fact } => (3, record(vec![("fact", fact_to_avro(fact))])),
        EventKind::FactProvenanceAdded {
            fact_uuid,
            episode_uuid,
            stated_window,
        } => (
            4,
            record(vec![
                ("fact_uuid", uuid(*fact_uuid)),
                ("episode_uuid", uuid(*episode_uuid)),
                (
                    "stated_window",
                    opt(stated_window.as_ref(), |w| {
                        record(vec![
                            ("valid_at", opt(w.start, ts)),
                            ("invalid_at", opt(w.end, ts)),
                        ])
                    }),
                ),
            ]),
        ),
        EventKind::FactInvalidated {
            fact_uuid,
            invalid_at,
            expired_at,
            by_fact,
            by_episode,
        } => (
            5,
            record(vec![
                ("fact_uuid", uuid(*fact_uuid)),
                ("invalid_at", ts(*invalid_at)),
                ("expired_at", ts(*expired_at)),
                ("by_fact", opt(*by_fact, uuid)),
                ("by_episode", uuid(*by_episode)),
            ]),
        ),
        EventKind::MentionsRecorded {
            episode_uuid,
            entity_uuids,
        } => (
            6,
            record(vec![
                ("episode_uuid", uuid(*episode_uuid)),
                ("entity_uuids", uuids(entity_uuids)),
            ]),
        ),
        EventKind::SagaLinked {
            saga_uuid,
            saga_name,
            episode_uuid,
            previous_episode_uuid,
        } => (
            7,
            record(vec![
                ("saga_uuid", uuid(*saga_uuid)),
                ("saga_name", string(saga_name)),
                ("episode_uuid", uuid(*episode_uuid)),
                ("previous_episode_uuid", opt(*previous_episode_uuid, uuid)),
            ]),
        ),
        EventKind::EpisodeRetracted { episode_uuid } => {
            (8, record(vec![("episode_uuid", uuid(*episode_uuid))]))
        }
        EventKind::CommunityBuilt { community } => {
            (9, record(vec![("community", community_to_avro(community))]))
        }
        EventKind::CommunityUpdated { community } => {
            (10, record(vec![("updated", community_to_avro(community))]))
        }
        EventKind::CommunityDissolved { community_uuid } => {
            (11, record(vec![("community_uuid", uuid(*community_uuid))]))
        }
        EventKind::SagaSummarized {
            saga_uuid,
            summary,
            last_summarized_episode_valid_at,
        } => (
            12,
            record(vec![
                ("saga_uuid", uuid(*saga_uuid)),
                ("summary", string(summary)),
                (
                    "last_summarized_episode_valid_at",
                    ts(*last_summarized_episode_valid_at),
                ),
            ]),
        ),
    }
}

fn kind_from_avro(branch: u32, body: Value) -> Result<EventKind, CodecError> {
    const NAMES: [&str; 13] = [
        "EpisodeRecorded",
        "EntityCreated",
        "EntityUpdated",
        "FactCreated",
        "FactProvenanceAdded",
        "FactInvalidated",
        "MentionsRecorded",
        "SagaLinked",
        "EpisodeRetracted",
        "CommunityBuilt",
        "CommunityUpdated",
        "CommunityDissolved",
        "SagaSummarized",
    ];
    let name = NAMES.get(branch as usize).ok_or_else(|| {
        CodecError::field("GraphEvent.body", format!("unknown union branch {branch}"))
    })?;
    let mut f = Fields::of(body, name)?;
    Ok(match branch {
        0 => EventKind::EpisodeRecorded {
            episode: episode_from_avro(f.take("episode")?)?,
        },
        1 => EventKind::EntityCreated {
            entity: entity_from_avro(f.take("entity")?)?,
        },
        2 => EventKind::EntityUpdated {
            entity_uuid: f.uuid("entity_uuid")?,
            summary: f.opt_string("summary")?,
            attributes: f.opt_json("attributes_json")?,
            labels: f.opt_strings("labels")?,
            name_embedding: f.opt_embedding("name_embedding")?,
        },
        3 => EventKind::FactCreated {
            fact: fact_from_avro(f.take("fact")?)?,
        },
        4 => EventKind::FactProvenanceAdded {
            fact_uuid: f.uuid("fact_uuid")?,
            episode_uuid: f.uuid("episode_uuid")?,
            stated_window: match f.optional("stated_window")? {
                None => None,
                Some(v) => {
                    let mut w = Fields::of(v, "FactProvenanceAdded.stated_window")?;
                    Some(Window::new(w.opt_ts("valid_at")?, w.opt_ts("invalid_at")?))
                }
            },
        },
        5 => EventKind::FactInvalidated {
            fact_uuid: f.uuid("fact_uuid")?,
            invalid_at: f.ts("invalid_at")?,
            expired_at: f.ts("expired_at")?,
            by_fact: f.opt_uuid("by_fact")?,
            by_episode: f.uuid("by_episode")?,
        },
        6 => EventKind::MentionsRecorded {
            episode_uuid: f.uuid("episode_uuid")?,
            entity_uuids: f.uuids("entity_uuids")?,
        },
        7 => EventKind::SagaLinked {
            saga_uuid: f.uuid("saga_uuid")?,
            saga_name: f.string("saga_name")?,
            episode_uuid: f.uuid("episode_uuid")?,
            previous_episode_uuid: f.opt_uuid("previous_episode_uuid")?,
        },
        8 => EventKind::EpisodeRetracted {
            episode_uuid: f.uuid("episode_uuid")?,
        },
        9 => EventKind::CommunityBuilt {
            community: community_from_avro(f.take("community")?)?,
        },
        10 => EventKind::CommunityUpdated {
            community: community_from_avro(f.take("updated")?)?,
        },
        11 => EventKind::CommunityDissolved {
            community_uuid: f.uuid("community_uuid")?,
        },
        _ => EventKind::SagaSummarized {
            saga_uuid: f.uuid("saga_uuid")?,
            summary: f.string("summary")?,
            last_summarized_episode_valid_at: f.ts("last_summarized_episode_valid_at")?,
        },
    })
}
