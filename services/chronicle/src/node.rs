//! A node: the log, the store, the indices and the model ports, wired
//! together from [`Settings`] for one [`Role`]. Every role (gateway,
//! processor, projector, query) runs on a node that holds only what the
//! role uses: a gateway opens no store, index or model.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use chronicle_codec::{CommandCodec, EventBatchCodec};
use chronicle_engine::ontology::Ontology;
use chronicle_engine::ports::{Embedder, Extractor, Reranker};
use chronicle_engine::{DecideConfig, Decider, OfflineExtractor};
use chronicle_index::SearchIndex;
use chronicle_llm::{
    BatchingEmbedder, HashEmbedder, MiniLmEmbedder, OpenAiConfig, OpenAiEmbedder, OpenAiExtractor,
    ResponseCache,
};
use chronicle_log::{EmbeddedLog, EventLog, Topics};
use chronicle_query::Sources;
use chronicle_store::{EmbeddedStore, GraphStore};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::{CommunityMode, EmbedderKind, ExtractorKind, LogUri, Settings, StoreUri};
use crate::status::StatusBoard;

/// What a process runs, and so what its node opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Every role in one process (`serve`, `mcp`, the CLI, benchmarks):
    /// everything below.
    All,
    /// Appends commands: the log and the status board.
    Gateway,
    /// Decides episodes: the log and the decider (extractor, embedder).
    Processor,
    /// Projects and serves its groups: the log, the store, the indices and
    /// the query's models (embedder, reranker).
    Projector,
    /// Routes group requests to their owners: the log.
    Query,
}

impl Role {
    fn decides(self) -> bool {
        matches!(self, Role::All | Role::Processor)
    }

    fn projects(self) -> bool {
        matches!(self, Role::All | Role::Projector)
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::All => "embedded",
            Role::Gateway => "gateway",
            Role::Processor => "processor",
            Role::Projector => "projector",
            Role::Query => "query",
        })
    }
}

/// A part the node's role does not open was asked for: a wiring mistake
/// (a request reached a role that does not serve it), never lost data.
#[derive(Debug, thiserror::Error)]
#[error("a {role} node does not open the {part}")]
pub struct NotInRole {
    /// The node's role.
    pub role: Role,
    /// What was asked for.
    pub part: &'static str,
}

/// The model ports a node uses.
#[derive(Clone)]
pub struct Ports {
    /// Extraction and resolution.
    pub extractor: Arc<dyn Extractor>,
    /// Embeddings.
    pub embedder: Arc<dyn Embedder>,
    /// Cross-encoder reranking, when a model is configured.
    pub reranker: Option<Arc<dyn Reranker>>,
}

impl Ports {
    /// The ports the settings ask for.
    pub fn from_settings(settings: &Settings) -> anyhow::Result<Self> {
        let openai = match &settings.llm_base_url {
            Some(url) => {
                let mut config =
                    OpenAiConfig::from_env()?.unwrap_or_else(|| OpenAiConfig::new(url.clone()));
                config.base_url = url.clone();
                if let Some(model) = &settings.llm_model {
                    config.model = model.clone();
                }
                config.cache_path = Some(settings.path("llm-cache.redb"));
                let cache = ResponseCache::open(settings.path("llm-cache.redb"))
                    .context("LLM response cache")?;
                Some(Arc::new(OpenAiExtractor::with_cache(config, Some(cache))?))
            }
            None => None,
        };
        let extractor: Arc<dyn Extractor> = match settings.extractor {
            ExtractorKind::Offline => Arc::new(OfflineExtractor),
            ExtractorKind::Openai => openai
                .clone()
                .context("--extractor openai needs --llm-base-url")?,
        };
        // Model embedders share calls between concurrent decisions (episodes
        // of different groups); the hashed one has nothing to gain.
        let batched = |e: Arc<dyn Embedder>| -> Arc<dyn Embedder> {
            Arc::new(BatchingEmbedder::new(
                e,
                64,
                std::time::Duration::from_millis(2),
            ))
        };
        let embedder: Arc<dyn Embedder> = match settings.embedder {
            EmbedderKind::Minilm => batched(Arc::new(MiniLmEmbedder::load_default().context(
                "loading the MiniLM embedder (run scripts/fetch-minilm.sh once, or pass --embedder hash)",
            )?)),
            EmbedderKind::Hash => Arc::new(HashEmbedder::new(384)),
            EmbedderKind::Openai => batched(Arc::new(OpenAiEmbedder::new(
                openai.as_ref().context("--embedder openai needs --llm-base-url")?.config().clone(),
            )?)),
        };
        let reranker = openai.map(|x| x as Arc<dyn Reranker>);
        Ok(Ports {
            extractor,
            embedder,
            reranker,
        })
    }
}

/// What a data directory was built with; a mismatch would mix vector spaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct DataMeta {
    embedder: String,
    dimension: usize,
}

