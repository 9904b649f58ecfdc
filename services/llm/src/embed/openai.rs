//! The embedding port on an OpenAI-compatible `/embeddings` endpoint.

use std::sync::Arc;

use async_trait::async_trait;
use chronicle_engine::ports::{Embedder, LlmError};
use chronicle_metrics::METRICS;

use crate::cache::CacheKey;
use crate::client::LlmClient;
use crate::config::OpenAiConfig;
use crate::error::SetupError;

/// [`Embedder`] over an OpenAI-compatible embeddings endpoint: batched
/// requests, unit-length vectors, retries, and the response cache.
#[derive(Clone)]
pub struct OpenAiEmbedder {
    llm: Arc<LlmClient>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("config", &self.llm.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiEmbedder {
    /// Builds the client and opens the cache file if `config.cache_path` is
    /// set. To share a cache with an extractor, use
    /// [`OpenAiExtractor::embedder`](crate::OpenAiExtractor::embedder).
    pub fn new(config: OpenAiConfig) -> Result<Self, SetupError> {
        Ok(Self::from_client(Arc::new(LlmClient::open(config)?)))
    }

    pub(crate) fn from_client(llm: Arc<LlmClient>) -> Self {
        OpenAiEmbedder { llm }
    }

    fn cache_keys(&self, texts: &[String]) -> Vec<CacheKey> {
        let c = &self.llm.config;
        texts
            .iter()
            .map(|t| CacheKey::embedding(&c.embedding_model, c.embedding_dim, t))
            .collect()
    }

    async fn cached(&self, keys: &[CacheKey]) -> Vec<Option<Vec<f32>>> {
        let Some(cache) = self.llm.cache.clone() else {
            return vec![None; keys.len()];
        };
        let owned = keys.to_vec();
        match tokio::task::spawn_blocking(move || cache.embeddings(&owned)).await {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "embedding cache read failed");
                vec![None; keys.len()]
            }
            Err(e) => {
                tracing::warn!(error = %e, "embedding cache read panicked");
                vec![None; keys.len()]
            }
        }
    }

    async fn store(&self, entries: Vec<(CacheKey, Vec<f32>)>) {
        let Some(cache) = self.llm.cache.clone() else {
            return;
        };
        let result = tokio::task::spawn_blocking(move || {
            let refs: Vec<(CacheKey, &[f32])> =
                entries.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            cache.put_embeddings(&refs)
        })
        .await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "embedding cache write failed"),
            Err(e) => tracing::warn!(error = %e, "embedding cache write panicked"),
        }
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn describe(&self) -> String {
        format!("openai:{}", self.llm.config.embedding_model)
    }

    fn dimension(&self) -> usize {
        self.llm.config.embedding_dim
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let keys = self.cache_keys(texts);
        let mut out = self.cached(&keys).await;
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| out[i].is_none()).collect();
        let batch = self.llm.config.embedding_batch.max(1);
        for chunk in missing.chunks(batch) {
            let inputs: Vec<String> = chunk.iter().map(|&i| texts[i].clone()).collect();
            let vectors = self.llm.embed_batch(&inputs).await?;
            METRICS
                .embeddings
                .with_label_values(&["openai"])
                .inc_by(inputs.len() as u64);
            let mut fresh = Vec::with_capacity(chunk.len());
            for (&i, v) in chunk.iter().zip(vectors) {
                fresh.push((keys[i], v.clone()));
                out[i] = Some(v);
            }
            self.store(fresh).await;
        }
        out.into_iter()
            .map(|v| v.ok_or_else(|| LlmError::Embedding("an embedding went missing".into())))
            .collect()
    }
}
