//! The relay against a real store (SQLite and MySQL) and a real local HTTP
//! receiver: retries with one delivery id and valid signatures, 410, timeouts,
//! the private-address guard, and two relays sharing one outbox.

mod support;

use kairos_callback_relay::deliver::{DELIVERY_ATTEMPT_HEADER, DELIVERY_ID_HEADER};
use kairos_core::callback::CallbackState;
use kairos_core::protocol::ResultKind;
use kairos_store_sql::SqlStore;
use kairos_testkit::{unique, wait_for};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use wiremock::{Request, ResponseTemplate};

// ---- scenarios ------------------------------------------------------------

async fn retries_until_delivered(store: Arc<SqlStore>) {
    let server = receiver(FlakyReceiver {
        fail_first: 3,
        fail_with: 503,
        seen: Mutex::default(),
    })
    .await;
    let url = format!("{}/hooks/kairos", server.uri());
    let ok = finished_execution(&store, &url, ResultKind::Succeeded).await;
    let failed = finished_execution(&store, &url, ResultKind::Failed).await;
    let relay = start(store.clone(), config(&unique("relay")));
    relay.wake.notify_one();
    let mut delivered = Vec::new();
    for exec in [&ok, &failed] {
        delivered.push(settled(&store, exec, CallbackState::Delivered).await);
    }
    relay.stop().await;

    let requests = server.received_requests().await.expect("recording on");
    for ((cb, attempts), exec) in delivered.iter().zip([&ok, &failed]) {
        let codes: Vec<_> = attempts.iter().map(|a| a.status_code).collect();
        assert_eq!(codes, [Some(503), Some(503), Some(503), Some(200)]);
        assert_eq!(
            attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        let mine: Vec<&Request> = requests
            .iter()
            .filter(|r| header(r, DELIVERY_ID_HEADER) == cb.id)
            .collect();
        assert_eq!(mine.len(), 4, "every attempt carries the same delivery id");
        for (i, req) in mine.iter().enumerate() {
            assert_eq!(header(req, DELIVERY_ATTEMPT_HEADER), (i + 1).to_string());
            assert_eq!(
                req.body,
                cb.payload.as_bytes(),
                "the stored body, byte for byte"
            );
            assert_eq!(header(req, "content-type"), "application/json");
            assert!(header(req, "user-agent").starts_with("kairos-callback-relay/"));
            assert_eq!(req.url.path(), "/hooks/kairos");
            assert_signed(req);
        }
        let body: serde_json::Value = serde_json::from_slice(&mine[0].body).unwrap();
        assert_eq!(body["executionId"], exec.as_str());
    }
    let (ok_cb, _) = &delivered[0];
    let (failed_cb, _) = &delivered[1];
    assert!(ok_cb.payload.contains("\"succeeded\""));
    assert!(failed_cb.payload.contains("\"failed\""));
}

async fn gone_stops_at_once(store: Arc<SqlStore>) {
    let server = receiver(ResponseTemplate::new(410)).await;
    let exec = finished_execution(&store, &server.uri(), ResultKind::Succeeded).await;
    let relay = start(store.clone(), config(&unique("relay")));
    let (_, attempts) = settled(&store, &exec, CallbackState::Dead).await;
    relay.stop().await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status_code, Some(410));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

async fn hanging_receiver_times_out(store: Arc<SqlStore>) {
    let server = receiver(ResponseTemplate::new(200).set_delay(Duration::from_secs(3600))).await;
    let exec = finished_execution(&store, &server.uri(), ResultKind::Succeeded).await;
    let mut cfg = config(&unique("relay"));
    cfg.request_timeout = Duration::from_millis(300);
    cfg.backoff.base = Duration::from_secs(60);
    cfg.backoff.cap = Duration::from_secs(600);
    let relay = start(store.clone(), cfg);
    let attempt = wait_for("a timed-out attempt", DEADLINE, || async {
        let (cb, attempts) = only_callback(&store, &exec).await;
        (cb.state == CallbackState::Pending && !attempts.is_empty()).then(|| attempts[0].clone())
    })
    .await;
    relay.stop().await;
    assert_eq!(attempt.status_code, None);
    let error = attempt.error.unwrap_or_default();
    assert!(error.contains("timed out"), "{error}");
}

async fn private_address_is_refused(store: Arc<SqlStore>) {
    let server = receiver(ResponseTemplate::new(200)).await;
    let by_ip = finished_execution(&store, &server.uri(), ResultKind::Succeeded).await;
    let by_name = format!("http://localhost:{}/cb", server.address().port());
    let by_name = finished_execution(&store, &by_name, ResultKind::Failed).await;
    let mut cfg = config(&unique("relay"));
    cfg.callback_allow_private = false;
    let relay = start(store.clone(), cfg);
    for exec in [&by_ip, &by_name] {
        let (cb, attempts) = settled(&store, exec, CallbackState::Dead).await;
        assert_eq!(attempts.len(), 1, "a refusal is not retried");
        let error = attempts[0].error.clone().unwrap_or_default();
        assert!(
            error.starts_with("refused") && error.contains("loopback"),
            "{error}"
        );
        assert!(error.contains("KAIROS_CALLBACK_ALLOW_PRIVATE"), "{error}");
        assert_eq!(cb.last_error.as_deref(), Some(error.as_str()));
    }
    relay.stop().await;
    assert!(server.received_requests().await.unwrap().is_empty());
}

async fn two_relays_never_double_send(store_a: Arc<SqlStore>, store_b: Arc<SqlStore>) {
    let server = receiver(FlakyReceiver {
        fail_first: 2,
        fail_with: 503,
        seen: Mutex::default(),
    })
    .await;
    let mut execs = Vec::new();
    for i in 0..20 {
        let kind = if i % 5 == 0 {
            ResultKind::Failed
        } else {
            ResultKind::Succeeded
        };
        execs.push(finished_execution(&store_a, &server.uri(), kind).await);
    }
    let mut cfg_a = config(&unique("relay-a"));
    let mut cfg_b = config(&unique("relay-b"));
    // Small batches so both relays keep claiming from the same rows.
    cfg_a.batch = 3;
    cfg_b.batch = 3;
    let a = start(store_a.clone(), cfg_a);
    let b = start(store_b, cfg_b);
    let mut ids = Vec::new();
    for exec in &execs {
        let (cb, attempts) = settled(&store_a, exec, CallbackState::Delivered).await;
        assert_eq!(attempts.len(), 3);
        ids.push(cb.id);
    }
    a.stop().await;
    b.stop().await;

    let mut receipts: HashMap<(String, String), u32> = HashMap::new();
    for req in server.received_requests().await.unwrap() {
        assert_signed(&req);
        let key = (
            header(&req, DELIVERY_ID_HEADER),
            header(&req, DELIVERY_ATTEMPT_HEADER),
        );
        *receipts.entry(key).or_default() += 1;
    }
    for id in ids {
        for attempt in ["1", "2", "3"] {
            let n = receipts.get(&(id.clone(), attempt.to_string())).copied();
            assert_eq!(
                n,
                Some(1),
                "delivery {id} attempt {attempt} received {n:?} times"
            );
        }
    }
    assert_eq!(receipts.len(), 60, "no other attempts were sent");
}

// ---- per database ---------------------------------------------------------

#[tokio::test]
async fn sqlite_retries_until_delivered() {
    retries_until_delivered(sqlite().await.1).await;
}

#[tokio::test]
async fn mysql_retries_until_delivered() {
    let Some((_, store)) = mysql().await else {
        return;
    };
    retries_until_delivered(store).await;
}

#[tokio::test]
async fn sqlite_gone_stops_at_once() {
    gone_stops_at_once(sqlite().await.1).await;
}

#[tokio::test]
async fn mysql_gone_stops_at_once() {
    let Some((_, store)) = mysql().await else {
        return;
    };
    gone_stops_at_once(store).await;
}

#[tokio::test]
async fn sqlite_hanging_receiver_times_out() {
    hanging_receiver_times_out(sqlite().await.1).await;
}

#[tokio::test]
async fn mysql_hanging_receiver_times_out() {
    let Some((_, store)) = mysql().await else {
        return;
    };
    hanging_receiver_times_out(store).await;
}

#[tokio::test]
async fn sqlite_private_address_is_refused() {
    private_address_is_refused(sqlite().await.1).await;
}

#[tokio::test]
async fn mysql_private_address_is_refused() {
    let Some((_, store)) = mysql().await else {
        return;
    };
    private_address_is_refused(store).await;
}

#[tokio::test]
async fn sqlite_two_relays_never_double_send() {
    let (url, a) = sqlite().await;
    two_relays_never_double_send(a, store_at(&url).await).await;
}

#[tokio::test]
async fn mysql_two_relays_never_double_send() {
    let Some((url, a)) = mysql().await else {
        return;
    };
    two_relays_never_double_send(a, store_at(&url).await).await;
}
