//! The OpenAI adapters against the real fake server over loopback HTTP.

use std::sync::Arc;
use std::time::Duration;

use chronicle_engine::ontology::Ontology;
use chronicle_engine::ports::{
    AmbiguousEntity, CandidateEntity, CandidateFact, ContextEpisode, Embedder,
    EntityResolutionRequest, ExtractionRequest, Extractor, FactResolution, FactResolutionRequest,
    LlmError, NewFactCandidates, PromptKind, Reranker, SummaryItem, SummaryKind, SummaryRequest,
};
use chronicle_metrics::METRICS;
use chronicle_model::{EpisodeType, Timestamp};
use serde_json::json;

use crate::fake::{
    ChatRequestSeen, Endpoint, FakeOpenAi, FakeReply, Fault, echo_reply, minimal_reply,
};
use crate::prompts::SCHEMA_MARKER;
use crate::{OpenAiEmbedder, OpenAiExtractor, ResponseCache, cosine};

fn ts(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).unwrap()
}

fn episode(content: &str) -> ExtractionRequest {
    ExtractionRequest {
        name: "m1".into(),
        content: content.into(),
        source: EpisodeType::Message,
        source_description: "chat".into(),
        reference_time: ts("2024-05-02T10:00:00Z"),
        previous_episodes: vec![ContextEpisode {
            content: "alice: I moved to Paris last year.".into(),
            valid_at: ts("2024-05-01T10:00:00Z"),
        }],
        ontology: Ontology::default(),
    }
}

async fn server() -> FakeOpenAi {
    FakeOpenAi::with_responder(Arc::new(echo_reply))
        .await
        .unwrap()
}

fn extractor(fake: &FakeOpenAi) -> OpenAiExtractor {
    OpenAiExtractor::new(fake.config()).unwrap()
}

/// Current value of a labelled counter of [`METRICS`].
macro_rules! count {
    ($metric:ident, $($label:expr),+) => {
        METRICS.$metric.with_label_values(&[$($label),+]).get()
    };
}

#[tokio::test]
async fn extraction_round_trip_finds_the_episode_between_the_tags() {
    let fake = server().await;
    let x = extractor(&fake);
    let calls = count!(llm_calls, "extract");
    let tokens = count!(llm_tokens, "extract", "prompt");
    let out = x
        .extract(&episode("alice: Bob and I visited Rome."))
        .await
        .unwrap();
    let names: Vec<_> = out
        .entities
        .iter()
        .map(|e| (e.name.as_str(), e.entity_type_id))
        .collect();
    assert_eq!(names, vec![("alice", 0), ("Bob", 0), ("Rome", 0)]);
    assert_eq!(out.facts.len(), 2);
    assert_eq!(out.facts[0].relation, "MENTIONS");
    assert_eq!(fake.stats().chat_requests, 1);
    let seen = &fake.chat_log()[0];
    assert_eq!(seen.response_format.as_deref(), Some("json_schema"));
    assert_eq!(seen.schema_name.as_deref(), Some("extract"));
    assert_eq!(
        seen.body["response_format"]["json_schema"]["strict"],
        json!(true)
    );
    assert_eq!(seen.body["temperature"], json!(0.0));
    assert_eq!(
        seen.header("authorization"),
        Some("Bearer"),
        "no key, no token"
    );
    assert!(count!(llm_calls, "extract") > calls);
    assert!(count!(llm_tokens, "extract", "prompt") > tokens);
}

#[tokio::test]
async fn rate_limit_then_success_is_retried() {
    let fake = server().await;
    let x = extractor(&fake);
    let retries = count!(llm_retries, "extract");
    fake.push_fault(Endpoint::Chat, Fault::Status(429));
    let out = x.extract(&episode("alice: see you, Bob.")).await.unwrap();
    assert_eq!(out.entities.len(), 2);
    assert_eq!(fake.stats().chat_requests, 2);
    assert!(count!(llm_retries, "extract") > retries);
}

