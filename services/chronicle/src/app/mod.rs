//! The application layer: what a caller may ask of chronicle, whatever the
//! transport. HTTP ([`crate::http`]), MCP ([`crate::mcp`]) and the CLI
//! decode their requests into these values, call these functions and
//! encode the answers; none of them decides on its own what a request
//! means.
//!
//! * [`auth`]: tokens, the groups they cover, their access and rate.
//! * [`decode`]: validation of every request value (episodes, triplets,
//!   searches, listings), with the same messages and field paths on every
//!   transport.
//! * [`error`]: the one typed error a use case returns (a status, a
//!   message, the field to blame).
//! * The use cases shared by more than one transport, below.
//!
//! Still to come here (issue 14): every other use case, so that the
//! transports hold no logic of their own.

pub mod auth;
pub mod decode;
pub mod error;

use chronicle_model::{Command, Entity, GroupId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use self::decode::EntityRef;
use self::error::ApiError;
use crate::gateway::{Gateway, Receipt, retraction_id};
use crate::node::Node;
use crate::status::CommandStatus;
use chronicle_query::{Query, QueryError};

/// What became of a command of `group`: the status board knows the recent
/// ones; an episode decided before its window is processed if it is in the
/// graph. `None`: no such command in this group (whether or not another
/// group has one).
pub async fn command_status(
    node: &Node,
    group: &GroupId,
    uuid: Uuid,
) -> Result<Option<CommandStatus>, ApiError> {
    if let Some(status) = node.status.get(group, uuid) {
        return Ok(Some(status));
    }
    let stored = node
        .store()?
        .episode(group, uuid)
        .await
        .map_err(|e| ApiError::internal("looking the episode up", &e))?;
    Ok(stored.map(|_| CommandStatus::Processed { counts: None }))
}

/// Resolves an entity reference in the group; `None` when it does not exist.
pub async fn find_entity(
    node: &Node,
    group: &GroupId,
    r: &EntityRef,
) -> Result<Option<Entity>, ApiError> {
    match r {
        EntityRef::Uuid(u) => node
            .store()?
            .entity(group, *u)
            .await
            .map_err(|e| ApiError::internal("looking the entity up", &e)),
        EntityRef::Name(name) => {
            match Query::new(node.sources()?).entity_named(group, name).await {
                Ok(e) => Ok(Some(e)),
                Err(QueryError::UnknownEntity(_)) => Ok(None),
                Err(e) => Err(ApiError::internal("looking the entity up", &e)),
            }
        }
    }
}

/// Retracts an episode of the group: 404 unless the group has it (pending,
/// decided or stored), otherwise one retraction appended under an id
/// derived from the episode, so a retry is decided once.
pub async fn retract(
    node: &Node,
    gateway: &Gateway,
    group: &GroupId,
    episode_uuid: Uuid,
) -> Result<Receipt, ApiError> {
    if command_status(node, group, episode_uuid).await?.is_none() {
        return Err(ApiError::not_found(
            "uuid",
            "no episode with this uuid in this group",
        ));
    }
    let command = Command::RetractEpisode {
        uuid: retraction_id(group, episode_uuid),
        group_id: group.clone(),
        episode_uuid,
    };
    submit_one(gateway, command).await
}

/// The command that folds a saga's newer episodes into its summary: 400
/// for a bad name (blamed on `field`), 404 when the group has no such saga
/// (a typo must not become a command that decides nothing).
pub async fn summarize_saga(
    node: &Node,
    group: &GroupId,
    field: &str,
    name: &str,
) -> Result<Command, ApiError> {
    let name = decode::saga_name(field, name)?;
    let saga = Query::new(node.sources()?)
        .saga(group, name)
        .await
        .map_err(|e| ApiError::internal("reading the saga", &e))?;
    if saga.is_none() {
        return Err(no_saga(field));
    }
    Ok(Command::SummarizeSaga {
        uuid: Uuid::new_v4(),
        group_id: group.clone(),
        saga: name.to_owned(),
    })
}

/// 404 for a saga the group does not have.
pub fn no_saga(field: &str) -> ApiError {
    ApiError::not_found(
        field,
        "no saga of this name in this group; a saga is created by the first episode that names it",
    )
}

/// Appends one command; a failed append is a 503, never a success.
pub async fn submit_one(gateway: &Gateway, command: Command) -> Result<Receipt, ApiError> {
    gateway
        .submit(vec![command])
        .await
        .map_err(|e| ApiError::unavailable("the episodes log", e.as_ref()))?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::broken("appending the command", "no receipt"))
}

/// The running totals of one group or of every group (one row a group).
pub async fn totals(
    node: &Node,
    group: Option<&GroupId>,
) -> Result<chronicle_store::Totals, ApiError> {
    (node.store()?.totals(group).await).map_err(|e| ApiError::internal("reading the totals", &e))
}

/// A group's processing status, as a running server knows it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct GroupStatus {
    /// The group.
    pub group_id: GroupId,
    /// The group's recent commands accepted and not yet decided.
    pub pending: usize,
    /// The group's recent commands decided.
    pub processed: usize,
    /// The group's recent commands dead-lettered.
    pub dead_lettered: usize,
    /// Episodes-log records of the group's partition not yet decided
    /// (every group on that partition counts).
    pub processor_lag: u64,
    /// Graph-event records of the group's partition not yet projected.
    pub projector_lag: u64,
}

/// The group's status from the running processor's board and positions:
/// no log scan, whatever the history.
pub async fn group_status(node: &Node, group: &GroupId) -> Result<GroupStatus, ApiError> {
    let (pending, processed, dead_lettered) = node.status.summary(Some(group));
    let (p, end) = partition_end(node, &node.topics.episodes, group).await?;
    let decided = node.progress.decided.borrow().get(&p).copied().unwrap_or(0);
    Ok(GroupStatus {
        group_id: group.clone(),
        pending,
        processed,
        dead_lettered,
        processor_lag: end.saturating_sub(decided),
        projector_lag: projector_lag(node, group).await?,
    })
}

/// The group's partition of `topic` and its end offset.
async fn partition_end(node: &Node, topic: &str, group: &GroupId) -> Result<(u32, u64), ApiError> {
    let unavailable = |e| ApiError::unavailable("the log", &e);
    let count = node.log.partition_count(topic).await.map_err(unavailable)?;
    let p = chronicle_log::partition_for(group.as_str().as_bytes(), count.max(1));
    let end = node.log.end_offset(topic, p).await.map_err(unavailable)?;
    Ok((p, end))
}

/// Graph-event records of the group's partition not yet projected into
/// the store *and* the search indices. A decision is appended before its
/// command shows as processed, so a processed command is searchable once
/// this is zero (conservative: other groups' later records on the
/// partition count too). The position is the in-process projector's, which
/// it publishes after committing the indices; the store's own position can
/// run ahead of the indices, so it is not used. (MCP is only served where
/// the projector runs in-process.)
pub async fn projector_lag(node: &Node, group: &GroupId) -> Result<u64, ApiError> {
    let (p, end) = partition_end(node, &node.topics.graph_events, group).await?;
    let at = node
        .progress
        .projected
        .borrow()
        .get(&p)
        .copied()
        .unwrap_or(0);
    Ok(end.saturating_sub(at))
}
