//! The command line.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::config::GlobalArgs;

/// chronicle — a temporal context graph for agent memory.
///
/// Episodes go to an immutable log; a processor extracts entities and
/// time-bounded facts and invalidates contradicted ones; a projector folds
/// the decisions into a graph and search indices that can be rebuilt by
/// replay. Without flags everything is embedded in `--data` (default `.data`).
#[derive(Debug, Parser)]
#[command(name = "chronicle", version, propagate_version = true)]
pub struct Cli {
    /// Shared settings.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Time and history options shared by read commands.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct TimeArgs {
    /// Valid time: facts true in the world at this instant (RFC 3339).
    #[arg(long)]
    pub as_of: Option<String>,
    /// Transaction time: what the system knew at this instant (RFC 3339).
    #[arg(long)]
    pub known_at: Option<String>,
    /// Include ended and invalidated facts.
    #[arg(long)]
    pub include_history: bool,
}

/// Commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ingest a bundled sample into a temporary data dir and show what chronicle answers.
    Demo,
    /// Append episodes from a JSONL file and wait until they are processed.
    Ingest {
        /// One episode per line: group_id, name, content, reference_time, source, …
        file: PathBuf,
        /// Return once appended, without waiting for processing.
        #[arg(long)]
        no_wait: bool,
    },
    /// List facts with their valid and transaction times and provenance.
    Facts {
        /// The group.
        #[arg(long)]
        group: String,
        /// Only facts about this entity (by name).
        #[arg(long)]
        entity: Option<String>,
        /// Time options.
        #[command(flatten)]
        time: TimeArgs,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Sizes, model calls and resolutions, as one JSON object with --json.
    Stats {
        /// Only this group's sizes.
        #[arg(long)]
        group: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Hybrid search over facts, entities, episodes and communities.
    Search {
        /// The group.
        #[arg(long)]
        group: String,
        /// The query.
        query: String,
        /// A recipe, e.g. MEMORY_HYBRID_SEARCH_RRF (turns with their facts, the default),
        /// COMBINED_HYBRID_SEARCH_RRF or EDGE_HYBRID_SEARCH_NODE_DISTANCE.
        #[arg(long, default_value = chronicle_engine::search::MEMORY_RECIPE)]
        recipe: String,
        /// Center entity (by name) for BFS and node-distance ranking.
        #[arg(long)]
        center: Option<String>,
        /// Results per scope.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Only facts of these relations.
        #[arg(long = "edge-type")]
        edge_types: Vec<String>,
        /// Only entities with these labels.
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Time options.
        #[command(flatten)]
        time: TimeArgs,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// A ready-to-paste memory block: matching facts with validity windows,
    /// then the turns that support them, within a character budget.
    Context {
        /// The group.
        #[arg(long)]
        group: String,
        /// What the agent needs context for.
        query: String,
        /// Budget in characters.
        #[arg(long, default_value_t = chronicle_query::DEFAULT_CONTEXT_CHARS)]
        max_chars: usize,
        /// Time options (`--as-of` picks the facts' valid time).
        #[command(flatten)]
        time: TimeArgs,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Every fact about an entity over time, with windows and provenance.
    Timeline {
        /// The group.
        #[arg(long)]
        group: String,
        /// The entity's name.
        entity: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Communities: label-propagation clusters of entities, with names and summaries.
    Communities {
        /// Which.
        #[command(subcommand)]
        which: CommunitiesCommand,
    },
    /// Sagas: storylines of episodes, and their summaries.
    Saga {
        /// Which.
        #[command(subcommand)]
        which: SagaCommand,
    },
    /// The entities and facts given episodes produced (mentions; facts
    /// created, restated or invalidated).
    Provenance {
        /// The group.
        #[arg(long)]
        group: String,
        /// Episode uuids.
        #[arg(required = true)]
        episodes: Vec<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Drop the projection and replay the graph-events log from offset 0.
    Rebuild,
    /// Build a projection as known at transaction time T into another directory.
    Replay {
        /// Transaction time bound (RFC 3339): events logged at or before it.
        #[arg(long)]
        until: String,
        /// Output data directory.
        #[arg(long)]
        out: PathBuf,
    },
    /// Processing state: lag, pending and dead-lettered commands.
    Status {
        /// Only this group.
        #[arg(long)]
        group: Option<String>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Serve the MCP tools on stdin/stdout for an MCP client that launches chronicle, with
    /// every role in this process (logs go to stderr). See docs/mcp.md.
    Mcp {
        /// Tokens file (TOML, as for `serve`); the caller's token then comes from
        /// CHRONICLE_TOKEN (or --token) and scopes every tool. Without it: unrestricted.
        #[arg(long)]
        auth: Option<PathBuf>,
        /// The caller's token, with --auth (prefer the CHRONICLE_TOKEN variable: arguments
        /// are visible to other users of the machine).
        #[arg(long, env = "CHRONICLE_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Run every role in this process with an HTTP API (and MCP at /mcp).
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Tokens file (TOML); without it, only loopback addresses are allowed.
        #[arg(long)]
        auth: Option<PathBuf>,
        /// Largest request body accepted, in bytes (larger ones get 413).
        #[arg(long, default_value_t = crate::http::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
        /// /readyz fails while the projector is more than this many records behind the log.
        #[arg(long, default_value_t = crate::http::DEFAULT_READY_MAX_LAG)]
        ready_max_lag: u64,
        /// Connections open at once; more are closed as soon as they are accepted.
        #[arg(long, default_value_t = crate::http::listen::DEFAULT_MAX_CONNECTIONS)]
        max_connections: usize,
        /// Milliseconds a client has to send a request head (also while a connection idles).
        #[arg(long, default_value_t = crate::http::listen::DEFAULT_HEADER_TIMEOUT.as_millis() as u64)]
        header_timeout_ms: u64,
        /// Milliseconds a client has to send a whole request body (slower ones get 408).
        #[arg(long, default_value_t = crate::http::DEFAULT_BODY_TIMEOUT.as_millis() as u64)]
        body_timeout_ms: u64,
    },
    /// Distributed mode: decide the episodes of the partitions this member is assigned (run several).
    Processor {
        /// Serve /healthz and /metrics here.
        #[arg(long)]
        metrics_listen: Option<SocketAddr>,
    },
    /// Distributed mode: project the graph-events partitions this member is assigned into its
    /// store and indices, and serve their groups' API (announced on `<prefix>.owners`).
    Projector {
        /// Serve the API (and /metrics) here.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The URL others reach this projector at (default http://LISTEN).
        #[arg(long)]
        advertise: Option<String>,
        /// Tokens file (TOML), the same for every role.
        #[arg(long)]
        auth: Option<PathBuf>,
    },
    /// Distributed mode: accept episodes over HTTP (appended to the log); forward reads to the
    /// projector that owns the group's partition.
    Gateway {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Tokens file (TOML), the same for every role.
        #[arg(long)]
        auth: Option<PathBuf>,
        /// Largest request body accepted, in bytes.
        #[arg(long, default_value_t = crate::http::DEFAULT_MAX_BODY_BYTES)]
        max_body_bytes: usize,
    },
    /// Distributed mode: route every group request to the projector that owns the group's partition.
    Query {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: SocketAddr,
    },
    /// Benchmarks printing JSON figures (`chronicle bench --help`): run by
    /// the `chronicle-bench` binary next to this one, so the product
    /// carries no benchmark code.
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark and its options.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Create the ScyllaDB keyspace and tables of `--store scylla://HOST:PORT/KEYSPACE`
    /// (idempotent; the embedded store needs none).
    Migrate {
        /// Replicas per datacenter of a new keyspace (NetworkTopologyStrategy; default 3).
        #[arg(long, conflicts_with = "replication_map")]
        replication_factor: Option<u32>,
        /// The replication map of a new keyspace as JSON, e.g.
        /// '{"class":"NetworkTopologyStrategy","dc1":3,"dc2":3}'. (Plain
        /// `--replication` is the global Kafka topic replication flag.)
        #[arg(long)]
        replication_map: Option<String>,
    },
}

/// `chronicle communities …`.
#[derive(Debug, Subcommand)]
pub enum CommunitiesCommand {
    /// Recompute the group's communities (appends a command and waits until
    /// it is processed), then print them.
    Build {
        /// The group.
        #[arg(long)]
        group: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print the group's communities.
    List {
        /// The group.
        #[arg(long)]
        group: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// `chronicle saga …`.
#[derive(Debug, Subcommand)]
pub enum SagaCommand {
    /// Fold the saga's episodes newer than its watermark into its summary
    /// (appends a command and waits until it is processed), then print it.
    Summarize {
        /// The group.
        #[arg(long)]
        group: String,
        /// The saga's name.
        saga: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a saga: its summary, watermark and episodes.
    Show {
        /// The group.
        #[arg(long)]
        group: String,
        /// The saga's name.
        saga: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}
