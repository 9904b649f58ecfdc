//! A fake OpenAI-compatible server on loopback, for tests and for
//! benchmarks that must leave model latency out (`chronicle bench ingest`).
//!
//! It speaks the chat-completions and embeddings wire format, answers
//! instantly through a pluggable responder, counts requests and prompt
//! characters per endpoint, and can inject failures from a script: an HTTP
//! status (429, 500, ...), an answer that is not JSON, a chosen answer, a
//! delay, or — like llama.cpp's server — a 500 for every `json_schema`
//! request. It stops when dropped.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chronicle_engine::ports::PromptKind;
use serde_json::{Value, json};

use crate::config::OpenAiConfig;
use crate::embed::HashEmbedder;
use crate::prompts;

/// Chat requests kept for inspection (the oldest are dropped beyond this).
const LOG_LIMIT: usize = 1_000;

/// One chat message as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct SeenMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// Its text (text parts joined).
    pub content: String,
}

/// A chat-completions request as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequestSeen {
    /// The requested model.
    pub model: String,
    /// The messages, in order.
    pub messages: Vec<SeenMessage>,
    /// `response_format.type`: `json_schema`, `json_object`, `text`, or none.
    pub response_format: Option<String>,
    /// `response_format.json_schema.name`, if any.
    pub schema_name: Option<String>,
    /// The whole request body.
    pub body: Value,
    /// The request headers (names lower-case).
    pub headers: Vec<(String, String)>,
}

