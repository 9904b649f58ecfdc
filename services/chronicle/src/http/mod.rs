//! The HTTP API (axum): episodes in, status, search, facts and timelines
//! out, every route under `/v1/groups/{group_id}` scoped to one tenant.
//!
//! * One route table ([`routes`]) builds both the router and the OpenAPI
//!   document, so they cannot disagree.
//! * Group routes run behind [`authorize`]: 401 without a known token, 400
//!   for an invalid group id, 403 when the token does not cover the group or
//!   only reads it — before the body is read. Handlers see only the
//!   authorized group.
//! * Bodies are read under a size limit and decoded by [`decode`]; every
//!   client mistake is a 4xx `{"error", "field"}`, and a batch is accepted
//!   whole or not at all.
//! * Without tokens, a request whose `Host` or `Origin` is not loopback is
//!   a 403 ([`origin`]); JSON bodies need `Content-Type: application/json`
//!   (415) and arrive within `body_timeout` (408); connections are bounded
//!   in number and in how long a request head may take ([`listen`]).
//! * Every response is counted in `chronicle_http_requests_total` by method
//!   and route template (never the raw path, which holds group ids) and
//!   status.

pub mod bodies;
pub mod graph;
pub mod handlers;
pub mod listen;
pub mod openapi;
mod origin;
pub mod proxy;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{
    DefaultBodyLimit, FromRequestParts, MatchedPath, RawPathParams, Request, State,
};
use axum::handler::Handler;
use axum::http::{Method, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use chronicle_metrics::METRICS;
use chronicle_model::GroupId;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use self::openapi::{Op, SchemaFn, schema};
use crate::app::auth::{Access, Auth, Denied};
use crate::app::decode;
use crate::app::error::{self, ApiError};
use crate::config::Settings;
use crate::gateway::Gateway;
use crate::node::Node;
use crate::processor::ProcessorOptions;
use crate::runtime::{self, RoleStopped, Running};

/// Default request body limit (`--max-body-bytes`).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default readiness bound on unprojected graph-event records (`--ready-max-lag`).
pub const DEFAULT_READY_MAX_LAG: u64 = 1000;

/// How the API behaves.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// Tokens; `None` serves without authentication (loopback only).
    pub auth: Option<Auth>,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Readiness requires the projector within this many records of the log end.
    pub ready_max_lag: u64,
    /// Readiness also requires this process's processor to have recovered
    /// (true where the processor runs in-process, as under `serve`; a
    /// gateway or query process of a distributed deployment sets false).
    pub processor_in_process: bool,
    /// Open connections and request-head deadline.
    pub connections: listen::ConnectionLimits,
    /// Time a client has to send a whole request body.
    pub body_timeout: Duration,
}

/// Default body read deadline (`--body-timeout-ms`).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            auth: None,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            ready_max_lag: DEFAULT_READY_MAX_LAG,
            processor_in_process: true,
            connections: listen::ConnectionLimits::default(),
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// What every handler shares.
pub struct Shared {
    /// The node the roles run on.
    pub node: Arc<Node>,
    /// Appends commands.
    pub gateway: Gateway,
    /// Options.
    pub options: HttpOptions,
    /// The rendered OpenAPI document.
    pub openapi: Bytes,
}

/// Handler state.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The group a request was authorized for (set by [`authorize`]).
#[derive(Clone, Debug)]
pub struct Scoped(pub GroupId);

/// An HTTP method of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// GET.
    Get,
    /// POST.
    Post,
    /// DELETE.
    Delete,
}

impl Verb {
    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
            Verb::Delete => MethodFilter::DELETE,
        }
    }

    /// As OpenAPI spells it.
    pub fn as_lower(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Delete => "delete",
        }
    }

    /// The HTTP method.
    pub fn method(self) -> Method {
        match self {
            Verb::Get => Method::GET,
            Verb::Post => Method::POST,
            Verb::Delete => Method::DELETE,
        }
    }
}

