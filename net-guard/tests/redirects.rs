//! Redirects are re-checked: a public-looking first hop that answers
//! `302 → http://127.0.0.1:…` (or to a name that resolves to loopback) is
//! refused before the loopback service sees a request.
//!
//! The first hop is a local server reached through a host name pinned with
//! the client's resolve override: the override stands for a DNS answer with
//! a public address (it bypasses the guard's resolver, as a public address
//! would pass it), so the only thing left to refuse is the redirect.

use kairos_netguard::{
    Guard, GuardError, check_target, client_builder, redirect_policy, refusal_in,
};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const STRICT: Guard = Guard {
    allow_private: false,
    setting: "KAIROS_TEST_ALLOW_PRIVATE",
};
const OPEN: Guard = Guard {
    allow_private: true,
    setting: "KAIROS_TEST_ALLOW_PRIVATE",
};

/// A loopback service with a secret, and a redirector pointing at it by IP
/// literal (`/literal`) and by name (`/name`).
async fn servers() -> (MockServer, MockServer) {
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
        ("/v6", format!("http://[::ffff:127.0.0.1]:{port}/secret")),
    ] {
        Mock::given(method("GET"))
            .and(path(from))
            .respond_with(ResponseTemplate::new(302).insert_header("location", to.as_str()))
            .mount(&redirector)
            .await;
    }
    (internal, redirector)
}

fn client(guard: Guard, redirector: &MockServer) -> reqwest::Client {
    client_builder(guard)
        .resolve("public.example", *redirector.address())
        .redirect(redirect_policy(guard, 5))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_redirect_to_loopback_is_refused_without_allow_private() {
    let (internal, redirector) = servers().await;
    let port = redirector.address().port();
    let client = client(STRICT, &redirector);
    for (route, kind) in [
        ("/literal", "127.0.0.0/8 loopback (RFC 1122)"),
        ("/name", "loopback"),
        (
            "/v6",
            "::ffff:0.0.0.0/96 IPv4-mapped (RFC 4291) carrying 127.0.0.0/8 loopback",
        ),
    ] {
        let url = format!("http://public.example:{port}{route}");
        check_target(&url, STRICT).expect("the first hop is a name: left to the resolver");
        let err = client.get(&url).send().await.unwrap_err();
        let Some(GuardError::Forbidden { rule, setting, .. }) = refusal_in(&err) else {
            panic!("{route}: the guard's refusal must be in the error: {err:?}");
        };
        assert!(rule.to_string().contains(kind), "{route}: {rule}");
        assert_eq!(*setting, "KAIROS_TEST_ALLOW_PRIVATE", "{route}");
    }
    assert_eq!(
        redirector.received_requests().await.unwrap().len(),
        3,
        "each first hop was made"
    );
    assert!(
        internal.received_requests().await.unwrap().is_empty(),
        "no redirect reached the loopback service"
    );
}

#[tokio::test]
async fn the_same_redirect_is_followed_when_private_addresses_are_allowed() {
    let (internal, redirector) = servers().await;
    let port = redirector.address().port();
    let client = client(OPEN, &redirector);
    for route in ["/literal", "/name"] {
        let url = format!("http://public.example:{port}{route}");
        let resp = client.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{route}");
        assert_eq!(resp.text().await.unwrap(), "internal secret");
    }
    assert_eq!(internal.received_requests().await.unwrap().len(), 2);
}

#[test]
fn literals_are_checked_before_a_request_names_are_not() {
    let err = check_target("http://127.0.0.1:9/", STRICT).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("refused: 127.0.0.0/8 loopback (RFC 1122), for host 127.0.0.1;"),
        "{err}"
    );
    let err = check_target("http://[fd00::1]/", STRICT).unwrap_err();
    assert!(
        err.to_string().contains("fc00::/7 unique-local (RFC 4193)"),
        "{err}"
    );
    check_target("http://localhost:9/", STRICT).expect("names go to the resolver");
    check_target("http://127.0.0.1:9/", OPEN).expect("allowed");
    for bad in ["ftp://example.com/", "not a url", "http://"] {
        let err = check_target(bad, OPEN).unwrap_err();
        assert!(matches!(err, GuardError::BadUrl { .. }), "{bad}: {err}");
    }
}
