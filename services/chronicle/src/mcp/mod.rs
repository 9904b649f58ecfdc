//! The MCP server (Model Context Protocol, on the official Rust SDK `rmcp`):
//! the tools of graphiti's MCP server over chronicle, on two transports —
//! stdio (`chronicle mcp`, see [`stdio`]) and streamable HTTP at `/mcp`
//! under `chronicle serve` (see [`http`]).
//!
//! * One tool table ([`catalog::TOOLS`]) gives every tool's name, description,
//!   input schema and the access it needs; `tools/list` and `tools/call`
//!   both read it.
//! * Every tool takes `group_id`. Before a tool body runs, the group id is
//!   validated and the caller's grant checked against it with the access the
//!   tool needs — the same tokens and the same rule as the HTTP API — so a
//!   token of group A asking about group B gets a forbidden error, never
//!   data. Only then are the other arguments decoded.
//! * Errors are JSON-RPC errors whose message names the field at fault and
//!   whose `data` is `{"status": <HTTP-equivalent status>, "field": ...}`;
//!   see [`to_mcp`] for the codes.
//! * Results are one text content block holding a JSON object.

pub mod catalog;
pub mod http;
pub mod stdio;
pub mod tools;

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use chronicle_metrics::METRICS;
use chronicle_model::GroupId;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use crate::app::auth::{Access, Auth, Denied, Grant};
use crate::app::error::ApiError;
use crate::gateway::Gateway;
use crate::node::Node;

/// JSON-RPC code of a call without a usable token (HTTP 401's equivalent;
/// from the range JSON-RPC leaves to implementations). Over HTTP a missing
/// or unknown token is refused with a plain 401 before MCP runs, so this
/// only appears if the transport failed to establish a caller.
pub const UNAUTHORIZED: ErrorCode = ErrorCode(-32001);
/// JSON-RPC code of a call the caller's token does not allow: another
/// group, or a write with a read token (HTTP 403's equivalent).
pub const FORBIDDEN: ErrorCode = ErrorCode(-32003);

/// Who is calling, as the transport established it.
#[derive(Clone, Debug)]
pub enum Caller {
    /// No tokens are configured: stdio without `--auth`, or `serve` without
    /// `--auth` (which only listens on loopback). Every group is open.
    Unrestricted,
    /// A token's grant: only its groups, with its access.
    Token(Grant),
}

impl Caller {
    /// Whether the caller may use `group` with `need` access; the refusal
    /// never says more than the HTTP API's 403 does.
    pub fn check(&self, group: &GroupId, need: Access) -> Result<(), ApiError> {
        let Caller::Token(grant) = self else {
            return Ok(());
        };
        Auth::check(grant, group, need).map_err(|denied| {
            tracing::debug!(token = %grant.name, group = %group, access = need.as_str(), %denied, "MCP call denied");
            match denied {
                Denied::ReadOnly => ApiError::forbidden(denied.to_string()),
                _ => ApiError::forbidden(Denied::OutOfScope.to_string()),
            }
        })
    }
}

/// The MCP server handler: the node's tools, for one caller or for the
/// caller each HTTP request carries.
#[derive(Clone)]
pub struct McpServer {
    node: Arc<Node>,
    gateway: Gateway,
    /// `None`: the caller comes with each request (streamable HTTP, set by
    /// [`http::authenticate`]); a request without one is refused.
    caller: Option<Caller>,
}

impl McpServer {
    /// A server for one caller, fixed for the connection (stdio).
    pub fn for_caller(node: Arc<Node>, caller: Caller) -> Self {
        McpServer {
            gateway: Gateway::new(node.clone()),
            node,
            caller: Some(caller),
        }
    }

    /// A server that takes the caller from each HTTP request.
    pub fn per_request(node: Arc<Node>) -> Self {
        McpServer {
            gateway: Gateway::new(node.clone()),
            node,
            caller: None,
        }
    }

    /// The caller of a request: fixed, or the one the HTTP layer attached.
    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, ApiError> {
        if let Some(c) = &self.caller {
            return Ok(c.clone());
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("no authenticated caller on this request"))
    }
}

/// What the server tells a client about itself at initialization.
const INSTRUCTIONS: &str = "chronicle is a temporal context graph for agent memory. \
add_memory appends an episode and returns at once (status pending); the graph is updated \
asynchronously — poll get_status with the returned uuid until it is processed, then recall \
with search_memory (what was said, with its facts and neighbouring turns) or get_context (a \
ready-to-paste block), or search search_memory_facts (facts, with valid and transaction times) \
or search_nodes (entities). \
Contradicted facts are never deleted: they get invalid_at/expired_at and stay searchable with \
include_history. Every tool takes group_id, the tenant.";

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("chronicle", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            catalog::TOOLS.iter().map(catalog::ToolSpec::tool).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        catalog::TOOLS
            .iter()
            .find(|t| t.name == name)
            .map(catalog::ToolSpec::tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let started = Instant::now();
        // Bounded label: a name of the table, or `unknown`.
        let tool = catalog::TOOLS
            .iter()
            .find(|t| t.name == request.name)
            .map_or("unknown", |t| t.name);
        let outcome = match self.caller(&context) {
            Ok(caller) => {
                let ctx = tools::Ctx {
                    node: &self.node,
                    gateway: &self.gateway,
                    caller: &caller,
                };
                tools::call(&ctx, &request.name, request.arguments.unwrap_or_default()).await
            }
            Err(e) => Err(e),
        };
        METRICS
            .mcp_tool_calls
            .with_label_values(&[
                tool,
                match &outcome {
                    Ok(_) => "ok",
                    Err(e) => e.status.as_str(),
                },
            ])
            .inc();
        METRICS
            .mcp_tool_duration
            .with_label_values(&[tool])
            .observe(started.elapsed().as_secs_f64());
        let value = outcome.map_err(to_mcp)?;
        Ok(CallToolResult::success(vec![ContentBlock::text(value.to_string())]).into())
    }
}

/// An API error as an MCP (JSON-RPC) error: the message names the field,
/// `data` carries the HTTP-equivalent status and the field. Codes:
/// invalid params (-32602) for 400/413, [`UNAUTHORIZED`] for 401,
/// [`FORBIDDEN`] for 403, resource not found (-32002) for 404, internal
/// error (-32603) for 5xx (whose message never echoes internals; the cause
/// is in the server log).
pub fn to_mcp(e: ApiError) -> ErrorData {
    let code = match e.status {
        StatusCode::UNAUTHORIZED => UNAUTHORIZED,
        StatusCode::FORBIDDEN => FORBIDDEN,
        StatusCode::NOT_FOUND => ErrorCode::RESOURCE_NOT_FOUND,
        s if s.is_client_error() => ErrorCode::INVALID_PARAMS,
        _ => ErrorCode::INTERNAL_ERROR,
    };
    // Name the field first, unless the message already starts with it.
    let message = match &e.field {
        Some(field) if !e.error.starts_with(field.as_str()) => format!("{field}: {}", e.error),
        _ => e.error.clone(),
    };
    ErrorData::new(
        code,
        message,
        Some(json!({ "status": e.status.as_u16(), "field": e.field })),
    )
}
