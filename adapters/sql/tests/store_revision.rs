//! Store suite, issue 35: an edit is checked against the caller's revision,
//! which the scheduler's claims and results never move (a job firing every
//! second can be edited at the revision just read), while two callers'
//! changes still conflict and a claim from before an edit still loses; and
//! each job keeps its last result and its failures in a row, for its
//! health — on SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{FAILING_AFTER, Job, JobHealth, JobStatus};
use kairos_core::protocol::ResultKind;
use kairos_core::schedule::Schedule;
use kairos_core::store::{Dispatch, JobFilter, JobStore, JobUpdate, UpdateOutcome};
use kairos_core::trigger::claims_for;
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, cron, executions, job_now, one_shot, recurring, result};

store_cases!(
    the_schedulers_bookkeeping_never_makes_an_edit_conflict,
    callers_changes_still_conflict,
    edits_racing_claims_and_results_all_apply,
    results_keep_the_last_result_and_the_failures_in_a_row,
    a_one_shot_is_never_failing,
);

/// The job's definition as an update that changes nothing.
fn same(job: &Job) -> JobUpdate {
    JobUpdate {
        schedule: job.schedule.clone(),
        reschedule: false,
        params: job.params.clone(),
        callback_url: job.callback_url.clone(),
        retry: job.retry,
        timeout_ms: job.timeout_ms,
        worker_group: job.worker_group.clone(),
        priority: job.priority,
        max_concurrency: None,
        sensitive_params: job.sensitive_params.clone(),
    }
}

/// A new schedule for `job`.
fn rescheduled(job: &Job, schedule: Schedule) -> JobUpdate {
    JobUpdate {
        schedule,
        reschedule: true,
        ..same(job)
    }
}

/// Claims the job's current trigger (next one a second later) and records
/// `kind` for it.
async fn fire(store: &SqlStore, job: &Job, kind: ResultKind) -> Job {
    let now = job_now(store, job).await;
    let due = now.next_trigger_at.expect("a trigger");
    let w = claim(store, &now, Some(due + 1_000)).await;
    store
        .results_apply(&[result(&w, 1, kind, due + 10)], due + 10)
        .await
        .expect("apply");
    job_now(store, job).await
}

async fn the_schedulers_bookkeeping_never_makes_an_edit_conflict(store: SqlStore) {
    // The edit form reads the job; meanwhile it fires twice.
    let read = create(&store, cron("rev", T0)).await;
    fire(&store, &read, ResultKind::Succeeded).await;
    let busy = fire(&store, &read, ResultKind::Failed).await;
    assert!(
        busy.version > read.version,
        "claims and results move the version"
    );
    assert_eq!(busy.revision, read.revision, "but not the revision");

    // The scanner has read it for its next claim when the edit lands.
    let scanned = claims_for([busy.clone()], busy.next_trigger_at.unwrap());
    let every_two = Schedule::cron("*/2 * * * * *", "UTC");
    let edited = match store
        .job_update(
            "rev",
            &read.id,
            read.revision,
            &rescheduled(&read, every_two.clone()),
            T0 + 5_000,
        )
        .await
        .unwrap()
    {
        UpdateOutcome::Done(j) => j,
        other => panic!("the first save must apply, got {other:?}"),
    };
    assert_eq!(edited.revision, read.revision + 1);
    assert_eq!(edited.version, busy.version + 1);
    assert_eq!(edited.schedule, every_two);

    // That claim was made from the old definition: it loses, so no trigger
    // of the old schedule fires after the edit.
    let before = executions(&store, &read).await.len();
    let won = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &scanned,
            busy.next_trigger_at.unwrap(),
        )
        .await
        .unwrap()
        .work;
    assert!(won.is_empty(), "a claim from before the edit must lose");
    assert_eq!(executions(&store, &read).await.len(), before);
    assert_eq!(job_now(&store, &read).await, edited);
}

async fn callers_changes_still_conflict(store: SqlStore) {
    let read = create(&store, cron("two", T0)).await;
    // Two people open the edit form; the first saves.
    let first = match store
        .job_update(
            "two",
            &read.id,
            read.revision,
            &JobUpdate {
                params: serde_json::json!({"by": "first"}),
                ..same(&read)
            },
            T0 + 1,
        )
        .await
        .unwrap()
    {
        UpdateOutcome::Done(j) => j,
        other => panic!("{other:?}"),
    };
    // The second, at the revision both read, is refused: nothing of theirs
    // is saved, and they see the job as the first left it.
    let second = store
        .job_update(
            "two",
            &read.id,
            read.revision,
            &JobUpdate {
                params: serde_json::json!({"by": "second"}),
                ..same(&read)
            },
            T0 + 2,
        )
        .await
        .unwrap();
    assert_eq!(second, UpdateOutcome::VersionConflict(first.clone()));

    // Pause, resume and cancel are callers' changes too.
    let paused = match store
        .job_pause("two", &read.id, None, T0 + 3)
        .await
        .unwrap()
    {
        kairos_core::store::ControlOutcome::Done(j) => j,
        other => panic!("{other:?}"),
    };
    assert_eq!(paused.revision, first.revision + 1);
    let stale = store
        .job_update("two", &read.id, first.revision, &same(&first), T0 + 4)
        .await
        .unwrap();
    assert!(
        matches!(stale, UpdateOutcome::VersionConflict(ref j) if j.status == JobStatus::Paused)
    );
    let resumed = match store.job_resume("two", &read.id, T0 + 5).await.unwrap() {
        kairos_core::store::ControlOutcome::Done(j) => j,
        other => panic!("{other:?}"),
    };
    assert_eq!(resumed.revision, paused.revision + 1);
}

