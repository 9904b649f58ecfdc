//! A node: the log, the store, the indices and the model ports, wired
//! together from [`Settings`]. Every role (gateway, processor, projector,
//! query) runs on a node.

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

/// Everything a role needs.
pub struct Node {
    /// Resolved settings.
    pub settings: Settings,
    /// The log.
    pub log: Arc<dyn EventLog>,
    /// Topic names.
    pub topics: Topics,
    /// The projected graph.
    pub store: Arc<dyn GraphStore>,
    /// The search indices.
    pub index: Arc<SearchIndex>,
    /// The pipeline.
    pub decider: Arc<Decider>,
    /// What the query role reads (the store, the index and the query embedder).
    pub sources: Sources,
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

impl Node {
    /// Opens a node with the ports the settings ask for.
    pub async fn open(settings: Settings) -> anyhow::Result<Arc<Node>> {
        let ports = Ports::from_settings(&settings)?;
        Self::open_with(settings, ports).await
    }

    /// Opens a node with explicit ports (benchmarks and tests).
    pub async fn open_with(settings: Settings, ports: Ports) -> anyhow::Result<Arc<Node>> {
        fs_err::create_dir_all(&settings.data)?;
        check_meta(&settings.data, ports.embedder.as_ref())?;
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
        let ontology = match &settings.schema {
            Some(path) => Ontology::parse(&fs_err::read_to_string(path)?)
                .with_context(|| format!("schema file {}", path.display()))?,
            None => Ontology::default(),
        };
        let mut config = DecideConfig::default();
        config.communities.incremental = settings.communities == CommunityMode::Incremental;
        let sources = Sources {
            store: store.clone(),
            index: index.clone(),
            embedder: ports.embedder.clone(),
            reranker: ports.reranker,
        };
        let decider = Arc::new(Decider::new(
            ports.extractor,
            ports.embedder,
            ontology,
            config,
        ));
        Ok(Arc::new(Node {
            settings,
            log,
            topics,
            store,
            index,
            decider,
            sources,
            status: Arc::new(StatusBoard::default()),
            progress: Progress::default(),
            owned: watch::channel(Default::default()).0,
            commands: CommandCodec::new(),
            events: EventBatchCodec::new(),
        }))
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
