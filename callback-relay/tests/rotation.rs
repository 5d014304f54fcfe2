//! Per-tenant callback secrets: a tenant's callbacks are signed with its own
//! secret, and during a rotation's grace period with the new and the old one
//! (two `v1=`), so a receiver still holding the old secret verifies; after
//! the grace period only the new secret signs.

#[allow(dead_code)] // shared with relay.rs, which uses all of it
mod support;

use kairos_callback_relay::deliver::SIGNATURE_HEADER;
use kairos_callback_relay::verify;
use kairos_core::callback::CallbackState;
use kairos_core::protocol::ResultKind;
use kairos_core::store::TenantStore;
use kairos_core::tenant::{Tenant, TenantLimits};
use kairos_core::time::now_ms;
use kairos_store_sql::SqlStore;
use kairos_testkit::unique;
use std::sync::Arc;
use support::*;
use wiremock::ResponseTemplate;

async fn one_delivery(store: &Arc<SqlStore>, server: &wiremock::MockServer) -> (String, Vec<u8>) {
    let exec = finished_execution(store, &server.uri(), ResultKind::Succeeded).await;
    let relay = start(store.clone(), config(&unique("relay")));
    let (cb, _) = settled(store, &exec, CallbackState::Delivered).await;
    relay.stop().await;
    let requests = server.received_requests().await.expect("recording on");
    let req = requests
        .iter()
        .find(|r| header(r, "kairos-delivery-id") == cb.id)
        .expect("the delivery reached the receiver");
    (header(req, SIGNATURE_HEADER), req.body.clone())
}

async fn rotation_signs_with_both_secrets_during_the_grace_period(store: Arc<SqlStore>) {
    let now = now_ms();
    let tenant = Tenant {
        id: TENANT.into(),
        callback_secret: Some("old-secret".into()),
        previous_secret: None,
        previous_valid_until: None,
        limits: TenantLimits::default(),
        created_at: now,
    };
    assert!(store.tenant_create(&tenant).await.unwrap());
    let server = receiver(ResponseTemplate::new(200)).await;
    let t = || now_ms() / 1000;

    // Before any rotation: the tenant's own secret, not the configured one.
    let (sig, body) = one_delivery(&store, &server).await;
    assert_eq!(sig.matches("v1=").count(), 1, "{sig}");
    assert!(verify(b"old-secret", &sig, &body, t(), 300));
    assert!(!verify(SECRET, &sig, &body, t(), 300));

    // During the grace period: both.
    store
        .tenant_rotate_secret(TENANT, "new-secret", now_ms() + 60_000, now_ms())
        .await
        .unwrap()
        .expect("the tenant");
    let (sig, body) = one_delivery(&store, &server).await;
    assert_eq!(sig.matches("v1=").count(), 2, "{sig}");
    assert!(verify(b"new-secret", &sig, &body, t(), 300));
    assert!(
        verify(b"old-secret", &sig, &body, t(), 300),
        "a receiver with only the old secret still verifies"
    );

    // A rotation whose grace period is over: the new secret alone.
    store
        .tenant_rotate_secret(TENANT, "newest-secret", now_ms() - 1, now_ms())
        .await
        .unwrap()
        .expect("the tenant");
    let (sig, body) = one_delivery(&store, &server).await;
    assert_eq!(sig.matches("v1=").count(), 1, "{sig}");
    assert!(verify(b"newest-secret", &sig, &body, t(), 300));
    assert!(!verify(b"new-secret", &sig, &body, t(), 300));
}

#[tokio::test]
async fn sqlite_rotation_signs_with_both_secrets_during_the_grace_period() {
    rotation_signs_with_both_secrets_during_the_grace_period(sqlite().await.1).await;
}

#[tokio::test]
async fn mysql_rotation_signs_with_both_secrets_during_the_grace_period() {
    let Some((_, store)) = mysql().await else {
        return;
    };
    rotation_signs_with_both_secrets_during_the_grace_period(store).await;
}
