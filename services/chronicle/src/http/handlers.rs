//! Route handlers. Each group route runs behind the scope check (see
//! [`super::authorize`]), which puts the validated [`Scoped`] group in the
//! request; handlers only read that group's data.

use std::time::Duration;

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Path, RawQuery, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chronicle_engine::search::SearchError;
use chronicle_metrics::METRICS;
use chronicle_model::{Command, Entity, GroupId};
use serde::Serialize;

use super::bodies::{
    Acceptance, Accepted, AcceptedBatch, EpisodeList, EpisodeStatusBody, FactList, Health,
    Retraction, Timeline,
};
use super::{AppState, Scoped};
use crate::app::decode::{self, EntityRef, Submissions};
use crate::app::error::ApiError;
use crate::app::{self, find_entity};
use crate::node::Node;
use chronicle_query::{Query, QueryError};

/// A JSON request body, read under the configured size limit (413 naming
/// `body`) and deadline (408); a non-empty body must say it is JSON (415),
/// so a cross-site `text/plain` form cannot pass for one.
pub struct Body(pub Bytes);

impl FromRequest<AppState> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let says_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_json);
        let deadline = state.options.body_timeout;
        let read = tokio::time::timeout(deadline, Bytes::from_request(req, state))
            .await
            .map_err(|_| ApiError::body_timeout(deadline))?;
        let bytes = read.map_err(|e: BytesRejection| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::body_too_large()
            } else {
                ApiError::bad_request("body", format!("could not read the body: {e}"))
            }
        })?;
        if !bytes.is_empty() && !says_json {
            return Err(ApiError {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                error: "send the body with `Content-Type: application/json`".into(),
                field: Some("content-type".into()),
            });
        }
        Ok(Body(bytes))
    }
}

/// `application/json`, with or without parameters such as a charset.
fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

async fn submit(state: &AppState, s: Submissions) -> Result<Response, ApiError> {
    let commands: Vec<Command> = s.episodes.into_iter().map(Command::AddEpisode).collect();
    let receipts = state
        .gateway
        .submit(commands)
        .await
        .map_err(|e| ApiError::unavailable("the episodes log", e.as_ref()))?;
    let body = if s.batch {
        Acceptance::Batch(AcceptedBatch {
            episodes: receipts.iter().map(Accepted::from).collect(),
        })
    } else {
        let first = receipts
            .first()
            .ok_or_else(|| ApiError::broken("appending the episode", "no receipt"))?;
        Acceptance::One(Accepted::from(first))
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// `POST /v1/groups/{group_id}/episodes`.
pub async fn post_episodes(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
    Body(body): Body,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let s = decode::episodes(&group, &body, chronicle_query::now())?;
    submit(&state, s).await
}

/// `POST /v1/groups/{group_id}/triplets`.
pub async fn post_triplets(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
    Body(body): Body,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let s = decode::triplets(&group, &body, chronicle_query::now())?;
    submit(&state, s).await
}

/// `GET /v1/groups/{group_id}/episodes/{uuid}`.
pub async fn get_episode(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, uuid)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let uuid = decode::path_uuid("uuid", &uuid)?;
    let status = app::command_status(&state.node, &group, uuid)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(
                "uuid",
                "no command with this uuid in this group; use the uuid the POST returned",
            )
        })?;
    Ok(Json(EpisodeStatusBody {
        uuid,
        group_id: group,
        status,
    })
    .into_response())
}

/// `GET /v1/groups/{group_id}/episodes?last_n=&before=`.
pub async fn list_episodes(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = decode::list_query(raw.as_deref())?;
    let episodes = Query::new(state.node.sources()?)
        .recent_episodes(&group, q.before, q.last_n)
        .await
        .map_err(|e| ApiError::internal("listing episodes", &e))?;
    Ok(Json(EpisodeList { episodes }).into_response())
}

