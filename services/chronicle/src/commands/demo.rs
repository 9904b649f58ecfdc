//! `chronicle demo`: the main job on the embedded default, in seconds.

use chronicle_engine::search::SearchFilters;
use chronicle_llm::{MiniLmEmbedder, default_model_dir};
use chronicle_model::GroupId;

use crate::commands::read::fact_line;
use crate::config::{EmbedderKind, ExtractorKind, Settings};
use crate::node::Node;
use crate::style::{bold, cyan, dim};
use chronicle_query::{Query, SearchRequest};

/// The bundled sample: the seeds' Alice story and a second tenant.
const SAMPLE: &str = include_str!("../../data/demo.jsonl");

fn heading(text: &str) {
    println!("\n{} {}", cyan("▶"), bold(text));
}

/// Runs the demo in a temporary data directory.
pub async fn run() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let embedder = if MiniLmEmbedder::available(&default_model_dir()) {
        EmbedderKind::Minilm
    } else {
        eprintln!(
            "note: MiniLM weights not found in {} (run scripts/fetch-minilm.sh); using the hashed embedder",
            default_model_dir().display()
        );
        EmbedderKind::Hash
    };
    let node = Node::open(Settings::embedded(
        dir.path(),
        ExtractorKind::Offline,
        embedder,
    ))
    .await?;
    // Two waves, so that transaction time has something to show: what the
    // system knew between them.
    let (early, late): (Vec<&str>, Vec<&str>) = SAMPLE
        .lines()
        .partition(|l| l.contains("\"2025-01-") || l.contains("\"2025-02-"));
    let first = dir.path().join("demo-1.jsonl");
    let second = dir.path().join("demo-2.jsonl");
    fs_err::write(&first, early.join("\n"))?;
    fs_err::write(&second, late.join("\n"))?;
    println!(
        "{}",
        bold("chronicle demo — a temporal context graph, embedded, offline")
    );
    println!(
        "{}",
        dim(&format!(
            "ingesting {} episodes of two tenants into {} (offline extractor, {} embedder)…",
            SAMPLE.lines().count(),
            dir.path().display(),
            node.decider()?.embedder().describe()
        ))
    );
    let started = std::time::Instant::now();
    super::ingest::run(&node, &first, true, false).await?;
    let between = chronicle_query::now();
    super::ingest::run(&node, &second, true, false).await?;
    println!(
        "{}",
        dim(&format!(
            "processed and projected in {:.2}s",
            started.elapsed().as_secs_f64()
        ))
    );

    let alice_group = GroupId::new("alice-assistant")?;
    let other_group = GroupId::new("acme-support")?;
    let q = Query::new(node.sources()?);
    let lives = |as_of| SearchFilters {
        edge_types: Some(vec!["LIVES_IN".into()]),
        as_of,
        ..Default::default()
    };

    heading("Where does Alice live now?");
    for f in q.facts(&alice_group, Some("Alice"), &lives(None)).await? {
        println!("  {}", fact_line(&f));
    }

    heading("Where did Alice live as of 2025-02-28?");
    for f in q
        .facts(
            &alice_group,
            Some("Alice"),
            &lives(Some("2025-02-28T00:00:00Z".parse()?)),
        )
        .await?
    {
        println!("  {}", fact_line(&f));
    }

    heading("Alice's timeline (nothing is deleted; contradicted facts keep their windows)");
    let (alice, timeline) = q.timeline(&alice_group, "Alice").await?;
    println!("  {}", dim(&format!("summary: {}", alice.summary)));
    for f in timeline {
        println!("  {}", fact_line(&f));
    }

    heading("Hybrid search (BM25 + embeddings, RRF): \"where does Alice work?\"");
    let request = SearchRequest::recipe("where does Alice work?", "COMBINED_HYBRID_SEARCH_RRF", 3)?;
    for r in q
        .search(&alice_group, &request)
        .await?
        .results
        .iter()
        .take(6)
    {
        let text = r
            .fact
            .clone()
            .or(r.summary.clone())
            .or(r.content.clone())
            .unwrap_or_default();
        println!(
            "  {} [{}] {} {}",
            dim(&format!("{:.3}", r.score)),
            cyan(r.kind.as_str()),
            bold(&r.name),
            text
        );
    }

    heading(&format!(
        "What the system knew at {between}, between the two ingest waves (transaction time, for audits)"
    ));
    let known = SearchFilters {
        known_at: Some(between),
        ..Default::default()
    };
    for f in q.facts(&alice_group, Some("Alice"), &known).await? {
        println!("  {}", fact_line(&f));
    }

    heading("Tenant isolation: acme-support searches for Alice");
    let request = SearchRequest::recipe(
        "Alice Beijing Shanghai Meituan",
        "COMBINED_HYBRID_SEARCH_RRF",
        10,
    )?;
    let foreign = q.search(&other_group, &request).await?;
    let leaked = foreign
        .results
        .iter()
        .filter(|r| format!("{r:?}").contains("Alice"))
        .count();
    println!(
        "  {} results mention Alice; `facts --entity Alice` in acme-support: {}",
        leaked,
        match q
            .facts(&other_group, Some("Alice"), &SearchFilters::default())
            .await
        {
            Ok(f) => format!("{} facts", f.len()),
            Err(e) => e.to_string(),
        }
    );

    heading("Totals");
    for g in [&alice_group, &other_group] {
        let c = node.store()?.counts(Some(g)).await?;
        println!(
            "  {g}: {} episodes, {} entities, {} facts ({} current, {} history)",
            c.episodes, c.entities, c.facts, c.facts_valid, c.facts_invalidated
        );
    }
    Ok(())
}
