//! The one error type of the API and its JSON shape,
//! `{"error":{"code":"…","message":"…","field":"…"}}`.
//!
//! Every failure a handler or extractor can meet ends up here, so no response
//! leaves the API as axum's default plain-text rejection.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kairos_core::store::StoreError;
use serde::Serialize;
use utoipa::ToSchema;

/// Every way a request can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `invalid_json`: the body is not well-formed JSON.
    #[error("{0}")]
    InvalidJson(String),
    /// 422 `missing_field`: a required field is absent.
    #[error("missing required field `{0}`")]
    MissingField(String),
    /// 422 `unknown_field`: the body has a field this endpoint does not know.
    #[error("{message}")]
    UnknownField {
        /// The unknown field.
        field: String,
        /// Which fields are accepted.
        message: String,
    },
    /// 422 `invalid_field`: a field (or query parameter) has the wrong type or value.
    #[error("{message}")]
    InvalidField {
        /// The field's name as the caller sent it.
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// 422 `invalid_cron`: the cron expression does not parse or never fires.
    #[error("{0}")]
    InvalidCron(String),
    /// 422 `unknown_timezone`: the time zone is not an IANA name.
    #[error("{0}")]
    UnknownTimezone(String),
    /// 422 `invalid_url`: the callback URL is not an absolute http(s) URL with a host.
    #[error("{0}")]
    InvalidUrl(String),
    /// 413 `payload_too_large`: the body or `params` exceeds its limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415 `unsupported_media_type`: the body is not declared as JSON.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 404 `not_found`: no such route, job or execution.
    #[error("{0}")]
    NotFound(String),
    /// 405 `method_not_allowed`: the route exists but not with this method.
    #[error("method not allowed on this route")]
    MethodNotAllowed,
    /// 409 `idempotency_conflict`: the `clientRequestId` was used for a different request.
    #[error("{0}")]
    IdempotencyConflict(String),
    /// 409 `invalid_state`: the job's current status does not allow the request.
    #[error("{0}")]
    InvalidState(String),
    /// 409 `version_conflict`: the job changed since the caller read the
    /// `version` it sent.
    #[error("{0}")]
    VersionConflict(String),
    /// 401 `unauthorized`: no usable API key (missing, malformed, unknown,
    /// expired or revoked); sent with `WWW-Authenticate: Bearer`.
    #[error("{0}")]
    Unauthorized(String),
    /// 403 `forbidden`: the key's role does not allow the request.
    #[error("{0}")]
    Forbidden(String),
    /// 409 `already_exists`: a tenant with that id exists.
    #[error("{0}")]
    AlreadyExists(String),
    /// 429 `rate_limited`: the key created jobs (or triggered, resumed,
    /// redelivered) faster than its tenant's rate, or its client address
    /// failed to authenticate too often; `Retry-After` says when to try again.
    #[error("{message}")]
    RateLimited {
        /// Whole seconds until a create is allowed again (at least 1).
        retry_after_secs: u64,
        /// Explanation.
        message: String,
    },
    /// 429 `batch_exceeds_burst`: a batch creates more jobs than the key's
    /// create burst, so it could never pass; split it into batches of at most
    /// `burst`. `Retry-After` says when a full bucket is back.
    #[error(
        "this batch creates more jobs than this key's create burst of {burst}, so it can \
         never pass; split it into batches of at most {burst} jobs"
    )]
    BatchExceedsBurst {
        /// The key's create burst: the largest batch that can pass.
        burst: u32,
        /// Whole seconds until a batch of `burst` jobs could pass.
        retry_after_secs: u64,
    },
    /// 429 `live_job_limit`: the tenant holds as many non-terminal jobs as it may.
    #[error("{0}")]
    LiveJobLimit(String),
    /// 422 `invalid_workflow`: the nodes and edges are no valid DAG (a
    /// cycle, an unknown or duplicate node id, too many nodes); the body
    /// names the offending node in `node` and the problem in `reason`.
    #[error("{message}")]
    InvalidWorkflow {
        /// The node the problem is about, if one.
        node: Option<String>,
        /// Machine-readable problem, e.g. `cycle`, `unknown_node`.
        reason: &'static str,
        /// Explanation.
        message: String,
    },
    /// 503 `unavailable`: a dependency (the database) cannot be reached.
    #[error("{0}")]
    Unavailable(String),
    /// 500 `internal`: anything else; details are logged, never returned.
    #[error("internal error")]
    Internal,
}

