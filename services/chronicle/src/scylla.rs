//! Distributed mode's store: ScyllaDB.
//!
//! `--store scylla://HOST:PORT[,HOST:PORT]/KEYSPACE` names the contact
//! points and keyspace; request settings come from the environment, with
//! defaults that suit a projector:
//!
//! * `CHRONICLE_SCYLLA_CONSISTENCY` — `LOCAL_QUORUM` (default), `QUORUM`, `ONE`, ...
//! * `CHRONICLE_SCYLLA_DATACENTER` — the local datacenter to prefer;
//! * `CHRONICLE_SCYLLA_TIMEOUT_MS` — client-side limit of one request (10000);
//! * `CHRONICLE_SCYLLA_USER` / `CHRONICLE_SCYLLA_PASSWORD` — when the cluster authenticates.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chronicle_store::GraphStore;
use chronicle_store::scylla::{
    Replication, ScyllaConfig, ScyllaStore, migrate as migrate_schema, open_session,
    parse_consistency,
};

use crate::config::{Settings, StoreUri};

/// Settings for `nodes` and `keyspace`, with the `CHRONICLE_SCYLLA_*` overrides.
pub fn config(nodes: &str, keyspace: &str) -> anyhow::Result<ScyllaConfig> {
    config_with(nodes, keyspace, |name| std::env::var(name).ok())
}

