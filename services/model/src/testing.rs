//! Sample values for tests (feature `testing`).

use uuid::Uuid;

use crate::{
    Attributes, Community, Entity, Episode, EpisodeType, EventBatch, EventKind, Fact, GroupId,
    Invalidation, LogPosition, Timestamp,
};

/// A timestamp from RFC 3339 text; panics on bad input (tests only).
pub fn ts(text: &str) -> Timestamp {
    text.parse().expect("valid test timestamp")
}

/// A group id; panics on bad input (tests only).
pub fn group(id: &str) -> GroupId {
    GroupId::new(id).expect("valid test group id")
}

fn attrs() -> Attributes {
    let mut m = Attributes::new();
    m.insert("role".into(), serde_json::json!("engineer"));
    m.insert("since".into(), serde_json::json!(2021));
    m
}

/// An episode with every field set.
pub fn episode(g: &GroupId, uuid: Uuid) -> Episode {
    Episode {
        uuid,
        name: "ep-1".into(),
        group_id: g.clone(),
        source: EpisodeType::Message,
        source_description: "chat".into(),
        content: "alice: I moved to Shanghai".into(),
        valid_at: ts("2025-03-01T09:00:00.123456Z"),
        created_at: ts("2025-03-01T09:00:01Z"),
        entity_edges: vec![Uuid::from_u128(7)],
        metadata: attrs(),
        content_embedding: Some(vec![0.25, -0.5, 1.0]),
        preceding_turn: Some("Alice: how are you?".into()),
    }
}

/// An entity with every field set.
pub fn entity(g: &GroupId, uuid: Uuid, name: &str) -> Entity {
    Entity {
        uuid,
        name: name.into(),
        group_id: g.clone(),
        labels: vec!["Entity".into(), "Person".into()],
        created_at: ts("2025-01-01T00:00:00Z"),
        name_embedding: Some(vec![0.25, -0.5, 1.0]),
        summary: format!("{name} is someone."),
        attributes: attrs(),
    }
}

/// A fact with every optional field set.
pub fn fact(g: &GroupId, uuid: Uuid, source: Uuid, target: Uuid) -> Fact {
    Fact {
        uuid,
        group_id: g.clone(),
        source_node_uuid: source,
        target_node_uuid: target,
        name: "LIVES_IN".into(),
        fact: "Alice lives in Beijing".into(),
        fact_embedding: Some(vec![0.1, 0.2]),
        episodes: vec![Uuid::from_u128(1), Uuid::from_u128(2)],
        created_at: ts("2025-01-01T00:00:00Z"),
        valid_at: Some(ts("2025-01-01T00:00:00Z")),
        invalid_at: Some(ts("2025-03-01T00:00:00Z")),
        expired_at: Some(ts("2025-03-01T09:00:01Z")),
        reference_time: ts("2025-01-01T00:00:00Z"),
        attributes: attrs(),
        invalidated_by: Some(Invalidation {
            by_fact: Some(Uuid::from_u128(3)),
            by_episode: Uuid::from_u128(4),
            prior_invalid_at: None,
        }),
        stated_windows: vec![
            crate::StatedWindow {
                episode_uuid: Uuid::from_u128(1),
                valid_at: Some(ts("2025-01-01T00:00:00Z")),
                invalid_at: Some(ts("2025-02-01T00:00:00Z")),
            },
            crate::StatedWindow {
                episode_uuid: Uuid::from_u128(2),
                valid_at: None,
                invalid_at: Some(ts("2025-03-01T00:00:00Z")),
            },
        ],
    }
}

/// One event kind of every variant (sparse optional fields where a variant has them).
pub fn every_event_kind(g: &GroupId) -> Vec<EventKind> {
    let (a, b) = (Uuid::from_u128(10), Uuid::from_u128(11));
    vec![
        EventKind::EpisodeRecorded {
            episode: episode(g, Uuid::from_u128(1)),
        },
        EventKind::EntityCreated {
            entity: entity(g, a, "Alice"),
        },
        EventKind::EntityUpdated {
            entity_uuid: a,
            summary: Some("Alice lives in Shanghai.".into()),
            attributes: Some(attrs()),
            labels: None,
            name_embedding: Some(vec![1.0, 0.0]),
        },
        EventKind::FactCreated {
            fact: fact(g, Uuid::from_u128(20), a, b),
        },
        EventKind::FactProvenanceAdded {
            fact_uuid: Uuid::from_u128(20),
            episode_uuid: Uuid::from_u128(2),
            stated_window: None,
        },
        EventKind::FactProvenanceAdded {
            fact_uuid: Uuid::from_u128(20),
            episode_uuid: Uuid::from_u128(3),
            stated_window: Some(crate::Window::new(Some(ts("2024-06-01T00:00:00Z")), None)),
        },
        EventKind::FactInvalidated {
            fact_uuid: Uuid::from_u128(20),
            invalid_at: ts("2025-03-01T00:00:00Z"),
            expired_at: ts("2025-03-01T09:00:01Z"),
            by_fact: None,
            by_episode: Uuid::from_u128(2),
        },
        EventKind::MentionsRecorded {
            episode_uuid: Uuid::from_u128(1),
            entity_uuids: vec![a, b],
        },
        EventKind::SagaLinked {
            saga_uuid: Uuid::from_u128(30),
            saga_name: "move".into(),
            episode_uuid: Uuid::from_u128(2),
            previous_episode_uuid: Some(Uuid::from_u128(1)),
        },
        EventKind::EpisodeRetracted {
            episode_uuid: Uuid::from_u128(2),
        },
        EventKind::CommunityBuilt {
            community: community(g),
        },
        EventKind::CommunityUpdated {
            community: Community {
                name_embedding: None,
                ..community(g)
            },
        },
        EventKind::CommunityDissolved {
            community_uuid: Uuid::from_u128(40),
        },
        EventKind::SagaSummarized {
            saga_uuid: Uuid::from_u128(30),
            summary: "Alice moved.".into(),
            last_summarized_episode_valid_at: ts("2025-03-01T09:00:00Z"),
        },
    ]
}

fn community(g: &GroupId) -> Community {
    Community {
        uuid: Uuid::from_u128(40),
        group_id: g.clone(),
        name: "Alice, Beijing".into(),
        summary: "People and places.".into(),
        members: vec![Uuid::from_u128(10), Uuid::from_u128(11)],
        name_embedding: Some(vec![0.5]),
        created_at: ts("2025-01-01T00:00:00Z"),
    }
}

/// A batch holding one event of every variant.
pub fn batch_of_every_kind(g: &GroupId) -> EventBatch {
    let mut stats = crate::DecisionStats::default();
    stats.llm_calls.insert("extract".into(), 1);
    stats.resolutions.insert("exact".into(), 2);
    stats.prompt_chars = 1234;
    stats.embeddings = 3;
    stats.stage("extract", 17);
    let batch = EventBatch::new(
        Uuid::from_u128(99),
        g.clone(),
        ts("2025-03-01T09:00:01Z"),
        Some(LogPosition {
            partition: 3,
            offset: 42,
        }),
        every_event_kind(g),
    );
    EventBatch {
        stats: Some(stats),
        ..batch
    }
}
