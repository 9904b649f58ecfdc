//! One OpenAI-compatible endpoint: structured chat calls and embeddings,
//! with a concurrency limit, bounded retries with exponential backoff, the
//! `json_schema` → `json_object` fallback, the response cache and metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage,
    ChatCompletionRequestSystemMessage, ChatCompletionRequestUserMessage,
    CreateChatCompletionRequest, ResponseFormat, ResponseFormatJsonSchema,
};
use async_openai::types::embeddings::{CreateEmbeddingRequest, EmbeddingInput, EncodingFormat};
use chronicle_engine::ports::LlmError;
use chronicle_metrics::METRICS;
use serde::Deserialize;
use tokio::sync::Semaphore;

use crate::answers;
use crate::cache::{CacheKey, ResponseCache};
use crate::config::OpenAiConfig;
use crate::error::SetupError;
use crate::prompts::{Prompt, one_line};

/// Whether an error answer to a `json_schema` request looks like the server
/// rejecting the response format: a client error (400, 422, 501: not
/// transient), or a 500 that talks about schemas or grammars (llama.cpp's
/// server answers 500 when it cannot turn a schema into a grammar; an
/// unrelated 500 is retried normally instead).
fn rejects_json_schema(status: u16, body: &str) -> bool {
    match status {
        400 | 422 | 501 => true,
        500 => {
            let body = body.to_ascii_lowercase();
            ["schema", "grammar", "response_format", "json"]
                .iter()
                .any(|w| body.contains(w))
        }
        _ => false,
    }
}

/// Longest invalid answer echoed back to the model when asking it to correct itself.
const FEEDBACK_CHARS: usize = 4_000;

/// The shared machinery behind the extractor and the embedder.
pub(crate) struct LlmClient {
    api: Client<OpenAIConfig>,
    pub(crate) config: OpenAiConfig,
    permits: Semaphore,
    pub(crate) cache: Option<Arc<ResponseCache>>,
    /// Whether `json_schema` is still believed to work on this endpoint.
    json_schema: AtomicBool,
    /// Varies the backoff jitter between calls.
    jitter: AtomicU64,
}

/// Why one attempt failed.
#[derive(Debug)]
enum Failure {
    Status {
        status: u16,
        body: String,
    },
    Timeout(String),
    Transport(String),
    Invalid(String),
    /// A well-formed answer that cannot fit the configuration (retrying cannot help).
    Mismatch(String),
}

impl Failure {
    fn retryable(&self) -> bool {
        match self {
            Failure::Status { status, .. } => *status == 429 || *status == 408 || *status >= 500,
            Failure::Timeout(_) | Failure::Transport(_) | Failure::Invalid(_) => true,
            Failure::Mismatch(_) => false,
        }
    }

    /// The bounded `reason` label of `llm_errors`.
    fn label(&self) -> &'static str {
        match self {
            Failure::Status { status: 429, .. } => "http_429",
            Failure::Status { status, .. } if *status >= 500 => "http_5xx",
            Failure::Status { .. } => "http_4xx",
            Failure::Timeout(_) => "timeout",
            Failure::Transport(_) => "transport",
            Failure::Invalid(_) | Failure::Mismatch(_) => "invalid_output",
        }
    }

    fn into_error(self, kind: &'static str) -> LlmError {
        match self {
            Failure::Status { status, body } => LlmError::Http { status, body },
            Failure::Timeout(m) => LlmError::Transport(format!("timed out: {m}")),
            Failure::Transport(m) => LlmError::Transport(m),
            Failure::Invalid(reason) | Failure::Mismatch(reason) => {
                LlmError::InvalidOutput { kind, reason }
            }
        }
    }
}

