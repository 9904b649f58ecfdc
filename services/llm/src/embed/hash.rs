//! A hashed bag-of-words embedder: no model, deterministic, fast.
//!
//! A text is lower-cased and split into words (runs of alphanumeric
//! characters). Each word unigram (weight 1), each pair of adjacent words
//! (weight ½) and each character trigram of a word padded with `#` (weight
//! ⅓; so a one-word text spreads over several buckets and two different
//! words almost never collide into the same vector) is hashed with 64-bit FNV-1a followed by the splitmix64
//! finalizer; the hash picks a bucket (`hash mod dim`) and a sign (its top
//! bit), and the signed weight is added there. The vector is then scaled to
//! unit length. Texts sharing words get a positive cosine; the signs keep
//! unrelated words from piling up in one direction. A text with no words
//! maps to a fixed unit vector so that every output has unit length.
//!
//! The hash is fixed here (not `std`'s, which may change between releases),
//! so vectors are the same on every platform and Rust version.

use async_trait::async_trait;
use chronicle_engine::ports::{Embedder, LlmError};
use chronicle_metrics::METRICS;

/// Deterministic hashed bag-of-words vectors (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashEmbedder {
    dim: usize,
}

impl Default for HashEmbedder {
    /// [`HashEmbedder::DEFAULT_DIM`] buckets.
    fn default() -> Self {
        HashEmbedder {
            dim: Self::DEFAULT_DIM,
        }
    }
}

impl HashEmbedder {
    /// Default vector length: the same as MiniLM, so indices are interchangeable.
    pub const DEFAULT_DIM: usize = 384;

    /// An embedder with `dim` buckets (at least 1).
    pub fn new(dim: usize) -> Self {
        HashEmbedder { dim: dim.max(1) }
    }

    /// The vector of one text.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dim];
        let lower = text.to_lowercase();
        let mut previous: Option<&str> = None;
        let mut any = false;
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            any = true;
            self.add(&mut v, hash(&[b"u", word.as_bytes()]), 1.0);
            let padded: Vec<char> = format!("#{word}#").chars().collect();
            for tri in padded.windows(3) {
                let tri: String = tri.iter().collect();
                self.add(&mut v, hash(&[b"t", tri.as_bytes()]), 1.0 / 3.0);
            }
            if let Some(p) = previous {
                self.add(
                    &mut v,
                    hash(&[b"b", p.as_bytes(), b" ", word.as_bytes()]),
                    0.5,
                );
            }
            previous = Some(word);
        }
        if !any {
            self.add(&mut v, hash(&[b"empty"]), 1.0);
        }
        let v = super::normalized(v);
        if v.iter().all(|x| *x == 0.0) {
            // Every feature cancelled out (rare): fall back to the empty-text vector.
            let mut e = vec![0f32; self.dim];
            self.add(&mut e, hash(&[b"empty"]), 1.0);
            return super::normalized(e);
        }
        v
    }

    fn add(&self, v: &mut [f32], h: u64, weight: f32) {
        let bucket = (h % self.dim as u64) as usize;
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[bucket] += sign * weight;
    }
}

/// FNV-1a over the parts, then splitmix64's finalizer to spread the bits.
fn hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn describe(&self) -> String {
        format!("hash-{}", self.dim)
    }

    fn dimension(&self) -> usize {
        self.dim
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        METRICS
            .embeddings
            .with_label_values(&["hash"])
            .inc_by(texts.len() as u64);
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;
    use proptest::prelude::*;

    #[tokio::test]
    async fn deterministic_unit_vectors() {
        let e = HashEmbedder::default();
        let texts: Vec<String> = [
            "Alice lives in Beijing",
            "",
            "   ",
            "Alice lives in Beijing",
        ]
        .map(String::from)
        .into();
        let v = e.embed(&texts).await.unwrap();
        assert_eq!(v.len(), 4);
        for x in &v {
            assert_eq!(x.len(), 384);
            assert!((cosine(x, x) - 1.0).abs() < 1e-5);
        }
        assert_eq!(v[0], v[3]);
        assert_eq!(v[1], v[2]);
        assert_eq!(e.embed_one("ALICE, lives in beijing!"), v[0]);
        // Pinned values: the hash must not drift between releases.
        let pinned = HashEmbedder::new(8).embed_one("alice bob");
        assert_eq!(
            pinned,
            vec![
                -0.6585046,
                0.37628832,
                0.18814413,
                -0.5644325,
                -0.18814416,
                0.0,
                -0.18814416,
                0.0
            ]
        );
        assert_eq!(pinned, HashEmbedder::new(8).embed_one("Alice  Bob"));
    }

    #[test]
    fn shared_words_bring_texts_closer() {
        let e = HashEmbedder::default();
        let a = e.embed_one("Alice lives in Beijing");
        let b = e.embed_one("Alice resides in Beijing");
        let c = e.embed_one("The stock market fell sharply");
        assert!(cosine(&a, &b) > 0.4, "{}", cosine(&a, &b));
        assert!(cosine(&a, &c).abs() < 0.3, "{}", cosine(&a, &c));
    }

    proptest! {
        #[test]
        fn always_unit_length(text in ".{0,200}", dim in 1usize..512) {
            let v = HashEmbedder::new(dim).embed_one(&text);
            prop_assert_eq!(v.len(), dim);
            prop_assert!((cosine(&v, &v) - 1.0).abs() < 1e-4);
        }
    }
}