async fn edits_racing_claims_and_results_all_apply(store: SqlStore) {
    let job = create(&store, cron("race", T0)).await;
    let mut revision = job.revision;
    for round in 0..8_i64 {
        let read = job_now(&store, &job).await;
        let params = serde_json::json!({"round": round});
        let change = JobUpdate {
            params: params.clone(),
            ..same(&read)
        };
        let edit = store.job_update("race", &job.id, revision, &change, T0 + round);
        // The scheduler fires the job while the edit is on its way.
        let fired = async {
            let due = read.next_trigger_at.expect("a trigger");
            let claims = claims_for([read.clone()], due);
            let won = store
                .triggers_claim(DispatchScope::All { fence: 1 }, &claims, due)
                .await
                .expect("claim")
                .work;
            let results: Vec<_> = won
                .iter()
                .map(|w| result(w, 1, ResultKind::Succeeded, due + 5))
                .collect();
            store.results_apply(&results, due + 5).await.expect("apply");
        };
        let (edited, ()) = tokio::join!(edit, fired);
        match edited.unwrap() {
            UpdateOutcome::Done(j) => {
                assert_eq!(j.params, params);
                revision = j.revision;
            }
            other => panic!("round {round}: the edit must apply, got {other:?}"),
        }
    }
    assert_eq!(revision, job.revision + 8);
    // Whatever fired, each trigger fired once.
    let execs = executions(&store, &job).await;
    let mut due: Vec<_> = execs.iter().map(|e| e.scheduled_at).collect();
    due.dedup();
    assert_eq!(due.len(), execs.len());
}

async fn results_keep_the_last_result_and_the_failures_in_a_row(store: SqlStore) {
    let job = create(&store, recurring("hl", Schedule::every(1_000), T0)).await;
    assert_eq!(
        (job.last_result, job.fail_streak, job.health()),
        (None, 0, JobHealth::Ok)
    );
    let failing = |health| JobFilter {
        health: Some(health),
        limit: 50,
        ..JobFilter::default()
    };
    let listed = |h| {
        let store = &store;
        let filter = failing(h);
        async move {
            store
                .job_list("hl", &filter)
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|j| j.id)
                .collect::<Vec<_>>()
        }
    };

    let once = fire(&store, &job, ResultKind::Failed).await;
    assert_eq!(once.last_result, Some(ExecStatus::Failed));
    assert_eq!(once.fail_streak, 1);
    assert_eq!(once.health(), JobHealth::Ok);
    assert_eq!(
        once.revision, job.revision,
        "results are not a caller's change"
    );
    let mut now = once;
    for _ in 1..FAILING_AFTER - 1 {
        now = fire(&store, &job, ResultKind::Failed).await;
    }
    // A time-out is a failure too.
    now = fire(&store, &now, ResultKind::TimedOut).await;
    assert_eq!(now.fail_streak, FAILING_AFTER);
    assert_eq!(now.last_result, Some(ExecStatus::TimedOut));
    assert!(now.last_result_at.is_some());
    assert_eq!(now.health(), JobHealth::Failing);
    assert_eq!(listed(JobHealth::Failing).await, [job.id.as_str()]);
    assert!(listed(JobHealth::Ok).await.is_empty());

    let well = fire(&store, &job, ResultKind::Succeeded).await;
    assert_eq!(
        (well.last_result, well.fail_streak, well.health()),
        (Some(ExecStatus::Succeeded), 0, JobHealth::Ok)
    );
    assert!(listed(JobHealth::Failing).await.is_empty());
    assert_eq!(listed(JobHealth::Ok).await, [job.id.as_str()]);
}

async fn a_one_shot_is_never_failing(store: SqlStore) {
    let job = create(&store, one_shot("os", T0)).await;
    let w = claim(&store, &job, None).await;
    store
        .results_apply(&[result(&w, 1, ResultKind::Failed, T0 + 5)], T0 + 5)
        .await
        .unwrap();
    let done = job_now(&store, &job).await;
    assert_eq!(done.status, JobStatus::Failed);
    assert_eq!(done.last_result, Some(ExecStatus::Failed));
    assert_eq!(done.last_result_at, Some(T0 + 5));
    assert_eq!(done.health(), JobHealth::Ok, "its status says it failed");
}
