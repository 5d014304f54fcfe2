//! The request-forgery guard through the relay's real attempt path, with
//! private addresses refused: the blocks and IPv6 forms the probe of issue
//! #32 reached, and this host's own non-loopback addresses, are refused at
//! once (dead, one attempt), the error names the rule, and a service
//! listening on every interface sees nothing.

use kairos_callback_relay::config::RelayConfig;
use kairos_callback_relay::deliver;
use kairos_core::callback::{Callback, CallbackState};
use kairos_core::store::CallbackNext;
use kairos_core::tenant::SigningSecrets;
use kairos_core::time::now_ms;
use std::net::IpAddr;
use std::time::Duration;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn callback(url: String) -> Callback {
    Callback {
        id: "cb-guard".into(),
        subject: kairos_core::callback::CallbackSubject::Execution {
            execution_id: "exec-1".into(),
            job_id: "job-1".into(),
        },
        tenant: "default".into(),
        url,
        payload: r#"{"status":"succeeded"}"#.into(),
        state: CallbackState::Pending,
        attempts: 0,
        next_attempt_at: 0,
        last_error: None,
        created_at: now_ms(),
        trace: None,
    }
}

fn strict() -> RelayConfig {
    let mut cfg = RelayConfig::new("secret", "guard-test");
    cfg.callback_allow_private = false;
    cfg.request_timeout = Duration::from_secs(5);
    cfg
}

/// Attempts `url` once and returns the recorded error of a dead callback.
async fn refused(cfg: &RelayConfig, url: String) -> String {
    let client = deliver::client(cfg).unwrap();
    let secrets = SigningSecrets {
        current: b"secret".to_vec(),
        previous: None,
    };
    let (record, next) = deliver::attempt(&client, cfg, &callback(url.clone()), &secrets).await;
    assert!(matches!(next, CallbackNext::Dead), "{url}: {next:?}");
    assert_eq!(record.status_code, None, "{url}: nothing was sent");
    let error = record.error.unwrap_or_default();
    assert!(error.starts_with("refused: "), "{url}: {error}");
    assert!(
        error.contains("KAIROS_CALLBACK_ALLOW_PRIVATE=true"),
        "{url}: {error}"
    );
    error
}

#[tokio::test]
async fn the_probed_blocks_and_forms_are_refused_naming_the_rule() {
    let cfg = strict();
    for (url, rule) in [
        (
            "http://198.18.0.1/cb",
            "198.18.0.0/15 benchmarking (RFC 2544)",
        ),
        (
            "http://192.0.0.1/cb",
            "192.0.0.0/29 IPv4 service continuity prefix (RFC 7335)",
        ),
        (
            "http://192.0.2.7/cb",
            "192.0.2.0/24 documentation (TEST-NET-1) (RFC 5737)",
        ),
        (
            "http://[2002:7f00:1::]/cb",
            "2002::/16 6to4 (RFC 3056) carrying 127.0.0.0/8 loopback (RFC 1122)",
        ),
        (
            "http://[::ffff:0:a00:1]/cb",
            "IPv4-translated (RFC 2765) carrying 10.0.0.0/8 private use (RFC 1918)",
        ),
        (
            "http://[64:ff9b:1::a00:1]/cb",
            "64:ff9b:1::/48 local-use IPv4/IPv6 translation (RFC 8215)",
        ),
    ] {
        let error = refused(&cfg, url.to_string()).await;
        assert!(error.contains(rule), "{url}: {error}");
    }
}

#[tokio::test]
async fn a_refused_name_does_not_reveal_its_address() {
    let error = refused(&strict(), "http://localhost:9/cb".to_string()).await;
    assert!(error.contains("for host localhost"), "{error}");
    assert!(
        !error.contains("127.0.0.1"),
        "the DNS answer leaked: {error}"
    );
}

#[tokio::test]
async fn this_hosts_own_addresses_are_refused() {
    // A service on every interface, as an admin port or a database might be.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let server = MockServer::builder().listener(listener).start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let port = server.address().port();
    let own: Vec<IpAddr> = kairos_netguard::host_addresses()
        .unwrap()
        .into_iter()
        .filter(|a| a.is_ipv4() && !a.is_loopback())
        .collect();
    assert!(!own.is_empty(), "this host has a non-loopback IPv4 address");
    let cfg = strict();
    for ip in &own {
        let error = refused(&cfg, format!("http://{ip}:{port}/cb")).await;
        // A private address is refused by its block; a public one (a host
        // with a public eth0) by the rule for this host's addresses.
        let want = match kairos_netguard::special_rule(*ip) {
            Some(rule) => rule.to_string(),
            None => "an address of this host".to_string(),
        };
        assert!(error.contains(&want), "{ip}: {error}");
    }
    assert!(server.received_requests().await.unwrap().is_empty());
    // With private addresses allowed the same service answers: the guard,
    // not the network, stopped the attempts above.
    let mut open = strict();
    open.callback_allow_private = true;
    let client = deliver::client(&open).unwrap();
    let secrets = SigningSecrets {
        current: b"secret".to_vec(),
        previous: None,
    };
    let url = format!("http://{}:{port}/cb", own[0]);
    let (_, next) = deliver::attempt(&client, &open, &callback(url), &secrets).await;
    assert_eq!(next, CallbackNext::Delivered);
}
