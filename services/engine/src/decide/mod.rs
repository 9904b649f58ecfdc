//! decide: `(group state, command) -> events` — graphiti's `add_episode`,
//! made incremental and deterministic.
//!
//! Only here are model and embedding calls made (through the ports). Every id
//! is derived from the command's id and every timestamp from the command
//! record's transaction time, so deciding the same command against the same
//! state yields the same batch.
//!
//! The steps, cheapest first:
//! 1. context: the last N episodes with `valid_at <= reference_time` (or the
//!    explicit `previous_episode_uuids`);
//! 2. extraction: one call per piece of at most `extraction_chunk_chars`
//!    (none for `fact_triple` and structured JSON episodes), at most
//!    `max_entities_per_episode` entities and `max_facts_per_episode` facts
//!    kept, so one episode's cost is bounded; exact duplicates inside the
//!    episode collapse, keeping the more specific type;
//! 3. entity resolution funnel: exact normalized name → fuzzy (MinHash,
//!    Jaccard ≥ 0.9, entropy guard) → embedding similarity → the model only
//!    for what is still ambiguous; the fuzzy and embedding tiers never merge
//!    names that differ by a distinguishing token ("FC Barcelona B");
//! 4. facts between resolved entities: unknown endpoints and self-loops
//!    dropped, time expressions resolved against the reference time;
//! 5. fact resolution: a restatement (same endpoints and relation,
//!    overlapping or adjacent windows) adds provenance without a model call
//!    and widens the fact to the union of the windows; a
//!    `cardinality: one` relation invalidates the previous fact of the same
//!    source deterministically (facts with the same start both stand); other contradictions are asked of the model,
//!    and only accepted with a shared endpoint, the same relation and
//!    overlapping windows (the guard against collateral invalidation);
//! 6. summaries from the new facts only (concatenated while short);
//! 7. events.
//!
//! | module | stages |
//! |---|---|
//! | `extract` | 1–2: context, extraction, collapse of in-episode duplicates |
//! | `entities` | 3: the resolution funnel and the entities it creates or changes |
//! | `facts` | 4–5: fact drafts and fact resolution |
//! | `summaries` | 6: entity summaries |
//! | `events` | 7: the batch's events |
//! | `episode` | the stored episode and its retrieval key |

mod entities;
mod episode;
mod events;
mod extract;
mod facts;
mod summaries;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use chronicle_model::{
    Command, ContentError, DecisionStats, Episode, EventBatch, EventKind, LogPosition, NewEpisode,
    Timestamp,
};
use thiserror::Error;
use uuid::Uuid;

use crate::communities::{CommunityConfig, EpisodeDelta};
use crate::ontology::Ontology;
use crate::ports::{ContextEpisode, Embedder, Extraction, Extractor, LlmError, PromptKind};
use crate::state::GroupState;
use entities::BatchClusters;
pub(crate) use episode::retrieval_key;
use episode::stored_episode;

/// Tunables of the pipeline.
#[derive(Clone, Debug)]
pub struct DecideConfig {
    /// Context episodes shown to the extractor.
    pub context_episodes: usize,
    /// Shingle Jaccard at or above which names fuzzy-match.
    pub fuzzy_jaccard: f64,
    /// Name-embedding cosine at or above which entities merge without asking.
    pub embedding_merge: f32,
    /// Cosine at or above which an entity is a candidate worth asking about.
    pub embedding_candidate: f32,
    /// Candidates per ambiguous entity.
    pub max_candidates: usize,
    /// Longest summary kept by concatenation; longer ones are summarized.
    /// Also the length of community summaries.
    pub summary_max_chars: usize,
    /// Longest saga summary.
    pub saga_summary_max_chars: usize,
    /// Community detection and maintenance.
    pub communities: CommunityConfig,
    /// Longest piece of content one extraction call sees; longer content is
    /// split at sentence or word boundaries and extracted piece by piece.
    pub extraction_chunk_chars: usize,
    /// Most entities one episode may contribute (the first ones are kept).
    pub max_entities_per_episode: usize,
    /// Most facts one episode may contribute (the first ones are kept).
    pub max_facts_per_episode: usize,
}

