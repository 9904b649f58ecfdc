//! Crash safety by killing real processes: `chronicle ingest` is killed with
//! SIGKILL at several moments, restarted each time, and the final graph
//! equals an uninterrupted run — nothing lost, nothing duplicated.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use chronicle_e2e::{chronicle_binary, embedded_node, plain_snapshot, tripled_workload};

fn ingest(data_dir: &Path, file: &Path) -> Command {
    let mut c = Command::new(chronicle_binary());
    c.args(["--data"])
        .arg(data_dir)
        .args(["--embedder", "hash", "ingest"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_processor_loses_and_duplicates_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let file = tripled_workload(scratch.path());

    // The reference: one uninterrupted run.
    let reference_dir = scratch.path().join("reference");
    assert!(ingest(&reference_dir, &file).status().unwrap().success());

    // The same input, killed three times at different moments.
    let crashed_dir = scratch.path().join("crashed");
    let mut kills = 0;
    for delay_ms in [400u64, 900, 1500] {
        let mut child = ingest(&crashed_dir, &file).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        }
        child.wait().unwrap();
    }
    assert!(
        kills >= 2,
        "the ingest finished before it could be killed; make the workload longer"
    );
    assert!(ingest(&crashed_dir, &file).status().unwrap().success());

    let reference = embedded_node(&reference_dir).await;
    let crashed = embedded_node(&crashed_dir).await;
    let a = plain_snapshot(&reference).await;
    let b = plain_snapshot(&crashed).await;
    assert_eq!(a.len(), 30, "30 groups");
    for (g, (entities, facts)) in &a {
        let (e2, f2) = &b[g];
        assert_eq!(entities, e2, "entities of {g}");
        assert_eq!(facts, f2, "facts of {g}");
    }
    assert_eq!(a, b);
    // Nothing decided twice: one decision per episode.
    let stats = chronicle::commands::log_stats(&crashed, None)
        .await
        .unwrap();
    assert_eq!(stats.decisions, 900);
    // The store's running totals survived the kills exactly: what the log
    // holds, and the rows the store holds.
    let totals = crashed.store().expect("store").totals(None).await.unwrap();
    assert_eq!(totals.counts.episodes, 900);
    assert_eq!(
        (totals.decisions, totals.events, totals.dead_lettered),
        (stats.decisions, stats.events, stats.dead_lettered)
    );
    assert_eq!(totals.llm_calls, stats.llm_calls);
    assert_eq!(totals.resolutions, stats.resolutions);
    assert_eq!(totals.embeddings, stats.embeddings);
    let reference_totals = reference.store().expect("store").totals(None).await;
    assert_eq!(reference_totals.unwrap().counts, totals.counts);
}
