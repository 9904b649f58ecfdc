//! Stages 1–2: the context an extraction sees, and extraction itself —
//! bounded per episode, without a model for triples and structured JSON,
//! with duplicates inside the episode collapsed.

use chronicle_model::{
    Attributes, ContentError, DecisionStats, Episode, EpisodeType, FactTriple, NewEpisode,
    normalize_name,
};

use super::{Context, DecideError, Decider, Prepared, micros_since, stage};
use crate::ontology::Ontology;
use crate::ports::{
    ContextEpisode, ExtractedEntity, ExtractedFact, Extraction, ExtractionRequest, PromptKind,
};
use crate::state::GroupState;
use std::time::Instant;

impl Decider {
    pub(super) fn context(
        &self,
        state: &GroupState,
        ep: &NewEpisode,
        earlier: &[Episode],
    ) -> Context {
        let started = Instant::now();
        let n = self.config.context_episodes;
        // In the group's order: reference time, then log order (the turns
        // of one session share a reference time).
        let mut picked: Vec<&Episode> = match &ep.previous_episode_uuids {
            Some(ids) => ids
                .iter()
                .filter_map(|u| {
                    state
                        .get_episode(u)
                        .or_else(|| earlier.iter().find(|e| e.uuid == *u))
                })
                .collect(),
            None => state
                .episodes_before(ep.reference_time, n)
                .into_iter()
                .chain(earlier.iter().filter(|e| e.valid_at <= ep.reference_time))
                .collect(),
        };
        picked.sort_by_key(|e| (e.valid_at, e.created_at, e.uuid));
        picked.dedup_by_key(|e| e.uuid);
        if ep.previous_episode_uuids.is_none() && picked.len() > n {
            picked.drain(..picked.len() - n);
        }
        let episodes = picked
            .into_iter()
            .map(|e| ContextEpisode {
                content: e.content.clone(),
                valid_at: e.valid_at,
            })
            .collect();
        Context {
            episodes,
            micros: micros_since(started),
        }
    }

    /// Extraction: the step that needs no graph state.
    pub(super) async fn prepare(
        &self,
        ep: &NewEpisode,
        context: Context,
    ) -> Result<Prepared, DecideError> {
        let mut stats = DecisionStats::default();
        stats.stage(stage::CONTEXT, context.micros);
        let previous_episodes = context.episodes;
        let previous_turn = match ep.source {
            EpisodeType::Message => {
                (previous_episodes.last()).map(|e| Episode::preceding_of(&e.content))
            }
            _ => None,
        };
        let started = Instant::now();
        let extraction = match ep.source {
            EpisodeType::FactTriple => {
                triple_extraction(&FactTriple::parse(&ep.content)?, &self.ontology)
            }
            EpisodeType::Json => {
                let value: serde_json::Value = serde_json::from_str(&ep.content)
                    .map_err(|e| ContentError::BadJson(e.to_string()))?;
                match structured_extraction(&value) {
                    Some(x) => x,
                    None => {
                        self.extract_with_model(ep, previous_episodes, &mut stats)
                            .await?
                    }
                }
            }
            EpisodeType::Message | EpisodeType::Text => {
                self.extract_with_model(ep, previous_episodes, &mut stats)
                    .await?
            }
        };
        let mut extraction = extraction;
        extraction
            .entities
            .truncate(self.config.max_entities_per_episode);
        extraction.facts.truncate(self.config.max_facts_per_episode);
        stats.stage(stage::EXTRACT, micros_since(started));
        Ok(Prepared {
            extraction,
            previous_turn,
            stats,
        })
    }

    pub(super) async fn extract_with_model(
        &self,
        ep: &NewEpisode,
        previous_episodes: Vec<ContextEpisode>,
        stats: &mut DecisionStats,
    ) -> Result<Extraction, DecideError> {
        let mut out = Extraction::default();
        for chunk in chunks(&ep.content, self.config.extraction_chunk_chars) {
            let request = ExtractionRequest {
                name: ep.name.clone(),
                content: chunk.to_owned(),
                source: ep.source,
                source_description: ep.source_description.clone(),
                reference_time: ep.reference_time,
                previous_episodes: previous_episodes.clone(),
                ontology: self.ontology.clone(),
            };
            let x = self.extractor.extract(&request).await?;
            self.count_call(stats, PromptKind::Extract);
            out.entities.extend(x.entities);
            out.facts.extend(x.facts);
            if out.facts.len() >= self.config.max_facts_per_episode
                && out.entities.len() >= self.config.max_entities_per_episode
            {
                break; // later pieces could add nothing that is kept
            }
        }
        Ok(out)
    }
}

