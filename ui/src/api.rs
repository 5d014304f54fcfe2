//! Calls to the REST API's own router, in process, as the session's key:
//! the dashboard's changes get exactly the API's validation, role checks,
//! tenant scoping, limits and audit entries, and show its error messages.
//!
//! A session keeps only its key's prefix, so a call names the key by a
//! [`SessionKey`] request extension instead of a bearer token: only code in
//! this process can attach one, and the API checks the key (revoked,
//! expired, role) exactly as it checks a bearer key.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use kairos_api::auth::SessionKey;
use serde_json::Value;
use tower::ServiceExt;

/// Largest API answer read back (lists are paged well below this).
const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// The API router, ready to be called.
#[derive(Clone)]
pub(crate) struct InProcess {
    router: Router,
}

/// A refused or failed call, as the API described it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiFailure {
    pub(crate) status: StatusCode,
    pub(crate) code: String,
    pub(crate) message: String,
    pub(crate) field: Option<String>,
}

impl ApiFailure {
    fn internal(message: impl Into<String>) -> Self {
        ApiFailure {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "internal".into(),
            message: message.into(),
            field: None,
        }
    }
}

/// `text` as one path segment of an API address: every byte but the
/// unreserved ones (RFC 3986) percent-encoded, so an id taken from the
/// dashboard's own address (`/ui/jobs/a%2Fresume%3F/action`) names that id
/// and nothing else, never another route or a query.
pub(crate) fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl InProcess {
    pub(crate) fn new(router: Router) -> Self {
        Self { router }
    }

    /// `method path` with `body` as JSON, as the key whose prefix is
    /// `key` (a session's, [`crate::session::Ctx::key`]); the JSON answer of
    /// a 2xx, otherwise the API's error.
    pub(crate) async fn call(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiFailure> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .extension(SessionKey {
                prefix: key.to_string(),
            });
        let body = match body {
            Some(v) => {
                req = req.header(header::CONTENT_TYPE, "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        let req = req
            .body(body)
            .map_err(|e| ApiFailure::internal(format!("bad request to the API: {e}")))?;
        let res = self
            .router
            .clone()
            .oneshot(req)
            .await
            .map_err(|e| ApiFailure::internal(format!("API call failed: {e}")))?;
        let status = res.status();
        let bytes = axum::body::to_bytes(res.into_body(), MAX_ANSWER)
            .await
            .map_err(|e| ApiFailure::internal(format!("cannot read the API's answer: {e}")))?;
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(json);
        }
        let err = &json["error"];
        Err(ApiFailure {
            status,
            code: err["code"].as_str().unwrap_or("error").to_string(),
            message: err["message"]
                .as_str()
                .unwrap_or("the request was refused")
                .to_string(),
            field: err["field"].as_str().map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_cannot_reach_another_route() {
        assert_eq!(segment("0193-ab_c.d~"), "0193-ab_c.d~");
        assert_eq!(segment("a/resume?x#y"), "a%2Fresume%3Fx%23y");
        assert_eq!(segment(".."), "..");
        assert_eq!(segment("é %"), "%C3%A9%20%25");
    }
}
