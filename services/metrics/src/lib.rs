//! Every Prometheus metric chronicle exports, in one registry.
//!
//! Names follow `chronicle_<area>_<what>_<unit>`; counters end in `_total`,
//! histograms in `_seconds`. No label is unbounded: the group id is never a
//! label (per-tenant figures come from the status API); partitions are
//! bounded by the topic's partition count.

#![warn(missing_docs)]

use std::sync::LazyLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// The process-wide metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// Handles to every metric.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Episodes (commands) appended to the log by the gateway.
    pub episodes_appended: IntCounterVec,
    /// Commands decided by the processor, by outcome (`processed`, `dead_lettered`, `skipped`).
    pub episodes_processed: IntCounterVec,
    /// Records between a consumer's position and the partition end, by role and partition.
    pub consumer_lag: IntGaugeVec,
    /// Duration of each pipeline stage: the decision's own stages (`context`,
    /// `extract`, `extract_facts`, `resolve_entities`, `resolve_facts`,
    /// `summaries`, `communities`), `decide` (a whole decision, retries
    /// included), `extract_bulk` (model extraction for a bulk of a group's
    /// episodes), `emit` (appending a decision to the graph-events log),
    /// `project_commit` (the projector committing store and indices).
    pub stage_duration: HistogramVec,
    /// Model calls made, by prompt kind.
    pub llm_calls: IntCounterVec,
    /// Tokens used, by prompt kind and direction (`prompt`, `completion`).
    pub llm_tokens: IntCounterVec,
    /// Model calls that failed after retries, by prompt kind and reason.
    pub llm_errors: IntCounterVec,
    /// Retries of model calls, by prompt kind.
    pub llm_retries: IntCounterVec,
    /// Answers served from the response cache, by prompt kind.
    pub llm_cache_hits: IntCounterVec,
    /// Latency of model calls, by prompt kind.
    pub llm_duration: HistogramVec,
    /// Texts embedded, by embedder.
    pub embeddings: IntCounterVec,
    /// Entity resolutions by funnel tier.
    pub resolutions: IntCounterVec,
    /// Facts invalidated by newer facts.
    pub invalidations: IntCounter,
    /// Graph events applied by the projector.
    pub projector_events_applied: IntCounter,
    /// Graph-event records the processor read at start to bring its state
    /// store up to the log (only what follows its checkpoint).
    pub processor_replayed: IntCounter,
    /// Graph-event records between the projector's position and the partition end.
    pub projector_lag: IntGaugeVec,
    /// Search latency by recipe.
    pub search_duration: HistogramVec,
    /// Documents in the search indices, by kind.
    pub index_documents: IntGaugeVec,
    /// Size of the search indices (`disk`: files; `vector_memory`: vectors held in memory).
    pub index_size_bytes: IntGaugeVec,
    /// HTTP requests by route and status.
    pub http_requests: IntCounterVec,
    /// HTTP latency by route.
    pub http_duration: HistogramVec,
    /// MCP tool calls by tool and outcome (`ok`, or the HTTP-equivalent
    /// status of the error: `400`, `403`, `404`, ...).
    pub mcp_tool_calls: IntCounterVec,
    /// MCP tool latency by tool.
    pub mcp_tool_duration: HistogramVec,
    /// Records appended to the log, by topic.
    pub log_appends: IntCounterVec,
    /// Records whose append failed, by topic (counted in `log_appends` too,
    /// which is bumped before the append so it never trails the consumers).
    pub log_append_failures: IntCounterVec,
    /// Whether this process is ready (1) or not (0).
    pub ready: IntGauge,
    names: Vec<String>,
    histograms: Vec<String>,
}

const LATENCY_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

