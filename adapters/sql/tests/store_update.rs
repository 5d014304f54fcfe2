//! Store suite, `job_update` (PATCH): the version check, what may change in
//! which state, and the next trigger recomputed from the new schedule — on
//! SQLite and on MySQL.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::job::{Job, JobStatus, RetryPolicy};
use kairos_core::protocol::ResultKind::Succeeded;
use kairos_core::schedule::{OverlapPolicy, Schedule};
use kairos_core::store::{Dispatch, JobStore, JobUpdate, UpdateOutcome};
use kairos_store_sql::SqlStore;
use support::{T0, claim, claim_due, create, job_now, one_shot, recurring, result, tweak};

store_cases!(
    changes_apply_only_at_the_version_read,
    a_new_schedule_moves_the_next_trigger,
    a_closed_window_ends_the_job_when_nothing_runs,
    a_claim_runs_the_job_as_stored_not_as_first_scanned,
);

/// The job's definition as an update that changes nothing.
fn same(job: &Job) -> JobUpdate {
    JobUpdate {
        schedule: job.schedule.clone(),
        reschedule: false,
        params: job.params.clone(),
        sensitive_params: job.sensitive_params.clone(),
        callback_url: job.callback_url.clone(),
        retry: job.retry,
        timeout_ms: job.timeout_ms,
        worker_group: None,
        priority: job.priority,
        max_concurrency: None,
    }
}

async fn done(store: &SqlStore, job: &Job, u: &JobUpdate, now: i64) -> Job {
    match store
        .job_update(&job.tenant, &job.id, job.revision, u, now)
        .await
        .unwrap()
    {
        UpdateOutcome::Done(j) => j,
        other => panic!("update must apply, got {other:?}"),
    }
}

async fn changes_apply_only_at_the_version_read(store: SqlStore) {
    let job = create(&store, one_shot("up", T0 + 60_000)).await;
    let u = JobUpdate {
        params: serde_json::json!({"v": 2}),
        callback_url: Some("http://example.test/cb".into()),
        retry: RetryPolicy {
            max_attempts: 4,
            backoff_ms: 50,
        },
        timeout_ms: Some(9_000),
        ..same(&job)
    };
    let changed = done(&store, &job, &u, T0 + 1).await;
    assert_eq!(changed.version, job.version + 1);
    assert_eq!(changed.revision, job.revision + 1);
    assert_eq!(changed.params, serde_json::json!({"v": 2}));
    assert_eq!(
        changed.callback_url.as_deref(),
        Some("http://example.test/cb")
    );
    assert_eq!(changed.retry.max_attempts, 4);
    assert_eq!(changed.timeout_ms, Some(9_000));
    assert_eq!(changed.next_trigger_at, job.next_trigger_at);
    assert_eq!(changed.updated_at, T0 + 1);
    assert_eq!(job_now(&store, &job).await, changed);

    // The version the caller read is gone: nothing changes.
    let stale = store
        .job_update("up", &job.id, job.revision, &same(&job), T0 + 2)
        .await
        .unwrap();
    assert!(matches!(stale, UpdateOutcome::VersionConflict(ref j) if j == &changed));
    let missing = store
        .job_update("other", &job.id, changed.revision, &same(&job), T0 + 2)
        .await
        .unwrap();
    assert_eq!(missing, UpdateOutcome::NotFound);

    // A one-shot that fired keeps its trigger, but its params may change.
    let w = claim(&store, &changed, None).await;
    let running = job_now(&store, &changed).await;
    let moved = JobUpdate {
        schedule: Schedule::Once { at: T0 + 99_000 },
        reschedule: true,
        ..same(&running)
    };
    let refused = store
        .job_update("up", &job.id, running.revision, &moved, T0 + 3)
        .await
        .unwrap();
    assert!(matches!(refused, UpdateOutcome::Conflict(_)));
    let params = JobUpdate {
        params: serde_json::json!({"v": 3}),
        ..same(&running)
    };
    let running = done(&store, &running, &params, T0 + 3).await;

    store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 4)], T0 + 4)
        .await
        .unwrap();
    let finished = job_now(&store, &running).await;
    assert_eq!(finished.status, JobStatus::Succeeded);
    let terminal = store
        .job_update("up", &job.id, finished.revision, &same(&finished), T0 + 5)
        .await
        .unwrap();
    assert!(matches!(terminal, UpdateOutcome::Conflict(ref j) if j.status == JobStatus::Succeeded));
}

