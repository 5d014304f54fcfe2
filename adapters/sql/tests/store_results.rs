//! Store suite, worker results: every arrival order, duplicates and stale
//! attempts, retries, recurring jobs and the callback outbox — on SQLite and
//! on MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobStatus, RetryPolicy};
use kairos_core::protocol::ResultKind::{Failed, Started, Succeeded, TimedOut};
use kairos_core::store::{CallbackStore, Dispatch, DispatchedTo, History};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, job_now, one_shot, result};

store_cases!(
    results_in_any_order_apply_once,
    a_final_result_records_when_the_handler_started,
    a_batch_sees_its_own_earlier_results,
    failure_with_attempts_left_retries_later,
    callback_row_exists_exactly_for_terminal_executions_with_a_url,
    recurring_jobs_go_back_to_scheduled,
);

fn status_of(applied: &[kairos_core::store::Applied]) -> Vec<Option<ExecStatus>> {
    applied.iter().map(|a| a.new_status).collect()
}

async fn results_in_any_order_apply_once(store: SqlStore) {
    let job = create(&store, one_shot("r", T0)).await;
    let w = claim(&store, &job, None).await;
    // The final result overtakes `started` and the dispatch confirm.
    let applied = store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 9)], T0 + 10)
        .await
        .unwrap();
    assert_eq!(status_of(&applied), [Some(ExecStatus::Succeeded)]);
    let late = [
        result(&w, 1, Started, T0 + 1),
        result(&w, 1, Succeeded, T0 + 9),
        result(&w, 1, Failed, T0 + 9),
        result(&w, 2, Succeeded, T0 + 9),
    ];
    let applied = store.results_apply(&late, T0 + 11).await.unwrap();
    assert_eq!(status_of(&applied), [None, None, None, None]);
    let sent = DispatchedTo {
        execution_id: w.execution_id.clone(),
        attempt: 1,
        worker_id: "w1".into(),
    };
    assert_eq!(
        store
            .executions_mark_dispatched(&[sent], T0 + 12)
            .await
            .unwrap()
            .dispatched,
        0
    );

    let e = store
        .execution_get("r", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.status, ExecStatus::Succeeded);
    assert_eq!(e.output, Some(serde_json::json!({"ok": true})));
    assert_eq!(
        (e.error, e.finished_at, e.started_at),
        (None, Some(T0 + 9), None)
    );
    assert_eq!(e.worker_id.as_deref(), Some("w1"));
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Succeeded);
    let unknown = kairos_core::protocol::ResultMsg {
        started_at: None,
        traceparent: None,
        execution_id: "nope".into(),
        ..result(&w, 1, Started, T0)
    };
    assert_eq!(
        status_of(&store.results_apply(&[unknown], T0).await.unwrap()),
        [None]
    );
    assert!(store.results_apply(&[], T0).await.unwrap().is_empty());
}

async fn a_batch_sees_its_own_earlier_results(store: SqlStore) {
    let mut new = one_shot("b", T0);
    new.timeout_ms = Some(1_000);
    let job = create(&store, new).await;
    let w = claim(&store, &job, None).await;
    let batch = [
        result(&w, 1, Started, T0 + 1),
        result(&w, 1, Started, T0 + 2),
        result(&w, 1, Failed, T0 + 5),
        result(&w, 1, Succeeded, T0 + 6),
    ];
    let applied = store.results_apply(&batch, T0 + 7).await.unwrap();
    assert_eq!(
        status_of(&applied),
        [
            Some(ExecStatus::Running),
            None,
            Some(ExecStatus::Failed),
            None
        ]
    );
    let e = store
        .execution_get("b", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.status, e.started_at, e.finished_at),
        (ExecStatus::Failed, Some(T0 + 1), Some(T0 + 5))
    );
    assert_eq!(e.error.as_deref(), Some("boom"));
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Failed);
    let states: Vec<ExecStatus> = store
        .execution_events("b", &w.execution_id)
        .await
        .unwrap()
        .iter()
        .map(|e| e.status)
        .collect();
    assert_eq!(
        states,
        [ExecStatus::Pending, ExecStatus::Running, ExecStatus::Failed]
    );
}

