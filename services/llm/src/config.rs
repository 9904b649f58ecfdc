//! Where the OpenAI-compatible endpoint is and how hard to push it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::SetupError;

/// Settings of the OpenAI-compatible adapters (chat and embeddings).
///
/// Any server speaking the OpenAI wire format works: OpenAI, Azure's `/openai/v1`
/// endpoint, vLLM, Ollama, llama.cpp's server.
#[derive(Clone, PartialEq)]
pub struct OpenAiConfig {
    /// API root including the version, e.g. `https://api.openai.com/v1` or `http://localhost:8080/v1`.
    pub base_url: String,
    /// Bearer token; local servers usually need none.
    pub api_key: Option<String>,
    /// Send the key in this header instead of `Authorization: Bearer`
    /// (Azure's `api-key`).
    pub api_key_header: Option<String>,
    /// Chat model for extraction, resolution, summaries and reranking.
    pub model: String,
    /// Embedding model.
    pub embedding_model: String,
    /// Length of the embedding model's vectors.
    pub embedding_dim: usize,
    /// Texts per embeddings request.
    pub embedding_batch: usize,
    /// Requests in flight at once (chat and embeddings together).
    pub max_concurrency: usize,
    /// Retries after the first attempt (429, 5xx, timeouts, invalid answers).
    pub max_retries: u32,
    /// Limit on one HTTP request, connection included.
    pub request_timeout: Duration,
    /// First backoff delay; doubled on each retry.
    pub initial_backoff: Duration,
    /// Longest backoff delay.
    pub max_backoff: Duration,
    /// Sampling temperature; `None` leaves the server default (some reasoning
    /// models accept no other).
    pub temperature: Option<f32>,
    /// Ask for `json_schema` structured output first (falls back to
    /// `json_object` by itself when the server rejects it).
    pub json_schema: bool,
    /// The persistent response cache (a redb file); `None` disables it.
    pub cache_path: Option<PathBuf>,
}

/// Model used when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
/// Embedding model used when none is configured.
pub const DEFAULT_EMBEDDING_MODEL: &str = "text-embedding-3-small";

impl OpenAiConfig {
    /// Defaults for an endpoint: OpenAI models, 8 concurrent requests,
    /// 4 retries, 120 s timeout, no cache.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            api_key: None,
            api_key_header: None,
            model: DEFAULT_MODEL.into(),
            embedding_model: DEFAULT_EMBEDDING_MODEL.into(),
            embedding_dim: known_embedding_dim(DEFAULT_EMBEDDING_MODEL).unwrap_or(1536),
            embedding_batch: 256,
            max_concurrency: 8,
            max_retries: 4,
            request_timeout: Duration::from_secs(120),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            temperature: Some(0.0),
            json_schema: true,
            cache_path: None,
        }
    }

    /// Reads the process environment; `Ok(None)` when `CHRONICLE_LLM_BASE_URL`
    /// is unset (no model endpoint: the offline extractor serves).
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `CHRONICLE_LLM_BASE_URL` | API root, e.g. `http://localhost:11434/v1` |
    /// | `CHRONICLE_LLM_API_KEY`, else `OPENAI_API_KEY` | bearer token |
    /// | `CHRONICLE_LLM_API_KEY_HEADER` | send the key in this header instead (Azure: `api-key`) |
    /// | `CHRONICLE_LLM_MODEL` | chat model |
    /// | `CHRONICLE_EMBEDDING_MODEL`, `CHRONICLE_EMBEDDING_DIM` | embedding model and its vector length |
    /// | `CHRONICLE_EMBEDDING_BATCH` | texts per embeddings request |
    /// | `CHRONICLE_LLM_MAX_CONCURRENCY`, `CHRONICLE_LLM_MAX_RETRIES` | limits |
    /// | `CHRONICLE_LLM_TIMEOUT_SECS` | per-request timeout |
    /// | `CHRONICLE_LLM_TEMPERATURE` | a number, or `default` to send none |
    /// | `CHRONICLE_LLM_JSON_SCHEMA` | `false` to start in `json_object` mode |
    /// | `CHRONICLE_LLM_CACHE` | path of the response cache file |
    pub fn from_env() -> Result<Option<Self>, SetupError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) over any variable source (tests, config files).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, SetupError> {
        let get = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let Some(base_url) = get("CHRONICLE_LLM_BASE_URL") else {
            return Ok(None);
        };
        let mut c = OpenAiConfig::new(base_url);
        c.api_key = get("CHRONICLE_LLM_API_KEY").or_else(|| get("OPENAI_API_KEY"));
        c.api_key_header = get("CHRONICLE_LLM_API_KEY_HEADER");
        if let Some(m) = get("CHRONICLE_LLM_MODEL") {
            c.model = m;
        }
        if let Some(m) = get("CHRONICLE_EMBEDDING_MODEL") {
            c.embedding_dim = known_embedding_dim(&m).unwrap_or(c.embedding_dim);
            c.embedding_model = m;
        }
        if let Some(v) = get("CHRONICLE_EMBEDDING_DIM") {
            c.embedding_dim = parse_positive("CHRONICLE_EMBEDDING_DIM", &v)?;
        }
        if let Some(v) = get("CHRONICLE_EMBEDDING_BATCH") {
            c.embedding_batch = parse_positive("CHRONICLE_EMBEDDING_BATCH", &v)?;
        }
        if let Some(v) = get("CHRONICLE_LLM_MAX_CONCURRENCY") {
            c.max_concurrency = parse_positive("CHRONICLE_LLM_MAX_CONCURRENCY", &v)?;
        }
        if let Some(v) = get("CHRONICLE_LLM_MAX_RETRIES") {
            c.max_retries = v
                .parse()
                .map_err(|_| bad("CHRONICLE_LLM_MAX_RETRIES", &v))?;
        }
        if let Some(v) = get("CHRONICLE_LLM_TIMEOUT_SECS") {
            let secs: f64 = v
                .parse()
                .map_err(|_| bad("CHRONICLE_LLM_TIMEOUT_SECS", &v))?;
            if !(secs.is_finite() && secs > 0.0) {
                return Err(bad("CHRONICLE_LLM_TIMEOUT_SECS", &v));
            }
            c.request_timeout = Duration::from_secs_f64(secs);
        }
        if let Some(v) = get("CHRONICLE_LLM_TEMPERATURE") {
            c.temperature = if v.eq_ignore_ascii_case("default") {
                None
            } else {
                Some(
                    v.parse()
                        .map_err(|_| bad("CHRONICLE_LLM_TEMPERATURE", &v))?,
                )
            };
        }
        if let Some(v) = get("CHRONICLE_LLM_JSON_SCHEMA") {
            c.json_schema = match v.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => true,
                "0" | "false" | "no" | "off" => false,
                _ => return Err(bad("CHRONICLE_LLM_JSON_SCHEMA", &v)),
            };
        }
        c.cache_path = get("CHRONICLE_LLM_CACHE").map(PathBuf::from);
        Ok(Some(c))
    }

    /// `openai:<model>@<base_url>`, for logs.
    pub fn describe(&self) -> String {
        format!("openai:{}@{}", self.model, self.base_url)
    }
}

