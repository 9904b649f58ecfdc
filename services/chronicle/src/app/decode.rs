//! Request decoders: bytes and query strings in, validated values or a 4xx
//! [`ApiError`] naming the field out. Pure functions (no node, no I/O) so
//! they can be fuzzed: no input may panic or produce a 5xx.
//!
//! Bodies are parsed twice: once into a JSON value (syntax, top-level
//! shape, batch or single), then into the typed request with the path of
//! the first bad field (`episodes[2].reference_time`, `filters.as_of`).
//! Unknown fields are rejected everywhere; a batch is accepted whole or not
//! at all.

use axum::http::StatusCode;
use chronicle_engine::search::{self, SearchConfig, SearchFilters};
use chronicle_model::{Attributes, FactTriple, GroupId, NewEpisode, Timestamp};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::error::ApiError;
use crate::gateway::{EpisodeInput, MAX_NAME_CHARS, parse_group, parse_time};
use chronicle_query::SearchRequest;

/// Most items in one batch (episodes or triplets).
pub const MAX_BATCH: usize = 1000;
/// Most results per scope a search may ask for.
pub const MAX_SEARCH_LIMIT: usize = 100;
/// Longest search query, in characters.
pub const MAX_QUERY_CHARS: usize = 4096;
/// Deepest BFS a custom search configuration may ask for.
pub const MAX_BFS_DEPTH: usize = 4;
/// Neighbouring turns a mixed search may attach per result, each side.
pub const MAX_CONTEXT_TURNS: usize = 5;
/// Largest context block a caller may ask for, in characters.
pub const MAX_CONTEXT_CHARS: usize = 100_000;
/// Most episodes or facts one listing returns.
pub const MAX_LIST: usize = 1000;
/// Episodes listed when `last_n` is not given.
pub const DEFAULT_LAST_N: usize = 20;
/// Facts listed when `limit` is not given.
pub const DEFAULT_FACTS_LIMIT: usize = 100;
/// Recipe used when a search names neither a recipe nor a configuration.
pub const DEFAULT_RECIPE: &str = chronicle_engine::search::MEMORY_RECIPE;

/// The group id of the path.
pub fn group(text: &str) -> Result<GroupId, ApiError> {
    parse_group("group_id", text).map_err(ApiError::from)
}

/// A uuid path segment.
pub fn path_uuid(field: &str, text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|e| {
        ApiError::bad_request(
            field,
            format!("not a uuid ({e}); expected e.g. 67e55044-10b1-426f-9247-bb680e5fe0c8"),
        )
    })
}

/// An entity named by uuid or by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntityRef {
    /// By id.
    Uuid(Uuid),
    /// By (normalized) name.
    Name(String),
}

/// An entity reference: a uuid, or else a (non-empty, bounded) name.
pub fn entity_ref(field: &str, text: &str) -> Result<EntityRef, ApiError> {
    if let Ok(u) = Uuid::parse_str(text) {
        return Ok(EntityRef::Uuid(u));
    }
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(
            field,
            "must be an entity uuid or name, not empty",
        ));
    }
    if text.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(
            field,
            format!("longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(EntityRef::Name(text.to_owned()))
}

/// The top-level JSON object of a body.
fn object(body: &[u8]) -> Result<serde_json::Map<String, serde_json::Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "body",
            "empty body; send a JSON object",
        ));
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request("body", "expected a JSON object")),
        Err(e) => Err(ApiError::bad_request(
            "body",
            format!("malformed JSON: {e}"),
        )),
    }
}

/// Deserializes `T`, naming the path of the first bad field.
fn typed<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        ApiError::bad_request(field_of(&path, &message), message)
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request("body", format!("malformed JSON: {e}")))?;
    Ok(value)
}