impl Default for DecideConfig {
    fn default() -> Self {
        DecideConfig {
            context_episodes: 10,
            fuzzy_jaccard: 0.9,
            embedding_merge: 0.97,
            embedding_candidate: 0.88,
            max_candidates: 5,
            summary_max_chars: 500,
            saga_summary_max_chars: 1000,
            communities: CommunityConfig::default(),
            extraction_chunk_chars: 8_000,
            max_entities_per_episode: 200,
            max_facts_per_episode: 400,
        }
    }
}

/// Why a command could not be decided.
#[derive(Debug, Error)]
pub enum DecideError {
    /// The episode's content is malformed: retrying will not help.
    #[error("bad episode content: {0}")]
    Content(#[from] ContentError),
    /// A model call failed after the adapter's retries.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The embedder broke its contract.
    #[error("embedder returned {got} vectors for {want} texts")]
    EmbeddingCount {
        /// Vectors returned.
        got: usize,
        /// Texts sent.
        want: usize,
    },
    /// The embedder returned a NaN, an infinity, or a value half precision
    /// cannot hold: written to the log it would make the record malformed
    /// and poison every distance.
    #[error(
        "embedder returned a non-finite value (or one beyond half precision's range) for text {text}"
    )]
    NonFiniteEmbedding {
        /// Index of the text in the request.
        text: usize,
    },
}

/// The resolution tiers, for stats and metrics.
pub mod tier {
    /// A new entity.
    pub const NEW: &str = "new";
    /// Same normalized name.
    pub const EXACT: &str = "exact";
    /// Near-identical name (MinHash).
    pub const FUZZY: &str = "fuzzy";
    /// Near-identical name embedding.
    pub const EMBEDDING: &str = "embedding";
    /// The model said so.
    pub const LLM: &str = "llm";
    /// Settled by another member of the same bulk batch.
    pub const IN_BATCH: &str = "in_batch";
}

/// The pipeline stages timed in [`DecisionStats::stage_micros`], for the
/// stage-latency metric.
pub mod stage {
    /// Picking the context episodes.
    pub const CONTEXT: &str = "context";
    /// Extraction of entities and fact candidates (the model call).
    pub const EXTRACT: &str = "extract";
    /// Turning fact candidates into drafts: endpoints, relations, dates.
    pub const EXTRACT_FACTS: &str = "extract_facts";
    /// The entity resolution funnel, embeddings included.
    pub const RESOLVE_ENTITIES: &str = "resolve_entities";
    /// Duplicates, contradictions and invalidations.
    pub const RESOLVE_FACTS: &str = "resolve_facts";
    /// Entity summaries from the new facts.
    pub const SUMMARIES: &str = "summaries";
    /// Incremental community maintenance.
    pub const COMMUNITIES: &str = "communities";
}

/// The episodes an extraction sees, and how long picking them took.
struct Context {
    episodes: Vec<ContextEpisode>,
    micros: u64,
}

fn micros_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The pipeline with its ports.
#[derive(Clone)]
pub struct Decider {
    extractor: Arc<dyn Extractor>,
    embedder: Arc<dyn Embedder>,
    ontology: Ontology,
    config: DecideConfig,
}

impl std::fmt::Debug for Decider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decider")
            .field("extractor", &self.extractor.describe())
            .field("embedder", &self.embedder.describe())
            .finish()
    }
}

/// A command with where and when the log accepted it.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// The command.
    pub command: Command,
    /// The log's timestamp for it: the transaction time of its events.
    pub tx_time: Timestamp,
    /// Its position on the commands log.
    pub source: Option<LogPosition>,
}

