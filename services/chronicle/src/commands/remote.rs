//! CLI reads through a running server (see [`crate::served`]): the same
//! questions as the local reads, asked over its HTTP API, with the token in
//! `CHRONICLE_TOKEN` when the server checks tokens.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use chronicle_query::{CommunityView, MemoryContext, ResultItem, SagaView, SearchResults};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::read::SearchArgs;
use crate::app::decode::MAX_LIST;
use crate::cli::TimeArgs;
use crate::served;

/// The environment variable holding the bearer token for a server with `--auth`.
pub const TOKEN_VAR: &str = "CHRONICLE_TOKEN";

/// A running server's API.
pub struct Remote {
    url: String,
    client: reqwest::Client,
    token: Option<String>,
}

/// The facts of one listing; `truncated` when more matched than it holds.
#[derive(Deserialize)]
pub struct FactPage {
    /// The facts.
    pub facts: Vec<ResultItem>,
    /// Whether more matched.
    pub truncated: bool,
}

/// How long a CLI read waits for the announced server's health check.
const PROBE: Duration = Duration::from_secs(1);

impl Remote {
    /// The server running on `data`: the one it announces (see
    /// [`crate::served`]), if it answers its health check; a stale
    /// announcement (a killed server) is ignored.
    pub async fn find(data: &Path) -> Option<Remote> {
        let url = served::announced(data)?;
        let client = reqwest::Client::new();
        let healthy = (client.get(format!("{url}/healthz")).timeout(PROBE))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        healthy.then(|| Remote {
            url,
            client,
            token: std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty()),
        })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let request = match &self.token {
            Some(t) => request.bearer_auth(t),
            None => request,
        };
        let reply = request
            .send()
            .await
            .with_context(|| format!("asking the server at {}", self.url))?;
        let status = reply.status();
        let body = reply.bytes().await.context("reading the server's answer")?;
        if status.is_success() {
            return serde_json::from_slice(&body).context("decoding the server's answer");
        }
        let error: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let message = error["error"].as_str().unwrap_or("no message");
        let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
            format!(" (the server checks tokens: set {TOKEN_VAR})")
        } else {
            String::new()
        };
        anyhow::bail!(
            "the server at {} answered {status}: {message}{hint}",
            self.url
        )
    }

    /// The server's URL of a path whose segments may hold any character
    /// (names are percent-encoded, never read as separators).
    fn url_of(&self, segments: &[&str]) -> anyhow::Result<reqwest::Url> {
        let mut url = reqwest::Url::parse(&self.url).context("the announced server URL")?;
        url.path_segments_mut()
            .map_err(|()| anyhow::anyhow!("the announced server URL {} has no path", self.url))?
            .extend(segments);
        Ok(url)
    }

    /// `GET /facts` with the CLI's filters (at most [`MAX_LIST`] facts).
    pub async fn facts(
        &self,
        group: &str,
        entity: Option<&str>,
        t: &TimeArgs,
    ) -> anyhow::Result<FactPage> {
        let mut query: Vec<(&str, String)> = vec![("limit", MAX_LIST.to_string())];
        query.extend(entity.map(|e| ("entity", e.to_owned())));
        query.extend(t.as_of.clone().map(|v| ("as_of", v)));
        query.extend(t.known_at.clone().map(|v| ("known_at", v)));
        if t.include_history {
            query.push(("include_history", "true".into()));
        }
        let url = format!("{}/v1/groups/{group}/facts", self.url);
        self.call(self.client.get(url).query(&query)).await
    }

    /// `POST /search` with the CLI's arguments.
    pub async fn search(&self, a: &SearchArgs<'_>) -> anyhow::Result<SearchResults> {
        let mut filters = serde_json::Map::new();
        if !a.edge_types.is_empty() {
            filters.insert("edge_types".into(), json!(a.edge_types));
        }
        if !a.labels.is_empty() {
            filters.insert("node_labels".into(), json!(a.labels));
        }
        let body = json!({
            "query": a.query,
            "recipe": a.recipe,
            "center": a.center,
            "limit": a.limit,
            "filters": filters,
            "as_of": a.time.as_of,
            "known_at": a.time.known_at,
            "include_history": a.time.include_history,
        });
        let url = format!("{}/v1/groups/{}/search", self.url, a.group);
        self.call(self.client.post(url).json(&body)).await
    }

    /// `GET /stats` of one group, or `GET /v1/stats` over all.
    pub async fn stats(&self, group: Option<&str>) -> anyhow::Result<chronicle_store::Totals> {
        let url = match group {
            Some(g) => format!("{}/v1/groups/{g}/stats", self.url),
            None => format!("{}/v1/stats", self.url),
        };
        self.call(self.client.get(url)).await
    }

    /// `GET /entities/{name}/timeline`: the entity and its facts.
    pub async fn timeline(
        &self,
        group: &str,
        entity: &str,
    ) -> anyhow::Result<(chronicle_model::Entity, Vec<ResultItem>)> {
        #[derive(Deserialize)]
        struct Timeline {
            entity: chronicle_model::Entity,
            facts: Vec<ResultItem>,
        }
        let url = self.url_of(&["v1", "groups", group, "entities", entity, "timeline"])?;
        let t: Timeline = self.call(self.client.get(url)).await?;
        Ok((t.entity, t.facts))
    }

    /// `GET /communities`: the group's communities, largest first.
    pub async fn communities(&self, group: &str) -> anyhow::Result<Vec<CommunityView>> {
        #[derive(Deserialize)]
        struct List {
            communities: Vec<CommunityView>,
        }
        let url = format!("{}/v1/groups/{group}/communities", self.url);
        let list: List = self.call(self.client.get(url)).await?;
        Ok(list.communities)
    }

    /// `GET /sagas/{name}`.
    pub async fn saga(&self, group: &str, name: &str) -> anyhow::Result<SagaView> {
        let url = self.url_of(&["v1", "groups", group, "sagas", name])?;
        self.call(self.client.get(url)).await
    }

    /// `GET /status` of one group.
    pub async fn status(&self, group: &str) -> anyhow::Result<crate::app::GroupStatus> {
        let url = format!("{}/v1/groups/{group}/status", self.url);
        self.call(self.client.get(url)).await
    }

    /// `POST /context` with the CLI's arguments.
    pub async fn context(
        &self,
        group: &str,
        query: &str,
        max_chars: usize,
        t: &TimeArgs,
    ) -> anyhow::Result<MemoryContext> {
        let body = json!({ "query": query, "max_chars": max_chars, "as_of": t.as_of });
        let url = format!("{}/v1/groups/{group}/context", self.url);
        self.call(self.client.post(url).json(&body)).await
    }
}
