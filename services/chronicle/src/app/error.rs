//! The one error shape of the API: `{"error": "...", "field": "..."}` with a
//! status code. Client mistakes are 4xx and name the field; server faults
//! are 5xx, logged, and never echo internals to the caller.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::gateway::InputError;
use crate::node::NotInRole;
use chronicle_query::QueryError;

/// An API error response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The status code.
    pub status: StatusCode,
    /// What went wrong, in words the caller can act on.
    pub error: String,
    /// The offending field (a JSON path such as `episodes[2].content`, a
    /// query parameter, a path segment), when one is to blame.
    pub field: Option<String>,
}

/// The JSON body of an error.
#[derive(Serialize, schemars::JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody<'a> {
    /// What is wrong and what to do.
    error: &'a str,
    /// The field to fix: a JSON path (`episodes[2].content`), a query
    /// parameter or a path segment.
    field: Option<&'a str>,
}

impl ApiError {
    /// An error with a status and no field.
    pub fn new(status: StatusCode, error: impl Into<String>) -> Self {
        ApiError {
            status,
            error: error.into(),
            field: None,
        }
    }

    /// 400 about a field.
    pub fn bad_request(field: impl Into<String>, error: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            error: error.into(),
            field: Some(field.into()),
        }
    }

    /// 404: nothing with this id in the group.
    pub fn not_found(field: impl Into<String>, error: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::NOT_FOUND,
            error: error.into(),
            field: Some(field.into()),
        }
    }

    /// 408: the body did not arrive within the deadline (a slow client).
    pub fn body_timeout(deadline: std::time::Duration) -> Self {
        ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            error: format!(
                "the body did not arrive within {} ms; send it at once",
                deadline.as_millis()
            ),
            field: Some("body".into()),
        }
    }

    /// 413: the body is over `--max-body-bytes`.
    pub fn body_too_large() -> Self {
        ApiError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            error: "body is larger than this server accepts (--max-body-bytes); split the batch"
                .into(),
            field: Some("body".into()),
        }
    }

    /// 401: no known bearer token.
    pub fn unauthorized(error: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, error)
    }

    /// 403: the token does not cover this group or this access.
    pub fn forbidden(error: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::FORBIDDEN,
            error: error.into(),
            field: Some("group_id".into()),
        }
    }

    /// 500: logged with its causes; the caller sees only that it failed.
    pub fn internal(context: &str, cause: &dyn std::error::Error) -> Self {
        tracing::error!(context, error = %Causes(cause), "request failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{context} failed on the server; see the server log"),
        )
    }

    /// 500 for a broken expectation of the server itself, with no error
    /// value behind it.
    pub fn broken(context: &str, what: &str) -> Self {
        tracing::error!(context, error = what, "request failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{context} failed on the server; see the server log"),
        )
    }

    /// 503: a dependency (the log, the store) did not answer; retry later.
    pub fn unavailable(context: &str, cause: &dyn std::error::Error) -> Self {
        tracing::warn!(context, error = %Causes(cause), "dependency unavailable");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{context} is unavailable right now; retry later"),
        )
    }
}

/// 429: the token spent its request budget; `Retry-After` says when to
/// come back (whole seconds, at least one).
pub fn rate_limited(wait: std::time::Duration) -> Response {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let mut response = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        format!("this token's request rate is exceeded; retry in {seconds} s"),
    )
    .into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_str(&seconds.to_string()).expect("digits are a header value"),
    );
    response
}

/// A request reached a role that does not serve it (a routing mistake of
/// the deployment): 503, so a client retries against the right process.
impl From<NotInRole> for ApiError {
    fn from(e: NotInRole) -> Self {
        tracing::error!(error = %e, "request reached a role that does not serve it");
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{e}: send this request to a node that serves it"),
        )
    }
}

impl From<InputError> for ApiError {
    fn from(e: InputError) -> Self {
        ApiError::bad_request(e.field, e.message)
    }
}

impl ApiError {
    /// A query error: the caller's fault (4xx, naming `field`) or the server's.
    pub fn from_query(e: QueryError, field: &str) -> Self {
        if e.is_client_error() {
            ApiError::bad_request(field, e.to_string())
        } else {
            ApiError::internal("the query", &e)
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: &self.error,
            field: self.field.as_deref(),
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// An error and its sources, `a: b: c`, for the server log.
struct Causes<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for Causes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            write!(f, ": {c}")?;
            cause = c.source();
        }
        Ok(())
    }
}