/// A bulk batch whose extractions already ran.
pub struct Bulk {
    prepared: Vec<Option<Result<Prepared, DecideError>>>,
    clusters: BatchClusters,
    verdicts: BTreeMap<String, Uuid>,
}

impl std::fmt::Debug for Bulk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bulk({} items)", self.prepared.len())
    }
}

impl Bulk {
    /// Decides item `i` (call in order) against the state the earlier items
    /// left. An item whose extraction failed is decided afresh here, which
    /// retries the extraction.
    pub async fn decide(
        &mut self,
        decider: &Decider,
        state: &GroupState,
        i: usize,
        accepted: &Accepted,
    ) -> Result<EventBatch, DecideError> {
        let started = Instant::now();
        let prepared = self.prepared.get_mut(i).and_then(Option::take);
        let result = match (&accepted.command, prepared) {
            (Command::AddEpisode(ep), Some(Ok(prep))) if state.get_episode(&ep.uuid).is_none() => {
                let mut cache = self.clusters.cache_for(&self.verdicts);
                let r = decider
                    .resolve(
                        state,
                        ep,
                        prep,
                        accepted.tx_time,
                        accepted.source,
                        &mut cache,
                    )
                    .await;
                self.verdicts.extend(cache);
                r
            }
            _ => return decider.decide(state, accepted).await,
        };
        result.map(|mut b| {
            if let Some(s) = b.stats.as_mut() {
                s.decide_micros = started.elapsed().as_micros() as u64;
            }
            b
        })
    }
}

/// Work that can be done before the episode's turn: model extraction.
struct Prepared {
    extraction: Extraction,
    /// The turn before this episode in the group's order, if any: part of
    /// the episode's retrieval key (an answer is found by its question).
    previous_turn: Option<String>,
    stats: DecisionStats,
}

impl Decider {
    /// A pipeline over the given ports.
    pub fn new(
        extractor: Arc<dyn Extractor>,
        embedder: Arc<dyn Embedder>,
        ontology: Ontology,
        config: DecideConfig,
    ) -> Self {
        Decider {
            extractor,
            embedder,
            ontology,
            config,
        }
    }

    /// The ontology in use.
    pub fn ontology(&self) -> &Ontology {
        &self.ontology
    }

    /// The embedder in use.
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The extractor in use.
    pub fn extractor(&self) -> &Arc<dyn Extractor> {
        &self.extractor
    }

    /// The tunables in use.
    pub fn config(&self) -> &DecideConfig {
        &self.config
    }

    /// Decides one command against the group's current state.
    pub async fn decide(
        &self,
        state: &GroupState,
        accepted: &Accepted,
    ) -> Result<EventBatch, DecideError> {
        let started = Instant::now();
        let Accepted {
            command,
            tx_time,
            source,
        } = accepted;
        let mut batch = match command {
            Command::AddEpisode(ep) => {
                if state.get_episode(&ep.uuid).is_some() {
                    EventBatch::new(ep.uuid, ep.group_id.clone(), *tx_time, *source, Vec::new())
                } else {
                    let prepared = self.prepare(ep, self.context(state, ep, &[])).await?;
                    let mut cache = BTreeMap::new();
                    self.resolve(state, ep, prepared, *tx_time, *source, &mut cache)
                        .await?
                }
            }
            Command::RetractEpisode {
                uuid,
                group_id,
                episode_uuid,
            } => {
                let kinds = if state.get_episode(episode_uuid).is_some() {
                    vec![EventKind::EpisodeRetracted {
                        episode_uuid: *episode_uuid,
                    }]
                } else {
                    Vec::new()
                };
                EventBatch::new(*uuid, group_id.clone(), *tx_time, *source, kinds)
            }
            Command::BuildCommunities { uuid, group_id } => {
                let mut stats = DecisionStats::default();
                let kinds = self
                    .build_communities(state, group_id, *uuid, *tx_time, &mut stats)
                    .await?;
                let mut batch = EventBatch::new(*uuid, group_id.clone(), *tx_time, *source, kinds);
                batch.stats = Some(stats);
                batch
            }
            Command::SummarizeSaga {
                uuid,
                group_id,
                saga,
            } => {
                let mut stats = DecisionStats::default();
                let kinds = self.summarize_saga(state, saga, &mut stats).await?;
                let mut batch = EventBatch::new(*uuid, group_id.clone(), *tx_time, *source, kinds);
                batch.stats = Some(stats);
                batch
            }
        };
        if let Some(stats) = batch.stats.as_mut() {
            stats.decide_micros = micros_since(started);
        }
        Ok(batch)
    }

