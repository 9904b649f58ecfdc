//! Errors of setting an adapter up (configuration, cache file, model files).
//! Errors of a call go through the port's [`LlmError`](chronicle_engine::ports::LlmError).

use std::path::PathBuf;

use thiserror::Error;

/// Why an adapter could not be built.
#[derive(Debug, Error)]
pub enum SetupError {
    /// A configuration value is missing or malformed.
    #[error("invalid LLM configuration: {0}")]
    Config(String),
    /// The response cache file could not be opened.
    #[error("cannot open the LLM response cache at {path}")]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// The storage or file-system error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client")]
    Http(#[source] reqwest::Error),
    /// The local embedding model's files are not there.
    #[error(
        "MiniLM model files are missing in {dir} ({missing}); run scripts/fetch-minilm.sh \
         (or set CHRONICLE_MODEL_DIR to a directory holding config.json, tokenizer.json and model.safetensors)"
    )]
    ModelMissing {
        /// The directory searched.
        dir: PathBuf,
        /// The missing file names.
        missing: String,
    },
    /// The local embedding model's files are there but do not load.
    #[error("cannot load the MiniLM model from {dir}: {reason}")]
    ModelLoad {
        /// The model directory.
        dir: PathBuf,
        /// What failed.
        reason: String,
    },
}