impl ChatRequestSeen {
    fn parse(body: Value, headers: &HeaderMap) -> Option<Self> {
        let messages = body
            .get("messages")?
            .as_array()?
            .iter()
            .map(|m| SeenMessage {
                role: m
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                content: content_text(m.get("content")),
            })
            .collect();
        let format = body.get("response_format");
        Some(ChatRequestSeen {
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            messages,
            response_format: format
                .and_then(|f| f.get("type"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            schema_name: format
                .and_then(|f| f.pointer("/json_schema/name"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            body,
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
        })
    }

    /// The value of a request header.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The first system message (empty if none).
    pub fn system(&self) -> &str {
        self.first("system")
    }

    /// The first user message (empty if none).
    pub fn user(&self) -> &str {
        self.first("user")
    }

    fn first(&self, role: &str) -> &str {
        self.messages
            .iter()
            .find(|m| m.role == role)
            .map(|m| m.content.as_str())
            .unwrap_or_default()
    }

    /// Characters of all messages.
    pub fn prompt_chars(&self) -> usize {
        self.messages
            .iter()
            .map(|m| m.content.chars().count())
            .sum()
    }

    /// The prompt kind, from the schema name (`json_schema` mode) or the
    /// schema written into the instructions (`json_object` mode).
    pub fn kind(&self) -> Option<PromptKind> {
        let name = self
            .schema_name
            .as_deref()
            .or_else(|| prompts::schema_name_in(self.system()))?;
        PromptKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The current episode's content, between the episode tags.
    pub fn current_episode(&self) -> Option<&str> {
        prompts::current_episode(self.user())
    }

    /// How many `#id` items the request asks about.
    pub fn item_count(&self) -> usize {
        prompts::item_count(self.user())
    }

    /// Whether this is a retry telling the model its last answer was invalid.
    pub fn is_correction(&self) -> bool {
        self.messages.iter().any(|m| m.role == "assistant")
    }
}

fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What the responder answers.
#[derive(Clone, Debug, PartialEq)]
pub enum FakeReply {
    /// A JSON value, sent as the message content.
    Json(Value),
    /// Any message content.
    Text(String),
    /// An HTTP error with an OpenAI error body.
    Error {
        /// HTTP status.
        status: u16,
        /// The error message.
        message: String,
    },
}

/// Answers a chat request.
pub type ChatResponder = Arc<dyn Fn(&ChatRequestSeen) -> FakeReply + Send + Sync>;
/// The (not necessarily unit-length) vector of one embeddings input.
pub type EmbeddingResponder = Arc<dyn Fn(&str) -> Vec<f32> + Send + Sync>;

/// An injected failure, consumed by the next request to its endpoint.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Answer with this HTTP status and an OpenAI error body.
    Status(u16),
    /// Answer 200 with message content that is not JSON (embeddings: a
    /// body that is not JSON).
    InvalidJson,
    /// Answer 200 with this message content instead of the responder's
    /// (embeddings: like `InvalidJson`).
    Reply(String),
    /// Wait this long, then answer normally (for timeouts).
    Delay(Duration),
}

/// Which endpoint a fault applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/embeddings`.
    Embeddings,
}

/// Request counts per endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FakeStats {
    /// Chat requests received (failed ones included).
    pub chat_requests: usize,
    /// Characters of all messages of all chat requests.
    pub chat_prompt_chars: usize,
    /// Embeddings requests received.
    pub embedding_requests: usize,
    /// Texts in all embeddings requests.
    pub embedding_texts: usize,
    /// Characters of those texts.
    pub embedding_chars: usize,
    /// Most chat requests being answered at once.
    pub max_chat_in_flight: usize,
}

struct Inner {
    responder: ChatResponder,
    embedder: EmbeddingResponder,
    embedding_dim: usize,
    chat_faults: VecDeque<Fault>,
    embedding_faults: VecDeque<Fault>,
    reject_json_schema: bool,
    stats: FakeStats,
    chat_in_flight: usize,
    log: VecDeque<ChatRequestSeen>,
}

#[derive(Clone)]
struct Shared(Arc<Mutex<Inner>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking responder must not wedge the server for the other tests.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The fake server. Dropping it stops it.
pub struct FakeOpenAi {
    addr: SocketAddr,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for FakeOpenAi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeOpenAi")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenAi {
    /// Starts on `127.0.0.1:0` with [`minimal_reply`] and 384-dimensional
    /// hashed embeddings.
    pub async fn start() -> std::io::Result<Self> {
        Self::with_responder(Arc::new(minimal_reply)).await
    }

    /// Starts with a chat responder of your own.
    pub async fn with_responder(responder: ChatResponder) -> std::io::Result<Self> {
        let dim = HashEmbedder::DEFAULT_DIM;
        let shared = Shared(Arc::new(Mutex::new(Inner {
            responder,
            embedder: hashed_embeddings(dim),
            embedding_dim: dim,
            chat_faults: VecDeque::new(),
            embedding_faults: VecDeque::new(),
            reject_json_schema: false,
            stats: FakeStats::default(),
            chat_in_flight: 0,
            log: VecDeque::new(),
        })));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings))
            .route("/embeddings", post(embeddings))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "fake OpenAI server stopped");
            }
        });
        Ok(FakeOpenAi { addr, shared, task })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// A configuration pointing here: model `fake`, embeddings of this
    /// server's dimension, millisecond backoff, no cache.
    pub fn config(&self) -> OpenAiConfig {
        let mut c = OpenAiConfig::new(self.base_url());
        c.model = "fake".into();
        c.embedding_model = "fake-embedding".into();
        c.embedding_dim = self.shared.lock().embedding_dim;
        c.initial_backoff = Duration::from_millis(1);
        c.max_backoff = Duration::from_millis(20);
        c.request_timeout = Duration::from_secs(10);
        c
    }

    /// Replaces the chat responder.
    pub fn set_responder(&self, responder: ChatResponder) {
        self.shared.lock().responder = responder;
    }

    /// Replaces the embeddings responder; `dim` is what [`config`](Self::config) will announce.
    pub fn set_embedder(&self, dim: usize, embedder: EmbeddingResponder) {
        let mut s = self.shared.lock();
        s.embedding_dim = dim;
        s.embedder = embedder;
    }

    /// Queues a failure for the next request to `endpoint`.
    pub fn push_fault(&self, endpoint: Endpoint, fault: Fault) {
        let mut s = self.shared.lock();
        match endpoint {
            Endpoint::Chat => s.chat_faults.push_back(fault),
            Endpoint::Embeddings => s.embedding_faults.push_back(fault),
        }
    }

    /// Like llama.cpp's server: answer every `json_schema` request with HTTP 500.
    pub fn reject_json_schema(&self, reject: bool) {
        self.shared.lock().reject_json_schema = reject;
    }

    /// Counts so far.
    pub fn stats(&self) -> FakeStats {
        self.shared.lock().stats
    }

    /// The last chat requests (up to 1,000), oldest first.
    pub fn chat_log(&self) -> Vec<ChatRequestSeen> {
        self.shared.lock().log.iter().cloned().collect()
    }

    /// Clears counts, log and queued faults.
    pub fn reset(&self) {
        let mut s = self.shared.lock();
        s.stats = FakeStats::default();
        s.log.clear();
        s.chat_faults.clear();
        s.embedding_faults.clear();
    }
}

