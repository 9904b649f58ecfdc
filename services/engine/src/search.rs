//! Search configuration and ranking: recipes, filters and rerankers.
//!
//! Pure: the executor (in the service) gathers candidates from the indices
//! and the store, then calls these functions to filter and rank them.

use std::collections::{BTreeMap, HashMap};

use chronicle_model::{Attributes, Entity, Episode, Fact, Timestamp};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use uuid::Uuid;

/// What a result is.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Facts (edges).
    Fact,
    /// Entities (nodes).
    Entity,
    /// Episodes.
    Episode,
    /// Communities.
    Community,
}

impl Scope {
    /// All scopes.
    pub const ALL: [Scope; 4] = [Scope::Fact, Scope::Entity, Scope::Episode, Scope::Community];

    /// Snake-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Fact => "fact",
            Scope::Entity => "entity",
            Scope::Episode => "episode",
            Scope::Community => "community",
        }
    }
}

/// Where candidates come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// Full-text BM25.
    Bm25,
    /// Cosine similarity of embeddings.
    Cosine,
    /// Breadth-first search from center or origin entities.
    Bfs,
}

/// How candidates from several channels are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RerankerKind {
    /// Reciprocal rank fusion: rank positions only, robust to score scales.
    Rrf,
    /// Maximal marginal relevance: relevance against diversity.
    Mmr,
    /// Graph distance to a center entity.
    NodeDistance,
    /// How often the candidates' entities are mentioned by episodes.
    EpisodeMentions,
    /// A cross-encoder model scores (query, candidate) pairs.
    CrossEncoder,
}

/// One scope's channels and reranker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeConfig {
    /// Candidate sources.
    pub channels: Vec<Channel>,
    /// Ordering.
    pub reranker: RerankerKind,
}

/// A whole search configuration (graphiti's `SearchConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Facts, if searched.
    #[serde(default)]
    pub facts: Option<ScopeConfig>,
    /// Entities, if searched.
    #[serde(default)]
    pub entities: Option<ScopeConfig>,
    /// Episodes, if searched.
    #[serde(default)]
    pub episodes: Option<ScopeConfig>,
    /// Communities, if searched.
    #[serde(default)]
    pub communities: Option<ScopeConfig>,
    /// Results per scope.
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// BFS depth.
    #[serde(default = "default_bfs_depth")]
    pub bfs_max_depth: usize,
    /// MMR trade-off: 1 = relevance only, 0 = diversity only.
    #[serde(default = "default_mmr_lambda")]
    pub mmr_lambda: f32,
    /// One ranked list for memory instead of one list per scope: every
    /// result is an episode (what was said), found through its own text and
    /// embedding and through the facts extracted from it, which vote for it
    /// and travel with it; `limit` counts results, so nothing inflates it.
    #[serde(default)]
    pub mixed: bool,
    /// Neighbouring turns (before and after, same group) attached to each
    /// episode result as its context.
    #[serde(default)]
    pub context_turns: usize,
}

fn default_limit() -> usize {
    10
}
fn default_bfs_depth() -> usize {
    2
}
fn default_mmr_lambda() -> f32 {
    0.5
}

impl SearchConfig {
    /// The scopes this configuration searches, with their settings.
    pub fn scopes(&self) -> Vec<(Scope, &ScopeConfig)> {
        [
            (Scope::Fact, &self.facts),
            (Scope::Entity, &self.entities),
            (Scope::Episode, &self.episodes),
            (Scope::Community, &self.communities),
        ]
        .into_iter()
        .filter_map(|(s, c)| c.as_ref().map(|c| (s, c)))
        .collect()
    }

    /// Whether any scope needs the query embedded.
    pub fn needs_query_vector(&self) -> bool {
        self.scopes()
            .iter()
            .any(|(_, c)| c.channels.contains(&Channel::Cosine) || c.reranker == RerankerKind::Mmr)
    }
}

