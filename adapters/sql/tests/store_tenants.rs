//! Store suite, tenants: tenants with their limits and secret rotation, API
//! keys, the audit trail and the live-jobs count — on every database.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::job::JobStatus;
use kairos_core::store::{JobStore, TenantStore};
use kairos_core::tenant::{ApiKey, AuditEntry, Role, Tenant, TenantLimits};
use kairos_store_sql::SqlStore;
use support::{T0, create, one_shot};

store_cases!(
    tenants_limits_and_rotation,
    keys_are_listed_newest_first_and_revoked_once,
    audit_pages_newest_first,
    live_jobs_count_only_unfinished_ones,
);

fn tenant(id: &str) -> Tenant {
    Tenant {
        id: id.to_string(),
        callback_secret: None,
        previous_secret: None,
        previous_valid_until: None,
        limits: TenantLimits::default(),
        created_at: T0,
    }
}

fn key(prefix: &str, tenant: &str, at: i64) -> ApiKey {
    ApiKey {
        prefix: prefix.to_string(),
        tenant: tenant.to_string(),
        role: Role::Write,
        secret_hash: "ab".repeat(32),
        name: Some("ci".into()),
        expires_at: None,
        revoked_at: None,
        created_at: at,
    }
}

async fn tenants_limits_and_rotation(store: SqlStore) {
    assert!(store.tenant_create(&tenant("acme")).await.unwrap());
    assert!(
        !store.tenant_create(&tenant("acme")).await.unwrap(),
        "a second create of one id changes nothing"
    );
    let ids: Vec<String> = store
        .tenants_list()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(ids, ["acme", "default"], "listed by id");

    let limits = TenantLimits {
        create_rate_per_sec: Some(2.5),
        create_burst: Some(10),
        max_live_jobs: Some(100),
        action_rate_per_sec: Some(0.5),
        action_burst: Some(3),
    };
    assert!(
        store
            .tenant_set_limits("acme", &limits, T0 + 1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .tenant_set_limits("nobody", &limits, T0)
            .await
            .unwrap()
    );
    let got = store.tenant_get("acme").await.unwrap().expect("acme");
    assert_eq!(got.limits, limits);
    // Limits back to the defaults: the nulls round-trip too.
    let none = TenantLimits::default();
    assert!(
        store
            .tenant_set_limits("acme", &none, T0 + 2)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .tenant_get("acme")
            .await
            .unwrap()
            .expect("acme")
            .limits,
        none
    );

    let first = store
        .tenant_rotate_secret("acme", "s1", T0 + 100, T0 + 3)
        .await
        .unwrap()
        .expect("acme");
    assert_eq!(first.callback_secret.as_deref(), Some("s1"));
    assert_eq!(
        first.previous_secret, None,
        "it signed with the configured secret"
    );
    let second = store
        .tenant_rotate_secret("acme", "s2", T0 + 200, T0 + 4)
        .await
        .unwrap()
        .expect("acme");
    assert_eq!(
        (
            second.callback_secret.as_deref(),
            second.previous_secret.as_deref(),
            second.previous_valid_until
        ),
        (Some("s2"), Some("s1"), Some(T0 + 200))
    );
    assert!(
        store
            .tenant_rotate_secret("nobody", "x", T0, T0)
            .await
            .unwrap()
            .is_none()
    );
}

async fn keys_are_listed_newest_first_and_revoked_once(store: SqlStore) {
    assert!(store.tenant_create(&tenant("acme")).await.unwrap());
    assert!(store.api_key_create(&key("p1", "acme", T0)).await.unwrap());
    assert!(
        store
            .api_key_create(&key("p2", "acme", T0 + 1))
            .await
            .unwrap()
    );
    assert!(
        store
            .api_key_create(&key("p3", "default", T0 + 2))
            .await
            .unwrap()
    );
    assert!(
        !store.api_key_create(&key("p1", "acme", T0)).await.unwrap(),
        "a taken prefix"
    );
    assert!(
        !store
            .api_key_create(&key("p4", "nobody", T0))
            .await
            .unwrap(),
        "an unknown tenant"
    );
    assert_eq!(
        store.api_key_get("p1").await.unwrap(),
        Some(key("p1", "acme", T0))
    );
    let prefixes = |keys: Vec<ApiKey>| keys.into_iter().map(|k| k.prefix).collect::<Vec<_>>();
    assert_eq!(
        prefixes(store.api_keys_list(Some("acme")).await.unwrap()),
        ["p2", "p1"]
    );
    assert_eq!(
        prefixes(store.api_keys_list(None).await.unwrap()),
        ["p3", "p2", "p1"]
    );

    assert!(
        store
            .api_key_revoke("p1", Some("default"), T0 + 5)
            .await
            .unwrap()
            .is_none(),
        "another tenant's key is not found"
    );
    let revoked = store
        .api_key_revoke("p1", Some("acme"), T0 + 5)
        .await
        .unwrap()
        .expect("p1");
    assert_eq!(revoked.revoked_at, Some(T0 + 5));
    let again = store
        .api_key_revoke("p1", None, T0 + 9)
        .await
        .unwrap()
        .expect("p1");
    assert_eq!(again.revoked_at, Some(T0 + 5), "the first revocation stays");
}

async fn audit_pages_newest_first(store: SqlStore) {
    for i in 0..5 {
        let tenant = if i % 2 == 0 { "acme" } else { "default" };
        store
            .audit_append(&AuditEntry {
                id: 0,
                tenant: tenant.into(),
                actor: "cli".into(),
                action: "job.create".into(),
                target: format!("job-{i}"),
                at: T0 + i,
            })
            .await
            .unwrap();
    }
    let first = store.audit_list(Some("acme"), 2, None).await.unwrap();
    let targets = |p: &[AuditEntry]| p.iter().map(|e| e.target.clone()).collect::<Vec<_>>();
    assert_eq!(targets(&first.items), ["job-4", "job-2"]);
    let rest = store
        .audit_list(Some("acme"), 2, first.next_cursor.as_deref())
        .await
        .unwrap();
    assert_eq!(targets(&rest.items), ["job-0"]);
    assert_eq!(rest.next_cursor, None);
    let all = store.audit_list(None, 10, None).await.unwrap();
    assert_eq!(all.items.len(), 5);
    assert!(
        all.items.windows(2).all(|w| w[0].id > w[1].id),
        "newest first"
    );
}

async fn live_jobs_count_only_unfinished_ones(store: SqlStore) {
    let a = create(&store, one_shot("acme", T0)).await;
    create(&store, one_shot("acme", T0)).await;
    create(&store, one_shot("other", T0)).await;
    assert_eq!(store.jobs_count_live("acme").await.unwrap(), 2);
    store.job_cancel("acme", &a.id, T0).await.unwrap();
    let cancelled = store.job_get("acme", &a.id).await.unwrap().expect("job");
    assert_eq!(cancelled.status, JobStatus::Cancelled);
    assert_eq!(store.jobs_count_live("acme").await.unwrap(), 1);
    assert_eq!(store.jobs_count_live("nobody").await.unwrap(), 0);
}
