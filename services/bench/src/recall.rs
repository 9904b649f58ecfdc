//! `chronicle bench recall`: does search hand back what was said?
//!
//! Ingests conversations (one episode per turn), asks every question and
//! scores evidence recall the way a user feels it: the top `k` results are
//! `k` items, and an item covers only the turns it shows (an episode its own
//! turn, or its context turns where that is reported separately; a fact or
//! an entity the first episode it names). Plain Okapi BM25 over the raw turns
//! (tantivy, one document per turn) is measured in the same run as the
//! baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use chronicle_index::{DocKind, IndexDoc, SearchIndex};
use chronicle_model::{Command, GroupId};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use chronicle::config::{LogUri, Settings, StoreUri};
use chronicle::gateway::Gateway;
use chronicle::node::Node;
use chronicle::processor::ProcessorOptions;
use chronicle::runtime;
use chronicle_query::{Query, ResultItem, SearchRequest};

/// One question of the set.
#[derive(Debug, Deserialize)]
struct Question {
    group_id: String,
    question: String,
    #[serde(default)]
    category_name: Option<String>,
    /// Names of the episodes (turns) that hold the answer.
    evidence: Vec<String>,
}

/// Recall sums per category, for one way of ranking.
#[derive(Default)]
struct Tally {
    /// category → (questions, recall sum per k).
    by_category: BTreeMap<String, (usize, Vec<f64>)>,
}

impl Tally {
    fn add(
        &mut self,
        category: &str,
        ks: &[usize],
        ranked: &[BTreeSet<String>],
        evidence: &[String],
    ) {
        let entry = self
            .by_category
            .entry(category.to_owned())
            .or_insert_with(|| (0, vec![0.0; ks.len()]));
        entry.0 += 1;
        for (i, &k) in ks.iter().enumerate() {
            let covered: BTreeSet<&String> = ranked.iter().take(k).flatten().collect();
            let found = evidence.iter().filter(|e| covered.contains(e)).count();
            entry.1[i] += found as f64 / evidence.len() as f64;
        }
    }

    fn report(&self, ks: &[usize]) -> serde_json::Value {
        let at = |sums: &[f64], n: usize| -> serde_json::Value {
            ks.iter()
                .zip(sums)
                .map(|(k, s)| (format!("@{k}"), json!(round(s / n.max(1) as f64))))
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let mut total = vec![0.0; ks.len()];
        let mut questions = 0;
        let mut categories = serde_json::Map::new();
        for (c, (n, sums)) in &self.by_category {
            questions += n;
            for (t, s) in total.iter_mut().zip(sums) {
                *t += s;
            }
            categories.insert(c.clone(), at(sums, *n));
        }
        json!({ "overall": at(&total, questions), "by_category": categories })
    }
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The turns one result shows: strict (itself, or the first episode it
/// names) or with its context turns.
fn turns_of(item: &ResultItem, with_context: bool) -> BTreeSet<String> {
    if with_context && !item.context.is_empty() {
        return item.context.iter().map(|t| t.name.clone()).collect();
    }
    item.episodes
        .iter()
        .take(1)
        .map(|p| p.name.clone())
        .collect()
}

/// How many results per question `--ranks` writes.
const RANKS_DEPTH: usize = 50;

/// Runs the benchmark.
pub async fn run(
    settings: &Settings,
    episodes: &Path,
    questions: &Path,
    ks: &[usize],
    recipes: &[String],
    ranks: Option<&Path>,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut s = settings.clone();
    s.data = dir.path().join("data");
    s.log = LogUri::Embedded;
    s.store = StoreUri::Embedded;
    let node = Node::open(s).await?;
    let (commands, errors) = chronicle::commands::parse_jsonl(&fs_err::read_to_string(episodes)?);
    anyhow::ensure!(
        errors.is_empty(),
        "{} invalid episode lines, first: line {}: {}",
        errors.len(),
        errors[0].0,
        errors[0].1
    );
    let questions: Vec<Question> = fs_err::read_to_string(questions)?
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| anyhow::anyhow!("question line {}: {e}", i + 1))
        })
        .collect::<Result<_, _>>()?;

