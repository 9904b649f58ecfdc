//! The JSON bodies of the API's replies, as types: handlers build them and
//! the OpenAPI document is generated from them (with the request types of
//! [`crate::app::decode`]), so the document cannot drift from the wire.

use chronicle_model::{Entity, Episode, GroupId, LogPosition};
use chronicle_query::{CommunityView, ResultItem};
use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use crate::gateway::Receipt;
use crate::status::CommandStatus;

/// Where an accepted command sits: it is on the log, to be decided.
#[derive(Serialize, JsonSchema)]
pub struct Accepted {
    /// The command's id (poll `GET /episodes/{uuid}` with it).
    pub uuid: Uuid,
    /// Always `pending` at acceptance.
    #[schemars(extend("const" = "pending"))]
    pub status: &'static str,
    /// Its place on the episodes log.
    pub position: LogPosition,
}

impl From<&Receipt> for Accepted {
    fn from(r: &Receipt) -> Self {
        Accepted {
            uuid: r.uuid,
            status: "pending",
            position: LogPosition {
                partition: r.partition,
                offset: r.offset,
            },
        }
    }
}

/// The receipts of a batch, in body order.
#[derive(Serialize, JsonSchema)]
pub struct AcceptedBatch {
    /// One receipt per item.
    pub episodes: Vec<Accepted>,
}

/// The reply to a submission: one receipt, or a batch's.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Acceptance {
    /// The body was one item.
    One(Accepted),
    /// The body was a batch.
    Batch(AcceptedBatch),
}

/// An accepted retraction.
#[derive(Serialize, JsonSchema)]
pub struct Retraction {
    /// The retraction command (track it with `GET /episodes/{uuid}`).
    #[serde(flatten)]
    pub accepted: Accepted,
    /// The episode it retracts.
    pub episode_uuid: Uuid,
}

/// What happened to a submitted command.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "EpisodeStatus")]
pub struct EpisodeStatusBody {
    /// The command's id.
    pub uuid: Uuid,
    /// Its group.
    pub group_id: GroupId,
    /// pending, processed or dead_lettered, with what goes with each.
    #[serde(flatten)]
    pub status: CommandStatus,
}

/// Projected episodes, newest first.
#[derive(Serialize, JsonSchema)]
pub struct EpisodeList {
    /// The episodes.
    pub episodes: Vec<Episode>,
}

/// Every fact about an entity over time.
#[derive(Serialize, JsonSchema)]
pub struct Timeline {
    /// The entity.
    pub entity: Entity,
    /// Its facts, history included, by valid time.
    pub facts: Vec<ResultItem>,
}

/// A page of facts.
#[derive(Serialize, JsonSchema)]
pub struct FactList {
    /// The facts, by valid time then creation.
    pub facts: Vec<ResultItem>,
    /// Whether more matched than `limit`.
    pub truncated: bool,
}

/// A group's communities.
#[derive(Serialize, JsonSchema)]
pub struct CommunityList {
    /// The communities.
    pub communities: Vec<CommunityView>,
}

/// The process is up.
#[derive(Serialize, JsonSchema)]
pub struct Health {
    /// Always `ok`.
    #[schemars(extend("const" = "ok"))]
    pub status: &'static str,
}