/// Recipe names, as graphiti spells them.
pub const RECIPES: &[&str] = &[
    "COMBINED_HYBRID_SEARCH_RRF",
    "COMBINED_HYBRID_SEARCH_MMR",
    "COMBINED_HYBRID_SEARCH_CROSS_ENCODER",
    "EDGE_HYBRID_SEARCH_RRF",
    "EDGE_HYBRID_SEARCH_MMR",
    "EDGE_HYBRID_SEARCH_NODE_DISTANCE",
    "EDGE_HYBRID_SEARCH_EPISODE_MENTIONS",
    "EDGE_HYBRID_SEARCH_CROSS_ENCODER",
    "NODE_HYBRID_SEARCH_RRF",
    "NODE_HYBRID_SEARCH_MMR",
    "NODE_HYBRID_SEARCH_NODE_DISTANCE",
    "NODE_HYBRID_SEARCH_EPISODE_MENTIONS",
    "NODE_HYBRID_SEARCH_CROSS_ENCODER",
    "COMMUNITY_HYBRID_SEARCH_RRF",
    "COMMUNITY_HYBRID_SEARCH_MMR",
    "COMMUNITY_HYBRID_SEARCH_CROSS_ENCODER",
    "EPISODE_HYBRID_SEARCH_RRF",
    MEMORY_RECIPE,
];

/// The default recipe: what an agent's memory should hand back (see
/// [`SearchConfig::mixed`]).
pub const MEMORY_RECIPE: &str = "MEMORY_HYBRID_SEARCH_RRF";

/// Weight of the fact channels' votes against an episode's own channels:
/// an extracted fact is a paraphrase of its turn, a weaker witness than the
/// turn's own words (measured on LoCoMo with the offline extractor: votes at
/// full weight cost recall, at a fifth they are neutral to slightly helpful).
pub const FACT_VOTE_WEIGHT: f32 = 0.2;

/// Weight of an episode's cosine channel against its BM25 one in the
/// mixed list: with a small sentence embedder the words are the better
/// witness on conversations (LoCoMo dev, MiniLM: cosine at full weight
/// 0.626 recall@5, at half 0.657, at 0.3 0.647).
pub const EPISODE_COSINE_WEIGHT: f32 = 0.5;

/// Weight of a turn's own words (BM25 without the turn before it) in the
/// mixed list: a reply repeats its question's words, and this is what
/// ranks the turn that said them above the one that only answered
/// (LoCoMo dev, recall@5: temporal questions 0.70 -> 0.79, all 0.657 ->
/// 0.678; at 0.2 0.670, at 0.5 0.676).
pub const OWN_WORDS_WEIGHT: f32 = 0.3;

/// RRF's rank offset for the mixed list. Small, so the first hits of each
/// channel dominate: on conversations BM25's top turns are precise, and a
/// large offset lets many middling agreements outrank them (LoCoMo dev:
/// k = 2 → 0.63 recall@10, k = 60 → 0.56).
pub const MIXED_RRF_K: f32 = 2.0;

/// Weight of the time channel (see [`in_period`]): as strong as a text
/// channel, so a turn from the named period is preferred among the matches
/// but a turn without the words never wins on its date alone.
pub const PERIOD_WEIGHT: f32 = 1.0;

/// Weight of the "says when" channel (see [`says_when`]): a weak witness
/// (like a turn's own words), so among the turns that match a "when"
/// question the one that names a time comes first but a turn without the
/// words never wins on its date alone (LoCoMo dev, temporal questions
/// recall@5: 0.810 without, 0.857 at 0.3, 0.825 at 0.5, 0.810 at 1.0).
pub const SAYS_WHEN_WEIGHT: f32 = 0.3;

