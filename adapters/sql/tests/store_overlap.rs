//! Store suite, overlap: `forbid` records skipped triggers, `replace` stops
//! or cancels the earlier execution, and cancelling a job asks its running
//! executions to stop — on SQLite and on MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobStatus, RetryPolicy};
use kairos_core::protocol::ResultKind::{Failed, Started, Succeeded};
use kairos_core::schedule::{OverlapPolicy, Schedule};
use kairos_core::store::{CallbackStore, ControlOutcome, Dispatch, History, JobStore, Maintenance};
use kairos_store_sql::SqlStore;
use support::{
    T0, claim, claim_due, create, executions, job_now, one_shot, recurring, result, tweak,
};

store_cases!(
    forbid_records_a_skipped_execution_while_one_runs,
    replace_stops_a_running_execution_and_cancels_a_pending_one,
    cancel_asks_running_executions_to_stop,
);

fn every_second(overlap: OverlapPolicy) -> Schedule {
    tweak(Schedule::every(1_000), |r| r.overlap = overlap)
}

async fn forbid_records_a_skipped_execution_while_one_runs(store: SqlStore) {
    let mut new = recurring("ov", every_second(OverlapPolicy::Forbid), T0);
    new.callback_url = Some("http://example.test/cb".into());
    let job = create(&store, new).await;
    let first = claim_due(&store, &job, T0).await;
    assert_eq!(first.len(), 1);

    assert!(claim_due(&store, &job, T0 + 1_000).await.is_empty());
    let execs = executions(&store, &job).await;
    assert_eq!(execs.len(), 2);
    let skipped = &execs[1];
    assert_eq!(skipped.status, ExecStatus::Skipped);
    assert_eq!(skipped.scheduled_at, T0 + 1_000);
    assert_eq!(skipped.finished_at, Some(T0 + 1_000));
    assert!(skipped.error.as_deref().unwrap().contains("forbid"));
    let history = store.execution_events("ov", &skipped.id).await.unwrap();
    assert_eq!(
        history.iter().map(|e| e.status).collect::<Vec<_>>(),
        [ExecStatus::Skipped]
    );
    let cbs = store
        .callbacks_for_execution("ov", &skipped.id)
        .await
        .unwrap();
    assert_eq!(cbs.len(), 1, "a skipped trigger is reported like any end");
    assert!(cbs[0].0.payload.contains("\"skipped\""));
    let j = job_now(&store, &job).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Running, Some(T0 + 2_000))
    );

    store
        .results_apply(&[result(&first[0], 1, Succeeded, T0 + 1_500)], T0 + 1_500)
        .await
        .unwrap();
    let third = claim_due(&store, &job, T0 + 2_000).await;
    assert_eq!(third.len(), 1, "nothing runs any more: the trigger fires");
}

async fn replace_stops_a_running_execution_and_cancels_a_pending_one(store: SqlStore) {
    let mut new = recurring("rp", every_second(OverlapPolicy::Replace), T0);
    new.retry = RetryPolicy {
        max_attempts: 3,
        backoff_ms: 10,
    };
    new.callback_url = Some("http://example.test/cb".into());
    let job = create(&store, new).await;
    let first = claim_due(&store, &job, T0).await;
    store
        .results_apply(&[result(&first[0], 1, Started, T0 + 10)], T0 + 10)
        .await
        .unwrap();

    let second = claim_due(&store, &job, T0 + 1_000).await;
    assert_eq!(second.len(), 1, "the new trigger runs");
    let old = store
        .execution_get("rp", &first[0].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        old.status,
        ExecStatus::Running,
        "a worker holds it: asked, not forced"
    );
    assert_eq!(old.stop_requested_at, Some(T0 + 1_000));
    let asked = store.executions_stop_requested(T0, 10).await.unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].execution_id, old.id);
    assert_eq!(
        (asked[0].attempt, asked[0].worker_id.as_deref()),
        (1, Some("w1"))
    );
    assert!(
        store
            .executions_stop_requested(T0 + 1_001, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The worker stops it: its failure is a cancellation, never retried.
    let applied = store
        .results_apply(&[result(&first[0], 1, Failed, T0 + 1_100)], T0 + 1_100)
        .await
        .unwrap();
    assert_eq!(applied[0].new_status, Some(ExecStatus::Cancelled));
    assert!(
        store
            .executions_stop_requested(T0, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // The second one was never published: it is cancelled at once.
    let third = claim_due(&store, &job, T0 + 2_000).await;
    assert_eq!(third.len(), 1);
    let gone = store
        .execution_get("rp", &second[0].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.status, ExecStatus::Cancelled);
    assert_eq!(gone.finished_at, Some(T0 + 2_000));
    assert!(gone.error.as_deref().unwrap().contains("replace"));
    let cbs = store.callbacks_for_execution("rp", &gone.id).await.unwrap();
    assert_eq!(cbs.len(), 1);
    let states: Vec<_> = executions(&store, &job)
        .await
        .iter()
        .map(|e| e.status)
        .collect();
    assert_eq!(
        states,
        [
            ExecStatus::Cancelled,
            ExecStatus::Cancelled,
            ExecStatus::Pending
        ]
    );
}

async fn cancel_asks_running_executions_to_stop(store: SqlStore) {
    let job = create(&store, one_shot("cx", T0)).await;
    let w = claim(&store, &job, None).await;
    store
        .results_apply(&[result(&w, 1, Started, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    let ControlOutcome::Done(j) = store.job_cancel("cx", &job.id, T0 + 2).await.unwrap() else {
        panic!("cancel must apply");
    };
    assert_eq!(j.status, JobStatus::Cancelled);
    let e = store
        .execution_get("cx", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.status, e.stop_requested_at),
        (ExecStatus::Running, Some(T0 + 2))
    );
    let asked = store.executions_stop_requested(0, 10).await.unwrap();
    assert_eq!(asked.len(), 1);
    // Finishing before the stop arrived counts as a success.
    let applied = store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 3)], T0 + 3)
        .await
        .unwrap();
    assert_eq!(applied[0].new_status, Some(ExecStatus::Succeeded));
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Cancelled);
}