/// One route: method, path template, access, documentation and handler.
pub struct Route {
    /// Method.
    pub verb: Verb,
    /// axum path template (`{group_id}` style, as OpenAPI writes it too).
    pub path: &'static str,
    /// What a token needs; `None`: open (health, readiness, metrics, the document).
    pub access: Option<Access>,
    /// OpenAPI operation.
    pub doc: Op,
    handler: MethodRouter<AppState>,
}

fn route<H, T>(verb: Verb, path: &'static str, access: Option<Access>, doc: Op, handler: H) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    Route {
        verb,
        path,
        access,
        doc,
        handler: on(verb.filter(), handler),
    }
}

const fn op(
    id: &'static str,
    summary: &'static str,
    body: Option<SchemaFn>,
    ok: u16,
    ok_schema: Option<SchemaFn>,
) -> Op {
    Op {
        id,
        summary,
        description: "",
        query: &[],
        body,
        ok,
        ok_schema,
    }
}

const EPISODES: &str = "/v1/groups/{group_id}/episodes";
const EPISODE: &str = "/v1/groups/{group_id}/episodes/{uuid}";

/// Every route of the API.
pub fn routes() -> Vec<Route> {
    use Access::{Read, Write};
    use Verb::{Delete, Get, Post};
    vec![
        route(
            Post,
            EPISODES,
            Some(Write),
            Op {
                description: "One episode object, or {\"episodes\": [...]} (at most 1000). \
                    Appended durably to the episodes log before the 202; a batch with one bad \
                    item is rejected whole. Poll GET .../episodes/{uuid} for the outcome.",
                ..op(
                    "postEpisodes",
                    "Submit episodes",
                    Some(schema::<decode::EpisodeSubmission>()),
                    202,
                    Some(schema::<bodies::Acceptance>()),
                )
            },
            handlers::post_episodes,
        ),
        route(
            Get,
            EPISODES,
            Some(Read),
            Op {
                query: openapi::LIST_QUERY,
                ..op(
                    "listEpisodes",
                    "List projected episodes, newest first",
                    None,
                    200,
                    Some(schema::<bodies::EpisodeList>()),
                )
            },
            handlers::list_episodes,
        ),
        route(
            Get,
            EPISODE,
            Some(Read),
            Op {
                description: "pending (with its log position), processed (with counts) or \
                    dead_lettered (with the reason). Works for retractions too.",
                ..op(
                    "getEpisodeStatus",
                    "Status of a submitted episode or command",
                    None,
                    200,
                    Some(schema::<bodies::EpisodeStatusBody>()),
                )
            },
            handlers::get_episode,
        ),
        route(
            Delete,
            EPISODE,
            Some(Write),
            Op {
                description: "Appends a retraction. Once applied, facts supported only by this \
                    episode disappear from the projection; others lose it from their provenance. \
                    Retrying is safe (the retraction id is derived from the episode id).",
                ..op(
                    "retractEpisode",
                    "Retract an episode",
                    None,
                    202,
                    Some(schema::<bodies::Retraction>()),
                )
            },
            handlers::delete_episode,
        ),
        route(
            Post,
            "/v1/groups/{group_id}/search",
            Some(Read),
            op(
                "search",
                "Hybrid search over facts, entities, episodes and communities",
                Some(schema::<decode::SearchBody>()),
                200,
                Some(schema::<chronicle_query::SearchResults>()),
            ),
            handlers::search,
        ),
        route(
            Post,
            "/v1/groups/{group_id}/context",
            Some(Read),
            op(
                "getContext",
                "A ready-to-paste memory block: facts with validity windows and the turns \
                    that support them, within a character budget",
                Some(schema::<decode::ContextBody>()),
                200,
                Some(schema::<chronicle_query::MemoryContext>()),
            ),
            handlers::context,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/stats",
            Some(Read),
            op(
                "getStats",
                "The group's sizes and what deciding its commands cost (its running totals: \
                    one row, whatever its history)",
                None,
                200,
                Some(schema::<chronicle_store::Totals>()),
            ),
            handlers::stats,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/status",
            Some(Read),
            Op {
                description: "The group's recent commands pending, processed and \
                    dead-lettered, and the lag of the processor and the projector on its \
                    partitions. Served where the processor runs in this process (`serve`); \
                    503 on a distributed gateway.",
                ..op(
                    "getGroupStatus",
                    "The group's processing status",
                    None,
                    200,
                    Some(schema::<crate::app::GroupStatus>()),
                )
            },
            handlers::group_status,
        ),
        route(
            Get,
            "/v1/stats",
            None,
            Op {
                description: "Only on a server without tokens (loopback only): with tokens, \
                    totals over every group would tell a tenant about the others; ask \
                    per group.",
                ..op(
                    "getAllStats",
                    "Totals over every group",
                    None,
                    200,
                    Some(schema::<chronicle_store::Totals>()),
                )
            },
            handlers::all_stats,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/entities/{uuid}",
            Some(Read),
            op(
                "getEntity",
                "One entity",
                None,
                200,
                Some(schema::<chronicle_model::Entity>()),
            ),
            handlers::get_entity,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/entities/{uuid}/timeline",
            Some(Read),
            Op {
                description: "The entity by uuid, or by its exact name (normalized: case \
                    and spacing aside; the oldest of equal names).",
                ..op(
                    "getTimeline",
                    "Every fact about an entity over time, history included",
                    None,
                    200,
                    Some(schema::<bodies::Timeline>()),
                )
            },
            handlers::timeline,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/facts",
            Some(Read),
            Op {
                query: openapi::FACTS_QUERY,
                ..op(
                    "listFacts",
                    "Facts, ordered by valid time, filtered by time and entity",
                    None,
                    200,
                    Some(schema::<bodies::FactList>()),
                )
            },
            handlers::facts,
        ),
        route(
            Post,
            "/v1/groups/{group_id}/triplets",
            Some(Write),
            Op {
                description: "A fact triple (or {\"triplets\": [...]}) becomes a fact_triple \
                    episode: no model call, processed like any episode.",
                ..op(
                    "postTriplets",
                    "Submit fact triples",
                    Some(schema::<decode::TripletSubmission>()),
                    202,
                    Some(schema::<bodies::Acceptance>()),
                )
            },
            handlers::post_triplets,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/episodes/{uuid}/graph",
            Some(Read),
            Op {
                description: "graphiti's get_nodes_and_edges_by_episode: the entities the \
                    episode mentions and the facts it created, restated or invalidated \
                    (whatever their validity now). 404 until the episode is processed.",
                ..op(
                    "getEpisodeGraph",
                    "What an episode produced",
                    None,
                    200,
                    Some(schema::<chronicle_query::EpisodeProducts>()),
                )
            },
            graph::episode_graph,
        ),
        route(
            Post,
            "/v1/groups/{group_id}/communities/build",
            Some(Write),
            Op {
                description: "Appends a command that recomputes the group's communities \
                    (label propagation over the current facts): new clusters are built, \
                    changed ones re-summarized, vanished ones dissolved. No body. Poll \
                    GET .../episodes/{uuid} for the outcome, then list the communities.",
                ..op(
                    "buildCommunities",
                    "Rebuild the group's communities",
                    None,
                    202,
                    Some(schema::<bodies::Accepted>()),
                )
            },
            graph::build_communities,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/communities",
            Some(Read),
            op(
                "listCommunities",
                "The group's communities, largest first",
                None,
                200,
                Some(schema::<bodies::CommunityList>()),
            ),
            graph::list_communities,
        ),
        route(
            Get,
            "/v1/groups/{group_id}/sagas/{name}",
            Some(Read),
            op(
                "getSaga",
                "A saga: its summary, watermark and episodes",
                None,
                200,
                Some(schema::<chronicle_query::SagaView>()),
            ),
            graph::get_saga,
        ),
        route(
            Post,
            "/v1/groups/{group_id}/sagas/{name}/summarize",
            Some(Write),
            Op {
                description: "Appends a command that folds the saga's episodes newer than \
                    its watermark (last_summarized_episode_valid_at) into its summary and \
                    advances the watermark. No body. Poll GET .../episodes/{uuid} for the \
                    outcome.",
                ..op(
                    "summarizeSaga",
                    "Summarize a saga's new episodes",
                    None,
                    202,
                    Some(schema::<bodies::Accepted>()),
                )
            },
            graph::summarize_saga,
        ),
        route(
            Get,
            "/healthz",
            None,
            op(
                "healthz",
                "The process is up",
                None,
                200,
                Some(schema::<bodies::Health>()),
            ),
            handlers::healthz,
        ),
        route(
            Get,
            "/readyz",
            None,
            Op {
                description: "Ready when the log and the store answer, the processor has \
                    recovered and the projector is within --ready-max-lag records of the log end.",
                ..op(
                    "readyz",
                    "Ready to serve",
                    None,
                    200,
                    Some(schema::<handlers::Readiness>()),
                )
            },
            handlers::readyz,
        ),
        route(
            Get,
            "/metrics",
            None,
            op("metrics", "Prometheus metrics", None, 200, None),
            handlers::metrics,
        ),
        route(
            Get,
            "/openapi.json",
            None,
            op(
                "openapi",
                "This document",
                None,
                200,
                Some(schema::<serde_json::Map<String, serde_json::Value>>()),
            ),
            handlers::openapi,
        ),
    ]
}

