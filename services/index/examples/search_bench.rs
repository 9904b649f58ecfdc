//! Measures the index: `cargo run --release -p chronicle-index --example
//! search_bench [docs...]`. Prints build rate and search latencies for
//! corpora spread over 100 groups, then exact-versus-HNSW figures for one
//! large sub-index (the basis of `brute_force_below`). Environment:
//! `SKIP_THRESHOLD`, `SIZES=1000,20000` (sub-index sizes), `RANK` (0 for
//! uniformly random vectors), `M`, `EF_C`, `EF_S`, `CHURN=10` (percent of
//! the corpus upserted again with changed text before timing, leaving
//! deleted documents in the segments as a live projection does).

use std::collections::HashSet;
use std::time::Instant;

use chronicle_index::bench::{self, CorpusSpec};
use chronicle_index::{DocKind, IndexDoc, IndexError, IndexOptions, SearchIndex};
use chronicle_model::GroupId;
use uuid::Uuid;

const DIMENSION: usize = 384;

fn main() -> Result<(), IndexError> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if args.is_empty() {
        vec![10_000, 100_000]
    } else {
        args
    };
    // A size of 0 skips the corpus figures.
    for documents in sizes.into_iter().filter(|n| *n > 0) {
        corpus_figures(documents)?;
    }
    if std::env::var_os("SKIP_THRESHOLD").is_none() {
        threshold_figures()?;
    }
    Ok(())
}

fn corpus_figures(documents: usize) -> Result<(), IndexError> {
    let spec = CorpusSpec {
        documents,
        groups: 100,
        dimension: DIMENSION,
        seed: 1,
    };
    let corpus = bench::corpus(&spec);
    let dir = tempfile::tempdir().map_err(|source| IndexError::Io {
        path: "tempdir".into(),
        source,
    })?;
    let index = SearchIndex::open(dir.path(), DIMENSION)?;
    let build = bench::build(&index, corpus.docs.clone(), 300)?;
    let churn = env_usize("CHURN", 0).min(100);
    if churn > 0 {
        let changed: Vec<IndexDoc> = corpus
            .docs
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 100 < churn)
            .map(|(_, d)| IndexDoc {
                text: d
                    .text
                    .split(' ')
                    .rev()
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(" "),
                ..d.clone()
            })
            .collect();
        println!("docs {documents}: churn {} upserts", changed.len());
        bench::build(&index, changed, 300)?;
    }
    let text_queries = bench::text_queries(&corpus, 2_000, 9);
    let vector_queries = bench::vector_queries(&corpus, DIMENSION, 2_000, 9);
    let kinds = [DocKind::Fact, DocKind::Entity];
    bench::time_text(&index, &text_queries[..200], &kinds, 10)?; // warm-up
    let text = bench::time_text(&index, &text_queries, &kinds, 10)?;
    let vector = bench::time_vector(&index, &vector_queries, &kinds, 10)?;
    let stats = index.stats();
    let reopen = Instant::now();
    drop(index);
    let index = SearchIndex::open(dir.path(), DIMENSION)?;
    index.wait_for_graphs();
    let reopen = reopen.elapsed();
    assert_eq!(index.stats().vectors, stats.vectors);
    println!(
        "docs {documents}: build {:.0} docs/s (commit per 300: p50 {:?} p99 {:?}); \
         text p50 {:?} p99 {:?}; vector p50 {:?} p99 {:?}; \
         vectors {} in {} sets ({} hnsw); disk {} MiB; reopen {:?}",
        build.docs_per_second(),
        build.commits.p50(),
        build.commits.p99(),
        text.p50(),
        text.p99(),
        vector.p50(),
        vector.p99(),
        stats.vectors,
        stats.vector_sets,
        stats.hnsw_sets,
        stats.disk_bytes >> 20,
        reopen,
    );
    Ok(())
}

/// One group, one kind, growing: exact scan versus HNSW latency and the
/// HNSW build cost and recall.
fn threshold_figures() -> Result<(), IndexError> {
    let group = GroupId::new("big").expect("valid group");
    let env = env_usize;
    // RANK=0: uniformly random vectors; otherwise low-rank ones.
    let rank = env("RANK", 16);
    let default = chronicle_index::HnswParams::default();
    let hnsw = chronicle_index::HnswParams {
        max_connections: env("M", default.max_connections),
        ef_construction: env("EF_C", default.ef_construction),
        ef_search: env("EF_S", default.ef_search),
    };
    let sizes: Vec<usize> = std::env::var("SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 5_000, 10_000, 20_000, 50_000]);
    let vectors = |n: usize, seed: u64| {
        if rank == 0 {
            bench::random_unit_vectors(n, DIMENSION, seed)
        } else {
            bench::low_rank_unit_vectors(n, DIMENSION, rank, seed)
        }
    };
    println!("rank {rank} {hnsw:?}");
    // Queries come from the same distribution as the data.
    let all = vectors(50_300, 5);
    let queries = all[50_000..].to_vec();
    for n in sizes {
        let docs: Vec<IndexDoc> = all[..n.min(50_000)]
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| IndexDoc {
                kind: DocKind::Entity,
                uuid: Uuid::from_u128(i as u128),
                group_id: group.clone(),
                text: String::new(),
                vector: Some(v),
            })
            .collect();
        let mut line = format!("n {n}:");
        for (label, below) in [("exact", usize::MAX), ("hnsw", 0)] {
            let dir = tempfile::tempdir().map_err(|source| IndexError::Io {
                path: "tempdir".into(),
                source,
            })?;
            let options = IndexOptions {
                brute_force_below: below,
                hnsw: hnsw.clone(),
                ..IndexOptions::default()
            };
            let index = SearchIndex::open_with(dir.path(), DIMENSION, options)?;
            let started = Instant::now();
            bench::build(&index, docs.clone(), n)?;
            index.wait_for_graphs();
            let built = started.elapsed();
            let targeted: Vec<(GroupId, Vec<f32>)> =
                queries.iter().map(|q| (group.clone(), q.clone())).collect();
            let latency = bench::time_vector(&index, &targeted, &[DocKind::Entity], 10)?;
            let mut found = 0;
            for q in &queries[..100] {
                let truth: HashSet<Uuid> =
                    bench::exact_top(&docs, &group, &[DocKind::Entity], q, 10)
                        .into_iter()
                        .collect();
                let hits = index.vector_search(&group, &[DocKind::Entity], q, 10)?;
                found += hits.iter().filter(|h| truth.contains(&h.uuid)).count();
            }
            line += &format!(
                " {label} build {:?} p50 {:?} p99 {:?} recall@10 {:.3};",
                built,
                latency.p50(),
                latency.p99(),
                found as f64 / 1000.0
            );
        }
        println!("{line}");
    }
    Ok(())
}

/// A numeric environment setting, `default` when unset or unparsable.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
