//! Driver errors as [`StoreError`]s: what kind of failure it was (the
//! caller's retry decision depends on it) and what the store was doing,
//! with the driver's error kept as the cause.

use scylla::errors::{
    DbError, ExecutionError, IntoRowsResultError, MaybeFirstRowError, NewSessionError,
    NextPageError, NextRowError, PagerExecutionError, PrepareError, RequestAttemptError,
    RequestError, SchemaAgreementError, TypeCheckError,
};

use crate::StoreError;

/// How a failure should be reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Unavailable,
    ReplicaTimeout,
    Rejected,
    Other,
}

fn make(
    class: Class,
    op: &'static str,
    e: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    let source = Box::new(e);
    match class {
        Class::Unavailable => StoreError::Unavailable { op, source },
        Class::ReplicaTimeout => StoreError::ReplicaTimeout { op, source },
        Class::Rejected => StoreError::Rejected { op, source },
        Class::Other => StoreError::Request { op, source },
    }
}

fn db_class(e: &DbError) -> Class {
    match e {
        DbError::Unavailable { .. }
        | DbError::Overloaded
        | DbError::IsBootstrapping
        | DbError::RateLimitReached { .. }
        | DbError::ReadFailure { .. }
        | DbError::WriteFailure { .. }
        | DbError::TruncateError => Class::Unavailable,
        DbError::ReadTimeout { .. } | DbError::WriteTimeout { .. } => Class::ReplicaTimeout,
        DbError::SyntaxError
        | DbError::Invalid
        | DbError::AlreadyExists { .. }
        | DbError::FunctionFailure { .. }
        | DbError::AuthenticationError
        | DbError::Unauthorized
        | DbError::ConfigError
        | DbError::ProtocolError => Class::Rejected,
        _ => Class::Other,
    }
}

fn attempt_class(e: &RequestAttemptError) -> Class {
    match e {
        RequestAttemptError::DbError(db, _) => db_class(db),
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => Class::Unavailable,
        RequestAttemptError::SerializationError(_)
        | RequestAttemptError::CqlRequestSerialization(_) => Class::Rejected,
        _ => Class::Other,
    }
}

fn prepare_class(e: &PrepareError) -> Class {
    match e {
        PrepareError::ConnectionPoolError(_) => Class::Unavailable,
        PrepareError::AllAttemptsFailed { first_attempt } => attempt_class(first_attempt),
        _ => Class::Other,
    }
}

/// A failed request.
pub(crate) fn execution(op: &'static str, e: ExecutionError) -> StoreError {
    let class = match &e {
        ExecutionError::RequestTimeout(d) => return StoreError::Timeout(*d),
        ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => Class::Unavailable,
        ExecutionError::LastAttemptError(a) => attempt_class(a),
        ExecutionError::PrepareError(p) => prepare_class(p),
        ExecutionError::BadQuery(_) => Class::Rejected,
        ExecutionError::SchemaAgreementError(_) => Class::ReplicaTimeout,
        _ => Class::Other,
    };
    make(class, op, e)
}

/// A statement that could not be prepared.
pub(crate) fn prepare(op: &'static str, e: PrepareError) -> StoreError {
    make(prepare_class(&e), op, e)
}

fn request_class(e: &RequestError) -> Class {
    match e {
        RequestError::EmptyPlan | RequestError::ConnectionPoolError(_) => Class::Unavailable,
        RequestError::LastAttemptError(a) => attempt_class(a),
        _ => Class::Other,
    }
}

fn next_page(op: &'static str, e: NextPageError) -> StoreError {
    let class = match &e {
        NextPageError::RequestFailure(r) => {
            if let RequestError::RequestTimeout(d) = r {
                return StoreError::Timeout(*d);
            }
            request_class(r)
        }
        NextPageError::TypeCheckError(t) => return type_check(op, t),
        NextPageError::PartitionKeyError(_) => Class::Rejected,
        _ => Class::Other,
    };
    make(class, op, e)
}

/// A paged read that could not start.
pub(crate) fn pager(op: &'static str, e: PagerExecutionError) -> StoreError {
    match e {
        PagerExecutionError::PrepareError(p) => prepare(op, p),
        PagerExecutionError::NextPageError(n) => next_page(op, n),
        PagerExecutionError::SerializationError(_) => make(Class::Rejected, op, e),
        other => make(Class::Other, op, other),
    }
}

/// A paged read that failed midway.
pub(crate) fn next_row(op: &'static str, e: NextRowError) -> StoreError {
    match e {
        NextRowError::NextPageError(n) => next_page(op, n),
        NextRowError::RowDeserializationError(d) => StoreError::Corrupt(format!("while {op}: {d}")),
        other => make(Class::Other, op, other),
    }
}

/// Columns whose types differ from what the store reads: the table was
/// created by another schema version.
pub(crate) fn type_check(op: &'static str, e: &TypeCheckError) -> StoreError {
    StoreError::Corrupt(format!(
        "while {op}: the table's columns do not match chronicle's schema ({e})"
    ))
}

/// A result that is not the rows the store asked for.
pub(crate) fn rows_result(op: &'static str, e: IntoRowsResultError) -> StoreError {
    StoreError::Corrupt(format!("while {op}: {e}"))
}

