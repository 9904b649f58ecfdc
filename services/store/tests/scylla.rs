//! The GraphStore conformance suite against a real ScyllaDB node, in a
//! fresh keyspace, when `SCYLLA_URI` (`host:port[,host:port]`) is set.
//! Without it the test reports itself skipped on one line; it does not
//! pretend to have run.

#![cfg(feature = "scylla")]

use std::sync::Arc;

use chronicle_engine::testing::two_tenant_story;
use chronicle_store::scylla::{
    Replication, ScyllaConfig, ScyllaStore, migrate, open_session, parse_contact_points,
};
use chronicle_store::{GraphStore, StoreError, testing};

/// A node to test against, or why there is none.
fn node() -> Result<String, &'static str> {
    match std::env::var("SCYLLA_URI") {
        Ok(uri) if !uri.trim().is_empty() => Ok(uri),
        _ => Err("SCYLLA_URI not set (no ScyllaDB node reachable)"),
    }
}

/// Reports a skip on one line that the test harness does not swallow:
/// `eprintln!` is captured for passing tests, a direct write is not.
fn report_skip(why: &str) {
    use std::io::Write as _;
    let line = format!("\nSKIPPED scylla conformance: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// A migrated keyspace of its own for one test, dropped afterwards.
struct Keyspace {
    session: Arc<chronicle_store::scylla::Session>,
    config: ScyllaConfig,
}

impl Keyspace {
    async fn fresh(uri: &str) -> Keyspace {
        let points = parse_contact_points(uri).expect("SCYLLA_URI is host:port[,host:port]");
        let name = format!("chronicle_test_{}", uuid::Uuid::new_v4().simple());
        let config = ScyllaConfig::new(&points.join(","), &name).unwrap();
        let session = Arc::new(open_session(&config).await.expect("connect to SCYLLA_URI"));
        migrate(&session, &name, &Replication::Factor(1))
            .await
            .expect("migrate");
        // migrating again changes nothing
        migrate(&session, &name, &Replication::Factor(1))
            .await
            .expect("migrate is idempotent");
        Keyspace { session, config }
    }

    async fn store(&self) -> ScyllaStore {
        ScyllaStore::with_session(self.session.clone(), &self.config)
            .await
            .expect("prepare statements")
    }

    async fn drop(self) {
        let cql = format!("DROP KEYSPACE IF EXISTS {}", self.config.keyspace);
        if let Err(e) = self.session.query_unpaged(cql, &[]).await {
            eprintln!("could not drop test keyspace {}: {e}", self.config.keyspace);
        }
    }
}

/// Everything that needs a node, in one test so a missing node is reported once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scylla_conformance() {
    let uri = match node() {
        Ok(uri) => uri,
        Err(why) => return report_skip(why),
    };
    conformance(&uri).await;
    a_restarted_store_resumes_from_its_positions(&uri).await;
    an_unmigrated_keyspace_says_so(&uri).await;
}

/// The suite every store runs.
async fn conformance(uri: &str) {
    let ks = Keyspace::fresh(uri).await;
    let store = ks.store().await;
    testing::run_all(&store).await;
    ks.drop().await;
}

/// A new store on the same keyspace applies only what is past the stored positions.
async fn a_restarted_store_resumes_from_its_positions(uri: &str) {
    let ks = Keyspace::fresh(uri).await;
    let (records, states) = two_tenant_story().await;
    {
        let store = ks.store().await;
        store.apply(&records[..4]).await.unwrap();
    }
    let store = ks.store().await;
    let positions = store.positions().await.unwrap();
    let rest: Vec<_> = records
        .iter()
        .filter(|(p, _)| p.offset >= positions.get(&p.partition).copied().unwrap_or(0))
        .cloned()
        .collect();
    assert_eq!(rest.len(), records.len() - 4);
    store.apply(&rest).await.unwrap();
    assert!(
        store
            .apply(&records)
            .await
            .unwrap()
            .iter()
            .all(|o| !o.applied)
    );
    let g = states[0].group_id().unwrap();
    let mut facts = store.facts(g).await.unwrap();
    facts.sort_by_key(|f| f.uuid);
    assert_eq!(facts, states[0].facts().cloned().collect::<Vec<_>>());
    ks.drop().await;
}

/// Connecting to a keyspace that was never migrated is a typed error.
async fn an_unmigrated_keyspace_says_so(uri: &str) {
    let points = parse_contact_points(uri).unwrap();
    let config = ScyllaConfig::new(&points.join(","), "chronicle_never_migrated").unwrap();
    match ScyllaStore::connect(&config).await {
        Err(StoreError::SchemaMissing { keyspace, .. }) => {
            assert_eq!(keyspace, "chronicle_never_migrated")
        }
        other => panic!("expected SchemaMissing, got {other:?}"),
    }
}
