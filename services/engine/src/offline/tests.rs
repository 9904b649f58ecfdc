use super::*;

type Row = (String, String, String, Option<String>, Option<String>);

fn facts(text: &str, speaker: Option<&str>) -> Vec<Row> {
    OfflineExtractor
        .extract_text(text, speaker, &Ontology::default())
        .facts
        .into_iter()
        .map(|f| (f.source, f.relation, f.target, f.valid_at, f.invalid_at))
        .collect()
}

#[test]
fn conversational_filler_is_no_subject_and_i_is_the_speaker() {
    for filler in [
        "Sounds like fun!",
        "Looks like a great trip.",
        "It's like Paris.",
        "You like Rome.",
        "That's like Oslo.",
    ] {
        assert_eq!(facts(filler, Some("Mel")), vec![], "{filler}");
    }
    assert_eq!(
        facts("I'd love Paris.", Some("Mel")),
        vec![f("Mel", "LIKES", "Paris", None, None)]
    );
}

#[test]
fn characters_that_change_length_when_lower_cased_do_not_break_slicing() {
    let kelvin = "\u{212A}".repeat(8);
    let text = format!("Alice lives in Paris{kelvin} and moved to Rome.");
    let found = facts(&text, None);
    assert!(found.iter().any(|r| r.2 == "Rome"), "{found:?}");
    let _ = facts(&format!("Bob moved to Oslo until {kelvin} İİİ 2020"), None);
    let _ = facts(
        "Alice: İ live in Paris and İ moved to Rome since \u{212A}",
        None,
    );
}

proptest::proptest! {
    #[test]
    fn any_text_extracts_without_panicking(text in "\\PC{0,200}", speaker in proptest::option::of("\\PC{0,12}")) {
        for source in EpisodeType::ALL {
            let _ = OfflineExtractor.extract_content(&text, source, &Ontology::default());
        }
        let _ = OfflineExtractor.extract_text(&text, speaker.as_deref(), &Ontology::default());
    }
}

fn f(s: &str, r: &str, t: &str, v: Option<&str>, i: Option<&str>) -> Row {
    (
        s.into(),
        r.into(),
        t.into(),
        v.map(Into::into),
        i.map(Into::into),
    )
}

#[test]
fn synthetic_workload_sentences() {
    assert_eq!(
        facts(
            "Pedro Kowalski lives in Dublin. Wesley Bauer works at Wayne Enterprises.",
            None
        ),
        vec![
            f("Pedro Kowalski", "LIVES_IN", "Dublin", None, None),
            f("Wesley Bauer", "WORKS_AT", "Wayne Enterprises", None, None),
        ]
    );
    assert_eq!(
        facts("Lorenzo Novak moved to Lisbon.", None),
        vec![f("Lorenzo Novak", "LIVES_IN", "Lisbon", None, None)]
    );
}

#[test]
fn speakers_pronouns_and_times() {
    assert_eq!(
        facts("I moved to Shanghai in March", Some("Alice")),
        vec![f("Alice", "LIVES_IN", "Shanghai", Some("in March"), None)]
    );
    assert_eq!(
        facts("Bob joined Initech last year and left Globex.", None),
        vec![
            f("Bob", "WORKS_AT", "Initech", Some("last year"), None),
            f("Bob", "WORKS_AT", "Globex", None, Some("now")),
        ]
    );
    assert_eq!(
        facts(
            "In 2019, Carol moved to New York. She is married to Dave Smith since June.",
            None
        ),
        vec![
            f("Carol", "LIVES_IN", "New York", Some("In 2019"), None),
            f(
                "Carol",
                "MARRIED_TO",
                "Dave Smith",
                Some("since June"),
                None
            ),
        ]
    );
    assert_eq!(
        facts("Erin lived in Rio de Janeiro until 2020.", None),
        vec![f("Erin", "LIVES_IN", "Rio de Janeiro", None, Some("2020"))]
    );
    assert_eq!(
        facts("Frank likes green tea.", None),
        vec![f("Frank", "LIKES", "green tea", None, None)]
    );
    assert!(facts("The weather is nice.", None).is_empty());
    assert_eq!(
        facts(
            "Hi! I live in Beijing and I work at ByteDance.",
            Some("Alice")
        ),
        vec![
            f("Alice", "LIVES_IN", "Beijing", None, None),
            f("Alice", "WORKS_AT", "ByteDance", None, None),
        ]
    );
    assert_eq!(
        facts(
            "I really like hot pot, especially in winter.",
            Some("Alice")
        ),
        vec![f("Alice", "LIKES", "hot pot", None, None)]
    );
    assert_eq!(
        facts("Last week I bought a Tesla.", Some("Alice")),
        vec![f("Alice", "OWNS", "Tesla", Some("Last week"), None)]
    );
    assert_eq!(
        facts("I am married to Bob Chen since 2023.", Some("Alice")),
        vec![f(
            "Alice",
            "MARRIED_TO",
            "Bob Chen",
            Some("since 2023"),
            None
        )]
    );
}

#[test]
fn speaker_prefix() {
    assert_eq!(split_speaker("alice: I moved"), (Some("alice"), "I moved"));
    assert_eq!(split_speaker("no speaker here"), (None, "no speaker here"));
    assert_eq!(capitalize("alice smith"), "Alice Smith");
}

#[test]
fn extractive_summaries_keep_the_newest() {
    let s = extractive_summary(
        "Alice lives in Beijing.",
        &["Alice moved to Shanghai".into()],
        200,
    );
    assert_eq!(s, "Alice lives in Beijing. Alice moved to Shanghai.");
    let s = extractive_summary(&"Old fact. ".repeat(40), &["New fact".into()], 30);
    assert!(s.ends_with("New fact.") && s.len() <= 30, "{s}");
}

#[test]
fn community_summaries_keep_the_most_cited_head() {
    let facts: Vec<String> = [
        "Ada works at Initech.",
        "Ben works at Initech",
        "Ada knows Ben",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        leading_summary(&facts, 200),
        "Ada works at Initech. Ben works at Initech. Ada knows Ben."
    );
    assert_eq!(leading_summary(&facts, 30), "Ada works at Initech.");
    assert_eq!(leading_summary(&[], 30), "");
}