impl ApiError {
    /// HTTP status of the variant.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidJson(_) => StatusCode::BAD_REQUEST,
            ApiError::MissingField(_)
            | ApiError::UnknownField { .. }
            | ApiError::InvalidField { .. }
            | ApiError::InvalidCron(_)
            | ApiError::UnknownTimezone(_)
            | ApiError::InvalidUrl(_)
            | ApiError::InvalidWorkflow { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::IdempotencyConflict(_)
            | ApiError::InvalidState(_)
            | ApiError::VersionConflict(_) => StatusCode::CONFLICT,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::AlreadyExists(_) => StatusCode::CONFLICT,
            ApiError::RateLimited { .. }
            | ApiError::BatchExceedsBurst { .. }
            | ApiError::LiveJobLimit(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Stable machine-readable code of the variant.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidJson(_) => "invalid_json",
            ApiError::MissingField(_) => "missing_field",
            ApiError::UnknownField { .. } => "unknown_field",
            ApiError::InvalidField { .. } => "invalid_field",
            ApiError::InvalidCron(_) => "invalid_cron",
            ApiError::UnknownTimezone(_) => "unknown_timezone",
            ApiError::InvalidUrl(_) => "invalid_url",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::UnsupportedMediaType(_) => "unsupported_media_type",
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::IdempotencyConflict(_) => "idempotency_conflict",
            ApiError::InvalidState(_) => "invalid_state",
            ApiError::VersionConflict(_) => "version_conflict",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::AlreadyExists(_) => "already_exists",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::BatchExceedsBurst { .. } => "batch_exceeds_burst",
            ApiError::LiveJobLimit(_) => "live_job_limit",
            ApiError::InvalidWorkflow { .. } => "invalid_workflow",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Internal => "internal",
        }
    }

    /// The request field the error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::MissingField(f) => Some(f),
            ApiError::UnknownField { field, .. } | ApiError::InvalidField { field, .. } => {
                Some(field)
            }
            ApiError::InvalidCron(_) => Some("cronExpr"),
            ApiError::UnknownTimezone(_) => Some("timezone"),
            ApiError::InvalidUrl(_) => Some("callbackUrl"),
            ApiError::BatchExceedsBurst { .. } => Some("jobs"),
            ApiError::InvalidWorkflow { .. } => Some("nodes"),
            _ => None,
        }
    }

    /// Shorthand for [`ApiError::InvalidField`].
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        ApiError::InvalidField {
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// Maps a storage failure, logging what the caller will not see.
    pub fn from_store(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(reason) => {
                tracing::warn!(%reason, "database unavailable");
                ApiError::Unavailable("the database is unavailable; retry later".into())
            }
            other => {
                tracing::error!(error = %other, "storage error");
                ApiError::Internal
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        ApiError::from_store(err)
    }
}

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// Code, human-readable message and, for input errors, the offending field.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code, e.g. `invalid_field`, `not_found`.
    #[schema(example = "invalid_field")]
    pub code: String,
    /// Explanation for a human.
    pub message: String,
    /// The request field the error is about, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `invalid_workflow` only: the offending node's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `invalid_workflow` only: what is wrong with the graph (`cycle`,
    /// `unknown_node`, `duplicate_node`, `duplicate_edge`,
    /// `invalid_node_id`, `too_many_nodes`, `empty`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl From<&ApiError> for ErrorBody {
    fn from(err: &ApiError) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code: err.code().to_string(),
                message: err.to_string(),
                field: err.field().map(str::to_string),
                node: match err {
                    ApiError::InvalidWorkflow { node, .. } => node.clone(),
                    _ => None,
                },
                reason: match err {
                    ApiError::InvalidWorkflow { reason, .. } => Some(reason.to_string()),
                    _ => None,
                },
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status(), Json(ErrorBody::from(&self))).into_response();
        match &self {
            ApiError::Unauthorized(_) => {
                res.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"kairos\""),
                );
            }
            ApiError::RateLimited {
                retry_after_secs, ..
            }
            | ApiError::BatchExceedsBurst {
                retry_after_secs, ..
            } => {
                res.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            _ => {}
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_details_are_hidden() {
        let err = ApiError::from_store(StoreError::Corrupt {
            table: "jobs",
            reason: "secret detail".into(),
        });
        assert_eq!(err.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!ErrorBody::from(&err).error.message.contains("secret"));
    }

    #[test]
    fn unavailable_database_is_503() {
        let err = ApiError::from_store(StoreError::Unavailable("refused".into()));
        assert_eq!(err.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(err.code(), "unavailable");
    }
}