impl Metrics {
    fn new() -> Self {
        let registry = Registry::new();
        let declared = std::cell::RefCell::new(Vec::<String>::new());
        let histograms = std::cell::RefCell::new(Vec::<String>::new());
        let counter = |name: &str, help: &str, labels: &[&str]| {
            declared.borrow_mut().push(name.to_owned());
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            declared.borrow_mut().push(name.to_owned());
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let histogram = |name: &str, help: &str, labels: &[&str]| {
            declared.borrow_mut().push(name.to_owned());
            histograms.borrow_mut().push(name.to_owned());
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
                labels,
            )
            .expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
            h
        };
        let invalidations = IntCounter::new(
            "chronicle_invalidations_total",
            "Facts invalidated by newer, contradicting facts.",
        )
        .expect("valid metric");
        registry
            .register(Box::new(invalidations.clone()))
            .expect("unique metric");
        let processor_replayed = IntCounter::new(
            "chronicle_processor_replayed_records_total",
            "Graph-event records read at start to catch the processor's state store up",
        )
        .expect("valid metric");
        registry
            .register(Box::new(processor_replayed.clone()))
            .expect("unique metric");
        let projector_events_applied = IntCounter::new(
            "chronicle_projector_events_applied_total",
            "Graph events applied by the projector.",
        )
        .expect("valid metric");
        registry
            .register(Box::new(projector_events_applied.clone()))
            .expect("unique metric");
        let ready = IntGauge::new("chronicle_ready", "1 when this process reports ready.")
            .expect("valid metric");
        registry
            .register(Box::new(ready.clone()))
            .expect("unique metric");
        Metrics {
            episodes_appended: counter(
                "chronicle_episodes_appended_total",
                "Episodes and other commands appended to the episodes log.",
                &["command"],
            ),
            episodes_processed: counter(
                "chronicle_episodes_processed_total",
                "Commands decided by the processor, by outcome.",
                &["outcome"],
            ),
            consumer_lag: gauge(
                "chronicle_consumer_lag_records",
                "Records between a consumer's position and the end of its partition.",
                &["role", "partition"],
            ),
            stage_duration: histogram(
                "chronicle_stage_duration_seconds",
                "Duration of each ingestion pipeline stage.",
                &["stage"],
            ),
            llm_calls: counter(
                "chronicle_llm_calls_total",
                "Model calls, by prompt kind.",
                &["kind"],
            ),
            llm_tokens: counter(
                "chronicle_llm_tokens_total",
                "Model tokens, by prompt kind and direction.",
                &["kind", "direction"],
            ),
            llm_errors: counter(
                "chronicle_llm_errors_total",
                "Model calls that failed after retries, by prompt kind and reason.",
                &["kind", "reason"],
            ),
            llm_retries: counter(
                "chronicle_llm_retries_total",
                "Retried model calls, by prompt kind.",
                &["kind"],
            ),
            llm_cache_hits: counter(
                "chronicle_llm_cache_hits_total",
                "Model answers served from the response cache, by prompt kind.",
                &["kind"],
            ),
            llm_duration: histogram(
                "chronicle_llm_request_duration_seconds",
                "Latency of model calls, by prompt kind.",
                &["kind"],
            ),
            embeddings: counter(
                "chronicle_embeddings_total",
                "Texts embedded, by embedder.",
                &["embedder"],
            ),
            resolutions: counter(
                "chronicle_resolutions_total",
                "Entity resolutions by funnel tier.",
                &["tier"],
            ),
            invalidations,
            projector_events_applied,
            processor_replayed,
            projector_lag: gauge(
                "chronicle_projector_lag_records",
                "Graph-event records the projector has yet to apply, by partition.",
                &["partition"],
            ),
            search_duration: histogram(
                "chronicle_search_duration_seconds",
                "Search latency, by recipe.",
                &["recipe"],
            ),
            index_documents: gauge(
                "chronicle_index_documents",
                "Documents in the search indices, by kind.",
                &["kind"],
            ),
            index_size_bytes: gauge(
                "chronicle_index_size_bytes",
                "On-disk size of the search indices.",
                &["index"],
            ),
            http_requests: counter(
                "chronicle_http_requests_total",
                "HTTP requests, by route and status.",
                &["route", "status"],
            ),
            http_duration: histogram(
                "chronicle_http_request_duration_seconds",
                "HTTP request latency, by route.",
                &["route"],
            ),
            mcp_tool_calls: counter(
                "chronicle_mcp_tool_calls_total",
                "MCP tool calls, by tool and outcome (ok, or the HTTP-equivalent error status).",
                &["tool", "outcome"],
            ),
            mcp_tool_duration: histogram(
                "chronicle_mcp_tool_duration_seconds",
                "MCP tool call latency, by tool.",
                &["tool"],
            ),
            log_appends: counter(
                "chronicle_log_appends_total",
                "Records appended to the log, by topic.",
                &["topic"],
            ),
            log_append_failures: counter(
                "chronicle_log_append_failures_total",
                "Records whose append to the log failed, by topic.",
                &["topic"],
            ),
            ready,
            names: registry
                .gather()
                .iter()
                .map(|f| f.name().to_owned())
                .chain(declared.take())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
            histograms: histograms.take(),
            registry,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding never fails");
        String::from_utf8(out).expect("exposition is UTF-8")
    }

    /// Every registered metric name (for checking dashboards against code).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The histograms among [`Metrics::names`]: Prometheus exposes each as
    /// `<name>_bucket`, `<name>_sum` and `<name>_count`.
    pub fn histogram_names(&self) -> &[String] {
        &self.histograms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_convention() {
        let m = &*METRICS;
        let names = m.names();
        assert!(names.len() >= 22, "{names:?}");
        assert!(
            names.iter().all(|n| n.starts_with("chronicle_")),
            "{names:?}"
        );
        m.episodes_appended
            .with_label_values(&["add_episode"])
            .inc();
        assert!(m.render().contains("chronicle_episodes_appended_total"));
    }
}
