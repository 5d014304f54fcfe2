//! Store suite, issue 45: retention. The purge statements delete finished
//! history older than a cutoff (a fixed clock: every time is arithmetic on
//! `T0`) with what hangs off it, a bounded batch at a time, per tenant — and
//! never anything unfinished: running executions, live jobs, runs that have
//! not ended, or executions a run or a pending delivery still needs. A
//! job's last result and failures in a row stay on the job row. On every
//! database.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::callback::CallbackAttempt;
use kairos_core::job::{FAILING_AFTER, JobHealth, JobStatus};
use kairos_core::protocol::ResultKind::{Failed, Started, Succeeded};
use kairos_core::protocol::{LogLevel, LogLine, LogMsg};
use kairos_core::retention::{History, RetentionStore, TenantRetention};
use kairos_core::store::{
    CallbackNext, CallbackStore, Dispatch, History as _, JobFilter, JobStore, LogLimits, LogStore,
    SessionStore, TenantStore,
};
use kairos_core::tenant::{AuditEntry, Tenant, UiSession};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;
use kairos_core::workflow::{NewWorkflow, RunStatus, Workflow, WorkflowCreated, WorkflowStore};
use kairos_store_sql::SqlStore;
use serde_json::json;
use support::{T0, claim, create, id, job_now, one_shot, result};

store_cases!(
    finished_executions_go_with_their_events_logs_and_deliveries,
    unfinished_executions_and_pending_deliveries_stay,
    one_shot_jobs_go_once_finished_and_their_executions_gone,
    a_jobs_health_stays_after_its_executions_are_purged,
    ended_runs_go_with_their_nodes_and_keep_their_executions_until_then,
    audit_sessions_and_overrides,
    purges_are_bounded_batches_oldest_first,
);

/// A one-shot job of `tenant` claimed at `T0` and ended with `kind` at
/// `at`; its execution id.
async fn finished(
    store: &SqlStore,
    tenant: &str,
    kind: kairos_core::protocol::ResultKind,
    at: Millis,
) -> String {
    let job = create(store, one_shot(tenant, T0)).await;
    let w = claim(store, &job, None).await;
    store
        .results_apply(&[result(&w, 1, kind, at)], at)
        .await
        .unwrap();
    w.execution_id
}

async fn exists(store: &SqlStore, tenant: &str, execution_id: &str) -> bool {
    store
        .execution_get(tenant, execution_id)
        .await
        .unwrap()
        .is_some()
}

async fn purge(store: &SqlStore, kind: History, tenant: &str, before: Millis) -> u64 {
    store
        .history_purge(kind, Some(tenant), before, 500)
        .await
        .unwrap()
}

async fn finished_executions_go_with_their_events_logs_and_deliveries(store: SqlStore) {
    let old = finished(&store, "default", Succeeded, T0 + 1).await;
    let failed = finished(&store, "default", Failed, T0 + 2).await;
    let newer = finished(&store, "default", Succeeded, T0 + 50).await;
    let other_tenant = finished(&store, "acme", Succeeded, T0 + 1).await;
    let line = LogMsg {
        v: kairos_core::protocol::PROTOCOL_VERSION,
        execution_id: old.clone(),
        attempt: 1,
        worker_id: "w1".into(),
        progress: None,
        lines: vec![LogLine {
            at: T0,
            level: LogLevel::Info,
            message: "hello".into(),
        }],
    };
    store
        .logs_append(&[line], &LogLimits::default(), T0)
        .await
        .unwrap();
    assert_eq!(
        store
            .history_backlog(History::Executions, Some("default"), T0 + 10, 1_000)
            .await
            .unwrap(),
        2
    );
    // Nothing finished before T0 + 1.
    assert_eq!(
        purge(&store, History::Executions, "default", T0 + 1).await,
        0
    );
    assert_eq!(
        purge(&store, History::Executions, "default", T0 + 10).await,
        2
    );
    assert!(!exists(&store, "default", &old).await);
    assert!(!exists(&store, "default", &failed).await);
    assert!(
        exists(&store, "default", &newer).await,
        "finished after the cutoff"
    );
    assert!(
        exists(&store, "acme", &other_tenant).await,
        "another tenant's history follows its own retention"
    );
    let logs = store.logs_page(&old, None, 10).await.unwrap();
    assert!(logs.items.is_empty(), "log lines go with their execution");
    assert_eq!(
        store
            .history_backlog(History::Executions, Some("default"), T0 + 10, 1_000)
            .await
            .unwrap(),
        0
    );
    // Every tenant at once.
    assert_eq!(
        store
            .history_purge(History::Executions, None, T0 + 100, 500)
            .await
            .unwrap(),
        2
    );
}