/// `DELETE /v1/groups/{group_id}/episodes/{uuid}`: appends a retraction.
pub async fn delete_episode(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, uuid)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let episode_uuid = decode::path_uuid("uuid", &uuid)?;
    let receipt = &app::retract(&state.node, &state.gateway, &group, episode_uuid).await?;
    let body = Retraction {
        accepted: Accepted::from(receipt),
        episode_uuid,
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// An entity without its embedding (large, and of no use to callers).
fn public(mut e: Entity) -> Entity {
    e.name_embedding = None;
    e
}

/// `POST /v1/groups/{group_id}/context`: a ready-to-paste memory block.
pub async fn context(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
    Body(body): Body,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let spec = decode::context(&body)?;
    let block = Query::new(state.node.sources()?)
        .context(&group, &spec.query, spec.max_chars, spec.as_of)
        .await
        .map_err(|e| ApiError::from_query(e, "query"))?;
    Ok(Json(block).into_response())
}

/// `POST /v1/groups/{group_id}/search`.
pub async fn search(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
    Body(body): Body,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let spec = decode::search(&body)?;
    let mut request = spec.request;
    if let Some(c) = &spec.center {
        let e = find_entity(&state.node, &group, c)
            .await?
            .ok_or_else(|| ApiError::bad_request("center", "no such entity in this group"))?;
        request.center = Some(e.uuid);
    }
    let results = Query::new(state.node.sources()?)
        .search(&group, &request)
        .await
        .map_err(|e| {
            let field = match &e {
                QueryError::Invalid(SearchError::NoCenter) | QueryError::UnknownEntity(_) => {
                    "center"
                }
                _ if request.recipe == "custom" => "config",
                _ => "recipe",
            };
            ApiError::from_query(e, field)
        })?;
    Ok(Json(results).into_response())
}

/// The entity a `{uuid}` path segment names, or a 4xx naming the field.
async fn entity_at(state: &AppState, group: &GroupId, uuid: &str) -> Result<Entity, ApiError> {
    let uuid = decode::path_uuid("uuid", uuid)?;
    find_entity(&state.node, group, &EntityRef::Uuid(uuid))
        .await?
        .ok_or_else(|| ApiError::not_found("uuid", "no entity with this uuid in this group"))
}

/// `GET /v1/groups/{group_id}/entities/{uuid}`.
pub async fn get_entity(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, uuid)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let e = entity_at(&state, &group, &uuid).await?;
    Ok(Json(public(e)).into_response())
}

/// `GET /v1/groups/{group_id}/entities/{uuid}/timeline`: every fact about
/// the entity (by uuid, or by its exact name as `chronicle timeline` names
/// it) over time, history included.
pub async fn timeline(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, entity)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let r = decode::entity_ref("uuid", &entity)?;
    let e = find_entity(&state.node, &group, &r).await?.ok_or_else(|| {
        ApiError::not_found("uuid", "no entity with this uuid or name in this group")
    })?;
    let filters = chronicle_engine::search::SearchFilters {
        include_history: true,
        ..Default::default()
    };
    let (facts, _) = Query::new(state.node.sources()?)
        .facts_limited(&group, Some(e.uuid), &filters, usize::MAX)
        .await
        .map_err(|e| ApiError::from_query(e, "uuid"))?;
    Ok(Json(Timeline {
        entity: public(e),
        facts,
    })
    .into_response())
}

/// `GET /v1/groups/{group_id}/stats`: the group's running totals.
pub async fn stats(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    Ok(Json(app::totals(&state.node, Some(&group)).await?).into_response())
}

/// `GET /v1/groups/{group_id}/status`: the running processor's view.
pub async fn group_status(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    if !state.options.processor_in_process {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the processor runs elsewhere: ask its metrics, or `chronicle status` at rest",
        ));
    }
    Ok(Json(app::group_status(&state.node, &group).await?).into_response())
}

/// `GET /v1/stats`: totals over every group, on a server without tokens.
pub async fn all_stats(
    State(state): State<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    if state.options.auth.is_some() {
        return Err(ApiError::forbidden(
            "this server checks tokens: ask per group, GET /v1/groups/{group_id}/stats",
        ));
    }
    Ok(Json(app::totals(&state.node, None).await?).into_response())
}

