//! Stages 4–5: facts between the resolved entities, then their resolution
//! against the graph — restatements, cardinality rules, the model's
//! verdicts under the guard.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_model::{
    Attributes, DecisionStats, Fact, IdKind, NewEpisode, Timestamp, Window, derive_id,
    normalize_name, normalize_relation,
};
use uuid::Uuid;

use super::{DecideError, Decider};
use crate::ontology::{Cardinality, Ontology};
use crate::ports::{
    CandidateFact, ExtractedEntity, ExtractedFact, FactResolutionRequest, NewFactCandidates,
    PromptKind,
};
use crate::state::GroupState;
use crate::temporal;

impl Decider {
    /// Stage 4: the extracted facts whose endpoints are extracted entities
    /// (self-loops dropped), times resolved against the reference time,
    /// each claim once.
    pub(super) fn fact_drafts(
        &self,
        entities: &[ExtractedEntity],
        extracted: &[ExtractedFact],
        reference: Timestamp,
    ) -> Vec<FactDraft> {
        let name_keys: BTreeMap<String, usize> = entities
            .iter()
            .enumerate()
            .map(|(i, e)| (normalize_name(&e.name), i))
            .collect();
        let mut drafts: Vec<FactDraft> = Vec::new();
        for x in extracted {
            if let Some(d) = self.fact_draft(x, &name_keys, reference)
                && !drafts.iter().any(|o| o.same_claim(&d))
            {
                drafts.push(d);
            }
        }
        drafts
    }

