//! Stage 3: the entity resolution funnel — exact name, fuzzy name (MinHash),
//! name embedding, and the model only for what is still ambiguous — and the
//! entities it creates or changes.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_model::{
    Attributes, DecisionStats, ENTITY_LABEL, Entity, IdKind, NewEpisode, Timestamp, derive_id,
    normalize_name,
};
use uuid::Uuid;

use super::{DecideError, Decider, Prepared, tier};
use crate::ports::{
    AmbiguousEntity, CandidateEntity, EntityResolutionRequest, ExtractedEntity, PromptKind,
};
use crate::state::GroupState;

/// Where one extracted entity resolved, and by which tier; `None` while unresolved.
pub(super) type Resolution = Option<(Uuid, &'static str)>;

/// Stage 3's outcome.
pub(super) struct ResolvedEntities {
    /// The id of each extracted entity, in extraction order.
    pub(super) uuid_of: Vec<Uuid>,
    /// Entities the episode creates.
    pub(super) created: Vec<Entity>,
    /// Changes to existing entities.
    pub(super) updates: BTreeMap<Uuid, EntityPatch>,
}

impl Decider {
    /// Stage 3, the cheap tiers: exact normalized name, fuzzy name, then a
    /// verdict another episode of the bulk batch already got.
    pub(super) fn match_names(
        &self,
        state: &GroupState,
        entities: &[ExtractedEntity],
        llm_cache: &BTreeMap<String, Uuid>,
    ) -> Vec<Resolution> {
        entities
            .iter()
            .map(|e| {
                let type_name = self.ontology.entity_type_name(e.entity_type_id);
                let exact = state
                    .entities_named(&normalize_name(&e.name))
                    .filter(|x| types_compatible(x.entity_type(), type_name))
                    .min_by_key(|x| (x.created_at, x.uuid));
                if let Some(x) = exact {
                    Some((x.uuid, tier::EXACT))
                } else if let Some((x, _)) = state
                    .fuzzy_matches(&e.name, self.config.fuzzy_jaccard)
                    .into_iter()
                    .find(|(x, _)| types_compatible(x.entity_type(), type_name))
                {
                    Some((x.uuid, tier::FUZZY))
                } else if let Some(uuid) = llm_cache.get(&normalize_name(&e.name))
                    && state.get_entity(uuid).is_some()
                {
                    Some((*uuid, tier::IN_BATCH))
                } else {
                    None
                }
            })
            .collect()
    }

    /// Stage 3, the costly tiers for the names still unresolved (those in
    /// `name_vectors`): embedding similarity, and what stays ambiguous to
    /// the model in one call (its verdicts are remembered in `llm_cache`).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn match_embeddings(
        &self,
        state: &GroupState,
        ep: &NewEpisode,
        entities: &[ExtractedEntity],
        name_vectors: &BTreeMap<usize, Vec<f32>>,
        resolved: &mut [Resolution],
        llm_cache: &mut BTreeMap<String, Uuid>,
        stats: &mut DecisionStats,
    ) -> Result<(), DecideError> {
        let mut ambiguous: Vec<(usize, Vec<Uuid>)> = Vec::new();
        for (&i, vector) in name_vectors {
            let type_name = self.ontology.entity_type_name(entities[i].entity_type_id);
            let scored = nearest_entities(
                state,
                &entities[i].name,
                vector,
                type_name,
                self.config.max_candidates,
            );
            match scored.first() {
                Some((u, s)) if *s >= self.config.embedding_merge => {
                    resolved[i] = Some((*u, tier::EMBEDDING))
                }
                Some(_) => {
                    let candidates: Vec<Uuid> = scored
                        .iter()
                        .filter(|(_, s)| *s >= self.config.embedding_candidate)
                        .map(|(u, _)| *u)
                        .collect();
                    if !candidates.is_empty() {
                        ambiguous.push((i, candidates));
                    }
                }
                None => {}
            }
        }
        if ambiguous.is_empty() {
            return Ok(());
        }
        let request = EntityResolutionRequest {
            episode_content: ep.content.clone(),
            entities: ambiguous
                .iter()
                .map(|(i, cands)| AmbiguousEntity {
                    name: entities[*i].name.clone(),
                    entity_type: self
                        .ontology
                        .entity_type_name(entities[*i].entity_type_id)
                        .to_owned(),
                    candidates: cands
                        .iter()
                        .filter_map(|u| state.get_entity(u))
                        .map(|x| CandidateEntity {
                            name: x.name.clone(),
                            entity_type: x.entity_type().to_owned(),
                            summary: x.summary.clone(),
                        })
                        .collect(),
                })
                .collect(),
        };
        let verdicts = self.extractor.resolve_entities(&request).await?;
        self.count_call(stats, PromptKind::ResolveEntities);
        for ((i, cands), verdict) in ambiguous.iter().zip(verdicts) {
            if let Some(u) = verdict.and_then(|k| cands.get(k)) {
                resolved[*i] = Some((*u, tier::LLM));
                llm_cache.insert(normalize_name(&entities[*i].name), *u);
            }
        }
        Ok(())
    }

    /// Stage 3's outcome: an entity per unresolved name (with its name
    /// vector), and the labels and typed attributes a resolved one gains.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn entity_changes(
        &self,
        state: &GroupState,
        ep: &NewEpisode,
        tx: Timestamp,
        entities: &[ExtractedEntity],
        resolved: &[Resolution],
        name_vectors: &BTreeMap<usize, Vec<f32>>,
        stats: &mut DecisionStats,
    ) -> ResolvedEntities {
        let mut out = ResolvedEntities {
            uuid_of: Vec::with_capacity(entities.len()),
            created: Vec::new(),
            updates: BTreeMap::new(),
        };
        for (i, e) in entities.iter().enumerate() {
            let type_name = self.ontology.entity_type_name(e.entity_type_id).to_owned();
            let attributes = self.typed_attributes(&type_name, &e.attributes);
            match resolved[i] {
                Some((uuid, t)) => {
                    *stats.resolutions.entry(t.to_owned()).or_default() += 1;
                    out.uuid_of.push(uuid);
                    if let Some(existing) = state.get_entity(&uuid) {
                        let patch = out.updates.entry(uuid).or_default();
                        if existing.entity_type() == ENTITY_LABEL && type_name != ENTITY_LABEL {
                            patch.labels = Some(labels_for(&type_name));
                        }
                        if !attributes.is_empty() {
                            let mut merged = existing.attributes.clone();
                            merged.extend(attributes);
                            if merged != existing.attributes {
                                patch.attributes = Some(merged);
                            }
                        }
                    } else if let Some(x) = out.created.iter_mut().find(|x| x.uuid == uuid) {
                        x.attributes.extend(attributes);
                    }
                }
                None => {
                    *stats.resolutions.entry(tier::NEW.to_owned()).or_default() += 1;
                    let uuid = derive_id(ep.uuid, IdKind::Entity, i as u32);
                    out.uuid_of.push(uuid);
                    out.created.push(Entity {
                        uuid,
                        name: e.name.clone(),
                        group_id: ep.group_id.clone(),
                        labels: labels_for(&type_name),
                        created_at: tx,
                        name_embedding: name_vectors.get(&i).cloned(),
                        summary: String::new(),
                        attributes,
                    });
                }
            }
        }
        out
    }

    fn typed_attributes(&self, type_name: &str, given: &Attributes) -> Attributes {
        let Some(ty) = self
            .ontology
            .entity_types
            .iter()
            .find(|t| t.name == type_name)
        else {
            return Attributes::new();
        };
        given
            .iter()
            .filter(|(k, v)| {
                ty.attributes
                    .iter()
                    .any(|f| &f.name == *k && f.kind.accepts(v))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// A field-wise change of an existing entity.
#[derive(Clone, Debug, Default)]
pub(super) struct EntityPatch {
    pub(super) summary: Option<String>,
    pub(super) attributes: Option<Attributes>,
    pub(super) labels: Option<Vec<String>>,
}

impl EntityPatch {
    pub(super) fn is_empty(&self) -> bool {
        self.summary.is_none() && self.attributes.is_none() && self.labels.is_none()
    }
}

fn labels_for(type_name: &str) -> Vec<String> {
    if type_name == ENTITY_LABEL {
        vec![ENTITY_LABEL.to_owned()]
    } else {
        vec![ENTITY_LABEL.to_owned(), type_name.to_owned()]
    }
}

fn types_compatible(a: &str, b: &str) -> bool {
    a == b || a == ENTITY_LABEL || b == ENTITY_LABEL
}

/// Existing entities of a compatible type by name-embedding cosine, best
/// first; a name that differs by a distinguishing token ("FC Barcelona B")
/// is never a candidate, however close its vector.
fn nearest_entities(
    state: &GroupState,
    name: &str,
    vector: &[f32],
    type_name: &str,
    k: usize,
) -> Vec<(Uuid, f32)> {
    let mut scored: Vec<(Uuid, f32)> = state
        .entities()
        .filter(|e| types_compatible(e.entity_type(), type_name))
        .filter(|e| !crate::fuzzy::differ_by_distinguishing_token(&e.name, name))
        .filter_map(|e| {
            let v = e.name_embedding.as_ref()?;
            (v.len() == vector.len()).then(|| {
                (
                    e.uuid,
                    v.iter().zip(vector).map(|(a, b)| a * b).sum::<f32>(),
                )
            })
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    scored
}

/// Union-find clusters of entity mentions across a bulk batch (same
/// normalized name, or fuzzy-equal names). Only model verdicts are shared
/// through them, so without a model bulk decisions equal sequential ones
/// exactly; with a model an ambiguous cluster is asked about once.
pub(super) struct BatchClusters {
    root_of: BTreeMap<String, String>,
}

impl BatchClusters {
    pub(super) fn new(prepared: &[Option<Result<Prepared, DecideError>>], threshold: f64) -> Self {
        let names: Vec<String> = prepared
            .iter()
            .flatten()
            .flatten()
            .flat_map(|p| {
                p.extraction
                    .entities
                    .iter()
                    .map(|e| normalize_name(&e.name))
            })
            .filter(|n| !n.is_empty())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut parent: Vec<usize> = (0..names.len()).collect();
        fn find(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        let mut lsh = crate::fuzzy::LshIndex::default();
        let ids: Vec<Uuid> = (0..names.len())
            .map(|i| Uuid::from_u128(i as u128))
            .collect();
        for (i, n) in names.iter().enumerate() {
            for (other, _) in lsh.matches(n, threshold) {
                let j = other.as_u128() as usize;
                let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
            lsh.insert(ids[i], n);
        }
        let root_of = (0..names.len())
            .map(|i| {
                let r = find(&mut parent, i);
                (names[i].clone(), names[r].clone())
            })
            .collect();
        BatchClusters { root_of }
    }

    /// The verdict cache one episode starts from: every name of a cluster
    /// that already has a verdict maps to it.
    pub(super) fn cache_for(&self, verdicts: &BTreeMap<String, Uuid>) -> BTreeMap<String, Uuid> {
        let by_root: BTreeMap<&String, Uuid> = verdicts
            .iter()
            .filter_map(|(name, u)| Some((self.root_of.get(name)?, *u)))
            .collect();
        self.root_of
            .iter()
            .filter_map(|(name, root)| Some((name.clone(), *by_root.get(root)?)))
            .collect()
    }
}
