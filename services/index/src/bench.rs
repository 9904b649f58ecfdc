//! Timing helpers for `chronicle bench search`: a deterministic synthetic
//! corpus, a build loop shaped like the projector's, and latency summaries.
//! Nothing here prints; callers format the figures.

use std::time::{Duration, Instant};

use chronicle_model::GroupId;
use uuid::Uuid;

use crate::vector::{normalized, stored_unit};
use crate::{Checkpoint, DocKind, IndexDoc, IndexError, SearchIndex};

/// The shape of a synthetic corpus.
#[derive(Clone, Debug, PartialEq)]
pub struct CorpusSpec {
    /// Total documents, over all groups.
    pub documents: usize,
    /// Documents are spread evenly (round-robin) over this many groups.
    pub groups: usize,
    /// Length of every vector; must match the index the corpus goes into.
    pub dimension: usize,
    /// The same seed gives the same words, ids and vectors.
    pub seed: u64,
}

/// Synthetic documents: half facts, 30% entities, 15% episodes (no vector),
/// 5% communities; Zipf-distributed words; uniformly random unit vectors
/// (the hardest case for HNSW, the same work for exact scans).
#[derive(Clone, Debug)]
pub struct Corpus {
    /// The documents, in generation order, ready for [`build`].
    pub docs: Vec<IndexDoc>,
    /// The groups the documents are spread over; queries are aimed at them.
    pub groups: Vec<GroupId>,
    /// The spec's seed; queries draw from the same vocabulary.
    pub seed: u64,
}

/// Words in the synthetic vocabulary.
const VOCABULARY: usize = 5_000;

/// Builds the corpus described by `spec`; the same spec gives the same docs.
pub fn corpus(spec: &CorpusSpec) -> Corpus {
    let groups = groups(spec.groups.max(1));
    let words = Words::new(spec.seed);
    let mut rng = Rng::new(spec.seed ^ 0xC0FF_EE00);
    let docs = (0..spec.documents)
        .map(|i| {
            // Kinds cycle within each group (not in step with groups).
            let kind = match (i / groups.len()) % 20 {
                0..10 => DocKind::Fact,
                10..16 => DocKind::Entity,
                16..19 => DocKind::Episode,
                _ => DocKind::Community,
            };
            let length = 8 + (rng.next_u64() % 13) as usize;
            let vector = (kind != DocKind::Episode).then(|| rng.unit_vector(spec.dimension));
            IndexDoc {
                kind,
                uuid: Uuid::from_u64_pair(spec.seed, i as u64),
                group_id: groups[i % groups.len()].clone(),
                text: words.sentence(&mut rng, length),
                vector,
            }
        })
        .collect();
    Corpus {
        docs,
        groups,
        seed: spec.seed,
    }
}

/// `count` free-text queries of three words, each aimed at a group.
pub fn text_queries(corpus: &Corpus, count: usize, seed: u64) -> Vec<(GroupId, String)> {
    let words = Words::new(corpus.seed);
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let group = corpus.groups[i % corpus.groups.len()].clone();
            (group, words.sentence(&mut rng, 3))
        })
        .collect()
}

/// `count` random unit query vectors, each aimed at a group.
pub fn vector_queries(
    corpus: &Corpus,
    dimension: usize,
    count: usize,
    seed: u64,
) -> Vec<(GroupId, Vec<f32>)> {
    let mut rng = Rng::new(seed);
    (0..count)
        .map(|i| {
            let group = corpus.groups[i % corpus.groups.len()].clone();
            (group, rng.unit_vector(dimension))
        })
        .collect()
}

/// `count` random unit vectors of `dimension`, deterministic in `seed`.
pub fn random_unit_vectors(count: usize, dimension: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| rng.unit_vector(dimension)).collect()
}

