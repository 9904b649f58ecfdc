//! The HTTP API against a real server on loopback: every route answers as
//! its OpenAPI entry says, episodes go from pending to processed (or dead
//! letter), retractions remove facts, and bad input is refused whole with a
//! 4xx naming the field.

mod http_support;

use std::collections::BTreeSet;
use std::time::Duration;

use chronicle::gateway::Gateway;
use chronicle_model::{Command, EpisodeType, GroupId, NewEpisode};
use http_support::{TestServer, conforms, start};
use proptest::prelude::*;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

const TOKEN: &str = "acme-writer-0123456789";
const AUTH: &str = r#"
[[tokens]]
name = "acme"
secret = "acme-writer-0123456789"
groups = ["acme"]
access = "write"
"#;

/// Every route issue 7 asks for, as (method, template).
const EXPECTED_ROUTES: &[(&str, &str)] = &[
    ("post", "/v1/groups/{group_id}/episodes"),
    ("get", "/v1/groups/{group_id}/episodes"),
    ("get", "/v1/groups/{group_id}/episodes/{uuid}"),
    ("delete", "/v1/groups/{group_id}/episodes/{uuid}"),
    ("post", "/v1/groups/{group_id}/search"),
    ("post", "/v1/groups/{group_id}/context"),
    ("get", "/v1/groups/{group_id}/entities/{uuid}"),
    ("get", "/v1/groups/{group_id}/entities/{uuid}/timeline"),
    ("get", "/v1/groups/{group_id}/facts"),
    ("get", "/v1/groups/{group_id}/stats"),
    ("get", "/v1/groups/{group_id}/status"),
    ("get", "/v1/stats"),
    ("post", "/v1/groups/{group_id}/triplets"),
    ("get", "/v1/groups/{group_id}/episodes/{uuid}/graph"),
    ("post", "/v1/groups/{group_id}/communities/build"),
    ("get", "/v1/groups/{group_id}/communities"),
    ("get", "/v1/groups/{group_id}/sagas/{name}"),
    ("post", "/v1/groups/{group_id}/sagas/{name}/summarize"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
];

async fn status_of(s: &TestServer, uuid: &str) -> Value {
    s.get(&format!("/v1/groups/acme/episodes/{uuid}"), Some(TOKEN))
        .await
        .json()
}

/// Polls an episode's status until it is no longer pending.
async fn decided(s: &TestServer, uuid: &str) -> Value {
    for _ in 0..600 {
        let v = status_of(s, uuid).await;
        if v["status"] != "pending" {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{uuid} still pending");
}

fn documented_routes(doc: &Value) -> BTreeSet<(String, String)> {
    doc["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, ops)| {
            ops.as_object()
                .expect("operations")
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect()
}

fn example_body(schema: &str) -> Option<Value> {
    match schema {
        "EpisodeSubmission" => Some(json!({
            "content": "Cleo: I moved to Porto in May.",
            "reference_time": "2025-06-01T00:00:00Z",
        })),
        "TripletSubmission" => Some(json!({
            "source": "Dev", "relation": "WORKS_AT", "target": "Globex",
        })),
        "SearchRequest" => Some(json!({ "query": "where does Ada live", "limit": 5 })),
        "ContextRequest" => Some(json!({ "query": "where does Ada live", "max_chars": 2000 })),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_route_answers_as_documented() {
    let mut s = start(Some(AUTH), None).await;
    let seeded = s
        .post(
            "/v1/groups/acme/episodes",
            Some(TOKEN),
            &json!({"episodes": [
                {"name": "one", "content": "Ada: I moved to Oslo.", "reference_time": "2025-01-01T00:00:00Z", "saga": "trip"},
                {"name": "two", "content": "Ada lives in Lima.", "reference_time": "2025-03-01T00:00:00Z", "saga": "trip"},
            ]}),
        )
        .await;
    assert_eq!(seeded.status, StatusCode::ACCEPTED, "{}", seeded.text);
    let episode = seeded.json()["episodes"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    s.settle().await;
    let stats = s.get("/v1/groups/acme/stats", Some(TOKEN)).await.json();
    assert_eq!(
        (stats["episodes"].as_u64(), stats["decisions"].as_u64()),
        (Some(2), Some(2)),
        "{stats}"
    );
    let facts = s
        .get(
            "/v1/groups/acme/facts?entity=Ada&include_history=true",
            Some(TOKEN),
        )
        .await
        .json();
    assert_eq!(facts["facts"].as_array().map(Vec::len), Some(2), "{facts}");
    let search = s
        .post(
            "/v1/groups/acme/search",
            Some(TOKEN),
            &json!({"query": "Ada", "recipe": "NODE_HYBRID_SEARCH_RRF"}),
        )
        .await
        .json();
    let entity = search["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["name"] == "Ada")
        .and_then(|r| r["uuid"].as_str())
        .expect("Ada found")
        .to_owned();

    let doc = s.get("/openapi.json", None).await.json();
    let documented = documented_routes(&doc);
    let expected: BTreeSet<(String, String)> = EXPECTED_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(
        documented, expected,
        "the document lists exactly the API's routes"
    );

    // Every documented operation answers with its documented status and body.
    let mut ops: Vec<(String, String)> = documented.into_iter().collect();
    // Retract last: it changes what the others see.
    ops.sort_by_key(|(m, _)| m == "delete");
    for (method, template) in ops {
        let op = &doc["paths"][&template][&method];
        let uuid = if template.contains("/entities/") {
            &entity
        } else {
            &episode
        };
        if template == "/v1/stats" {
            // Totals over every group would tell a tenant about the others.
            let refused = s.get(&template, Some(TOKEN)).await;
            assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
            continue;
        }
        let path = template
            .replace("{group_id}", "acme")
            .replace("{uuid}", uuid)
            .replace("{name}", "trip");
        let body = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .and_then(|r| example_body(r.trim_start_matches("#/components/schemas/")));
        if let Some(b) = &body {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            let problems = conforms(&doc, schema, b, "$");
            assert!(
                problems.is_empty(),
                "{method} {template} example: {problems:#?}"
            );
        }
        let reply = s
            .send(
                Method::from_bytes(method.to_uppercase().as_bytes()).expect("method"),
                &path,
                Some(TOKEN),
                body.map(|b| serde_json::to_vec(&b).expect("json")),
            )
            .await;
        let ok = op["responses"]
            .as_object()
            .expect("responses")
            .keys()
            .find(|k| k.starts_with('2'))
            .expect("a success status")
            .clone();
        assert_eq!(reply.status.as_str(), ok, "{method} {path}: {}", reply.text);
        let media = &op["responses"][&ok]["content"];
        if let Some(schema) = media.get("application/json").map(|m| &m["schema"]) {
            let problems = conforms(&doc, schema, &reply.json(), "$");
            assert!(problems.is_empty(), "{method} {path}: {problems:#?}");
        } else {
            assert!(!reply.text.is_empty(), "{method} {path}");
        }
    }

    // The default search hands back what was said: turns, each once, with
    // the facts extracted from them and their neighbouring turns.
    let memory = s
        .post(
            "/v1/groups/acme/search",
            Some(TOKEN),
            &json!({"query": "where does Ada live", "limit": 1}),
        )
        .await
        .json();
    let results = memory["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{memory}");
    assert_eq!(results[0]["kind"], "episode", "{memory}");
    assert!(
        !results[0]["context"]
            .as_array()
            .expect("context")
            .is_empty(),
        "{memory}"
    );
    let block = s
        .post(
            "/v1/groups/acme/context",
            Some(TOKEN),
            &json!({"messages": ["hi", "where does Ada live these days?"], "max_chars": 1000}),
        )
        .await;
    assert_eq!(block.status, StatusCode::OK, "{}", block.text);
    let block = block.json();
    let text = block["context"].as_str().expect("context text");
    assert!(text.contains("Lima") && text.len() <= 1000, "{text}");
    assert!(
        block["facts"].as_array().is_some_and(|f| !f.is_empty()),
        "{block}"
    );
    let bad = s
        .post(
            "/v1/groups/acme/context",
            Some(TOKEN),
            &json!({"max_chars": 10}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.json()["field"], "query");

    // Neither an unknown path nor an undocumented method is silently served.
    let missing = s.get("/v1/groups/acme/nothing", Some(TOKEN)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.json()["field"], "path");
    let wrong = s
        .send(Method::PUT, "/v1/groups/acme/episodes", Some(TOKEN), None)
        .await;
    assert_eq!(wrong.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong.json()["field"], "method");
    let odd = s
        .send(
            Method::from_bytes(b"FROB").expect("method"),
            "/v1/groups/acme/episodes",
            Some(TOKEN),
            None,
        )
        .await;
    assert_eq!(odd.status, StatusCode::METHOD_NOT_ALLOWED);
    // Metric labels stay bounded: route templates, standard methods, no group ids.
    let metrics = s.get("/metrics", None).await.text;
    assert!(
        metrics.contains(r#"route="OTHER /v1/groups/{group_id}/episodes",status="405""#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"route="POST /v1/groups/{group_id}/episodes",status="202""#));
    assert!(!metrics.contains("FROB") && !metrics.contains("acme"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn episodes_go_from_pending_to_processed_or_dead_lettered() {
    let mut s = start(None, None).await;
    let r = s
        .post(
            "/v1/groups/acme/episodes",
            None,
            &json!({"content": "Ben: I work at Initech.", "reference_time": "2025-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    let body = r.json();
    let uuid = body["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(body["status"], "pending");
    assert!(body["position"]["offset"].is_u64());
    let done = decided(&s, &uuid).await;
    assert_eq!(done["status"], "processed", "{done}");
    assert_eq!(done["counts"]["facts_created"], 1, "{done}");
    assert_eq!(done["group_id"], "acme");

    // The same submission again (same derived id) is decided once.
    let again = s
        .post(
            "/v1/groups/acme/episodes",
            None,
            &json!({"content": "Ben: I work at Initech.", "reference_time": "2025-01-01T00:00:00Z"}),
        )
        .await
        .json();
    assert_eq!(again["uuid"], uuid.as_str());

    // A command the processor cannot decide is dead-lettered with its reason
    // (here a triple the gateway would have refused: appended behind its back).
    let poison = Uuid::new_v4();
    Gateway::new(s.server.node().clone())
        .submit(vec![Command::AddEpisode(NewEpisode {
            uuid: poison,
            group_id: GroupId::new("acme").expect("group"),
            name: "poison".into(),
            content: "not a triple".into(),
            source: EpisodeType::FactTriple,
            source_description: String::new(),
            reference_time: "2025-01-01T00:00:00Z".parse().expect("time"),
            previous_episode_uuids: None,
            saga: None,
            metadata: Default::default(),
        })])
        .await
        .expect("appended");
    let dead = decided(&s, &poison.to_string()).await;
    assert_eq!(dead["status"], "dead_lettered", "{dead}");
    assert!(dead["reason"].as_str().is_some_and(|r| !r.is_empty()));

    // Unknown ids are 404s, not errors.
    let unknown = s
        .get(
            &format!("/v1/groups/acme/episodes/{}", Uuid::new_v4()),
            None,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json()["field"], "uuid");
    s.settle().await;
    let listed = s
        .get("/v1/groups/acme/episodes?last_n=1", None)
        .await
        .json();
    assert_eq!(listed["episodes"].as_array().map(Vec::len), Some(1));
    assert_eq!(listed["episodes"][0]["uuid"], uuid.as_str());
    s.stop().await;
}

/// Episodes that once stopped the server for good (a panic in the temporal
/// parser, byte offsets of lower-cased text slicing the original): decided
/// now, and the server and every later episode go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn poison_episodes_neither_stop_the_server_nor_the_group() {
    let mut s = start(None, None).await;
    let kelvin = "\u{212A}".repeat(8);
    let poison = [
        "Alice moved to Paris since 300000000 days ago.".to_owned(),
        format!("Alice lives in Paris{kelvin} and moved to Rome."),
        "Bob moved to Oslo 9223372036854775807 weeks ago until yesterday.".to_owned(),
    ];
    let mut uuids = Vec::new();
    for content in &poison {
        let r = s
            .post(
                "/v1/groups/acme/episodes",
                None,
                &json!({"content": content, "reference_time": "2025-01-01T00:00:00Z"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
        uuids.push(r.json()["uuid"].as_str().expect("uuid").to_owned());
    }
    for uuid in &uuids {
        let done = decided(&s, uuid).await;
        assert!(
            done["status"] == "processed" || done["status"] == "dead_lettered",
            "{done}"
        );
    }
    let after = s
        .post(
            "/v1/groups/acme/episodes",
            None,
            &json!({"content": "Ben: I work at Initech.", "reference_time": "2025-02-01T00:00:00Z"}),
        )
        .await;
    let uuid = after.json()["uuid"].as_str().expect("uuid").to_owned();
    assert_eq!(decided(&s, &uuid).await["status"], "processed");
    assert_eq!(s.get("/healthz", None).await.status, StatusCode::OK);
    s.settle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn triplets_and_retraction() {
    let mut s = start(None, None).await;
    let t = s
        .post(
            "/v1/groups/acme/triplets",
            None,
            &json!({"triplets": [
                {"source": "Eli", "relation": "LIVES_IN", "target": "Quito", "valid_at": "2024-01-01T00:00:00Z", "source_labels": ["Person"]},
                {"source": "Eli", "relation": "OWNS", "target": "a piano"},
            ]}),
        )
        .await;
    assert_eq!(t.status, StatusCode::ACCEPTED, "{}", t.text);
    let lives = t.json()["episodes"][0]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    s.settle().await;
    let facts = s.get("/v1/groups/acme/facts?entity=Eli", None).await.json();
    let names: BTreeSet<&str> = facts["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(names, BTreeSet::from(["LIVES_IN", "OWNS"]), "{facts}");
    let as_of = s
        .get(
            "/v1/groups/acme/facts?entity=Eli&as_of=2023-06-01T00:00:00Z&edge_type=LIVES_IN",
            None,
        )
        .await
        .json();
    assert_eq!(as_of["facts"].as_array().map(Vec::len), Some(0), "{as_of}");

    let r = s
        .send(
            Method::DELETE,
            &format!("/v1/groups/acme/episodes/{lives}"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    let retraction = r.json();
    assert_eq!(retraction["episode_uuid"], lives.as_str());
    let done = decided(&s, retraction["uuid"].as_str().expect("uuid")).await;
    assert_eq!(done["status"], "processed", "{done}");
    s.settle().await;
    let after = s
        .get(
            "/v1/groups/acme/facts?entity=Eli&include_history=true",
            None,
        )
        .await
        .json();
    let names: Vec<&str> = after["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["OWNS"],
        "the retracted episode's fact is gone: {after}"
    );
    let gone = s
        .send(
            Method::DELETE,
            &format!("/v1/groups/acme/episodes/{}", Uuid::new_v4()),
            None,
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    s.stop().await;
}

/// (method, path, body, status, field)
type BadCase = (Method, String, Option<Vec<u8>>, u16, &'static str);

fn bad_cases() -> Vec<BadCase> {
    let ep = "/v1/groups/acme/episodes".to_owned();
    let post = |path: &str, body: &str, status: u16, field: &'static str| -> BadCase {
        (
            Method::POST,
            path.to_owned(),
            Some(body.as_bytes().to_vec()),
            status,
            field,
        )
    };
    let get = |path: &str, status: u16, field: &'static str| -> BadCase {
        (Method::GET, path.to_owned(), None, status, field)
    };
    vec![
        post(&ep, "{\"content\": \"a\"", 400, "body"),
        post(&ep, "", 400, "body"),
        post(&ep, "[]", 400, "body"),
        post(&ep, "{\"content\": 3}", 400, "content"),
        post(
            &ep,
            "{\"content\": \"a\", \"colour\": \"red\"}",
            400,
            "colour",
        ),
        post(&ep, "{\"content\": \"   \"}", 400, "content"),
        post(
            &ep,
            "{\"content\": \"a\", \"reference_time\": \"last tuesday\"}",
            400,
            "reference_time",
        ),
        post(
            &ep,
            "{\"content\": \"a\", \"reference_time\": \"0000-01-01T00:00:00Z\"}",
            400,
            "reference_time",
        ),
        post(
            &ep,
            "{\"content\": \"a\", \"reference_time\": \"2025-13-01T00:00:00Z\"}",
            400,
            "reference_time",
        ),
        post(
            &ep,
            "{\"content\": \"a\", \"source\": \"audio\"}",
            400,
            "source",
        ),
        post(
            &ep,
            "{\"content\": \"{\", \"source\": \"json\"}",
            400,
            "content",
        ),
        post(
            &ep,
            "{\"content\": \"a\", \"group_id\": \"globex\"}",
            400,
            "group_id",
        ),
        post(
            &ep,
            "{\"episodes\": [{\"content\": \"Ada: fine.\"}, {\"content\": \"\"}]}",
            400,
            "episodes[1].content",
        ),
        post(
            &ep,
            "{\"episodes\": [{\"content\": \"Ada: fine.\"}, {\"content\": \"b\", \"reference_time\": 5}]}",
            400,
            "episodes[1].reference_time",
        ),
        post(
            "/v1/groups/bad%20group/episodes",
            "{\"content\": \"a\"}",
            400,
            "group_id",
        ),
        post(
            &format!("/v1/groups/{}/episodes", "g".repeat(129)),
            "{\"content\": \"a\"}",
            400,
            "group_id",
        ),
        post(
            "/v1/groups/acme/triplets",
            "{\"source\": \"A\", \"relation\": \"R\"}",
            400,
            "target",
        ),
        post(
            "/v1/groups/acme/triplets",
            "{\"source\": \"A\", \"relation\": \"R\", \"target\": \"B\", \"valid_at\": \"2025-02-30T00:00:00Z\"}",
            400,
            "valid_at",
        ),
        post("/v1/groups/acme/search", "{\"query\": \"\"}", 400, "query"),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"limit\": \"ten\"}",
            400,
            "limit",
        ),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"recipe\": \"FASTEST\"}",
            400,
            "recipe",
        ),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"known_at\": \"10000-01-01T00:00:00Z\"}",
            400,
            "known_at",
        ),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"center\": \"Nobody\"}",
            400,
            "center",
        ),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"recipe\": \"EDGE_HYBRID_SEARCH_NODE_DISTANCE\"}",
            400,
            "center",
        ),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"recipe\": \"COMBINED_HYBRID_SEARCH_CROSS_ENCODER\"}",
            400,
            "recipe",
        ),
        post(
            "/v1/groups/acme/search",
            "{\"query\": \"q\", \"filters\": {\"valid_at\": [[{\"comparison_operator\": \"~\"}]]}}",
            400,
            "filters.valid_at[0][0].comparison_operator",
        ),
        get("/v1/groups/acme/episodes?last_n=-1", 400, "last_n"),
        get("/v1/groups/acme/episodes?before=noon", 400, "before"),
        get("/v1/groups/acme/episodes?page=2", 400, "page"),
        get("/v1/groups/acme/episodes/not-a-uuid", 400, "uuid"),
        get("/v1/groups/acme/episodes/%FF", 400, "uuid"),
        get("/v1/groups/%FF/episodes", 400, "group_id"),
        get("/v1/groups/a%2Fb/episodes", 400, "group_id"),
        get("/v1/groups/acme/facts?entity=%FF%FE", 404, "entity"),
        get("/v1/groups/acme/entities/42", 400, "uuid"),
        get("/v1/groups/acme/facts?as_of=2025", 400, "as_of"),
        get("/v1/groups/acme/facts?entity=Nobody", 404, "entity"),
        get(
            &format!("/v1/groups/acme/entities/{}/timeline", Uuid::nil()),
            404,
            "uuid",
        ),
        (
            Method::DELETE,
            "/v1/groups/acme/episodes/xyz".into(),
            None,
            400,
            "uuid",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_a_4xx_naming_the_field_and_writes_nothing() {
    let s = start(None, Some(64 * 1024)).await;
    let before = s.appended().await;
    for (method, path, body, status, field) in bad_cases() {
        let r = s.send(method.clone(), &path, None, body.clone()).await;
        let shown = body
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        assert_eq!(
            r.status.as_u16(),
            status,
            "{method} {path} {shown}: {}",
            r.text
        );
        let v = r.json();
        assert_eq!(v["field"], field, "{method} {path} {shown}: {v}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    }
    // Oversized bodies are refused before they are read whole.
    let big = json!({ "content": "x".repeat(100 * 1024) });
    let r = s.post("/v1/groups/acme/episodes", None, &big).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    assert_eq!(r.json()["field"], "body");
    let batch = json!({ "episodes": vec![json!({"content": "a"}); 1001] });
    let r = s.post("/v1/groups/acme/episodes", None, &batch).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text);
    assert_eq!(
        s.appended().await,
        before,
        "a refused request (even a batch with one bad item) appends nothing"
    );
    s.stop().await;
}

/// Random bodies and query strings against the live server: never a 5xx,
/// always a JSON error naming a field.
#[test]
fn fuzzed_requests_never_fail_as_server_errors() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let s = runtime.block_on(start(None, Some(16 * 1024)));
    let paths = [
        "/v1/groups/acme/episodes",
        "/v1/groups/acme/triplets",
        "/v1/groups/acme/search",
    ];
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "null",
        "true",
        "-7",
        "1e400",
        "\"content\"",
        "\"episodes\"",
        "\"query\"",
        "\"recipe\"",
        "\"config\"",
        "\"filters\"",
        "\"limit\"",
        "\"reference_time\"",
        "\"2025-01-01T00:00:00Z\"",
        "\"source\"",
        "\"relation\"",
        "\"target\"",
        "\"center\"",
        "\"x\"",
        "\"\\ud800\"",
    ]);
    let body = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128),
        prop::collection::vec(atoms, 0..30).prop_map(|v| v.concat().into_bytes()),
    ];
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 128,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(0..paths.len(), body, "[a-z_=&%0-9:.-]{0,40}"),
            |(p, body, query)| {
                let r = runtime.block_on(s.send(Method::POST, paths[p], None, Some(body.clone())));
                prop_assert!(r.status.as_u16() < 500, "{} {}", r.status, r.text);
                if !r.status.is_success() {
                    let v = r.json();
                    prop_assert!(v["field"].is_string(), "{v}");
                }
                let list = runtime.block_on(s.get(&format!("/v1/groups/acme/facts?{query}"), None));
                prop_assert!(list.status.as_u16() < 500, "{} {}", list.status, list.text);
                Ok(())
            },
        )
        .expect("no input makes the server fail");
    runtime.block_on(s.stop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_processes_serve_health_and_metrics() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let (addr, task) = chronicle::http::serve_ops("127.0.0.1:0".parse().expect("addr"), async {
        let _ = rx.await;
    })
    .await
    .expect("bound");
    let client = reqwest::Client::new();
    let health = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), StatusCode::OK);
    let metrics = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("chronicle_http_requests_total{route=\"GET /healthz\",status=\"200\"}"),
        "{metrics}"
    );
    let missing = client
        .get(format!("http://{addr}/v1/groups/acme/episodes"))
        .send()
        .await
        .expect("request");
    assert_eq!(
        missing.status(),
        StatusCode::NOT_FOUND,
        "no API on a role's port"
    );
    let _ = tx.send(());
    task.await.expect("joined").expect("served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_needs_a_recovered_processor_and_a_close_projector() {
    use chronicle::config::{EmbedderKind, ExtractorKind, Settings};
    use chronicle::http::handlers::readiness;
    use chronicle::http::{HttpOptions, router};
    use chronicle::node::Node;
    use chronicle_log::NewRecord;

    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings::embedded(dir.path(), ExtractorKind::Offline, EmbedderKind::Hash);
    let node = Node::open(settings).await.expect("node");
    // The API alone, no processor or projector in this process.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(node.clone(), HttpOptions::default());
    let served = tokio::spawn(async move { axum::serve(listener, app).await });
    let r = reqwest::get(format!("http://{addr}/readyz"))
        .await
        .expect("readyz");
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = r.json().await.expect("json");
    assert_eq!(body["processor"], false, "{body}");
    assert_eq!(body["log"], true, "{body}");
    assert_eq!(body["store"], true, "{body}");
    served.abort();

    // Without an in-process processor to wait for, an idle node is ready…
    assert!(readiness(&node, 0, false).await.ready);
    // …until the projector falls behind the bound.
    node.log
        .append(
            &node.topics.graph_events,
            vec![NewRecord {
                key: b"acme".to_vec(),
                payload: b"not yet projected".to_vec(),
            }],
            None,
        )
        .await
        .expect("appended");
    let r = readiness(&node, 0, false).await;
    assert_eq!((r.ready, r.projector_lag), (false, Some(1)));
    assert!(readiness(&node, 1, false).await.ready);
}

/// Summarizes acme's saga `trip` over HTTP and waits for the decision.
async fn summarize(s: &TestServer) {
    let r = s
        .send(
            Method::POST,
            "/v1/groups/acme/sagas/trip/summarize",
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    let done = decided(s, r.json()["uuid"].as_str().expect("uuid")).await;
    assert_eq!(done["status"], "processed", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn communities_sagas_and_provenance() {
    let mut s = start(None, None).await;
    let posted = s
        .post(
            "/v1/groups/acme/episodes",
            None,
            &json!({"episodes": [
                {"content": "Ada Stone lives in Oslo.", "reference_time": "2025-01-10T00:00:00Z", "saga": "trip"},
                {"content": "Ada Stone works at Initech.", "reference_time": "2025-02-10T00:00:00Z", "saga": "trip"},
                {"content": "Ben Okafor works at Initech. Ben Okafor lives in Oslo.", "reference_time": "2025-02-11T00:00:00Z"},
            ]}),
        )
        .await;
    assert_eq!(posted.status, StatusCode::ACCEPTED, "{}", posted.text);
    let works = posted.json()["episodes"][1]["uuid"]
        .as_str()
        .expect("uuid")
        .to_owned();
    s.settle().await;

    // Communities: built by a command, listed, found by search.
    let empty = s.get("/v1/groups/acme/communities", None).await.json();
    assert_eq!(empty, json!({"communities": []}));
    let build = s
        .send(
            Method::POST,
            "/v1/groups/acme/communities/build",
            None,
            None,
        )
        .await;
    assert_eq!(build.status, StatusCode::ACCEPTED, "{}", build.text);
    let done = decided(&s, build.json()["uuid"].as_str().expect("uuid")).await;
    assert_eq!(done["status"], "processed", "{done}");
    s.settle().await;
    let listed = s.get("/v1/groups/acme/communities", None).await.json();
    let communities = listed["communities"].as_array().expect("list");
    assert_eq!(communities.len(), 1, "{listed}");
    let mut members: Vec<&str> = communities[0]["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| m["name"].as_str().expect("name"))
        .collect();
    members.sort();
    assert_eq!(members, ["Ada Stone", "Ben Okafor", "Initech", "Oslo"]);
    let found = s
        .post(
            "/v1/groups/acme/search",
            None,
            &json!({"query": "Initech", "recipe": "COMMUNITY_HYBRID_SEARCH_RRF"}),
        )
        .await
        .json();
    assert_eq!(found["results"][0]["kind"], "community", "{found}");
    assert_eq!(found["results"][0]["uuid"], communities[0]["uuid"]);

    // Sagas: the watermark advances to the newest absorbed episode.
    summarize(&s).await;
    s.settle().await;
    let saga = s.get("/v1/groups/acme/sagas/trip", None).await.json();
    assert_eq!(
        saga["last_summarized_episode_valid_at"],
        "2025-02-10T00:00:00Z"
    );
    assert!(
        saga["summary"]
            .as_str()
            .is_some_and(|t| t.contains("Initech")),
        "{saga}"
    );
    let more = s
        .post(
            "/v1/groups/acme/episodes",
            None,
            &json!({"episodes": [
                {"content": "Ada Stone moved to Lima.", "reference_time": "2025-03-10T00:00:00Z", "saga": "trip"},
                {"content": "Ada Stone likes chess.", "reference_time": "2025-01-01T00:00:00Z", "saga": "trip"},
            ]}),
        )
        .await;
    assert_eq!(more.status, StatusCode::ACCEPTED, "{}", more.text);
    s.settle().await;
    summarize(&s).await;
    s.settle().await;
    let saga = s.get("/v1/groups/acme/sagas/trip", None).await.json();
    assert_eq!(
        saga["last_summarized_episode_valid_at"],
        "2025-03-10T00:00:00Z"
    );
    let summary = saga["summary"].as_str().expect("summary");
    assert!(
        summary.contains("Lima") && !summary.contains("chess"),
        "{saga}"
    );
    assert_eq!(saga["episodes"].as_array().map(Vec::len), Some(4));
    for path in [
        "/v1/groups/acme/sagas/nope",
        "/v1/groups/acme/sagas/nope/summarize",
    ] {
        let method = if path.ends_with("summarize") {
            Method::POST
        } else {
            Method::GET
        };
        let r = s.send(method, path, None, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.text);
        assert_eq!(r.json()["field"], "name");
    }

    // Provenance: what one episode produced.
    let graph = s
        .get(&format!("/v1/groups/acme/episodes/{works}/graph"), None)
        .await
        .json();
    let mut names: Vec<&str> = graph["entities"]
        .as_array()
        .expect("entities")
        .iter()
        .map(|e| e["name"].as_str().expect("name"))
        .collect();
    names.sort();
    assert_eq!(names, ["Ada Stone", "Initech"], "{graph}");
    assert_eq!(graph["facts"][0]["fact"], "Ada Stone works at Initech");
    assert_eq!(graph["episodes"], json!([works]));
    let unknown = s
        .get(
            &format!("/v1/groups/acme/episodes/{}/graph", Uuid::new_v4()),
            None,
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json()["field"], "uuid");
    s.stop().await;
}
