//! The `http` handler against local servers: the guard, redirects, bodies,
//! time limits and refused params.

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
        let HandlerOutcome::PermanentFailure(e) = pinned(false).run(ctx(first_hop(route))).await
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
    let credentials = [
        "authorization",
        "cookie",
        "x-api-key",
        "x-auth-token",
        "referer",
    ];
    for route in ["/away", "/see-other"] {
        let params = json!({"url": format!("{}{route}", origin.uri()), "method": "POST",
                            "headers": headers, "body": {"a": 1}});
        let out = handler().run(ctx(params)).await;
        assert!(
            matches!(out, HandlerOutcome::Success(_)),
            "{route}: {out:?}"
        );
    }
    let landed = elsewhere.received_requests().await.unwrap();
    assert_eq!(landed.len(), 2);
    for req in &landed {
        assert_eq!(
            req.method.as_str(),
            "GET",
            "a POST redirected by 302/303 is a GET"
        );
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
        assert!(
            last.headers.get(name).is_some(),
            "{name} kept on the same origin"
        );
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
    let params = json!({"url": format!("{}/t", server.uri()), "method": "PUT", "body": "plain"});
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
        let HandlerOutcome::PermanentFailure(e) = handler().run(ctx(params.clone())).await else {
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