/// A row that does not decode.
pub(crate) fn first_row(op: &'static str, e: MaybeFirstRowError) -> StoreError {
    StoreError::Corrupt(format!("while {op}: {e}"))
}

/// A session that could not be opened.
pub(crate) fn new_session(e: NewSessionError) -> StoreError {
    let op = "connecting to the cluster";
    match &e {
        NewSessionError::EmptyKnownNodesList | NewSessionError::IllegalConfig(_) => {
            StoreError::Config(e.to_string())
        }
        NewSessionError::UseKeyspaceError(_) => make(Class::Rejected, op, e),
        _ => make(Class::Unavailable, op, e),
    }
}

/// Schema changes that did not reach every node in time.
pub(crate) fn schema_agreement(op: &'static str, e: SchemaAgreementError) -> StoreError {
    match e {
        SchemaAgreementError::Timeout(d) => StoreError::Timeout(d),
        other => make(Class::ReplicaTimeout, op, other),
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::time::Duration;

    use scylla::errors::{BadQuery, BrokenConnectionErrorKind, WriteType};
    use scylla::statement::Consistency;

    use super::*;

    fn db(e: DbError) -> ExecutionError {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(e, "from the node".into()))
    }

    #[test]
    fn client_timeouts_keep_their_duration() {
        let e = execution(
            "reading",
            ExecutionError::RequestTimeout(Duration::from_millis(1500)),
        );
        assert!(matches!(e, StoreError::Timeout(d) if d == Duration::from_millis(1500)));
        assert_eq!(e.to_string(), "database request timed out after 1.5s");
        let e = next_page(
            "paging",
            NextPageError::RequestFailure(RequestError::RequestTimeout(Duration::from_secs(2))),
        );
        assert!(matches!(e, StoreError::Timeout(_)));
    }

    #[test]
    fn node_errors_by_kind() {
        let unavailable = execution(
            "applying a record",
            db(DbError::Unavailable {
                consistency: Consistency::LocalQuorum,
                required: 2,
                alive: 1,
            }),
        );
        assert!(
            matches!(
                unavailable,
                StoreError::Unavailable {
                    op: "applying a record",
                    ..
                }
            ),
            "{unavailable:?}"
        );
        assert_eq!(
            unavailable.to_string(),
            "database unavailable while applying a record"
        );
        let cause = unavailable
            .source()
            .expect("the driver error is the cause")
            .to_string();
        assert!(
            cause.contains("required: 2") && cause.contains("alive: 1"),
            "{cause}"
        );

        for overloaded in [DbError::Overloaded, DbError::IsBootstrapping] {
            assert!(matches!(
                execution("x", db(overloaded)),
                StoreError::Unavailable { .. }
            ));
        }
        let timeout = execution(
            "applying a record",
            db(DbError::WriteTimeout {
                consistency: Consistency::LocalQuorum,
                received: 1,
                required: 2,
                write_type: WriteType::BatchLog,
            }),
        );
        assert!(matches!(timeout, StoreError::ReplicaTimeout { .. }));
        assert!(matches!(
            execution(
                "x",
                db(DbError::ReadTimeout {
                    consistency: Consistency::One,
                    received: 0,
                    required: 1,
                    data_present: false
                })
            ),
            StoreError::ReplicaTimeout { .. }
        ));
        for rejected in [
            DbError::SyntaxError,
            DbError::Invalid,
            DbError::Unauthorized,
            DbError::ConfigError,
        ] {
            assert!(matches!(
                execution("x", db(rejected)),
                StoreError::Rejected { .. }
            ));
        }
        assert!(matches!(
            execution("x", db(DbError::ServerError)),
            StoreError::Request { .. }
        ));
    }

    #[test]
    fn connection_problems_are_unavailable() {
        assert!(matches!(
            execution("x", ExecutionError::EmptyPlan),
            StoreError::Unavailable { .. }
        ));
        let broken = RequestAttemptError::BrokenConnectionError(
            BrokenConnectionErrorKind::ChannelError.into(),
        );
        assert!(matches!(
            execution("x", ExecutionError::LastAttemptError(broken.clone())),
            StoreError::Unavailable { .. }
        ));
        assert!(matches!(
            prepare(
                "preparing statements",
                PrepareError::AllAttemptsFailed {
                    first_attempt: broken
                }
            ),
            StoreError::Unavailable { .. }
        ));
        assert!(matches!(
            execution(
                "x",
                ExecutionError::BadQuery(BadQuery::TooManyQueriesInBatchStatement(70_000))
            ),
            StoreError::Rejected { .. }
        ));
    }

    #[test]
    fn session_errors() {
        assert!(matches!(
            new_session(NewSessionError::EmptyKnownNodesList),
            StoreError::Config(_)
        ));
        assert!(matches!(
            new_session(NewSessionError::FailedToResolveAnyHostname(vec![
                "nowhere:9042".into()
            ])),
            StoreError::Unavailable { .. }
        ));
        assert!(matches!(
            schema_agreement(
                "migrating",
                SchemaAgreementError::Timeout(Duration::from_secs(60))
            ),
            StoreError::Timeout(_)
        ));
    }
}
