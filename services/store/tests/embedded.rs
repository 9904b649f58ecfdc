//! The conformance suite against the embedded store, plus its durability rules.

use chronicle_engine::testing::two_tenant_story;
use chronicle_store::{EmbeddedStore, GraphStore, testing};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance() {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path().join("graph.redb")).unwrap();
    testing::run_all(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushed_records_and_positions_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.redb");
    let (records, states) = two_tenant_story().await;
    {
        let store = EmbeddedStore::open(&path).unwrap();
        store.apply(&records).await.unwrap();
        store.flush().await.unwrap();
    }
    let store = EmbeddedStore::open(&path).unwrap();
    assert!(!store.positions().await.unwrap().is_empty());
    let g = states[0].group_id().unwrap();
    assert_eq!(
        store.entities(g).await.unwrap().len(),
        states[0].entities().count()
    );
    // everything re-delivered after the restart is skipped
    assert!(
        store
            .apply(&records)
            .await
            .unwrap()
            .iter()
            .all(|o| !o.applied)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_before_totals_counts_its_rows_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("graph.redb");
    let (records, _) = two_tenant_story().await;
    let kept = {
        let store = EmbeddedStore::open(&path).unwrap();
        store.apply(&records).await.unwrap();
        store.flush().await.unwrap();
        store.totals(None).await.unwrap()
    };
    {
        // What an earlier version left: every table but the totals.
        let db = redb::Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        let totals: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("totals");
        assert!(txn.delete_table(totals).unwrap());
        txn.commit().unwrap();
    }
    let store = EmbeddedStore::open(&path).unwrap();
    let counted = store.totals(None).await.unwrap();
    assert_eq!(counted.counts, kept.counts);
    assert!(kept.decisions > 0);
    assert_eq!(
        counted.decisions, 0,
        "the log's figures are not in the rows"
    );
}
