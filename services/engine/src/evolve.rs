//! The fold: `(state, event) -> state`.
//!
//! Pure and deterministic: it never calls an LLM, never reads a clock, and
//! applying an event whose id was already applied changes nothing. The same
//! function feeds the processor's state, the serving projection, a rebuild
//! and an audit replay.

use chronicle_model::{EventBatch, EventKind, GraphEvent, Saga};

use crate::state::GraphRecords;

/// What applying one event did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The event changed the records.
    Changed,
    /// The event was already applied; nothing changed.
    Duplicate,
}

/// Folds every event of a batch, in order.
pub fn apply_batch<R: GraphRecords + ?Sized>(records: &mut R, batch: &EventBatch) -> usize {
    batch
        .events
        .iter()
        .filter(|e| apply(records, e) == Applied::Changed)
        .count()
}

/// Folds one event into the records.
///
/// Events that refer to a record that no longer exists (for instance an
/// update of an entity whose only episode was retracted) are recorded as
/// applied and change nothing else, so the fold is total.
pub fn apply<R: GraphRecords + ?Sized>(records: &mut R, event: &GraphEvent) -> Applied {
    if records.is_applied(event.event_id) {
        return Applied::Duplicate;
    }
    match &event.kind {
        EventKind::EpisodeRecorded { episode } => records.put_episode(episode.clone()),
        EventKind::EntityCreated { entity } => records.put_entity(entity.clone()),
        EventKind::EntityUpdated {
            entity_uuid,
            summary,
            attributes,
            labels,
            name_embedding,
        } => {
            if let Some(mut entity) = records.entity(*entity_uuid) {
                if let Some(s) = summary {
                    entity.summary = s.clone();
                }
                if let Some(a) = attributes {
                    entity.attributes = a.clone();
                }
                if let Some(l) = labels {
                    entity.labels = l.clone();
                }
                if let Some(e) = name_embedding {
                    entity.name_embedding = Some(e.clone());
                }
                records.put_entity(entity);
            }
        }
        EventKind::FactCreated { fact } => records.put_fact(fact.clone()),
        EventKind::FactProvenanceAdded {
            fact_uuid,
            episode_uuid,
            stated_window,
        } => {
            if let Some(mut fact) = records.fact(*fact_uuid) {
                let mut changed = false;
                if !fact.episodes.contains(episode_uuid) {
                    fact.episodes.push(*episode_uuid);
                    changed = true;
                }
                if let Some(stated) = stated_window
                    && fact.widened_by(stated).is_some()
                {
                    fact.restate(*episode_uuid, *stated);
                    changed = true;
                }
                if changed {
                    records.put_fact(fact);
                }
            }
        }
        EventKind::FactInvalidated {
            fact_uuid,
            invalid_at,
            expired_at,
            by_fact,
            by_episode,
        } => {
            if let Some(mut fact) = records.fact(*fact_uuid) {
                fact.invalidated_by = Some(chronicle_model::Invalidation {
                    by_fact: *by_fact,
                    by_episode: *by_episode,
                    prior_invalid_at: fact.invalid_at,
                });
                fact.invalid_at = Some(*invalid_at);
                fact.expired_at = Some(*expired_at);
                records.put_fact(fact);
            }
        }
        EventKind::MentionsRecorded {
            episode_uuid,
            entity_uuids,
        } => records.add_mentions(*episode_uuid, entity_uuids),
        EventKind::SagaLinked {
            saga_uuid,
            saga_name,
            episode_uuid,
            previous_episode_uuid: _,
        } => {
            let mut saga = records.saga(*saga_uuid).unwrap_or_else(|| Saga {
                uuid: *saga_uuid,
                group_id: event.group_id.clone(),
                name: saga_name.clone(),
                summary: String::new(),
                episodes: Vec::new(),
                last_summarized_episode_valid_at: None,
                created_at: event.tx_time,
            });
            if !saga.episodes.contains(episode_uuid) {
                saga.episodes.push(*episode_uuid);
            }
            records.put_saga(saga);
        }
        EventKind::EpisodeRetracted { episode_uuid } => retract(records, *episode_uuid),
        EventKind::CommunityBuilt { community } | EventKind::CommunityUpdated { community } => {
            records.put_community(community.clone())
        }
        EventKind::CommunityDissolved { community_uuid } => {
            records.remove_community(*community_uuid)
        }
        EventKind::SagaSummarized {
            saga_uuid,
            summary,
            last_summarized_episode_valid_at,
        } => {
            if let Some(mut saga) = records.saga(*saga_uuid) {
                saga.summary = summary.clone();
                saga.last_summarized_episode_valid_at = Some(*last_summarized_episode_valid_at);
                records.put_saga(saga);
            }
        }
    }
    records.mark_applied(event.event_id);
    Applied::Changed
}

/// Withdraws an episode: it leaves every fact's provenance; facts left with
/// no provenance disappear; windows it widened narrow again; invalidations
/// it caused are undone; entities only
/// it mentioned disappear; it leaves its saga.
fn retract<R: GraphRecords + ?Sized>(records: &mut R, episode_uuid: uuid::Uuid) {
    let Some(episode) = records.episode(episode_uuid) else {
        return;
    };
    for fact_uuid in &episode.entity_edges {
        let Some(mut fact) = records.fact(*fact_uuid) else {
            continue;
        };
        fact.episodes.retain(|e| *e != episode_uuid);
        fact.forget_statement(episode_uuid);
        if let Some(inv) = fact
            .invalidated_by
            .take_if(|i| i.by_episode == episode_uuid)
        {
            fact.invalid_at = inv.prior_invalid_at;
            fact.expired_at = None;
        }
        if fact.episodes.is_empty() {
            records.remove_fact(fact.uuid);
        } else {
            records.put_fact(fact);
        }
    }
    let mentioned = records.mentioned_entities(episode_uuid);
    records.remove_mentions(episode_uuid);
    for entity in mentioned {
        if records.mentioning_episodes(entity).is_empty() {
            records.remove_entity(entity);
        }
    }
    if let Some(saga_uuid) = records.saga_of_episode(episode_uuid)
        && let Some(mut saga) = records.saga(saga_uuid)
    {
        saga.episodes.retain(|e| *e != episode_uuid);
        records.put_saga(saga);
    }
    records.remove_episode(episode_uuid);
}
