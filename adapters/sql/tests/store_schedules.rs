//! Store suite, schedules: fixed rate and fixed delay, the `[startAt, endAt]`
//! window, misfire policies and the end of a job after its last execution —
//! on SQLite and on MySQL, through the dispatcher's own claim computation.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::JobStatus;
use kairos_core::protocol::ResultKind::{Failed, Succeeded};
use kairos_core::schedule::{CronDialect, MisfirePolicy, OverlapPolicy, Schedule};
use kairos_core::store::{ControlOutcome, Dispatch, JobStore, JobUpdate, UpdateOutcome};
use kairos_store_sql::SqlStore;
use support::{T0, claim_due, create, executions, id, job_now, one_shot, recurring, result, tweak};

store_cases!(
    every_schedule_round_trips,
    fixed_rate_keeps_its_grid,
    fixed_delay_waits_for_the_end_of_each_execution,
    end_at_ends_the_job_after_its_last_execution,
    misfire_policies,
    a_job_ends_with_its_last_live_execution,
);

async fn every_schedule_round_trips(store: SqlStore) {
    let schedules = [
        Schedule::Once { at: T0 },
        Schedule::cron("0 30 2 * * *", "Europe/Berlin"),
        Schedule::cron_in(CronDialect::Quartz, "0 0 2 ? * 2 *", "Europe/Berlin"),
        tweak(Schedule::every(1_500), |r| {
            r.start_at = Some(T0 + 10);
            r.end_at = Some(T0 + 99_000);
            r.misfire = MisfirePolicy::FireAll;
            r.overlap = OverlapPolicy::Forbid;
        }),
        tweak(Schedule::delay(250), |r| {
            r.misfire = MisfirePolicy::Skip;
            r.overlap = OverlapPolicy::Replace;
        }),
    ];
    for s in schedules {
        let job = create(&store, recurring("rt", s.clone(), T0)).await;
        assert_eq!(job_now(&store, &job).await.schedule, s);
    }
    // The dialect survives a schedule update both ways.
    let job = create(
        &store,
        recurring("rt", Schedule::cron("0 0 2 * * 2", "UTC"), T0),
    )
    .await;
    for dialect in [CronDialect::Quartz, CronDialect::Standard] {
        let s = Schedule::cron_in(dialect, "0 0 2 ? * 2", "UTC");
        let j = job_now(&store, &job).await;
        let u = JobUpdate {
            schedule: s.clone(),
            reschedule: true,
            params: j.params.clone(),
            sensitive_params: j.sensitive_params.clone(),
            callback_url: j.callback_url.clone(),
            retry: j.retry,
            timeout_ms: j.timeout_ms,
            worker_group: None,
            priority: j.priority,
            max_concurrency: None,
        };
        let out = store
            .job_update(&j.tenant, &j.id, j.revision, &u, T0 + 1)
            .await
            .unwrap();
        assert!(matches!(out, UpdateOutcome::Done(_)), "{out:?}");
        assert_eq!(job_now(&store, &job).await.schedule, s, "{dialect}");
    }
}

async fn fixed_rate_keeps_its_grid(store: SqlStore) {
    let job = create(&store, recurring("fr", Schedule::every(1_000), T0)).await;
    let w = claim_due(&store, &job, T0 + 40).await;
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].scheduled_at, T0);
    let j = job_now(&store, &job).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Running, Some(T0 + 1_000))
    );
    store
        .results_apply(&[result(&w[0], 1, Succeeded, T0 + 900)], T0 + 900)
        .await
        .unwrap();
    let j = job_now(&store, &j).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Scheduled, Some(T0 + 1_000))
    );
    // A second late by less than the misfire threshold still fires the next one too.
    let w = claim_due(&store, &j, T0 + 2_500).await;
    assert_eq!(w[0].scheduled_at, T0 + 1_000);
    assert_eq!(job_now(&store, &j).await.next_trigger_at, Some(T0 + 2_000));
}

async fn fixed_delay_waits_for_the_end_of_each_execution(store: SqlStore) {
    let job = create(&store, recurring("fd", Schedule::delay(2_000), T0)).await;
    let w = claim_due(&store, &job, T0).await;
    assert_eq!(w.len(), 1);
    let j = job_now(&store, &job).await;
    assert_eq!((j.status, j.next_trigger_at), (JobStatus::Running, None));
    let due = store
        .jobs_find_due(DispatchScope::All { fence: 1 }, T0 + 3_600_000, 100, &[])
        .await
        .unwrap();
    assert!(due.iter().all(|d| d.id != job.id), "not due while it runs");

    store
        .results_apply(&[result(&w[0], 1, Failed, T0 + 500)], T0 + 600)
        .await
        .unwrap();
    let j = job_now(&store, &job).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Scheduled, Some(T0 + 2_600)),
        "delay counted from the recorded end"
    );

    // Paused while the next one runs: the rhythm is kept for the resume.
    let w = claim_due(&store, &j, T0 + 2_600).await;
    assert_eq!(w.len(), 1);
    let ControlOutcome::Done(_) = store
        .job_pause("fd", &job.id, None, T0 + 2_700)
        .await
        .unwrap()
    else {
        panic!("pause must apply");
    };
    store
        .results_apply(&[result(&w[0], 1, Succeeded, T0 + 3_000)], T0 + 3_000)
        .await
        .unwrap();
    let j = job_now(&store, &job).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Paused, Some(T0 + 5_000))
    );
    let ControlOutcome::Done(j) = store.job_resume("fd", &job.id, T0 + 3_100).await.unwrap() else {
        panic!("resume must apply");
    };
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Scheduled, Some(T0 + 5_000))
    );
}