/// `GET /v1/groups/{group_id}/facts?as_of=&known_at=&entity=&…`.
pub async fn facts(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = decode::facts_query(raw.as_deref())?;
    let entity = match &q.entity {
        Some(r) => Some(
            find_entity(&state.node, &group, r)
                .await?
                .ok_or_else(|| ApiError::not_found("entity", "no such entity in this group"))?
                .uuid,
        ),
        None => None,
    };
    let (facts, truncated) = Query::new(state.node.sources()?)
        .facts_limited(&group, entity, &q.filters, q.limit)
        .await
        .map_err(|e| ApiError::from_query(e, "entity"))?;
    Ok(Json(FactList { facts, truncated }).into_response())
}

/// `GET /healthz`: the process is up.
pub async fn healthz() -> Response {
    Json(Health { status: "ok" }).into_response()
}

/// What `/readyz` found.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Readiness {
    /// Whether every check passed.
    pub ready: bool,
    /// The log answered.
    pub log: bool,
    /// The store answered (absent on a role that opens no store).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// The processor has recovered its state (episode statuses are complete).
    pub processor: bool,
    /// Graph-event records not yet projected, when known.
    pub projector_lag: Option<u64>,
    /// The bound on `projector_lag` for readiness.
    pub max_projector_lag: u64,
}

/// How long one readiness probe of the log or the store may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Checks the log, the store, the processor's recovery (when it runs in
/// this process) and the projector's lag; records the outcome in
/// `chronicle_ready`. The projector's position is the newer of what this
/// process's projector reports and what the store has committed.
pub async fn readiness(node: &Node, max_lag: u64, processor_in_process: bool) -> Readiness {
    let events = tokio::time::timeout(PROBE_TIMEOUT, node.end_offsets(&node.topics.graph_events))
        .await
        .ok()
        .and_then(Result::ok);
    let episodes_partitions = tokio::time::timeout(
        PROBE_TIMEOUT,
        node.log.partition_count(&node.topics.episodes),
    )
    .await
    .ok()
    .and_then(Result::ok);
    let stored = match node.store() {
        Ok(store) => Some(
            tokio::time::timeout(PROBE_TIMEOUT, store.positions())
                .await
                .ok()
                .and_then(Result::ok),
        ),
        Err(_) => None,
    };
    let processor = !processor_in_process
        || episodes_partitions.is_some_and(|n| {
            let decided = node.progress.decided.borrow();
            (0..n).all(|p| decided.contains_key(&p))
        });
    let projector_lag = match (&events, &stored) {
        (Some(ends), Some(Some(stored))) => {
            let projected = node.progress.projected.borrow();
            Some(
                ends.iter()
                    .map(|(p, end)| {
                        let at = projected
                            .get(p)
                            .copied()
                            .unwrap_or(0)
                            .max(stored.get(p).copied().unwrap_or(0));
                        end.saturating_sub(at)
                    })
                    .sum::<u64>(),
            )
        }
        _ => None,
    };
    let log = events.is_some() && episodes_partitions.is_some();
    let store = stored.as_ref().map(Option::is_some);
    // A role without a store (a gateway) is ready when its log answers.
    let projected = match store {
        Some(answered) => answered && projector_lag.is_some_and(|l| l <= max_lag),
        None => true,
    };
    let ready = log && processor && projected;
    METRICS.ready.set(i64::from(ready));
    Readiness {
        ready,
        log,
        store,
        processor,
        projector_lag,
        max_projector_lag: max_lag,
    }
}

/// `GET /readyz`: 200 when ready, 503 with the failing checks otherwise.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let r = readiness(
        &state.node,
        state.options.ready_max_lag,
        state.options.processor_in_process,
    )
    .await;
    let status = if r.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(r)).into_response()
}

/// `GET /metrics`: the Prometheus text exposition.
pub async fn metrics() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        METRICS.render(),
    )
        .into_response()
}

/// `GET /openapi.json`.
pub async fn openapi(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response()
}