/// A cheap stand-in for a model, so that benchmarks exercise the whole
/// pipeline: extraction answers, for each `speaker: text` line of the
/// current episode, the speaker and every run of capitalized words in the
/// text (all of type 0), with a `MENTIONS` fact from the speaker to each;
/// every other prompt gets [`minimal_reply`].
pub fn echo_reply(req: &ChatRequestSeen) -> FakeReply {
    if req.kind() != Some(PromptKind::Extract) {
        return minimal_reply(req);
    }
    let Some(content) = req.current_episode() else {
        return FakeReply::Error {
            status: 400,
            message: "no current episode in the prompt".into(),
        };
    };
    let mut names: Vec<String> = Vec::new();
    let mut facts = Vec::new();
    let add = |name: &str, names: &mut Vec<String>| {
        if !names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            names.push(name.to_owned());
        }
    };
    for line in content.lines() {
        let (speaker, text) = match line.split_once(':') {
            Some((s, t)) if !s.trim().is_empty() && s.len() <= 40 => (Some(s.trim()), t),
            _ => (None, line),
        };
        if let Some(s) = speaker {
            add(s, &mut names);
        }
        for mention in capitalized_runs(text) {
            add(&mention, &mut names);
            if let Some(s) = speaker.filter(|s| !s.eq_ignore_ascii_case(&mention)) {
                facts.push(json!({
                    "source": s, "target": mention, "relation": "MENTIONS",
                    "fact": format!("{s} mentions {mention}."), "valid_at": null, "invalid_at": null,
                }));
            }
        }
    }
    let entities: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "type_id": 0}))
        .collect();
    FakeReply::Json(json!({"entities": entities, "facts": facts}))
}

/// Runs of capitalized words (`Bob Stone`), without a leading filler word.
fn capitalized_runs(text: &str) -> Vec<String> {
    const FILLERS: [&str; 24] = [
        "I", "A", "An", "The", "Hi", "Hello", "Hey", "Yes", "No", "Ok", "Okay", "Thanks", "Sure",
        "It", "We", "You", "He", "She", "They", "My", "Our", "Your", "This", "That",
    ];
    let mut runs = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).chain([""]) {
        if word.starts_with(char::is_uppercase) && !(current.is_empty() && FILLERS.contains(&word))
        {
            current.push(word);
        } else if !current.is_empty() {
            runs.push(current.join(" "));
            current.clear();
        }
    }
    runs
}

/// A valid, empty-handed answer to any of our prompts: no entities or facts,
/// no duplicates or contradictions, empty summaries, zero scores.
pub fn minimal_reply(req: &ChatRequestSeen) -> FakeReply {
    let n = req.item_count();
    let answers =
        |item: &dyn Fn(usize) -> Value| json!({"answers": (0..n).map(item).collect::<Vec<_>>()});
    FakeReply::Json(match req.kind() {
        Some(PromptKind::Extract) => json!({"entities": [], "facts": []}),
        Some(PromptKind::ResolveEntities) => answers(&|i| json!({"id": i, "duplicate": -1})),
        Some(PromptKind::ResolveFacts) => {
            answers(&|i| json!({"id": i, "duplicate_of": null, "contradicts": []}))
        }
        Some(
            PromptKind::SummarizeEntities
            | PromptKind::SummarizeCommunities
            | PromptKind::SummarizeSaga,
        ) => answers(&|i| json!({"id": i, "summary": ""})),
        Some(PromptKind::Rerank) => answers(&|i| json!({"id": i, "score": 0})),
        None => {
            return FakeReply::Error {
                status: 400,
                message: "the fake server does not know this prompt".into(),
            };
        }
    })
}

/// Hashed bag-of-words vectors scaled by 2.5: deterministic, and deliberately
/// not unit length (clients must normalize).
fn hashed_embeddings(dim: usize) -> EmbeddingResponder {
    let h = HashEmbedder::new(dim);
    Arc::new(move |text| h.embed_one(text).into_iter().map(|x| x * 2.5).collect())
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(status: u16, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind = if status == StatusCode::TOO_MANY_REQUESTS {
        "rate_limit_error"
    } else {
        "invalid_request_error"
    };
    json_response(
        status,
        json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
    )
}

fn completion(model: &str, prompt_chars: usize, content: &str) -> Response {
    let prompt_tokens = prompt_chars.div_ceil(4);
    let completion_tokens = content.len().div_ceil(4);
    json_response(
        StatusCode::OK,
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }),
    )
}

/// Counts a chat request as in flight until dropped.
struct InFlight(Shared);