async fn end_at_ends_the_job_after_its_last_execution(store: SqlStore) {
    let s = tweak(Schedule::every(1_000), |r| r.end_at = Some(T0 + 1_500));
    let job = create(&store, recurring("end", s.clone(), T0)).await;
    let w = claim_due(&store, &job, T0).await;
    store
        .results_apply(&[result(&w[0], 1, Succeeded, T0 + 10)], T0 + 10)
        .await
        .unwrap();
    let w = claim_due(&store, &job, T0 + 1_000).await;
    let j = job_now(&store, &job).await;
    assert_eq!((j.status, j.next_trigger_at), (JobStatus::Running, None));
    store
        .results_apply(&[result(&w[0], 1, Failed, T0 + 1_010)], T0 + 1_010)
        .await
        .unwrap();
    assert_eq!(
        job_now(&store, &job).await.status,
        JobStatus::Succeeded,
        "a schedule that ran its course succeeded, whatever its last run did"
    );

    // Nothing left and nothing to run: the job ends at once.
    let skip = tweak(s, |r| r.misfire = MisfirePolicy::Skip);
    let job = create(&store, recurring("end", skip, T0)).await;
    assert!(claim_due(&store, &job, T0 + 60_000).await.is_empty());
    let j = job_now(&store, &job).await;
    assert_eq!((j.status, j.next_trigger_at), (JobStatus::Succeeded, None));
    assert!(executions(&store, &job).await.is_empty());
}

async fn misfire_policies(store: SqlStore) {
    let late = T0 + 10_500;
    let with = |m| tweak(Schedule::every(1_000), |r| r.misfire = m);

    let once = create(&store, recurring("mf", with(MisfirePolicy::FireOnce), T0)).await;
    let w = claim_due(&store, &once, late).await;
    assert_eq!(w.iter().map(|w| w.scheduled_at).collect::<Vec<_>>(), [T0]);
    assert_eq!(
        job_now(&store, &once).await.next_trigger_at,
        Some(T0 + 11_000)
    );

    let skip = create(&store, recurring("mf", with(MisfirePolicy::Skip), T0)).await;
    assert!(claim_due(&store, &skip, late).await.is_empty());
    let j = job_now(&store, &skip).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Scheduled, Some(T0 + 11_000))
    );
    assert!(j.version > skip.version);
    assert!(executions(&store, &skip).await.is_empty());

    let all = create(&store, recurring("mf", with(MisfirePolicy::FireAll), T0)).await;
    let w = claim_due(&store, &all, late).await;
    let due: Vec<_> = w.iter().map(|w| w.scheduled_at - T0).collect();
    assert_eq!(due, (0..=10).map(|k| k * 1_000).collect::<Vec<_>>());
    assert_eq!(executions(&store, &all).await.len(), 11);
    let j = job_now(&store, &all).await;
    assert_eq!(
        (j.status, j.next_trigger_at),
        (JobStatus::Running, Some(T0 + 11_000))
    );
}

async fn a_job_ends_with_its_last_live_execution(store: SqlStore) {
    let job = create(&store, one_shot("last", T0)).await;
    let manual = id();
    let ControlOutcome::Done(_) = store
        .job_trigger_now("last", &job.id, &manual, T0 + 1)
        .await
        .unwrap()
    else {
        panic!("trigger must apply");
    };
    let w = claim_due(&store, &job, T0 + 2).await;
    store
        .results_apply(&[result(&w[0], 1, Succeeded, T0 + 3)], T0 + 3)
        .await
        .unwrap();
    assert_eq!(
        job_now(&store, &job).await.status,
        JobStatus::Running,
        "the manual execution still runs"
    );
    let manual_work = store
        .executions_find_unpublished(T0 + 4, 10, &kairos_core::worker::Routable::Any)
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.execution_id == manual)
        .expect("manual execution is pending");
    store
        .results_apply(&[result(&manual_work, 1, Failed, T0 + 5)], T0 + 5)
        .await
        .unwrap();
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Failed);
    let states: Vec<_> = executions(&store, &job)
        .await
        .iter()
        .map(|e| e.status)
        .collect();
    assert_eq!(states, [ExecStatus::Succeeded, ExecStatus::Failed]);
}