#[tokio::test]
async fn invalid_json_then_success_is_retried_with_the_reason() {
    let fake = server().await;
    let x = extractor(&fake);
    fake.push_fault(Endpoint::Chat, Fault::InvalidJson);
    let out = x.extract(&episode("alice: see you, Bob.")).await.unwrap();
    assert_eq!(out.entities.len(), 2);
    let log = fake.chat_log();
    assert_eq!(log.len(), 2);
    assert!(!log[0].is_correction());
    assert!(log[1].is_correction());
    assert!(
        log[1].messages.last().unwrap().content.contains("invalid"),
        "{:?}",
        log[1].messages
    );
    // The retry shows the schema in the prompt, for servers that ignore response_format.
    assert_eq!(log[1].response_format.as_deref(), Some("json_object"));
    assert!(log[1].system().contains(SCHEMA_MARKER));
    // Only for that call: the next one asks for json_schema again.
    assert!(x.uses_json_schema());
    x.extract(&episode("carol: see you, Dave.")).await.unwrap();
    assert_eq!(
        fake.chat_log()[2].response_format.as_deref(),
        Some("json_schema")
    );
}

#[tokio::test]
async fn an_unrelated_server_error_on_json_schema_is_retried_not_taken_for_a_rejection() {
    let fake = server().await;
    let x = extractor(&fake);
    fake.push_fault(Endpoint::Chat, Fault::Status(500));
    x.extract(&episode("alice: see you, Bob.")).await.unwrap();
    let log = fake.chat_log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[1].response_format.as_deref(), Some("json_schema"));
    assert!(x.uses_json_schema());
}

#[tokio::test]
async fn think_blocks_are_stripped() {
    let fake = server().await;
    let x = extractor(&fake);
    let answer = json!({"entities": [{"name": "Alice", "type_id": 1}], "facts": []});
    fake.push_fault(
        Endpoint::Chat,
        Fault::Reply(format!(
            "<think>\nThe user wants {{\"entities\": 3}}... let me think.\n</think>\n\n{answer}"
        )),
    );
    let out = x.extract(&episode("alice: hello")).await.unwrap();
    assert_eq!(out.entities.len(), 1);
    assert_eq!(out.entities[0].name, "Alice");
    assert_eq!(fake.stats().chat_requests, 1);
}

#[tokio::test]
async fn json_schema_rejected_falls_back_to_json_object_and_remembers() {
    let fake = server().await;
    fake.reject_json_schema(true);
    let x = extractor(&fake);
    assert!(x.uses_json_schema());
    let out = x.extract(&episode("alice: see you, Bob.")).await.unwrap();
    assert_eq!(out.entities.len(), 2);
    assert!(!x.uses_json_schema());
    let log = fake.chat_log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].response_format.as_deref(), Some("json_schema"));
    assert_eq!(log[1].response_format.as_deref(), Some("json_object"));
    assert!(log[1].system().contains(SCHEMA_MARKER));
    assert_eq!(log[1].kind(), Some(PromptKind::Extract));

    // Later calls go straight to json_object.
    x.extract(&episode("carol: see you, Dave.")).await.unwrap();
    let log = fake.chat_log();
    assert_eq!(log.len(), 3);
    assert_eq!(log[2].response_format.as_deref(), Some("json_object"));
}

#[tokio::test]
async fn cache_hits_make_no_http_call_even_after_reopening() {
    let fake = server().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = fake.config();
    config.cache_path = Some(dir.path().join("llm-cache.redb"));
    let req = episode("alice: Bob and I visited Rome.");
    let hits = count!(llm_cache_hits, "extract");
    let first = {
        let x = OpenAiExtractor::new(config.clone()).unwrap();
        let first = x.extract(&req).await.unwrap();
        assert_eq!(x.extract(&req).await.unwrap(), first);
        assert_eq!(fake.stats().chat_requests, 1);
        first
    };
    let x = OpenAiExtractor::new(config.clone()).unwrap();
    assert_eq!(x.extract(&req).await.unwrap(), first);
    assert_eq!(
        fake.stats().chat_requests,
        1,
        "a re-run must make no HTTP call"
    );
    assert!(count!(llm_cache_hits, "extract") >= hits + 2);
    // A different model is a different key.
    drop(x);
    config.model = "other".into();
    OpenAiExtractor::new(config)
        .unwrap()
        .extract(&req)
        .await
        .unwrap();
    assert_eq!(fake.stats().chat_requests, 2);
}