/// A named recipe.
pub fn recipe(name: &str) -> Option<SearchConfig> {
    use Channel::*;
    use RerankerKind::*;
    let scope = |channels: &[Channel], reranker| {
        Some(ScopeConfig {
            channels: channels.to_vec(),
            reranker,
        })
    };
    let none = SearchConfig {
        facts: None,
        entities: None,
        episodes: None,
        communities: None,
        limit: default_limit(),
        bfs_max_depth: default_bfs_depth(),
        mmr_lambda: default_mmr_lambda(),
        mixed: false,
        context_turns: 0,
    };
    let hybrid = [Bm25, Cosine];
    let with_bfs = [Bm25, Cosine, Bfs];
    Some(match name {
        "COMBINED_HYBRID_SEARCH_RRF" => SearchConfig {
            facts: scope(&hybrid, Rrf),
            entities: scope(&hybrid, Rrf),
            episodes: scope(&[Bm25], Rrf),
            communities: scope(&hybrid, Rrf),
            ..none
        },
        "COMBINED_HYBRID_SEARCH_MMR" => SearchConfig {
            facts: scope(&hybrid, Mmr),
            entities: scope(&hybrid, Mmr),
            episodes: scope(&[Bm25], Rrf),
            communities: scope(&hybrid, Mmr),
            mmr_lambda: 1.0,
            ..none
        },
        "COMBINED_HYBRID_SEARCH_CROSS_ENCODER" => SearchConfig {
            facts: scope(&with_bfs, CrossEncoder),
            entities: scope(&with_bfs, CrossEncoder),
            episodes: scope(&[Bm25], CrossEncoder),
            communities: scope(&hybrid, CrossEncoder),
            ..none
        },
        "EDGE_HYBRID_SEARCH_RRF" => SearchConfig {
            facts: scope(&hybrid, Rrf),
            ..none
        },
        "EDGE_HYBRID_SEARCH_MMR" => SearchConfig {
            facts: scope(&hybrid, Mmr),
            ..none
        },
        "EDGE_HYBRID_SEARCH_NODE_DISTANCE" => SearchConfig {
            facts: scope(&hybrid, NodeDistance),
            ..none
        },
        "EDGE_HYBRID_SEARCH_EPISODE_MENTIONS" => SearchConfig {
            facts: scope(&hybrid, EpisodeMentions),
            ..none
        },
        "EDGE_HYBRID_SEARCH_CROSS_ENCODER" => SearchConfig {
            facts: scope(&with_bfs, CrossEncoder),
            ..none
        },
        "NODE_HYBRID_SEARCH_RRF" => SearchConfig {
            entities: scope(&hybrid, Rrf),
            ..none
        },
        "NODE_HYBRID_SEARCH_MMR" => SearchConfig {
            entities: scope(&hybrid, Mmr),
            ..none
        },
        "NODE_HYBRID_SEARCH_NODE_DISTANCE" => SearchConfig {
            entities: scope(&hybrid, NodeDistance),
            ..none
        },
        "NODE_HYBRID_SEARCH_EPISODE_MENTIONS" => SearchConfig {
            entities: scope(&hybrid, EpisodeMentions),
            ..none
        },
        "NODE_HYBRID_SEARCH_CROSS_ENCODER" => SearchConfig {
            entities: scope(&with_bfs, CrossEncoder),
            ..none
        },
        "COMMUNITY_HYBRID_SEARCH_RRF" => SearchConfig {
            communities: scope(&hybrid, Rrf),
            ..none
        },
        "COMMUNITY_HYBRID_SEARCH_MMR" => SearchConfig {
            communities: scope(&hybrid, Mmr),
            ..none
        },
        "COMMUNITY_HYBRID_SEARCH_CROSS_ENCODER" => SearchConfig {
            communities: scope(&hybrid, CrossEncoder),
            ..none
        },
        "EPISODE_HYBRID_SEARCH_RRF" => SearchConfig {
            episodes: scope(&[Bm25], Rrf),
            ..none
        },
        MEMORY_RECIPE => SearchConfig {
            episodes: scope(&hybrid, Rrf),
            facts: scope(&hybrid, Rrf),
            mixed: true,
            context_turns: 1,
            ..none
        },
        _ => return None,
    })
}

/// Comparison operators of date and property filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ComparisonOperator {
    /// `=`
    #[serde(rename = "=")]
    Equals,
    /// `<>`
    #[serde(rename = "<>")]
    NotEquals,
    /// `>`
    #[serde(rename = ">")]
    GreaterThan,
    /// `<`
    #[serde(rename = "<")]
    LessThan,
    /// `>=`
    #[serde(rename = ">=")]
    GreaterThanEqual,
    /// `<=`
    #[serde(rename = "<=")]
    LessThanEqual,
    /// `IS NULL`
    #[serde(rename = "IS NULL")]
    IsNull,
    /// `IS NOT NULL`
    #[serde(rename = "IS NOT NULL")]
    IsNotNull,
}