    /// Decides many episodes of one group together, applying each decision to
    /// `state` before the next, so the result equals deciding them one by one.
    /// Model extraction runs concurrently for the whole batch; entity
    /// mentions are clustered across the batch (union-find) so an ambiguous
    /// name is put to the model at most once per cluster.
    pub async fn decide_bulk(
        &self,
        state: &mut GroupState,
        items: &[Accepted],
    ) -> Vec<Result<EventBatch, DecideError>> {
        let mut bulk = self.prepare_bulk(state, items).await;
        let mut out = Vec::with_capacity(items.len());
        for (i, a) in items.iter().enumerate() {
            let result = bulk.decide(self, state, i, a).await;
            if let Ok(batch) = &result {
                crate::evolve::apply_batch(state, batch);
            }
            out.push(result);
        }
        out
    }

    /// Runs the state-independent work of a bulk batch (extraction) for all
    /// its items at once; the items are then decided in order with
    /// [`Bulk::decide`], each against the state the previous ones left.
    pub async fn prepare_bulk(&self, state: &GroupState, items: &[Accepted]) -> Bulk {
        let episodes: Vec<Option<&NewEpisode>> = items
            .iter()
            .map(|a| match &a.command {
                Command::AddEpisode(ep) if state.get_episode(&ep.uuid).is_none() => Some(ep),
                _ => None,
            })
            .collect();
        // Contexts as sequential processing would see them.
        let mut earlier: Vec<Episode> = Vec::new();
        let mut contexts = Vec::with_capacity(items.len());
        for (a, ep) in items.iter().zip(&episodes) {
            match ep {
                Some(ep) => {
                    contexts.push(Some(self.context(state, ep, &earlier)));
                    earlier.push(stored_episode(ep, a.tx_time, Vec::new(), None, None));
                }
                None => contexts.push(None),
            }
        }
        let prepared =
            futures::future::join_all(episodes.iter().zip(contexts).map(|(ep, ctx)| async move {
                match (ep, ctx) {
                    (Some(ep), Some(ctx)) => Some(self.prepare(ep, ctx).await),
                    _ => None,
                }
            }))
            .await;
        let clusters = BatchClusters::new(&prepared, self.config.fuzzy_jaccard);
        Bulk {
            prepared,
            clusters,
            verdicts: BTreeMap::new(),
        }
    }

    pub(crate) fn count_call(&self, stats: &mut DecisionStats, kind: PromptKind) {
        if self.extractor.is_model() {
            *stats.llm_calls.entry(kind.as_str().to_owned()).or_default() += 1;
        }
    }

