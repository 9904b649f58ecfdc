//! The store's logic without a node: the conformance suite and a
//! differential check against the embedded store, both over the in-memory
//! model of the CQL tables. (The conformance suite against a real node is
//! `tests/scylla.rs`, run when SCYLLA_URI is set.)

use std::sync::Arc;

use chronicle_engine::testing::two_tenant_story;
use chronicle_model::testing::{batch_of_every_kind, every_event_kind, group, ts};
use chronicle_model::{EventBatch, EventKind, LogPosition, normalize_name};
use uuid::Uuid;

use super::ScyllaStore;
use super::memory::MemoryBackend;
use crate::{EmbeddedStore, GraphStore};

fn memory_store() -> (ScyllaStore, Arc<MemoryBackend>) {
    let backend = Arc::new(MemoryBackend::default());
    let store = ScyllaStore::from_backend(backend.clone(), "memory".into(), 8);
    (store, backend)
}

fn at(partition: u32, offset: u64) -> LogPosition {
    LogPosition { partition, offset }
}

/// Records covering every event kind: the two-tenant story, one batch of
/// every kind, and the same kinds again one event per record (so state
/// crosses records inside one `apply` call).
async fn records() -> Vec<(LogPosition, EventBatch)> {
    let (mut records, _) = two_tenant_story().await;
    let g = group("every-kind");
    records.push((at(2, 0), batch_of_every_kind(&g)));
    let g2 = group("one-by-one");
    for (i, kind) in every_event_kind(&g2).into_iter().enumerate() {
        records.push((
            at(3, i as u64),
            EventBatch::new(
                Uuid::from_u128(1000 + i as u128),
                g2.clone(),
                ts("2025-03-01T09:00:01Z"),
                None,
                vec![kind],
            ),
        ));
    }
    // a rename moves the name index; an invalidation flips a fact's listing
    let mut renamed = chronicle_model::testing::entity(&g2, Uuid::from_u128(10), "Alicia");
    renamed.created_at = ts("2024-12-31T23:59:59.999999Z");
    records.push((
        at(3, 100),
        EventBatch::new(
            Uuid::from_u128(2000),
            g2.clone(),
            ts("2025-03-02T00:00:00Z"),
            None,
            vec![EventKind::EntityCreated { entity: renamed }],
        ),
    ));
    records
}

#[tokio::test]
async fn conformance_suite_over_the_table_model() {
    let (store, _) = memory_store();
    crate::testing::run_all(&store).await;
}

/// Every read of the GraphStore answers exactly as the embedded store does.
#[tokio::test]
async fn answers_like_the_embedded_store() {
    let records = records().await;
    let dir = tempfile::tempdir().unwrap();
    let embedded = EmbeddedStore::open(dir.path().join("graph.redb")).unwrap();
    let (scylla, _) = memory_store();
    // in uneven chunks, so caches start cold and warm
    for chunk in records.chunks(4) {
        let a = embedded.apply(chunk).await.unwrap();
        let b = scylla.apply(chunk).await.unwrap();
        assert_eq!(a, b, "apply outcomes (touched records included)");
    }
    let stores: [&dyn GraphStore; 2] = [&embedded, &scylla];
    let [e, s] = stores;
    assert_eq!(e.positions().await.unwrap(), s.positions().await.unwrap());
    assert_eq!(e.groups().await.unwrap(), s.groups().await.unwrap());
    assert_eq!(e.counts(None).await.unwrap(), s.counts(None).await.unwrap());
    for g in e.groups().await.unwrap() {
        assert_eq!(
            e.counts(Some(&g)).await.unwrap(),
            s.counts(Some(&g)).await.unwrap()
        );
        let entities = e.entities(&g).await.unwrap();
        assert_eq!(entities, s.entities(&g).await.unwrap(), "entities of {g}");
        assert_eq!(e.facts(&g).await.unwrap(), s.facts(&g).await.unwrap());
        assert_eq!(
            e.communities(&g).await.unwrap(),
            s.communities(&g).await.unwrap()
        );
        let sagas = e.sagas(&g).await.unwrap();
        assert_eq!(sagas, s.sagas(&g).await.unwrap());
        for saga in &sagas {
            assert_eq!(
                e.saga(&g, saga.uuid).await.unwrap(),
                s.saga(&g, saga.uuid).await.unwrap()
            );
        }
        for (before, limit) in [
            (None, usize::MAX),
            (None, 1),
            (Some(ts("2025-02-15T00:00:00Z")), 2),
            (Some(ts("2025-01-10T09:00:00Z")), 10),
            (Some(ts("2024-01-01T00:00:00Z")), 10),
            (None, 0),
        ] {
            let episodes = e.episodes_by_time(&g, before, limit).await.unwrap();
            assert_eq!(
                episodes,
                s.episodes_by_time(&g, before, limit).await.unwrap(),
                "{g} episodes before {before:?}, limit {limit}"
            );
            for ep in &episodes {
                assert_eq!(
                    e.episode(&g, ep.uuid).await.unwrap(),
                    s.episode(&g, ep.uuid).await.unwrap()
                );
                assert_eq!(
                    e.mentions(&g, ep.uuid).await.unwrap(),
                    s.mentions(&g, ep.uuid).await.unwrap()
                );
            }
        }
        for a in &entities {
            let u = a.uuid;
            assert_eq!(
                e.entity(&g, u).await.unwrap(),
                s.entity(&g, u).await.unwrap()
            );
            let name = normalize_name(&a.name);
            assert_eq!(
                e.entities_by_name(&g, &name).await.unwrap(),
                s.entities_by_name(&g, &name).await.unwrap()
            );
            assert_eq!(
                e.facts_of_entity(&g, u).await.unwrap(),
                s.facts_of_entity(&g, u).await.unwrap()
            );
            assert_eq!(
                e.neighbours(&g, u).await.unwrap(),
                s.neighbours(&g, u).await.unwrap()
            );
            assert_eq!(
                e.mentioning_episodes(&g, u).await.unwrap(),
                s.mentioning_episodes(&g, u).await.unwrap()
            );
            for b in &entities {
                assert_eq!(
                    e.facts_between(&g, u, b.uuid).await.unwrap(),
                    s.facts_between(&g, u, b.uuid).await.unwrap()
                );
            }
        }
    }
    // the rename moved the name index
    let g2 = group("one-by-one");
    assert!(s.entities_by_name(&g2, "alice").await.unwrap().is_empty());
    assert_eq!(s.entities_by_name(&g2, "alicia").await.unwrap().len(), 1);
}