fn config_with(
    nodes: &str,
    keyspace: &str,
    var: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<ScyllaConfig> {
    let mut config = ScyllaConfig::new(nodes, keyspace)?;
    if let Some(c) = var("CHRONICLE_SCYLLA_CONSISTENCY") {
        config.consistency = parse_consistency(&c).context("CHRONICLE_SCYLLA_CONSISTENCY")?;
    }
    if let Some(dc) = var("CHRONICLE_SCYLLA_DATACENTER").filter(|d| !d.is_empty()) {
        config.local_datacenter = Some(dc);
    }
    if let Some(ms) = var("CHRONICLE_SCYLLA_TIMEOUT_MS") {
        let ms: u64 = ms.parse().with_context(|| {
            format!("CHRONICLE_SCYLLA_TIMEOUT_MS must be milliseconds, got `{ms}`")
        })?;
        config.request_timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(user) = var("CHRONICLE_SCYLLA_USER") {
        config.credentials = Some((user, var("CHRONICLE_SCYLLA_PASSWORD").unwrap_or_default()));
    }
    Ok(config)
}

/// Connects to the ScyllaDB cluster and prepares the store's statements;
/// an unmigrated keyspace is an error that names the `migrate` command.
pub async fn open_store(nodes: &str, keyspace: &str) -> anyhow::Result<Arc<dyn GraphStore>> {
    let config = config(nodes, keyspace)?;
    let store = ScyllaStore::connect(&config)
        .await
        .with_context(|| format!("opening the ScyllaDB store scylla://{nodes}/{keyspace}"))?;
    Ok(Arc::new(store))
}

/// The replication `migrate` asks for: `--replication JSON`, else
/// `--replication-factor N`, else 3 replicas per datacenter.
pub fn replication(factor: Option<u32>, json: Option<&str>) -> anyhow::Result<Replication> {
    Ok(match (json, factor) {
        (Some(json), _) => Replication::from_json(json)?,
        (None, Some(0)) => anyhow::bail!("--replication-factor must be at least 1"),
        (None, Some(n)) => Replication::Factor(n),
        (None, None) => Replication::default(),
    })
}

/// `chronicle migrate`: applies the CQL schema to the configured keyspace
/// (idempotent); the embedded store has nothing to migrate.
pub async fn migrate(
    settings: &Settings,
    factor: Option<u32>,
    json: Option<&str>,
) -> anyhow::Result<()> {
    let StoreUri::Scylla { nodes, keyspace } = &settings.store else {
        println!(
            "nothing to migrate: the embedded store creates its tables when it opens (use --store scylla://HOST:PORT/KEYSPACE)"
        );
        return Ok(());
    };
    let replication = replication(factor, json)?;
    let config = config(nodes, keyspace)?;
    let session = open_session(&config)
        .await
        .with_context(|| format!("connecting to {nodes}"))?;
    migrate_schema(&session, keyspace, &replication)
        .await
        .with_context(|| format!("migrating keyspace {keyspace}"))?;
    println!(
        "keyspace {keyspace} on {nodes} has chronicle's schema (new keyspaces get replication {})",
        replication.to_cql()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_store::scylla::Consistency;

    #[test]
    fn environment_overrides() {
        let env = |name: &str| match name {
            "CHRONICLE_SCYLLA_CONSISTENCY" => Some("quorum".to_owned()),
            "CHRONICLE_SCYLLA_DATACENTER" => Some("dc1".to_owned()),
            "CHRONICLE_SCYLLA_TIMEOUT_MS" => Some("2500".to_owned()),
            "CHRONICLE_SCYLLA_USER" => Some("chronicle".to_owned()),
            _ => None,
        };
        let c = config_with("h1:9042,h2:9042", "graph", env).unwrap();
        assert_eq!(c.consistency, Consistency::Quorum);
        assert_eq!(c.local_datacenter.as_deref(), Some("dc1"));
        assert_eq!(c.request_timeout, Duration::from_millis(2500));
        assert_eq!(c.credentials, Some(("chronicle".into(), String::new())));
        let defaults = config_with("h1:9042", "graph", |_| None).unwrap();
        assert_eq!(defaults.consistency, Consistency::LocalQuorum);
        let bad =
            |name: &str| (name == "CHRONICLE_SCYLLA_CONSISTENCY").then(|| "strong".to_owned());
        assert!(config_with("h1:9042", "graph", bad).is_err());
        let bad = |name: &str| (name == "CHRONICLE_SCYLLA_TIMEOUT_MS").then(|| "soon".to_owned());
        assert!(config_with("h1:9042", "graph", bad).is_err());
    }

    #[test]
    fn replication_choice() {
        assert_eq!(replication(None, None).unwrap(), Replication::Factor(3));
        assert_eq!(replication(Some(1), None).unwrap(), Replication::Factor(1));
        assert!(replication(Some(0), None).is_err());
        let r = replication(None, Some(r#"{"class":"NetworkTopologyStrategy","dc1":3}"#)).unwrap();
        assert_eq!(
            r.to_cql(),
            "{'class': 'NetworkTopologyStrategy', 'dc1': '3'}"
        );
        assert!(replication(None, Some("{}")).is_err());
    }

    #[test]
    fn migrate_command_line() {
        use clap::Parser;
        let parse = |args: &[&str]| crate::cli::Cli::try_parse_from(args);
        let cli = parse(&[
            "chronicle",
            "--store",
            "scylla://10.0.0.1:9042,10.0.0.2:9042/chronicle",
            "migrate",
            "--replication-factor",
            "3",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            crate::cli::Command::Migrate {
                replication_factor: Some(3),
                replication_map: None
            }
        ));
        let map = r#"{"class":"NetworkTopologyStrategy","dc1":3}"#;
        let cli = parse(&["chronicle", "migrate", "--replication-map", map]).unwrap();
        assert!(matches!(
            cli.command,
            crate::cli::Command::Migrate { replication_map: Some(ref m), .. } if m == map
        ));
        assert!(
            parse(&[
                "chronicle",
                "migrate",
                "--replication-factor",
                "1",
                "--replication-map",
                map
            ])
            .is_err(),
            "one replication setting at a time"
        );
    }

    #[tokio::test]
    async fn embedded_has_nothing_to_migrate() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings::embedded(
            dir.path(),
            crate::config::ExtractorKind::Offline,
            crate::config::EmbedderKind::Hash,
        );
        migrate(&settings, Some(1), None).await.unwrap();
    }
}
