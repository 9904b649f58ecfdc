//! The language-model port on an OpenAI-compatible endpoint.

use std::sync::Arc;

use async_trait::async_trait;
use chronicle_engine::ports::{
    EntityResolutionRequest, Extraction, ExtractionRequest, Extractor, FactResolution,
    FactResolutionRequest, LlmError, Reranker, SummaryRequest,
};

use crate::answers;
use crate::cache::ResponseCache;
use crate::client::LlmClient;
use crate::config::OpenAiConfig;
use crate::embed::OpenAiEmbedder;
use crate::error::SetupError;
use crate::prompts;

/// Summary items per call: keeps one answer well inside any context window.
const SUMMARY_CHUNK: usize = 24;
/// Passages per rerank call.
const RERANK_CHUNK: usize = 40;

/// [`Extractor`] and [`Reranker`] over any OpenAI-compatible chat endpoint,
/// with our prompts, validated structured answers, retries and the cache.
#[derive(Clone)]
pub struct OpenAiExtractor {
    llm: Arc<LlmClient>,
}

impl std::fmt::Debug for OpenAiExtractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiExtractor")
            .field("config", &self.llm.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiExtractor {
    /// Builds the client and opens the cache file if `config.cache_path` is set.
    pub fn new(config: OpenAiConfig) -> Result<Self, SetupError> {
        Ok(OpenAiExtractor {
            llm: Arc::new(LlmClient::open(config)?),
        })
    }

    /// Builds the client over an already open cache (or none), ignoring `config.cache_path`.
    pub fn with_cache(
        config: OpenAiConfig,
        cache: Option<Arc<ResponseCache>>,
    ) -> Result<Self, SetupError> {
        Ok(OpenAiExtractor {
            llm: Arc::new(LlmClient::new(config, cache)?),
        })
    }

    /// An embedder on the same endpoint, sharing the HTTP client, the
    /// concurrency limit and the cache.
    pub fn embedder(&self) -> OpenAiEmbedder {
        OpenAiEmbedder::from_client(self.llm.clone())
    }

    /// The settings in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.llm.config
    }

    /// The response cache, if any.
    pub fn cache(&self) -> Option<&Arc<ResponseCache>> {
        self.llm.cache.as_ref()
    }

    /// Whether requests still ask for `json_schema` output (false after the
    /// server rejected it once).
    pub fn uses_json_schema(&self) -> bool {
        self.llm.uses_json_schema()
    }
}

#[async_trait]
impl Extractor for OpenAiExtractor {
    fn describe(&self) -> String {
        self.llm.config.describe()
    }

    async fn extract(&self, request: &ExtractionRequest) -> Result<Extraction, LlmError> {
        let prompt = prompts::extraction(request);
        self.llm
            .complete(&prompt, |raw| answers::extraction(raw, &request.ontology))
            .await
    }

    async fn resolve_entities(
        &self,
        request: &EntityResolutionRequest,
    ) -> Result<Vec<Option<usize>>, LlmError> {
        // An entity without candidates is new: no need to ask.
        let asked: Vec<usize> = (0..request.entities.len())
            .filter(|&i| !request.entities[i].candidates.is_empty())
            .collect();
        let mut out = vec![None; request.entities.len()];
        if asked.is_empty() {
            return Ok(out);
        }
        let sub = EntityResolutionRequest {
            episode_content: request.episode_content.clone(),
            entities: asked.iter().map(|&i| request.entities[i].clone()).collect(),
        };
        let verdicts = self
            .llm
            .complete(&prompts::entity_resolution(&sub), |raw| {
                answers::entity_resolution(raw, &sub)
            })
            .await?;
        for (i, v) in asked.into_iter().zip(verdicts) {
            out[i] = v;
        }
        Ok(out)
    }

    async fn resolve_facts(
        &self,
        request: &FactResolutionRequest,
    ) -> Result<Vec<FactResolution>, LlmError> {
        // A fact with no candidates at all restates and contradicts nothing.
        let asked: Vec<usize> = (0..request.facts.len())
            .filter(|&i| {
                let f = &request.facts[i];
                !f.duplicates.is_empty() || !f.contradictions.is_empty()
            })
            .collect();
        let mut out = vec![FactResolution::default(); request.facts.len()];
        if asked.is_empty() {
            return Ok(out);
        }
        let sub = FactResolutionRequest {
            facts: asked.iter().map(|&i| request.facts[i].clone()).collect(),
        };
        let verdicts = self
            .llm
            .complete(&prompts::fact_resolution(&sub), |raw| {
                answers::fact_resolution(raw, &sub)
            })
            .await?;
        for (i, v) in asked.into_iter().zip(verdicts) {
            out[i] = v;
        }
        Ok(out)
    }

    async fn summarize(&self, request: &SummaryRequest) -> Result<Vec<String>, LlmError> {
        let mut out = Vec::with_capacity(request.items.len());
        for chunk in request.items.chunks(SUMMARY_CHUNK) {
            let sub = SummaryRequest {
                kind: request.kind,
                max_chars: request.max_chars,
                items: chunk.to_vec(),
            };
            let summaries = self
                .llm
                .complete(&prompts::summary(&sub), |raw| answers::summaries(raw, &sub))
                .await?;
            out.extend(summaries);
        }
        Ok(out)
    }
}

#[async_trait]
impl Reranker for OpenAiExtractor {
    async fn rerank(&self, query: &str, passages: &[String]) -> Result<Vec<f32>, LlmError> {
        let mut out = Vec::with_capacity(passages.len());
        for chunk in passages.chunks(RERANK_CHUNK) {
            let scores = self
                .llm
                .complete(&prompts::rerank(query, chunk), |raw| {
                    answers::scores(raw, chunk.len())
                })
                .await?;
            out.extend(scores);
        }
        Ok(out)
    }
}
