//! The benchmarks' command line: `chronicle [GLOBAL] bench <WHICH>`, the
//! same shape as chronicle's own, so `chronicle bench …` hands its
//! arguments over unchanged.

use std::path::PathBuf;

use chronicle::config::GlobalArgs;
use clap::{Parser, Subcommand};

/// chronicle's benchmarks: figures printed as JSON, one object per line.
#[derive(Debug, Parser)]
#[command(name = "chronicle", version)]
pub struct BenchCli {
    /// Shared settings (as for every chronicle command).
    #[command(flatten)]
    pub global: GlobalArgs,
    /// `bench` and the benchmark.
    #[command(subcommand)]
    pub command: Top,
}

/// The one top-level command.
#[derive(Debug, Subcommand)]
pub enum Top {
    /// Benchmarks printing JSON figures.
    Bench {
        /// Which.
        #[command(subcommand)]
        which: BenchCommand,
    },
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Embedded log append and read rates, and the fold rate.
    Log {
        /// Records to append.
        #[arg(long, default_value_t = 20_000)]
        records: u64,
        /// Payload size in bytes.
        #[arg(long, default_value_t = 1024)]
        size: usize,
    },
    /// Ingest a workload end to end; with --extractor openai against a local instant fake server.
    Ingest {
        /// Workload JSONL.
        #[arg(long)]
        workload: PathBuf,
        /// Repeat the workload this many times (with fresh ids) to watch memory.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Use the OpenAI adapter against a local server that answers instantly and counts calls.
        #[arg(long)]
        fake_llm: bool,
    },
    /// HTTP API throughput and latency: POST episodes and POST search under
    /// concurrent clients against an embedded server on loopback.
    Api {
        /// Concurrent clients.
        #[arg(long, default_value_t = 16)]
        clients: usize,
        /// Requests per phase (episodes, then search).
        #[arg(long, default_value_t = 4000)]
        requests: usize,
        /// Groups the clients write to and search.
        #[arg(long, default_value_t = 16)]
        groups: usize,
    },
    /// Episodes end to end through a Kafka-protocol broker (`--log kafka://…`, or in-process
    /// with the `bench-broker` feature): rate, lag over time, per-group order.
    Kafka {
        /// Episodes to push through.
        #[arg(long, default_value_t = 3000)]
        episodes: usize,
        /// Groups they are spread over.
        #[arg(long, default_value_t = 30)]
        groups: usize,
    },
    /// Evidence recall of search on conversations (k results = k items),
    /// beside plain BM25 over the raw turns, and query latency.
    Recall {
        /// Episodes JSONL (one turn per line; `name` is what evidence names).
        #[arg(long)]
        episodes: PathBuf,
        /// Questions JSONL: `group_id`, `question`, `evidence` (episode names), `category_name`?.
        #[arg(long)]
        questions: PathBuf,
        /// Cut-offs.
        #[arg(long, value_delimiter = ',', default_value = "5,10")]
        k: Vec<usize>,
        /// Recipes to measure.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "MEMORY_HYBRID_SEARCH_RRF,EPISODE_HYBRID_SEARCH_RRF,COMBINED_HYBRID_SEARCH_RRF"
        )]
        recipes: Vec<String>,
        /// Also write each question's first 50 results per recipe here (JSON
        /// lines: question, category, evidence, ranked turn names), to see
        /// where the evidence of a miss ranked.
        #[arg(long)]
        ranks: Option<PathBuf>,
    },
    /// Costs as the history grows: ingest rate and memory per window,
    /// restart, disk per fact, a CLI read at rest, search and rebuild, on a
    /// generated multi-tenant workload (in a temporary directory unless
    /// `--data` names a new one).
    Scale {
        /// Episodes to ingest.
        #[arg(long, default_value_t = 100_000)]
        episodes: u64,
        /// Tenants they are spread over.
        #[arg(long, default_value_t = 1_000)]
        tenants: u64,
        /// Episodes per reported window.
        #[arg(long, default_value_t = 100_000)]
        window: u64,
        /// Workload seed.
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// Index build, search latency and rebuild rate at scale.
    Search {
        /// Fact counts to measure at.
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        facts: Vec<usize>,
        /// Groups the facts are spread over.
        #[arg(long, default_value_t = 100)]
        groups: usize,
        /// Queries per recipe.
        #[arg(long, default_value_t = 500)]
        queries: usize,
    },
    /// Community builds on synthetic graphs: time and model calls of a full
    /// build, of a rebuild after one episode and of an incremental update,
    /// offline and against a local instant fake model that counts calls.
    Communities {
        /// Entity counts to measure at.
        #[arg(long, value_delimiter = ',', default_value = "1000,20000")]
        entities: Vec<usize>,
    },
}