async fn failure_with_attempts_left_retries_later(store: SqlStore) {
    let mut new = one_shot("re", T0);
    new.retry = RetryPolicy {
        max_attempts: 2,
        backoff_ms: 100,
    };
    new.callback_url = Some("http://example.test/cb".into());
    let job = create(&store, new).await;
    let w = claim(&store, &job, None).await;
    store
        .results_apply(&[result(&w, 1, Started, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    let applied = store
        .results_apply(&[result(&w, 1, Failed, T0 + 2)], T0 + 3)
        .await
        .unwrap();
    assert_eq!(status_of(&applied), [Some(ExecStatus::Pending)]);
    let e = store
        .execution_get("re", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.status, e.attempt, e.not_before),
        (ExecStatus::Pending, 2, T0 + 103)
    );
    assert_eq!(
        (e.worker_id, e.started_at, e.finished_at),
        (None, None, None)
    );
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Running);
    assert!(
        store
            .callbacks_for_execution("re", &w.execution_id)
            .await
            .unwrap()
            .is_empty()
    );

    assert!(
        store
            .executions_find_unpublished(T0 + 102, 10, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .is_empty()
    );
    let again = store
        .executions_find_unpublished(T0 + 103, 10, &kairos_core::worker::Routable::Any)
        .await
        .unwrap();
    assert_eq!((again.len(), again[0].attempt), (1, 2));
    // Attempt 1's late results change nothing now.
    let stale = [
        result(&w, 1, Succeeded, T0 + 4),
        result(&w, 1, Started, T0 + 4),
    ];
    assert_eq!(
        status_of(&store.results_apply(&stale, T0 + 4).await.unwrap()),
        [None, None]
    );

    let events = store.execution_events("re", &w.execution_id).await.unwrap();
    let trail: Vec<(u32, ExecStatus)> = events.iter().map(|e| (e.attempt, e.status)).collect();
    assert_eq!(
        trail,
        [
            (1, ExecStatus::Pending),
            (1, ExecStatus::Running),
            (1, ExecStatus::Failed),
            (2, ExecStatus::Pending)
        ]
    );
    assert_eq!(events[2].error.as_deref(), Some("boom"));

    let applied = store
        .results_apply(&[result(&w, 2, TimedOut, T0 + 200)], T0 + 200)
        .await
        .unwrap();
    assert_eq!(status_of(&applied), [Some(ExecStatus::TimedOut)]);
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Failed);
    assert_eq!(
        store
            .callbacks_for_execution("re", &w.execution_id)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn callback_row_exists_exactly_for_terminal_executions_with_a_url(store: SqlStore) {
    let mut with_url = one_shot("cb", T0);
    with_url.callback_url = Some("http://example.test/hook".into());
    let with_url = create(&store, with_url).await;
    let without = create(&store, one_shot("cb", T0)).await;
    let a = claim(&store, &with_url, None).await;
    let b = claim(&store, &without, None).await;
    store
        .results_apply(&[result(&a, 1, Started, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    assert!(
        store
            .callbacks_for_execution("cb", &a.execution_id)
            .await
            .unwrap()
            .is_empty()
    );
    let done = [
        result(&a, 1, Succeeded, T0 + 5),
        result(&b, 1, Succeeded, T0 + 5),
    ];
    store.results_apply(&done, T0 + 6).await.unwrap();
    assert!(
        store
            .callbacks_for_execution("cb", &b.execution_id)
            .await
            .unwrap()
            .is_empty()
    );

    let cbs = store
        .callbacks_for_execution("cb", &a.execution_id)
        .await
        .unwrap();
    assert_eq!(cbs.len(), 1);
    let (cb, attempts) = &cbs[0];
    assert!(attempts.is_empty());
    assert_eq!(
        (
            cb.url.as_str(),
            cb.subject.job_id().unwrap_or_default(),
            cb.tenant.as_str()
        ),
        ("http://example.test/hook", with_url.id.as_str(), "cb")
    );
    assert_eq!((cb.attempts, cb.next_attempt_at), (0, T0 + 6));
    let exec = store
        .execution_get("cb", &a.execution_id)
        .await
        .unwrap()
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(&cb.payload).unwrap();
    assert_eq!(body, kairos_core::callback::payload(&exec));
    assert_eq!(body["status"], "succeeded");
    assert_eq!(store.callbacks_next_due().await.unwrap(), Some(T0 + 6));
}

async fn recurring_jobs_go_back_to_scheduled(store: SqlStore) {
    let job = create(&store, support::cron("cr", T0)).await;
    let w1 = claim(&store, &job, Some(T0 + 1_000)).await;
    let job1 = job_now(&store, &job).await;
    let w2 = claim(&store, &job1, Some(T0 + 2_000)).await;
    store
        .results_apply(&[result(&w1, 1, Failed, T0 + 1_100)], T0 + 1_100)
        .await
        .unwrap();
    let after = job_now(&store, &job).await;
    assert_eq!(
        (after.status, after.next_trigger_at),
        (JobStatus::Scheduled, Some(T0 + 2_000))
    );
    // A second result finds the job already rescheduled: the job stays as it is.
    store
        .results_apply(&[result(&w2, 1, Succeeded, T0 + 1_200)], T0 + 1_200)
        .await
        .unwrap();
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Scheduled);
}

/// A final result applied before its `started` (another dispatcher took the
/// `started`) still records when the handler started, from the result.
async fn a_final_result_records_when_the_handler_started(store: SqlStore) {
    let job = create(&store, one_shot("r", T0)).await;
    let w = claim(&store, &job, None).await;
    let mut done = result(&w, 1, Succeeded, T0 + 9);
    done.started_at = Some(T0 + 2);
    store.results_apply(&[done], T0 + 10).await.unwrap();
    let late = store
        .results_apply(&[result(&w, 1, Started, T0 + 3)], T0 + 11)
        .await
        .unwrap();
    assert_eq!(
        status_of(&late),
        [None],
        "the late `started` changes nothing"
    );
    let e = store
        .execution_get("r", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.status, ExecStatus::Succeeded);
    assert_eq!((e.started_at, e.finished_at), (Some(T0 + 2), Some(T0 + 9)));

    // A `started` applied first keeps its own time.
    let job = create(&store, one_shot("r", T0)).await;
    let w = claim(&store, &job, None).await;
    store
        .results_apply(&[result(&w, 1, Started, T0 + 1)], T0 + 2)
        .await
        .unwrap();
    let mut done = result(&w, 1, Succeeded, T0 + 9);
    done.started_at = Some(T0 + 5);
    store.results_apply(&[done], T0 + 10).await.unwrap();
    let e = store
        .execution_get("r", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.started_at, Some(T0 + 1));
}
