//! `chronicle bench scale` at a small size, as a test of correctness (not
//! of speed): the workload ingests, a restart decides a new episode after
//! replaying nothing (the processor's state store is checkpointed at stop),
//! the CLI reads the data at rest, and a rebuild replays the log.

use std::process::Command;

use chronicle_e2e::chronicle_binary;
use serde_json::Value;

#[test]
fn a_small_scale_run_reports_every_figure_and_restarts_from_its_checkpoint() {
    let out = Command::new(chronicle_binary())
        .args(["--embedder", "hash", "bench", "scale"])
        .args(["--episodes", "2400", "--tenants", "40", "--window", "800"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bench scale failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(line.trim()).unwrap();
    assert_eq!(report["bench"], "scale");
    assert_eq!(report["windows"].as_array().unwrap().len(), 3);
    assert!(report["facts"].as_u64().unwrap() > 1000, "{report}");
    assert_eq!(
        report["restart_replayed_records"], 0,
        "a clean stop checkpoints everything: {report}"
    );
    for figure in [
        "episodes_per_s_first_window",
        "episodes_per_s_last_window",
        "peak_rss_bytes",
        "disk_bytes_per_fact",
        "restart_seconds",
        "facts_query_p50_ms",
        "stats_query_p50_ms",
        "search_p95_ms",
        "rebuild_events_per_s",
    ] {
        assert!(
            report[figure].as_f64().is_some_and(|x| x > 0.0),
            "{figure} missing or zero: {report}"
        );
    }
}