/// Where the processor and projector are, per partition.
#[derive(Clone)]
pub struct Progress {
    /// Episodes partition → next offset not yet decided (everything below is).
    pub decided: watch::Sender<BTreeMap<u32, u64>>,
    /// Graph-events partition → next offset not yet projected.
    pub projected: watch::Sender<BTreeMap<u32, u64>>,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            decided: watch::channel(BTreeMap::new()).0,
            projected: watch::channel(BTreeMap::new()).0,
        }
    }
}

/// What a role runs on: the log and the process's bookkeeping always; the
/// projection (store, indices, query models) and the decider only for the
/// roles that use them (see [`Role`]).
pub struct Node {
    /// Resolved settings.
    pub settings: Settings,
    /// What this node was opened for.
    pub role: Role,
    /// The log.
    pub log: Arc<dyn EventLog>,
    /// Topic names.
    pub topics: Topics,
    /// The projection and what queries read from it.
    projection: Option<Projected>,
    /// The pipeline.
    decider: Option<Arc<Decider>>,
    /// Episode statuses known to this process.
    pub status: Arc<StatusBoard>,
    /// Positions of the processor and projector.
    pub progress: Progress,
    /// Graph-events partitions this node's projector owns (its indices cover them).
    pub owned: watch::Sender<std::collections::BTreeSet<u32>>,
    /// Episodes-log codec.
    pub commands: CommandCodec,
    /// Graph-events codec.
    pub events: EventBatchCodec,
}

/// The store and indices a projecting role opens; the query reads them
/// through `sources` (the index as its read-only port).
struct Projected {
    index: Arc<SearchIndex>,
    sources: Sources,
}

impl Node {
    /// Opens a node for every role, with the ports the settings ask for.
    pub async fn open(settings: Settings) -> anyhow::Result<Arc<Node>> {
        Self::open_role(settings, Role::All).await
    }

    /// Opens a node for one role: the models are loaded only when the
    /// role uses them.
    pub async fn open_role(settings: Settings, role: Role) -> anyhow::Result<Arc<Node>> {
        let uses_models = role.decides() || role.projects();
        let ports = uses_models
            .then(|| Ports::from_settings(&settings))
            .transpose()?;
        Self::assemble(settings, role, ports).await
    }

    /// Opens a node for every role with explicit ports (benchmarks and tests).
    pub async fn open_with(settings: Settings, ports: Ports) -> anyhow::Result<Arc<Node>> {
        Self::assemble(settings, Role::All, Some(ports)).await
    }

    async fn assemble(
        settings: Settings,
        role: Role,
        ports: Option<Ports>,
    ) -> anyhow::Result<Arc<Node>> {
        fs_err::create_dir_all(&settings.data)?;
        if let Some(ports) = &ports {
            check_meta(&settings.data, ports.embedder.as_ref())?;
        }
        let log: Arc<dyn EventLog> = match &settings.log {
            LogUri::Embedded => Arc::new(
                EmbeddedLog::open(settings.path("log.redb")).context("opening the embedded log")?,
            ),
            LogUri::Kafka(brokers) => crate::kafka::open_log(brokers, &settings).await?,
        };
        let topics = Topics::with_prefix(&settings.topic_prefix);
        for topic in [&topics.episodes, &topics.graph_events, &topics.dlq] {
            log.create_topic(topic, settings.partitions)
                .await
                .with_context(|| format!("creating topic {topic}"))?;
        }
        let (mut projection, mut decider) = (None, None);
        if let Some(ports) = ports {
            if role.projects() {
                projection = Some(Self::open_projection(&settings, &ports).await?);
            }
            if role.decides() {
                decider = Some(Arc::new(Self::build_decider(&settings, ports)?));
            }
        }
        Ok(Arc::new(Node {
            settings,
            role,
            log,
            topics,
            projection,
            decider,
            status: Arc::new(StatusBoard::default()),
            progress: Progress::default(),
            owned: watch::channel(Default::default()).0,
            commands: CommandCodec::new(),
            events: EventBatchCodec::new(),
        }))
    }

    async fn open_projection(settings: &Settings, ports: &Ports) -> anyhow::Result<Projected> {
        let store: Arc<dyn GraphStore> = match &settings.store {
            StoreUri::Embedded => Arc::new(
                EmbeddedStore::open(settings.path("graph.redb"))
                    .context("opening the embedded store")?,
            ),
            StoreUri::Scylla { nodes, keyspace } => {
                crate::scylla::open_store(nodes, keyspace).await?
            }
        };
        let index = Arc::new(
            SearchIndex::open(&settings.path("index"), ports.embedder.dimension())
                .context("opening the search indices")?,
        );
        let sources = Sources {
            store,
            index: index.clone(),
            embedder: ports.embedder.clone(),
            reranker: ports.reranker.clone(),
        };
        Ok(Projected { index, sources })
    }

