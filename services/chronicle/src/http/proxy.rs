//! Routing in distributed mode: each projector owns some graph-events
//! partitions and keeps the graph and indices of their groups, so a group's
//! reads must reach the projector that owns its partition.
//!
//! Projectors announce ownership on the `<prefix>.owners` topic (key: the
//! partition; payload: the projector's URL), whenever their assignment
//! changes and every few seconds. The gateway and query roles read that
//! topic (the newest announcement of a partition wins), compute a group's
//! partition with the same murmur2 partitioner as the log, and forward the
//! request — method, path, query, `Authorization` and body — to the owner,
//! which authenticates and answers it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chronicle_log::{EventLog, NewRecord};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;

use crate::app::error::ApiError;

/// How long an ownership map is trusted before it is re-read.
const REFRESH: Duration = Duration::from_secs(2);

/// One projector's claim on a partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ownership {
    /// The graph-events partition.
    pub partition: u32,
    /// Where the owner serves the HTTP API.
    pub url: String,
}

/// The owners topic of a topic prefix.
pub fn owners_topic(prefix: &str) -> String {
    format!("{prefix}.owners")
}

/// Announces that `url` owns `partitions`.
pub async fn announce(
    log: &dyn EventLog,
    topic: &str,
    url: &str,
    partitions: &[u32],
) -> anyhow::Result<()> {
    if partitions.is_empty() {
        return Ok(());
    }
    let records = partitions
        .iter()
        .map(|p| {
            let claim = Ownership {
                partition: *p,
                url: url.to_owned(),
            };
            Ok(NewRecord {
                key: p.to_string().into_bytes(),
                payload: serde_json::to_vec(&claim)?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    log.append(topic, records, None).await?;
    Ok(())
}

/// Who owns which partition, read from the owners topic.
pub struct Directory {
    log: Arc<dyn EventLog>,
    topic: String,
    graph_events: String,
    client: reqwest::Client,
    cache: RwLock<(Option<Instant>, BTreeMap<u32, String>, u32)>,
}

impl Directory {
    /// A directory over `prefix`'s topics.
    pub fn new(log: Arc<dyn EventLog>, prefix: &str) -> Self {
        Directory {
            log,
            topic: owners_topic(prefix),
            graph_events: format!("{prefix}.graph-events"),
            client: reqwest::Client::new(),
            cache: RwLock::new((None, BTreeMap::new(), 0)),
        }
    }

    async fn refresh(&self) -> anyhow::Result<()> {
        let partitions = self.log.partition_count(&self.graph_events).await?;
        let mut owners = BTreeMap::new();
        for p in 0..self.log.partition_count(&self.topic).await? {
            let end = self.log.end_offset(&self.topic, p).await?;
            let mut offset = 0;
            while offset < end {
                let records = self
                    .log
                    .read(&self.topic, p, offset, 1000, Duration::ZERO)
                    .await?;
                let Some(last) = records.last() else { break };
                offset = last.offset + 1;
                for r in records {
                    if let Ok(claim) = serde_json::from_slice::<Ownership>(&r.payload) {
                        owners.insert(claim.partition, claim.url);
                    }
                }
            }
        }
        *self.cache.write().await = (Some(Instant::now()), owners, partitions);
        Ok(())
    }

    /// The URL of the projector that owns `group`'s partition.
    pub async fn owner(&self, group: &str, fresh: bool) -> anyhow::Result<Option<String>> {
        let stale = self
            .cache
            .read()
            .await
            .0
            .is_none_or(|t| t.elapsed() > REFRESH);
        if stale || fresh {
            self.refresh().await?;
        }
        let cache = self.cache.read().await;
        if cache.2 == 0 {
            return Ok(None);
        }
        let p = chronicle_log::partition_for(group.as_bytes(), cache.2);
        Ok(cache.1.get(&p).cloned())
    }

    /// Forwards a request for `group` to its owner.
    pub async fn forward(&self, group: &str, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let body = match axum::body::to_bytes(body, 64 * 1024 * 1024).await {
            Ok(b) => b,
            Err(_) => {
                return ApiError::bad_request("body", "unreadable or too large request body")
                    .into_response();
            }
        };
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_owned();
        for attempt in 0..2 {
            let owner = match self.owner(group, attempt > 0).await {
                Ok(Some(url)) => url,
                Ok(None) => {
                    return unavailable(&format!(
                        "no projector owns the partition of group `{group}` yet; retry shortly"
                    ));
                }
                Err(e) => return unavailable(&format!("cannot read the ownership directory: {e}")),
            };
            let mut outgoing = self
                .client
                .request(parts.method.clone(), format!("{owner}{path}"))
                .body(body.clone());
            for name in [header::AUTHORIZATION, header::CONTENT_TYPE, header::ACCEPT] {
                if let Some(v) = parts.headers.get(&name) {
                    outgoing = outgoing.header(name, v);
                }
            }
            match outgoing.send().await {
                Ok(answer) => {
                    let status = StatusCode::from_u16(answer.status().as_u16())
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
                    let bytes = answer.bytes().await.unwrap_or_default();
                    let mut response = Response::new(Body::from(bytes));
                    *response.status_mut() = status;
                    if let Some(ct) =
                        content_type.and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok())
                    {
                        response.headers_mut().insert(header::CONTENT_TYPE, ct);
                    }
                    return response;
                }
                Err(e) if attempt == 0 => {
                    tracing::warn!(%owner, error = %e, "owner unreachable; re-reading the directory")
                }
                Err(e) => {
                    return unavailable(&format!(
                        "the owner of group `{group}` at {owner} is unreachable: {e}"
                    ));
                }
            }
        }
        unavailable("no reachable owner")
    }
}

fn unavailable(message: &str) -> Response {
    let mut r = ApiError::bad_request("group_id", message).into_response();
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r
}

/// The group of a `/v1/groups/{group_id}/...` path.
pub fn group_of(path: &str) -> Option<&str> {
    path.strip_prefix("/v1/groups/")?
        .split('/')
        .next()
        .filter(|g| !g.is_empty())
}

/// Writes a gateway handles itself (they only append to the log).
fn is_write(method: &axum::http::Method, path: &str) -> bool {
    let rest = path
        .strip_prefix("/v1/groups/")
        .and_then(|r| r.split_once('/'))
        .map(|(_, r)| r)
        .unwrap_or("");
    match *method {
        axum::http::Method::POST => rest == "episodes" || rest == "triplets",
        axum::http::Method::DELETE => rest.starts_with("episodes/"),
        _ => false,
    }
}

/// Gateway middleware: appends locally, forwards every other group request.
pub async fn forward_reads(
    State(directory): State<Arc<Directory>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    match group_of(&path) {
        Some(group) if !is_write(request.method(), &path) => {
            let group = group.to_owned();
            directory.forward(&group, request).await
        }
        _ => next.run(request).await,
    }
}

/// Query role: forwards every group request to its owner.
pub async fn forward_all(State(directory): State<Arc<Directory>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    match group_of(&path) {
        Some(group) => {
            let group = group.to_owned();
            directory.forward(&group, request).await
        }
        None => ApiError::not_found(
            "path",
            "no such route; group routes live under /v1/groups/{group_id}",
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_writes() {
        assert_eq!(group_of("/v1/groups/t1/search"), Some("t1"));
        assert_eq!(group_of("/v1/groups/"), None);
        assert_eq!(group_of("/healthz"), None);
        let post = axum::http::Method::POST;
        assert!(is_write(&post, "/v1/groups/t1/episodes"));
        assert!(is_write(&post, "/v1/groups/t1/triplets"));
        assert!(!is_write(&post, "/v1/groups/t1/search"));
        assert!(is_write(
            &axum::http::Method::DELETE,
            "/v1/groups/t1/episodes/x"
        ));
        assert!(!is_write(
            &axum::http::Method::GET,
            "/v1/groups/t1/episodes"
        ));
    }
}