    /// Stage 5: each draft (with its sentence's vector) between the entities
    /// `uuid_of` resolved, settled against the graph and the facts before it
    /// in the episode.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn resolve_facts<'s>(
        &self,
        state: &'s GroupState,
        ep: &NewEpisode,
        tx: Timestamp,
        drafts: Vec<FactDraft>,
        vectors: Vec<Vec<f32>>,
        uuid_of: &[Uuid],
        stats: &mut DecisionStats,
    ) -> Result<FactWork<'s>, DecideError> {
        let mut facts = FactWork::new(state);
        let drafts: Vec<(FactDraft, Uuid, Uuid, Vec<f32>)> = drafts
            .into_iter()
            .zip(vectors)
            .filter_map(|(d, v)| {
                let (s, t) = (uuid_of[d.source], uuid_of[d.target]);
                (s != t).then_some((d, s, t, v))
            })
            .collect();
        let verdicts = self.ask_about_facts(state, &drafts, stats).await?;
        for (k, ((draft, s, t, vector), verdict)) in drafts.into_iter().zip(verdicts).enumerate() {
            let fact = Fact {
                uuid: derive_id(ep.uuid, IdKind::Fact, k as u32),
                group_id: ep.group_id.clone(),
                source_node_uuid: s,
                target_node_uuid: t,
                name: draft.relation.clone(),
                fact: draft.sentence.clone(),
                fact_embedding: Some(vector),
                episodes: vec![ep.uuid],
                created_at: tx,
                valid_at: draft.valid_at,
                invalid_at: draft.invalid_at,
                expired_at: None,
                reference_time: ep.reference_time,
                attributes: Attributes::new(),
                invalidated_by: None,
                stated_windows: Vec::new(),
            };
            facts.resolve(fact, &self.ontology, verdict);
        }
        Ok(facts)
    }

    fn fact_draft(
        &self,
        x: &ExtractedFact,
        names: &BTreeMap<String, usize>,
        reference: Timestamp,
    ) -> Option<FactDraft> {
        let source = *names.get(&normalize_name(&x.source))?;
        let target = *names.get(&normalize_name(&x.target))?;
        if source == target {
            return None;
        }
        let relation = normalize_relation(&x.relation);
        if relation.is_empty() {
            return None;
        }
        let mut valid_at = x
            .valid_at
            .as_deref()
            .and_then(|e| temporal::resolve(e, reference));
        let invalid_at = x
            .invalid_at
            .as_deref()
            .and_then(|e| temporal::resolve(e, reference));
        if valid_at.is_none() && invalid_at.is_none() {
            valid_at = Some(reference); // an ongoing fact holds from the reference time
        }
        // An end before the start is no window at all: the fact is dropped
        // rather than widened to "forever". A zero-length window is kept
        // exactly (it holds at no instant, but the fact is still findable).
        if let (Some(v), Some(i)) = (valid_at, invalid_at)
            && i < v
        {
            return None;
        }
        let sentence = if x.fact.trim().is_empty() {
            format!(
                "{} {} {}",
                x.source,
                relation.to_lowercase().replace('_', " "),
                x.target
            )
        } else {
            x.fact.trim().to_owned()
        };
        Some(FactDraft {
            source,
            target,
            relation,
            sentence,
            valid_at,
            invalid_at,
        })
    }

    /// One model call for the facts whose duplicates or contradictions the
    /// rules cannot settle; `None` for facts that need no verdict.
    async fn ask_about_facts(
        &self,
        state: &GroupState,
        drafts: &[(FactDraft, Uuid, Uuid, Vec<f32>)],
        stats: &mut DecisionStats,
    ) -> Result<Vec<Option<ModelVerdict>>, DecideError> {
        let mut asks: Vec<(usize, Vec<Uuid>, Vec<Uuid>)> = Vec::new();
        if self.extractor.is_model() {
            for (k, (d, s, t, _)) in drafts.iter().enumerate() {
                let window = Window::new(d.valid_at, d.invalid_at);
                let rule_duplicate = state.facts_between(s, t).any(|e| {
                    e.source_node_uuid == *s
                        && e.name == d.relation
                        && e.valid_window().overlaps(&window)
                });
                if rule_duplicate {
                    continue;
                }
                let duplicates: Vec<Uuid> = state
                    .facts_between(s, t)
                    .filter(|e| e.name != d.relation)
                    .map(|e| e.uuid)
                    .collect();
                let contradictions: Vec<Uuid> =
                    if self.ontology.cardinality(&d.relation) == Cardinality::One {
                        Vec::new()
                    } else {
                        let mut seen = BTreeSet::new();
                        state
                            .facts_of(s)
                            .chain(state.facts_of(t))
                            .filter(|e| seen.insert(e.uuid))
                            .filter(|e| e.name == d.relation && e.valid_window().overlaps(&window))
                            .filter(|e| !(e.source_node_uuid == *s && e.target_node_uuid == *t))
                            .map(|e| e.uuid)
                            .collect()
                    };
                if !duplicates.is_empty() || !contradictions.is_empty() {
                    asks.push((k, duplicates, contradictions));
                }
            }
        }
        let mut out: Vec<Option<ModelVerdict>> = vec![None; drafts.len()];
        if asks.is_empty() {
            return Ok(out);
        }
        let candidate = |u: &Uuid| {
            state.get_fact(u).map(|e| CandidateFact {
                relation: e.name.clone(),
                fact: e.fact.clone(),
                valid_at: e.valid_at,
                invalid_at: e.invalid_at,
            })
        };
        let request = FactResolutionRequest {
            facts: asks
                .iter()
                .map(|(k, dups, contras)| NewFactCandidates {
                    relation: drafts[*k].0.relation.clone(),
                    fact: drafts[*k].0.sentence.clone(),
                    valid_at: drafts[*k].0.valid_at,
                    duplicates: dups.iter().filter_map(candidate).collect(),
                    contradictions: contras.iter().filter_map(candidate).collect(),
                })
                .collect(),
        };
        let verdicts = self.extractor.resolve_facts(&request).await?;
        self.count_call(stats, PromptKind::ResolveFacts);
        for ((k, dups, contras), v) in asks.into_iter().zip(verdicts) {
            out[k] = Some(ModelVerdict {
                duplicate_of: v.duplicate_of.and_then(|i| dups.get(i).copied()),
                contradicts: v
                    .contradicts
                    .iter()
                    .filter_map(|i| contras.get(*i).copied())
                    .collect(),
            });
        }
        Ok(out)
    }
}