    fn build_decider(settings: &Settings, ports: Ports) -> anyhow::Result<Decider> {
        let ontology = match &settings.schema {
            Some(path) => Ontology::parse(&fs_err::read_to_string(path)?)
                .with_context(|| format!("schema file {}", path.display()))?,
            None => Ontology::default(),
        };
        let mut config = DecideConfig::default();
        config.communities.incremental = settings.communities == CommunityMode::Incremental;
        Ok(Decider::new(
            ports.extractor,
            ports.embedder,
            ontology,
            config,
        ))
    }

    /// What queries read: the store, the indices and the query's models.
    pub fn sources(&self) -> Result<&Sources, NotInRole> {
        Ok(&self.projected()?.sources)
    }

    /// The projected graph.
    pub fn store(&self) -> Result<&Arc<dyn GraphStore>, NotInRole> {
        Ok(&self.sources()?.store)
    }

    /// The search indices.
    pub fn index(&self) -> Result<&Arc<SearchIndex>, NotInRole> {
        Ok(&self.projected()?.index)
    }

    fn projected(&self) -> Result<&Projected, NotInRole> {
        self.projection.as_ref().ok_or(NotInRole {
            role: self.role,
            part: "projection",
        })
    }

    /// The pipeline.
    pub fn decider(&self) -> Result<&Arc<Decider>, NotInRole> {
        self.decider.as_ref().ok_or(NotInRole {
            role: self.role,
            part: "decider",
        })
    }

    /// End offsets of every partition of a topic.
    pub async fn end_offsets(&self, topic: &str) -> anyhow::Result<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        for p in 0..self.log.partition_count(topic).await? {
            out.insert(p, self.log.end_offset(topic, p).await?);
        }
        Ok(out)
    }
}

fn check_meta(dir: &Path, embedder: &dyn Embedder) -> anyhow::Result<()> {
    let path = dir.join("meta.json");
    let mine = DataMeta {
        embedder: embedder.describe(),
        dimension: embedder.dimension(),
    };
    if path.exists() {
        let theirs: DataMeta = serde_json::from_str(&fs_err::read_to_string(&path)?)
            .with_context(|| format!("{} is not chronicle metadata", path.display()))?;
        if theirs != mine {
            bail!(
                "{} was built with the {} embedder ({} dimensions); this run uses {} ({} dimensions). \
                 Use the same --embedder, or a new --data directory",
                dir.display(),
                theirs.embedder,
                theirs.dimension,
                mine.embedder,
                mine.dimension
            );
        }
    } else {
        fs_err::write(&path, serde_json::to_vec_pretty(&mine)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &Path) -> Settings {
        // The OpenAI embedder without a base URL cannot load: a role that
        // asks for models fails, one that does not never tries.
        Settings::embedded(dir, ExtractorKind::Offline, EmbedderKind::Openai)
    }

    #[tokio::test]
    async fn routing_roles_open_only_the_log() {
        for role in [Role::Gateway, Role::Query] {
            let dir = tempfile::tempdir().unwrap();
            let node = Node::open_role(settings(dir.path()), role).await.unwrap();
            assert!(node.store().is_err() && node.index().is_err() && node.decider().is_err());
            let err = node.sources().err().unwrap().to_string();
            assert_eq!(err, format!("a {role} node does not open the projection"));
            let mut files: Vec<String> = fs_err::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            assert_eq!(files, ["log.redb"], "{role}");
            // Ready when its log answers: no store to wait for.
            let ready = crate::http::handlers::readiness(&node, 0, false).await;
            assert!(ready.ready && ready.log && ready.store.is_none(), "{role}");
        }
    }

    #[tokio::test]
    async fn model_roles_load_the_models_and_only_their_parts() {
        let dir = tempfile::tempdir().unwrap();
        for role in [Role::Processor, Role::Projector, Role::All] {
            let err = Node::open_role(settings(dir.path()), role).await.err();
            assert!(err.is_some_and(|e| e.to_string().contains("--llm-base-url")));
        }
        let hashed = |d: &Path| Settings::embedded(d, ExtractorKind::Offline, EmbedderKind::Hash);

        let dir = tempfile::tempdir().unwrap();
        let processor = Node::open_role(hashed(dir.path()), Role::Processor)
            .await
            .unwrap();
        assert!(processor.decider().is_ok() && processor.sources().is_err());
        assert!(!dir.path().join("graph.redb").exists() && !dir.path().join("index").exists());

        let dir = tempfile::tempdir().unwrap();
        let projector = Node::open_role(hashed(dir.path()), Role::Projector)
            .await
            .unwrap();
        assert!(projector.decider().is_err() && projector.sources().is_ok());
        assert!(dir.path().join("graph.redb").exists() && dir.path().join("index").exists());
    }
}
