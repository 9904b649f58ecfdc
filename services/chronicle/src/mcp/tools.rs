//! The tools: one dispatcher ([`call`]) that looks a call up in the
//! catalogue ([`TOOLS`]), validates `group_id`, checks the caller, decodes
//! the other arguments and runs the body.
//!
//! The argument types below describe every argument but `group_id`, which
//! [`super::catalog::input_schema`] adds to each schema and the dispatcher takes out first:
//! no tool body can run for a group the caller has not been checked
//! against.

use std::sync::Arc;

use chronicle_engine::search::SearchFilters;
use chronicle_model::{Attributes, Command, Fact, GroupId, LogPosition, Timestamp};
use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

use super::Caller;
use super::catalog::{TOOLS, ToolSpec};
use crate::app::decode::{self, MAX_LIST, MAX_QUERY_CHARS, MAX_SEARCH_LIMIT, TripletInput};
use crate::app::error::ApiError;
use crate::app::{self, find_entity};
use crate::gateway::{EpisodeInput, Gateway, MAX_NAME_CHARS, Receipt, parse_group, parse_time};
use crate::node::Node;
use crate::status::CommandStatus;
use chronicle_query::{Query, SearchRequest, SearchResults, now};

/// Results per search, and episodes listed, when the caller does not say
/// (graphiti's MCP server's defaults).
pub const DEFAULT_RESULTS: usize = 10;

/// What a tool body works with: the node, and the authorized group.
pub struct Ctx<'a> {
    /// The node.
    pub node: &'a Arc<Node>,
    /// Appends commands.
    pub gateway: &'a Gateway,
    /// Who is calling.
    pub caller: &'a Caller,
}

/// A tool call decoded: its table entry, its group and its typed
/// arguments. Decoding is pure (no node, no clock but the one given), so
/// every malformed call is a 400 before anything runs, and it can be fuzzed.
pub struct DecodedCall {
    /// The tool's table entry.
    pub spec: &'static ToolSpec,
    /// The group the call reads or writes.
    pub group: GroupId,
    /// The remaining arguments, typed.
    pub args: ToolArgs,
}

/// Each tool's arguments; writes arrive as the command they append.
#[allow(missing_docs)]
pub enum ToolArgs {
    AddMemory(Command),
    SearchMemory(SearchMemory),
    GetContext(GetContext),
    SearchNodes(SearchNodes),
    SearchFacts(SearchFacts),
    GetEpisodes(GetEpisodes),
    GetEpisodeEntities(GetEpisodeEntities),
    GetEntityEdge(GetEntityEdge),
    DeleteEpisode(DeleteEpisode),
    AddTriplet(Command),
    BuildCommunities,
    SummarizeSaga(SummarizeSaga),
    GetStatus(GetStatus),
}

/// Decodes a call: the tool by name, `group_id` first, then the rest of
/// the arguments into the tool's type (episodes validated against `now`).
pub fn decode_call(
    name: &str,
    mut args: JsonObject,
    now: Timestamp,
) -> Result<DecodedCall, ApiError> {
    let spec = TOOLS.iter().find(|t| t.name == name).ok_or_else(|| {
        ApiError::bad_request("name", format!("no tool named `{name}`; see tools/list"))
    })?;
    let group = match args.remove("group_id") {
        Some(Value::String(g)) => parse_group("group_id", &g)?,
        Some(_) => return Err(ApiError::bad_request("group_id", "must be a string")),
        None => {
            return Err(ApiError::bad_request(
                "group_id",
                "missing; every tool takes the group (tenant) id",
            ));
        }
    };
    let args = match spec.name {
        "add_memory" => ToolArgs::AddMemory(add_memory_command(&group, decode_args(args)?, now)?),
        "search_memory" => ToolArgs::SearchMemory(decode_args(args)?),
        "get_context" => ToolArgs::GetContext(decode_args(args)?),
        "search_nodes" => ToolArgs::SearchNodes(decode_args(args)?),
        "search_memory_facts" => ToolArgs::SearchFacts(decode_args(args)?),
        "get_episodes" => ToolArgs::GetEpisodes(decode_args(args)?),
        "get_episode_entities" => ToolArgs::GetEpisodeEntities(decode_args(args)?),
        "get_entity_edge" => ToolArgs::GetEntityEdge(decode_args(args)?),
        "delete_episode" => ToolArgs::DeleteEpisode(decode_args(args)?),
        "add_triplet" => {
            let t: TripletInput = decode_args(args)?;
            ToolArgs::AddTriplet(Command::AddEpisode(t.into_episode(&group, now)?))
        }
        "build_communities" => {
            let BuildCommunities {} = decode_args(args)?;
            ToolArgs::BuildCommunities
        }
        "summarize_saga" => ToolArgs::SummarizeSaga(decode_args(args)?),
        "get_status" => ToolArgs::GetStatus(decode_args(args)?),
        other => {
            return Err(ApiError::broken(
                "dispatching an MCP tool",
                &format!("`{other}` is in the table but has no decoder"),
            ));
        }
    };
    Ok(DecodedCall { spec, group, args })
}