impl ComparisonOperator {
    fn compare<T: PartialOrd>(self, value: Option<&T>, operand: Option<&T>) -> bool {
        use ComparisonOperator::*;
        match (self, value, operand) {
            (IsNull, v, _) => v.is_none(),
            (IsNotNull, v, _) => v.is_some(),
            (_, None, _) | (_, _, None) => false,
            (Equals, Some(v), Some(o)) => v == o,
            (NotEquals, Some(v), Some(o)) => v != o,
            (GreaterThan, Some(v), Some(o)) => v > o,
            (LessThan, Some(v), Some(o)) => v < o,
            (GreaterThanEqual, Some(v), Some(o)) => v >= o,
            (LessThanEqual, Some(v), Some(o)) => v <= o,
        }
    }
}

/// One date comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DateFilter {
    /// The operand (ignored by `IS NULL` / `IS NOT NULL`).
    #[serde(default)]
    pub date: Option<Timestamp>,
    /// The operator.
    pub comparison_operator: ComparisonOperator,
}

/// An attribute comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PropertyFilter {
    /// Attribute name.
    pub property_name: String,
    /// The operand.
    #[serde(default)]
    pub property_value: Option<serde_json::Value>,
    /// The operator.
    pub comparison_operator: ComparisonOperator,
}

/// Date filters are OR-of-AND groups: the outer list is OR, each inner list AND.
pub type DateFilterGroups = Vec<Vec<DateFilter>>;

/// What results may contain (graphiti's `SearchFilters`, plus time shorthands).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFilters {
    /// Entities must carry one of these labels (facts: one endpoint must).
    #[serde(default)]
    pub node_labels: Option<Vec<String>>,
    /// Facts must have one of these relation names.
    #[serde(default)]
    pub edge_types: Option<Vec<String>>,
    /// On facts' `valid_at`.
    #[serde(default)]
    pub valid_at: Option<DateFilterGroups>,
    /// On facts' `invalid_at`.
    #[serde(default)]
    pub invalid_at: Option<DateFilterGroups>,
    /// On `created_at`.
    #[serde(default)]
    pub created_at: Option<DateFilterGroups>,
    /// On facts' `expired_at`.
    #[serde(default)]
    pub expired_at: Option<DateFilterGroups>,
    /// Facts must be one of these.
    #[serde(default)]
    pub edge_uuids: Option<Vec<Uuid>>,
    /// On attributes (all must hold).
    #[serde(default)]
    pub property_filters: Option<Vec<PropertyFilter>>,
    /// Valid time: facts true in the world at this instant.
    #[serde(default)]
    pub as_of: Option<Timestamp>,
    /// Transaction time: the graph as the system knew it at this instant.
    #[serde(default)]
    pub known_at: Option<Timestamp>,
    /// Include ended and invalidated facts (by default only current ones).
    #[serde(default)]
    pub include_history: bool,
}

fn date_groups_hold(groups: &Option<DateFilterGroups>, value: Option<Timestamp>) -> bool {
    match groups {
        None => true,
        Some(groups) if groups.is_empty() => true,
        Some(groups) => groups.iter().any(|and| {
            and.iter().all(|f| {
                f.comparison_operator
                    .compare(value.as_ref(), f.date.as_ref())
            })
        }),
    }
}

fn json_order(a: &serde_json::Value, b: &serde_json::Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (serde_json::Value::Number(x), serde_json::Value::Number(y)) => {
            x.as_f64()?.partial_cmp(&y.as_f64()?)
        }
        (serde_json::Value::String(x), serde_json::Value::String(y)) => Some(x.cmp(y)),
        (serde_json::Value::Bool(x), serde_json::Value::Bool(y)) => Some(x.cmp(y)),
        _ => (a == b).then_some(std::cmp::Ordering::Equal),
    }
}

