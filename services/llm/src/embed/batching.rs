//! Coalescing embedder: texts from concurrent callers (decisions of
//! different episodes and groups) are embedded together, because a model
//! embeds a batch of 32 far faster per text than 32 batches of one.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chronicle_engine::ports::{Embedder, LlmError};
use tokio::sync::{mpsc, oneshot};

struct Request {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, LlmError>>,
}

/// Wraps an embedder; calls that arrive within `window` of each other share
/// one call to it (up to `max_batch` texts).
pub struct BatchingEmbedder {
    describe: String,
    dimension: usize,
    requests: mpsc::Sender<Request>,
}

impl BatchingEmbedder {
    /// Starts the coalescing task on the current runtime.
    pub fn new(inner: Arc<dyn Embedder>, max_batch: usize, window: Duration) -> Self {
        let (tx, mut rx) = mpsc::channel::<Request>(1024);
        let (describe, dimension) = (inner.describe(), inner.dimension());
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                let mut size = batch[0].texts.len();
                let deadline = tokio::time::Instant::now() + window;
                while size < max_batch {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(r)) => {
                            size += r.texts.len();
                            batch.push(r);
                        }
                        _ => break,
                    }
                }
                let all: Vec<String> = batch.iter().flat_map(|r| r.texts.iter().cloned()).collect();
                match inner.embed(&all).await {
                    Ok(vectors) if vectors.len() == all.len() => {
                        let mut vectors = vectors.into_iter();
                        for r in batch {
                            let mine: Vec<Vec<f32>> =
                                vectors.by_ref().take(r.texts.len()).collect();
                            let _ = r.reply.send(Ok(mine));
                        }
                    }
                    Ok(vectors) => {
                        let e = LlmError::Embedding(format!(
                            "{} vectors for {} texts",
                            vectors.len(),
                            all.len()
                        ));
                        batch
                            .into_iter()
                            .for_each(|r| drop(r.reply.send(Err(e.clone()))));
                    }
                    Err(e) => batch
                        .into_iter()
                        .for_each(|r| drop(r.reply.send(Err(e.clone())))),
                }
            }
        });
        BatchingEmbedder {
            describe,
            dimension,
            requests: tx,
        }
    }
}

#[async_trait]
impl Embedder for BatchingEmbedder {
    /// The wrapped embedder's description: batching does not change vectors.
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request {
                texts: texts.to_vec(),
                reply,
            })
            .await
            .map_err(|_| LlmError::Embedding("the batching embedder stopped".into()))?;
        answer
            .await
            .map_err(|_| LlmError::Embedding("the batching embedder stopped".into()))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HashEmbedder;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts calls to the wrapped embedder.
    struct Counting(HashEmbedder, AtomicUsize);

    #[async_trait]
    impl Embedder for Counting {
        fn describe(&self) -> String {
            self.0.describe()
        }
        fn dimension(&self) -> usize {
            self.0.dimension()
        }
        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.embed(texts).await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_calls_share_one_batch_and_get_their_own_vectors() {
        let inner = Arc::new(Counting(HashEmbedder::new(64), AtomicUsize::new(0)));
        let batching = Arc::new(BatchingEmbedder::new(
            inner.clone(),
            1000,
            Duration::from_millis(50),
        ));
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let b = batching.clone();
                tokio::spawn(
                    async move { b.embed(&[format!("text {i}"), format!("other {i}")]).await },
                )
            })
            .collect();
        for (i, c) in calls.into_iter().enumerate() {
            let v = c.await.unwrap().unwrap();
            assert_eq!(
                v,
                HashEmbedder::new(64)
                    .embed(&[format!("text {i}"), format!("other {i}")])
                    .await
                    .unwrap()
            );
        }
        assert!(inner.1.load(Ordering::SeqCst) < 8, "calls were coalesced");
    }
}