#[derive(Clone)]
struct Guard {
    state: AppState,
    access: Access,
}

/// Authenticates, validates the path's group and checks the token's scope,
/// in that order, before the handler (and its body) runs.
async fn authorize(State(guard): State<Guard>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let grant = match &guard.state.options.auth {
        Some(auth) => {
            let header = parts
                .headers
                .get(header::AUTHORIZATION)
                .map(|v| v.to_str().unwrap_or(""));
            match auth.grant(header) {
                Ok(g) => {
                    if let Err(wait) = g.admit() {
                        return error::rate_limited(wait);
                    }
                    Some(g)
                }
                Err(e) => return ApiError::unauthorized(e.to_string()).into_response(),
            }
        }
        None => None,
    };
    let params = match RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(p) => p,
        Err(e) => {
            // "Invalid UTF-8 in `uuid`": name the segment when axum does.
            let text = e.body_text();
            let field = text.split('`').nth(1).unwrap_or("path").to_owned();
            return ApiError::bad_request(field, text).into_response();
        }
    };
    let Some((_, raw)) = params.iter().find(|(k, _)| *k == "group_id") else {
        return ApiError::broken("routing", "a group route without {group_id}").into_response();
    };
    let group = match decode::group(raw) {
        Ok(g) => g,
        Err(e) => return e.into_response(),
    };
    if let Some(grant) = grant
        && let Err(denied) = Auth::check(grant, &group, guard.access)
    {
        tracing::debug!(token = %grant.name, group = %group, access = guard.access.as_str(), %denied, "denied");
        let message = match denied {
            Denied::ReadOnly => denied.to_string(),
            _ => Denied::OutOfScope.to_string(),
        };
        return ApiError::forbidden(message).into_response();
    }
    let mut req = Request::from_parts(parts, body);
    req.extensions_mut().insert(Scoped(group));
    next.run(req).await
}

