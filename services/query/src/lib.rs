//! The query engine: hybrid search, fact listings and timelines over the
//! projected graph. Candidates come from the indices (BM25, cosine) and the
//! store (BFS); records are loaded from the store, filtered (current facts
//! only unless asked otherwise) and ranked by the engine's pure rankers.
//!
//! It reads only: a [`Sources`] names the store, the candidate index and
//! the query-side models, and a [`Query`] answers at one point of time.
//! The write path (log, decider, projector) is not reachable from here.
//!
//! | module | answers |
//! |---|---|
//! | `mixed` | the default memory list: one result per turn |
//! | `scoped` | graphiti's per-scope recipes (facts, entities, episodes, communities) |
//! | `context` | a ready-to-paste context block in a character budget |
//! | `reads` | entity lookups, fact listings, timelines, products, communities, sagas |
//! | `load` | reading and admitting candidates, building results |

#![warn(missing_docs)]

mod context;
mod load;
mod mixed;
mod reads;
mod results;
mod scoped;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use chronicle_engine::ports::{Embedder, LlmError, Reranker};
use chronicle_engine::search::SearchError;
use chronicle_index::{DocKind, Hit, IndexError, SearchIndex};
use chronicle_model::{GroupId, Timestamp};
use chronicle_store::{GraphStore, StoreError};
use thiserror::Error;

pub use context::DEFAULT_CONTEXT_CHARS;
pub use results::{
    CommunityView, EpisodeProducts, Member, MemoryContext, Provenance, ResultItem, SagaEpisode,
    SagaView, SearchRequest, SearchResults, SupportingFact, Turn,
};

/// Why a query failed.
#[derive(Debug, Error)]
pub enum QueryError {
    /// The request is invalid (the caller can fix it).
    #[error(transparent)]
    Invalid(#[from] SearchError),
    /// A named entity does not exist in the group.
    #[error("no entity named `{0}` in this group")]
    UnknownEntity(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The indices failed.
    #[error(transparent)]
    Index(#[from] IndexError),
    /// A model call failed.
    #[error(transparent)]
    Model(#[from] LlmError),
}

impl QueryError {
    /// Whether the caller caused it (HTTP 4xx).
    pub fn is_client_error(&self) -> bool {
        matches!(self, QueryError::Invalid(_) | QueryError::UnknownEntity(_))
    }
}

/// Where candidates come from: best-first hits of one group, by text
/// (BM25) or by vector (cosine). The query engine needs nothing else of an
/// index, so any engine that answers these two can serve it.
pub trait CandidateIndex: Send + Sync {
    /// The `n` best text matches of `kinds` in `group`.
    fn text_search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        text: &str,
        n: usize,
    ) -> Result<Vec<Hit>, IndexError>;

    /// The `n` nearest vectors of `kinds` in `group`.
    fn vector_search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        vector: &[f32],
        n: usize,
    ) -> Result<Vec<Hit>, IndexError>;
}

impl CandidateIndex for SearchIndex {
    fn text_search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        text: &str,
        n: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        SearchIndex::text_search(self, group, kinds, text, n)
    }

    fn vector_search(
        &self,
        group: &GroupId,
        kinds: &[DocKind],
        vector: &[f32],
        n: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        SearchIndex::vector_search(self, group, kinds, vector, n)
    }
}

/// What queries read: the projected graph, its candidate index and the
/// query-side models (the embedder must be the one the index was built with).
#[derive(Clone)]
pub struct Sources {
    /// The projected graph.
    pub store: Arc<dyn GraphStore>,
    /// BM25 and vector candidates.
    pub index: Arc<dyn CandidateIndex>,
    /// Embeds query text for the cosine channels.
    pub embedder: Arc<dyn Embedder>,
    /// Cross-encoder reranking, when a model is configured.
    pub reranker: Option<Arc<dyn Reranker>>,
}

/// Queries over [`Sources`] as of one moment (what "current" means).
pub struct Query<'s> {
    sources: &'s Sources,
    now: Timestamp,
}

impl<'s> Query<'s> {
    /// Queries at the current wall-clock time.
    pub fn new(sources: &'s Sources) -> Self {
        Self::at(sources, now())
    }

    /// Queries as if it were `now`.
    pub fn at(sources: &'s Sources, now: Timestamp) -> Self {
        Query { sources, now }
    }
}

/// The wall clock as a timestamp.
pub fn now() -> Timestamp {
    Timestamp::from_datetime(chrono::Utc::now()).unwrap_or(Timestamp::EPOCH)
}
