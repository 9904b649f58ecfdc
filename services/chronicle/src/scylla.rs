//! Distributed mode's store: ScyllaDB.

use std::sync::Arc;

use chronicle_store::GraphStore;

/// Connects to the ScyllaDB cluster.
pub async fn open_store(nodes: &str, keyspace: &str) -> anyhow::Result<Arc<dyn GraphStore>> {
    anyhow::bail!(
        "the ScyllaDB store (scylla://{nodes}/{keyspace}) is not part of this build yet; use --store embedded"
    )
}
