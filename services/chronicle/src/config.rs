//! Where the log and the graph live, and which model ports to use.
//!
//! Every setting can come from a flag, from an environment variable
//! (`CHRONICLE_*`) or from a TOML file given with `--config`; a flag or
//! variable wins over the file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Deserialize;

/// Which log holds the topics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogUri {
    /// The durable embedded log in the data directory.
    Embedded,
    /// A Kafka (or Kafka-protocol) cluster: bootstrap servers.
    Kafka(String),
}

impl std::str::FromStr for LogUri {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        if s == "embedded" {
            return Ok(LogUri::Embedded);
        }
        match s.strip_prefix("kafka://") {
            Some(brokers) if !brokers.is_empty() && brokers.split(',').all(|b| b.contains(':')) => {
                Ok(LogUri::Kafka(brokers.to_owned()))
            }
            _ => bail!("--log must be `embedded` or `kafka://HOST:PORT[,HOST:PORT...]`, got `{s}`"),
        }
    }
}

/// Which store holds the projected graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreUri {
    /// The embedded redb store in the data directory.
    Embedded,
    /// A ScyllaDB cluster: contact point and keyspace.
    Scylla {
        /// `host:port` contact points, comma separated.
        nodes: String,
        /// Keyspace.
        keyspace: String,
    },
}

impl std::str::FromStr for StoreUri {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        if s == "embedded" {
            return Ok(StoreUri::Embedded);
        }
        let bad = || {
            anyhow::anyhow!(
                "--store must be `embedded` or `scylla://HOST:PORT[,HOST:PORT]/KEYSPACE`, got `{s}`"
            )
        };
        let rest = s.strip_prefix("scylla://").ok_or_else(bad)?;
        let (nodes, keyspace) = rest.split_once('/').ok_or_else(bad)?;
        let keyspace_ok = !keyspace.is_empty()
            && keyspace.len() <= 48
            && keyspace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            && keyspace
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic());
        if nodes.is_empty() || !nodes.split(',').all(|n| n.contains(':')) || !keyspace_ok {
            return Err(bad());
        }
        Ok(StoreUri::Scylla {
            nodes: nodes.to_owned(),
            keyspace: keyspace.to_owned(),
        })
    }
}

/// The extraction model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExtractorKind {
    /// Deterministic English patterns, no model (the default without an endpoint).
    Offline,
    /// An OpenAI-compatible endpoint (the default when one is configured).
    Openai,
}

/// The embedding model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 on the CPU (the default; weights fetched by scripts/fetch-minilm.sh).
    Minilm,
    /// Hashed bag of words: no model, for benchmarks that exclude model cost.
    Hash,
    /// An OpenAI-compatible embeddings endpoint.
    Openai,
}

/// When communities are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommunityMode {
    /// Only on `communities build` (or its HTTP and MCP equivalents).
    #[default]
    Manual,
    /// Also maintained as episodes arrive: each episode's entities join or
    /// form communities and only their communities are re-summarized, in the
    /// episode's own decision.
    Incremental,
}