/// The model's verdict on one new fact, as fact ids.
#[derive(Clone, Debug)]
pub(super) struct ModelVerdict {
    duplicate_of: Option<Uuid>,
    contradicts: Vec<Uuid>,
}

/// A fact as extracted, before resolution.
#[derive(Clone, Debug)]
pub(super) struct FactDraft {
    pub(super) source: usize,
    pub(super) target: usize,
    pub(super) relation: String,
    pub(super) sentence: String,
    pub(super) valid_at: Option<Timestamp>,
    pub(super) invalid_at: Option<Timestamp>,
}

impl FactDraft {
    fn same_claim(&self, other: &FactDraft) -> bool {
        self.source == other.source
            && self.target == other.target
            && self.relation == other.relation
            && self.valid_at == other.valid_at
            && self.invalid_at == other.invalid_at
    }
}

/// Fact resolution of one episode: new facts, restatements, invalidations.
pub(super) struct FactWork<'s> {
    state: &'s GroupState,
    pub(super) created: Vec<Fact>,
    /// Existing facts asserted again, with the window stated when it widens them.
    pub(super) restated: Vec<(Uuid, Option<Window>)>,
    /// Existing facts to invalidate: (invalid_at, by_fact).
    pub(super) invalidated: BTreeMap<Uuid, (Timestamp, Option<Uuid>)>,
}

impl<'s> FactWork<'s> {
    fn new(state: &'s GroupState) -> Self {
        FactWork {
            state,
            created: Vec::new(),
            restated: Vec::new(),
            invalidated: BTreeMap::new(),
        }
    }

    /// An existing fact as this episode's pending invalidations leave it.
    fn view(&self, f: &Fact) -> Fact {
        let mut f = f.clone();
        if let Some((at, _)) = self.invalidated.get(&f.uuid) {
            f.invalid_at = Some(*at);
        }
        f
    }

    /// Existing and new facts with either endpoint, as currently seen.
    fn around(&self, s: Uuid, t: Uuid) -> Vec<Fact> {
        let mut seen = BTreeSet::new();
        let mut out: Vec<Fact> = self
            .state
            .facts_of(&s)
            .chain(self.state.facts_of(&t))
            .filter(|f| seen.insert(f.uuid))
            .map(|f| self.view(f))
            .collect();
        out.extend(
            self.created
                .iter()
                .filter(|f| {
                    [f.source_node_uuid, f.target_node_uuid]
                        .iter()
                        .any(|e| *e == s || *e == t)
                })
                .cloned(),
        );
        out
    }