/// Counts and times every request by method, route template and status.
async fn track(req: Request, next: Next) -> Response {
    // Both parts bounded: a template of the table, a standard method.
    let route = match req.extensions().get::<MatchedPath>() {
        Some(m) => {
            let method = match *req.method() {
                Method::GET
                | Method::POST
                | Method::PUT
                | Method::DELETE
                | Method::PATCH
                | Method::HEAD
                | Method::OPTIONS => req.method().as_str(),
                _ => "OTHER",
            };
            format!("{method} {}", m.as_str())
        }
        None => "unmatched".to_owned(),
    };
    let started = Instant::now();
    let response = next.run(req).await;
    METRICS
        .http_requests
        .with_label_values(&[&route, response.status().as_str()])
        .inc();
    METRICS
        .http_duration
        .with_label_values(&[&route])
        .observe(started.elapsed().as_secs_f64());
    response
}

async fn not_found() -> ApiError {
    ApiError {
        status: StatusCode::NOT_FOUND,
        error: "no such route; see /openapi.json".into(),
        field: Some("path".into()),
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        error: "method not allowed on this route; see /openapi.json".into(),
        field: Some("method".into()),
    }
}

/// The API over a node (whose processor and projector run elsewhere in
/// this process, see [`Server`]).
pub fn router(node: Arc<Node>, options: HttpOptions) -> Router {
    let table = routes();
    let openapi = Bytes::from(openapi::document(&table).to_string());
    let state = AppState(Arc::new(Shared {
        gateway: Gateway::new(node.clone()),
        node,
        options: options.clone(),
        openapi,
    }));
    let mut app = Router::new();
    for r in table {
        let handler = match r.access {
            Some(access) => r.handler.route_layer(from_fn_with_state(
                Guard {
                    state: state.clone(),
                    access,
                },
                authorize,
            )),
            None => r.handler,
        };
        app = app.route(r.path, handler);
    }
    // MCP needs every role at hand (its writes are answered with the
    // processor's statuses, its reads from the projection): only the
    // embedded server has them, not a distributed gateway or projector.
    if options.processor_in_process {
        let mcp = crate::mcp::http::McpHttpOptions {
            auth: options.auth.clone(),
            max_body_bytes: options.max_body_bytes,
            body_timeout: options.body_timeout,
        };
        app = app.merge(crate::mcp::http::routes(state.node.clone(), &mcp));
    }
    let app = app
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(options.max_body_bytes));
    let app = if options.auth.is_none() {
        app.layer(from_fn(origin::loopback_only))
    } else {
        app
    };
    app.layer(from_fn(track)).with_state(state)
}