/// Runs a tool: decodes the call, checks the caller against its group with
/// the tool's access, runs the body.
pub async fn call(ctx: &Ctx<'_>, name: &str, args: JsonObject) -> Result<Value, ApiError> {
    let DecodedCall { spec, group, args } = decode_call(name, args, now())?;
    ctx.caller.check(&group, spec.access)?;
    let g = &group;
    match args {
        ToolArgs::AddMemory(command) | ToolArgs::AddTriplet(command) => {
            accept(ctx, g, command).await
        }
        ToolArgs::SearchMemory(a) => search_memory(ctx, g, a).await,
        ToolArgs::GetContext(a) => get_context(ctx, g, a).await,
        ToolArgs::SearchNodes(a) => search_nodes(ctx, g, a).await,
        ToolArgs::SearchFacts(a) => search_memory_facts(ctx, g, a).await,
        ToolArgs::GetEpisodes(a) => get_episodes(ctx, g, a).await,
        ToolArgs::GetEpisodeEntities(a) => get_episode_entities(ctx, g, a).await,
        ToolArgs::GetEntityEdge(a) => get_entity_edge(ctx, g, a).await,
        ToolArgs::DeleteEpisode(a) => delete_episode(ctx, g, a).await,
        ToolArgs::BuildCommunities => {
            let uuid = Uuid::new_v4();
            accept(
                ctx,
                g,
                Command::BuildCommunities {
                    uuid,
                    group_id: g.clone(),
                },
            )
            .await
        }
        ToolArgs::SummarizeSaga(a) => summarize_saga(ctx, g, a).await,
        ToolArgs::GetStatus(a) => get_status(ctx, g, a).await,
    }
}

/// Decodes arguments, naming the first bad field (`edge_types[1]`,
/// `uuid`, an unknown field's name).
fn decode_args<T: DeserializeOwned>(args: JsonObject) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        ApiError::bad_request(decode::field_of(&path, &message), message)
    })
}

fn encode(value: &impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal("encoding the result", &e))
}

/// A command's status, as the tools report it.
#[derive(Serialize)]
struct CommandView {
    uuid: Uuid,
    group_id: GroupId,
    #[serde(flatten)]
    status: CommandStatus,
    /// For processed commands: whether search already sees the decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    projected: Option<bool>,
}

/// Appends one command and reports its status; a failed append is an
/// error, never a success.
async fn accept(ctx: &Ctx<'_>, group: &GroupId, command: Command) -> Result<Value, ApiError> {
    let receipt = app::submit_one(ctx.gateway, command).await?;
    view_of(ctx, group, &receipt)
}

/// A submitted command's view: a retried command may already be decided,
/// so what is known is reported, else pending at its log position.
fn view_of(ctx: &Ctx<'_>, group: &GroupId, receipt: &Receipt) -> Result<Value, ApiError> {
    let uuid = receipt.uuid;
    let status = ctx
        .node
        .status
        .get(group, uuid)
        .unwrap_or(CommandStatus::Pending {
            position: LogPosition {
                partition: receipt.partition,
                offset: receipt.offset,
            },
        });
    encode(&CommandView {
        uuid,
        group_id: group.clone(),
        status,
        projected: None,
    })
}

