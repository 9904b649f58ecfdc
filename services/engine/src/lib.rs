//! chronicle's pure core.
//!
//! * [`evolve`] — the fold `(state, event) -> state`, shared by every projection;
//! * [`state`] — the records a fold works on, and one group's in-memory state;
//! * [`ports`] — the model and embedding traits adapters implement;
//! * [`ontology`] — entity and edge types and their rules;
//! * [`communities`] — label-propagation communities (builds and incremental
//!   maintenance); saga summaries live next to them (`sagas`).
//!
//! Nothing here performs I/O or knows an adapter.

#![warn(missing_docs)]

pub mod communities;
pub mod decide;
pub mod evolve;
pub mod fuzzy;
pub mod offline;
pub mod ontology;
pub mod ports;
mod sagas;
pub mod search;
pub mod state;
pub mod temporal;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use communities::CommunityConfig;
pub use decide::{Accepted, Bulk, DecideConfig, DecideError, Decider};
pub use evolve::{Applied, apply, apply_batch};
pub use offline::OfflineExtractor;
pub use state::{GraphRecords, GroupSnapshot, GroupState};

#[cfg(test)]
mod decide_tests;
#[cfg(test)]
mod fold_tests;