/// A saga name, as the caller gave it under `field`: not blank, at most
/// [`MAX_NAME_CHARS`] characters.
pub fn saga_name<'a>(field: &str, text: &'a str) -> Result<&'a str, ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::bad_request(field, "must not be empty"));
    }
    if text.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(
            field,
            format!("longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(text)
}

/// The field an error is about: the path, completed with the field a
/// `missing field` / `duplicate field` message names.
pub fn field_of(path: &str, message: &str) -> String {
    let named = ["missing field `", "duplicate field `"]
        .iter()
        .find_map(|m| message.strip_prefix(m))
        .and_then(|rest| rest.split('`').next());
    match (path, named) {
        (".", Some(name)) => name.to_owned(),
        (".", None) => "body".to_owned(),
        (p, Some(name)) => format!("{p}.{name}"),
        (p, None) => p.to_owned(),
    }
}

/// Prefixes the field of an item's error with its place in the batch.
fn in_batch(list: &str, i: usize, mut e: ApiError) -> ApiError {
    e.field = Some(match e.field {
        Some(f) => format!("{list}[{i}].{f}"),
        None => format!("{list}[{i}]"),
    });
    e
}

fn check_batch_len(list: &str, n: usize) -> Result<(), ApiError> {
    if n == 0 {
        return Err(ApiError::bad_request(list, "must not be empty"));
    }
    if n > MAX_BATCH {
        return Err(ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            error: format!("{n} items; at most {MAX_BATCH} per request"),
            field: Some(list.to_owned()),
        });
    }
    Ok(())
}

/// A batch of episodes, accepted whole or not at all.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodeBatch {
    /// The episodes, in order.
    #[schemars(length(min = 1, max = MAX_BATCH))]
    episodes: Vec<EpisodeInput>,
}

/// What `POST /episodes` accepts: one episode or a batch. Only its schema
/// is used: [`episodes`] decodes the body itself, to name the bad field.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub enum EpisodeSubmission {
    /// One episode.
    One(Box<EpisodeInput>),
    /// A batch.
    Batch(EpisodeBatch),
}

/// Decoded submissions, and whether the body was a batch.
#[derive(Clone, Debug)]
pub struct Submissions {
    /// The validated episodes, in body order.
    pub episodes: Vec<NewEpisode>,
    /// Whether the caller sent a batch (the reply lists receipts).
    pub batch: bool,
    /// The batch's field: `episodes` or `triplets`.
    pub list: &'static str,
}

/// `POST /episodes`: one episode object, or `{"episodes": [...]}`. `now`
/// is the reference time of episodes that give none.
pub fn episodes(group: &GroupId, body: &[u8], now: Timestamp) -> Result<Submissions, ApiError> {
    let map = object(body)?;
    if map.contains_key("episodes") {
        let batch: EpisodeBatch = typed(body)?;
        check_batch_len("episodes", batch.episodes.len())?;
        let episodes = batch
            .episodes
            .into_iter()
            .enumerate()
            .map(|(i, input)| {
                input
                    .into_command(Some(group), Some(now))
                    .map_err(|e| in_batch("episodes", i, e.into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Submissions {
            episodes,
            batch: true,
            list: "episodes",
        })
    } else {
        let input: EpisodeInput = typed(body)?;
        Ok(Submissions {
            episodes: vec![input.into_command(Some(group), Some(now))?],
            batch: false,
            list: "episodes",
        })
    }
}

/// A fact triple submitted directly (a `fact_triple` episode, no model call).
/// Its JSON schema describes the MCP `add_triplet` tool's arguments.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TripletInput {
    /// Source entity name.
    pub source: String,
    /// Relation, e.g. `LIVES_IN`.
    pub relation: String,
    /// Target entity name.
    pub target: String,
    /// The fact as a sentence; written from the triple when absent.
    #[serde(default)]
    pub fact: Option<String>,
    /// Labels of the source entity besides `Entity`.
    #[serde(default)]
    pub source_labels: Vec<String>,
    /// Labels of the target entity besides `Entity`.
    #[serde(default)]
    pub target_labels: Vec<String>,
    /// When the fact became true (RFC 3339); the reference time by default.
    #[serde(default)]
    #[schemars(with = "Option<Timestamp>")]
    pub valid_at: Option<String>,
    /// When it stopped being true (RFC 3339).
    #[serde(default)]
    #[schemars(with = "Option<Timestamp>")]
    pub invalid_at: Option<String>,
    /// When the statement was made (RFC 3339); now by default.
    #[serde(default)]
    #[schemars(with = "Option<Timestamp>")]
    pub reference_time: Option<String>,
    /// Episode name; `source relation target` by default.
    #[serde(default)]
    pub name: Option<String>,
    /// Where it came from.
    #[serde(default)]
    pub source_description: Option<String>,
    /// A caller-chosen episode id (idempotent retries).
    #[serde(default)]
    pub uuid: Option<Uuid>,
    /// The storyline it belongs to.
    #[serde(default)]
    pub saga: Option<String>,
    /// Free-form metadata.
    #[serde(default)]
    pub metadata: Option<Attributes>,
}

fn name_field(field: &str, value: &str) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::bad_request(field, "must not be empty"));
    }
    if value.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(
            field,
            format!("longer than {MAX_NAME_CHARS} characters"),
        ));
    }
    Ok(())
}

