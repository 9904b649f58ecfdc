//! Consumer-group membership: which partitions of a topic this process owns.
//!
//! The processor and the projector consume through `EventLog::read` at the
//! positions they keep themselves; membership only decides *which*
//! partitions they work on. When partitions are taken away (a rebalance),
//! the owner is told first and the partitions are released only after it
//! has finished or dropped its in-flight work — so one group is never worked
//! on by two processes at once, and its order holds across rebalances.

use std::time::Duration;

use async_trait::async_trait;

use crate::LogError;

/// How long a revocation waits for its owner before releasing anyway.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(60);

/// A change of ownership.
#[derive(Debug)]
pub enum Assignment {
    /// These partitions are now ours.
    Assigned(Vec<u32>),
    /// These partitions are being taken away: stop working on them, then
    /// call [`Release::done`] (dropping the `Release` does the same).
    Revoked {
        /// The partitions.
        partitions: Vec<u32>,
        /// Releases them.
        release: Release,
    },
}

/// Lets a revocation complete.
#[derive(Debug)]
pub struct Release(Option<std::sync::mpsc::Sender<()>>);

impl Release {
    /// A release that nobody waits for.
    pub fn none() -> Self {
        Release(None)
    }

    /// A release and the receiver its sender waits on.
    pub(crate) fn pair() -> (Self, std::sync::mpsc::Receiver<()>) {
        let (tx, rx) = std::sync::mpsc::channel();
        (Release(Some(tx)), rx)
    }

    /// The partitions may go now.
    pub fn done(mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A membership in a consumer group.
#[async_trait]
pub trait Membership: Send {
    /// The next ownership change; waits until there is one.
    async fn next(&mut self) -> Result<Assignment, LogError>;
}

/// The only member: owns every partition, forever.
pub(crate) struct SoleMember {
    pub(crate) partitions: Option<Vec<u32>>,
}

#[async_trait]
impl Membership for SoleMember {
    async fn next(&mut self) -> Result<Assignment, LogError> {
        match self.partitions.take() {
            Some(ps) => Ok(Assignment::Assigned(ps)),
            None => std::future::pending().await,
        }
    }
}