    // Baseline: plain BM25 over the raw turns.
    let baseline = SearchIndex::open(&dir.path().join("bm25"), node.index()?.dimension())?;
    let mut names: BTreeMap<Uuid, String> = BTreeMap::new();
    let docs: Vec<IndexDoc> = commands
        .iter()
        .filter_map(|c| match c {
            Command::AddEpisode(ep) => {
                names.insert(ep.uuid, ep.name.clone());
                Some(IndexDoc {
                    kind: DocKind::Episode,
                    uuid: ep.uuid,
                    group_id: ep.group_id.clone(),
                    text: ep.content.clone(),
                    vector: None,
                })
            }
            _ => None,
        })
        .collect();
    baseline.upsert(docs)?;
    baseline.commit(&Default::default())?;

    let started = Instant::now();
    let mut running = runtime::start(&node, ProcessorOptions::default());
    let gateway = Gateway::new(node.clone());
    for chunk in commands.chunks(500) {
        gateway.submit(chunk.to_vec()).await?;
    }
    running.wait_caught_up(&node, |_, _| {}).await?;
    running.stop().await?;
    let ingest_seconds = started.elapsed().as_secs_f64();

    let k_max = ks.iter().copied().max().unwrap_or(10);
    let mut rank_lines = String::new();
    let query = Query::new(node.sources()?);
    let mut bm25 = Tally::default();
    let mut tallies: Vec<(String, Tally, Tally, Vec<Duration>)> = recipes
        .iter()
        .map(|r| (r.clone(), Tally::default(), Tally::default(), Vec::new()))
        .collect();
    for q in &questions {
        if q.evidence.is_empty() {
            continue;
        }
        let group = GroupId::new(q.group_id.clone())?;
        let category = q.category_name.as_deref().unwrap_or("all");
        let hits = baseline.text_search(&group, &[DocKind::Episode], &q.question, k_max)?;
        let ranked: Vec<BTreeSet<String>> = hits
            .iter()
            .map(|h| names.get(&h.uuid).cloned().into_iter().collect())
            .collect();
        bm25.add(category, ks, &ranked, &q.evidence);
        for (recipe, strict, context, latencies) in &mut tallies {
            let request = SearchRequest::recipe(&q.question, recipe, k_max)?;
            let t = Instant::now();
            let mut results = query.search(&group, &request).await?.results;
            latencies.push(t.elapsed());
            results.truncate(k_max);
            let ranked: Vec<_> = results.iter().map(|r| turns_of(r, false)).collect();
            strict.add(category, ks, &ranked, &q.evidence);
            let ranked: Vec<_> = results.iter().map(|r| turns_of(r, true)).collect();
            context.add(category, ks, &ranked, &q.evidence);
            if ranks.is_some() {
                // A deeper list of its own: the scored one stays at `k_max`.
                let request = SearchRequest::recipe(&q.question, recipe, RANKS_DEPTH)?;
                let deep = query.search(&group, &request).await?.results;
                let names: Vec<_> = deep.iter().flat_map(|r| turns_of(r, false)).collect();
                rank_lines.push_str(
                    &json!({
                        "recipe": recipe,
                        "question": q.question,
                        "category": category,
                        "evidence": q.evidence,
                        "ranked": names,
                    })
                    .to_string(),
                );
                rank_lines.push('\n');
            }
        }
    }
    if let Some(path) = ranks {
        fs_err::write(path, rank_lines)?;
    }
    let mut searches = serde_json::Map::new();
    for (recipe, strict, context, mut latencies) in tallies {
        let (p50, p99) = super::percentiles(&mut latencies);
        searches.insert(
            recipe,
            json!({
                "recall": strict.report(ks),
                "recall_with_context_turns": context.report(ks),
                "query_p50_ms": p50,
                "query_p99_ms": p99,
            }),
        );
    }
    println!(
        "{}",
        json!({
            "bench": "recall",
            "episodes": names.len(),
            "questions": questions.iter().filter(|q| !q.evidence.is_empty()).count(),
            "embedder": node.decider()?.embedder().describe(),
            "extractor": node.decider()?.extractor().describe(),
            "ingest_seconds": ingest_seconds,
            "bm25_raw_turns": { "recall": bm25.report(ks) },
            "search": searches,
        })
    );
    Ok(())
}