fn properties_hold(filters: &Option<Vec<PropertyFilter>>, attributes: &Attributes) -> bool {
    filters.iter().flatten().all(|f| {
        let value = attributes.get(&f.property_name).filter(|v| !v.is_null());
        use ComparisonOperator::*;
        match f.comparison_operator {
            IsNull => value.is_none(),
            IsNotNull => value.is_some(),
            op => match (value, f.property_value.as_ref()) {
                (Some(v), Some(o)) => match json_order(v, o) {
                    Some(ord) => match op {
                        Equals => ord.is_eq(),
                        NotEquals => !ord.is_eq(),
                        GreaterThan => ord.is_gt(),
                        LessThan => ord.is_lt(),
                        GreaterThanEqual => ord.is_ge(),
                        LessThanEqual => ord.is_le(),
                        IsNull | IsNotNull => unreachable!("handled above"),
                    },
                    None => op == NotEquals,
                },
                _ => false,
            },
        }
    })
}

impl SearchFilters {
    /// The fact as these filters see it (as known at `known_at`), if it passes.
    /// `now` decides what "current" means when no time shorthand is given.
    pub fn admit_fact(
        &self,
        fact: &Fact,
        endpoint_labels: &[&[String]],
        now: Timestamp,
    ) -> Option<Fact> {
        let fact = match self.known_at {
            Some(t) => fact.as_known_at(t)?,
            None => fact.clone(),
        };
        if !self.include_history {
            let current = match self.as_of {
                Some(t) => fact.is_valid_at(t),
                None => fact.expired_at.is_none() && fact.is_valid_at(self.known_at.unwrap_or(now)),
            };
            if !current {
                return None;
            }
        } else if let Some(t) = self.as_of
            && !fact.is_valid_at(t)
        {
            return None;
        }
        if let Some(types) = &self.edge_types
            && !types.iter().any(|t| t == &fact.name)
        {
            return None;
        }
        if let Some(ids) = &self.edge_uuids
            && !ids.contains(&fact.uuid)
        {
            return None;
        }
        if let Some(labels) = &self.node_labels
            && !endpoint_labels
                .iter()
                .any(|ls| ls.iter().any(|l| labels.contains(l)))
        {
            return None;
        }
        let dates_hold = date_groups_hold(&self.valid_at, fact.valid_at)
            && date_groups_hold(&self.invalid_at, fact.invalid_at)
            && date_groups_hold(&self.created_at, Some(fact.created_at))
            && date_groups_hold(&self.expired_at, fact.expired_at);
        (dates_hold && properties_hold(&self.property_filters, &fact.attributes)).then_some(fact)
    }

    /// Whether an entity passes (labels, creation time, attributes, `known_at`).
    pub fn admit_entity(&self, entity: &Entity) -> bool {
        if self.known_at.is_some_and(|t| entity.created_at > t) {
            return false;
        }
        if let Some(labels) = &self.node_labels
            && !entity.labels.iter().any(|l| labels.contains(l))
        {
            return false;
        }
        date_groups_hold(&self.created_at, Some(entity.created_at))
            && properties_hold(&self.property_filters, &entity.attributes)
    }

    /// Whether an episode passes (`known_at`, creation time, and `as_of`: only
    /// episodes whose reference time is not after it).
    pub fn admit_episode(&self, episode: &Episode) -> bool {
        if self.known_at.is_some_and(|t| episode.created_at > t) {
            return false;
        }
        if self.as_of.is_some_and(|t| episode.valid_at > t) {
            return false;
        }
        date_groups_hold(&self.created_at, Some(episode.created_at))
    }
}

/// Reciprocal rank fusion: `score(d) = Σ 1 / (k + rank(d))` over the lists
/// (rank from 1). Ties keep first-seen order, so results are deterministic.
pub fn rrf(lists: &[Vec<Uuid>], k: f32) -> Vec<(Uuid, f32)> {
    let weighted: Vec<(&[Uuid], f32)> = lists.iter().map(|l| (l.as_slice(), 1.0)).collect();
    weighted_rrf(&weighted, k)
}

/// [`rrf`] where each list counts with its weight: `Σ w / (k + rank(d))`.
pub fn weighted_rrf(lists: &[(&[Uuid], f32)], k: f32) -> Vec<(Uuid, f32)> {
    let mut scores: HashMap<Uuid, (f32, usize)> = HashMap::new();
    let mut order = 0usize;
    for (list, weight) in lists {
        for (rank, id) in list.iter().enumerate() {
            let entry = scores.entry(*id).or_insert_with(|| {
                order += 1;
                (0.0, order)
            });
            entry.0 += weight / (k + rank as f32 + 1.0);
        }
    }
    let mut out: Vec<(Uuid, f32, usize)> =
        scores.into_iter().map(|(u, (s, o))| (u, s, o)).collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
    out.into_iter().map(|(u, s, _)| (u, s)).collect()
}