/// Applying the same records again — at their offsets or at new ones —
/// writes nothing but positions and leaves every table as it was.
#[tokio::test]
async fn reapplying_leaves_the_tables_identical() {
    let records = records().await;
    let (store, backend) = memory_store();
    store.apply(&records).await.unwrap();
    let once = backend.dump();
    let batches = backend.batches.lock().unwrap().len();
    let again = store.apply(&records).await.unwrap();
    assert!(again.iter().all(|o| !o.applied));
    assert_eq!(backend.dump(), once);
    assert_eq!(
        backend.batches.lock().unwrap().len(),
        batches,
        "skipped records write nothing"
    );
    let moved: Vec<_> = records
        .iter()
        .map(|(p, b)| (at(p.partition, p.offset + 1000), b.clone()))
        .collect();
    let out = store.apply(&moved).await.unwrap();
    assert!(out.iter().all(|o| o.applied && o.events_applied == 0));
    // only the positions and the totals rows changed in those batches (a
    // decision on the log twice is counted twice, as the log holds it)
    for batch in &backend.batches.lock().unwrap()[batches..] {
        assert!(
            batch.iter().all(|m| matches!(
                m,
                super::plan::Mutation::Position { .. } | super::plan::Mutation::Totals { .. }
            )),
            "{batch:?}"
        );
    }
    // positions (line 1) and totals (the last line) aside
    let strip_positions = |dump: String| -> String {
        dump.lines()
            .enumerate()
            .filter(|(i, _)| *i != 1 && *i != 16)
            .map(|(_, l)| l.to_owned())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip_positions(backend.dump()), strip_positions(once));
}

/// A projector that restarts after a failed write resumes from the stored
/// positions and ends with exactly the tables of an uninterrupted run.
#[tokio::test]
async fn a_failed_record_is_neither_half_applied_nor_lost() {
    let records = records().await;
    let (clean, clean_backend) = memory_store();
    clean.apply(&records).await.unwrap();

    let (store, backend) = memory_store();
    store.apply(&records[..5]).await.unwrap();
    *backend.fail_writes.lock().unwrap() = 1;
    let err = store.apply(&records[5..]).await.unwrap_err();
    let cause = std::error::Error::source(&err).map(|c| c.to_string());
    assert_eq!(cause.as_deref(), Some("injected write failure"), "{err}");
    // a new process on the same tables: resume from the stored positions
    let restarted = ScyllaStore::from_backend(backend.clone(), "memory".into(), 8);
    let positions = restarted.positions().await.unwrap();
    let pending: Vec<_> = records
        .iter()
        .filter(|(p, _)| p.offset >= positions.get(&p.partition).copied().unwrap_or(0))
        .cloned()
        .collect();
    assert_eq!(pending.len(), records.len() - 5);
    restarted.apply(&pending).await.unwrap();
    assert_eq!(backend.dump(), clean_backend.dump());
}