impl TripletInput {
    /// Validates the triple into a `fact_triple` episode.
    pub fn into_episode(self, group: &GroupId, now: Timestamp) -> Result<NewEpisode, ApiError> {
        let valid_at = self
            .valid_at
            .as_deref()
            .map(|t| parse_time("valid_at", t))
            .transpose()?;
        let invalid_at = self
            .invalid_at
            .as_deref()
            .map(|t| parse_time("invalid_at", t))
            .transpose()?;
        let name = self.name.unwrap_or_else(|| {
            format!("{} {} {}", self.source, self.relation, self.target)
                .chars()
                .take(MAX_NAME_CHARS)
                .collect()
        });
        let triple = FactTriple {
            source: self.source,
            relation: self.relation,
            target: self.target,
            fact: self.fact,
            source_labels: self.source_labels,
            target_labels: self.target_labels,
            valid_at,
            invalid_at,
        };
        triple
            .validate()
            .map_err(|e| ApiError::bad_request(e.field, e.message))?;
        let content = serde_json::to_string(&triple)
            .map_err(|e| ApiError::bad_request("body", format!("unencodable triple: {e}")))?;
        let input = EpisodeInput {
            group_id: None,
            name: Some(name),
            content: Some(content),
            reference_time: self.reference_time,
            source: Some("fact_triple".into()),
            source_description: self.source_description,
            uuid: self.uuid,
            previous_episode_uuids: None,
            saga: self.saga,
            metadata: self.metadata,
        };
        input.into_command(Some(group), Some(now)).map_err(|e| {
            // The content is ours; any fault in it is the triple's as a whole.
            let field = if e.field == "content" {
                "body".into()
            } else {
                e.field
            };
            ApiError::bad_request(field, e.message)
        })
    }
}

/// A batch of triples, accepted whole or not at all.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TripletBatch {
    /// The triples, in order.
    #[schemars(length(min = 1, max = MAX_BATCH))]
    triplets: Vec<TripletInput>,
}

/// What `POST /triplets` accepts: one triple or a batch. Only its schema
/// is used: [`triplets`] decodes the body itself, to name the bad field.
#[derive(schemars::JsonSchema)]
#[serde(untagged)]
pub enum TripletSubmission {
    /// One triple.
    One(Box<TripletInput>),
    /// A batch.
    Batch(TripletBatch),
}

