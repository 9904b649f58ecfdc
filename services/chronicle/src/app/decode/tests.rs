use super::*;
use proptest::prelude::*;

fn g() -> GroupId {
    GroupId::new("acme").unwrap()
}

fn now() -> Timestamp {
    "2025-06-01T00:00:00Z".parse().unwrap()
}

fn field(r: Result<impl std::fmt::Debug, ApiError>) -> (u16, String) {
    let e = r.unwrap_err();
    (e.status.as_u16(), e.field.unwrap_or_default())
}

#[test]
fn episodes_single_and_batch() {
    let one = episodes(&g(), br#"{"content":"Ada: I moved to Oslo."}"#, now()).unwrap();
    assert!(!one.batch);
    assert_eq!(one.episodes[0].reference_time, now(), "defaults to now");
    let many = episodes(
        &g(),
        br#"{"episodes":[{"content":"a"},{"content":"b","reference_time":"2024-01-01T00:00:00Z"}]}"#,
        now(),
    )
    .unwrap();
    assert!(many.batch);
    assert_eq!(many.episodes.len(), 2);
}

#[test]
fn episode_errors_name_the_field() {
    let cases: &[(&[u8], u16, &str)] = &[
        (b"", 400, "body"),
        (b"  \n", 400, "body"),
        (b"{", 400, "body"),
        (b"[1,2]", 400, "body"),
        (b"\"text\"", 400, "body"),
        (br#"{"content":"a"} x"#, 400, "body"),
        (br#"{"content":5}"#, 400, "content"),
        (br#"{"content":"a","bogus":1}"#, 400, "bogus"),
        (br#"{"content":"a","content":"b"}"#, 400, "content"),
        (br#"{"content":"  "}"#, 400, "content"),
        (br#"{}"#, 400, "content"),
        (
            br#"{"content":"a","reference_time":"soon"}"#,
            400,
            "reference_time",
        ),
        (
            br#"{"content":"a","reference_time":"0000-01-01T00:00:00Z"}"#,
            400,
            "reference_time",
        ),
        (br#"{"content":"a","group_id":"other"}"#, 400, "group_id"),
        (br#"{"content":"a","uuid":"nope"}"#, 400, "uuid"),
        (br#"{"content":"a","metadata":[1]}"#, 400, "metadata"),
        // A fact_triple episode gets the same checks as /triplets.
        (
            br#"{"source":"fact_triple","content":"{\"source\":\"A\",\"relation\":\"R\",\"target\":\"B\",\"valid_at\":\"2024-01-02T00:00:00Z\",\"invalid_at\":\"2024-01-01T00:00:00Z\"}"}"#,
            400,
            "content.invalid_at",
        ),
        (
            br#"{"source":"fact_triple","content":"{\"source\":\"A\",\"relation\":\"R\",\"target\":\"B\",\"valid_at\":\"2024-01-01T00:00:00Z\",\"invalid_at\":\"2024-01-01T00:00:00Z\"}"}"#,
            400,
            "content.invalid_at",
        ),
        (
            br#"{"source":"fact_triple","content":"{\"source\":\"A\",\"relation\":\"R\",\"target\":\"B\",\"fact\":\" \"}"}"#,
            400,
            "content.fact",
        ),
        (
            br#"{"source":"fact_triple","content":"{\"source\":\"A\",\"relation\":\"R\",\"target\":\"B\",\"target_labels\":[\"\"]}"}"#,
            400,
            "content.target_labels[0]",
        ),
        (br#"{"episodes":[]}"#, 400, "episodes"),
        (br#"{"episodes":{}}"#, 400, "episodes"),
        (
            br#"{"episodes":[{"content":"a"},{"content":""}]}"#,
            400,
            "episodes[1].content",
        ),
        (
            br#"{"episodes":[{"content":"a"},{"content":"b","x":1}]}"#,
            400,
            "episodes[1].x",
        ),
        (br#"{"episodes":[{"content":"a"}],"extra":1}"#, 400, "extra"),
    ];
    for (body, status, f) in cases {
        assert_eq!(
            field(episodes(&g(), body, now())),
            (*status, f.to_string()),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    let big = format!(
        r#"{{"episodes":[{}]}}"#,
        vec![r#"{"content":"a"}"#; MAX_BATCH + 1].join(",")
    );
    assert_eq!(
        episodes(&g(), big.as_bytes(), now()).unwrap_err().status,
        413
    );
}

#[test]
fn triplets_become_fact_triple_episodes() {
    let s = triplets(
        &g(),
        br#"{"source":"Ada","relation":"LIVES_IN","target":"Oslo","valid_at":"2024-01-01T00:00:00Z"}"#,
        now(),
    )
    .unwrap();
    let ep = &s.episodes[0];
    assert_eq!(ep.source, chronicle_model::EpisodeType::FactTriple);
    assert_eq!(ep.name, "Ada LIVES_IN Oslo");
    let t = FactTriple::parse(&ep.content).unwrap();
    assert_eq!(t.valid_at, Some("2024-01-01T00:00:00Z".parse().unwrap()));
    let cases: &[(&[u8], &str)] = &[
        (br#"{"source":"","relation":"R","target":"B"}"#, "source"),
        (br#"{"source":"A","relation":"R"}"#, "target"),
        (br#"{"source":"A","relation":" ","target":"B"}"#, "relation"),
        (
            br#"{"source":"A","relation":"R","target":"B","valid_at":"x"}"#,
            "valid_at",
        ),
        (
            br#"{"source":"A","relation":"R","target":"B","valid_at":"2024-01-02T00:00:00Z","invalid_at":"2024-01-01T00:00:00Z"}"#,
            "invalid_at",
        ),
        (
            br#"{"source":"A","relation":"R","target":"B","source_labels":[""]}"#,
            "source_labels[0]",
        ),
        (
            br#"{"triplets":[{"source":"A","relation":"R","target":"B"},{"source":"A"}]}"#,
            "triplets[1].relation",
        ),
    ];
    for (body, f) in cases {
        assert_eq!(
            field(triplets(&g(), body, now())),
            (400, f.to_string()),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn search_bodies() {
    let s = search(br#"{"query":"where does Ada live","limit":3,"as_of":"2024-06-01T00:00:00Z","center":"Ada"}"#).unwrap();
    assert_eq!(s.request.recipe, DEFAULT_RECIPE);
    assert_eq!(s.request.config.limit, 3);
    assert!(s.request.filters.as_of.is_some());
    assert_eq!(s.center, Some(EntityRef::Name("Ada".into())));
    let custom =
        search(br#"{"query":"q","config":{"facts":{"channels":["bm25"],"reranker":"rrf"}}}"#)
            .unwrap();
    assert_eq!(custom.request.recipe, "custom");
    let cases: &[(&[u8], &str)] = &[
        (br#"{}"#, "query"),
        (br#"{"query":" "}"#, "query"),
        (br#"{"query":"q","recipe":"NOPE"}"#, "recipe"),
        (br#"{"query":"q","limit":0}"#, "limit"),
        (br#"{"query":"q","limit":-1}"#, "limit"),
        (br#"{"query":"q","limit":1000}"#, "limit"),
        (br#"{"query":"q","as_of":"x"}"#, "as_of"),
        (br#"{"query":"q","filters":{"as_of":"x"}}"#, "filters.as_of"),
        (
            br#"{"query":"q","as_of":"2024-01-01T00:00:00Z","filters":{"as_of":"2024-01-01T00:00:00Z"}}"#,
            "as_of",
        ),
        (br#"{"query":"q","filters":{"nope":1}}"#, "filters.nope"),
        (br#"{"query":"q","config":{}}"#, "config"),
        (
            br#"{"query":"q","recipe":"EDGE_HYBRID_SEARCH_RRF","config":{}}"#,
            "config",
        ),
        (
            br#"{"query":"q","config":{"facts":{"channels":["bm25"],"reranker":"rrf"},"bfs_max_depth":99}}"#,
            "config.bfs_max_depth",
        ),
        (
            br#"{"query":"q","config":{"facts":{"channels":["x"],"reranker":"rrf"}}}"#,
            "config.facts.channels[0]",
        ),
        (
            br#"{"query":"q","config":{"facts":{"channels":[],"reranker":"rrf"}}}"#,
            "config.facts.channels",
        ),
        (br#"{"query":"q","center":""}"#, "center"),
        (br#"{"query":"q","include_history":"yes"}"#, "include_history"),
    ];
    for (body, f) in cases {
        assert_eq!(
            field(search(body)),
            (400, f.to_string()),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn query_strings() {
    assert_eq!(
        list_query(Some("last_n=5&before=2025-01-01T00%3A00%3A00Z")).unwrap(),
        ListQuery {
            last_n: 5,
            before: Some("2025-01-01T00:00:00Z".parse().unwrap())
        }
    );
    assert_eq!(list_query(None).unwrap().last_n, DEFAULT_LAST_N);
    let f = facts_query(Some(
        "entity=Ada&edge_type=A&edge_type=B&include_history=true",
    ))
    .unwrap();
    assert_eq!(f.entity, Some(EntityRef::Name("Ada".into())));
    assert_eq!(f.filters.edge_types.as_ref().map(Vec::len), Some(2));
    assert!(f.filters.include_history);
    let cases: &[(Result<(), ApiError>, &str)] = &[
        (list_query(Some("last_n=0")).map(drop), "last_n"),
        (list_query(Some("last_n=abc")).map(drop), "last_n"),
        (list_query(Some("last_n=1&last_n=2")).map(drop), "last_n"),
        (list_query(Some("before=yesterday")).map(drop), "before"),
        (list_query(Some("limit=3")).map(drop), "limit"),
        (facts_query(Some("as_of=x")).map(drop), "as_of"),
        (
            facts_query(Some("include_history=maybe")).map(drop),
            "include_history",
        ),
        (facts_query(Some("entity=")).map(drop), "entity"),
        (facts_query(Some("limit=100000")).map(drop), "limit"),
        (no_params(Some("x=1")), "x"),
    ];
    for (r, f) in cases {
        assert_eq!(r.as_ref().unwrap_err().field.as_deref(), Some(*f));
    }
}

/// JSON-ish text: fragments of valid requests, mutated.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
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
        "1",
        "-1",
        "1e999",
        "\"content\"",
        "\"episodes\"",
        "\"triplets\"",
        "\"query\"",
        "\"recipe\"",
        "\"config\"",
        "\"filters\"",
        "\"as_of\"",
        "\"reference_time\"",
        "\"source\"",
        "\"relation\"",
        "\"target\"",
        "\"limit\"",
        "\"center\"",
        "\"uuid\"",
        "\"2025-01-01T00:00:00Z\"",
        "\"0000-01-01T00:00:00Z\"",
        "\"fact_triple\"",
        "\"json\"",
        "\"\\u0000\"",
        "\"facts\"",
        "\"channels\"",
        "\"bm25\"",
        "\"reranker\"",
        "\"rrf\"",
        "\"node_distance\"",
        "\"metadata\"",
        "\u{fffd}",
    ]);
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat().into_bytes()),
    ]
}

fn client_error(r: Result<impl Sized, ApiError>) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        prop_assert!(e.status.is_client_error(), "{e:?}");
        prop_assert!(e.field.is_some(), "{e:?}");
    }
    Ok(())
}

proptest! {
    #[test]
    fn decoders_never_panic_nor_fail_as_server(body in jsonish(), raw in ".{0,64}") {
        client_error(episodes(&g(), &body, now()))?;
        client_error(triplets(&g(), &body, now()))?;
        client_error(search(&body))?;
        client_error(list_query(Some(&raw)))?;
        client_error(facts_query(Some(&raw)))?;
        client_error(no_params(Some(&raw)))?;
        client_error(group(&raw))?;
        client_error(path_uuid("uuid", &raw))?;
    }

    #[test]
    fn valid_episodes_are_accepted(content in "[a-zA-Z][a-zA-Z .:]{0,200}", n in 1usize..5) {
        let items: Vec<serde_json::Value> = (0..n)
            .map(|i| serde_json::json!({"content": format!("{content} {i}")}))
            .collect();
        let body = serde_json::to_vec(&serde_json::json!({"episodes": items})).unwrap();
        let s = episodes(&g(), &body, now()).unwrap();
        prop_assert_eq!(s.episodes.len(), n);
    }
}
