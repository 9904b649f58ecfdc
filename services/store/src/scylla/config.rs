//! How to reach a ScyllaDB cluster and how to talk to it: contact points,
//! keyspace, consistency, timeouts, and the replication of a new keyspace.

use std::collections::BTreeMap;
use std::time::Duration;

use scylla::statement::Consistency;

use crate::StoreError;

/// Connection and request settings of a [`super::ScyllaStore`].
#[derive(Clone, Debug)]
pub struct ScyllaConfig {
    /// `host:port` contact points; the driver discovers the rest of the cluster.
    pub contact_points: Vec<String>,
    /// The keyspace that holds chronicle's tables.
    pub keyspace: String,
    /// Consistency of every read and write (default `LOCAL_QUORUM`: a
    /// quorum write followed by a quorum read in the same datacenter sees
    /// the write, which a restarted projector relies on).
    pub consistency: Consistency,
    /// The datacenter to prefer (and whose quorum LOCAL_* consistencies
    /// mean); `None` lets the driver treat every datacenter alike.
    pub local_datacenter: Option<String>,
    /// Client-side limit of one request, retries included.
    pub request_timeout: Duration,
    /// Limit of opening a connection.
    pub connect_timeout: Duration,
    /// Limit of schema changes and truncations, which wait for every node.
    pub schema_timeout: Duration,
    /// Rows per page of a paged read.
    pub page_size: i32,
    /// Point reads in flight at once when a listing loads its records.
    pub read_concurrency: usize,
    /// User name and password, when the cluster authenticates.
    pub credentials: Option<(String, String)>,
}

impl ScyllaConfig {
    /// Settings with defaults for `contact_points` (`host:port[,host:port...]`)
    /// and `keyspace`, both validated.
    pub fn new(contact_points: &str, keyspace: &str) -> Result<Self, StoreError> {
        Ok(ScyllaConfig {
            contact_points: parse_contact_points(contact_points)?,
            keyspace: validate_keyspace(keyspace)?.to_owned(),
            consistency: Consistency::LocalQuorum,
            local_datacenter: None,
            request_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            schema_timeout: Duration::from_secs(60),
            page_size: 1000,
            read_concurrency: 64,
            credentials: None,
        })
    }

    /// Parses `scylla://HOST:PORT[,HOST:PORT...]/KEYSPACE`, the `--store` form.
    pub fn from_uri(uri: &str) -> Result<Self, StoreError> {
        let rest = uri.strip_prefix("scylla://").ok_or_else(|| {
            StoreError::Config(format!(
                "a ScyllaDB store is `scylla://HOST:PORT[,HOST:PORT]/KEYSPACE`, got `{uri}`"
            ))
        })?;
        let (nodes, keyspace) = rest
            .split_once('/')
            .ok_or_else(|| StoreError::Config(format!("`{uri}` names no keyspace (…/KEYSPACE)")))?;
        Self::new(nodes, keyspace)
    }
}

/// Splits and checks `host:port[,host:port...]` (an IPv6 host in brackets).
pub fn parse_contact_points(text: &str) -> Result<Vec<String>, StoreError> {
    let points: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    if points.is_empty() {
        return Err(StoreError::Config("no ScyllaDB contact point given".into()));
    }
    for p in &points {
        let bad = || StoreError::Config(format!("contact point `{p}` is not HOST:PORT"));
        let (host, port) = p.rsplit_once(':').ok_or_else(bad)?;
        if host.is_empty() || host == "[]" || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(bad());
        }
    }
    Ok(points)
}

/// Checks a keyspace name: a letter, then letters, digits and `_`, at most
/// 48 characters (CQL's limit), so it can be spliced into DDL unquoted.
pub fn validate_keyspace(name: &str) -> Result<&str, StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 48
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(name)
    } else {
        Err(StoreError::Config(format!(
            "keyspace `{name}` must be a letter followed by at most 47 letters, digits or `_`"
        )))
    }
}

/// Parses a consistency level by its CQL name (`LOCAL_QUORUM`, `quorum`,
/// `one`, ...); serial levels are refused because the store uses no
/// lightweight transactions.
pub fn parse_consistency(text: &str) -> Result<Consistency, StoreError> {
    let c = match text.trim().to_ascii_uppercase().replace('-', "_").as_str() {
        "ANY" => Consistency::Any,
        "ONE" => Consistency::One,
        "TWO" => Consistency::Two,
        "THREE" => Consistency::Three,
        "QUORUM" => Consistency::Quorum,
        "ALL" => Consistency::All,
        "LOCAL_QUORUM" => Consistency::LocalQuorum,
        "EACH_QUORUM" => Consistency::EachQuorum,
        "LOCAL_ONE" => Consistency::LocalOne,
        _ => {
            return Err(StoreError::Config(format!(
                "unknown consistency `{text}` (one of ANY, ONE, TWO, THREE, QUORUM, ALL, LOCAL_QUORUM, EACH_QUORUM, LOCAL_ONE)"
            )));
        }
    };
    Ok(c)
}