#[tokio::test]
async fn one_logged_batch_per_applied_record() {
    let records = records().await;
    let (store, backend) = memory_store();
    store.apply(&records).await.unwrap();
    let batches = backend.batches.lock().unwrap();
    assert_eq!(batches.len(), records.len());
    for (batch, (position, _)) in batches.iter().zip(&records) {
        let last = batch.last().unwrap();
        assert_eq!(
            last,
            &super::plan::Mutation::Position {
                partition: position.partition as i32,
                next_offset: position.offset as i64 + 1
            },
            "the position travels with the record's rows"
        );
    }
}

/// Rust values and rows against the CQL types of `schema.cql`, checked by
/// the driver's own serializers and type checks — what a node would check
/// when the statements run.
mod types {
    use std::collections::BTreeMap;

    use scylla::deserialize::row::DeserializeRow;
    use scylla::frame::response::result::{
        CollectionType, ColumnSpec, ColumnType, NativeType, TableSpec,
    };
    use scylla::serialize::row::{RowSerializationContext, SerializeRow};
    use scylla::serialize::writers::RowWriter;
    use uuid::Uuid;

    use crate::scylla::plan::Mutation;
    use crate::scylla::rows::{Cell, CommunityRow, EntityRow, EpisodeRow, FactRow, SagaRow};
    use crate::scylla::schema::SCHEMA_TEMPLATE;
    use crate::scylla::statements::Stmt;

    /// Table -> column -> CQL type text.
    fn schema() -> BTreeMap<String, BTreeMap<String, String>> {
        let text: String = SCHEMA_TEMPLATE
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut out = BTreeMap::new();
        for stmt in text.split(';') {
            let Some(rest) = stmt
                .trim()
                .strip_prefix("CREATE TABLE IF NOT EXISTS ${keyspace}.")
            else {
                continue;
            };
            let (name, body) = rest.split_once(" (").unwrap();
            let columns = body.split("PRIMARY KEY").next().unwrap();
            let mut cols = BTreeMap::new();
            for line in columns.lines() {
                let line = line.trim().trim_end_matches(',');
                if let Some((col, typ)) = line.split_once(' ') {
                    cols.insert(col.to_owned(), typ.trim().to_owned());
                }
            }
            out.insert(name.trim().to_owned(), cols);
        }
        out
    }