/// Settings shared by every command.
#[derive(Clone, Debug, Args)]
pub struct GlobalArgs {
    /// Data directory of the embedded log, store, indices and caches.
    #[arg(long, global = true, env = "CHRONICLE_DATA")]
    pub data: Option<PathBuf>,
    /// `embedded`, or `kafka://HOST:PORT[,HOST:PORT]`.
    #[arg(long, global = true, env = "CHRONICLE_LOG")]
    pub log: Option<String>,
    /// `embedded`, or `scylla://HOST:PORT/KEYSPACE`.
    #[arg(long, global = true, env = "CHRONICLE_STORE")]
    pub store: Option<String>,
    /// Topic prefix (`<prefix>.episodes`, `<prefix>.graph-events`, `<prefix>.dlq`).
    #[arg(long, global = true, env = "CHRONICLE_TOPIC_PREFIX")]
    pub topic_prefix: Option<String>,
    /// Partitions of newly created topics.
    #[arg(long, global = true, env = "CHRONICLE_PARTITIONS")]
    pub partitions: Option<u32>,
    /// Replication factor of newly created Kafka topics.
    #[arg(long, global = true, env = "CHRONICLE_REPLICATION")]
    pub replication: Option<i32>,
    /// Extraction model.
    #[arg(long, global = true, value_enum, env = "CHRONICLE_EXTRACTOR")]
    pub extractor: Option<ExtractorKind>,
    /// Embedding model.
    #[arg(long, global = true, value_enum, env = "CHRONICLE_EMBEDDER")]
    pub embedder: Option<EmbedderKind>,
    /// OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, global = true, env = "CHRONICLE_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    /// Chat model name.
    #[arg(long, global = true, env = "CHRONICLE_LLM_MODEL")]
    pub llm_model: Option<String>,
    /// Entity and edge types (JSON or YAML schema file).
    #[arg(long, global = true, env = "CHRONICLE_SCHEMA")]
    pub schema: Option<PathBuf>,
    /// Communities: `manual` (only when built) or `incremental` (also
    /// maintained as episodes are processed).
    #[arg(long, global = true, value_enum, env = "CHRONICLE_COMMUNITIES")]
    pub communities: Option<CommunityMode>,
    /// Idle groups the processor keeps in memory (over all its partitions);
    /// colder ones load from its state store on their next episode.
    #[arg(long, global = true, env = "CHRONICLE_PROCESSOR_CACHE_GROUPS")]
    pub processor_cache_groups: Option<usize>,
    /// TOML file with any of these settings (flags and variables win).
    #[arg(long, global = true, env = "CHRONICLE_CONFIG")]
    pub config: Option<PathBuf>,
}

/// The same settings, as a TOML file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    data: Option<PathBuf>,
    log: Option<String>,
    store: Option<String>,
    topic_prefix: Option<String>,
    partitions: Option<u32>,
    replication: Option<i32>,
    extractor: Option<ExtractorKind>,
    embedder: Option<EmbedderKind>,
    llm_base_url: Option<String>,
    llm_model: Option<String>,
    schema: Option<PathBuf>,
    communities: Option<CommunityMode>,
    processor_cache_groups: Option<usize>,
}

/// Resolved settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Data directory.
    pub data: PathBuf,
    /// Log.
    pub log: LogUri,
    /// Store.
    pub store: StoreUri,
    /// Topic prefix.
    pub topic_prefix: String,
    /// Partitions of new topics.
    pub partitions: u32,
    /// Replication factor of new Kafka topics.
    pub replication: i32,
    /// Extractor.
    pub extractor: ExtractorKind,
    /// Embedder.
    pub embedder: EmbedderKind,
    /// Endpoint, when configured.
    pub llm_base_url: Option<String>,
    /// Chat model.
    pub llm_model: Option<String>,
    /// Ontology file.
    pub schema: Option<PathBuf>,
    /// When communities are computed.
    pub communities: CommunityMode,
    /// Idle groups the processor keeps in memory.
    pub processor_cache_groups: usize,
}

