//! The `http` built-in: one HTTP request per attempt; 2xx is success.
//!
//! Job URLs come from API callers, so requests go through the same
//! request-forgery guard as callbacks (`kairos_netguard`): loopback, private,
//! link-local and other non-public addresses are refused unless
//! `KAIROS_HTTP_ALLOW_PRIVATE=true`, checked on the resolved address, on
//! every redirect (at most [`MAX_REDIRECTS`]), with the answer cut at 64 KiB
//! and the request bounded in time. Redirects are followed as browsers and
//! curl follow them, and credentials (`Authorization`, `Cookie`, any header
//! named like a secret, such as `X-Api-Key`) and `Referer` are sent only to
//! the origin of the job's URL.
//!
//! Params may not set `Host`, hop-by-hop headers or `Content-Length`
//! ([`RESERVED_HEADERS`]): the client owns the connection and the framing,
//! and a chosen `Host` would send the request to another virtual host (an
//! internal one, behind a shared front end) than the URL the guard checked.
//! Bad params and refusals fail the execution at once: a retry cannot help.

mod redirect;

use crate::handler::{HandlerOutcome, JobContext};
use async_trait::async_trait;
use kairos_netguard::Guard;
use redirect::{Hop, origin, redirect_target};
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde_json::Value;
use std::time::Duration;

/// Response bodies are kept up to this size: the output is stored in the
/// database and sent in callbacks.
const MAX_BODY_BYTES: usize = 64 * 1024;
/// Redirects followed, each re-checked by the guard.
pub(crate) const MAX_REDIRECTS: usize = 5;
/// Time limit of a request whose params give no `timeoutMs`.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Setting that lets the handler reach private addresses.
pub(crate) const ALLOW_PRIVATE_SETTING: &str = "KAIROS_HTTP_ALLOW_PRIVATE";

/// Headers params cannot set, as HTTP spells them (matched case-insensitively;
/// `Proxy-*` covers every header starting so).
pub(crate) const RESERVED_HEADERS: &[&str] = &[
    "Host",
    "Connection",
    "Keep-Alive",
    "Proxy-*",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Content-Length",
];

/// Which reserved header `name` is, if any ([`HeaderName`] keeps names in
/// lower case).
fn reserved(name: &HeaderName) -> Option<&'static str> {
    let name = name.as_str();
    RESERVED_HEADERS
        .iter()
        .copied()
        .find(|r| match r.strip_suffix('*') {
            Some(prefix) => name.starts_with(&prefix.to_ascii_lowercase()),
            None => name.eq_ignore_ascii_case(r),
        })
}

/// `http`: `{"url", "method" (GET), "headers": {…}, "body": JSON or string,
/// "timeoutMs"}`. 2xx → `{"status", "body"}` (the body parsed as JSON when it
/// is JSON, else text, truncated to 64 KiB); anything else fails.
pub struct HttpHandler {
    client: reqwest::Client,
    guard: Guard,
}

impl HttpHandler {
    /// A handler with its own connection pool; private addresses are
    /// refused unless `allow_private`.
    pub fn new(allow_private: bool) -> Result<Self, reqwest::Error> {
        Self::with_client(allow_private, |b| b)
    }

    /// [`HttpHandler::new`] with a last say over the client (tests pin host
    /// names to local servers with it).
    fn with_client(
        allow_private: bool,
        customize: impl FnOnce(reqwest::ClientBuilder) -> reqwest::ClientBuilder,
    ) -> Result<Self, reqwest::Error> {
        let guard = Guard {
            allow_private,
            setting: ALLOW_PRIVATE_SETTING,
        };
        let builder = kairos_netguard::client_builder(guard)
            // Redirects are followed by hand ([`Hop::redirected`]): reqwest
            // would keep headers such as `X-Api-Key` across origins.
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .connect_timeout(Duration::from_secs(10));
        Ok(Self {
            client: customize(builder).build()?,
            guard,
        })
    }
}

/// A request as the params describe it, checked before anything is sent.
#[derive(Debug)]
struct Request {
    url: Url,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Body,
    timeout: Option<Duration>,
}

#[derive(Debug, Clone)]
enum Body {
    None,
    Text(String),
    Json(Value),
}

fn parse(params: &Value) -> Result<Request, String> {
    let raw_url = params
        .get("url")
        .and_then(Value::as_str)
        .ok_or("http handler: params.url must be a string")?;
    let url = Url::parse(raw_url).map_err(|e| format!("http handler: bad url {raw_url:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "http handler: url {raw_url:?} must use http or https"
        ));
    }
    let method = match params.get("method") {
        None | Some(Value::Null) => Method::GET,
        Some(Value::String(m)) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| format!("http handler: invalid method {m:?}"))?,
        Some(_) => return Err("http handler: params.method must be a string".into()),
    };
    let mut headers = Vec::new();
    match params.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                let name = HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| format!("http handler: invalid header name {k:?}"))?;
                if let Some(rule) = reserved(&name) {
                    return Err(format!(
                        "http handler: params.headers may not set {k:?}: {rule} is set by \
                         the client itself (hop-by-hop, framing and Host headers are \
                         refused; a configuration problem, not retried)"
                    ));
                }
                let value = v
                    .as_str()
                    .and_then(|s| HeaderValue::from_str(s).ok())
                    .ok_or_else(|| format!("http handler: header {k:?} must be a string"))?;
                headers.push((name, value));
            }
        }
        Some(_) => return Err("http handler: params.headers must be an object".into()),
    }
    let body = match params.get("body") {
        None | Some(Value::Null) => Body::None,
        Some(Value::String(s)) => Body::Text(s.clone()),
        Some(v) => Body::Json(v.clone()),
    };
    let timeout = match params.get("timeoutMs") {
        None | Some(Value::Null) => None,
        Some(v) => Some(Duration::from_millis(v.as_u64().ok_or(
            "http handler: params.timeoutMs must be a non-negative integer",
        )?)),
    };
    Ok(Request {
        url,
        method,
        headers,
        body,
        timeout,
    })
}

