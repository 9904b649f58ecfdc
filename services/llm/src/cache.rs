//! The persistent response cache: model answers and embeddings in one redb
//! file, keyed by a sha256 of everything that determines them. Re-running
//! the same episodes against the same model and prompts costs no HTTP call.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, ReadableDatabase, TableDefinition, TableError};
use sha2::{Digest, Sha256};

use crate::error::SetupError;
use crate::prompts::{PROMPT_VERSION, Prompt};

/// Chat answers (the cleaned answer text), by [`CacheKey`].
const ANSWERS: TableDefinition<&[u8], &str> = TableDefinition::new("chat_answers_v1");
/// Embeddings (little-endian f32s), by [`CacheKey`].
const EMBEDDINGS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("embeddings_v1");

/// A sha256 identifying one request's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// Key of a chat answer: model, prompt version, kind, both messages and the schema.
    pub fn chat(model: &str, prompt: &Prompt) -> Self {
        let schema = prompt.schema.to_string();
        Self::of(&[
            "chat",
            model,
            PROMPT_VERSION,
            prompt.kind.as_str(),
            &prompt.system,
            &prompt.user,
            &schema,
        ])
    }

    /// Key of one text's embedding by a model at a vector length.
    pub fn embedding(model: &str, dim: usize, text: &str) -> Self {
        Self::of(&["embedding", model, &dim.to_string(), text])
    }

    /// Length-prefixed parts, so that no two part lists hash alike.
    fn of(parts: &[&str]) -> Self {
        let mut h = Sha256::new();
        for p in parts {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        CacheKey(h.finalize().into())
    }

    /// Lower-case hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The cache file. Share one handle (`Arc`) between the chat and embedding
/// adapters: a redb file can be open only once per process.
pub struct ResponseCache {
    db: Database,
    path: PathBuf,
}

impl std::fmt::Debug for ResponseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseCache")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ResponseCache {
    /// Opens (or creates) the cache file, creating its directory if needed.
    pub fn open(path: impl AsRef<Path>) -> Result<Arc<Self>, SetupError> {
        let path = path.as_ref().to_path_buf();
        let fail = |e: redb::Error| SetupError::Cache {
            path: path.clone(),
            source: Box::new(e),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| SetupError::Cache {
                path: path.clone(),
                source: Box::new(e),
            })?;
        }
        let db = Database::create(&path).map_err(|e| fail(e.into()))?;
        let tx = db.begin_write().map_err(|e| fail(e.into()))?;
        tx.open_table(ANSWERS).map_err(|e| fail(e.into()))?;
        tx.open_table(EMBEDDINGS).map_err(|e| fail(e.into()))?;
        tx.commit().map_err(|e| fail(e.into()))?;
        Ok(Arc::new(ResponseCache { db, path }))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A cached chat answer.
    pub fn answer(&self, key: &CacheKey) -> Result<Option<String>, redb::Error> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(ANSWERS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(table.get(key.0.as_slice())?.map(|v| v.value().to_owned()))
    }

    /// Stores a chat answer (durably: the commit is synced).
    pub fn put_answer(&self, key: &CacheKey, answer: &str) -> Result<(), redb::Error> {
        let tx = self.db.begin_write()?;
        tx.open_table(ANSWERS)?.insert(key.0.as_slice(), answer)?;
        tx.commit()?;
        Ok(())
    }

    /// Cached embeddings, one slot per key.
    pub fn embeddings(&self, keys: &[CacheKey]) -> Result<Vec<Option<Vec<f32>>>, redb::Error> {
        let tx = self.db.begin_read()?;
        let table = match tx.open_table(EMBEDDINGS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(vec![None; keys.len()]),
            Err(e) => return Err(e.into()),
        };
        keys.iter()
            .map(|k| {
                Ok(table.get(k.0.as_slice())?.map(|v| {
                    v.value()
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect()
                }))
            })
            .collect()
    }

    /// Stores embeddings in one transaction.
    pub fn put_embeddings(&self, entries: &[(CacheKey, &[f32])]) -> Result<(), redb::Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let tx = self.db.begin_write()?;
        {
            let mut table = tx.open_table(EMBEDDINGS)?;
            for (k, v) in entries {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                table.insert(k.0.as_slice(), bytes.as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_engine::ports::PromptKind;
    use serde_json::json;

    fn prompt(user: &str) -> Prompt {
        Prompt {
            kind: PromptKind::Rerank,
            system: "s".into(),
            user: user.into(),
            schema: json!({}),
        }
    }

    #[test]
    fn keys_separate_every_input() {
        let a = CacheKey::chat("m", &prompt("u"));
        assert_eq!(a, CacheKey::chat("m", &prompt("u")));
        assert_ne!(a, CacheKey::chat("m2", &prompt("u")));
        assert_ne!(a, CacheKey::chat("m", &prompt("u2")));
        let mut other_kind = prompt("u");
        other_kind.kind = PromptKind::Extract;
        assert_ne!(a, CacheKey::chat("m", &other_kind));
        assert_ne!(CacheKey::of(&["ab", "c"]), CacheKey::of(&["a", "bc"]));
        assert_eq!(a.to_hex().len(), 64);
    }

    #[test]
    fn survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/cache.redb");
        let k = CacheKey::chat("m", &prompt("u"));
        let e = CacheKey::embedding("m", 2, "text");
        {
            let c = ResponseCache::open(&path).unwrap();
            assert_eq!(c.answer(&k).unwrap(), None);
            c.put_answer(&k, "{\"answers\":[]}").unwrap();
            c.put_embeddings(&[(e, &[0.6, -0.8][..])]).unwrap();
        }
        let c = ResponseCache::open(&path).unwrap();
        assert_eq!(c.answer(&k).unwrap().as_deref(), Some("{\"answers\":[]}"));
        assert_eq!(
            c.embeddings(&[e, k]).unwrap(),
            vec![Some(vec![0.6, -0.8]), None]
        );
    }
}