/// Health and metrics only (`GET /healthz`, `GET /metrics`), for role
/// processes that serve no API (distributed processor and projector), so
/// every role can be scraped.
pub fn ops_router() -> Router {
    Router::new()
        .route("/healthz", axum::routing::get(handlers::healthz))
        .route("/metrics", axum::routing::get(handlers::metrics))
        .fallback(not_found)
        .layer(from_fn(track))
}

/// Serves [`ops_router`] on `listen` until `shutdown` resolves; returns the
/// bound address and the server task.
pub async fn serve_ops(
    listen: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen} for metrics; pick another address"))?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(listen::serve(
        listener,
        ops_router(),
        listen::ConnectionLimits::default(),
        shutdown,
    ));
    Ok((addr, task))
}

/// How often readiness is recomputed for `chronicle_ready`.
const READINESS_INTERVAL: Duration = Duration::from_secs(5);

/// An embedded server: the processor, the projector and the API in this
/// process, listening on one address.
pub struct Server {
    addr: SocketAddr,
    node: Arc<Node>,
    shutdown: watch::Sender<bool>,
    http: JoinHandle<std::io::Result<()>>,
    running: Running,
}

impl Server {
    /// Binds `listen` (port 0 picks one), starts the roles and serves.
    pub async fn start(
        node: Arc<Node>,
        options: HttpOptions,
        listen: SocketAddr,
    ) -> anyhow::Result<Server> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {listen}; is another process using it? pick another --listen"
                )
            })?;
        let addr = listener.local_addr()?;
        let running = runtime::start(&node, ProcessorOptions::default());
        let readiness = (options.ready_max_lag, options.processor_in_process);
        let limits = options.connections;
        let app = router(node.clone(), options);
        let (shutdown, rx) = watch::channel(false);
        let mut stop = rx.clone();
        let http = tokio::spawn(listen::serve(listener, app, limits, async move {
            let _ = stop.wait_for(|v| *v).await;
        }));
        let mut reachable = addr;
        if addr.ip().is_unspecified() {
            reachable.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        if let Err(e) = crate::served::announce(&node.settings.data, &format!("http://{reachable}"))
        {
            tracing::warn!(error = %e, "cannot announce the server in its data directory; CLI reads will not find it");
        }
        let probe = node.clone();
        let mut stop = rx;
        tokio::spawn(async move {
            loop {
                handlers::readiness(&probe, readiness.0, readiness.1).await;
                tokio::select! {
                    _ = tokio::time::sleep(READINESS_INTERVAL) => {}
                    _ = stop.wait_for(|v| *v) => break,
                }
            }
        });
        Ok(Server {
            addr,
            node,
            shutdown,
            http,
            running,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The node it serves.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Waits until every command appended so far is decided and projected.
    pub async fn wait_caught_up(&mut self) -> anyhow::Result<()> {
        self.running.wait_caught_up(&self.node, |_, _| {}).await
    }

    /// Serves until `signal` resolves or a role stops on its own (then
    /// fails with its error), and shuts down.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> anyhow::Result<()> {
        let ended = self
            .running
            .supervise(signal, || self.http.is_finished())
            .await;
        let result = self.stop().await;
        match ended {
            Ok(()) => result,
            Err(_) => RoleStopped::outcome(result, "server"),
        }
    }

    /// Stops accepting requests, lets requests in flight finish, then stops
    /// the processor and projector.
    pub async fn stop(self) -> anyhow::Result<()> {
        crate::served::withdraw(&self.node.settings.data);
        let _ = self.shutdown.send(true);
        let served = tokio::time::timeout(Duration::from_secs(10), self.http).await;
        let roles = self.running.stop().await;
        match served {
            Ok(joined) => joined.context("the HTTP server panicked")??,
            Err(_) => tracing::warn!("requests still open after 10 s; closed"),
        }
        roles
    }
}

/// `chronicle serve` arguments.
#[derive(Clone, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Tokens file.
    pub auth: Option<PathBuf>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Readiness lag bound.
    pub ready_max_lag: u64,
    /// Connection limits.
    pub connections: listen::ConnectionLimits,
    /// Body read deadline.
    pub body_timeout: Duration,
}