    fn cql_type(text: &str) -> ColumnType<'static> {
        if let Some(inner) = text
            .strip_prefix("frozen<list<")
            .and_then(|t| t.strip_suffix(">>"))
        {
            return ColumnType::Collection {
                frozen: true,
                typ: CollectionType::List(Box::new(cql_type(inner))),
            };
        }
        ColumnType::Native(match text {
            "text" => NativeType::Text,
            "uuid" => NativeType::Uuid,
            "bigint" => NativeType::BigInt,
            "int" => NativeType::Int,
            "smallint" => NativeType::SmallInt,
            "boolean" => NativeType::Boolean,
            "blob" => NativeType::Blob,
            other => panic!("schema type {other} not modelled here"),
        })
    }

    fn table_of(cql: &str) -> &str {
        let after = cql.split_once("${ks}.").unwrap().1;
        after
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap()
    }

    /// The bind markers of a statement, in order, as (column, type).
    fn bind_markers(stmt: Stmt) -> Vec<(String, ColumnType<'static>)> {
        let cql = stmt.template();
        let table = schema()[table_of(cql)].clone();
        let names: Vec<String> = if let Some((_, rest)) = cql.split_once(" (") {
            let list = rest.split_once(") VALUES").unwrap().0;
            list.split(',').map(|c| c.trim().to_owned()).collect()
        } else {
            let clause = cql.split_once(" WHERE ").unwrap().1;
            let (clause, limit) = match clause.split_once(" LIMIT ") {
                Some((c, _)) => (c, true),
                None => (clause, false),
            };
            let mut names: Vec<String> = clause
                .split(" AND ")
                .map(|c| c.split_whitespace().next().unwrap().to_owned())
                .collect();
            if limit {
                names.push("[limit]".into());
            }
            names
        };
        names
            .into_iter()
            .map(|n| {
                let typ = if n == "[limit]" {
                    ColumnType::Native(NativeType::Int)
                } else {
                    cql_type(&table[&n])
                };
                (n, typ)
            })
            .collect()
    }

    fn selected(stmt: Stmt) -> Vec<(String, ColumnType<'static>)> {
        let cql = stmt.template();
        let table = schema()[table_of(cql)].clone();
        let list = cql
            .strip_prefix("SELECT ")
            .unwrap()
            .split_once(" FROM")
            .unwrap()
            .0;
        list.split(',')
            .map(|c| {
                let c = c.trim().to_owned();
                let typ = cql_type(&table[&c]);
                (c, typ)
            })
            .collect()
    }

    fn specs(cols: &[(String, ColumnType<'static>)]) -> Vec<ColumnSpec<'static>> {
        cols.iter()
            .map(|(n, t)| ColumnSpec::owned(n.clone(), t.clone(), TableSpec::borrowed("ks", "t")))
            .collect()
    }

    fn serializes(stmt: Stmt, values: &impl SerializeRow) {
        let specs = specs(&bind_markers(stmt));
        let ctx = RowSerializationContext::from_specs(&specs);
        let mut buf = Vec::new();
        let mut writer = RowWriter::new(&mut buf);
        values
            .serialize(&ctx, &mut writer)
            .unwrap_or_else(|e| panic!("{stmt:?}: {e}"));
        assert_eq!(writer.value_count(), specs.len(), "{stmt:?}");
    }

    fn reads<R: for<'f, 'm> DeserializeRow<'f, 'm>>(stmt: Stmt) {
        let specs = specs(&selected(stmt));
        R::type_check(&specs).unwrap_or_else(|e| panic!("{stmt:?}: {e}"));
    }

    fn sample_mutations() -> Vec<Mutation> {
        let g = chronicle_model::testing::group("tenant-a");
        let (u, v, w) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let s = || "tenant-a".to_owned();
        let episode = chronicle_model::testing::episode(&g, u);
        let entity = chronicle_model::testing::entity(&g, u, "Alice");
        let fact = chronicle_model::testing::fact(&g, w, u, v);
        let saga = chronicle_model::Saga {
            uuid: u,
            group_id: g.clone(),
            name: "trip".into(),
            summary: String::new(),
            episodes: vec![u, v],
            last_summarized_episode_valid_at: None,
            created_at: chronicle_model::testing::ts("2025-01-01T00:00:00Z"),
        };
        let community = chronicle_model::Community {
            uuid: u,
            group_id: g.clone(),
            name: "c".into(),
            summary: "s".into(),
            members: vec![u],
            name_embedding: None,
            created_at: chronicle_model::testing::ts("2025-01-01T00:00:00Z"),
        };
        let entity_row = EntityRow::from_model(&entity);
        let fact_row = FactRow::from_model(&fact);
        vec![
            Mutation::Episode(EpisodeRow::from_model(&episode)),
            Mutation::DeleteEpisode {
                group: s(),
                uuid: u,
            },
            Mutation::EpisodeTime {
                group: s(),
                bucket: 202501,
                valid_at: 1,
                uuid: u,
            },
            Mutation::DeleteEpisodeTime {
                group: s(),
                bucket: 202501,
                valid_at: 1,
                uuid: u,
            },
            Mutation::Entity(entity_row.write(None)),
            Mutation::Entity(entity_row.write(Some(&entity_row))),
            Mutation::DeleteEntity {
                group: s(),
                uuid: u,
            },
            Mutation::EntityName {
                group: s(),
                name: "alice".into(),
                uuid: u,
            },
            Mutation::DeleteEntityName {
                group: s(),
                name: "alice".into(),
                uuid: u,
            },
            Mutation::Fact(fact_row.write(None)),
            Mutation::Fact(
                FactRow {
                    valid_at: None,
                    ..fact_row.clone()
                }
                .write(Some(&fact_row)),
            ),
            Mutation::DeleteFact {
                group: s(),
                uuid: w,
            },
            Mutation::FactEnd {
                group: s(),
                entity: u,
                other: v,
                fact: w,
                outgoing: true,
            },
            Mutation::DeleteFactEnd {
                group: s(),
                entity: u,
                other: v,
                fact: w,
            },
            Mutation::Mention {
                group: s(),
                episode: u,
                entity: v,
            },
            Mutation::DeleteMention {
                group: s(),
                episode: u,
                entity: v,
            },
            Mutation::MentionedBy {
                group: s(),
                entity: v,
                episode: u,
            },
            Mutation::DeleteMentionedBy {
                group: s(),
                entity: v,
                episode: u,
            },
            Mutation::Saga(SagaRow::from_model(&saga).write(None)),
            Mutation::SagaOfEpisode {
                group: s(),
                episode: u,
                saga: v,
            },
            Mutation::DeleteSagaOfEpisode {
                group: s(),
                episode: u,
            },
            Mutation::Community(CommunityRow::from_model(&community).write(None)),
            Mutation::DeleteCommunity {
                group: s(),
                uuid: u,
            },
            Mutation::Record {
                group: s(),
                kind: "fact",
                bucket: 202501,
                uuid: u,
                is_current: Cell::Set(Some(true)),
            },
            Mutation::Record {
                group: s(),
                kind: "entity",
                bucket: 202501,
                uuid: u,
                is_current: Cell::Unset,
            },
            Mutation::DeleteRecord {
                group: s(),
                kind: "fact",
                bucket: 202501,
                uuid: u,
            },
            Mutation::Bucket {
                group: s(),
                kind: "fact",
                bucket: 202501,
            },
            Mutation::Applied {
                group: s(),
                episode: u,
                event: v,
            },
            Mutation::Group {
                shard: 3,
                group: s(),
            },
            Mutation::Position {
                partition: 0,
                next_offset: 7,
            },
            Mutation::Totals {
                group: s(),
                totals: "{}".into(),
            },
        ]
    }

    #[test]
    fn every_write_binds_values_of_its_columns_types() {
        let samples = sample_mutations();
        let covered: std::collections::BTreeSet<Stmt> =
            samples.iter().map(Mutation::stmt).collect();
        let writes: std::collections::BTreeSet<Stmt> =
            Stmt::ALL.into_iter().filter(|s| !s.is_select()).collect();
        assert_eq!(covered, writes, "one sample per write statement");
        for m in &samples {
            serializes(m.stmt(), m);
        }
    }

    #[test]
    fn every_read_binds_and_decodes_its_columns_types() {
        let (g, u) = ("tenant-a", Uuid::from_u128(1));
        serializes(Stmt::SelectEpisode, &(g, u));
        serializes(Stmt::SelectEntitiesByName, &(g, "alice"));
        serializes(Stmt::SelectFactsBetween, &(g, u, u));
        serializes(Stmt::SelectPositions, &("graph-events",));
        serializes(Stmt::SelectTotals, &(g,));
        serializes(Stmt::SelectGroups, &(3i16,));
        serializes(Stmt::SelectBuckets, &(g, "fact"));
        serializes(Stmt::SelectRecords, &(g, "fact", 202501i32));
        serializes(Stmt::SelectEpisodesBefore, &(g, 202501i32, 5i64, 10i32));
        serializes(Stmt::SelectEpisodesAt, &(g, 202501i32, 5i64));
        serializes(Stmt::SelectEpisodesAfter, &(g, 202501i32, 5i64, 10i32));
        reads::<EpisodeRow>(Stmt::SelectEpisode);
        reads::<EntityRow>(Stmt::SelectEntity);
        reads::<FactRow>(Stmt::SelectFact);
        reads::<SagaRow>(Stmt::SelectSaga);
        reads::<CommunityRow>(Stmt::SelectCommunity);
        for s in [
            Stmt::SelectEntitiesByName,
            Stmt::SelectMentions,
            Stmt::SelectMentionedBy,
            Stmt::SelectApplied,
            Stmt::SelectSagaOfEpisode,
        ] {
            reads::<(Uuid,)>(s);
        }
        reads::<(Uuid, Uuid)>(Stmt::SelectFactsOfEntity);
        reads::<(Uuid, Uuid)>(Stmt::SelectFactsBetween);
        reads::<(i32, i64)>(Stmt::SelectPositions);
        reads::<(String,)>(Stmt::SelectTotals);
        reads::<(String,)>(Stmt::SelectGroups);
        reads::<(i32,)>(Stmt::SelectBuckets);
        reads::<(Uuid, Option<bool>)>(Stmt::SelectRecords);
        reads::<(i64, Uuid)>(Stmt::SelectEpisodesBefore);
        reads::<(i64, Uuid)>(Stmt::SelectEpisodesAt);
        reads::<(i64, Uuid)>(Stmt::SelectEpisodesAfter);
    }

    #[test]
    fn a_mismatched_type_is_caught() {
        // the checks above have teeth: a smallint bound as int fails
        let specs = specs(&[("shard".into(), ColumnType::Native(NativeType::SmallInt))]);
        let ctx = RowSerializationContext::from_specs(&specs);
        let mut buf = Vec::new();
        assert!(
            (7i32,)
                .serialize(&ctx, &mut RowWriter::new(&mut buf))
                .is_err()
        );
        assert!(<(i64,)>::type_check(&specs).is_err());
    }
}