    fn resolve(&mut self, mut fact: Fact, ontology: &Ontology, verdict: Option<ModelVerdict>) {
        let (s, t) = (fact.source_node_uuid, fact.target_node_uuid);
        let window = fact.valid_window();
        let around = self.around(s, t);

        // A restatement: same endpoints, same relation, windows that overlap or meet.
        let duplicate = around
            .iter()
            .find(|e| {
                e.source_node_uuid == s
                    && e.target_node_uuid == t
                    && e.name == fact.name
                    && e.valid_window().touches(&window)
            })
            .map(|e| e.uuid)
            .or_else(|| verdict.as_ref().and_then(|v| v.duplicate_of));
        if let Some(dup) = duplicate {
            let one = ontology.cardinality(&fact.name) == Cardinality::One;
            self.restate(dup, &fact, &around, one);
            return;
        }

        // Contradictions: cardinality rules, then the model's verdicts under the guard.
        let one = ontology.cardinality(&fact.name) == Cardinality::One;
        let model_says: BTreeSet<Uuid> = verdict
            .map(|v| v.contradicts.into_iter().collect())
            .unwrap_or_default();
        let mut contradicted: Vec<Fact> = around
            .into_iter()
            .filter(|e| {
                e.uuid != fact.uuid && e.name == fact.name && e.valid_window().overlaps(&window)
            })
            .filter(|e| {
                let shares_endpoint = [e.source_node_uuid, e.target_node_uuid]
                    .iter()
                    .any(|x| *x == s || *x == t);
                let by_rule = one && e.source_node_uuid == s && e.target_node_uuid != t;
                by_rule || (shares_endpoint && model_says.contains(&e.uuid))
            })
            .collect();
        // Only a fact with a known start can end another one.
        if fact.valid_at.is_some() {
            contradicted.sort_by_key(|e| (e.valid_at, e.uuid));
            for e in contradicted {
                let (ev, fv) = (
                    e.valid_at.unwrap_or(Timestamp::MIN),
                    fact.valid_at.unwrap_or(Timestamp::MIN),
                );
                match ev.cmp(&fv) {
                    std::cmp::Ordering::Less => self.end(e.uuid, fv, Some(fact.uuid)),
                    // A late arrival: a newer contradicting fact exists, so this one is born ended.
                    std::cmp::Ordering::Greater => {
                        fact.invalid_at = Some(fact.invalid_at.map_or(ev, |i| i.min(ev)))
                    }
                    // The same start says nothing about which replaced which:
                    // both stand, whatever order they arrived in.
                    std::cmp::Ordering::Equal => {}
                }
            }
        }
        self.created.push(fact);
    }

    /// `fact` states `dup` again. An open fact learns its end from a
    /// restatement that has one, and a start-less ending ("X left Y")
    /// ends it; otherwise the restatement's window joins the fact's (the
    /// union of overlapping or adjacent windows, see [`Fact::widened_by`]).
    ///
    /// A widening never reaches into the time of a contradicting fact of a
    /// `cardinality: one` relation (the source was elsewhere then): such a
    /// restatement adds provenance only.
    fn restate(&mut self, dup: Uuid, fact: &Fact, around: &[Fact], one: bool) {
        let stated = fact.valid_window();
        if let Some(created) = self.created.iter_mut().find(|f| f.uuid == dup) {
            if let Some(w) = created.widened_by(&stated) {
                (created.valid_at, created.invalid_at) = (w.start, w.end);
            }
            return;
        }
        let mut widening = None;
        if let Some(existing) = around.iter().find(|e| e.uuid == dup) {
            let learns_end = fact.invalid_at.filter(|end| {
                existing.valid_at.is_none_or(|v| v < *end)
                    && match existing.invalid_at {
                        None => true,
                        Some(i) => fact.valid_at.is_none() && i > *end,
                    }
            });
            if let Some(end) = learns_end {
                self.end(dup, end, None);
            } else if !self.invalidated.contains_key(&dup)
                && let Some(widened) = existing.widened_by(&stated)
            {
                let current = existing.valid_window();
                let contradicted = one
                    && around.iter().any(|e| {
                        e.source_node_uuid == existing.source_node_uuid
                            && e.target_node_uuid != existing.target_node_uuid
                            && e.name == existing.name
                            && e.valid_window().overlaps(&widened)
                            && !e.valid_window().overlaps(&current)
                    });
                if !contradicted {
                    widening = Some(stated);
                }
            }
        }
        match self.restated.iter_mut().find(|(u, _)| *u == dup) {
            Some((_, w)) => *w = w.or(widening),
            None => self.restated.push((dup, widening)),
        }
    }

    /// Ends a fact at `at`: an existing one by an invalidation event, a new one in place.
    fn end(&mut self, uuid: Uuid, at: Timestamp, by_fact: Option<Uuid>) {
        if let Some(f) = self.created.iter_mut().find(|f| f.uuid == uuid) {
            f.invalid_at = Some(f.invalid_at.map_or(at, |i| i.min(at)));
            return;
        }
        let entry = self.invalidated.entry(uuid).or_insert((at, by_fact));
        if at < entry.0 {
            *entry = (at, by_fact);
        }
    }
}
