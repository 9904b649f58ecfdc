//! Deterministic ports and scenarios for tests (feature `testing`).

use std::sync::Arc;

use async_trait::async_trait;
use chronicle_model::{
    Command, EpisodeType, EventBatch, GroupId, LogPosition, NewEpisode, Timestamp,
};
use uuid::Uuid;

use crate::ports::{Embedder, LlmError};
use crate::{Accepted, DecideConfig, Decider, GroupState, OfflineExtractor, apply_batch};

/// Character-trigram hashing into 64 dimensions: a deterministic,
/// dependency-free embedder for unit tests (real embedders live in
/// `chronicle-llm`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TrigramEmbedder;

#[async_trait]
impl Embedder for TrigramEmbedder {
    fn describe(&self) -> String {
        "trigram-64".into()
    }
    fn dimension(&self) -> usize {
        64
    }
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts
            .iter()
            .map(|t| {
                let chars: Vec<char> = format!("  {}  ", t.to_lowercase()).chars().collect();
                let mut v = vec![0f32; 64];
                for w in chars.windows(3) {
                    let h = w
                        .iter()
                        .fold(7u64, |h, c| h.wrapping_mul(31).wrapping_add(*c as u64));
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-9);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

/// The offline pipeline with the trigram embedder.
pub fn offline_decider() -> Decider {
    Decider::new(
        Arc::new(OfflineExtractor),
        Arc::new(TrigramEmbedder),
        Default::default(),
        DecideConfig::default(),
    )
}

/// An episode command with a transaction time one minute after its reference time.
pub fn message(group: &GroupId, n: u128, content: &str, at: &str) -> Accepted {
    let reference: Timestamp = at.parse().expect("valid test timestamp");
    Accepted {
        command: Command::AddEpisode(NewEpisode {
            uuid: Uuid::from_u128(n),
            group_id: group.clone(),
            name: format!("ep-{n}"),
            content: content.into(),
            source: EpisodeType::Message,
            source_description: "test".into(),
            reference_time: reference,
            previous_episode_uuids: None,
            saga: Some("story".into()),
            metadata: Default::default(),
        }),
        tx_time: reference.saturating_add_micros(60_000_000),
        source: None,
    }
}

/// Two tenants' stories, decided in order: (graph-events position, batch)
/// pairs, and each group's folded state. Covers creation, restatement,
/// cardinality-one invalidation, a late arrival, a saga and a retraction.
pub async fn two_tenant_story() -> (Vec<(LogPosition, EventBatch)>, Vec<GroupState>) {
    let a = GroupId::new("tenant-a").expect("valid");
    let b = GroupId::new("tenant-b").expect("valid");
    let items = vec![
        message(&a, 1, "Alice: I live in Beijing.", "2025-01-10T09:00:00Z"),
        message(
            &b,
            2,
            "Bob works at Initech. Bob lives in Oslo.",
            "2025-01-11T09:00:00Z",
        ),
        message(&a, 3, "Alice: I work at ByteDance.", "2025-01-12T09:00:00Z"),
        message(&a, 4, "Alice: I moved to Shanghai.", "2025-03-01T09:00:00Z"),
        message(&b, 5, "Bob works at Initech.", "2025-03-02T09:00:00Z"),
        message(&a, 6, "Alice lives in Hangzhou.", "2025-02-01T09:00:00Z"),
        message(&b, 7, "Bob moved to Bergen.", "2025-04-01T09:00:00Z"),
        message(&a, 8, "Alice joined Meituan.", "2025-03-05T09:00:00Z"),
        Accepted {
            command: Command::RetractEpisode {
                uuid: Uuid::from_u128(9),
                group_id: b.clone(),
                episode_uuid: Uuid::from_u128(7),
            },
            tx_time: "2025-04-02T00:00:00Z".parse().expect("valid"),
            source: None,
        },
    ];
    let decider = offline_decider();
    let mut states = vec![GroupState::new(a.clone()), GroupState::new(b.clone())];
    let mut out = Vec::new();
    for (offset, item) in items.iter().enumerate() {
        let state = if item.command.group_id() == &a {
            &mut states[0]
        } else {
            &mut states[1]
        };
        let batch = decider.decide(state, item).await.expect("story decides");
        apply_batch(state, &batch);
        out.push((
            LogPosition {
                partition: if item.command.group_id() == &a { 0 } else { 1 },
                offset: offset as u64,
            },
            batch,
        ));
    }
    (out, states)
}
