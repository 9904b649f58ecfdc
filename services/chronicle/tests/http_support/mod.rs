//! A real server on loopback for the HTTP tests: an embedded node in a
//! temporary directory (offline extractor, hashed embedder), its processor
//! and projector running, and a reqwest client.

#![allow(dead_code)]

use std::time::Duration;

use chronicle::app::auth::Auth;
use chronicle::config::{EmbedderKind, ExtractorKind, Settings};
use chronicle::http::{HttpOptions, Server};
use chronicle::node::Node;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// A running server and a client for it.
pub struct TestServer {
    /// The server (its node, its roles).
    pub server: Server,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// A client.
    pub client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    /// Status.
    pub status: StatusCode,
    /// Body as text.
    pub text: String,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text))
    }
}

/// Starts a server; `auth` is a tokens file's text.
pub async fn start(auth: Option<&str>, max_body_bytes: Option<usize>) -> TestServer {
    let defaults = HttpOptions::default();
    start_with(HttpOptions {
        auth: auth.map(|a| Auth::parse(a).expect("tokens")),
        max_body_bytes: max_body_bytes.unwrap_or(defaults.max_body_bytes),
        ..defaults
    })
    .await
}

/// Starts a server with these options.
pub async fn start_with(options: HttpOptions) -> TestServer {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = Settings::embedded(dir.path(), ExtractorKind::Offline, EmbedderKind::Hash);
    let node = Node::open(settings).await.expect("node");
    let server = Server::start(node, options, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("server");
    TestServer {
        url: server.url(),
        server,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client"),
        _dir: dir,
    }
}

impl TestServer {
    /// Sends a request; `body` is sent as raw bytes (JSON or not).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Reply {
        let mut req = self.client.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b);
        }
        let r = req.send().await.expect("request");
        let status = r.status();
        let headers = r.headers().clone();
        let text = r.text().await.expect("body");
        Reply {
            status,
            text,
            headers,
        }
    }

    /// GET.
    pub async fn get(&self, path: &str, token: Option<&str>) -> Reply {
        self.send(Method::GET, path, token, None).await
    }

    /// POST a JSON value.
    pub async fn post(&self, path: &str, token: Option<&str>, body: &Value) -> Reply {
        self.send(
            Method::POST,
            path,
            token,
            Some(serde_json::to_vec(body).expect("json")),
        )
        .await
    }

    /// Waits until everything appended so far is decided and projected.
    pub async fn settle(&mut self) {
        tokio::time::timeout(Duration::from_secs(120), self.server.wait_caught_up())
            .await
            .expect("caught up in time")
            .expect("roles running");
    }

    /// Sum of the episodes log's end offsets (what was ever appended).
    pub async fn appended(&self) -> u64 {
        let node = self.server.node();
        node.end_offsets(&node.topics.episodes)
            .await
            .expect("offsets")
            .values()
            .sum()
    }

    /// Stops the server and its roles.
    pub async fn stop(self) {
        self.server.stop().await.expect("clean stop");
    }
}

/// Checks a JSON value against a schema of the OpenAPI document: types,
/// `const` and `enum`, required properties, no undocumented properties,
/// recursively through `$ref`, arrays, `oneOf`/`anyOf` (a variant's
/// properties add to its parent's: that is how a flattened enum reads).
/// Returns what does not match.
pub fn conforms(doc: &Value, schema: &Value, value: &Value, at: &str) -> Vec<String> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.trim_start_matches("#/components/schemas/");
        return conforms(doc, &doc["components"]["schemas"][name], value, at);
    }
    let options = ["oneOf", "anyOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(Value::as_array));
    if let Some(options) = options {
        let fits: Vec<Vec<String>> = options
            .iter()
            .map(|o| conforms(doc, &with_variant(doc, schema, o), value, at))
            .collect();
        return if fits.iter().any(Vec::is_empty) {
            Vec::new()
        } else {
            vec![format!("{at}: fits no variant: {fits:?}")]
        };
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        return vec![format!("{at}: {value}, documented the constant {c}")];
    }
    let mut problems = Vec::new();
    if let Some(t) = schema.get("type") {
        let types: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let ok = types.contains(&actual) || (actual == "integer" && types.contains(&"number"));
        if !ok {
            problems.push(format!("{at}: {actual}, documented {types:?}"));
            return problems;
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(value)
    {
        problems.push(format!("{at}: {value} not in {values:?}"));
    }
    if let (Some(props), Some(obj)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for req in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !obj.contains_key(req) {
                problems.push(format!("{at}: missing required `{req}`"));
            }
        }
        for (k, v) in obj {
            match props.get(k) {
                Some(s) => problems.extend(conforms(doc, s, v, &format!("{at}.{k}"))),
                None => problems.push(format!("{at}: undocumented property `{k}`")),
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            problems.extend(conforms(doc, items, v, &format!("{at}[{i}]")));
        }
    }
    problems
}

/// A parent schema with one of its variants merged in (and its variant
/// list dropped): properties and required lists united.
fn with_variant(doc: &Value, parent: &Value, variant: &Value) -> Value {
    let variant = match variant.get("$ref").and_then(Value::as_str) {
        Some(r) => &doc["components"]["schemas"][r.trim_start_matches("#/components/schemas/")],
        None => variant,
    };
    let mut merged = parent.clone();
    let Some(m) = merged.as_object_mut() else {
        return variant.clone();
    };
    m.remove("oneOf");
    m.remove("anyOf");
    for (k, v) in variant.as_object().into_iter().flatten() {
        match (k.as_str(), m.get_mut(k)) {
            ("properties", Some(Value::Object(p))) => {
                p.extend(
                    v.as_object()
                        .into_iter()
                        .flatten()
                        .map(|(a, b)| (a.clone(), b.clone())),
                );
            }
            ("required", Some(Value::Array(r))) => {
                r.extend(v.as_array().into_iter().flatten().cloned());
            }
            _ => {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    merged
}