async fn unfinished_executions_and_pending_deliveries_stay(store: SqlStore) {
    // Running since T0: never purged, however old.
    let job = create(&store, one_shot("default", T0)).await;
    let running = claim(&store, &job, None).await;
    store
        .results_apply(&[result(&running, 1, Started, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    // Finished, with a callback still to deliver.
    let with_cb = support::terminal_with_callbacks(&store, "default", 1).await;
    let far = T0 + 86_400_000;
    assert_eq!(purge(&store, History::Executions, "default", far).await, 0);
    assert!(exists(&store, "default", &running.execution_id).await);
    assert!(exists(&store, "default", &with_cb[0]).await);
    // Delivered: the execution and its delivery go.
    let claimed = store
        .callbacks_claim_due("relay", far, 60_000, 10)
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    let ok = CallbackAttempt {
        attempt: 1,
        at: far,
        status_code: Some(204),
        latency_ms: 5,
        error: None,
    };
    assert!(
        store
            .callback_record_attempt(&claimed[0].id, "relay", &ok, CallbackNext::Delivered, far)
            .await
            .unwrap()
    );
    assert_eq!(purge(&store, History::Executions, "default", far).await, 1);
    assert!(!exists(&store, "default", &with_cb[0]).await);
    assert!(
        store
            .callbacks_for_execution("default", &with_cb[0])
            .await
            .unwrap()
            .is_empty(),
        "its deliveries went with it"
    );
    assert!(exists(&store, "default", &running.execution_id).await);
}

async fn one_shot_jobs_go_once_finished_and_their_executions_gone(store: SqlStore) {
    let done = create(&store, one_shot("default", T0)).await;
    let w = claim(&store, &done, None).await;
    store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    let waiting = create(&store, one_shot("default", T0 + 3_600_000)).await;
    let recurring = create(&store, support::cron("default", T0)).await;
    let far = T0 + 86_400_000;
    // Its execution is still kept: the job stays with it.
    assert_eq!(purge(&store, History::Jobs, "default", far).await, 0);
    assert_eq!(purge(&store, History::Executions, "default", far).await, 1);
    assert_eq!(
        store
            .history_backlog(History::Jobs, Some("default"), far, 100)
            .await
            .unwrap(),
        1
    );
    assert_eq!(purge(&store, History::Jobs, "default", far).await, 1);
    assert!(store.job_get("default", &done.id).await.unwrap().is_none());
    assert_eq!(
        job_now(&store, &waiting).await.status,
        JobStatus::Scheduled,
        "a live job stays"
    );
    assert!(
        store
            .job_get("default", &recurring.id)
            .await
            .unwrap()
            .is_some(),
        "only one-shot jobs go"
    );
}

async fn a_jobs_health_stays_after_its_executions_are_purged(store: SqlStore) {
    // A recurring job failing enough times in a row to be `failing`, then
    // its history purged.
    let job = create(&store, support::cron("default", T0)).await;
    for n in 0..FAILING_AFTER {
        let at = T0 + 1_000 * i64::from(n);
        let now = job_now(&store, &job).await;
        let mut now = now;
        now.next_trigger_at = Some(at);
        let w = claim(&store, &now, Some(at + 1_000)).await;
        store
            .results_apply(&[result(&w, 1, Failed, at + 10)], at + 10)
            .await
            .unwrap();
    }
    let before = job_now(&store, &job).await;
    assert_eq!(before.fail_streak, FAILING_AFTER);
    assert_eq!(before.health(), JobHealth::Failing);
    let far = T0 + 86_400_000;
    assert_eq!(
        purge(&store, History::Executions, "default", far).await,
        u64::from(FAILING_AFTER)
    );
    assert!(support::executions(&store, &job).await.is_empty());
    let after = job_now(&store, &job).await;
    assert_eq!(after.fail_streak, FAILING_AFTER);
    assert_eq!(after.last_result, before.last_result);
    assert_eq!(after.last_result_at, before.last_result_at);
    assert_eq!(after.health(), JobHealth::Failing);
    let failing = JobFilter {
        status: None,
        handler: None,
        name_contains: None,
        health: Some(JobHealth::Failing),
        limit: 10,
        cursor: None,
    };
    let listed = store.job_list("default", &failing).await.unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .map(|j| j.id.as_str())
            .collect::<Vec<_>>(),
        [job.id.as_str()],
        "the job list reads health from the job row"
    );
}

async fn ended_runs_go_with_their_nodes_and_keep_their_executions_until_then(store: SqlStore) {
    let def: Workflow = serde_json::from_value(json!({
        "nodes": [{"id": "a", "handler": "h"}, {"id": "b", "handler": "h"}],
        "edges": [{"from": "a", "to": "b"}]
    }))
    .unwrap();
    let new = NewWorkflow {
        id: id(),
        tenant: "wf".into(),
        name: "wf".into(),
        definition: def,
        client_request_id: None,
        request_hash: None,
        run_now: Some(id()),
        schedule: None,
        next_trigger_at: None,
        callback_url: None,
        created_at: T0,
    };
    let WorkflowCreated::Created(_, Some(run)) = store.workflow_create(new).await.unwrap() else {
        panic!("a new workflow with a run");
    };
    let due = |now| {
        let store = store.clone();
        async move {
            store
                .executions_find_unpublished(now, 10, &Routable::Any)
                .await
                .unwrap()
        }
    };
    let a = due(T0).await;
    assert_eq!(a.len(), 1);
    store
        .results_apply(&[result(&a[0], 1, Succeeded, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    let far = T0 + 86_400_000;
    // `a` finished, but its output feeds `b` until the run ends.
    assert_eq!(purge(&store, History::Executions, "wf", far).await, 0);
    assert_eq!(purge(&store, History::WorkflowRuns, "wf", far).await, 0);
    let b = due(T0 + 2).await;
    assert_eq!(b.len(), 1);
    assert!(b[0].parent_outputs.is_some(), "b sees a's output");
    store
        .results_apply(&[result(&b[0], 1, Succeeded, T0 + 3)], T0 + 3)
        .await
        .unwrap();
    let ended = store
        .workflow_run_get("wf", &run.workflow_id, &run.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.run.status, RunStatus::Succeeded);
    assert_eq!(purge(&store, History::WorkflowRuns, "wf", T0 + 3).await, 0);
    assert_eq!(purge(&store, History::WorkflowRuns, "wf", far).await, 1);
    assert!(
        store
            .workflow_run_get("wf", &run.workflow_id, &run.id)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(purge(&store, History::Executions, "wf", far).await, 2);
    // The workflow and its node jobs stay: they are not history.
    assert!(
        store
            .workflow_get("wf", &run.workflow_id)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(purge(&store, History::Jobs, "wf", far).await, 0);
}

async fn audit_sessions_and_overrides(store: SqlStore) {
    for at in [T0, T0 + 10] {
        let e = AuditEntry {
            id: 0,
            tenant: "default".into(),
            actor: "cli".into(),
            action: "tenant.set_limits".into(),
            target: "default".into(),
            at,
        };
        store.audit_append(&e).await.unwrap();
    }
    assert_eq!(purge(&store, History::Audit, "default", T0 + 5).await, 1);
    let left = store.audit_list(Some("default"), 10, None).await.unwrap();
    assert_eq!(left.items.len(), 1);
    assert_eq!(left.items[0].at, T0 + 10);

    let session = UiSession {
        id_hash: "a".repeat(64),
        key_prefix: "pfx".into(),
        created_at: T0,
        expires_at: T0 + 1_000,
    };
    store.ui_session_create(&session).await.unwrap();
    let sessions = |before| store.history_purge(History::Sessions, None, before, 10);
    assert_eq!(sessions(T0 + 500).await.unwrap(), 0);
    assert_eq!(sessions(T0 + 2_000).await.unwrap(), 1);
    assert!(
        store
            .ui_session_get(&session.id_hash)
            .await
            .unwrap()
            .is_none()
    );

    let acme = Tenant {
        id: "acme".into(),
        callback_secret: None,
        previous_secret: None,
        previous_valid_until: None,
        limits: Default::default(),
        created_at: T0,
    };
    assert!(store.tenant_create(&acme).await.unwrap());
    let short = TenantRetention {
        executions_ms: Some(60_000),
        audit_ms: Some(400 * 86_400_000),
        ..TenantRetention::default()
    };
    assert!(
        store
            .tenant_set_retention("acme", &short, T0 + 1)
            .await
            .unwrap()
    );
    assert!(
        !store
            .tenant_set_retention("nobody", &short, T0 + 1)
            .await
            .unwrap()
    );
    assert_eq!(store.tenant_retention("acme").await.unwrap(), Some(short));
    assert_eq!(store.tenant_retention("nobody").await.unwrap(), None);
    let all = store.tenants_retention().await.unwrap();
    assert_eq!(
        all,
        vec![
            ("acme".to_string(), short),
            ("default".to_string(), TenantRetention::default())
        ]
    );
    let none = TenantRetention::default();
    assert!(
        store
            .tenant_set_retention("acme", &none, T0 + 2)
            .await
            .unwrap()
    );
    assert_eq!(store.tenant_retention("acme").await.unwrap(), Some(none));
}

async fn purges_are_bounded_batches_oldest_first(store: SqlStore) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(finished(&store, "default", Succeeded, T0 + 1 + i).await);
    }
    let far = T0 + 86_400_000;
    let batch = |n| store.history_purge(History::Executions, Some("default"), far, n);
    assert_eq!(batch(2).await.unwrap(), 2);
    assert!(!exists(&store, "default", &ids[0]).await);
    assert!(!exists(&store, "default", &ids[1]).await);
    assert!(
        exists(&store, "default", &ids[2]).await,
        "the oldest go first"
    );
    assert_eq!(batch(0).await.unwrap(), 0);
    assert_eq!(
        store
            .history_backlog(History::Executions, Some("default"), far, 2)
            .await
            .unwrap(),
        2,
        "the backlog is counted up to its cap"
    );
    assert_eq!(batch(10).await.unwrap(), 3);
}
