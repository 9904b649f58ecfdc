//! Distributed mode's log: Kafka through the `KafkaLog` adapter.

use std::sync::Arc;

use anyhow::Context;
use chronicle_log::{EventLog, KafkaConfig, KafkaLog};

use crate::config::Settings;

/// Connects to the Kafka cluster at `brokers`.
pub async fn open_log(brokers: &str, settings: &Settings) -> anyhow::Result<Arc<dyn EventLog>> {
    let mut config = KafkaConfig::new(brokers);
    config.replication_factor =
        u16::try_from(settings.replication.max(1)).context("--replication")?;
    config.client_id = format!("chronicle-{}", std::process::id());
    let log = KafkaLog::connect(config)
        .await
        .with_context(|| format!("connecting to Kafka at {brokers}"))?;
    Ok(Arc::new(log))
}