/// Records found by a channel vote for the episodes that assert them: the
/// episodes in the order of the records that name them first, each once.
pub fn votes<'a>(ranked: &[Uuid], asserted_by: impl Fn(&Uuid) -> &'a [Uuid]) -> Vec<Uuid> {
    let mut seen = std::collections::HashSet::new();
    ranked
        .iter()
        .flat_map(|u| asserted_by(u).iter().copied())
        .filter(|e| seen.insert(*e))
        .collect()
}

/// The time channel of a query that names a period ("in May 2023"): the
/// ranked candidates whose time falls inside it, in their order. Fused as
/// one more list, it boosts and never filters — a question's period may be
/// when something was said or when it happened.
pub fn in_period(
    ranked: &[(Uuid, f32)],
    period: &crate::temporal::Period,
    time_of: impl Fn(&Uuid) -> Option<Timestamp>,
) -> Vec<Uuid> {
    ranked
        .iter()
        .map(|(u, _)| *u)
        .filter(|u| time_of(u).is_some_and(|t| period.contains(t)))
        .collect()
}

/// Whether a query asks for a time ("When did she move?").
pub fn asks_when(query: &str) -> bool {
    query
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("when"))
}

/// The channel of a "when" question: the ranked candidates whose own words
/// name a time ("yesterday", "last year", "in May", a date), resolved
/// against the turn's own reference time, in their order. The answer to
/// "when did she go?" is the turn that says when she went, not the one that
/// only talks about it; fused as one more list, it boosts and never filters.
pub fn says_when<'a>(
    ranked: &[(Uuid, f32)],
    said: impl Fn(&Uuid) -> Option<(&'a str, Timestamp)>,
) -> Vec<Uuid> {
    ranked
        .iter()
        .map(|(u, _)| *u)
        .filter(|u| {
            said(u).is_some_and(|(text, at)| crate::temporal::period_in(text, at).is_some())
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// Maximal marginal relevance: greedily picks the candidate maximizing
/// `λ·sim(query, d) − (1−λ)·max sim(d, picked)`. Candidates without a
/// vector rank after those with one, in their given order.
pub fn mmr(
    query: &[f32],
    candidates: &[(Uuid, Option<&[f32]>)],
    lambda: f32,
    limit: usize,
) -> Vec<(Uuid, f32)> {
    let mut remaining: Vec<(Uuid, &[f32])> = candidates
        .iter()
        .filter_map(|(u, v)| Some((*u, (*v)?)))
        .collect();
    let mut picked: Vec<(Uuid, &[f32], f32)> = Vec::new();
    while picked.len() < limit && !remaining.is_empty() {
        let (best, score) = remaining
            .iter()
            .enumerate()
            .map(|(i, (_, v))| {
                let relevance = cosine(query, v);
                let redundancy = picked
                    .iter()
                    .map(|(_, p, _)| cosine(v, p))
                    .fold(0.0f32, f32::max);
                (i, lambda * relevance - (1.0 - lambda) * redundancy)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .expect("remaining is not empty");
        let (u, v) = remaining.remove(best);
        picked.push((u, v, score));
    }
    let mut out: Vec<(Uuid, f32)> = picked.into_iter().map(|(u, _, s)| (u, s)).collect();
    for (u, v) in candidates {
        if v.is_none() && out.len() < limit {
            out.push((*u, f32::MIN));
        }
    }
    out
}

/// Orders candidates by hop distance from the center (closer first; score
/// = 1 / (1 + hops)); unreachable ones keep their fused order at the end.
pub fn by_node_distance(fused: &[(Uuid, f32)], hops: &BTreeMap<Uuid, usize>) -> Vec<(Uuid, f32)> {
    let mut out: Vec<(usize, Uuid, f32)> = fused
        .iter()
        .enumerate()
        .map(|(i, (u, _))| match hops.get(u) {
            Some(h) => (i, *u, 1.0 / (1.0 + *h as f32)),
            None => (i, *u, 0.0),
        })
        .collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(_, u, s)| (u, s)).collect()
}

/// Orders candidates by how many episodes mention them (or their entities),
/// ties in fused order.
pub fn by_mentions(fused: &[(Uuid, f32)], mentions: &BTreeMap<Uuid, usize>) -> Vec<(Uuid, f32)> {
    let mut out: Vec<(usize, Uuid, f32)> = fused
        .iter()
        .enumerate()
        .map(|(i, (u, _))| (i, *u, mentions.get(u).copied().unwrap_or(0) as f32))
        .collect();
    out.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    out.into_iter().map(|(_, u, s)| (u, s)).collect()
}

/// Why a search request is invalid.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SearchError {
    /// Unknown recipe name.
    #[error("unknown recipe `{0}`; known recipes: {list}", list = RECIPES.join(", "))]
    UnknownRecipe(String),
    /// A cross-encoder reranker without a reranking model.
    #[error(
        "the cross_encoder reranker needs an LLM endpoint; configure one or pick another recipe"
    )]
    NoCrossEncoder,
    /// Node distance without a center entity.
    #[error("the node_distance reranker needs a center entity (--center)")]
    NoCenter,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_model::testing::{fact, group, ts};

    #[test]
    fn a_when_question_prefers_the_turns_that_name_a_time() {
        assert!(asks_when("When did she move?"));
        assert!(asks_when("so... when?"));
        assert!(!asks_when("Whenever she calls, what does she say?"));
        let [a, b, c] = [1u128, 2, 3].map(Uuid::from_u128);
        let said = |u: &Uuid| match u.as_u128() {
            1 => Some(("I moved, it was great.", ts("2023-05-10T00:00:00Z"))),
            2 => Some(("We moved last year!", ts("2023-05-10T00:00:00Z"))),
            3 => Some(("Moved on 4 May 2022.", ts("2023-05-10T00:00:00Z"))),
            _ => None,
        };
        let ranked = [(a, 3.0), (b, 2.0), (c, 1.0), (Uuid::from_u128(9), 0.5)];
        assert_eq!(says_when(&ranked, said), [b, c]);
    }

    #[test]
    fn every_recipe_resolves() {
        for name in RECIPES {
            let c = recipe(name).unwrap_or_else(|| panic!("{name}"));
            assert!(!c.scopes().is_empty(), "{name}");
        }
        assert!(recipe("NOPE").is_none());
    }

    #[test]
    fn rrf_fuses_ranks() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let out = rrf(&[vec![a, b, c], vec![b, c]], 1.0);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec![b, c, a]);
    }

    #[test]
    fn weights_scale_a_lists_say() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        // b leads the weak list, a the strong one: a wins.
        let (strong, weak) = (vec![a, b], vec![b, a]);
        let out = weighted_rrf(&[(&strong, 1.0), (&weak, 0.2)], 2.0);
        assert_eq!(out[0].0, a);
        // equal weights tie on score; first seen stays first
        let out = weighted_rrf(&[(&weak, 1.0), (&strong, 1.0)], 2.0);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec![b, a]);
        assert!((out[0].1 - out[1].1).abs() < 1e-6);
    }

    #[test]
    fn facts_vote_for_their_episodes_once_in_rank_order() {
        let (f1, f2, f3) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let (e1, e2, e3) = (
            Uuid::from_u128(11),
            Uuid::from_u128(12),
            Uuid::from_u128(13),
        );
        let provenance: BTreeMap<Uuid, Vec<Uuid>> =
            [(f1, vec![e2]), (f2, vec![e2, e1]), (f3, vec![])].into();
        let out = votes(&[f1, f3, f2, Uuid::from_u128(99)], |f| {
            provenance.get(f).map_or(&[][..], Vec::as_slice)
        });
        assert_eq!(out, vec![e2, e1]);
        assert!(!out.contains(&e3));
    }

    #[test]
    fn the_memory_recipe_is_mixed_with_context() {
        let c = recipe(MEMORY_RECIPE).unwrap();
        assert!(c.mixed && c.context_turns > 0);
        assert!(c.episodes.is_some() && c.facts.is_some());
        assert!(c.needs_query_vector());
        // a configuration without the new fields still parses, unmixed
        let old: SearchConfig =
            serde_json::from_str(r#"{"facts": {"channels": ["bm25"], "reranker": "rrf"}}"#)
                .unwrap();
        assert!(!old.mixed && old.context_turns == 0);
    }

    #[test]
    fn mmr_prefers_diversity() {
        let (a, b, c) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let q = [1.0, 0.0];
        let va = [1.0, 0.0];
        let vb = [0.99, 0.1];
        let vc = [0.7, 0.7];
        let cands = [(a, Some(&va[..])), (b, Some(&vb[..])), (c, Some(&vc[..]))];
        let relevance_only = mmr(&q, &cands, 1.0, 3);
        assert_eq!(relevance_only[1].0, b);
        let diverse = mmr(&q, &cands, 0.3, 3);
        assert_eq!(diverse[0].0, a);
        assert_eq!(diverse[1].0, c, "the near-duplicate b is pushed down");
    }

    #[test]
    fn date_and_time_filters() {
        let g = group("g");
        let mut f = fact(
            &g,
            Uuid::from_u128(1),
            Uuid::from_u128(2),
            Uuid::from_u128(3),
        );
        // [Jan 1, Mar 1), expired Mar 1 09:00, created Jan 1
        let none = SearchFilters::default();
        let now = ts("2026-01-01T00:00:00Z");
        assert!(
            none.admit_fact(&f, &[], now).is_none(),
            "history is hidden by default"
        );
        let history = SearchFilters {
            include_history: true,
            ..Default::default()
        };
        assert!(history.admit_fact(&f, &[], now).is_some());
        let as_of = SearchFilters {
            as_of: Some(ts("2025-02-28T00:00:00Z")),
            ..Default::default()
        };
        assert!(as_of.admit_fact(&f, &[], now).is_some());
        let known = SearchFilters {
            known_at: Some(ts("2025-02-01T00:00:00Z")),
            ..Default::default()
        };
        assert!(
            known.admit_fact(&f, &[], now).is_some(),
            "not yet invalidated then"
        );
        let or_of_and = SearchFilters {
            include_history: true,
            invalid_at: Some(vec![
                vec![DateFilter {
                    date: None,
                    comparison_operator: ComparisonOperator::IsNull,
                }],
                vec![
                    DateFilter {
                        date: Some(ts("2025-02-01T00:00:00Z")),
                        comparison_operator: ComparisonOperator::GreaterThan,
                    },
                    DateFilter {
                        date: Some(ts("2025-04-01T00:00:00Z")),
                        comparison_operator: ComparisonOperator::LessThanEqual,
                    },
                ],
            ]),
            ..Default::default()
        };
        assert!(or_of_and.admit_fact(&f, &[], now).is_some());
        f.invalid_at = Some(ts("2025-05-01T00:00:00Z"));
        assert!(or_of_and.admit_fact(&f, &[], now).is_none());
        let types = SearchFilters {
            include_history: true,
            edge_types: Some(vec!["WORKS_AT".into()]),
            ..Default::default()
        };
        assert!(types.admit_fact(&f, &[], now).is_none());
        let props = SearchFilters {
            include_history: true,
            property_filters: Some(vec![PropertyFilter {
                property_name: "since".into(),
                property_value: Some(serde_json::json!(2020)),
                comparison_operator: ComparisonOperator::GreaterThan,
            }]),
            ..Default::default()
        };
        assert!(
            props.admit_fact(&f, &[], now).is_some(),
            "since = 2021 > 2020"
        );
    }

    #[test]
    fn filters_parse_from_json() {
        let f: SearchFilters = serde_json::from_str(
            r#"{"valid_at": [[{"date": "2025-01-01T00:00:00Z", "comparison_operator": ">="}]], "expired_at": [[{"comparison_operator": "IS NULL"}]]}"#,
        )
        .unwrap();
        assert_eq!(
            f.expired_at.unwrap()[0][0].comparison_operator,
            ComparisonOperator::IsNull
        );
        assert!(serde_json::from_str::<SearchFilters>(r#"{"bogus": 1}"#).is_err());
    }
}
