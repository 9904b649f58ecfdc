//! Stage 7: one decided episode as events, in the order the fold applies
//! them (the episode, new entities, entity changes, facts, provenance,
//! invalidations, mentions, the saga link).

use chronicle_model::{EventKind, IdKind, NewEpisode, Timestamp, derive_named_id};
use uuid::Uuid;

use super::entities::ResolvedEntities;
use super::episode::stored_episode;
use super::facts::FactWork;
use crate::state::GroupState;

/// The events of `ep` from what stages 3–6 resolved.
pub(super) fn episode_events(
    state: &GroupState,
    ep: &NewEpisode,
    tx: Timestamp,
    content_embedding: Option<Vec<f32>>,
    preceding_turn: Option<String>,
    entities: ResolvedEntities,
    facts: FactWork<'_>,
) -> Vec<EventKind> {
    let mut entity_edges: Vec<Uuid> = Vec::new();
    for u in facts
        .created
        .iter()
        .map(|f| f.uuid)
        .chain(facts.restated.iter().map(|(u, _)| *u))
        .chain(facts.invalidated.keys().copied())
    {
        if !entity_edges.contains(&u) {
            entity_edges.push(u);
        }
    }
    let mut kinds = vec![EventKind::EpisodeRecorded {
        episode: stored_episode(ep, tx, entity_edges, content_embedding, preceding_turn),
    }];
    kinds.extend(
        entities
            .created
            .into_iter()
            .map(|entity| EventKind::EntityCreated { entity }),
    );
    kinds.extend(
        entities
            .updates
            .into_iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(entity_uuid, p)| EventKind::EntityUpdated {
                entity_uuid,
                summary: p.summary,
                attributes: p.attributes,
                labels: p.labels,
                name_embedding: None,
            }),
    );
    kinds.extend(
        facts
            .created
            .into_iter()
            .map(|fact| EventKind::FactCreated { fact }),
    );
    kinds.extend(facts.restated.iter().map(|(fact_uuid, stated_window)| {
        EventKind::FactProvenanceAdded {
            fact_uuid: *fact_uuid,
            episode_uuid: ep.uuid,
            stated_window: *stated_window,
        }
    }));
    kinds.extend(
        facts
            .invalidated
            .into_iter()
            .map(
                |(fact_uuid, (invalid_at, by_fact))| EventKind::FactInvalidated {
                    fact_uuid,
                    invalid_at,
                    expired_at: tx,
                    by_fact,
                    by_episode: ep.uuid,
                },
            ),
    );
    let mut mentioned: Vec<Uuid> = Vec::new();
    for u in entities.uuid_of {
        if !mentioned.contains(&u) {
            mentioned.push(u);
        }
    }
    if !mentioned.is_empty() {
        kinds.push(EventKind::MentionsRecorded {
            episode_uuid: ep.uuid,
            entity_uuids: mentioned,
        });
    }
    if let Some(saga) = &ep.saga {
        let saga_uuid = derive_named_id(ep.group_id.as_str(), IdKind::Saga, saga);
        kinds.push(EventKind::SagaLinked {
            saga_uuid,
            saga_name: saga.clone(),
            episode_uuid: ep.uuid,
            previous_episode_uuid: state
                .saga_by_name(saga)
                .and_then(|s| s.episodes.last().copied()),
        });
    }
    kinds
}