/// The replication of a keyspace created by the migration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replication {
    /// `NetworkTopologyStrategy` with this many replicas in every datacenter.
    Factor(u32),
    /// An explicit replication map, e.g.
    /// `{"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 2}`.
    Map(BTreeMap<String, String>),
}

impl Default for Replication {
    fn default() -> Self {
        Replication::Factor(3)
    }
}

impl Replication {
    /// Parses a JSON object of strings and non-negative integers that names
    /// a `class`. Keys and values are limited to `[A-Za-z0-9_.-]` because
    /// they are spliced into the DDL.
    pub fn from_json(text: &str) -> Result<Self, StoreError> {
        let bad = |why: String| StoreError::Config(format!("--replication {text}: {why}"));
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
        let object = value
            .as_object()
            .ok_or_else(|| bad("not a JSON object".into()))?;
        let mut map = BTreeMap::new();
        for (k, v) in object {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) if n.as_u64().is_some() => n.to_string(),
                _ => return Err(bad(format!("`{k}` must be a string or an integer"))),
            };
            let safe = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
            };
            if !safe(k) || !safe(&v) {
                return Err(bad(format!(
                    "`{k}: {v}` may hold only letters, digits, `_`, `.` and `-`"
                )));
            }
            map.insert(k.clone(), v);
        }
        if !map.contains_key("class") {
            return Err(bad("names no `class`".into()));
        }
        Ok(Replication::Map(map))
    }

    /// The CQL map literal of `WITH replication = ...`.
    pub fn to_cql(&self) -> String {
        match self {
            Replication::Factor(n) => {
                format!("{{'class': 'NetworkTopologyStrategy', 'replication_factor': '{n}'}}")
            }
            Replication::Map(map) => {
                let entries: Vec<String> =
                    map.iter().map(|(k, v)| format!("'{k}': '{v}'")).collect();
                format!("{{{}}}", entries.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_and_contact_points() {
        let c = ScyllaConfig::from_uri("scylla://10.0.0.1:9042,db2:19042/chronicle").unwrap();
        assert_eq!(c.contact_points, vec!["10.0.0.1:9042", "db2:19042"]);
        assert_eq!(c.keyspace, "chronicle");
        assert_eq!(c.consistency, Consistency::LocalQuorum);
        assert_eq!(
            parse_contact_points("[::1]:9042").unwrap(),
            vec!["[::1]:9042"]
        );
        for bad in [
            "scylla://h:9042/",
            "scylla://h:9042",
            "scylla:///ks",
            "scylla://h/ks",
            "scylla://h:0/ks",
            "scylla://h:99999/ks",
            "scylla://:9042/ks",
            "scylla://h:9042/bad-name",
            "scylla://h:9042/1ks",
            "kafka://h:9042/ks",
        ] {
            assert!(
                matches!(ScyllaConfig::from_uri(bad), Err(StoreError::Config(_))),
                "{bad}"
            );
        }
        assert!(validate_keyspace(&"k".repeat(48)).is_ok());
        assert!(validate_keyspace(&"k".repeat(49)).is_err());
    }

    #[test]
    fn consistency_names() {
        assert_eq!(
            parse_consistency("LOCAL_QUORUM").unwrap(),
            Consistency::LocalQuorum
        );
        assert_eq!(
            parse_consistency("local-quorum").unwrap(),
            Consistency::LocalQuorum
        );
        assert_eq!(parse_consistency(" quorum ").unwrap(), Consistency::Quorum);
        assert_eq!(parse_consistency("one").unwrap(), Consistency::One);
        assert_eq!(
            parse_consistency("LOCAL_ONE").unwrap(),
            Consistency::LocalOne
        );
        assert_eq!(
            parse_consistency("EACH_QUORUM").unwrap(),
            Consistency::EachQuorum
        );
        let err = parse_consistency("SERIAL").unwrap_err().to_string();
        assert!(
            err.contains("SERIAL") && err.contains("LOCAL_QUORUM"),
            "{err}"
        );
        assert!(parse_consistency("strong").is_err());
    }

    #[test]
    fn replication_literals() {
        assert_eq!(
            Replication::Factor(1).to_cql(),
            "{'class': 'NetworkTopologyStrategy', 'replication_factor': '1'}"
        );
        let r = Replication::from_json(r#"{"class":"NetworkTopologyStrategy","dc1":3,"dc-2":"2"}"#)
            .unwrap();
        assert_eq!(
            r.to_cql(),
            "{'class': 'NetworkTopologyStrategy', 'dc-2': '2', 'dc1': '3'}"
        );
        for bad in [
            "[]",
            "{}",
            r#"{"dc1": 3}"#,
            r#"{"class": "x', 'y': 'z"}"#,
            r#"{"class": "SimpleStrategy", "replication_factor": -1}"#,
            r#"{"class": "SimpleStrategy", "replication_factor": 1.5}"#,
            "not json",
        ] {
            assert!(
                matches!(Replication::from_json(bad), Err(StoreError::Config(_))),
                "{bad}"
            );
        }
    }
}