fn classify(e: OpenAIError) -> Failure {
    match e {
        OpenAIError::ApiError(r) => Failure::Status {
            status: r.status_code.as_u16(),
            body: one_line(&r.api_error.to_string(), 500),
        },
        OpenAIError::Reqwest(e) if e.is_timeout() => Failure::Timeout(chain(&e)),
        OpenAIError::Reqwest(e) => Failure::Transport(chain(&e)),
        OpenAIError::JSONDeserialize(e, body) => Failure::Invalid(format!(
            "the response is not a chat completion ({e}): {}",
            one_line(&body, 200)
        )),
        other => Failure::Transport(chain(&other)),
    }
}

/// An error with its causes, `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s
}

/// What we read from a chat completion; lenient, since compatible servers differ.
#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ChatChoice {
    message: ChatMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingDatum>,
}

#[derive(Deserialize)]
struct EmbeddingDatum {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl LlmClient {
    /// A client with the cache file of `config.cache_path`, if set.
    pub(crate) fn open(config: OpenAiConfig) -> Result<Self, SetupError> {
        let cache = config
            .cache_path
            .as_ref()
            .map(ResponseCache::open)
            .transpose()?;
        Self::new(config, cache)
    }

    pub(crate) fn new(
        config: OpenAiConfig,
        cache: Option<Arc<ResponseCache>>,
    ) -> Result<Self, SetupError> {
        if config.base_url.is_empty() {
            return Err(SetupError::Config("the base URL is empty".into()));
        }
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.request_timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(SetupError::Http)?;
        // Explicit values everywhere: the defaults would read OPENAI_* variables.
        let mut api_config = OpenAIConfig::new()
            .with_api_base(config.base_url.clone())
            .with_org_id("")
            .with_project_id("");
        match (&config.api_key, &config.api_key_header) {
            (Some(key), Some(header)) => {
                let name = reqwest::header::HeaderName::from_bytes(header.as_bytes())
                    .map_err(|e| SetupError::Config(format!("API key header {header:?}: {e}")))?;
                api_config = api_config
                    .with_api_key("")
                    .with_header(name, key.as_str())
                    .map_err(|e| SetupError::Config(format!("API key: {e}")))?;
            }
            (key, _) => api_config = api_config.with_api_key(key.clone().unwrap_or_default()),
        }
        // A plain transport: no retry layer of the client's own, we retry here.
        let api = Client::with_config(api_config).with_http_service(ReqwestService::new(http));
        Ok(LlmClient {
            json_schema: AtomicBool::new(config.json_schema),
            permits: Semaphore::new(config.max_concurrency.max(1)),
            api,
            config,
            cache,
            jitter: AtomicU64::new(0),
        })
    }

    /// Whether requests currently ask for `json_schema` output.
    pub(crate) fn uses_json_schema(&self) -> bool {
        self.json_schema.load(Ordering::Relaxed)
    }

