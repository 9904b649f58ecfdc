//! Every CQL statement the store runs, prepared once per session.
//!
//! Texts name their tables as `${ks}.table`; [`Stmt::cql`] fills in the
//! keyspace, so one session can serve stores in several keyspaces (tests
//! do) without `USE`. Every statement addresses full partition keys, so the
//! driver routes it to a replica (token-aware) and no read scans a table.

/// One statement of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Stmt {
    SelectEpisode,
    SelectEntity,
    SelectFact,
    SelectSaga,
    SelectCommunity,
    SelectEntitiesByName,
    SelectFactsOfEntity,
    SelectFactsBetween,
    SelectMentions,
    SelectMentionedBy,
    SelectSagaOfEpisode,
    SelectApplied,
    SelectPositions,
    SelectTotals,
    SelectGroups,
    SelectBuckets,
    SelectRecords,
    SelectEpisodesBefore,
    SelectEpisodesAt,
    SelectEpisodesAfter,
    InsertEpisode,
    DeleteEpisode,
    InsertEpisodeTime,
    DeleteEpisodeTime,
    InsertEntity,
    DeleteEntity,
    InsertEntityName,
    DeleteEntityName,
    InsertFact,
    DeleteFact,
    InsertFactEnd,
    DeleteFactEnd,
    InsertMention,
    DeleteMention,
    InsertMentionedBy,
    DeleteMentionedBy,
    InsertSaga,
    InsertSagaOfEpisode,
    DeleteSagaOfEpisode,
    InsertCommunity,
    DeleteCommunity,
    InsertRecord,
    DeleteRecord,
    InsertBucket,
    InsertApplied,
    InsertGroup,
    InsertPosition,
    InsertTotals,
}

macro_rules! episode_columns {
    () => {
        "group_id, uuid, name, source, source_description, content, valid_at, created_at, entity_edges, metadata, content_embedding, preceding_turn"
    };
}
macro_rules! entity_columns {
    () => {
        "group_id, uuid, name, labels, created_at, name_embedding, summary, attributes"
    };
}
macro_rules! fact_columns {
    () => {
        "group_id, uuid, source_node_uuid, target_node_uuid, name, fact, fact_embedding, episodes, created_at, valid_at, invalid_at, expired_at, reference_time, attributes, invalidated_by_fact, invalidated_by_episode, prior_invalid_at, stated_windows"
    };
}
macro_rules! saga_columns {
    () => {
        "group_id, uuid, name, summary, episodes, last_summarized_episode_valid_at, created_at"
    };
}
macro_rules! community_columns {
    () => {
        "group_id, uuid, name, summary, members, name_embedding, created_at"
    };
}

/// The tables `clear` truncates: every table of the schema.
pub(crate) const TABLES: [&str; 17] = [
    "groups",
    "positions",
    "applied_events",
    "episodes",
    "episodes_by_time",
    "entities",
    "entities_by_name",
    "facts",
    "facts_by_entity",
    "mentions",
    "mentioned_by",
    "sagas",
    "saga_of_episode",
    "communities",
    "group_records",
    "group_buckets",
    "group_totals",
];

/// The value of `positions.log_name` for the graph-events log.
pub(crate) const GRAPH_EVENTS_LOG: &str = "graph-events";

