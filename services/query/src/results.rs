//! What a query returns: requests and results as callers see them (no
//! embeddings), serialized the same way by HTTP, MCP and the CLI (and read
//! back by a CLI asking a running server).

use chronicle_engine::search::{self, Scope, SearchConfig, SearchError, SearchFilters};
use chronicle_model::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::QueryError;

/// A search request.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    /// Free text.
    pub query: String,
    /// Recipe name (for metrics) — `custom` for an explicit configuration.
    pub recipe: String,
    /// What to search and how to rank.
    pub config: SearchConfig,
    /// What results may contain.
    pub filters: SearchFilters,
    /// The center entity for BFS and node distance.
    pub center: Option<Uuid>,
}

impl SearchRequest {
    /// A request for a named recipe.
    pub fn recipe(query: &str, recipe: &str, limit: usize) -> Result<Self, QueryError> {
        let mut config =
            search::recipe(recipe).ok_or_else(|| SearchError::UnknownRecipe(recipe.to_owned()))?;
        config.limit = limit;
        Ok(SearchRequest {
            query: query.to_owned(),
            recipe: recipe.to_owned(),
            config,
            filters: SearchFilters::default(),
            center: None,
        })
    }
}

/// An episode that asserted a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Provenance {
    /// Episode id.
    pub uuid: Uuid,
    /// Episode name.
    pub name: String,
}

/// One result, best first in [`SearchResults`].
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct ResultItem {
    /// fact, entity, episode or community.
    pub kind: Scope,
    /// Its id.
    pub uuid: Uuid,
    /// Its score under the recipe's reranker.
    pub score: f32,
    /// Relation (facts) or name (entities, communities, episodes).
    pub name: String,
    /// The fact sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fact: Option<String>,
    /// Source entity name (facts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Target entity name (facts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Summary (entities, communities).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Content (episodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Labels (entities).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Valid-time start (facts; episodes: reference time).
    pub valid_at: Option<Timestamp>,
    /// Valid-time end (facts).
    pub invalid_at: Option<Timestamp>,
    /// Transaction time it was recorded.
    pub created_at: Timestamp,
    /// Transaction time it was invalidated (facts).
    pub expired_at: Option<Timestamp>,
    /// Episodes that assert it (facts), mention it (entities), or itself (episodes).
    pub episodes: Vec<Provenance>,
    /// Mixed search: the matching facts extracted from this episode, best
    /// first (they travel with their turn and cost no result of their own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<SupportingFact>,
    /// Mixed search: the neighbouring turns around this episode, in order,
    /// this one included; names say which turns the result spans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<Turn>,
}

/// A fact as it supports an episode result.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct SupportingFact {
    /// Its id.
    pub uuid: Uuid,
    /// The fact sentence.
    pub fact: String,
    /// Valid-time start.
    pub valid_at: Option<Timestamp>,
    /// Valid-time end.
    pub invalid_at: Option<Timestamp>,
    /// Transaction time it was invalidated, if it was.
    pub expired_at: Option<Timestamp>,
}

/// One turn of an episode result's context.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Turn {
    /// Episode id.
    pub uuid: Uuid,
    /// Episode name.
    pub name: String,
    /// Its content.
    pub content: String,
    /// Its reference time.
    pub valid_at: Timestamp,
}

/// Search results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct SearchResults {
    /// Best first.
    pub results: Vec<ResultItem>,
}

/// What episodes produced; see [`Query::produced_by`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EpisodeProducts {
    /// The episodes found in the group's graph, of those asked for.
    pub episodes: Vec<Uuid>,
    /// Entities they mention.
    pub entities: Vec<ResultItem>,
    /// Facts they created, restated or invalidated.
    pub facts: Vec<ResultItem>,
}

/// A context block; see [`Query::context`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
#[schemars(rename = "Context")]
pub struct MemoryContext {
    /// Ready to paste into a prompt.
    pub context: String,
    /// The facts it states.
    pub facts: Vec<SupportingFact>,
    /// The turns it quotes, in the order they appear.
    pub turns: Vec<Turn>,
}

/// A community as read back: its members by id and name (no embedding).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Community")]
pub struct CommunityView {
    /// Its id.
    pub uuid: Uuid,
    /// Its name (its most central members).
    pub name: String,
    /// What its members have in common.
    pub summary: String,
    /// Its members.
    pub members: Vec<Member>,
    /// Transaction time it was first built.
    pub created_at: Timestamp,
}

/// An entity of a community, or an episode of a saga, by id and name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Member {
    /// Its id.
    pub uuid: Uuid,
    /// Its name (empty when it no longer exists).
    pub name: String,
}

/// A saga as read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Saga")]
pub struct SagaView {
    /// Its id (derived from the group and the name).
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// The summary of the episodes absorbed so far.
    pub summary: String,
    /// Reference time of the newest episode the summary absorbed.
    pub last_summarized_episode_valid_at: Option<Timestamp>,
    /// Its episodes in link order (`HAS_EPISODE`; consecutive ones are `NEXT_EPISODE`).
    pub episodes: Vec<SagaEpisode>,
    /// Transaction time it was first linked.
    pub created_at: Timestamp,
}

/// One episode of a saga.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SagaEpisode {
    /// Its id.
    pub uuid: Uuid,
    /// Its name.
    pub name: String,
    /// Its reference time.
    pub valid_at: Timestamp,
}
