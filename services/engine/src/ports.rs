//! The ports `decide` and search call out through: language models and
//! embedders. Adapters (OpenAI-compatible HTTP, the offline extractor, local
//! embedding models) implement them in other crates; the core knows only these
//! traits and plain request/response types.

use async_trait::async_trait;
use chronicle_model::{Attributes, EpisodeType, Timestamp};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ontology::Ontology;

/// What an LLM call was for: the unit of call accounting, caching and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptKind {
    /// Entities and facts of one episode, in one call.
    Extract,
    /// Which existing entity an ambiguous extracted entity is.
    ResolveEntities,
    /// Which existing facts a new fact restates or contradicts.
    ResolveFacts,
    /// Rolling summaries of entities.
    SummarizeEntities,
    /// Community summaries.
    SummarizeCommunities,
    /// Saga summaries.
    SummarizeSaga,
    /// Cross-encoder relevance scores.
    Rerank,
}

impl PromptKind {
    /// Every kind, for metrics registration.
    pub const ALL: [PromptKind; 7] = [
        PromptKind::Extract,
        PromptKind::ResolveEntities,
        PromptKind::ResolveFacts,
        PromptKind::SummarizeEntities,
        PromptKind::SummarizeCommunities,
        PromptKind::SummarizeSaga,
        PromptKind::Rerank,
    ];

    /// Snake-case name (metric label, stats key).
    pub fn as_str(self) -> &'static str {
        match self {
            PromptKind::Extract => "extract",
            PromptKind::ResolveEntities => "resolve_entities",
            PromptKind::ResolveFacts => "resolve_facts",
            PromptKind::SummarizeEntities => "summarize_entities",
            PromptKind::SummarizeCommunities => "summarize_communities",
            PromptKind::SummarizeSaga => "summarize_saga",
            PromptKind::Rerank => "rerank",
        }
    }
}

/// Why a model call failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum LlmError {
    /// No model endpoint is configured for an operation that needs one.
    #[error("{0}: no LLM endpoint is configured (set --llm-base-url / CHRONICLE_LLM_BASE_URL)")]
    NotConfigured(&'static str),
    /// The endpoint answered with an error status (after retries where retryable).
    #[error("LLM endpoint returned HTTP {status}: {body}")]
    Http {
        /// HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The endpoint could not be reached or timed out (after retries).
    #[error("LLM endpoint unreachable: {0}")]
    Transport(String),
    /// The model's answer did not validate (after retries).
    #[error("LLM answer for {kind} did not validate: {reason}")]
    InvalidOutput {
        /// The prompt kind.
        kind: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// An embedding model failed.
    #[error("embedding failed: {0}")]
    Embedding(String),
}

/// A context episode shown to the extractor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextEpisode {
    /// Its content.
    pub content: String,
    /// Its reference time.
    pub valid_at: Timestamp,
}

/// Everything the extractor needs to read one episode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtractionRequest {
    /// Episode name.
    pub name: String,
    /// Episode content.
    pub content: String,
    /// Its kind (selects the prompt).
    pub source: EpisodeType,
    /// Where it came from.
    pub source_description: String,
    /// Its reference time (relative times are resolved against it).
    pub reference_time: Timestamp,
    /// Earlier episodes of the group, oldest first.
    pub previous_episodes: Vec<ContextEpisode>,
    /// Entity and edge types, exclusions and custom instructions.
    pub ontology: Ontology,
}

/// One entity the extractor found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtractedEntity {
    /// The name as written.
    pub name: String,
    /// Index into the ontology's entity types (0 = `Entity`).
    pub entity_type_id: u32,
    /// Typed attributes, for custom types.
    #[serde(default)]
    pub attributes: Attributes,
}

/// One fact the extractor found, between two extracted entity names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtractedFact {
    /// Source entity name (must match an extracted entity).
    pub source: String,
    /// Target entity name (must match an extracted entity).
    pub target: String,
    /// Relation in SCREAMING_SNAKE_CASE, e.g. `LIVES_IN`.
    pub relation: String,
    /// The fact as a sentence.
    pub fact: String,
    /// When it became true: ISO 8601, or a relative expression ("since March").
    #[serde(default)]
    pub valid_at: Option<String>,
    /// When it stopped being true, likewise.
    #[serde(default)]
    pub invalid_at: Option<String>,
}

