//! The index's own metadata file: what a directory was built for.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::IndexError;

const FILE: &str = "chronicle-index.json";
/// Bumped when the on-disk layout or the text analysis changes
/// incompatibly (3: stop words leave the text). An index of an older format
/// is a projection like any other: it is cleared and re-filled from the
/// store, the way a lost index directory is.
const FORMAT: u32 = 3;

#[derive(Serialize, Deserialize)]
struct Meta {
    format: u32,
    dimension: usize,
}

/// Checks that `dir` was built for `dimension`, or records it if `dir` is
/// new (or of an older format, cleared first). Returns whether the
/// directory is new.
pub(crate) fn ensure(dir: &Path, text_dir: &Path, dimension: usize) -> Result<bool, IndexError> {
    let path = dir.join(FILE);
    match fs::read(&path) {
        Ok(bytes) => {
            let meta: Meta = serde_json::from_slice(&bytes).map_err(|source| IndexError::Meta {
                path: path.clone(),
                source,
            })?;
            if meta.format < FORMAT {
                tracing::warn!(
                    path = %dir.display(),
                    found = meta.format,
                    format = FORMAT,
                    "index of an older format: cleared, to be re-filled from the store"
                );
                fs::remove_dir_all(text_dir)
                    .or_else(|e| match e.kind() {
                        std::io::ErrorKind::NotFound => Ok(()),
                        _ => Err(e),
                    })
                    .map_err(|source| IndexError::Io {
                        path: text_dir.to_path_buf(),
                        source,
                    })?;
                write_atomically(dir, &path, dimension)?;
                return Ok(true);
            }
            if meta.format != FORMAT {
                return Err(IndexError::UnsupportedFormat {
                    path: dir.to_path_buf(),
                    found: meta.format,
                    supported: FORMAT,
                });
            }
            if meta.dimension != dimension {
                return Err(IndexError::DimensionMismatch {
                    path: dir.to_path_buf(),
                    on_disk: meta.dimension,
                    requested: dimension,
                });
            }
            Ok(false)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if text_dir.join("meta.json").exists() {
                return Err(IndexError::MissingMeta {
                    path: dir.to_path_buf(),
                });
            }
            write_atomically(dir, &path, dimension)?;
            Ok(true)
        }
        Err(source) => Err(IndexError::Io { path, source }),
    }
}

/// Writes through a temporary file and a rename, both synced, so a crash
/// leaves either no metadata or whole metadata.
fn write_atomically(dir: &Path, path: &Path, dimension: usize) -> Result<(), IndexError> {
    let io = |path: &Path| {
        let path: PathBuf = path.to_path_buf();
        move |source| IndexError::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!("{FILE}.tmp"));
    let bytes = serde_json::to_vec(&Meta {
        format: FORMAT,
        dimension,
    })
    .map_err(|source| IndexError::Meta {
        path: path.to_path_buf(),
        source,
    })?;
    let mut file = fs::File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(&bytes).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    fs::rename(&tmp, path).map_err(io(path))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))?;
    Ok(())
}