/// `count` unit vectors of `dimension` lying near a random `rank`-dimension
/// subspace (plus 10% isotropic noise), deterministic in `seed`. Text
/// embeddings have a low intrinsic dimension like this; uniformly random
/// vectors ([`random_unit_vectors`]) are the worst case for HNSW.
pub fn low_rank_unit_vectors(
    count: usize,
    dimension: usize,
    rank: usize,
    seed: u64,
) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    let basis: Vec<Vec<f32>> = (0..rank.max(1))
        .map(|_| rng.unit_vector(dimension))
        .collect();
    let mut rng = Rng::new(seed.rotate_left(17) ^ 0xBA5E);
    (0..count)
        .map(|_| {
            loop {
                let weights = rng.unit_vector(basis.len());
                let noise = rng.unit_vector(dimension);
                let v: Vec<f32> = (0..dimension)
                    .map(|d| {
                        let signal: f32 = basis.iter().zip(&weights).map(|(b, w)| b[d] * w).sum();
                        signal + 0.1 * noise[d]
                    })
                    .collect();
                if let Some(unit) = normalized(&v) {
                    break unit;
                }
            }
        })
        .collect()
}

/// The exact top `limit` of `docs` in `group` and `kinds` by cosine to
/// `query`: the reference for recall.
pub fn exact_top(
    docs: &[IndexDoc],
    group: &GroupId,
    kinds: &[DocKind],
    query: &[f32],
    limit: usize,
) -> Vec<Uuid> {
    let Some(query) = normalized(query) else {
        return Vec::new();
    };
    let mut scored: Vec<(f32, Uuid)> = docs
        .iter()
        .filter(|d| d.group_id == *group && kinds.contains(&d.kind))
        .filter_map(|d| {
            let v = stored_unit(d.vector.as_deref()?)?;
            Some((v.iter().zip(&query).map(|(a, b)| a * b).sum(), d.uuid))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, uuid)| uuid)
        .collect()
}

/// How a build went.
#[derive(Clone, Debug)]
pub struct BuildReport {
    /// Documents upserted, all of them committed.
    pub documents: usize,
    /// Wall time of the whole build, upserts and commits included.
    pub elapsed: Duration,
    /// One sample per commit.
    pub commits: Latencies,
}

impl BuildReport {
    /// Documents made durable and searchable per second.
    pub fn docs_per_second(&self) -> f64 {
        self.documents as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }
}

/// Upserts `docs` in batches of `batch`, committing after each (with a
/// checkpoint that counts documents), as the projector does.
pub fn build(
    index: &SearchIndex,
    docs: Vec<IndexDoc>,
    batch: usize,
) -> Result<BuildReport, IndexError> {
    let documents = docs.len();
    let batch = batch.max(1);
    let mut commits = Vec::new();
    let mut offset = index.checkpoint().get(&0).copied().unwrap_or(0);
    let started = Instant::now();
    let mut docs = docs.into_iter().peekable();
    while docs.peek().is_some() {
        let chunk: Vec<IndexDoc> = docs.by_ref().take(batch).collect();
        offset += chunk.len() as u64;
        index.upsert(chunk)?;
        let commit = Instant::now();
        index.commit(&Checkpoint::from([(0, offset)]))?;
        commits.push(commit.elapsed());
    }
    Ok(BuildReport {
        documents,
        elapsed: started.elapsed(),
        commits: Latencies::new(commits),
    })
}

/// Runs every text query once and times each.
pub fn time_text(
    index: &SearchIndex,
    queries: &[(GroupId, String)],
    kinds: &[DocKind],
    limit: usize,
) -> Result<Latencies, IndexError> {
    let mut samples = Vec::with_capacity(queries.len());
    for (group, query) in queries {
        let started = Instant::now();
        index.text_search(group, kinds, query, limit)?;
        samples.push(started.elapsed());
    }
    Ok(Latencies::new(samples))
}

/// Runs every vector query once and times each.
pub fn time_vector(
    index: &SearchIndex,
    queries: &[(GroupId, Vec<f32>)],
    kinds: &[DocKind],
    limit: usize,
) -> Result<Latencies, IndexError> {
    let mut samples = Vec::with_capacity(queries.len());
    for (group, query) in queries {
        let started = Instant::now();
        index.vector_search(group, kinds, query, limit)?;
        samples.push(started.elapsed());
    }
    Ok(Latencies::new(samples))
}

/// Sorted latency samples.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    sorted: Vec<Duration>,
}