/// `POST /triplets`: one triple object, or `{"triplets": [...]}`.
pub fn triplets(group: &GroupId, body: &[u8], now: Timestamp) -> Result<Submissions, ApiError> {
    let map = object(body)?;
    if map.contains_key("triplets") {
        let batch: TripletBatch = typed(body)?;
        check_batch_len("triplets", batch.triplets.len())?;
        let episodes = batch
            .triplets
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                t.into_episode(group, now)
                    .map_err(|e| in_batch("triplets", i, e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Submissions {
            episodes,
            batch: true,
            list: "triplets",
        })
    } else {
        let t: TripletInput = typed(body)?;
        Ok(Submissions {
            episodes: vec![t.into_episode(group, now)?],
            batch: false,
            list: "triplets",
        })
    }
}

/// The body of `POST /search`.
#[derive(Clone, Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "SearchRequest")]
pub struct SearchBody {
    /// Free text.
    #[schemars(length(min = 1, max = MAX_QUERY_CHARS))]
    pub query: String,
    /// A recipe name (default `MEMORY_HYBRID_SEARCH_RRF`: turns with their
    /// facts and context); give this or `config`.
    #[serde(default)]
    #[schemars(extend("enum" = chronicle_engine::search::RECIPES))]
    pub recipe: Option<String>,
    /// An explicit configuration instead of a recipe.
    #[serde(default)]
    pub config: Option<SearchConfig>,
    /// What results may contain.
    #[serde(default)]
    pub filters: Option<SearchFilters>,
    /// Valid time: facts true in the world at this instant (RFC 3339).
    #[serde(default)]
    #[schemars(with = "Option<Timestamp>")]
    pub as_of: Option<String>,
    /// Transaction time: what the system knew at this instant (RFC 3339).
    #[serde(default)]
    #[schemars(with = "Option<Timestamp>")]
    pub known_at: Option<String>,
    /// Center entity (uuid or name) for BFS and node-distance ranking.
    #[serde(default)]
    pub center: Option<String>,
    /// Results per scope.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_SEARCH_LIMIT))]
    pub limit: Option<usize>,
    /// Include ended and invalidated facts.
    #[serde(default)]
    pub include_history: Option<bool>,
}

/// A validated search: the request (its center still to resolve).
#[derive(Clone, Debug)]
pub struct SearchSpec {
    /// The request, with `center` unset.
    pub request: SearchRequest,
    /// The center to resolve in the group.
    pub center: Option<EntityRef>,
}

fn time_param(field: &str, value: Option<&str>) -> Result<Option<Timestamp>, ApiError> {
    value
        .map(|v| parse_time(field, v).map_err(ApiError::from))
        .transpose()
}

fn merge_time(
    field: &str,
    top: Option<Timestamp>,
    inner: Option<Timestamp>,
) -> Result<Option<Timestamp>, ApiError> {
    match (top, inner) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            field,
            format!("given both at the top level and in filters; give `{field}` once"),
        )),
        (t, i) => Ok(t.or(i)),
    }
}

fn check_limit(field: &str, limit: usize, max: usize) -> Result<(), ApiError> {
    if limit == 0 || limit > max {
        return Err(ApiError::bad_request(
            field,
            format!("{limit} is out of range; 1..={max}"),
        ));
    }
    Ok(())
}

fn check_config(c: &SearchConfig) -> Result<(), ApiError> {
    if c.scopes().is_empty() {
        return Err(ApiError::bad_request(
            "config",
            "searches nothing; set at least one of facts, entities, episodes, communities",
        ));
    }
    for (scope, sc) in c.scopes() {
        if sc.channels.is_empty() {
            return Err(ApiError::bad_request(
                format!("config.{}.channels", scope_key(scope)),
                "must name at least one of bm25, cosine, bfs",
            ));
        }
    }
    check_limit("config.limit", c.limit, MAX_SEARCH_LIMIT)?;
    if c.bfs_max_depth > MAX_BFS_DEPTH {
        return Err(ApiError::bad_request(
            "config.bfs_max_depth",
            format!("{} is out of range; 0..={MAX_BFS_DEPTH}", c.bfs_max_depth),
        ));
    }
    if !(0.0..=1.0).contains(&c.mmr_lambda) {
        return Err(ApiError::bad_request(
            "config.mmr_lambda",
            "must be between 0 and 1",
        ));
    }
    if c.context_turns > MAX_CONTEXT_TURNS {
        return Err(ApiError::bad_request(
            "config.context_turns",
            format!(
                "{} is out of range; 0..={MAX_CONTEXT_TURNS}",
                c.context_turns
            ),
        ));
    }
    Ok(())
}

/// A context request's body.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "ContextRequest")]
pub struct ContextBody {
    /// What the agent needs context for; give this or `messages`.
    #[serde(default)]
    query: Option<String>,
    /// Recent messages; the last ones form the query.
    #[serde(default)]
    messages: Option<Vec<String>>,
    /// Budget of the block in characters (default 4000).
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_CONTEXT_CHARS))]
    max_chars: Option<usize>,
    /// Valid time of the facts shown (default now).
    #[serde(default)]
    as_of: Option<Timestamp>,
}

