//! Reading a request body under the size limit so that an oversized one
//! still gets its `413`.
//!
//! Answering `413` as soon as the limit is passed and closing the connection
//! while the client is still sending makes the kernel reset it, and most
//! clients (Python's urllib, many SDKs) then report a broken pipe instead of
//! the answer. So the rest of an oversized body is read and thrown away, up
//! to [`DRAIN_MAX_BYTES`] and as long as the client keeps sending (a pause
//! of [`DRAIN_IDLE`] ends it), before the `413` goes out. A client that
//! asked `Expect: 100-continue` has sent nothing yet and gets the `413` at
//! once, as does a body declared larger than the drain bound.

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::http::header::{CONTENT_LENGTH, EXPECT};
use futures::StreamExt;
use std::time::Duration;

/// Most bytes of an oversized body read (and discarded) before answering.
pub(crate) const DRAIN_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// A pause this long while draining ends the drain.
pub(crate) const DRAIN_IDLE: Duration = Duration::from_secs(10);

/// Why a body could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// Longer than the limit.
    #[error("request body exceeds the limit of {0} bytes")]
    TooLarge(usize),
    /// The connection failed while reading.
    #[error("cannot read the request body: {0}")]
    Read(String),
}

/// The declared `Content-Length`, if any.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the client waits for `100 Continue` before sending the body.
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get(EXPECT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
}

/// The whole body if it holds at most `max` bytes; otherwise
/// [`BodyError::TooLarge`], after draining what the client still sends
/// (see the module's documentation).
pub(crate) async fn read_capped(
    headers: &HeaderMap,
    body: Body,
    max: usize,
) -> Result<Bytes, BodyError> {
    if let Some(declared) = declared_length(headers)
        && declared > max as u64
        && (expects_continue(headers) || declared > DRAIN_MAX_BYTES)
    {
        return Err(BodyError::TooLarge(max));
    }
    let mut stream = body.into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| BodyError::Read(e.to_string()))?;
        if buf.len() + chunk.len() > max {
            drain(&mut stream, (buf.len() + chunk.len()) as u64).await;
            return Err(BodyError::TooLarge(max));
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buf))
}

/// Reads and discards the rest of a body, `seen` bytes of which were read,
/// within the drain bounds.
async fn drain(stream: &mut axum::body::BodyDataStream, mut seen: u64) {
    while seen <= DRAIN_MAX_BYTES {
        match tokio::time::timeout(DRAIN_IDLE, stream.next()).await {
            Ok(Some(Ok(chunk))) => seen += chunk.len() as u64,
            Ok(Some(Err(_)) | None) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[tokio::test]
    async fn bodies_under_the_limit_are_read_and_over_it_refused() {
        let ok = read_capped(&headers(&[]), Body::from("abcd"), 4).await;
        assert_eq!(ok.unwrap(), Bytes::from("abcd"));
        let over = read_capped(&headers(&[]), Body::from("abcde"), 4).await;
        assert!(matches!(over, Err(BodyError::TooLarge(4))), "{over:?}");
        // A client waiting for 100 Continue is answered before it sends.
        let waiting = headers(&[("content-length", "10"), ("expect", "100-continue")]);
        let over = read_capped(&waiting, Body::from("0123456789"), 4).await;
        assert!(matches!(over, Err(BodyError::TooLarge(4))), "{over:?}");
    }
}