impl Latencies {
    /// Takes samples in any order.
    pub fn new(mut samples: Vec<Duration>) -> Self {
        samples.sort();
        Latencies { sorted: samples }
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Whether there are no samples (every figure is then zero).
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The `q`-quantile (0.0..=1.0, nearest rank); zero without samples.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (q.clamp(0.0, 1.0) * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.saturating_sub(1).min(self.sorted.len() - 1)]
    }

    /// The median (nearest rank); zero without samples.
    pub fn p50(&self) -> Duration {
        self.quantile(0.50)
    }

    /// The 99th percentile (nearest rank); zero without samples.
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }

    /// The slowest sample; zero without samples.
    pub fn max(&self) -> Duration {
        self.sorted.last().copied().unwrap_or_default()
    }

    /// The arithmetic mean; zero without samples.
    pub fn mean(&self) -> Duration {
        if self.sorted.is_empty() {
            return Duration::ZERO;
        }
        self.sorted.iter().sum::<Duration>() / self.sorted.len() as u32
    }
}

fn groups(n: usize) -> Vec<GroupId> {
    (0..n)
        .map(|i| GroupId::new(format!("bench-{i:04}")).expect("generated group ids are valid"))
        .collect()
}

/// A pronounceable vocabulary with Zipf (1/rank) word frequencies.
struct Words {
    words: Vec<String>,
    /// Cumulative weights, for inverse-transform sampling.
    cumulative: Vec<f64>,
}

impl Words {
    fn new(seed: u64) -> Self {
        const SYLLABLES: [&str; 24] = [
            "ka", "lo", "mi", "ren", "tu", "sa", "vor", "el", "dan", "qui", "po", "zen", "ar",
            "bel", "cho", "fi", "gra", "hul", "ix", "jo", "mar", "nu", "os", "ty",
        ];
        let mut rng = Rng::new(seed ^ 0x5EED);
        let words = (0..VOCABULARY)
            .map(|_| {
                let n = 2 + (rng.next_u64() % 3) as usize;
                (0..n)
                    .map(|_| SYLLABLES[(rng.next_u64() % SYLLABLES.len() as u64) as usize])
                    .collect::<String>()
            })
            .collect();
        let mut total = 0.0;
        let cumulative = (1..=VOCABULARY)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Words { words, cumulative }
    }

    fn sentence(&self, rng: &mut Rng, length: usize) -> String {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        (0..length)
            .map(|_| {
                let x = rng.next_f64() * total;
                let i = self
                    .cumulative
                    .partition_point(|c| *c < x)
                    .min(self.words.len() - 1);
                self.words[i].as_str()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// SplitMix64: small, fast, good enough for synthetic data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform on the unit sphere (normalized Gaussians, Box–Muller).
    fn unit_vector(&mut self, dimension: usize) -> Vec<f32> {
        loop {
            let v: Vec<f32> = (0..dimension)
                .map(|_| {
                    let u1 = self.next_f64().max(f64::MIN_POSITIVE);
                    let u2 = self.next_f64();
                    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
                })
                .collect();
            if let Some(unit) = normalized(&v) {
                return unit;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_deterministic_and_mixed() {
        let spec = CorpusSpec {
            documents: 1_400,
            groups: 7,
            dimension: 8,
            seed: 3,
        };
        let (a, b) = (corpus(&spec), corpus(&spec));
        assert_eq!(a.docs, b.docs);
        assert_eq!(a.groups.len(), 7);
        for group in &a.groups {
            // Turns repeat episodes' words: the corpus leaves them out.
            for kind in DocKind::ALL.into_iter().filter(|k| *k != DocKind::Turn) {
                let n = a
                    .docs
                    .iter()
                    .filter(|d| d.kind == kind && d.group_id == *group)
                    .count();
                assert!(n > 0, "{group} has no {kind}");
            }
        }
        assert!(
            a.docs
                .iter()
                .all(|d| (d.kind == DocKind::Episode) == d.vector.is_none())
        );
    }

    #[test]
    fn quantiles_use_nearest_rank() {
        let l = Latencies::new((1..=100).rev().map(Duration::from_millis).collect());
        assert_eq!(l.p50(), Duration::from_millis(50));
        assert_eq!(l.p99(), Duration::from_millis(99));
        assert_eq!(l.max(), Duration::from_millis(100));
        assert_eq!(Latencies::default().p99(), Duration::ZERO);
    }
}