/// `add_memory` arguments (graphiti's names).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddMemory {
    /// A short name for the episode.
    #[serde(default)]
    name: Option<String>,
    /// The content: free text, a chat message (`actor: text`), or a JSON document as a string.
    episode_body: String,
    /// `text` (default), `message`, `json`, or `fact_triple`.
    #[serde(default)]
    source: Option<String>,
    /// Where the content came from.
    #[serde(default)]
    source_description: Option<String>,
    /// When the content was created (RFC 3339, e.g. 2025-03-01T09:30:00Z); now by default.
    /// Relative times in the content ("last year") are read against it.
    #[serde(default)]
    reference_time: Option<String>,
    /// A caller-chosen id, so that a retry is decided once; derived from the content otherwise.
    #[serde(default)]
    uuid: Option<Uuid>,
    /// The storyline (saga) the episode belongs to.
    #[serde(default)]
    saga: Option<String>,
    /// Free-form metadata (a JSON object).
    #[serde(default)]
    metadata: Option<Attributes>,
}

fn add_memory_command(group: &GroupId, a: AddMemory, now: Timestamp) -> Result<Command, ApiError> {
    let input = EpisodeInput {
        group_id: None,
        name: a.name,
        content: Some(a.episode_body),
        reference_time: a.reference_time,
        source: Some(a.source.unwrap_or_else(|| "text".into())),
        source_description: a.source_description,
        uuid: a.uuid,
        previous_episode_uuids: None,
        saga: a.saga,
        metadata: a.metadata,
    };
    let episode = input.into_command(Some(group), Some(now)).map_err(|e| {
        // The gateway's field is `content`; this tool calls it `episode_body`.
        let field = if e.field == "content" {
            "episode_body".to_owned()
        } else {
            e.field
        };
        ApiError::bad_request(field, e.message)
    })?;
    Ok(Command::AddEpisode(episode))
}

/// `search_memory` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchMemory {
    /// What to look for, in words.
    query: String,
    /// Most results (1-100, default 10).
    #[serde(default)]
    max_results: Option<usize>,
    /// Valid time (RFC 3339) of the facts shown with each turn.
    #[serde(default)]
    as_of: Option<String>,
}

async fn search_memory(ctx: &Ctx<'_>, group: &GroupId, a: SearchMemory) -> Result<Value, ApiError> {
    let filters = SearchFilters {
        as_of: time("as_of", a.as_of)?,
        ..Default::default()
    };
    let recipe = chronicle_engine::search::MEMORY_RECIPE;
    let found = search(
        ctx,
        group,
        Search {
            query: a.query,
            limit_field: "max_results",
            limit: a.max_results,
            center: None,
            recipes: (recipe, recipe),
            filters,
        },
    )
    .await?;
    Ok(json!({ "results": encode(&found.results)? }))
}

/// `get_context` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetContext {
    /// What the agent needs context for; give this or `messages`.
    #[serde(default)]
    query: Option<String>,
    /// Recent messages, oldest first; the last ones form the query.
    #[serde(default)]
    messages: Option<Vec<String>>,
    /// Budget of the block in characters (default 4000).
    #[serde(default)]
    max_chars: Option<usize>,
    /// Valid time (RFC 3339) of the facts shown (default now).
    #[serde(default)]
    as_of: Option<String>,
}

async fn get_context(ctx: &Ctx<'_>, group: &GroupId, a: GetContext) -> Result<Value, ApiError> {
    let spec = decode::context_spec(a.query, a.messages, a.max_chars, time("as_of", a.as_of)?)?;
    let block = Query::new(ctx.node.sources()?)
        .context(group, &spec.query, spec.max_chars, spec.as_of)
        .await
        .map_err(|e| ApiError::from_query(e, "query"))?;
    encode(&block)
}

/// `search_nodes` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchNodes {
    /// What to look for, in words.
    query: String,
    /// Most entities returned (1-100, default 10).
    #[serde(default)]
    max_nodes: Option<usize>,
    /// Only entities with one of these labels (e.g. `Person`, `Place`).
    #[serde(default)]
    entity_types: Option<Vec<String>>,
    /// An entity (uuid or exact name) to rank results by graph distance from
    /// (graphiti's `center_node_uuid` is accepted too).
    #[serde(default, alias = "center_node_uuid")]
    center: Option<String>,
}

