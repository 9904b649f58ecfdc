//! The [`Backend`] on a ScyllaDB session: prepared statements, single-page
//! point reads, paged partition reads, one logged batch per record.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use scylla::client::session::Session;
use scylla::deserialize::row::DeserializeRow;
use scylla::serialize::row::SerializeRow;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::unprepared::Statement;
use uuid::Uuid;

use super::backend::Backend;
use super::config::ScyllaConfig;
use super::errors;
use super::plan::Mutation;
use super::rows::{CommunityRow, EntityRow, EpisodeRow, FactRow, SagaRow};
use super::statements::{GRAPH_EVENTS_LOG, Stmt, TABLES};
use crate::StoreError;

/// Prepared statements of one keyspace on a shared session.
pub(crate) struct CqlBackend {
    session: Arc<Session>,
    keyspace: String,
    prepared: Vec<PreparedStatement>,
    schema_timeout: Duration,
}

impl CqlBackend {
    /// Prepares every statement; a keyspace without chronicle's tables is
    /// [`StoreError::SchemaMissing`].
    pub(crate) async fn prepare(
        session: Arc<Session>,
        config: &ScyllaConfig,
    ) -> Result<Self, StoreError> {
        let keyspace = config.keyspace.clone();
        let prepared = futures::future::try_join_all(Stmt::ALL.iter().map(|stmt| {
            let (session, keyspace) = (&session, &keyspace);
            async move {
                let mut statement = Statement::new(stmt.cql(keyspace));
                statement.set_is_idempotent(true);
                let mut prepared = session.prepare(statement).await.map_err(|e| {
                    match errors::prepare("preparing statements", e) {
                        StoreError::Rejected { source, .. } => StoreError::SchemaMissing {
                            keyspace: keyspace.clone(),
                            source,
                        },
                        other => other,
                    }
                })?;
                prepared.set_is_idempotent(true);
                if stmt.is_select() {
                    prepared.set_page_size(config.page_size);
                }
                Ok::<_, StoreError>(prepared)
            }
        }))
        .await?;
        Ok(CqlBackend {
            session,
            keyspace,
            prepared,
            schema_timeout: config.schema_timeout,
        })
    }

    fn stmt(&self, s: Stmt) -> &PreparedStatement {
        &self.prepared[s.index()]
    }

    /// A point read: at most one row, one page.
    async fn one<R>(
        &self,
        op: &'static str,
        s: Stmt,
        values: impl SerializeRow,
    ) -> Result<Option<R>, StoreError>
    where
        R: for<'f, 'm> DeserializeRow<'f, 'm>,
    {
        let result = self
            .session
            .execute_unpaged(self.stmt(s), values)
            .await
            .map_err(|e| errors::execution(op, e))?;
        let rows = result
            .into_rows_result()
            .map_err(|e| errors::rows_result(op, e))?;
        rows.maybe_first_row::<R>()
            .map_err(|e| errors::first_row(op, e))
    }

