//! A running `serve` holds its data directory (the embedded engines allow
//! one process), so it announces its address there; CLI reads find it and
//! ask the server instead of failing on the lock or reading a stale copy.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The announcement's file, in the data directory.
const FILE: &str = "server.json";

/// What a running server writes.
#[derive(Debug, Serialize, Deserialize)]
struct Announcement {
    /// `http://ADDR` of its API.
    url: String,
    /// Its process id (for people reading the file).
    pid: u32,
}

fn path(data: &Path) -> PathBuf {
    data.join(FILE)
}

/// Announces `url` as the server of `data` (written whole, then renamed,
/// so a reader never sees half of it).
pub fn announce(data: &Path, url: &str) -> std::io::Result<()> {
    let tmp = data.join(format!("{FILE}.tmp"));
    let body = serde_json::to_vec(&Announcement {
        url: url.to_owned(),
        pid: std::process::id(),
    })?;
    std::fs::write(&tmp, body)?;
    std::fs::rename(tmp, path(data))
}

/// Withdraws the announcement (a server that stopped cleanly).
pub fn withdraw(data: &Path) {
    let _ = std::fs::remove_file(path(data));
}

/// The URL announced in `data`, if any (the server may have died since:
/// ask its health check before trusting it).
pub fn announced(data: &Path) -> Option<String> {
    let text = std::fs::read(path(data)).ok()?;
    let a: Announcement = serde_json::from_slice(&text).ok()?;
    Some(a.url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_or_missing_announcement_names_no_server() {
        use crate::commands::Remote;
        let dir = tempfile::tempdir().unwrap();
        assert!(Remote::find(dir.path()).await.is_none());
        // Nothing listens on port 9 of loopback (discard), or it refuses.
        announce(dir.path(), "http://127.0.0.1:9").unwrap();
        assert_eq!(announced(dir.path()).as_deref(), Some("http://127.0.0.1:9"));
        assert!(Remote::find(dir.path()).await.is_none());
        withdraw(dir.path());
        assert!(!path(dir.path()).exists());
    }
}
