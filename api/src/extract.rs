//! Extractors whose rejections are [`ApiError`]s: a JSON body that names the
//! offending field, and query/path wrappers, so axum's plain-text rejections
//! never reach a caller.

use crate::AppState;
use crate::error::ApiError;
use crate::validate::storable;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, RawPathParams, Request};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

/// A JSON request body. Requires a JSON `Content-Type` (415), stays under
/// [`crate::ApiConfig::max_body_bytes`] (413), is well-formed (400) and matches
/// `T` (422 naming the field).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        require_json(req.headers())?;
        let bytes = read_body(req, state).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// [`ApiJson`] for a body whose items are each parsed and checked later with
/// `parse_json` (the batch): text the databases cannot store fails the
/// item holding it, not the whole body.
#[derive(Debug)]
pub struct ApiJsonItems<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for ApiJsonItems<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        require_json(req.headers())?;
        let bytes = read_body(req, state).await?;
        parse_json_unchecked(&bytes).map(ApiJsonItems)
    }
}

async fn read_body(req: Request, state: &AppState) -> Result<Bytes, ApiError> {
    // Read here rather than by axum's `Bytes`, whose early 413 on a long
    // body loses the answer to a connection reset (see `crate::body`).
    let (parts, body) = req.into_parts();
    crate::body::read_capped(&parts.headers, body, state.config.max_body_bytes)
        .await
        .map_err(|e| match e {
            crate::body::BodyError::TooLarge(_) => ApiError::PayloadTooLarge(e.to_string()),
            crate::body::BodyError::Read(_) => ApiError::InvalidJson(e.to_string()),
        })
}

/// An optional JSON body: `None` when the request has none (only
/// whitespace, or JSON `null`) or does not declare JSON — routes that took no body before
/// keep ignoring whatever clients sent them; a body declared as JSON is
/// checked exactly as [`ApiJson`] checks it.
#[derive(Debug)]
pub struct MaybeJson<T>(pub Option<T>);

impl<T: DeserializeOwned> FromRequest<AppState> for MaybeJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let headers = req.headers().clone();
        let bytes = read_body(req, state).await?;
        // JSON `null` is "no body" too: clients that always send a JSON body
        // (kairos-client posts `null` to bodiless routes) keep working.
        let text = String::from_utf8_lossy(&bytes);
        let blank = matches!(text.trim(), "" | "null");
        if blank || require_json(&headers).is_err() {
            return Ok(MaybeJson(None));
        }
        parse_json(&bytes).map(|v| MaybeJson(Some(v)))
    }
}

fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Err(ApiError::UnsupportedMediaType(
            "missing Content-Type header; send `Content-Type: application/json`".into(),
        ));
    };
    let essence = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let is_json = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if is_json {
        Ok(())
    } else {
        Err(ApiError::UnsupportedMediaType(format!(
            "Content-Type {essence:?} is not supported; send `Content-Type: application/json`"
        )))
    }
}

/// Parses `bytes` as one JSON object of type `T`, classifying failures, and
/// refuses text the databases cannot store (a NUL) wherever it is.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value = parse_json_unchecked(bytes)?;
    storable::json_document(bytes)?;
    Ok(value)
}

/// [`parse_json`] without the check of the text.
fn parse_json_unchecked<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // serde also builds a struct from a JSON array (fields by position);
    // a body must be an object, so anything else is refused up front.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Err(e) => ApiError::InvalidJson(format!("malformed JSON: {e}")),
                Ok(_) => ApiError::invalid("body", "the body must be a JSON object"),
            },
        );
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        // A type error can surface before a syntax error further on; the
        // document as a whole being malformed is the more basic complaint.
        match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            Err(syntax) => ApiError::InvalidJson(format!("malformed JSON: {syntax}")),
            Ok(_) => classify(e),
        }
    })?;
    de.end()
        .map_err(|e| ApiError::InvalidJson(format!("malformed JSON: {e}")))?;
    Ok(value)
}

