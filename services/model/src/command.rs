//! Commands: the records of the episodes log, decided by the processor.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{GroupId, NewEpisode};

/// One record of the episodes (commands) log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// Add an episode to the graph.
    AddEpisode(NewEpisode),
    /// Withdraw an episode.
    RetractEpisode {
        /// The command's own id.
        uuid: Uuid,
        /// The tenant.
        group_id: GroupId,
        /// The episode to withdraw.
        episode_uuid: Uuid,
    },
    /// Recompute the group's communities.
    BuildCommunities {
        /// The command's own id.
        uuid: Uuid,
        /// The tenant.
        group_id: GroupId,
    },
    /// Fold a saga's new episodes into its summary.
    SummarizeSaga {
        /// The command's own id.
        uuid: Uuid,
        /// The tenant.
        group_id: GroupId,
        /// The saga's name.
        saga: String,
    },
}

impl Command {
    /// The command's id (the episode uuid for episodes).
    pub fn uuid(&self) -> Uuid {
        match self {
            Command::AddEpisode(e) => e.uuid,
            Command::RetractEpisode { uuid, .. }
            | Command::BuildCommunities { uuid, .. }
            | Command::SummarizeSaga { uuid, .. } => *uuid,
        }
    }

    /// The tenant, which is also the log key.
    pub fn group_id(&self) -> &GroupId {
        match self {
            Command::AddEpisode(e) => &e.group_id,
            Command::RetractEpisode { group_id, .. }
            | Command::BuildCommunities { group_id, .. }
            | Command::SummarizeSaga { group_id, .. } => group_id,
        }
    }

    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Command::AddEpisode(_) => "add_episode",
            Command::RetractEpisode { .. } => "retract_episode",
            Command::BuildCommunities { .. } => "build_communities",
            Command::SummarizeSaga { .. } => "summarize_saga",
        }
    }
}