/// A decoded context request: what to look for, the budget, the time.
#[derive(Debug)]
pub struct ContextSpec {
    /// The query: the given one, or the last messages.
    pub query: String,
    /// Budget of the block in characters.
    pub max_chars: usize,
    /// Valid time of the facts shown (default now).
    pub as_of: Option<Timestamp>,
}

/// Messages of a context request that make up its query (the latest last).
const CONTEXT_MESSAGES: usize = 3;

/// `POST /context`.
pub fn context(body: &[u8]) -> Result<ContextSpec, ApiError> {
    object(body)?;
    let b: ContextBody = typed(body)?;
    context_spec(b.query, b.messages, b.max_chars, b.as_of)
}

/// A context request from its parts, checked the same on every transport.
pub fn context_spec(
    query: Option<String>,
    messages: Option<Vec<String>>,
    max_chars: Option<usize>,
    as_of: Option<Timestamp>,
) -> Result<ContextSpec, ApiError> {
    let query = match (query, messages) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "messages",
                "give either query or messages, not both",
            ));
        }
        (Some(q), None) => q,
        (None, Some(m)) => {
            let from = m.len().saturating_sub(CONTEXT_MESSAGES);
            m[from..].join("\n")
        }
        (None, None) => return Err(ApiError::bad_request("query", "give query or messages")),
    };
    if query.trim().is_empty() {
        return Err(ApiError::bad_request("query", "must not be empty"));
    }
    // The latest words matter most: a long history keeps its end.
    let skip = query.chars().count().saturating_sub(MAX_QUERY_CHARS);
    let query: String = query.chars().skip(skip).collect();
    let max_chars = max_chars.unwrap_or(chronicle_query::DEFAULT_CONTEXT_CHARS);
    check_limit("max_chars", max_chars, MAX_CONTEXT_CHARS)?;
    Ok(ContextSpec {
        query,
        max_chars,
        as_of,
    })
}

fn scope_key(scope: search::Scope) -> &'static str {
    match scope {
        search::Scope::Fact => "facts",
        search::Scope::Entity => "entities",
        search::Scope::Episode => "episodes",
        search::Scope::Community => "communities",
    }
}

/// `POST /search`.
pub fn search(body: &[u8]) -> Result<SearchSpec, ApiError> {
    object(body)?;
    let b: SearchBody = typed(body)?;
    if b.query.trim().is_empty() {
        return Err(ApiError::bad_request("query", "must not be empty"));
    }
    if b.query.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::bad_request(
            "query",
            format!("longer than {MAX_QUERY_CHARS} characters"),
        ));
    }
    let (recipe, mut config) = match (b.recipe, b.config) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "config",
                "give either recipe or config, not both",
            ));
        }
        (None, Some(config)) => {
            check_config(&config)?;
            ("custom".to_owned(), config)
        }
        (recipe, None) => {
            let name = recipe.unwrap_or_else(|| DEFAULT_RECIPE.to_owned());
            match search::recipe(&name) {
                Some(c) => (name, c),
                None => {
                    return Err(ApiError::bad_request(
                        "recipe",
                        search::SearchError::UnknownRecipe(name).to_string(),
                    ));
                }
            }
        }
    };
    if let Some(limit) = b.limit {
        check_limit("limit", limit, MAX_SEARCH_LIMIT)?;
        config.limit = limit;
    }
    let mut filters = b.filters.unwrap_or_default();
    filters.as_of = merge_time(
        "as_of",
        time_param("as_of", b.as_of.as_deref())?,
        filters.as_of,
    )?;
    filters.known_at = merge_time(
        "known_at",
        time_param("known_at", b.known_at.as_deref())?,
        filters.known_at,
    )?;
    if let Some(h) = b.include_history {
        filters.include_history = h;
    }
    let center = b
        .center
        .as_deref()
        .map(|c| entity_ref("center", c))
        .transpose()?;
    Ok(SearchSpec {
        request: SearchRequest {
            query: b.query,
            recipe,
            config,
            filters,
            center: None,
        },
        center,
    })
}

