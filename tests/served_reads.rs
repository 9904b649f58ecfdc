//! CLI reads while `chronicle serve` holds the data directory: they find
//! the running server through its announcement and ask it, and read the
//! directory themselves again once it stops.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chronicle_e2e::chronicle_binary;

fn chronicle(data: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(chronicle_binary());
    c.arg("--data")
        .arg(data)
        .args(["--embedder", "hash"])
        .args(args);
    c
}

fn json_of(c: &mut Command) -> serde_json::Value {
    let out = c.output().expect("run chronicle");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[test]
fn cli_reads_ask_the_running_server_and_read_locally_after_it_stops() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let input = scratch.path().join("episodes.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"group_id": "acme", "name": "one", "content": "Ada: I moved to Oslo.", "reference_time": "2025-01-01T00:00:00Z", "saga": "trip"}"#,
            "\n",
            r#"{"group_id": "acme", "name": "two", "content": "Ada: I work at Globex.", "reference_time": "2025-02-01T00:00:00Z", "saga": "trip"}"#,
            "\n",
        ),
    )
    .unwrap();
    let ingest = chronicle(&data, &["ingest"]).arg(&input).output().unwrap();
    assert!(
        ingest.status.success(),
        "{}",
        String::from_utf8_lossy(&ingest.stderr)
    );
    let at_rest = json_of(&mut chronicle(
        &data,
        &["facts", "--group", "acme", "--json"],
    ));
    let timeline_at_rest = json_of(&mut chronicle(
        &data,
        &["timeline", "--group", "acme", "--json", "Ada"],
    ));
    let saga_at_rest = json_of(&mut chronicle(
        &data,
        &["saga", "show", "--group", "acme", "--json", "trip"],
    ));
    assert_eq!(saga_at_rest["episodes"].as_array().map(Vec::len), Some(2));
    let communities_at_rest = json_of(&mut chronicle(
        &data,
        &["communities", "list", "--group", "acme", "--json"],
    ));
    let stats_at_rest = json_of(&mut chronicle(&data, &["stats", "--json"]));
    let group_stats_at_rest = json_of(&mut chronicle(
        &data,
        &["stats", "--group", "acme", "--json"],
    ));
    assert_eq!(stats_at_rest["episodes"], 2, "{stats_at_rest}");
    assert_eq!(stats_at_rest["decisions"], 2, "{stats_at_rest}");

    let mut server = chronicle(&data, &["serve", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let announced = data.join("server.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !announced.exists() {
        assert!(
            Instant::now() < deadline,
            "the server never announced itself"
        );
        assert!(server.try_wait().unwrap().is_none(), "serve exited");
        std::thread::sleep(Duration::from_millis(100));
    }

    // While it runs, the directory is the server's: reads go through it
    // and answer the same.
    let served = json_of(&mut chronicle(
        &data,
        &["facts", "--group", "acme", "--json"],
    ));
    assert_eq!(served, at_rest);
    assert_eq!(
        json_of(&mut chronicle(
            &data,
            &["timeline", "--group", "acme", "--json", "Ada"]
        )),
        timeline_at_rest
    );
    assert_eq!(
        json_of(&mut chronicle(
            &data,
            &["saga", "show", "--group", "acme", "--json", "trip"]
        )),
        saga_at_rest
    );
    assert_eq!(
        json_of(&mut chronicle(
            &data,
            &["communities", "list", "--group", "acme", "--json"]
        )),
        communities_at_rest
    );
    // The running processor's status of the group: both decided.
    let status = json_of(&mut chronicle(
        &data,
        &["status", "--group", "acme", "--json"],
    ));
    assert_eq!(status["group_id"], "acme", "{status}");
    assert_eq!(status["processor_lag"], 0, "{status}");
    let every = chronicle(&data, &["status"]).output().unwrap();
    assert!(!every.status.success());
    assert!(String::from_utf8_lossy(&every.stderr).contains("--group"));
    // The running totals, of every group and of one, as at rest.
    assert_eq!(
        json_of(&mut chronicle(&data, &["stats", "--json"])),
        stats_at_rest
    );
    assert_eq!(
        json_of(&mut chronicle(
            &data,
            &["stats", "--group", "acme", "--json"]
        )),
        group_stats_at_rest
    );
    assert!(
        served["facts"].as_array().is_some_and(|f| !f.is_empty()),
        "{served}"
    );
    let found = json_of(&mut chronicle(
        &data,
        &["search", "--group", "acme", "--json", "where does Ada live"],
    ));
    let results = found["results"].as_array().expect("results");
    assert!(
        results.iter().any(|r| r.to_string().contains("Oslo")),
        "{found}"
    );
    let block = json_of(&mut chronicle(
        &data,
        &[
            "context",
            "--group",
            "acme",
            "--json",
            "where does Ada live",
        ],
    ));
    assert!(
        block["context"]
            .as_str()
            .is_some_and(|c| c.contains("Oslo")),
        "{block}"
    );
    // A bad group id is refused by the CLI, naming the flag.
    let bad = chronicle(&data, &["facts", "--group", "../x"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--group"));

    // A clean stop withdraws the announcement; reads open the data again.
    let pid = server.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    assert!(server.wait().unwrap().success());
    assert!(!announced.exists());
    let after = json_of(&mut chronicle(
        &data,
        &["facts", "--group", "acme", "--json"],
    ));
    assert_eq!(after, at_rest);
}

#[test]
fn status_at_rest_counts_what_the_processor_has_not_decided() {
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    let line = |name: &str, month: u32| {
        format!(
            r#"{{"group_id": "acme", "name": "{name}", "content": "Ada: I moved to Oslo.", "reference_time": "2025-{month:02}-01T00:00:00Z"}}"#
        )
    };
    let decided = scratch.path().join("decided.jsonl");
    std::fs::write(
        &decided,
        format!("{}\n{}\n", line("one", 1), line("two", 2)),
    )
    .unwrap();
    let pending = scratch.path().join("pending.jsonl");
    std::fs::write(&pending, format!("{}\n", line("three", 3))).unwrap();
    let ok = |c: &mut Command| {
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ok(chronicle(&data, &["ingest"]).arg(&decided));
    // Appended, not decided: no processor runs.
    ok(chronicle(&data, &["ingest", "--no-wait"]).arg(&pending));
    for args in [
        &["status", "--json"][..],
        &["status", "--group", "acme", "--json"][..],
    ] {
        let status = json_of(&mut chronicle(&data, args));
        assert_eq!(status["pending"], 1, "{status}");
        assert_eq!(status["decisions"], 2, "{status}");
        assert_eq!(status["dead_lettered"], 0, "{status}");
    }
    // Once a processor runs, nothing is pending.
    ok(chronicle(&data, &["ingest"]).arg(&pending));
    let status = json_of(&mut chronicle(&data, &["status", "--json"]));
    assert_eq!(status["pending"], 0, "{status}");
    assert!(status["decisions"].as_u64() >= Some(3), "{status}");
}
