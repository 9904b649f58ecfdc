//! The CQL schema (`schemas/cql/schema.cql`) and its idempotent migration.

use std::time::Duration;

use scylla::client::session::Session;
use scylla::statement::unprepared::Statement;

use super::config::{Replication, validate_keyspace};
use super::errors;
use crate::StoreError;

/// `schemas/cql/schema.cql`, with `${keyspace}` and `${replication}` to fill in.
pub const SCHEMA_TEMPLATE: &str = include_str!("../../../../schemas/cql/schema.cql");

/// Columns added to a table after it was first released, as
/// `(table, column, CQL type)`: `CREATE TABLE IF NOT EXISTS` leaves an
/// older table as it is, so [`migrate`] adds what it lacks.
pub const ADDED_COLUMNS: &[(&str, &str, &str)] = &[("episodes", "preceding_turn", "text")];

/// How long one schema statement may take: DDL waits for every node to agree.
const DDL_TIMEOUT: Duration = Duration::from_secs(120);

/// The schema's statements for `keyspace`, in order: the keyspace first,
/// then its tables. Comment lines are dropped before splitting on `;`.
pub fn schema_statements(
    keyspace: &str,
    replication: &Replication,
) -> Result<Vec<String>, StoreError> {
    validate_keyspace(keyspace)?;
    let text: Vec<&str> = SCHEMA_TEMPLATE
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect();
    Ok(text
        .join("\n")
        .split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.replace("${keyspace}", keyspace)
                .replace("${replication}", &replication.to_cql())
        })
        .collect())
}

/// Creates the keyspace (if absent, with `replication`) and every table
/// (if absent). Safe to run again: an existing keyspace keeps its
/// replication, and existing tables and rows are left as they are.
pub async fn migrate(
    session: &Session,
    keyspace: &str,
    replication: &Replication,
) -> Result<(), StoreError> {
    for cql in schema_statements(keyspace, replication)? {
        let mut statement = Statement::new(cql);
        statement.set_request_timeout(Some(DDL_TIMEOUT));
        statement.set_is_idempotent(true);
        session
            .query_unpaged(statement, &[])
            .await
            .map_err(|e| errors::execution("creating the schema", e))?;
    }
    session
        .await_schema_agreement()
        .await
        .map_err(|e| errors::schema_agreement("creating the schema", e))?;
    for (table, column, cql_type) in ADDED_COLUMNS {
        let existing = session
            .query_unpaged(
                "SELECT column_name FROM system_schema.columns \
                 WHERE keyspace_name = ? AND table_name = ? AND column_name = ?",
                (keyspace, table, column),
            )
            .await
            .map_err(|e| errors::execution("reading the schema", e))?;
        let present = existing
            .into_rows_result()
            .map_err(|e| StoreError::Corrupt(format!("system_schema.columns: {e}")))?
            .rows_num()
            > 0;
        if !present {
            let mut statement = Statement::new(format!(
                "ALTER TABLE {keyspace}.{table} ADD {column} {cql_type}"
            ));
            statement.set_request_timeout(Some(DDL_TIMEOUT));
            session
                .query_unpaged(statement, &[])
                .await
                .map_err(|e| errors::execution("adding a column to the schema", e))?;
            tracing::info!(keyspace, table, column, "added a column to an older table");
        }
    }
    session
        .await_schema_agreement()
        .await
        .map_err(|e| errors::schema_agreement("updating the schema", e))?;
    tracing::info!(keyspace, replication = %replication.to_cql(), "scylla schema is up to date");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_fill_in_keyspace_and_replication() {
        let stmts = schema_statements("chronicle_t1", &Replication::Factor(1)).unwrap();
        assert_eq!(
            stmts[0],
            "CREATE KEYSPACE IF NOT EXISTS chronicle_t1\n    WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': '1'}"
        );
        assert_eq!(stmts.len(), 1 + super::super::statements::TABLES.len());
        for s in &stmts[1..] {
            assert!(
                s.starts_with("CREATE TABLE IF NOT EXISTS chronicle_t1."),
                "{s}"
            );
            assert!(s.contains("PRIMARY KEY (("), "{s}");
        }
        for s in &stmts {
            assert!(!s.contains("${") && !s.contains("--"), "{s}");
        }
        // every graph table leads its partition key with group_id
        for s in stmts.iter().skip(1) {
            let key = s.split("PRIMARY KEY ((").nth(1).unwrap();
            let first = key.split([',', ')']).next().unwrap();
            if !(s.contains(".groups ") || s.contains(".positions ")) {
                assert_eq!(first, "group_id", "{s}");
            }
        }
    }

    #[test]
    fn bad_keyspaces_are_refused_before_any_ddl() {
        for bad in ["", "1x", "ks; DROP KEYSPACE system", "a-b"] {
            assert!(matches!(
                schema_statements(bad, &Replication::default()),
                Err(StoreError::Config(_))
            ));
        }
    }
}