fn classify(err: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = err.path().to_string();
    let inner = err.into_inner();
    if inner.classify() != Category::Data {
        return ApiError::InvalidJson(format!("malformed JSON: {inner}"));
    }
    // Request numbers are i64 so that range errors can name the field; the
    // caller should not have to know that.
    let message = inner
        .to_string()
        .replace("expected i64", "expected an integer");
    // For these two serde names the field only inside its message; lift the
    // name out so callers get it as `field`.
    if let Some(name) = quoted_after(&message, "missing field `") {
        return ApiError::MissingField(join_path(&path, name));
    }
    if let Some(name) = quoted_after(&message, "unknown field `") {
        return ApiError::UnknownField {
            field: join_path(&path, name),
            message: message
                .split(" at line ")
                .next()
                .unwrap_or(&message)
                .to_string(),
        };
    }
    ApiError::invalid(&path, format!("{path}: {message}"))
}

fn quoted_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    rest.split('`').next()
}

/// `path.name`, unless `path` already ends at `name` (serde_path_to_error
/// records an unknown key in the path, but not a missing one).
fn join_path(path: &str, name: &str) -> String {
    if path == "." || path.is_empty() {
        name.to_string()
    } else if path == name || path.ends_with(&format!(".{name}")) {
        path.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Query parameters; a string that does not decode (or holds a NUL) is a 422.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default().as_bytes();
        for (name, value) in url::form_urlencoded::parse(query) {
            storable::text(&name, &name)?;
            storable::text(&name, &value)?;
        }
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| ApiQuery(v))
            .map_err(|rej| ApiError::invalid("query", rej.body_text()))
    }
}

/// Path parameters; a segment that does not decode names no resource (404),
/// one holding a NUL is a 422 naming the parameter.
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if let Ok(raw) = RawPathParams::from_request_parts(parts, state).await {
            for (name, value) in &raw {
                storable::text(name, value)?;
            }
        }
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(v)) => Ok(ApiPath(v)),
            Err(rej) => {
                tracing::debug!(rejection = %rej.body_text(), "undecodable path");
                Err(ApiError::NotFound("no such resource".into()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Probe {
        job_name: String,
        max_attempts: Option<i64>,
    }

    #[test]
    fn failures_are_classified_and_name_the_field() {
        let e = parse_json::<Probe>(b"{\"jobName\":").unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        let e = parse_json::<Probe>(b"{}").unwrap_err();
        assert_eq!((e.code(), e.field()), ("missing_field", Some("jobName")));
        let e = parse_json::<Probe>(b"{\"jobName\":\"a\",\"nope\":1}").unwrap_err();
        assert_eq!((e.code(), e.field()), ("unknown_field", Some("nope")));
        let e = parse_json::<Probe>(b"{\"jobName\":\"a\",\"maxAttempts\":\"x\"}").unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            ("invalid_field", Some("maxAttempts"))
        );
        let e = parse_json::<Probe>(b"[1]").unwrap_err();
        assert_eq!((e.code(), e.field()), ("invalid_field", Some("body")));
        let e = parse_json::<Probe>(b"{} {}").unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        let e = parse_json::<Probe>(b"").unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        let e = parse_json::<Probe>(b"{\"jobName\":\"a\"} trailing").unwrap_err();
        assert_eq!(e.code(), "invalid_json");
    }

    #[test]
    fn json_content_types_are_recognised() {
        let mut h = HeaderMap::new();
        assert!(require_json(&h).is_err());
        h.insert(
            CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(require_json(&h).is_ok());
        h.insert(
            CONTENT_TYPE,
            "application/merge-patch+json".parse().unwrap(),
        );
        assert!(require_json(&h).is_ok());
        h.insert(CONTENT_TYPE, "text/plain".parse().unwrap());
        assert_eq!(
            require_json(&h).unwrap_err().code(),
            "unsupported_media_type"
        );
    }
}
