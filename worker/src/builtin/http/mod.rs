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

use crate::handler::{HandlerOutcome, JobContext};
use async_trait::async_trait;
use kairos_netguard::Guard;
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

/// Scheme, host and port: what must stay the same for credentials to follow.
type Origin = (String, Option<String>, Option<u16>);

fn origin(url: &Url) -> Origin {
    (
        url.scheme().to_string(),
        url.host_str().map(str::to_ascii_lowercase),
        url.port_or_known_default(),
    )
}

/// What one request of a redirect chain sends.
#[derive(Debug)]
struct Hop {
    url: Url,
    method: Method,
    headers: Vec<(HeaderName, HeaderValue)>,
    body: Body,
}

/// Whether `name` carries a credential: one of the HTTP ones, or a name
/// sensitive by the rule params are masked by (`X-Api-Key`, `X-Auth-Token`).
fn is_credential(name: &HeaderName) -> bool {
    name == reqwest::header::AUTHORIZATION
        || name == reqwest::header::COOKIE
        || name == reqwest::header::PROXY_AUTHORIZATION
        || kairos_core::sensitive::SensitiveKeys::default().matches(name.as_str())
}

impl Hop {
    /// The request a redirect with `status` to `next` asks for. As browsers
    /// and curl do: 303 (and 301/302 after a POST) becomes a GET without
    /// body; credentials and `Referer` go only to the job's own `origin`,
    /// so a redirect elsewhere cannot collect them.
    fn redirected(mut self, status: reqwest::StatusCode, next: Url, origin: &Origin) -> Self {
        let to_get = (status == reqwest::StatusCode::SEE_OTHER && self.method != Method::HEAD)
            || (matches!(status.as_u16(), 301 | 302) && self.method == Method::POST);
        if to_get {
            self.method = Method::GET;
            self.body = Body::None;
            self.headers
                .retain(|(k, _)| !k.as_str().starts_with("content-"));
        }
        if self::origin(&next) != *origin {
            self.headers
                .retain(|(k, _)| k != reqwest::header::REFERER && !is_credential(k));
        }
        self.url = next;
        self
    }
}

