//! Store suite, the reaper's side: unpublished and requeued work, overdue
//! attempts, verdicts, and the execution history pages — on SQLite and on
//! MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobStatus, RetryPolicy};
use kairos_core::outcome::Verdict;
use kairos_core::protocol::ResultKind::{Failed, Started};
use kairos_core::store::{
    CallbackStore, Dispatch, DispatchedTo, HeldAttempt, History, Maintenance,
};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, job_now, one_shot, result};

store_cases!(
    unpublished_and_requeued_work,
    overdue_means_started_and_past_its_deadline,
    reaper_verdicts,
    a_handed_back_attempt_is_retried_once_for_free,
    executions_page_newest_trigger_first,
);

fn status_of(applied: &[kairos_core::store::Applied]) -> Vec<Option<ExecStatus>> {
    applied.iter().map(|a| a.new_status).collect()
}

async fn unpublished_and_requeued_work(store: SqlStore) {
    let early = create(&store, one_shot("u", T0 - 10)).await;
    let late = create(&store, one_shot("u", T0)).await;
    let running = create(&store, one_shot("u", T0)).await;
    let w_early = claim(&store, &early, None).await;
    let w_late = claim(&store, &late, None).await;
    let w_run = claim(&store, &running, None).await;
    let found = store
        .executions_find_unpublished(T0, 10, &kairos_core::worker::Routable::Any)
        .await
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|w| w.execution_id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(ids[0], w_early.execution_id, "oldest first");
    assert_eq!(found[0], w_early);
    assert_eq!(
        store
            .executions_find_unpublished(T0 - 10, 10, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        store
            .executions_find_unpublished(T0, 1, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .len(),
        1
    );

    let sent: Vec<DispatchedTo> = [&w_early, &w_late, &w_run]
        .iter()
        .map(|w| DispatchedTo {
            execution_id: w.execution_id.clone(),
            attempt: 1,
            worker_id: "w9".into(),
        })
        .collect();
    store.executions_mark_dispatched(&sent, T0).await.unwrap();
    assert!(
        store
            .executions_find_unpublished(T0, 10, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .is_empty()
    );
    let mut started = support::result(&w_run, 1, kairos_core::protocol::ResultKind::Started, T0);
    started.worker_id = "w9".into();
    store.results_apply(&[started], T0).await.unwrap();
    let mut held = store.executions_in_flight_on("w9").await.unwrap();
    held.sort_by(|a, b| a.execution_id.cmp(&b.execution_id));
    let mut expected: Vec<HeldAttempt> = [
        (&w_early, ExecStatus::Dispatched),
        (&w_late, ExecStatus::Dispatched),
        (&w_run, ExecStatus::Running),
    ]
    .iter()
    .map(|(w, status)| HeldAttempt {
        execution_id: w.execution_id.clone(),
        attempt: 1,
        status: *status,
        incarnation: None,
        dispatched_at: Some(T0),
        started_at: (*status == ExecStatus::Running).then_some(T0),
    })
    .collect();
    expected.sort_by(|a, b| a.execution_id.cmp(&b.execution_id));
    assert_eq!(held, expected);

    let targets: Vec<(String, u32)> = [&w_early, &w_late, &w_run]
        .iter()
        .map(|w| (w.execution_id.clone(), 1))
        .chain([(w_late.execution_id.clone(), 7)])
        .collect();
    let moved = store
        .executions_requeue_unstarted(&targets, "worker gone", T0 + 50)
        .await;
    assert_eq!(moved.unwrap(), 2, "the running attempt stays");
    let e = store
        .execution_get("u", &w_early.execution_id)
        .await
        .unwrap()
        .unwrap();
    // Publishable from its due time on, as it was: at once, here.
    assert_eq!(
        (e.status, e.attempt, e.worker_id, e.not_before),
        (ExecStatus::Pending, 1, None, T0 - 10)
    );
    let events = store
        .execution_events("u", &w_early.execution_id)
        .await
        .unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.status, last.error.as_deref()),
        (ExecStatus::Pending, Some("worker gone"))
    );
    assert_eq!(
        store
            .executions_find_unpublished(T0 + 50, 10, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .len(),
        2
    );
    let r = store
        .execution_get("u", &w_run.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, ExecStatus::Running);
    assert_eq!(store.executions_in_flight_on("w9").await.unwrap().len(), 1);
}

/// The due scan reads through `idx_jobs_status_next` even with many jobs
/// that are not due or not claimable.
async fn overdue_means_started_and_past_its_deadline(store: SqlStore) {
    let mut timed = one_shot("o", T0);
    timed.timeout_ms = Some(1_000);
    let timed = create(&store, timed).await;
    let untimed = create(&store, one_shot("o", T0)).await;
    let mut dispatched_only = one_shot("o", T0);
    dispatched_only.timeout_ms = Some(1_000);
    let dispatched_only = create(&store, dispatched_only).await;
    let a = claim(&store, &timed, None).await;
    let b = claim(&store, &untimed, None).await;
    let c = claim(&store, &dispatched_only, None).await;
    let sent = DispatchedTo {
        execution_id: c.execution_id.clone(),
        attempt: 1,
        worker_id: "w1".into(),
    };
    store.executions_mark_dispatched(&[sent], T0).await.unwrap();
    store
        .results_apply(
            &[
                result(&a, 1, Started, T0 + 10),
                result(&b, 1, Started, T0 + 10),
            ],
            T0 + 10,
        )
        .await
        .unwrap();

    // Deadline T0 + 1010, margin 500: overdue strictly after T0 + 1510.
    assert!(
        store
            .executions_find_overdue(T0 + 1_510, 500, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let overdue = store
        .executions_find_overdue(T0 + 1_511, 500, 10)
        .await
        .unwrap();
    assert_eq!(overdue, [(a.execution_id.clone(), 1)]);
    assert!(
        store
            .executions_find_overdue(T0 + 1_000_000, 500, 0)
            .await
            .unwrap()
            .is_empty()
    );
    let far = store
        .executions_find_overdue(T0 + 10_000_000, 0, 10)
        .await
        .unwrap();
    assert_eq!(
        far.len(),
        1,
        "no deadline without a timeout, none before the start"
    );
}

async fn reaper_verdicts(store: SqlStore) {
    let mut retried = one_shot("v", T0);
    retried.retry = RetryPolicy {
        max_attempts: 2,
        backoff_ms: 50,
    };
    let retried = create(&store, retried).await;
    let mut last = one_shot("v", T0);
    last.callback_url = Some("http://example.test/v".into());
    let last = create(&store, last).await;
    let timed = create(&store, one_shot("v", T0)).await;
    let pending = create(&store, one_shot("v", T0)).await;
    let (a, b, c, d) = (
        claim(&store, &retried, None).await,
        claim(&store, &last, None).await,
        claim(&store, &timed, None).await,
        claim(&store, &pending, None).await,
    );
    let sent: Vec<DispatchedTo> = [&a, &b]
        .iter()
        .map(|w| DispatchedTo {
            execution_id: w.execution_id.clone(),
            attempt: 1,
            worker_id: "dead".into(),
        })
        .collect();
    store.executions_mark_dispatched(&sent, T0).await.unwrap();
    store
        .results_apply(&[result(&c, 1, Started, T0)], T0)
        .await
        .unwrap();

    let targets = [
        (a.execution_id.clone(), 1),
        (b.execution_id.clone(), 1),
        (d.execution_id.clone(), 1),
        (b.execution_id.clone(), 1),
    ];
    let applied = store
        .executions_apply_verdict(&targets, Verdict::Lost, "worker dead", T0 + 100)
        .await
        .unwrap();
    assert_eq!(
        status_of(&applied),
        [
            Some(ExecStatus::Pending),
            Some(ExecStatus::Lost),
            None,
            None
        ]
    );
    let ea = store
        .execution_get("v", &a.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((ea.attempt, ea.not_before), (2, T0 + 150));
    let eb = store
        .execution_get("v", &b.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (eb.status, eb.error.as_deref(), eb.worker_id.as_deref()),
        (ExecStatus::Lost, Some("worker dead"), Some("dead"))
    );
    assert_eq!(job_now(&store, &last).await.status, JobStatus::Failed);
    assert_eq!(
        store
            .callbacks_for_execution("v", &b.execution_id)
            .await
            .unwrap()
            .len(),
        1
    );

    let t = [(c.execution_id.clone(), 1)];
    let applied = store
        .executions_apply_verdict(&t, Verdict::TimedOut, "deadline passed", T0 + 200)
        .await
        .unwrap();
    assert_eq!(status_of(&applied), [Some(ExecStatus::TimedOut)]);
    let ec = store
        .execution_get("v", &c.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (ec.finished_at, ec.error.as_deref()),
        (Some(T0 + 200), Some("deadline passed"))
    );
    let again = store
        .executions_apply_verdict(&t, Verdict::TimedOut, "again", T0 + 300)
        .await
        .unwrap();
    assert_eq!(status_of(&again), [None]);
}

/// Attempt `attempt` of `w` dispatched to worker "w" and started.
async fn run_attempt(
    store: &SqlStore,
    w: &kairos_core::store::DispatchWork,
    attempt: u32,
    at: i64,
) {
    let sent = [DispatchedTo {
        execution_id: w.execution_id.clone(),
        attempt,
        worker_id: "w".into(),
    }];
    store.executions_mark_dispatched(&sent, at).await.unwrap();
    store
        .results_apply(&[result(w, attempt, Started, at)], at)
        .await
        .unwrap();
}

/// A hand-back (a worker stopped before its handler did) is retried at
/// once without counting against maxAttempts, once: the count of free
/// retries is kept between transactions.
async fn a_handed_back_attempt_is_retried_once_for_free(store: SqlStore) {
    let mut job = one_shot("h", T0);
    job.retry = RetryPolicy {
        max_attempts: 2,
        backoff_ms: 50,
    };
    let job = create(&store, job).await;
    let w = claim(&store, &job, None).await;
    let target = |attempt| [(w.execution_id.clone(), attempt)];
    run_attempt(&store, &w, 1, T0).await;
    let applied = store
        .executions_apply_verdict(&target(1), Verdict::HandedBack, "handed back", T0 + 100)
        .await
        .unwrap();
    assert_eq!(status_of(&applied), [Some(ExecStatus::Pending)]);
    let e = store
        .execution_get("h", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.attempt, e.not_before),
        (2, T0 + 100),
        "at once, no backoff"
    );
    // Attempt 2 fails: the job's first counted failure, so one more try.
    run_attempt(&store, &w, 2, T0 + 200).await;
    let mut failed = result(&w, 2, Failed, T0 + 300);
    failed.error = Some("boom".into());
    store.results_apply(&[failed], T0 + 300).await.unwrap();
    let e = store
        .execution_get("h", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((e.status, e.attempt), (ExecStatus::Pending, 3));
    // A second hand-back counts: maxAttempts 2 is spent.
    run_attempt(&store, &w, 3, T0 + 400).await;
    let applied = store
        .executions_apply_verdict(&target(3), Verdict::HandedBack, "handed back", T0 + 500)
        .await
        .unwrap();
    assert_eq!(status_of(&applied), [Some(ExecStatus::Lost)]);
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Failed);
}

async fn executions_page_newest_trigger_first(store: SqlStore) {
    let job = create(&store, support::cron("p", T0)).await;
    let mut current = job.clone();
    let mut ids = Vec::new();
    for i in 1..=5 {
        let w = claim(&store, &current, Some(T0 + i * 1_000)).await;
        ids.push(w.execution_id);
        current = job_now(&store, &job).await;
    }
    ids.reverse();
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store
            .executions_list_for_job("p", &job.id, 2, cursor.as_deref())
            .await
            .unwrap();
        seen.extend(page.items.into_iter().map(|e| e.id));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen, ids);
    let bad = store
        .executions_list_for_job("p", &job.id, 2, Some("zz"))
        .await
        .unwrap();
    assert!(bad.items.is_empty());
}
