//! all-MiniLM-L6-v2 on candle, on the CPU, with no network at run time.
//!
//! Sentence embeddings as sentence-transformers computes them: BERT token
//! embeddings, mean-pooled over the attention mask, scaled to unit length.
//! Inputs are cut at [`MINILM_MAX_TOKENS`] tokens. The weights are fetched
//! once by `scripts/fetch-minilm.sh`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use chronicle_engine::ports::{Embedder, LlmError};
use chronicle_metrics::METRICS;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::error::SetupError;

/// Vector length of all-MiniLM-L6-v2.
pub const MINILM_DIM: usize = 384;
/// Tokens per input; longer texts are cut (the model was trained at 256).
pub const MINILM_MAX_TOKENS: usize = 256;
/// Texts per forward pass by default.
const DEFAULT_BATCH: usize = 32;
/// The files a model directory must hold.
const FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// Where the model files live: `$CHRONICLE_MODEL_DIR`, else
/// `$HOME/.cache/chronicle/models/all-MiniLM-L6-v2` (where
/// `scripts/fetch-minilm.sh` puts them).
pub fn default_model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CHRONICLE_MODEL_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/chronicle/models/all-MiniLM-L6-v2")
}

struct MiniLm {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

/// Local sentence embeddings (all-MiniLM-L6-v2, 384 dimensions).
#[derive(Clone)]
pub struct MiniLmEmbedder {
    inner: Arc<MiniLm>,
    batch_size: usize,
}

impl std::fmt::Debug for MiniLmEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLmEmbedder")
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl MiniLmEmbedder {
    /// Whether `dir` holds the three model files.
    pub fn available(dir: &Path) -> bool {
        FILES.iter().all(|f| dir.join(f).is_file())
    }

    /// Loads the model from [`default_model_dir`].
    pub fn load_default() -> Result<Self, SetupError> {
        Self::load(default_model_dir())
    }

    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, SetupError> {
        let dir = dir.as_ref();
        let missing: Vec<&str> = FILES
            .iter()
            .copied()
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(SetupError::ModelMissing {
                dir: dir.to_path_buf(),
                missing: missing.join(", "),
            });
        }
        let fail = |reason: String| SetupError::ModelLoad {
            dir: dir.to_path_buf(),
            reason,
        };
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| fail(format!("config.json: {e}")))?;
        let config: Config =
            serde_json::from_str(&config_text).map_err(|e| fail(format!("config.json: {e}")))?;
        if config.hidden_size != MINILM_DIM {
            return Err(fail(format!(
                "hidden size is {}, expected {MINILM_DIM}",
                config.hidden_size
            )));
        }
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MINILM_MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| fail(format!("tokenizer truncation: {e}")))?;
        let device = Device::Cpu;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config).map_err(|e| fail(format!("weights: {e}")))?;
        Ok(MiniLmEmbedder {
            inner: Arc::new(MiniLm {
                model,
                tokenizer,
                device,
            }),
            batch_size: DEFAULT_BATCH,
        })
    }

    /// Texts per forward pass (default 32).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Embeds on the calling thread (CPU-bound; the async port runs this on
    /// the blocking pool). Texts are grouped by length so that batches carry
    /// little padding; the output keeps the input order.
    pub fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
            let vectors = self
                .inner
                .forward(&batch)
                .map_err(|e| LlmError::Embedding(format!("MiniLM: {e}")))?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        METRICS
            .embeddings
            .with_label_values(&["minilm"])
            .inc_by(texts.len() as u64);
        Ok(out)
    }
}

impl MiniLm {
    /// One forward pass: mean-pooled, unit-length vectors.
    fn forward(
        &self,
        texts: &[&str],
    ) -> Result<Vec<Vec<f32>>, Box<dyn std::error::Error + Send + Sync>> {
        let encodings = self.tokenizer.encode_batch(texts.to_vec(), true)?;
        let ids = encodings
            .iter()
            .map(|e| Tensor::new(e.get_ids(), &self.device))
            .collect::<Result<Vec<_>, _>>()?;
        let mask = encodings
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), &self.device))
            .collect::<Result<Vec<_>, _>>()?;
        let ids = Tensor::stack(&ids, 0)?;
        let mask = Tensor::stack(&mask, 0)?;
        let token_types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &token_types, Some(&mask))?; // [batch, tokens, 384]
        let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // [batch, tokens, 1]
        let sums = hidden.broadcast_mul(&weights)?.sum(1)?; // [batch, 384]
        let counts = weights.sum(1)?; // [batch, 1]; at least 2 ([CLS], [SEP])
        let means = sums.broadcast_div(&counts)?;
        Ok(means
            .to_vec2::<f32>()?
            .into_iter()
            .map(super::normalized)
            .collect())
    }
}

#[async_trait]
impl Embedder for MiniLmEmbedder {
    fn describe(&self) -> String {
        "minilm".into()
    }

    fn dimension(&self) -> usize {
        MINILM_DIM
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let this = self.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || this.embed_blocking(&texts))
            .await
            .map_err(|e| LlmError::Embedding(format!("MiniLM task failed: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

    /// The model, or `None` with a one-line reason when its files are absent.
    fn model() -> Option<MiniLmEmbedder> {
        let dir = default_model_dir();
        if !MiniLmEmbedder::available(&dir) {
            println!(
                "skipped: MiniLM weights not in {} (run scripts/fetch-minilm.sh)",
                dir.display()
            );
            return None;
        }
        Some(MiniLmEmbedder::load(&dir).expect("model files are present but do not load"))
    }

    #[test]
    fn missing_files_name_the_script() {
        let dir = tempfile::tempdir().unwrap();
        let e = MiniLmEmbedder::load(dir.path()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("scripts/fetch-minilm.sh"), "{text}");
        assert!(text.contains("model.safetensors"), "{text}");
    }

    #[tokio::test]
    async fn paraphrases_are_close_and_unrelated_texts_are_not() {
        let Some(m) = model() else { return };
        let texts: Vec<String> = [
            "Alice lives in Beijing",
            "Alice resides in Beijing",
            "The stock market fell",
        ]
        .map(String::from)
        .into();
        let v = m.embed(&texts).await.unwrap();
        assert!(
            v.iter()
                .all(|x| x.len() == MINILM_DIM && (cosine(x, x) - 1.0).abs() < 1e-4)
        );
        let close = cosine(&v[0], &v[1]);
        let far = cosine(&v[0], &v[2]);
        println!("cos(lives, resides) = {close:.4}; cos(lives, stock) = {far:.4}");
        assert!(
            (close - 0.978).abs() < 0.01,
            "cos(lives, resides) = {close}"
        );
        assert!(far.abs() < 0.1, "cos(lives, stock) = {far}");
    }

    #[test]
    fn batching_and_order_do_not_change_vectors() {
        let Some(m) = model() else { return };
        let long = "word ".repeat(400);
        let texts: Vec<String> = vec![
            "Bob works at Google".into(),
            long,
            "".into(),
            "Acme Corp".into(),
        ];
        let together = m.clone().with_batch_size(8).embed_blocking(&texts).unwrap();
        let one_by_one = m.with_batch_size(1).embed_blocking(&texts).unwrap();
        for (a, b) in together.iter().zip(&one_by_one) {
            assert!((cosine(a, b) - 1.0).abs() < 1e-4);
        }
    }
}