/// Query-string pairs, checked against the parameters a route accepts.
fn params(
    raw: Option<&str>,
    allowed: &[&str],
    repeatable: &[&str],
) -> Result<Vec<(String, String)>, ApiError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
        if !allowed.contains(&k.as_ref()) {
            let known = if allowed.is_empty() {
                "this route takes none".to_owned()
            } else {
                format!("known: {}", allowed.join(", "))
            };
            return Err(ApiError::bad_request(
                k.as_ref(),
                format!("unknown query parameter; {known}"),
            ));
        }
        if !repeatable.contains(&k.as_ref()) && out.iter().any(|(x, _)| x == k.as_ref()) {
            return Err(ApiError::bad_request(k.as_ref(), "given more than once"));
        }
        out.push((k.into_owned(), v.into_owned()));
    }
    Ok(out)
}

fn count_param(field: &str, value: &str, max: usize) -> Result<usize, ApiError> {
    let n: usize = value.trim().parse().map_err(|_| {
        ApiError::bad_request(field, format!("`{value}` is not a whole number; 1..={max}"))
    })?;
    check_limit(field, n, max)?;
    Ok(n)
}

fn bool_param(field: &str, value: &str) -> Result<bool, ApiError> {
    match value {
        "true" | "1" | "" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(ApiError::bad_request(field, "expected true or false")),
    }
}

/// A route that takes no query parameters.
pub fn no_params(raw: Option<&str>) -> Result<(), ApiError> {
    params(raw, &[], &[]).map(|_| ())
}

/// `GET /episodes?last_n=&before=`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    /// Most episodes returned, newest first.
    pub last_n: usize,
    /// Only episodes with reference time at or before this.
    pub before: Option<Timestamp>,
}

/// Query parameters of the episode listing.
pub const LIST_PARAMS: &[&str] = &["last_n", "before"];
/// Query parameters of the facts listing.
pub const FACTS_PARAMS: &[&str] = &[
    "as_of",
    "known_at",
    "entity",
    "include_history",
    "edge_type",
    "limit",
];

/// Parses the episode listing's query string.
pub fn list_query(raw: Option<&str>) -> Result<ListQuery, ApiError> {
    let mut q = ListQuery {
        last_n: DEFAULT_LAST_N,
        before: None,
    };
    for (k, v) in params(raw, LIST_PARAMS, &[])? {
        match k.as_str() {
            "last_n" => q.last_n = count_param("last_n", &v, MAX_LIST)?,
            _ => q.before = time_param("before", Some(&v))?,
        }
    }
    Ok(q)
}

/// `GET /facts?as_of=&known_at=&entity=&include_history=&edge_type=&limit=`.
#[derive(Clone, Debug, PartialEq)]
pub struct FactsQuery {
    /// Time and relation filters.
    pub filters: SearchFilters,
    /// Only facts about this entity.
    pub entity: Option<EntityRef>,
    /// Most facts returned.
    pub limit: usize,
}

/// Parses the facts listing's query string.
pub fn facts_query(raw: Option<&str>) -> Result<FactsQuery, ApiError> {
    let mut q = FactsQuery {
        filters: SearchFilters::default(),
        entity: None,
        limit: DEFAULT_FACTS_LIMIT,
    };
    let mut edge_types = Vec::new();
    for (k, v) in params(raw, FACTS_PARAMS, &["edge_type"])? {
        match k.as_str() {
            "as_of" => q.filters.as_of = time_param("as_of", Some(&v))?,
            "known_at" => q.filters.known_at = time_param("known_at", Some(&v))?,
            "entity" => q.entity = Some(entity_ref("entity", &v)?),
            "include_history" => q.filters.include_history = bool_param(&k, &v)?,
            "edge_type" => {
                name_field("edge_type", &v)?;
                edge_types.push(v);
            }
            _ => q.limit = count_param("limit", &v, MAX_LIST)?,
        }
    }
    if !edge_types.is_empty() {
        q.filters.edge_types = Some(edge_types);
    }
    Ok(q)
}

#[cfg(test)]
mod tests;
