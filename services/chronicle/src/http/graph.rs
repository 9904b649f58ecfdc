//! Routes over the graph's aggregates and provenance: build and list
//! communities, summarize and read a saga, and what an episode produced.
//! Like every group route, they run behind the scope check and see only the
//! authorized group.

use axum::Extension;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chronicle_model::Command;
use uuid::Uuid;

use super::bodies::{Accepted, CommunityList};
use super::{AppState, Scoped};
use crate::app::error::ApiError;
use crate::app::{self, decode};
use chronicle_query::Query;

/// Appends one command; 202 with its id and log position (poll
/// `GET /episodes/{uuid}` for the outcome).
async fn accept(state: &AppState, command: Command) -> Result<Response, ApiError> {
    let receipts = state
        .gateway
        .submit(vec![command])
        .await
        .map_err(|e| ApiError::unavailable("the episodes log", e.as_ref()))?;
    let r = receipts
        .first()
        .ok_or_else(|| ApiError::broken("appending the command", "no receipt"))?;
    Ok((StatusCode::ACCEPTED, Json(Accepted::from(r))).into_response())
}

/// `POST /v1/groups/{group_id}/communities/build`: appends a
/// `BuildCommunities` command.
pub async fn build_communities(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    accept(
        &state,
        Command::BuildCommunities {
            uuid: Uuid::new_v4(),
            group_id: group,
        },
    )
    .await
}

/// `GET /v1/groups/{group_id}/communities`.
pub async fn list_communities(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let communities = Query::new(state.node.sources()?)
        .communities(&group)
        .await
        .map_err(|e| ApiError::internal("listing communities", &e))?;
    Ok(Json(CommunityList { communities }).into_response())
}

/// `GET /v1/groups/{group_id}/sagas/{name}`.
pub async fn get_saga(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let name = decode::saga_name("name", &name)?;
    let saga = Query::new(state.node.sources()?)
        .saga(&group, name)
        .await
        .map_err(|e| ApiError::internal("reading the saga", &e))?
        .ok_or_else(|| app::no_saga("name"))?;
    Ok(Json(saga).into_response())
}

/// `POST /v1/groups/{group_id}/sagas/{name}/summarize`: appends a
/// `SummarizeSaga` command for a saga the group has.
pub async fn summarize_saga(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let command = app::summarize_saga(&state.node, &group, "name", &name).await?;
    accept(&state, command).await
}

/// `GET /v1/groups/{group_id}/episodes/{uuid}/graph`: the entities the
/// episode mentions and the facts it created, restated or invalidated.
pub async fn episode_graph(
    State(state): State<AppState>,
    Extension(Scoped(group)): Extension<Scoped>,
    Path((_, uuid)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    decode::no_params(raw.as_deref())?;
    let uuid = decode::path_uuid("uuid", &uuid)?;
    let products = Query::new(state.node.sources()?)
        .produced_by(&group, &[uuid])
        .await
        .map_err(|e| ApiError::internal("reading the episode's graph", &e))?;
    if products.episodes.is_empty() {
        return Err(ApiError::not_found(
            "uuid",
            "no processed episode with this uuid in this group",
        ));
    }
    Ok(Json(products).into_response())
}