/// What the extractor found in one episode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// Entities.
    pub entities: Vec<ExtractedEntity>,
    /// Facts between them.
    pub facts: Vec<ExtractedFact>,
}

/// An existing entity offered as a possible duplicate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateEntity {
    /// Its name.
    pub name: String,
    /// Its most specific label.
    pub entity_type: String,
    /// Its summary.
    pub summary: String,
}

/// One extracted entity that the cheap tiers could not settle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AmbiguousEntity {
    /// The extracted name.
    pub name: String,
    /// Its type name.
    pub entity_type: String,
    /// Existing entities it might be.
    pub candidates: Vec<CandidateEntity>,
}

/// Ask which existing entity each ambiguous entity is (one call per episode).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EntityResolutionRequest {
    /// The episode's content, for context.
    pub episode_content: String,
    /// The entities to settle.
    pub entities: Vec<AmbiguousEntity>,
}

/// An existing fact offered as a possible duplicate or contradiction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateFact {
    /// Its relation.
    pub relation: String,
    /// Its sentence.
    pub fact: String,
    /// Its valid-time start.
    pub valid_at: Option<Timestamp>,
    /// Its valid-time end.
    pub invalid_at: Option<Timestamp>,
}

/// One new fact to compare with existing ones.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewFactCandidates {
    /// Its relation.
    pub relation: String,
    /// Its sentence.
    pub fact: String,
    /// Its valid-time start.
    pub valid_at: Option<Timestamp>,
    /// Existing facts with the same endpoints (possible duplicates).
    pub duplicates: Vec<CandidateFact>,
    /// Existing related facts of either endpoint (possible contradictions).
    pub contradictions: Vec<CandidateFact>,
}

/// Ask which facts each new fact restates or contradicts (one call per episode).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FactResolutionRequest {
    /// The new facts.
    pub facts: Vec<NewFactCandidates>,
}

/// The verdict on one new fact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactResolution {
    /// Index into its `duplicates` if it restates one.
    pub duplicate_of: Option<usize>,
    /// Indexes into its `contradictions` that it contradicts.
    pub contradicts: Vec<usize>,
}

/// What a summary is of (selects the prompt).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryKind {
    /// An entity's rolling summary.
    Entity,
    /// A community's summary.
    Community,
    /// A saga's summary.
    Saga,
}

/// One summary to write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryItem {
    /// Who or what it is about.
    pub subject: String,
    /// The summary so far (may be empty).
    pub current: String,
    /// New material to fold in.
    pub new_material: Vec<String>,
}

/// Summaries to write (one call for many items).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryRequest {
    /// What kind of summaries.
    pub kind: SummaryKind,
    /// Longest acceptable summary, in characters.
    pub max_chars: usize,
    /// The items.
    pub items: Vec<SummaryItem>,
}

/// The language-model port of the pipeline.
#[async_trait]
pub trait Extractor: Send + Sync {
    /// A short description for logs (`offline`, `openai:gpt-4o-mini@...`).
    fn describe(&self) -> String;

    /// Whether calls go to a language model (and count as LLM calls).
    fn is_model(&self) -> bool {
        true
    }

    /// Entities and facts of one episode.
    async fn extract(&self, request: &ExtractionRequest) -> Result<Extraction, LlmError>;

    /// For each ambiguous entity, the index of the candidate it duplicates.
    async fn resolve_entities(
        &self,
        request: &EntityResolutionRequest,
    ) -> Result<Vec<Option<usize>>, LlmError>;

    /// For each new fact, what it restates and what it contradicts.
    async fn resolve_facts(
        &self,
        request: &FactResolutionRequest,
    ) -> Result<Vec<FactResolution>, LlmError>;

    /// One summary per item, each at most `max_chars` long.
    async fn summarize(&self, request: &SummaryRequest) -> Result<Vec<String>, LlmError>;
}

/// A cross-encoder: scores how well each passage answers the query.
#[async_trait]
pub trait Reranker: Send + Sync {
    /// One score per passage, higher is better.
    async fn rerank(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, LlmError>;
}

/// The embedding port: texts to unit-length vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// A short description (`minilm`, `hash-384`, `openai:text-embedding-3-small`).
    fn describe(&self) -> String;

    /// Vector length.
    fn dimension(&self) -> usize;

    /// One unit-length vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError>;
}