    /// A partition (or slice) read page by page.
    async fn all<R>(
        &self,
        op: &'static str,
        s: Stmt,
        values: impl SerializeRow,
    ) -> Result<Vec<R>, StoreError>
    where
        R: for<'f, 'm> DeserializeRow<'f, 'm>,
    {
        let pager = self
            .session
            .execute_iter(self.stmt(s).clone(), values)
            .await
            .map_err(|e| errors::pager(op, e))?;
        let mut rows = pager
            .rows_stream::<R>()
            .map_err(|e| errors::type_check(op, &e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().await {
            out.push(row.map_err(|e| errors::next_row(op, e))?);
        }
        Ok(out)
    }
}

fn firsts<T>(rows: Vec<(T,)>) -> Vec<T> {
    rows.into_iter().map(|(t,)| t).collect()
}

#[async_trait]
impl Backend for CqlBackend {
    async fn episode(&self, group: &str, uuid: Uuid) -> Result<Option<EpisodeRow>, StoreError> {
        self.one("reading an episode", Stmt::SelectEpisode, (group, uuid))
            .await
    }

    async fn entity(&self, group: &str, uuid: Uuid) -> Result<Option<EntityRow>, StoreError> {
        self.one("reading an entity", Stmt::SelectEntity, (group, uuid))
            .await
    }

    async fn fact(&self, group: &str, uuid: Uuid) -> Result<Option<FactRow>, StoreError> {
        self.one("reading a fact", Stmt::SelectFact, (group, uuid))
            .await
    }

    async fn saga(&self, group: &str, uuid: Uuid) -> Result<Option<SagaRow>, StoreError> {
        self.one("reading a saga", Stmt::SelectSaga, (group, uuid))
            .await
    }

    async fn community(&self, group: &str, uuid: Uuid) -> Result<Option<CommunityRow>, StoreError> {
        self.one("reading a community", Stmt::SelectCommunity, (group, uuid))
            .await
    }

    async fn entity_ids_by_name(&self, group: &str, name: &str) -> Result<Vec<Uuid>, StoreError> {
        let rows = self
            .all(
                "reading entities by name",
                Stmt::SelectEntitiesByName,
                (group, name),
            )
            .await?;
        Ok(firsts(rows))
    }

    async fn fact_ends(
        &self,
        group: &str,
        entity: Uuid,
        other: Option<Uuid>,
    ) -> Result<Vec<(Uuid, Uuid)>, StoreError> {
        let op = "reading the facts of an entity";
        match other {
            Some(other) => {
                self.all(op, Stmt::SelectFactsBetween, (group, entity, other))
                    .await
            }
            None => {
                self.all(op, Stmt::SelectFactsOfEntity, (group, entity))
                    .await
            }
        }
    }

    async fn mentions(&self, group: &str, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let rows = self
            .all("reading mentions", Stmt::SelectMentions, (group, episode))
            .await?;
        Ok(firsts(rows))
    }

    async fn mentioned_by(&self, group: &str, entity: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let rows = self
            .all("reading mentions", Stmt::SelectMentionedBy, (group, entity))
            .await?;
        Ok(firsts(rows))
    }

    async fn saga_of_episode(
        &self,
        group: &str,
        episode: Uuid,
    ) -> Result<Option<Uuid>, StoreError> {
        let row: Option<(Uuid,)> = self
            .one(
                "reading the saga of an episode",
                Stmt::SelectSagaOfEpisode,
                (group, episode),
            )
            .await?;
        Ok(row.map(|(u,)| u))
    }

    async fn totals(&self, group: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(String,)> = self
            .one("reading a group's totals", Stmt::SelectTotals, (group,))
            .await?;
        Ok(row.map(|(t,)| t))
    }

    async fn applied_events(&self, group: &str, episode: Uuid) -> Result<Vec<Uuid>, StoreError> {
        let rows = self
            .all(
                "reading applied events",
                Stmt::SelectApplied,
                (group, episode),
            )
            .await?;
        Ok(firsts(rows))
    }

    async fn positions(&self) -> Result<Vec<(i32, i64)>, StoreError> {
        self.all(
            "reading positions",
            Stmt::SelectPositions,
            (GRAPH_EVENTS_LOG,),
        )
        .await
    }

    async fn groups_in_shard(&self, shard: i16) -> Result<Vec<String>, StoreError> {
        let rows = self
            .all("listing groups", Stmt::SelectGroups, (shard,))
            .await?;
        Ok(firsts(rows))
    }

    async fn buckets(&self, group: &str, kind: &str) -> Result<Vec<i32>, StoreError> {
        let rows = self
            .all("listing month buckets", Stmt::SelectBuckets, (group, kind))
            .await?;
        Ok(firsts(rows))
    }

    async fn records(
        &self,
        group: &str,
        kind: &str,
        bucket: i32,
    ) -> Result<Vec<(Uuid, Option<bool>)>, StoreError> {
        self.all(
            "listing records",
            Stmt::SelectRecords,
            (group, kind, bucket),
        )
        .await
    }

    async fn episodes_from(
        &self,
        group: &str,
        bucket: i32,
        from: i64,
        newest_first: bool,
        limit: i32,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        let stmt = if newest_first {
            Stmt::SelectEpisodesBefore
        } else {
            Stmt::SelectEpisodesAfter
        };
        self.all(
            "reading episodes by time",
            stmt,
            (group, bucket, from, limit),
        )
        .await
    }

    async fn episodes_at(
        &self,
        group: &str,
        bucket: i32,
        at: i64,
    ) -> Result<Vec<(i64, Uuid)>, StoreError> {
        self.all(
            "reading episodes by time",
            Stmt::SelectEpisodesAt,
            (group, bucket, at),
        )
        .await
    }

    async fn write(&self, mutations: &[Mutation]) -> Result<(), StoreError> {
        let mut batch = Batch::new(BatchType::Logged);
        for m in mutations {
            batch.append_statement(self.stmt(m.stmt()).clone());
        }
        // Upserts of final values and deletes by key: a retry cannot double anything.
        batch.set_is_idempotent(true);
        self.session
            .batch(&batch, mutations)
            .await
            .map_err(|e| errors::execution("applying a record", e))?;
        Ok(())
    }

    async fn truncate(&self) -> Result<(), StoreError> {
        for table in TABLES {
            let mut statement = Statement::new(format!("TRUNCATE {}.{table}", self.keyspace));
            statement.set_request_timeout(Some(self.schema_timeout));
            statement.set_is_idempotent(true);
            self.session
                .query_unpaged(statement, &[])
                .await
                .map_err(|e| errors::execution("truncating the projection", e))?;
        }
        Ok(())
    }
}
