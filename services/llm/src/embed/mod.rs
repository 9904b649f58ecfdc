//! Embedders: texts to unit-length vectors.
//!
//! * [`OpenAiEmbedder`] — an OpenAI-compatible embeddings endpoint;
//! * [`MiniLmEmbedder`] — all-MiniLM-L6-v2 on the CPU, no network;
//! * [`HashEmbedder`] — hashed bag of words, for benchmarks that must leave
//!   model cost out;
//! * [`BatchingEmbedder`] — shares model calls between concurrent callers.

mod batching;
mod hash;
mod minilm;
mod openai;

pub use batching::BatchingEmbedder;
pub use hash::HashEmbedder;
pub use minilm::{MINILM_DIM, MINILM_MAX_TOKENS, MiniLmEmbedder, default_model_dir};
pub use openai::OpenAiEmbedder;

/// Scales a vector to unit length; a zero vector stays zero.
pub(crate) fn normalized(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Dot product (the cosine of unit vectors).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