async fn search_nodes(ctx: &Ctx<'_>, group: &GroupId, a: SearchNodes) -> Result<Value, ApiError> {
    let filters = SearchFilters {
        node_labels: names("entity_types", a.entity_types)?,
        ..Default::default()
    };
    let found = search(
        ctx,
        group,
        Search {
            query: a.query,
            limit_field: "max_nodes",
            limit: a.max_nodes,
            center: a.center,
            recipes: ("NODE_HYBRID_SEARCH_RRF", "NODE_HYBRID_SEARCH_NODE_DISTANCE"),
            filters,
        },
    )
    .await?;
    Ok(json!({ "nodes": encode(&found.results)? }))
}

/// `search_memory_facts` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFacts {
    /// What to look for, in words.
    query: String,
    /// Most facts returned (1-100, default 10).
    #[serde(default)]
    max_facts: Option<usize>,
    /// An entity (uuid or exact name) to rank facts by graph distance from
    /// (graphiti's `center_node_uuid` is accepted too).
    #[serde(default, alias = "center_node_uuid")]
    center: Option<String>,
    /// Valid time (RFC 3339): only facts true in the world at this instant.
    #[serde(default)]
    as_of: Option<String>,
    /// Transaction time (RFC 3339): the graph as the system knew it at this instant.
    #[serde(default)]
    known_at: Option<String>,
    /// Only facts with one of these relation names (e.g. `LIVES_IN`).
    #[serde(default)]
    edge_types: Option<Vec<String>>,
    /// Include ended and invalidated facts (default false: current facts only).
    #[serde(default)]
    include_history: Option<bool>,
}

async fn search_memory_facts(
    ctx: &Ctx<'_>,
    group: &GroupId,
    a: SearchFacts,
) -> Result<Value, ApiError> {
    let filters = SearchFilters {
        edge_types: names("edge_types", a.edge_types)?,
        as_of: time("as_of", a.as_of)?,
        known_at: time("known_at", a.known_at)?,
        include_history: a.include_history.unwrap_or(false),
        ..Default::default()
    };
    let found = search(
        ctx,
        group,
        Search {
            query: a.query,
            limit_field: "max_facts",
            limit: a.max_facts,
            center: a.center,
            recipes: ("EDGE_HYBRID_SEARCH_RRF", "EDGE_HYBRID_SEARCH_NODE_DISTANCE"),
            filters,
        },
    )
    .await?;
    Ok(json!({ "facts": encode(&found.results)? }))
}

/// A search of one scope, as the two search tools ask for it.
struct Search {
    query: String,
    limit_field: &'static str,
    limit: Option<usize>,
    center: Option<String>,
    /// The recipe without, and with, a center.
    recipes: (&'static str, &'static str),
    filters: SearchFilters,
}

async fn search(ctx: &Ctx<'_>, group: &GroupId, s: Search) -> Result<SearchResults, ApiError> {
    if s.query.trim().is_empty() {
        return Err(ApiError::bad_request("query", "must not be empty"));
    }
    if s.query.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::bad_request(
            "query",
            format!("longer than {MAX_QUERY_CHARS} characters"),
        ));
    }
    let limit = count(s.limit_field, s.limit, MAX_SEARCH_LIMIT)?;
    let center = match s.center {
        Some(c) => {
            let r = decode::entity_ref("center", &c)?;
            let e = find_entity(ctx.node, group, &r)
                .await?
                .ok_or_else(|| ApiError::not_found("center", "no such entity in this group"))?;
            Some(e.uuid)
        }
        None => None,
    };
    let recipe = if center.is_some() {
        s.recipes.1
    } else {
        s.recipes.0
    };
    let mut request = SearchRequest::recipe(&s.query, recipe, limit)
        .map_err(|e| ApiError::internal("choosing the search recipe", &e))?;
    request.filters = s.filters;
    request.center = center;
    Query::new(ctx.node.sources()?)
        .search(group, &request)
        .await
        .map_err(|e| ApiError::from_query(e, "query"))
}