    /// Asks the model, validates with `check`, retries, caches.
    pub(crate) async fn complete<T>(
        &self,
        prompt: &Prompt,
        check: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, LlmError> {
        let kind = prompt.kind.as_str();
        let key = CacheKey::chat(&self.config.model, prompt);
        if let Some(hit) = self.cached_answer(&key, &check).await {
            METRICS.llm_cache_hits.with_label_values(&[kind]).inc();
            return Ok(hit);
        }
        let mut attempt = 0;
        // The server rejected json_schema during this call.
        let mut rejected = false;
        // An answer was invalid: show the schema in the prompt from now on
        // (this also rescues servers that silently ignore response_format).
        let mut schema_in_prompt = false;
        let mut feedback: Option<(String, String)> = None;
        loop {
            let schema_mode = !rejected && !schema_in_prompt && self.uses_json_schema();
            let request = self.chat_request(prompt, schema_mode, feedback.as_ref());
            let failure = match self.send_chat(kind, request).await {
                Ok(content) => {
                    if rejected && self.json_schema.swap(false, Ordering::Relaxed) {
                        tracing::warn!(
                            endpoint = %self.config.base_url,
                            "the server rejects json_schema output; using json_object with the schema in the prompt from now on"
                        );
                    }
                    let text = answers::json_text(&content);
                    match check(text) {
                        Ok(value) => {
                            self.store_answer(key, text).await;
                            return Ok(value);
                        }
                        Err(reason) => {
                            tracing::debug!(kind, attempt, %reason, "invalid model answer");
                            feedback = Some((text.to_owned(), reason.clone()));
                            schema_in_prompt = true;
                            Failure::Invalid(reason)
                        }
                    }
                }
                Err(Failure::Status { status, body })
                    if schema_mode && rejects_json_schema(status, &body) =>
                {
                    tracing::info!(kind, status, %body, "json_schema request failed; trying json_object");
                    rejected = true;
                    METRICS.llm_retries.with_label_values(&[kind]).inc();
                    continue;
                }
                Err(f) => f,
            };
            if !failure.retryable() || attempt >= self.config.max_retries {
                METRICS
                    .llm_errors
                    .with_label_values(&[kind, failure.label()])
                    .inc();
                tracing::warn!(
                    kind,
                    attempts = attempt + 1,
                    reason = failure.label(),
                    "model call failed"
                );
                return Err(failure.into_error(kind));
            }
            attempt += 1;
            METRICS.llm_retries.with_label_values(&[kind]).inc();
            let delay = self.backoff(attempt);
            tracing::debug!(
                kind,
                attempt,
                reason = failure.label(),
                ?delay,
                "retrying model call"
            );
            tokio::time::sleep(delay).await;
        }
    }

    async fn cached_answer<T>(
        &self,
        key: &CacheKey,
        check: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        let cache = self.cache.clone()?;
        let key = *key;
        let raw = match tokio::task::spawn_blocking(move || cache.answer(&key)).await {
            Ok(Ok(raw)) => raw?,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "response cache read failed");
                return None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "response cache read panicked");
                return None;
            }
        };
        match check(&raw) {
            Ok(v) => Some(v),
            Err(reason) => {
                tracing::debug!(%reason, "ignoring a cached answer that no longer validates");
                None
            }
        }
    }

    async fn store_answer(&self, key: CacheKey, text: &str) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        let text = text.to_owned();
        match tokio::task::spawn_blocking(move || cache.put_answer(&key, &text)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "response cache write failed"),
            Err(e) => tracing::warn!(error = %e, "response cache write panicked"),
        }
    }

    fn chat_request(
        &self,
        prompt: &Prompt,
        schema_mode: bool,
        feedback: Option<&(String, String)>,
    ) -> CreateChatCompletionRequest {
        let system = if schema_mode {
            prompt.system.clone()
        } else {
            prompt.system_with_schema()
        };
        let mut messages: Vec<ChatCompletionRequestMessage> = vec![
            ChatCompletionRequestSystemMessage::from(system).into(),
            ChatCompletionRequestUserMessage::from(prompt.user.as_str()).into(),
        ];
        if let Some((bad, reason)) = feedback {
            let bad: String = bad.chars().take(FEEDBACK_CHARS).collect();
            messages.push(ChatCompletionRequestAssistantMessage::from(bad).into());
            messages.push(
                ChatCompletionRequestUserMessage::from(format!(
                    "That answer is invalid: {reason}. Answer again with the corrected JSON object only."
                ))
                .into(),
            );
        }
        let response_format = if schema_mode {
            ResponseFormat::JsonSchema {
                json_schema: ResponseFormatJsonSchema {
                    description: None,
                    name: prompt.schema_name().into(),
                    schema: prompt.schema.clone(),
                    strict: Some(true),
                },
            }
        } else {
            ResponseFormat::JsonObject
        };
        CreateChatCompletionRequest {
            model: self.config.model.clone(),
            messages,
            response_format: Some(response_format),
            temperature: self.config.temperature,
            ..Default::default()
        }
    }

    /// One HTTP request; the answer's text content.
    async fn send_chat(
        &self,
        kind: &'static str,
        request: CreateChatCompletionRequest,
    ) -> Result<String, Failure> {
        let response: ChatResponse = {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| Failure::Transport("the client is shutting down".into()))?;
            METRICS.llm_calls.with_label_values(&[kind]).inc();
            let started = Instant::now();
            let result = self.api.chat().create_byot(request).await;
            METRICS
                .llm_duration
                .with_label_values(&[kind])
                .observe(started.elapsed().as_secs_f64());
            result.map_err(classify)?
        };
        if let Some(u) = &response.usage {
            METRICS
                .llm_tokens
                .with_label_values(&[kind, "prompt"])
                .inc_by(u.prompt_tokens);
            METRICS
                .llm_tokens
                .with_label_values(&[kind, "completion"])
                .inc_by(u.completion_tokens);
        }
        let choice = response
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| Failure::Invalid("the response has no choices".into()))?;
        match choice.message.content.filter(|c| !c.trim().is_empty()) {
            Some(content) => Ok(content),
            None => Err(Failure::Invalid(
                match (choice.message.refusal, choice.finish_reason) {
                    (Some(r), _) => format!("the model refused: {}", one_line(&r, 200)),
                    (None, Some(f)) => format!("empty answer (finish_reason {f})"),
                    (None, None) => "empty answer".into(),
                },
            )),
        }
    }

    /// Embeds a batch (one request), normalized; retried like chat calls.
    pub(crate) async fn embed_batch(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut attempt = 0;
        loop {
            let failure = match self.send_embeddings(texts).await {
                Ok(vectors) => return Ok(vectors),
                Err(f) => f,
            };
            if !failure.retryable() || attempt >= self.config.max_retries {
                tracing::warn!(
                    attempts = attempt + 1,
                    reason = failure.label(),
                    "embedding call failed"
                );
                return Err(match failure.into_error("embeddings") {
                    LlmError::InvalidOutput { reason, .. } => LlmError::Embedding(reason),
                    other => other,
                });
            }
            attempt += 1;
            tokio::time::sleep(self.backoff(attempt)).await;
        }
    }

    async fn send_embeddings(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Failure> {
        let request = CreateEmbeddingRequest {
            model: self.config.embedding_model.clone(),
            input: EmbeddingInput::StringArray(texts.to_vec()),
            encoding_format: Some(EncodingFormat::Float),
            user: None,
            dimensions: None,
        };
        let response: EmbeddingResponse = {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| Failure::Transport("the client is shutting down".into()))?;
            self.api
                .embeddings()
                .create_byot(request)
                .await
                .map_err(classify)?
        };
        if response.data.len() != texts.len() {
            return Err(Failure::Invalid(format!(
                "asked for {} embeddings, got {}",
                texts.len(),
                response.data.len()
            )));
        }
        let mut slots: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        for (position, d) in response.data.into_iter().enumerate() {
            let i = d.index.unwrap_or(position);
            let slot = slots
                .get_mut(i)
                .ok_or_else(|| Failure::Invalid(format!("embedding index {i} out of range")))?;
            if d.embedding.len() != self.config.embedding_dim {
                return Err(Failure::Mismatch(format!(
                    "model {} returned {}-dimensional vectors, configured {}",
                    self.config.embedding_model,
                    d.embedding.len(),
                    self.config.embedding_dim
                )));
            }
            *slot = Some(crate::embed::normalized(d.embedding));
        }
        slots
            .into_iter()
            .enumerate()
            .map(|(i, v)| v.ok_or_else(|| Failure::Invalid(format!("no embedding for input {i}"))))
            .collect()
    }

    /// `initial · 2^(attempt-1)`, capped, plus up to 25 % jitter.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self
            .config
            .initial_backoff
            .saturating_mul(1u32 << (attempt - 1).min(16))
            .min(self.config.max_backoff);
        let n = self.jitter.fetch_add(1, Ordering::Relaxed);
        let seed = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
        let fraction = (seed >> 40) as f64 / (1u64 << 24) as f64; // [0, 1)
        base + base.mul_f64(0.25 * fraction)
    }
}