impl Stmt {
    /// Every statement, in declaration order (its index in a prepared set).
    pub(crate) const ALL: [Stmt; 48] = [
        Stmt::SelectEpisode,
        Stmt::SelectEntity,
        Stmt::SelectFact,
        Stmt::SelectSaga,
        Stmt::SelectCommunity,
        Stmt::SelectEntitiesByName,
        Stmt::SelectFactsOfEntity,
        Stmt::SelectFactsBetween,
        Stmt::SelectMentions,
        Stmt::SelectMentionedBy,
        Stmt::SelectSagaOfEpisode,
        Stmt::SelectApplied,
        Stmt::SelectPositions,
        Stmt::SelectTotals,
        Stmt::SelectGroups,
        Stmt::SelectBuckets,
        Stmt::SelectRecords,
        Stmt::SelectEpisodesBefore,
        Stmt::SelectEpisodesAt,
        Stmt::SelectEpisodesAfter,
        Stmt::InsertEpisode,
        Stmt::DeleteEpisode,
        Stmt::InsertEpisodeTime,
        Stmt::DeleteEpisodeTime,
        Stmt::InsertEntity,
        Stmt::DeleteEntity,
        Stmt::InsertEntityName,
        Stmt::DeleteEntityName,
        Stmt::InsertFact,
        Stmt::DeleteFact,
        Stmt::InsertFactEnd,
        Stmt::DeleteFactEnd,
        Stmt::InsertMention,
        Stmt::DeleteMention,
        Stmt::InsertMentionedBy,
        Stmt::DeleteMentionedBy,
        Stmt::InsertSaga,
        Stmt::InsertSagaOfEpisode,
        Stmt::DeleteSagaOfEpisode,
        Stmt::InsertCommunity,
        Stmt::DeleteCommunity,
        Stmt::InsertRecord,
        Stmt::DeleteRecord,
        Stmt::InsertBucket,
        Stmt::InsertApplied,
        Stmt::InsertGroup,
        Stmt::InsertPosition,
        Stmt::InsertTotals,
    ];