/// A count argument in `1..=max`, [`DEFAULT_RESULTS`] when absent.
fn count(field: &str, value: Option<usize>, max: usize) -> Result<usize, ApiError> {
    match value {
        None => Ok(DEFAULT_RESULTS.min(max)),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::bad_request(
            field,
            format!("{n} is out of range; 1..={max}"),
        )),
    }
}

/// A list of names (labels, relations); an empty list means no filter.
fn names(field: &str, list: Option<Vec<String>>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    for (i, n) in list.iter().enumerate() {
        if n.trim().is_empty() || n.chars().count() > MAX_NAME_CHARS {
            return Err(ApiError::bad_request(
                format!("{field}[{i}]"),
                format!("must be a non-empty name of at most {MAX_NAME_CHARS} characters"),
            ));
        }
    }
    Ok(Some(list))
}

fn time(field: &str, text: Option<String>) -> Result<Option<Timestamp>, ApiError> {
    Ok(text.map(|t| parse_time(field, &t)).transpose()?)
}

/// `get_episodes` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetEpisodes {
    /// Most episodes returned (1-1000, default 10).
    #[serde(default)]
    max_episodes: Option<usize>,
    /// Only episodes with a reference time at or before this instant (RFC 3339).
    #[serde(default)]
    before: Option<String>,
}

async fn get_episodes(ctx: &Ctx<'_>, group: &GroupId, a: GetEpisodes) -> Result<Value, ApiError> {
    let n = count("max_episodes", a.max_episodes, MAX_LIST)?;
    let before = time("before", a.before)?;
    let episodes = Query::new(ctx.node.sources()?)
        .recent_episodes(group, before, n)
        .await
        .map_err(|e| ApiError::internal("listing episodes", &e))?;
    Ok(json!({ "episodes": encode(&episodes)? }))
}

/// `get_episode_entities` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetEpisodeEntities {
    /// The episode's uuid (as add_memory or get_episodes returned it).
    episode_uuid: Uuid,
}

async fn get_episode_entities(
    ctx: &Ctx<'_>,
    group: &GroupId,
    a: GetEpisodeEntities,
) -> Result<Value, ApiError> {
    let produced = Query::new(ctx.node.sources()?)
        .produced_by(group, &[a.episode_uuid])
        .await
        .map_err(|e| ApiError::from_query(e, "episode_uuid"))?;
    if produced.episodes.is_empty() {
        return Err(ApiError::not_found(
            "episode_uuid",
            "no episode with this uuid in this group's graph (a pending one is not in it yet)",
        ));
    }
    Ok(json!({
        "episode_uuid": a.episode_uuid,
        "entities": encode(&produced.entities)?,
        "facts": encode(&produced.facts)?,
    }))
}

/// `get_entity_edge` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetEntityEdge {
    /// The fact's uuid.
    uuid: Uuid,
}

/// A fact with its endpoints' names and without its embedding.
#[derive(Serialize)]
struct EdgeView {
    #[serde(flatten)]
    fact: Fact,
    source_node_name: Option<String>,
    target_node_name: Option<String>,
}

async fn get_entity_edge(
    ctx: &Ctx<'_>,
    group: &GroupId,
    a: GetEntityEdge,
) -> Result<Value, ApiError> {
    let store = &ctx.node.store()?;
    let lookup = |e| ApiError::internal("looking the fact up", &e);
    let mut fact = store
        .fact(group, a.uuid)
        .await
        .map_err(lookup)?
        .ok_or_else(|| ApiError::not_found("uuid", "no fact with this uuid in this group"))?;
    fact.fact_embedding = None;
    let source = store
        .entity(group, fact.source_node_uuid)
        .await
        .map_err(lookup)?;
    let target = store
        .entity(group, fact.target_node_uuid)
        .await
        .map_err(lookup)?;
    encode(&EdgeView {
        fact,
        source_node_name: source.map(|e| e.name),
        target_node_name: target.map(|e| e.name),
    })
}

/// `delete_episode` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteEpisode {
    /// The episode's uuid.
    uuid: Uuid,
}

async fn delete_episode(
    ctx: &Ctx<'_>,
    group: &GroupId,
    a: DeleteEpisode,
) -> Result<Value, ApiError> {
    let receipt = app::retract(ctx.node, ctx.gateway, group, a.uuid).await?;
    let mut view = view_of(ctx, group, &receipt)?;
    view["episode_uuid"] = json!(a.uuid);
    Ok(view)
}