#[tokio::test]
async fn retries_run_out_into_typed_errors() {
    let fake = server().await;
    let mut config = fake.config();
    config.max_retries = 2;
    let x = OpenAiExtractor::new(config.clone()).unwrap();
    let errors = count!(llm_errors, "extract", "http_5xx");
    for _ in 0..3 {
        fake.push_fault(Endpoint::Chat, Fault::Status(503));
    }
    let e = x.extract(&episode("alice: hi")).await.unwrap_err();
    assert!(matches!(e, LlmError::Http { status: 503, .. }), "{e:?}");
    assert_eq!(fake.stats().chat_requests, 3);
    assert!(count!(llm_errors, "extract", "http_5xx") > errors);

    // A client error is not retried.
    fake.reset();
    config.json_schema = false;
    let x = OpenAiExtractor::new(config).unwrap();
    fake.push_fault(Endpoint::Chat, Fault::Status(401));
    let e = x.extract(&episode("alice: hi")).await.unwrap_err();
    assert!(matches!(e, LlmError::Http { status: 401, .. }), "{e:?}");
    assert_eq!(fake.stats().chat_requests, 1);
}

#[tokio::test]
async fn unreachable_endpoint_and_timeouts_are_transport_errors() {
    let fake = server().await;
    let mut config = fake.config();
    config.max_retries = 1;
    config.request_timeout = Duration::from_millis(300);
    let x = OpenAiExtractor::new(config.clone()).unwrap();
    // One slow answer, then a prompt one: the retry succeeds.
    fake.push_fault(Endpoint::Chat, Fault::Delay(Duration::from_secs(2)));
    x.extract(&episode("alice: hi")).await.unwrap();
    assert_eq!(fake.stats().chat_requests, 2);

    drop(fake);
    let e = x
        .extract(&episode("alice: anyone there?"))
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Transport(_)), "{e:?}");
}