    pub(crate) async fn embed(
        &self,
        texts: Vec<String>,
        stats: &mut DecisionStats,
    ) -> Result<Vec<Vec<f32>>, DecideError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let mut vectors = self.embedder.embed(&texts).await?;
        if vectors.len() != texts.len() {
            return Err(DecideError::EmbeddingCount {
                got: vectors.len(),
                want: texts.len(),
            });
        }
        // The one door through which embeddings enter the graph: rounded to
        // half precision here, every copy keeps them in two bytes a component.
        if let Some(text) = vectors
            .iter_mut()
            .position(|v| chronicle_model::round_to_half(v).is_none())
        {
            return Err(DecideError::NonFiniteEmbedding { text });
        }
        stats.embeddings += texts.len() as u64;
        Ok(vectors)
    }

    /// Stages 3–7 against the state: the funnel, facts, summaries,
    /// communities when incremental, and the events.
    async fn resolve(
        &self,
        state: &GroupState,
        ep: &NewEpisode,
        prepared: Prepared,
        tx: Timestamp,
        source: Option<LogPosition>,
        llm_cache: &mut BTreeMap<String, Uuid>,
    ) -> Result<EventBatch, DecideError> {
        let Prepared {
            extraction,
            previous_turn,
            mut stats,
        } = prepared;
        let entities = extract::collapse_entities(extraction.entities, &self.ontology);

        // Stage 4 first, so fact sentences are embedded with the names in one call.
        let started = Instant::now();
        let drafts = self.fact_drafts(&entities, &extraction.facts, ep.reference_time);
        stats.stage(stage::EXTRACT_FACTS, micros_since(started));

        let started = Instant::now();
        let mut resolved = self.match_names(state, &entities, llm_cache);
        // One embedding call: unresolved names, fact sentences, the episode's key.
        let unresolved: Vec<usize> = (0..entities.len())
            .filter(|i| resolved[*i].is_none())
            .collect();
        let mut texts: Vec<String> = unresolved
            .iter()
            .map(|i| entities[*i].name.clone())
            .collect();
        texts.extend(drafts.iter().map(|f| f.sentence.clone()));
        texts.push(retrieval_key(previous_turn.as_deref(), &ep.content));
        let mut vectors = self.embed(texts, &mut stats).await?;
        let content_embedding = vectors.pop();
        let fact_vectors = vectors.split_off(unresolved.len());
        let name_vectors: BTreeMap<usize, Vec<f32>> =
            unresolved.iter().copied().zip(vectors).collect();
        self.match_embeddings(
            state,
            ep,
            &entities,
            &name_vectors,
            &mut resolved,
            llm_cache,
            &mut stats,
        )
        .await?;
        let mut changes = self.entity_changes(
            state,
            ep,
            tx,
            &entities,
            &resolved,
            &name_vectors,
            &mut stats,
        );
        stats.stage(stage::RESOLVE_ENTITIES, micros_since(started));

        let started = Instant::now();
        let facts = self
            .resolve_facts(
                state,
                ep,
                tx,
                drafts,
                fact_vectors,
                &changes.uuid_of,
                &mut stats,
            )
            .await?;
        stats.stage(stage::RESOLVE_FACTS, micros_since(started));

        let started = Instant::now();
        self.summarize_entities(state, &facts.created, &mut changes, &mut stats)
            .await?;
        stats.stage(stage::SUMMARIES, micros_since(started));

        // Communities of the episode's entities, as the graph will be after it.
        let community_kinds = if self.config.communities.incremental {
            let started = Instant::now();
            let delta = EpisodeDelta {
                mentioned: &changes.uuid_of,
                created: &facts.created,
                ended: facts.invalidated.keys().copied().collect(),
                new_entities: &changes.created,
                summaries: changes
                    .updates
                    .iter()
                    .filter_map(|(u, p)| Some((*u, p.summary.as_deref()?)))
                    .collect(),
            };
            let kinds = self
                .maintain_communities(state, &ep.group_id, ep.uuid, tx, &delta, &mut stats)
                .await?;
            stats.stage(stage::COMMUNITIES, micros_since(started));
            kinds
        } else {
            Vec::new()
        };

        let mut kinds = events::episode_events(
            state,
            ep,
            tx,
            content_embedding,
            previous_turn,
            changes,
            facts,
        );
        kinds.extend(community_kinds);
        let mut batch = EventBatch::new(ep.uuid, ep.group_id.clone(), tx, source, kinds);
        batch.stats = Some(stats);
        Ok(batch)
    }
}