/// `build_communities` takes nothing but the group.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildCommunities {}

/// `summarize_saga` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SummarizeSaga {
    /// The saga's name (as given to add_memory).
    saga: String,
}

async fn summarize_saga(
    ctx: &Ctx<'_>,
    group: &GroupId,
    a: SummarizeSaga,
) -> Result<Value, ApiError> {
    let command = app::summarize_saga(ctx.node, group, "saga", &a.saga).await?;
    accept(ctx, group, command).await
}

/// `get_status` arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetStatus {
    /// A uuid a write tool returned; without it, the group's processing status.
    #[serde(default)]
    uuid: Option<Uuid>,
}

async fn get_status(ctx: &Ctx<'_>, group: &GroupId, a: GetStatus) -> Result<Value, ApiError> {
    let node = ctx.node;
    match a.uuid {
        Some(uuid) => {
            let status = app::command_status(node, group, uuid).await?.ok_or_else(|| {
                ApiError::not_found(
                    "uuid",
                    "no command with this uuid in this group; use the uuid a write tool returned",
                )
            })?;
            let projected = match status {
                CommandStatus::Processed { .. } => {
                    Some(app::projector_lag(node, group).await? == 0)
                }
                _ => None,
            };
            encode(&CommandView {
                uuid,
                group_id: group.clone(),
                status,
                projected,
            })
        }
        None => encode(&app::group_status(node, group).await?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_schema_is_an_object_requiring_group_id() {
        for t in TOOLS {
            let s = (t.schema)();
            assert_eq!(s["type"], "object", "{}", t.name);
            assert_eq!(s["required"][0], "group_id", "{}", t.name);
            assert_eq!(s["properties"]["group_id"]["type"], "string", "{}", t.name);
            assert_eq!(s["additionalProperties"], false, "{}", t.name);
        }
        let names: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(names.len(), unique.len(), "tool names are unique");
    }

    #[test]
    fn decoding_names_the_bad_field() {
        let obj = |v: Value| match v {
            Value::Object(m) => m,
            _ => unreachable!("an object literal"),
        };
        let cases: Vec<(Result<(), ApiError>, &str)> = vec![
            (
                decode_args::<SearchFacts>(obj(json!({}))).map(drop),
                "query",
            ),
            (
                decode_args::<SearchFacts>(obj(json!({"query": "q", "edge_types": ["A", 3]})))
                    .map(drop),
                "edge_types[1]",
            ),
            (
                decode_args::<SearchFacts>(obj(json!({"query": "q", "bogus": 1}))).map(drop),
                "bogus",
            ),
            (
                decode_args::<DeleteEpisode>(obj(json!({"uuid": "not-a-uuid"}))).map(drop),
                "uuid",
            ),
            (
                decode_args::<AddMemory>(obj(json!({"name": "x"}))).map(drop),
                "episode_body",
            ),
            (count("max_facts", Some(0), 100).map(drop), "max_facts"),
            (count("max_facts", Some(101), 100).map(drop), "max_facts"),
            (
                names("edge_types", Some(vec!["A".into(), " ".into()])).map(drop),
                "edge_types[1]",
            ),
            (time("as_of", Some("yesterday".into())).map(drop), "as_of"),
        ];
        for (r, field) in cases {
            let e = r.expect_err(field);
            assert_eq!(
                e.status,
                axum::http::StatusCode::BAD_REQUEST,
                "{field}: {e:?}"
            );
            assert_eq!(e.field.as_deref(), Some(field), "{e:?}");
        }
        let center = decode_args::<SearchNodes>(obj(
            json!({"query": "q", "center_node_uuid": "67e55044-10b1-426f-9247-bb680e5fe0c8"}),
        ))
        .expect("graphiti's name for the center is accepted");
        assert!(center.center.is_some());
        assert_eq!(names("edge_types", Some(Vec::new())).expect("empty"), None);
        assert_eq!(
            count("max_nodes", None, 100).expect("default"),
            DEFAULT_RESULTS
        );
    }
}
