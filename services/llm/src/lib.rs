//! Model adapters for chronicle's ports.
//!
//! * [`OpenAiExtractor`] — [`Extractor`](chronicle_engine::ports::Extractor)
//!   and [`Reranker`](chronicle_engine::ports::Reranker) on any
//!   OpenAI-compatible chat endpoint (OpenAI, Azure, vLLM, Ollama,
//!   llama.cpp's server), through async-openai: our [`prompts`], strict
//!   `json_schema` output (falling back to `json_object` where the server
//!   rejects it), validated answers, bounded retries, a concurrency limit,
//!   metrics, and a persistent [`ResponseCache`];
//! * [`OpenAiEmbedder`], [`MiniLmEmbedder`] (local, CPU) and
//!   [`HashEmbedder`] (no model) for the
//!   [`Embedder`](chronicle_engine::ports::Embedder) port;
//! * `fake::FakeOpenAi` (cargo feature `fake`, never in the default build) —
//!   a loopback server speaking the same wire format, for tests and
//!   benchmarks.

#![warn(missing_docs)]

mod answers;
mod cache;
mod client;
mod config;
mod embed;
mod error;
mod extractor;
#[cfg(feature = "fake")]
pub mod fake;
pub mod prompts;

pub use cache::{CacheKey, ResponseCache};
pub use config::{DEFAULT_EMBEDDING_MODEL, DEFAULT_MODEL, OpenAiConfig, known_embedding_dim};
pub use embed::{
    BatchingEmbedder, HashEmbedder, MINILM_DIM, MINILM_MAX_TOKENS, MiniLmEmbedder, OpenAiEmbedder,
    cosine, default_model_dir,
};
pub use error::SetupError;
pub use extractor::OpenAiExtractor;
pub use prompts::{CURRENT_EPISODE_CLOSE, CURRENT_EPISODE_OPEN, PROMPT_VERSION};

#[cfg(test)]
mod http_tests;