impl InFlight {
    fn enter(shared: &Shared) -> Self {
        let mut s = shared.lock();
        s.chat_in_flight += 1;
        s.stats.max_chat_in_flight = s.stats.max_chat_in_flight.max(s.chat_in_flight);
        InFlight(shared.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().chat_in_flight -= 1;
    }
}

async fn chat(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let _in_flight = InFlight::enter(&shared);
    let Some(seen) = serde_json::from_slice(&body)
        .ok()
        .and_then(|b| ChatRequestSeen::parse(b, &headers))
    else {
        shared.lock().stats.chat_requests += 1;
        return error_response(400, "the body is not a chat completions request");
    };
    let (fault, reject_schema, responder) = {
        let mut s = shared.lock();
        s.stats.chat_requests += 1;
        s.stats.chat_prompt_chars += seen.prompt_chars();
        if s.log.len() == LOG_LIMIT {
            s.log.pop_front();
        }
        s.log.push_back(seen.clone());
        (
            s.chat_faults.pop_front(),
            s.reject_json_schema,
            s.responder.clone(),
        )
    };
    let chars = seen.prompt_chars();
    match fault {
        Some(Fault::Status(status)) => return error_response(status, "injected failure"),
        Some(Fault::InvalidJson) => {
            return completion(
                &seen.model,
                chars,
                "Sure! Here are the entities: Alice, Bob",
            );
        }
        Some(Fault::Reply(content)) => return completion(&seen.model, chars, &content),
        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    if reject_schema && seen.response_format.as_deref() == Some("json_schema") {
        // llama.cpp's answer when it cannot turn a schema into a grammar.
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"code": 500, "message": "JSON schema conversion failed", "type": "server_error"}}),
        );
    }
    match responder(&seen) {
        FakeReply::Json(v) => completion(&seen.model, chars, &v.to_string()),
        FakeReply::Text(t) => completion(&seen.model, chars, &t),
        FakeReply::Error { status, message } => error_response(status, &message),
    }
}

async fn embeddings(State(shared): State<Shared>, body: Bytes) -> Response {
    let parsed: Option<(String, Vec<String>)> =
        serde_json::from_slice::<Value>(&body).ok().and_then(|b| {
            let model = b
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let inputs = match b.get("input")? {
                Value::String(s) => vec![s.clone()],
                Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect::<Option<_>>()?,
                _ => return None,
            };
            Some((model, inputs))
        });
    let (fault, embedder) = {
        let mut s = shared.lock();
        s.stats.embedding_requests += 1;
        if let Some((_, inputs)) = &parsed {
            s.stats.embedding_texts += inputs.len();
            s.stats.embedding_chars += inputs.iter().map(|t| t.chars().count()).sum::<usize>();
        }
        (s.embedding_faults.pop_front(), s.embedder.clone())
    };
    let Some((model, inputs)) = parsed else {
        return error_response(
            400,
            "the body is not an embeddings request with string inputs",
        );
    };
    match fault {
        Some(Fault::Status(status)) => return error_response(status, "injected failure"),
        Some(Fault::InvalidJson | Fault::Reply(_)) => {
            return (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                "not json",
            )
                .into_response();
        }
        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }
    let tokens: usize = inputs.iter().map(|t| t.len().div_ceil(4)).sum();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": embedder(t)}))
        .collect();
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(system: &str, user: &str) -> ChatRequestSeen {
        let body = json!({
            "model": "m",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": [{"type": "text", "text": user}]}],
            "response_format": {"type": "json_object"},
        });
        ChatRequestSeen::parse(body, &HeaderMap::new()).unwrap()
    }

    #[test]
    fn echo_reply_names_speakers_and_capitalized_runs() {
        let p = prompts::extraction(&chronicle_engine::ports::ExtractionRequest {
            name: "e".into(),
            content: "alice: Hi! Bob Stone from Acme, and I met Carol.\nbob: The weather is nice."
                .into(),
            source: chronicle_model::EpisodeType::Message,
            source_description: String::new(),
            reference_time: chronicle_model::Timestamp::EPOCH,
            previous_episodes: vec![],
            ontology: Default::default(),
        });
        let req = seen(&p.system_with_schema(), &p.user);
        assert_eq!(req.kind(), Some(PromptKind::Extract));
        let FakeReply::Json(answer) = echo_reply(&req) else {
            panic!("not JSON")
        };
        let names: Vec<&str> = answer["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["alice", "Bob Stone", "Acme", "Carol", "bob"]);
        assert_eq!(answer["facts"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn minimal_reply_answers_every_item() {
        let p = prompts::rerank("q", &["a".into(), "b".into()]);
        let FakeReply::Json(answer) = minimal_reply(&seen(&p.system_with_schema(), &p.user)) else {
            panic!("not JSON")
        };
        assert_eq!(answer["answers"].as_array().unwrap().len(), 2);
        assert!(matches!(
            minimal_reply(&seen("hello", "world")),
            FakeReply::Error { status: 400, .. }
        ));
    }
}