/// Where a redirect answer sends the request next: `None` when `resp` is no
/// redirect to follow, an error naming the location when it cannot be used.
fn redirect_target(resp: &reqwest::Response) -> Option<Result<Url, String>> {
    if !matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = resp.headers().get(reqwest::header::LOCATION)?;
    let shown = String::from_utf8_lossy(location.as_bytes()).into_owned();
    Some(
        location
            .to_str()
            .ok()
            .and_then(|l| resp.url().join(l).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| format!("{shown:?}, which is no http or https URL")),
    )
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
mod tests {
    use super::super::tests::ctx;
    use super::*;
    use crate::Handler;
    use serde_json::json;
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    /// Tests talk to a local mock server: private addresses allowed.
    fn handler() -> HttpHandler {
        HttpHandler::new(true).unwrap()
    }

    #[tokio::test]
    async fn loopback_is_refused_unless_allowed() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string("secret"))
            .mount(&server)
            .await;
        let strict = HttpHandler::new(false).unwrap();
        for url in [
            server.uri(),
            format!("http://localhost:{}/", server.address().port()),
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "http://[::1]:9/".to_string(),
        ] {
            let HandlerOutcome::PermanentFailure(e) = strict.run(ctx(json!({ "url": url }))).await
            else {
                panic!("{url} must be refused, not retried");
            };
            assert!(e.starts_with("http handler: refused"), "{e}");
            assert!(e.contains("KAIROS_HTTP_ALLOW_PRIVATE=true"), "{e}");
            if url.contains("localhost") {
                assert!(!e.contains("127.0.0.1"), "the DNS answer is not shown: {e}");
            }
        }
        assert_eq!(server.received_requests().await.unwrap().len(), 0);
        let out = handler().run(ctx(json!({ "url": server.uri() }))).await;
        assert!(matches!(out, HandlerOutcome::Success(_)), "{out:?}");
    }

    #[tokio::test]
    async fn a_redirect_to_loopback_is_refused_unless_allowed() {
        let internal = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string("internal secret"))
            .mount(&internal)
            .await;
        let port = internal.address().port();
        let redirector = MockServer::start().await;
        for (from, to) in [
            ("/literal", format!("http://127.0.0.1:{port}/secret")),
            ("/name", format!("http://localhost:{port}/secret")),
        ] {
            Mock::given(method("GET"))
                .and(path(from))
                .respond_with(ResponseTemplate::new(302).insert_header("location", to.as_str()))
                .mount(&redirector)
                .await;
        }
        // The first hop's name is pinned to the local redirector, standing
        // for a public host: only the redirect is left to refuse.
        let pinned = |allow_private| {
            HttpHandler::with_client(allow_private, |b| {
                b.resolve("public.example", *redirector.address())
            })
            .unwrap()
        };
        let first_hop = |route: &str| {
            let port = redirector.address().port();
            json!({ "url": format!("http://public.example:{port}{route}") })
        };
        for route in ["/literal", "/name"] {
            let HandlerOutcome::PermanentFailure(e) =
                pinned(false).run(ctx(first_hop(route))).await
            else {
                panic!("{route}: the redirect must be refused");
            };
            assert!(e.starts_with("http handler: refused"), "{e}");
            assert!(e.contains("loopback"), "{e}");
            assert!(e.contains("KAIROS_HTTP_ALLOW_PRIVATE=true"), "{e}");
        }
        assert_eq!(redirector.received_requests().await.unwrap().len(), 2);
        assert!(internal.received_requests().await.unwrap().is_empty());

        let out = pinned(true).run(ctx(first_hop("/literal"))).await;
        assert_eq!(
            out,
            HandlerOutcome::Success(json!({"status": 200, "body": "internal secret"}))
        );
    }

    #[tokio::test]
    async fn credentials_and_referer_do_not_follow_a_redirect_to_another_origin() {
        let elsewhere = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string("landed"))
            .mount(&elsewhere)
            .await;
        let origin = MockServer::start().await;
        let away = format!("{}/landing", elsewhere.uri());
        Mock::given(path("/away"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", away.as_str()))
            .mount(&origin)
            .await;
        Mock::given(path("/see-other"))
            .respond_with(ResponseTemplate::new(303).insert_header("location", away.as_str()))
            .mount(&origin)
            .await;
        Mock::given(path("/here"))
            .respond_with(ResponseTemplate::new(307).insert_header("location", "/final"))
            .mount(&origin)
            .await;
        Mock::given(path("/final"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&origin)
            .await;
        let headers = json!({
            "Authorization": "Bearer tok-1234567890",
            "Cookie": "sid=cookie-123",
            "X-Api-Key": "key-123456",
            "X-Auth-Token": "token-123456",
            "Referer": "https://origin.example/page",
            "X-Trace": "kept",
        });
        let credentials = ["authorization", "cookie", "x-api-key", "x-auth-token", "referer"];
        for route in ["/away", "/see-other"] {
            let params = json!({"url": format!("{}{route}", origin.uri()), "method": "POST",
                                "headers": headers, "body": {"a": 1}});
            let out = handler().run(ctx(params)).await;
            assert!(matches!(out, HandlerOutcome::Success(_)), "{route}: {out:?}");
        }
        let landed = elsewhere.received_requests().await.unwrap();
        assert_eq!(landed.len(), 2);
        for req in &landed {
            assert_eq!(req.method.as_str(), "GET", "a POST redirected by 302/303 is a GET");
            assert!(req.body.is_empty());
            assert_eq!(req.headers.get("x-trace").unwrap(), "kept");
            for name in credentials {
                assert!(
                    req.headers.get(name).is_none(),
                    "{name} went to another origin: {:?}",
                    req.headers
                );
            }
        }
        // Within the job's own origin they are kept, and a 307 keeps the
        // method and the body.
        let params = json!({"url": format!("{}/here", origin.uri()), "method": "PUT",
                            "headers": headers, "body": {"a": 1}});
        let out = handler().run(ctx(params)).await;
        assert!(matches!(out, HandlerOutcome::Success(_)), "{out:?}");
        let finals = origin.received_requests().await.unwrap();
        let last = finals.last().unwrap();
        assert_eq!(last.url.path(), "/final");
        assert_eq!(last.method.as_str(), "PUT");
        assert_eq!(last.body, br#"{"a":1}"#);
        for name in credentials {
            assert!(last.headers.get(name).is_some(), "{name} kept on the same origin");
        }
    }

    #[tokio::test]
    async fn redirects_are_followed_a_bounded_number_of_times() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/loop"))
            .respond_with(ResponseTemplate::new(302).insert_header("location", "/loop"))
            .mount(&server)
            .await;
        let url = format!("{}/loop", server.uri());
        let HandlerOutcome::Failure(e) = handler().run(ctx(json!({ "url": url }))).await else {
            panic!("a redirect loop must fail");
        };
        assert!(e.contains("redirect"), "{e}");
        assert_eq!(
            server.received_requests().await.unwrap().len(),
            MAX_REDIRECTS + 1
        );
    }

    #[tokio::test]
    async fn a_2xx_json_answer_is_a_success_with_parsed_body() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/hook"))
            .and(header("x-token", "abc"))
            .and(body_json(json!({"n": 1})))
            .respond_with(ResponseTemplate::new(201).set_body_json(json!({"ok": true})))
            .expect(1)
            .mount(&server)
            .await;
        let params = json!({
            "url": format!("{}/hook", server.uri()),
            "method": "post",
            "headers": {"x-token": "abc"},
            "body": {"n": 1},
        });
        let out = handler().run(ctx(params)).await;
        assert_eq!(
            out,
            HandlerOutcome::Success(json!({"status": 201, "body": {"ok": true}}))
        );
    }

    #[tokio::test]
    async fn text_bodies_are_sent_as_is_and_long_answers_truncated() {
        let server = MockServer::start().await;
        let long = "é".repeat(MAX_BODY_BYTES);
        Mock::given(method("PUT"))
            .and(path("/t"))
            .respond_with(ResponseTemplate::new(200).set_body_string(long))
            .mount(&server)
            .await;
        let params =
            json!({"url": format!("{}/t", server.uri()), "method": "PUT", "body": "plain"});
        let HandlerOutcome::Success(out) = handler().run(ctx(params)).await else {
            panic!("2xx must succeed");
        };
        let body = out["body"].as_str().unwrap();
        assert!(body.len() <= MAX_BODY_BYTES && body.len() >= MAX_BODY_BYTES - 1);
        assert!(body.chars().all(|c| c == 'é'));
        let received = &server.received_requests().await.unwrap()[0];
        assert_eq!(received.body, b"plain");
    }

    #[tokio::test]
    async fn a_non_2xx_answer_fails_with_status_and_url() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(503))
            .mount(&server)
            .await;
        let url = format!("{}/down", server.uri());
        let out = handler().run(ctx(json!({ "url": url }))).await;
        assert_eq!(out, HandlerOutcome::failure(format!("HTTP 503 from {url}")));
    }

    #[tokio::test]
    async fn slow_answers_fail_after_timeout_ms() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(30)))
            .mount(&server)
            .await;
        let params = json!({"url": server.uri(), "timeoutMs": 50});
        let HandlerOutcome::Failure(e) = handler().run(ctx(params)).await else {
            panic!("a timed-out request must fail");
        };
        assert!(e.starts_with("request to "), "{e}");
    }

    #[tokio::test]
    async fn bad_params_fail_with_a_clear_message() {
        let cases = [
            (json!({}), "params.url must be a string"),
            (json!({"url": "not a url"}), "bad url"),
            (json!({"url": "ftp://x/"}), "must use http or https"),
            (
                json!({"url": "http://x/", "method": "GE T"}),
                "invalid method",
            ),
            (
                json!({"url": "http://x/", "headers": [1]}),
                "params.headers must be an object",
            ),
            (
                json!({"url": "http://x/", "headers": {"a": 1}}),
                "header \"a\" must be a string",
            ),
            (
                json!({"url": "http://x/", "timeoutMs": -5}),
                "params.timeoutMs",
            ),
        ];
        for (params, want) in cases {
            let HandlerOutcome::PermanentFailure(e) = handler().run(ctx(params.clone())).await
            else {
                panic!("{params} must fail for good");
            };
            assert!(e.contains(want), "{params}: {e}");
        }
    }

    #[tokio::test]
    async fn host_and_hop_by_hop_headers_are_refused_and_nothing_is_sent() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        for (name, rule) in [
            ("Host", "Host"),
            ("host", "Host"),
            ("Connection", "Connection"),
            ("keep-alive", "Keep-Alive"),
            ("Proxy-Authorization", "Proxy-*"),
            ("proxy-connection", "Proxy-*"),
            ("TE", "TE"),
            ("Trailer", "Trailer"),
            ("Transfer-Encoding", "Transfer-Encoding"),
            ("Upgrade", "Upgrade"),
            ("Content-Length", "Content-Length"),
        ] {
            let params = json!({"url": server.uri(), "headers": {name: "x"}});
            let HandlerOutcome::PermanentFailure(e) = handler().run(ctx(params)).await else {
                panic!("{name} must be refused for good");
            };
            assert!(
                e.starts_with(&format!(
                    "http handler: params.headers may not set {name:?}"
                )),
                "{e}"
            );
            assert!(e.contains(&format!("{rule} is set by the client")), "{e}");
        }
        assert!(server.received_requests().await.unwrap().is_empty());
        // Ordinary headers, even ones that start alike, still go out.
        let params = json!({"url": server.uri(), "headers": {"x-host": "a", "Proxyish": "b"}});
        let out = handler().run(ctx(params)).await;
        assert!(matches!(out, HandlerOutcome::Success(_)), "{out:?}");
    }
}
