//! A running `serve` holds its data directory (the embedded engines allow
//! one process), so it announces its address there; CLI reads find it and
//! ask the server instead of failing on the lock or reading a stale copy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The announcement's file, in the data directory.
const FILE: &str = "server.json";

/// How long a CLI read waits for the announced server's health check.
const PROBE: Duration = Duration::from_secs(1);

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

/// The URL of the server running on `data`, if one announced itself and
/// answers its health check; a stale file (a killed server) is ignored.
pub async fn running(data: &Path) -> Option<String> {
    let text = std::fs::read(path(data)).ok()?;
    let a: Announcement = serde_json::from_slice(&text).ok()?;
    let client = reqwest::Client::builder().timeout(PROBE).build().ok()?;
    let healthy = client
        .get(format!("{}/healthz", a.url))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    healthy.then_some(a.url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_or_missing_announcement_names_no_server() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(running(dir.path()).await, None);
        // Nothing listens on port 9 of loopback (discard), or it refuses.
        announce(dir.path(), "http://127.0.0.1:9").unwrap();
        assert_eq!(running(dir.path()).await, None);
        withdraw(dir.path());
        assert!(!path(dir.path()).exists());
    }
}
