//! The Grafana dashboards and the Prometheus configuration in `infra/`:
//! every PromQL expression uses only metrics the code registers, and the
//! provisioning files point where the dashboards are.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chronicle_metrics::METRICS;
use serde_json::Value;

fn infra() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../infra")
}

/// Every `expr` of a dashboard, panels and rows and template queries included.
fn expressions(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                match (k.as_str(), x) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    ("definition", Value::String(e)) if e.contains("chronicle_") => {
                        out.push(e.clone())
                    }
                    _ => expressions(x, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|x| expressions(x, out)),
        _ => {}
    }
}

/// Metric names in a PromQL expression (identifiers starting `chronicle_`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(found) = expr[i..].find("chronicle_") {
        let start = i + found;
        let boundary = start == 0 || {
            let c = bytes[start - 1];
            !(c.is_ascii_alphanumeric() || c == b'_' || c == b':')
        };
        let end = expr[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(expr.len(), |n| start + n);
        if boundary {
            out.insert(expr[start..end].to_owned());
        }
        i = end;
    }
    out
}

/// A registered name, or a histogram's `_bucket` / `_sum` / `_count` series.
fn registered(name: &str) -> bool {
    METRICS.names().iter().any(|n| n == name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .is_some_and(|base| METRICS.histogram_names().iter().any(|n| n == base))
        })
}

#[test]
fn dashboards_use_only_registered_metrics() {
    let dir = infra().join("grafana/dashboards");
    let mut files: Vec<PathBuf> = fs_err::read_dir(&dir)
        .expect("infra/grafana/dashboards")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let titles: BTreeSet<String> = files
        .iter()
        .map(|f| {
            f.file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for needed in ["ingestion", "llm", "projection-search", "api"] {
        assert!(
            titles.contains(needed),
            "no {needed} dashboard in {titles:?}"
        );
    }
    let mut used = BTreeSet::new();
    let mut uids = BTreeSet::new();
    for file in &files {
        let text = fs_err::read_to_string(file).expect("readable");
        let board: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON: {e}", file.display()));
        let uid = board["uid"].as_str().expect("a uid").to_owned();
        assert!(uids.insert(uid.clone()), "duplicate uid {uid}");
        assert!(board["title"].is_string(), "{}", file.display());
        let mut exprs = Vec::new();
        expressions(&board, &mut exprs);
        assert!(
            exprs.len() >= 5,
            "{}: only {} queries",
            file.display(),
            exprs.len()
        );
        for e in &exprs {
            let names = metric_names(e);
            assert!(
                !names.is_empty(),
                "{}: `{e}` uses no chronicle metric",
                file.display()
            );
            for n in names {
                assert!(
                    registered(&n),
                    "{}: `{n}` (in `{e}`) is not a metric the code registers; known: {:?}",
                    file.display(),
                    METRICS.names()
                );
                used.insert(n);
            }
            assert!(
                !e.contains("group_id"),
                "{}: `{e}`: group ids are never labels",
                file.display()
            );
        }
    }
    // The areas the issue names all appear.
    for m in [
        "chronicle_episodes_appended_total",
        "chronicle_consumer_lag_records",
        "chronicle_stage_duration_seconds_bucket",
        "chronicle_episodes_processed_total",
        "chronicle_llm_calls_total",
        "chronicle_llm_tokens_total",
        "chronicle_llm_errors_total",
        "chronicle_llm_cache_hits_total",
        "chronicle_projector_lag_records",
        "chronicle_search_duration_seconds_bucket",
        "chronicle_index_size_bytes",
        "chronicle_http_requests_total",
    ] {
        assert!(used.contains(m), "no dashboard shows {m}");
    }
}

#[test]
fn the_checker_rejects_unknown_names() {
    assert_eq!(
        metric_names("rate(chronicle_a_total[5m]) / x_chronicle_b + chronicle_c:rate5m"),
        BTreeSet::from([
            "chronicle_a_total".to_owned(),
            "chronicle_c:rate5m".to_owned()
        ])
    );
    assert!(registered("chronicle_search_duration_seconds_bucket"));
    assert!(!registered("chronicle_search_latency_seconds"));
    assert!(!registered("chronicle_episodes_appended_total_bucket"));
}

#[test]
fn provisioning_and_scrape_config_fit_together() {
    let yaml = |p: &str| -> serde_norway::Value {
        let path = infra().join(p);
        serde_norway::from_str(&fs_err::read_to_string(&path).expect("readable"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let datasources = yaml("grafana/provisioning/datasources/prometheus.yaml");
    let uid = datasources["datasources"][0]["uid"]
        .as_str()
        .expect("a datasource uid");
    let providers = yaml("grafana/provisioning/dashboards/chronicle.yaml");
    assert!(
        providers["providers"][0]["options"]["path"].is_string(),
        "the provider says where the dashboards are mounted"
    );
    for entry in fs_err::read_dir(infra().join("grafana/dashboards")).expect("dir") {
        let path = entry.expect("entry").path();
        let text = fs_err::read_to_string(&path).expect("readable");
        let board: Value = serde_json::from_str(&text).expect("json");
        let mut refs = BTreeSet::new();
        collect_datasource_uids(&board, &mut refs);
        assert_eq!(
            refs,
            BTreeSet::from([uid.to_owned()]),
            "{} uses the provisioned datasource only",
            path.display()
        );
    }
    let prometheus = yaml("prometheus/prometheus.yml");
    let jobs = prometheus["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs");
    let chronicle = jobs
        .iter()
        .find(|j| j["job_name"].as_str() == Some("chronicle"))
        .expect("a chronicle job");
    assert_eq!(chronicle["metrics_path"].as_str(), Some("/metrics"));
    assert!(
        chronicle["static_configs"][0]["targets"]
            .as_sequence()
            .is_some_and(|t| !t.is_empty())
    );
}

fn collect_datasource_uids(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::Object(ds)) = map.get("datasource")
                && let Some(uid) = ds.get("uid").and_then(Value::as_str)
            {
                out.insert(uid.to_owned());
            }
            map.values().for_each(|x| collect_datasource_uids(x, out));
        }
        Value::Array(items) => items.iter().for_each(|x| collect_datasource_uids(x, out)),
        _ => {}
    }
}