async fn a_new_schedule_moves_the_next_trigger(store: SqlStore) {
    let job = create(
        &store,
        recurring("mv", Schedule::cron("0 0 0 * * *", "UTC"), T0),
    )
    .await;
    // Every minute on the grid of the creation time (T0), from now on.
    let u = JobUpdate {
        schedule: tweak(Schedule::every(60_000), |r| {
            r.overlap = OverlapPolicy::Forbid
        }),
        reschedule: true,
        ..same(&job)
    };
    let j = done(&store, &job, &u, T0 + 150_000).await;
    assert_eq!(j.next_trigger_at, Some(T0 + 180_000));
    assert_eq!(j.schedule, u.schedule);
    assert_eq!(j.status, JobStatus::Scheduled);

    // A fixed delay whose execution runs waits for its end.
    let w = claim_due(&store, &j, T0 + 180_000).await;
    let j = job_now(&store, &j).await;
    let d = JobUpdate {
        schedule: Schedule::delay(1_000),
        reschedule: true,
        ..same(&j)
    };
    let j = done(&store, &j, &d, T0 + 180_100).await;
    assert_eq!((j.status, j.next_trigger_at), (JobStatus::Running, None));
    store
        .results_apply(&[result(&w[0], 1, Succeeded, T0 + 180_200)], T0 + 180_200)
        .await
        .unwrap();
    let j = job_now(&store, &j).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Scheduled, Some(T0 + 181_200))
    );

    // Back to a one-shot: its due time, even if past (it fires at once).
    let o = JobUpdate {
        schedule: Schedule::Once { at: T0 },
        reschedule: true,
        ..same(&j)
    };
    assert_eq!(
        done(&store, &j, &o, T0 + 190_000).await.next_trigger_at,
        Some(T0)
    );
}

async fn a_closed_window_ends_the_job_when_nothing_runs(store: SqlStore) {
    let ended = |job: &Job| JobUpdate {
        schedule: tweak(Schedule::every(1_000), |r| r.end_at = Some(T0 - 1)),
        reschedule: true,
        ..same(job)
    };
    let idle = create(&store, recurring("cw", Schedule::every(1_000), T0)).await;
    let j = done(&store, &idle, &ended(&idle), T0 + 10).await;
    assert_eq!((j.status, j.next_trigger_at), (JobStatus::Succeeded, None));

    let busy = create(&store, recurring("cw", Schedule::every(1_000), T0)).await;
    let w = claim_due(&store, &busy, T0).await;
    let busy = job_now(&store, &busy).await;
    let j = done(&store, &busy, &ended(&busy), T0 + 10).await;
    assert_eq!((j.status, j.next_trigger_at), (JobStatus::Running, None));
    store
        .results_apply(&[result(&w[0], 1, Succeeded, T0 + 20)], T0 + 20)
        .await
        .unwrap();
    assert_eq!(job_now(&store, &j).await.status, JobStatus::Succeeded);
}

/// The claim takes the job's content from the scan, not from a second read:
/// that is sound only because an update bumps the version, so a claim made
/// from a job read before an update loses, and the next scan's claim carries
/// the new content.
async fn a_claim_runs_the_job_as_stored_not_as_first_scanned(store: SqlStore) {
    let scanned = create(&store, one_shot("up", T0)).await;
    let u = JobUpdate {
        params: serde_json::json!({"changed": true}),
        timeout_ms: Some(9_000),
        ..same(&scanned)
    };
    let updated = done(&store, &scanned, &u, T0 - 10).await;

    let stale = kairos_core::trigger::claims_for([scanned.clone()], T0);
    let won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &stale, T0)
        .await
        .unwrap()
        .work;
    assert!(won.is_empty(), "a claim from before the update must lose");
    assert_eq!(job_now(&store, &scanned).await.status, JobStatus::Scheduled);

    let rescanned = store
        .jobs_find_due(DispatchScope::All { fence: 1 }, T0, 10, &[])
        .await
        .unwrap();
    assert_eq!(rescanned, [updated]);
    let won = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &kairos_core::trigger::claims_for(rescanned, T0),
            T0,
        )
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 1);
    assert_eq!(
        (&won[0].params, won[0].timeout_ms),
        (&serde_json::json!({"changed": true}), Some(9_000))
    );
}
