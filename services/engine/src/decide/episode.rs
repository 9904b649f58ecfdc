//! The episode as it is stored and as it is found: its record and its
//! retrieval key.

use chronicle_model::{Episode, NewEpisode, Timestamp};
use uuid::Uuid;

/// The stored episode for a submitted one.
pub(super) fn stored_episode(
    ep: &NewEpisode,
    tx: Timestamp,
    entity_edges: Vec<Uuid>,
    content_embedding: Option<Vec<f32>>,
    preceding_turn: Option<String>,
) -> Episode {
    Episode {
        uuid: ep.uuid,
        name: ep.name.clone(),
        group_id: ep.group_id.clone(),
        source: ep.source,
        source_description: ep.source_description.clone(),
        content: ep.content.clone(),
        valid_at: ep.reference_time,
        created_at: tx,
        entity_edges,
        metadata: ep.metadata.clone(),
        content_embedding,
        preceding_turn,
    }
}

/// The text an episode's vector is computed from: its content, and for a
/// conversation message the end of the turn before it. An answer ("Yes,
/// last week!") is found through the question it answers; measured on
/// LoCoMo this lifts budget-fair recall@10 of the turns from 0.62 to 0.72.
/// Sentence embedders read a few hundred tokens, so the previous turn is
/// cut to its end and the whole key to a bounded length (at char bounds).
pub(crate) fn retrieval_key(previous_turn: Option<&str>, content: &str) -> String {
    const MAX_CHARS: usize = 2_000;
    let mut key = String::new();
    if let Some(previous) = previous_turn {
        key.push_str(&Episode::preceding_of(previous));
        key.push('\n');
    }
    key.push_str(content);
    match key.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => key[..cut].to_owned(),
        None => key,
    }
}