/// Collapses exact duplicates (by normalized name) inside one episode,
/// keeping the more specific type; drops empty names and excluded types.
pub(super) fn collapse_entities(
    entities: Vec<ExtractedEntity>,
    ontology: &Ontology,
) -> Vec<ExtractedEntity> {
    let mut out: Vec<ExtractedEntity> = Vec::new();
    for mut e in entities {
        e.name = e.name.trim().to_owned();
        if normalize_name(&e.name).is_empty() {
            continue;
        }
        if e.entity_type_id as usize >= ontology.entity_types.len() {
            e.entity_type_id = 0;
        }
        if ontology.is_excluded(ontology.entity_type_name(e.entity_type_id)) {
            continue;
        }
        let key = normalize_name(&e.name);
        match out.iter_mut().find(|x| normalize_name(&x.name) == key) {
            Some(x) => {
                if x.entity_type_id == 0 && e.entity_type_id != 0 {
                    x.entity_type_id = e.entity_type_id;
                }
                for (k, v) in e.attributes {
                    x.attributes.entry(k).or_insert(v);
                }
            }
            None => out.push(e),
        }
    }
    out
}

/// A `fact_triple` episode needs no extraction.
fn triple_extraction(t: &FactTriple, ontology: &Ontology) -> Extraction {
    let type_id = |labels: &[String]| {
        labels
            .iter()
            .find_map(|l| ontology.entity_type_id(l))
            .unwrap_or(0)
    };
    Extraction {
        entities: vec![
            ExtractedEntity {
                name: t.source.trim().to_owned(),
                entity_type_id: type_id(&t.source_labels),
                attributes: Attributes::new(),
            },
            ExtractedEntity {
                name: t.target.trim().to_owned(),
                entity_type_id: type_id(&t.target_labels),
                attributes: Attributes::new(),
            },
        ],
        facts: vec![ExtractedFact {
            source: t.source.trim().to_owned(),
            target: t.target.trim().to_owned(),
            relation: t.relation.clone(),
            fact: t.sentence(),
            valid_at: t.valid_at.map(|v| v.to_rfc3339()),
            invalid_at: t.invalid_at.map(|v| v.to_rfc3339()),
        }],
    }
}

/// `content` in pieces of at most `max_chars` characters, each cut after the
/// last sentence end (else line break, else space) inside its limit, so a
/// long document is extracted in bounded calls without splitting words.
fn chunks(content: &str, max_chars: usize) -> Vec<&str> {
    let max_chars = max_chars.max(1);
    let mut out = Vec::new();
    let mut rest = content;
    while !rest.is_empty() {
        let Some((limit, _)) = rest.char_indices().nth(max_chars) else {
            out.push(rest);
            break;
        };
        let head = &rest[..limit];
        let cut = [". ", "! ", "? ", "\n", " "]
            .iter()
            .find_map(|sep| head.rfind(sep).map(|i| i + sep.len()))
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    out
}

/// A JSON episode already shaped like an extraction (`{"entities": [...],
/// "facts": [...]}`) is taken as is, without a model call.
fn structured_extraction(value: &serde_json::Value) -> Option<Extraction> {
    let obj = value.as_object()?;
    if !obj.contains_key("entities") && !obj.contains_key("facts") {
        return None;
    }
    serde_json::from_value(value.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_content_is_cut_into_bounded_pieces_at_boundaries() {
        assert_eq!(chunks("short", 10), ["short"]);
        assert_eq!(
            chunks("One two. Three four five.", 12),
            ["One two. ", "Three four ", "five."]
        );
        let odd = "\u{212A}".repeat(30);
        let pieces = chunks(&odd, 7);
        assert!(pieces.iter().all(|p| p.chars().count() <= 7));
        assert_eq!(pieces.concat(), odd);
        assert_eq!(chunks("", 5), Vec::<&str>::new());
    }
}