    /// The statement's text with `${ks}` still in it.
    pub(crate) fn template(self) -> &'static str {
        match self {
            Stmt::SelectEpisode => concat!(
                "SELECT ",
                episode_columns!(),
                " FROM ${ks}.episodes WHERE group_id = ? AND uuid = ?"
            ),
            Stmt::SelectEntity => concat!(
                "SELECT ",
                entity_columns!(),
                " FROM ${ks}.entities WHERE group_id = ? AND uuid = ?"
            ),
            Stmt::SelectFact => concat!(
                "SELECT ",
                fact_columns!(),
                " FROM ${ks}.facts WHERE group_id = ? AND uuid = ?"
            ),
            Stmt::SelectSaga => concat!(
                "SELECT ",
                saga_columns!(),
                " FROM ${ks}.sagas WHERE group_id = ? AND uuid = ?"
            ),
            Stmt::SelectCommunity => concat!(
                "SELECT ",
                community_columns!(),
                " FROM ${ks}.communities WHERE group_id = ? AND uuid = ?"
            ),
            Stmt::SelectEntitiesByName => {
                "SELECT uuid FROM ${ks}.entities_by_name WHERE group_id = ? AND name = ?"
            }
            Stmt::SelectFactsOfEntity => {
                "SELECT other_uuid, fact_uuid FROM ${ks}.facts_by_entity WHERE group_id = ? AND entity_uuid = ?"
            }
            Stmt::SelectFactsBetween => {
                "SELECT other_uuid, fact_uuid FROM ${ks}.facts_by_entity WHERE group_id = ? AND entity_uuid = ? AND other_uuid = ?"
            }
            Stmt::SelectMentions => {
                "SELECT entity_uuid FROM ${ks}.mentions WHERE group_id = ? AND episode_uuid = ?"
            }
            Stmt::SelectMentionedBy => {
                "SELECT episode_uuid FROM ${ks}.mentioned_by WHERE group_id = ? AND entity_uuid = ?"
            }
            Stmt::SelectSagaOfEpisode => {
                "SELECT saga_uuid FROM ${ks}.saga_of_episode WHERE group_id = ? AND episode_uuid = ?"
            }
            Stmt::SelectApplied => {
                "SELECT event_id FROM ${ks}.applied_events WHERE group_id = ? AND episode_uuid = ?"
            }
            Stmt::SelectPositions => {
                "SELECT log_partition, next_offset FROM ${ks}.positions WHERE log_name = ?"
            }
            Stmt::SelectTotals => "SELECT totals FROM ${ks}.group_totals WHERE group_id = ?",
            Stmt::SelectGroups => "SELECT group_id FROM ${ks}.groups WHERE shard = ?",
            Stmt::SelectBuckets => {
                "SELECT bucket FROM ${ks}.group_buckets WHERE group_id = ? AND kind = ?"
            }
            Stmt::SelectRecords => {
                "SELECT uuid, is_current FROM ${ks}.group_records WHERE group_id = ? AND kind = ? AND bucket = ?"
            }
            Stmt::SelectEpisodesBefore => {
                "SELECT valid_at, uuid FROM ${ks}.episodes_by_time WHERE group_id = ? AND bucket = ? AND valid_at <= ? LIMIT ?"
            }
            Stmt::SelectEpisodesAt => {
                "SELECT valid_at, uuid FROM ${ks}.episodes_by_time WHERE group_id = ? AND bucket = ? AND valid_at = ?"
            }
            Stmt::SelectEpisodesAfter => {
                "SELECT valid_at, uuid FROM ${ks}.episodes_by_time WHERE group_id = ? AND bucket = ? AND valid_at >= ? ORDER BY valid_at ASC LIMIT ?"
            }
            Stmt::InsertEpisode => concat!(
                "INSERT INTO ${ks}.episodes (",
                episode_columns!(),
                ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            Stmt::DeleteEpisode => "DELETE FROM ${ks}.episodes WHERE group_id = ? AND uuid = ?",
            Stmt::InsertEpisodeTime => {
                "INSERT INTO ${ks}.episodes_by_time (group_id, bucket, valid_at, uuid) VALUES (?, ?, ?, ?)"
            }
            Stmt::DeleteEpisodeTime => {
                "DELETE FROM ${ks}.episodes_by_time WHERE group_id = ? AND bucket = ? AND valid_at = ? AND uuid = ?"
            }
            Stmt::InsertEntity => concat!(
                "INSERT INTO ${ks}.entities (",
                entity_columns!(),
                ") VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            Stmt::DeleteEntity => "DELETE FROM ${ks}.entities WHERE group_id = ? AND uuid = ?",
            Stmt::InsertEntityName => {
                "INSERT INTO ${ks}.entities_by_name (group_id, name, uuid) VALUES (?, ?, ?)"
            }
            Stmt::DeleteEntityName => {
                "DELETE FROM ${ks}.entities_by_name WHERE group_id = ? AND name = ? AND uuid = ?"
            }
            Stmt::InsertFact => concat!(
                "INSERT INTO ${ks}.facts (",
                fact_columns!(),
                ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ),
            Stmt::DeleteFact => "DELETE FROM ${ks}.facts WHERE group_id = ? AND uuid = ?",
            Stmt::InsertFactEnd => {
                "INSERT INTO ${ks}.facts_by_entity (group_id, entity_uuid, other_uuid, fact_uuid, outgoing) VALUES (?, ?, ?, ?, ?)"
            }
            Stmt::DeleteFactEnd => {
                "DELETE FROM ${ks}.facts_by_entity WHERE group_id = ? AND entity_uuid = ? AND other_uuid = ? AND fact_uuid = ?"
            }
            Stmt::InsertMention => {
                "INSERT INTO ${ks}.mentions (group_id, episode_uuid, entity_uuid) VALUES (?, ?, ?)"
            }
            Stmt::DeleteMention => {
                "DELETE FROM ${ks}.mentions WHERE group_id = ? AND episode_uuid = ? AND entity_uuid = ?"
            }
            Stmt::InsertMentionedBy => {
                "INSERT INTO ${ks}.mentioned_by (group_id, entity_uuid, episode_uuid) VALUES (?, ?, ?)"
            }
            Stmt::DeleteMentionedBy => {
                "DELETE FROM ${ks}.mentioned_by WHERE group_id = ? AND entity_uuid = ? AND episode_uuid = ?"
            }
            Stmt::InsertSaga => concat!(
                "INSERT INTO ${ks}.sagas (",
                saga_columns!(),
                ") VALUES (?, ?, ?, ?, ?, ?, ?)"
            ),
            Stmt::InsertSagaOfEpisode => {
                "INSERT INTO ${ks}.saga_of_episode (group_id, episode_uuid, saga_uuid) VALUES (?, ?, ?)"
            }
            Stmt::DeleteSagaOfEpisode => {
                "DELETE FROM ${ks}.saga_of_episode WHERE group_id = ? AND episode_uuid = ?"
            }
            Stmt::InsertCommunity => concat!(
                "INSERT INTO ${ks}.communities (",
                community_columns!(),
                ") VALUES (?, ?, ?, ?, ?, ?, ?)"
            ),
            Stmt::DeleteCommunity => {
                "DELETE FROM ${ks}.communities WHERE group_id = ? AND uuid = ?"
            }
            Stmt::InsertRecord => {
                "INSERT INTO ${ks}.group_records (group_id, kind, bucket, uuid, is_current) VALUES (?, ?, ?, ?, ?)"
            }
            Stmt::DeleteRecord => {
                "DELETE FROM ${ks}.group_records WHERE group_id = ? AND kind = ? AND bucket = ? AND uuid = ?"
            }
            Stmt::InsertBucket => {
                "INSERT INTO ${ks}.group_buckets (group_id, kind, bucket) VALUES (?, ?, ?)"
            }
            Stmt::InsertApplied => {
                "INSERT INTO ${ks}.applied_events (group_id, episode_uuid, event_id) VALUES (?, ?, ?)"
            }
            Stmt::InsertGroup => "INSERT INTO ${ks}.groups (shard, group_id) VALUES (?, ?)",
            Stmt::InsertPosition => {
                "INSERT INTO ${ks}.positions (log_name, log_partition, next_offset) VALUES (?, ?, ?)"
            }
            Stmt::InsertTotals => "INSERT INTO ${ks}.group_totals (group_id, totals) VALUES (?, ?)",
        }
    }

    /// The statement's text for `keyspace`.
    pub(crate) fn cql(self, keyspace: &str) -> String {
        self.template().replace("${ks}", keyspace)
    }

    /// Whether the statement reads (and is paged) rather than writes.
    pub(crate) fn is_select(self) -> bool {
        self.template().starts_with("SELECT ")
    }

    /// Position in [`Stmt::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::scylla::schema::SCHEMA_TEMPLATE;

    /// A table of schema.cql: its columns, partition key and clustering columns.
    type Table = (Vec<String>, Vec<String>, Vec<String>);

    /// Every table of schema.cql by name.
    fn schema_tables() -> BTreeMap<String, Table> {
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
            let body = match body.split_once(") WITH") {
                Some((b, _)) => b,
                None => &body[..body.rfind(')').unwrap()],
            };
            let (cols, key) = body.split_once("PRIMARY KEY").unwrap();
            let columns: Vec<String> = cols
                .split(',')
                .filter_map(|c| c.split_whitespace().next())
                .map(str::to_owned)
                .collect();
            let key = key.trim().trim_start_matches('(');
            let (partition, clustering) = key.split_once(')').unwrap();
            let names = |s: &str| -> Vec<String> {
                s.split([',', '(', ')'])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            out.insert(
                name.trim().to_owned(),
                (columns, names(partition), names(clustering)),
            );
        }
        out
    }

    fn table_of(cql: &str) -> String {
        let after = cql
            .split_once("${ks}.")
            .map(|(_, r)| r)
            .expect("qualified table");
        after
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap()
            .to_owned()
    }

    /// Columns bound in a WHERE clause, in order.
    fn where_columns(cql: &str) -> Vec<String> {
        let Some((_, clause)) = cql.split_once(" WHERE ") else {
            return Vec::new();
        };
        let clause = clause.split(" LIMIT ").next().unwrap();
        clause
            .split(" AND ")
            .map(|c| c.split_whitespace().next().unwrap().to_owned())
            .collect()
    }

    fn listed_columns(cql: &str, start: &str, end: &str) -> Vec<String> {
        let (_, rest) = cql.split_once(start).unwrap();
        let (list, _) = rest.split_once(end).unwrap();
        list.split(',').map(|c| c.trim().to_owned()).collect()
    }

    #[test]
    fn every_added_column_is_in_its_table() {
        let tables = schema_tables();
        for (table, column, cql_type) in crate::scylla::schema::ADDED_COLUMNS {
            let (columns, ..) = &tables[*table];
            assert!(columns.iter().any(|c| c == column), "{table}.{column}");
            assert!(
                SCHEMA_TEMPLATE.contains(&format!("    {column} {cql_type},")),
                "{table}.{column} {cql_type}"
            );
        }
    }

    #[test]
    fn statements_are_indexed_in_declaration_order() {
        for (i, s) in Stmt::ALL.iter().enumerate() {
            assert_eq!(s.index(), i, "{s:?}");
        }
        let distinct: BTreeSet<_> = Stmt::ALL.iter().map(|s| s.template()).collect();
        assert_eq!(
            distinct.len(),
            Stmt::ALL.len(),
            "no two statements share a text"
        );
    }

    #[test]
    fn every_statement_matches_the_schema() {
        let tables = schema_tables();
        assert_eq!(
            tables.keys().cloned().collect::<BTreeSet<_>>(),
            TABLES
                .iter()
                .map(|t| t.to_string())
                .collect::<BTreeSet<_>>(),
            "TABLES lists every table of schema.cql"
        );
        for stmt in Stmt::ALL {
            let cql = stmt.template();
            let table = table_of(cql);
            let (columns, partition, clustering) = tables
                .get(&table)
                .unwrap_or_else(|| panic!("{stmt:?}: no table {table} in schema.cql"));
            let known = |c: &String| columns.contains(c);
            let wheres = where_columns(cql);
            for c in &wheres {
                assert!(known(c), "{stmt:?}: no column {c} in {table}");
            }
            // every read and delete names the whole partition key, in order
            if !cql.starts_with("INSERT") {
                assert_eq!(
                    &wheres[..partition.len()],
                    &partition[..],
                    "{stmt:?} must address whole partitions of {table}"
                );
                // and only clustering columns beyond it, as a prefix
                let rest = &wheres[partition.len()..];
                assert_eq!(rest, &clustering[..rest.len()], "{stmt:?}");
            }
            if stmt.is_select() {
                let selected = listed_columns(cql, "SELECT ", " FROM");
                for c in &selected {
                    assert!(known(c), "{stmt:?}: no column {c} in {table}");
                }
            }
            if cql.starts_with("DELETE") {
                assert_eq!(
                    wheres.len(),
                    partition.len() + clustering.len(),
                    "{stmt:?} deletes exactly one row"
                );
            }
            if cql.starts_with("INSERT") {
                let inserted = listed_columns(cql, " (", ") VALUES");
                for c in &inserted {
                    assert!(known(c), "{stmt:?}: no column {c} in {table}");
                }
                assert_eq!(
                    inserted.iter().collect::<BTreeSet<_>>(),
                    columns.iter().collect::<BTreeSet<_>>(),
                    "{stmt:?} writes whole rows of {table}"
                );
                assert_eq!(
                    cql.matches('?').count(),
                    inserted.len(),
                    "{stmt:?}: one bind marker per column"
                );
                assert!(
                    !cql.contains("IF NOT EXISTS") && !cql.contains("USING TTL"),
                    "{stmt:?}: plain idempotent upserts only"
                );
            } else {
                let limit = usize::from(cql.contains("LIMIT ?"));
                assert_eq!(cql.matches('?').count(), wheres.len() + limit, "{stmt:?}");
            }
        }
    }

    #[test]
    fn texts_for_a_keyspace() {
        assert_eq!(
            Stmt::SelectEntitiesByName.cql("chronicle"),
            "SELECT uuid FROM chronicle.entities_by_name WHERE group_id = ? AND name = ?"
        );
        assert_eq!(
            Stmt::SelectEpisodesBefore.cql("ks1"),
            "SELECT valid_at, uuid FROM ks1.episodes_by_time WHERE group_id = ? AND bucket = ? AND valid_at <= ? LIMIT ?"
        );
        assert_eq!(
            Stmt::InsertPosition.cql("ks1"),
            "INSERT INTO ks1.positions (log_name, log_partition, next_offset) VALUES (?, ?, ?)"
        );
        for s in Stmt::ALL {
            let cql = s.cql("ks_x");
            assert!(!cql.contains("${"), "{s:?}");
            assert!(cql.contains(" ks_x."), "{s:?}");
            assert_eq!(s.is_select(), cql.starts_with("SELECT"), "{s:?}");
        }
    }
}
