//! MCP over streamable HTTP, mounted at [`PATH`] by the HTTP API's router
//! (so under `chronicle serve`).
//!
//! * Authentication is the HTTP API's: with `--auth`, a request without a
//!   known bearer token is refused with 401 (and `WWW-Authenticate: Bearer`)
//!   before MCP sees it; a known token's grant is attached to the request,
//!   and every tool call checks it against the call's `group_id`.
//! * Stateless: every POST is answered on its own (JSON, no session, no
//!   server-held stream), so any replica can serve any request and shutdown
//!   waits for nothing.
//! * Without `--auth` (loopback only) the SDK's Host check stays on, so a
//!   web page cannot reach the server through DNS rebinding; with tokens a
//!   page has no token, and any Host is accepted.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::{Caller, McpServer};
use crate::app::auth::Auth;
use crate::app::error::ApiError;
use crate::node::Node;

/// Where the MCP endpoint is mounted.
pub const PATH: &str = "/mcp";

/// What the MCP route takes from the server it is mounted in.
#[derive(Clone)]
pub struct McpHttpOptions {
    /// The tokens, or `None` for a loopback-only server.
    pub auth: Option<Auth>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// How long a request body may take to arrive.
    pub body_timeout: std::time::Duration,
}

/// The MCP route, for merging into the HTTP API's router.
pub fn routes<S: Clone + Send + Sync + 'static>(
    node: Arc<Node>,
    options: &McpHttpOptions,
) -> Router<S> {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(options.max_body_bytes);
    let config = if options.auth.is_some() {
        config.disable_allowed_hosts()
    } else {
        config
    };
    let server = McpServer::per_request(node);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .route_layer(from_fn_with_state(
            BodyLimits {
                max_bytes: options.max_body_bytes,
                timeout: options.body_timeout,
            },
            parse_errors,
        ))
        .route_layer(from_fn_with_state(
            options.auth.clone().map(Arc::new),
            authenticate,
        ))
}

/// How much of a request body the parse check reads, and for how long.
#[derive(Clone, Copy)]
struct BodyLimits {
    max_bytes: usize,
    timeout: std::time::Duration,
}

/// A POST body that is not JSON gets JSON-RPC's own answer, a parse error
/// (-32700, HTTP 400), rather than a transport-level status; a body over the
/// limit 413 and a body slower than the deadline 408, as on the REST routes.
async fn parse_errors(State(limits): State<BodyLimits>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let read = axum::body::to_bytes(body, limits.max_bytes);
    let bytes = match tokio::time::timeout(limits.timeout, read).await {
        Err(_) => {
            return ApiError::body_timeout(limits.timeout).into_response();
        }
        Ok(Err(_)) => {
            return ApiError::body_too_large().into_response();
        }
        Ok(Ok(bytes)) => bytes,
    };
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&bytes) {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": -32700, "message": format!("Parse error: {e}") },
        });
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Establishes the caller of an MCP request: 401 without a known token
/// when tokens are configured; the token's grant, or unrestricted, attached
/// for the tools to check.
pub async fn authenticate(
    State(auth): State<Option<Arc<Auth>>>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = match &auth {
        None => Caller::Unrestricted,
        Some(auth) => {
            let value = req
                .headers()
                .get(header::AUTHORIZATION)
                .map(|v| v.to_str().unwrap_or(""));
            match auth.grant(value) {
                Ok(grant) => {
                    if let Err(wait) = grant.admit() {
                        return crate::app::error::rate_limited(wait);
                    }
                    Caller::Token(grant.clone())
                }
                Err(denied) => return ApiError::unauthorized(denied.to_string()).into_response(),
            }
        }
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}
