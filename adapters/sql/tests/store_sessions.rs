//! Store suite, issue 35: dashboard sessions (created, read by the hash of
//! their id, deleted, purged once expired) and a job's sensitive params
//! paths (stored with the job, changed by an update, none by default) — on
//! every database.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::store::{JobStore, JobUpdate, SessionStore, UpdateOutcome};
use kairos_core::tenant::UiSession;
use kairos_store_sql::SqlStore;
use support::{T0, create, one_shot};

store_cases!(
    sessions_are_kept_by_hash_until_deleted_or_expired,
    sensitive_paths_are_stored_and_changed,
);

fn session(hash: &str, prefix: &str, expires_at: i64) -> UiSession {
    UiSession {
        id_hash: hash.to_string(),
        key_prefix: prefix.to_string(),
        created_at: T0,
        expires_at,
    }
}

async fn sessions_are_kept_by_hash_until_deleted_or_expired(store: SqlStore) {
    let (a, b, c) = ("a".repeat(64), "b".repeat(64), "c".repeat(64));
    for s in [
        session(&a, "pfx_a", T0 + 1_000),
        session(&b, "pfx_b", T0 + 5_000),
        session(&c, "pfx_c", T0 + 9_000),
    ] {
        store.ui_session_create(&s).await.unwrap();
    }
    assert_eq!(
        store.ui_session_get(&a).await.unwrap(),
        Some(session(&a, "pfx_a", T0 + 1_000)),
        "times come back to the millisecond"
    );
    assert_eq!(store.ui_session_get(&"d".repeat(64)).await.unwrap(), None);
    store.ui_session_delete(&b).await.unwrap();
    store.ui_session_delete(&b).await.unwrap();
    assert_eq!(store.ui_session_get(&b).await.unwrap(), None, "logged out");
    // Expired at T0 + 1 s: only `a` goes.
    assert_eq!(store.ui_sessions_purge(T0 + 1_000).await.unwrap(), 1);
    assert_eq!(store.ui_session_get(&a).await.unwrap(), None);
    assert!(store.ui_session_get(&c).await.unwrap().is_some());
}

async fn sensitive_paths_are_stored_and_changed(store: SqlStore) {
    let plain = create(&store, one_shot("default", T0 + 60_000)).await;
    assert!(plain.sensitive_params.is_empty());
    let mut marked = one_shot("default", T0 + 60_000);
    marked.sensitive_params = vec!["headers.X-Custom".into(), "accounts.*.pin".into()];
    let job = create(&store, marked).await;
    let read = store.job_get("default", &job.id).await.unwrap().unwrap();
    assert_eq!(
        read.sensitive_params,
        ["headers.X-Custom", "accounts.*.pin"]
    );
    let u = JobUpdate {
        schedule: read.schedule.clone(),
        reschedule: false,
        params: read.params.clone(),
        sensitive_params: vec!["pin".into()],
        callback_url: read.callback_url.clone(),
        retry: read.retry,
        timeout_ms: read.timeout_ms,
        worker_group: read.worker_group.clone(),
        priority: read.priority,
        max_concurrency: None,
    };
    let UpdateOutcome::Done(changed) = store
        .job_update("default", &job.id, read.version, &u, T0 + 1)
        .await
        .unwrap()
    else {
        panic!("the update applies");
    };
    assert_eq!(changed.sensitive_params, ["pin"]);
    let cleared = JobUpdate {
        sensitive_params: Vec::new(),
        ..u
    };
    let UpdateOutcome::Done(changed) = store
        .job_update("default", &job.id, changed.version, &cleared, T0 + 2)
        .await
        .unwrap()
    else {
        panic!("the update applies");
    };
    assert!(changed.sensitive_params.is_empty());
}