#[tokio::test]
async fn answers_with_out_of_range_ids_are_rejected() {
    let fake = server().await;
    let mut config = fake.config();
    config.max_retries = 1;
    let x = OpenAiExtractor::new(config).unwrap();
    fake.set_responder(Arc::new(|req: &ChatRequestSeen| match req.kind() {
        Some(PromptKind::Extract) => {
            FakeReply::Json(json!({"entities": [{"name": "Alice", "type_id": 9}], "facts": []}))
        }
        Some(PromptKind::ResolveEntities) => {
            FakeReply::Json(json!({"answers": [{"id": 0, "duplicate": 5}]}))
        }
        Some(PromptKind::ResolveFacts) => FakeReply::Json(
            json!({"answers": [{"id": 0, "duplicate_of": null, "contradicts": [1]}]}),
        ),
        _ => minimal_reply(req),
    }));
    let e = x.extract(&episode("alice: hi")).await.unwrap_err();
    assert!(
        matches!(&e, LlmError::InvalidOutput { kind: "extract", reason } if reason.contains("type_id 9")),
        "{e:?}"
    );
    assert_eq!(fake.stats().chat_requests, 2);

    let er = EntityResolutionRequest {
        episode_content: "alice: hi".into(),
        entities: vec![AmbiguousEntity {
            name: "Al".into(),
            entity_type: "Person".into(),
            candidates: vec![CandidateEntity {
                name: "Alice".into(),
                entity_type: "Person".into(),
                summary: String::new(),
            }],
        }],
    };
    let e = x.resolve_entities(&er).await.unwrap_err();
    assert!(
        matches!(
            &e,
            LlmError::InvalidOutput {
                kind: "resolve_entities",
                ..
            }
        ),
        "{e:?}"
    );

    let cand = CandidateFact {
        relation: "LIVES_IN".into(),
        fact: "Alice lives in Berlin.".into(),
        valid_at: None,
        invalid_at: None,
    };
    let fr = FactResolutionRequest {
        facts: vec![NewFactCandidates {
            relation: "LIVES_IN".into(),
            fact: "Alice lives in Paris.".into(),
            valid_at: None,
            duplicates: vec![],
            contradictions: vec![cand],
        }],
    };
    let e = x.resolve_facts(&fr).await.unwrap_err();
    assert!(
        matches!(
            &e,
            LlmError::InvalidOutput {
                kind: "resolve_facts",
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn resolution_asks_only_about_items_with_candidates() {
    let fake = server().await;
    let x = extractor(&fake);
    fake.set_responder(Arc::new(|req: &ChatRequestSeen| match req.kind() {
        Some(PromptKind::ResolveEntities) => {
            FakeReply::Json(json!({"answers": [{"id": 0, "duplicate": 1}]}))
        }
        Some(PromptKind::ResolveFacts) => FakeReply::Json(
            json!({"answers": [{"id": 0, "duplicate_of": null, "contradicts": [0]}]}),
        ),
        _ => minimal_reply(req),
    }));
    let cand = |n: &str| CandidateEntity {
        name: n.into(),
        entity_type: "Person".into(),
        summary: format!("{n} is a person."),
    };
    let er = EntityResolutionRequest {
        episode_content: "alice: Bob called".into(),
        entities: vec![
            AmbiguousEntity {
                name: "alice".into(),
                entity_type: "Person".into(),
                candidates: vec![],
            },
            AmbiguousEntity {
                name: "Bob".into(),
                entity_type: "Person".into(),
                candidates: vec![cand("Robert"), cand("Bob Stone")],
            },
        ],
    };
    assert_eq!(x.resolve_entities(&er).await.unwrap(), vec![None, Some(1)]);
    let seen = fake.chat_log().pop().unwrap();
    assert_eq!(seen.item_count(), 1);
    assert_eq!(seen.current_episode(), Some("alice: Bob called"));

    let fact = |candidates: Vec<CandidateFact>| NewFactCandidates {
        relation: "LIVES_IN".into(),
        fact: "Alice lives in Paris.".into(),
        valid_at: Some(ts("2024-05-01T00:00:00Z")),
        duplicates: vec![],
        contradictions: candidates,
    };
    let old = CandidateFact {
        relation: "LIVES_IN".into(),
        fact: "Alice lives in Berlin.".into(),
        valid_at: Some(ts("2020-01-01T00:00:00Z")),
        invalid_at: None,
    };
    let fr = FactResolutionRequest {
        facts: vec![fact(vec![]), fact(vec![old])],
    };
    assert_eq!(
        x.resolve_facts(&fr).await.unwrap(),
        vec![
            FactResolution::default(),
            FactResolution {
                duplicate_of: None,
                contradicts: vec![0]
            }
        ]
    );
    // Nothing to ask: no call.
    let before = fake.stats().chat_requests;
    assert_eq!(
        x.resolve_facts(&FactResolutionRequest {
            facts: vec![fact(vec![])]
        })
        .await
        .unwrap()
        .len(),
        1
    );
    assert!(
        x.summarize(&SummaryRequest {
            kind: SummaryKind::Saga,
            max_chars: 100,
            items: vec![]
        })
        .await
        .unwrap()
        .is_empty()
    );
    assert!(x.rerank("q", &[]).await.unwrap().is_empty());
    assert_eq!(fake.stats().chat_requests, before);
}

#[tokio::test]
async fn summaries_and_rerank_scores() {
    let fake = server().await;
    let x = extractor(&fake);
    fake.set_responder(Arc::new(|req: &ChatRequestSeen| match req.kind() {
        Some(PromptKind::SummarizeEntities) => FakeReply::Json(json!({"answers": [
            {"id": 0, "summary": "Alice lives in Paris and works at Acme. She likes long walks by the river."}
        ]})),
        Some(PromptKind::Rerank) => FakeReply::Json(json!({"answers": (0..req.item_count())
            .map(|i| json!({"id": i, "score": 100 - 10 * i}))
            .collect::<Vec<_>>()})),
        _ => minimal_reply(req),
    }));
    let s = x
        .summarize(&SummaryRequest {
            kind: SummaryKind::Entity,
            max_chars: 60,
            items: vec![SummaryItem {
                subject: "Alice".into(),
                current: String::new(),
                new_material: vec!["Alice moved to Paris.".into()],
            }],
        })
        .await
        .unwrap();
    assert_eq!(
        s,
        vec!["Alice lives in Paris and works at Acme.".to_owned()]
    );
    let scores = x
        .rerank(
            "where does alice live",
            &["Alice lives in Paris".into(), "Bob".into(), "c".into()],
        )
        .await
        .unwrap();
    assert_eq!(scores, vec![1.0, 0.9, 0.8]);
}

#[tokio::test]
async fn concurrency_is_limited() {
    let fake = server().await;
    let mut config = fake.config();
    config.max_concurrency = 2;
    let x = OpenAiExtractor::new(config).unwrap();
    for _ in 0..6 {
        fake.push_fault(Endpoint::Chat, Fault::Delay(Duration::from_millis(50)));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..6 {
        let x = x.clone();
        let req = episode(&format!("user{i}: Hello Bob."));
        tasks.spawn(async move { x.extract(&req).await });
    }
    while let Some(result) = tasks.join_next().await {
        result.unwrap().unwrap();
    }
    assert_eq!(fake.stats().chat_requests, 6);
    assert_eq!(fake.stats().max_chat_in_flight, 2);
}

#[tokio::test]
async fn embeddings_are_batched_normalized_and_cached() {
    let fake = server().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = fake.config();
    config.embedding_batch = 4;
    let cache = ResponseCache::open(dir.path().join("cache.redb")).unwrap();
    let x = OpenAiExtractor::with_cache(config.clone(), Some(cache)).unwrap();
    let e = x.embedder();
    assert_eq!(e.dimension(), 384);
    let texts: Vec<String> = (0..10)
        .map(|i| format!("text number {i} about Alice"))
        .collect();
    let before = count!(embeddings, "openai");
    let v = e.embed(&texts).await.unwrap();
    assert_eq!(v.len(), 10);
    for (t, x) in texts.iter().zip(&v) {
        assert_eq!(x.len(), 384);
        assert!((cosine(x, x) - 1.0).abs() < 1e-5);
        // In order: each vector is its own text's.
        assert!((cosine(x, &crate::HashEmbedder::new(384).embed_one(t)) - 1.0).abs() < 1e-5);
    }
    let stats = fake.stats();
    assert_eq!((stats.embedding_requests, stats.embedding_texts), (3, 10));
    assert_eq!(count!(embeddings, "openai"), before + 10);

    // Cached texts are not sent again; new ones are.
    let mut more = texts.clone();
    more.push("a new text".into());
    assert_eq!(e.embed(&more).await.unwrap()[..10], v[..]);
    let stats = fake.stats();
    assert_eq!((stats.embedding_requests, stats.embedding_texts), (4, 11));
}

#[tokio::test]
async fn embedding_failures_are_retried_then_typed() {
    let fake = server().await;
    let mut config = fake.config();
    config.max_retries = 1;
    let e = OpenAiEmbedder::new(config.clone()).unwrap();
    fake.push_fault(Endpoint::Embeddings, Fault::Status(429));
    assert_eq!(e.embed(&["a".into()]).await.unwrap().len(), 1);
    assert_eq!(fake.stats().embedding_requests, 2);

    fake.push_fault(Endpoint::Embeddings, Fault::InvalidJson);
    fake.push_fault(Endpoint::Embeddings, Fault::InvalidJson);
    let err = e.embed(&["b".into()]).await.unwrap_err();
    assert!(matches!(err, LlmError::Embedding(_)), "{err:?}");

    // A dimension mismatch is a configuration error: no retry.
    fake.reset();
    config.embedding_dim = 1536;
    let e = OpenAiEmbedder::new(config).unwrap();
    let err = e.embed(&["c".into()]).await.unwrap_err();
    assert!(
        matches!(&err, LlmError::Embedding(m) if m.contains("384-dimensional")),
        "{err:?}"
    );
    assert_eq!(fake.stats().embedding_requests, 1);
}

#[tokio::test]
async fn a_short_chat_episode_costs_under_8000_prompt_characters() {
    let fake = server().await;
    for json_schema in [true, false] {
        fake.reset();
        let mut config = fake.config();
        config.json_schema = json_schema;
        let x = OpenAiExtractor::new(config).unwrap();
        let chars = one_episode(&x, &fake).await;
        assert!(
            chars <= 8_000,
            "json_schema={json_schema}: {chars} prompt characters"
        );
    }
}

/// Runs the four calls of a short chat episode; its prompt characters.
async fn one_episode(x: &OpenAiExtractor, fake: &FakeOpenAi) -> usize {
    let mut req = episode(
        "alice: Great news, I just started at Initech! Bob Stone from Acme introduced me to their CTO, Carol Wu.",
    );
    req.previous_episodes = (0..10)
        .map(|i| ContextEpisode {
            content: format!(
                "{}: message number {i} of a short chat about work, cats and the weather.",
                if i % 2 == 0 { "alice" } else { "assistant" }
            ),
            valid_at: ts("2024-05-01T10:00:00Z"),
        })
        .collect();
    x.extract(&req).await.unwrap();
    let cand = |n: &str| CandidateEntity {
        name: n.into(),
        entity_type: "Person".into(),
        summary: format!("{n} works in software and lives in Berlin."),
    };
    x.resolve_entities(&EntityResolutionRequest {
        episode_content: req.content.clone(),
        entities: vec![
            AmbiguousEntity {
                name: "Bob Stone".into(),
                entity_type: "Person".into(),
                candidates: vec![cand("Bob"), cand("Robert Stone")],
            },
            AmbiguousEntity {
                name: "Acme".into(),
                entity_type: "Organization".into(),
                candidates: vec![cand("Acme Corp")],
            },
        ],
    })
    .await
    .unwrap();
    let old = |f: &str| CandidateFact {
        relation: "WORKS_AT".into(),
        fact: f.into(),
        valid_at: Some(ts("2022-01-01T00:00:00Z")),
        invalid_at: None,
    };
    x.resolve_facts(&FactResolutionRequest {
        facts: vec![NewFactCandidates {
            relation: "WORKS_AT".into(),
            fact: "Alice works at Initech.".into(),
            valid_at: Some(ts("2024-05-02T10:00:00Z")),
            duplicates: vec![old("Alice works at Initech.")],
            contradictions: vec![old("Alice works at Globex."), old("Alice works at Hooli.")],
        }],
    })
    .await
    .unwrap();
    x.summarize(&SummaryRequest {
        kind: SummaryKind::Entity,
        max_chars: 250,
        items: vec![SummaryItem {
            subject: "Alice".into(),
            current: "Alice is a data engineer in Berlin with a cat named Miso.".into(),
            new_material: vec!["Alice works at Initech.".into()],
        }],
    })
    .await
    .unwrap();
    let stats = fake.stats();
    let per_call: Vec<(String, usize)> = fake
        .chat_log()
        .iter()
        .map(|r| (format!("{:?}", r.kind()), r.prompt_chars()))
        .collect();
    println!(
        "json_schema={}: prompt characters per call {per_call:?}, total {}",
        x.uses_json_schema(),
        stats.chat_prompt_chars
    );
    assert_eq!(stats.chat_requests, 4);
    stats.chat_prompt_chars
}

#[tokio::test]
async fn the_api_key_goes_in_the_configured_header() {
    let fake = server().await;
    let mut config = fake.config();
    config.api_key = Some("sk-test".into());
    OpenAiExtractor::new(config.clone())
        .unwrap()
        .extract(&episode("alice: yo"))
        .await
        .unwrap();
    config.api_key_header = Some("api-key".into());
    OpenAiExtractor::new(config)
        .unwrap()
        .extract(&episode("alice: yo!"))
        .await
        .unwrap();
    let log = fake.chat_log();
    assert_eq!(log[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(log[1].header("api-key"), Some("sk-test"));
    assert_ne!(log[1].header("authorization"), Some("Bearer sk-test"));
}