/// The guard's refusal as the execution's error; it names the rule, never
/// the address a host name resolved to.
fn refused(refusal: &kairos_netguard::GuardError) -> HandlerOutcome {
    let message = format!("http handler: {refusal}");
    if refusal.is_permanent() {
        HandlerOutcome::PermanentFailure(message)
    } else {
        HandlerOutcome::Failure(message)
    }
}

/// reqwest's own message is terse ("error sending request"); the cause is
/// further down the chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Reads at most [`MAX_BODY_BYTES`]; the rest is never downloaded.
async fn read_limited(mut resp: reqwest::Response) -> Result<Value, reqwest::Error> {
    let mut buf = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = MAX_BODY_BYTES - buf.len();
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if buf.len() >= MAX_BODY_BYTES {
            break;
        }
    }
    if let Ok(json) = serde_json::from_slice(&buf) {
        return Ok(json);
    }
    // A cut may split a UTF-8 sequence: drop the incomplete tail, not the text.
    if let Err(e) = std::str::from_utf8(&buf)
        && e.error_len().is_none()
    {
        buf.truncate(e.valid_up_to());
    }
    Ok(Value::String(String::from_utf8_lossy(&buf).into_owned()))
}

impl HttpHandler {
    async fn send(&self, req: Request) -> HandlerOutcome {
        let url = req.url.to_string();
        let deadline = tokio::time::Instant::now() + req.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let origin = origin(&req.url);
        let mut hop = Hop {
            url: req.url,
            method: req.method,
            headers: req.headers,
            body: req.body,
        };
        let mut redirects = 0;
        let resp = loop {
            // IP literals here; names when the client resolves them, for the
            // first request and every redirect alike.
            if let Err(refusal) = kairos_netguard::check_target(hop.url.as_str(), self.guard) {
                return refused(&refusal);
            }
            let resp = match self.request(&hop, deadline).send().await {
                Ok(r) => r,
                Err(e) => {
                    if let Some(refusal) = kairos_netguard::refusal_in(&e) {
                        return refused(refusal);
                    }
                    return HandlerOutcome::failure(format!(
                        "request to {url} failed: {}",
                        error_chain(&e)
                    ));
                }
            };
            let Some(next) = redirect_target(&resp) else {
                break resp;
            };
            if redirects == MAX_REDIRECTS {
                return HandlerOutcome::failure(format!(
                    "request to {url} failed: more than {MAX_REDIRECTS} redirects"
                ));
            }
            redirects += 1;
            hop = match next {
                Ok(next) => hop.redirected(resp.status(), next, &origin),
                Err(e) => {
                    return HandlerOutcome::failure(format!(
                        "request to {url} failed: a redirect to {e}"
                    ));
                }
            };
        };
        let status = resp.status();
        if !status.is_success() {
            return HandlerOutcome::failure(format!("HTTP {} from {url}", status.as_u16()));
        }
        match read_limited(resp).await {
            Ok(body) => HandlerOutcome::Success(serde_json::json!({
                "status": status.as_u16(),
                "body": body,
            })),
            Err(e) => HandlerOutcome::failure(format!(
                "reading the response from {url} failed: {}",
                error_chain(&e)
            )),
        }
    }

    /// One hop's request, bounded by what is left of the job's time.
    fn request(&self, hop: &Hop, deadline: tokio::time::Instant) -> reqwest::RequestBuilder {
        let mut builder = self.client.request(hop.method.clone(), hop.url.clone());
        for (k, v) in &hop.headers {
            builder = builder.header(k, v);
        }
        builder = match &hop.body {
            Body::None => builder,
            Body::Text(s) => builder.body(s.clone()),
            Body::Json(v) => builder.json(v),
        };
        builder.timeout(deadline.saturating_duration_since(tokio::time::Instant::now()))
    }
}

#[async_trait]
impl crate::Handler for HttpHandler {
    async fn run(&self, ctx: JobContext) -> HandlerOutcome {
        let req = match parse(&ctx.params) {
            Ok(r) => r,
            Err(e) => return HandlerOutcome::PermanentFailure(e),
        };
        tokio::select! {
            out = self.send(req) => out,
            _ = ctx.cancel.cancelled() => HandlerOutcome::failure("http handler: cancelled"),
        }
    }
}

#[cfg(test)]
mod tests;