impl GlobalArgs {
    /// Merges flags/variables over the config file over the defaults.
    pub fn resolve(&self) -> anyhow::Result<Settings> {
        let file: FileConfig = match &self.config {
            Some(path) => {
                let text = fs_err::read_to_string(path)?;
                toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?
            }
            None => FileConfig::default(),
        };
        let llm_base_url = self.llm_base_url.clone().or(file.llm_base_url);
        let extractor = self
            .extractor
            .or(file.extractor)
            .unwrap_or(if llm_base_url.is_some() {
                ExtractorKind::Openai
            } else {
                ExtractorKind::Offline
            });
        if extractor == ExtractorKind::Openai && llm_base_url.is_none() {
            bail!(
                "--extractor openai needs an endpoint: set --llm-base-url or CHRONICLE_LLM_BASE_URL"
            );
        }
        let data = self
            .data
            .clone()
            .or(file.data)
            .unwrap_or_else(|| PathBuf::from(".data"));
        let embedder = self
            .embedder
            .or(file.embedder)
            .or_else(|| embedder_of(&data))
            .unwrap_or(EmbedderKind::Minilm);
        if embedder == EmbedderKind::Openai && llm_base_url.is_none() {
            bail!(
                "--embedder openai needs an endpoint: set --llm-base-url or CHRONICLE_LLM_BASE_URL"
            );
        }
        let partitions = self.partitions.or(file.partitions).unwrap_or(8);
        if partitions == 0 || partitions > 1024 {
            bail!("--partitions must be between 1 and 1024, got {partitions}");
        }
        Ok(Settings {
            data,
            log: self
                .log
                .clone()
                .or(file.log)
                .as_deref()
                .unwrap_or("embedded")
                .parse()?,
            store: self
                .store
                .clone()
                .or(file.store)
                .as_deref()
                .unwrap_or("embedded")
                .parse()?,
            topic_prefix: self
                .topic_prefix
                .clone()
                .or(file.topic_prefix)
                .unwrap_or_else(|| "chronicle".into()),
            partitions,
            replication: self.replication.or(file.replication).unwrap_or(1),
            extractor,
            embedder,
            llm_base_url,
            llm_model: self.llm_model.clone().or(file.llm_model),
            schema: self.schema.clone().or(file.schema),
            communities: self.communities.or(file.communities).unwrap_or_default(),
            processor_cache_groups: self
                .processor_cache_groups
                .or(file.processor_cache_groups)
                .unwrap_or(Settings::DEFAULT_PROCESSOR_CACHE_GROUPS),
        })
    }
}

/// The embedder an existing data directory was built with (its `meta.json`),
/// so read commands need no `--embedder` repeated.
fn embedder_of(data: &Path) -> Option<EmbedderKind> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("meta.json")).ok()?).ok()?;
    let name = meta.get("embedder")?.as_str()?;
    Some(if name.starts_with("hash") {
        EmbedderKind::Hash
    } else if name.starts_with("openai") {
        EmbedderKind::Openai
    } else {
        EmbedderKind::Minilm
    })
}

impl Settings {
    /// A file inside the data directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.data.join(name)
    }

    /// Idle groups a processor keeps in memory unless configured.
    pub const DEFAULT_PROCESSOR_CACHE_GROUPS: usize = 512;

    /// Settings for an embedded deployment in `dir` with the given ports.
    pub fn embedded(dir: &Path, extractor: ExtractorKind, embedder: EmbedderKind) -> Self {
        Settings {
            data: dir.to_path_buf(),
            log: LogUri::Embedded,
            store: StoreUri::Embedded,
            topic_prefix: "chronicle".into(),
            partitions: 8,
            replication: 1,
            extractor,
            embedder,
            llm_base_url: None,
            llm_model: None,
            schema: None,
            communities: CommunityMode::Manual,
            processor_cache_groups: Settings::DEFAULT_PROCESSOR_CACHE_GROUPS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        assert_eq!("embedded".parse::<LogUri>().unwrap(), LogUri::Embedded);
        assert_eq!(
            "kafka://127.0.0.1:9092,b:9093".parse::<LogUri>().unwrap(),
            LogUri::Kafka("127.0.0.1:9092,b:9093".into())
        );
        assert!("kafka://".parse::<LogUri>().is_err());
        assert!(
            "postgres://x"
                .parse::<LogUri>()
                .unwrap_err()
                .to_string()
                .contains("--log")
        );
        assert_eq!(
            "scylla://10.0.0.1:9042/chronicle"
                .parse::<StoreUri>()
                .unwrap(),
            StoreUri::Scylla {
                nodes: "10.0.0.1:9042".into(),
                keyspace: "chronicle".into()
            }
        );
        assert!("scylla://h:9042/".parse::<StoreUri>().is_err());
        assert!("scylla://h:9042/bad-name".parse::<StoreUri>().is_err());
    }
}