/// Refuses to serve without tokens anywhere but loopback.
pub fn check_listen(listen: SocketAddr, auth: bool) -> anyhow::Result<()> {
    if !auth && !listen.ip().is_loopback() {
        anyhow::bail!(
            "refusing to listen on {listen} without --auth: anyone who can reach it could read \
             and write every group. Pass --auth FILE (a TOML file of [[tokens]] with secret, \
             groups and access), or listen on loopback (--listen 127.0.0.1:{})",
            listen.port()
        );
    }
    Ok(())
}

/// `chronicle serve`: every role in this process behind the HTTP API,
/// until Ctrl-C or SIGTERM.
pub async fn serve(settings: Settings, args: ServeArgs) -> anyhow::Result<()> {
    check_listen(args.listen, args.auth.is_some())?;
    let auth = args.auth.as_deref().map(Auth::load).transpose()?;
    let options = HttpOptions {
        auth,
        max_body_bytes: args.max_body_bytes,
        ready_max_lag: args.ready_max_lag,
        processor_in_process: true,
        connections: args.connections,
        body_timeout: args.body_timeout,
    };
    let authenticated = options.auth.is_some();
    let node = Node::open(settings).await?;
    let server = Server::start(node, options, args.listen).await?;
    if authenticated {
        eprintln!(
            "chronicle serving {} (bearer tokens from {}); API description at {}/openapi.json",
            server.url(),
            args.auth
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            server.url()
        );
    } else {
        eprintln!(
            "chronicle serving {} UNAUTHENTICATED (loopback only; pass --auth FILE to require \
             tokens); API description at {}/openapi.json",
            server.url(),
            server.url()
        );
    }
    tracing::info!(addr = %server.addr(), authenticated, "serving");
    server.run_until(crate::runtime::terminated()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_without_auth() {
        assert!(check_listen("127.0.0.1:8080".parse().unwrap(), false).is_ok());
        assert!(check_listen("[::1]:8080".parse().unwrap(), false).is_ok());
        let e = check_listen("0.0.0.0:8080".parse().unwrap(), false).unwrap_err();
        assert!(e.to_string().contains("--auth"), "{e}");
        assert!(check_listen("0.0.0.0:8080".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn every_group_route_is_guarded_and_documented() {
        let table = routes();
        let doc = openapi::document(&table);
        for r in &table {
            assert_eq!(
                r.path.starts_with("/v1/groups/{group_id}/"),
                r.access.is_some(),
                "{} {}",
                r.verb.as_lower(),
                r.path
            );
            assert!(
                doc["paths"][r.path][r.verb.as_lower()].is_object(),
                "{} {} missing from the document",
                r.verb.as_lower(),
                r.path
            );
        }
    }
}
