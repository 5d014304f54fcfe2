//! A receiver's redirect never leads a delivery elsewhere: with private
//! addresses refused, a receiver answering `302 → http://127.0.0.1:…` gets
//! its attempt recorded as a failed answer and the loopback service sees
//! nothing.
//!
//! The receiver is a local server reached through a host name pinned with
//! the client's resolve override, standing for a DNS answer with a public
//! address; the first hop therefore passes the guard and only the redirect
//! is left to refuse.

use kairos_callback_relay::config::RelayConfig;
use kairos_callback_relay::deliver;
use kairos_core::callback::{Callback, CallbackState};
use kairos_core::store::CallbackNext;
use kairos_core::tenant::SigningSecrets;
use kairos_core::time::now_ms;
use std::time::Duration;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test]
async fn a_redirect_to_loopback_is_not_followed() {
    let internal = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&internal)
        .await;
    let target = format!("http://127.0.0.1:{}/internal", internal.address().port());
    let receiver = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(302).insert_header("location", target.as_str()))
        .mount(&receiver)
        .await;

    let mut cfg = RelayConfig::new("secret", "redirect-test");
    cfg.callback_allow_private = false;
    cfg.request_timeout = Duration::from_secs(5);
    let client = deliver::client_builder(&cfg)
        .resolve("hooks.example", *receiver.address())
        .build()
        .unwrap();
    let callback = Callback {
        id: "cb-1".into(),
        subject: kairos_core::callback::CallbackSubject::Execution {
            execution_id: "exec-1".into(),
            job_id: "job-1".into(),
        },
        tenant: "default".into(),
        url: format!("http://hooks.example:{}/hook", receiver.address().port()),
        payload: r#"{"status":"succeeded"}"#.into(),
        state: CallbackState::Pending,
        attempts: 0,
        next_attempt_at: 0,
        last_error: None,
        created_at: now_ms(),
        trace: None,
    };
    let secrets = SigningSecrets {
        current: b"secret".to_vec(),
        previous: None,
    };
    let (record, next) = deliver::attempt(&client, &cfg, &callback, &secrets).await;
    assert_eq!(record.attempt, 1);
    assert_eq!(record.status_code, Some(302), "{:?}", record.error);
    let error = record.error.unwrap_or_default();
    assert!(error.contains("redirects are not followed"), "{error}");
    assert!(
        error.contains(&target),
        "the error names where it pointed: {error}"
    );
    assert!(
        matches!(next, CallbackNext::RetryAt(_)),
        "not delivered: {next:?}"
    );
    assert_eq!(receiver.received_requests().await.unwrap().len(), 1);
    assert!(
        internal.received_requests().await.unwrap().is_empty(),
        "the loopback service saw nothing"
    );

    // The same callback aimed at loopback directly is refused outright.
    let direct = Callback {
        url: target.clone(),
        ..callback
    };
    let (record, next) = deliver::attempt(&client, &cfg, &direct, &secrets).await;
    let error = record.error.unwrap_or_default();
    assert!(
        error.starts_with("refused") && error.contains("loopback"),
        "{error}"
    );
    assert!(matches!(next, CallbackNext::Dead), "{next:?}");
    assert!(internal.received_requests().await.unwrap().is_empty());
}