impl fmt::Debug for OpenAiConfig {
    /// Like a derived `Debug`, with the API key hidden.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<hidden>"))
            .field("api_key_header", &self.api_key_header)
            .field("model", &self.model)
            .field("embedding_model", &self.embedding_model)
            .field("embedding_dim", &self.embedding_dim)
            .field("embedding_batch", &self.embedding_batch)
            .field("max_concurrency", &self.max_concurrency)
            .field("max_retries", &self.max_retries)
            .field("request_timeout", &self.request_timeout)
            .field("initial_backoff", &self.initial_backoff)
            .field("max_backoff", &self.max_backoff)
            .field("temperature", &self.temperature)
            .field("json_schema", &self.json_schema)
            .field("cache_path", &self.cache_path)
            .finish()
    }
}

/// Vector length of well-known embedding models.
pub fn known_embedding_dim(model: &str) -> Option<usize> {
    let m = model.rsplit('/').next().unwrap_or(model);
    Some(match m {
        "text-embedding-3-small" | "text-embedding-ada-002" => 1536,
        "text-embedding-3-large" => 3072,
        "nomic-embed-text" | "nomic-embed-text:latest" => 768,
        "mxbai-embed-large" | "mxbai-embed-large:latest" => 1024,
        "all-minilm" | "all-minilm:latest" | "all-MiniLM-L6-v2" => 384,
        "bge-m3" | "bge-m3:latest" => 1024,
        _ => return None,
    })
}

fn bad(name: &str, value: &str) -> SetupError {
    SetupError::Config(format!("{name}={value:?} is not valid"))
}

fn parse_positive(name: &str, value: &str) -> Result<usize, SetupError> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad(name, value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn no_base_url_means_not_configured() {
        assert_eq!(
            OpenAiConfig::from_lookup(lookup(&[("OPENAI_API_KEY", "k")])).unwrap(),
            None
        );
    }

    #[test]
    fn reads_every_variable() {
        let c = OpenAiConfig::from_lookup(lookup(&[
            ("CHRONICLE_LLM_BASE_URL", "http://localhost:8080/v1/"),
            ("OPENAI_API_KEY", "sk-fallback"),
            ("CHRONICLE_LLM_MODEL", "qwen3"),
            ("CHRONICLE_EMBEDDING_MODEL", "nomic-embed-text"),
            ("CHRONICLE_LLM_MAX_CONCURRENCY", "3"),
            ("CHRONICLE_LLM_MAX_RETRIES", "0"),
            ("CHRONICLE_LLM_TIMEOUT_SECS", "2.5"),
            ("CHRONICLE_LLM_TEMPERATURE", "default"),
            ("CHRONICLE_LLM_JSON_SCHEMA", "off"),
            ("CHRONICLE_LLM_CACHE", "/tmp/c.redb"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.base_url, "http://localhost:8080/v1");
        assert_eq!(c.api_key.as_deref(), Some("sk-fallback"));
        assert_eq!(c.model, "qwen3");
        assert_eq!(c.embedding_dim, 768);
        assert_eq!(c.max_concurrency, 3);
        assert_eq!(c.max_retries, 0);
        assert_eq!(c.request_timeout, Duration::from_millis(2500));
        assert_eq!(c.temperature, None);
        assert!(!c.json_schema);
        assert_eq!(c.cache_path, Some(PathBuf::from("/tmp/c.redb")));
        assert!(!format!("{c:?}").contains("sk-fallback"));
    }

    #[test]
    fn rejects_malformed_values() {
        for (k, v) in [
            ("CHRONICLE_LLM_MAX_CONCURRENCY", "0"),
            ("CHRONICLE_LLM_TIMEOUT_SECS", "-1"),
            ("CHRONICLE_LLM_TEMPERATURE", "hot"),
            ("CHRONICLE_EMBEDDING_DIM", "x"),
        ] {
            let r = OpenAiConfig::from_lookup(lookup(&[
                ("CHRONICLE_LLM_BASE_URL", "http://x"),
                (k, v),
            ]));
            assert!(matches!(r, Err(SetupError::Config(_))), "{k}={v}");
        }
    }
}
