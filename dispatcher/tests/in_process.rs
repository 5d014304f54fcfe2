//! The dispatcher's loops in one process, over SQLite and the in-process
//! broker and coordination: scan → claim → publish → worker → results, leader
//! failover, and pause. No spawned processes and no services, so these run
//! everywhere and fail with the dispatcher's own stack traces.
//!
//! Every wait is on a condition read from the store; "nothing happened"
//! is proved by a witness job that ran after the moment in question.

use kairos_core::due::{Due, DueSignal};
use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobStatus, NewJob};
use kairos_core::schedule::Schedule;
use kairos_core::time::now_ms;
use kairos_testkit::wait_for;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

mod rig;

use rig::{DEADLINE, Rig, TENANT, every, new_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_one_shot_job_runs_exactly_once() {
    let mut rig = Rig::new().await;
    rig.dispatcher(rig.stop.clone());
    rig.worker("w-1");
    rig.worker("w-2");
    let now = now_ms();
    let mut jobs = Vec::new();
    for i in 0..60 {
        jobs.push(rig.one_shot(&format!("j{i}"), now + (i % 3) * 50).await);
    }
    for job in &jobs {
        let execs = rig.wait_succeeded(job, 1).await;
        assert_eq!(execs.len(), 1, "one execution per trigger: {execs:?}");
        let stored = rig.store.job_get(TENANT, job).await.unwrap().unwrap();
        assert_eq!(stored.status, JobStatus::Succeeded);
    }
    rig.shutdown().await;
}

/// A backlog many batches deep is claimed round after round (each next
/// round's scan started while the previous one claims), without waiting for
/// the periodic scan: that is set far beyond the test's deadline here, so
/// only the API's due signal and full rounds move the loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_of_many_batches_is_claimed_round_after_round_once_each() {
    let mut rig = Rig::new().await;
    rig.dispatcher_with(rig.stop.clone(), |cfg| {
        cfg.batch = 5;
        cfg.scan_interval = Duration::from_secs(600);
    });
    rig.worker("w-1");
    // The dispatcher records the worker's heartbeat, then a witness shows
    // its claims reach the worker.
    rig.wait_for_a_worker().await;
    let now = now_ms();
    let witness = rig.one_shot("witness", now).await;
    rig.due.announce(Due::At(now)).await;
    rig.wait_succeeded(&witness, 1).await;

    let now = now_ms();
    let mut jobs = Vec::new();
    for i in 0..47 {
        jobs.push(rig.one_shot(&format!("b{i}"), now - 1_000 + i).await);
    }
    rig.due.announce(Due::At(now - 1_000)).await;
    for job in &jobs {
        let execs = rig.wait_succeeded(job, 1).await;
        assert_eq!(execs.len(), 1, "one execution per trigger: {execs:?}");
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_dispatcher_takes_over_when_the_leader_steps_down() {
    let mut rig = Rig::new().await;
    let first = CancellationToken::new();
    rig.dispatcher(first.clone());
    rig.worker("w-1");
    let before = rig.one_shot("before", now_ms()).await;
    rig.wait_succeeded(&before, 1).await;

    // The standby campaigns beside the leader; the leader releases its lease.
    rig.dispatcher(rig.stop.clone());
    first.cancel();
    let after = rig.one_shot("after", now_ms()).await;
    let execs = rig.wait_succeeded(&after, 1).await;
    assert_eq!(execs.len(), 1);
    rig.shutdown().await;
}

/// A signal of a job due now goes to the immediate lane; when it is a
/// schedule's trigger (not the lane's), the lane hands it to the main loop,
/// which claims it at once: the periodic scan is set beyond the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedules_trigger_announced_when_due_is_handed_to_the_main_loop() {
    let mut rig = Rig::new().await;
    rig.dispatcher_with(rig.stop.clone(), |cfg| {
        cfg.scan_interval = Duration::from_secs(600);
    });
    rig.worker("w-1");
    rig.wait_for_a_worker().await;
    let now = now_ms();
    let hourly = every(3_600_000);
    let job = rig.create("hourly", hourly, now).await;
    let stored = rig.store.job_get(TENANT, &job).await.unwrap().unwrap();
    assert_eq!(stored.lane, kairos_core::priority::Lane::Scheduled);
    rig.due.announce(Due::At(now)).await;
    rig.wait_succeeded(&job, 1).await;
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_recurring_job_fires_no_more() {
    let mut rig = Rig::new().await;
    rig.dispatcher(rig.stop.clone());
    rig.worker("w-1");
    let start = now_ms();
    let job = rig.create("every-200ms", every(200), start).await;
    rig.wait_succeeded(&job, 3).await;

    rig.store
        .job_pause(TENANT, &job, None, now_ms())
        .await
        .expect("pause");
    // What was claimed before the pause runs to its end; then nothing more,
    // while the scheduler works through five more of the job's periods.
    let settled = wait_for(
        "the paused job's executions to settle",
        DEADLINE,
        || async {
            let execs = rig.executions(&job).await;
            execs
                .iter()
                .all(|e| e.status.is_terminal())
                .then_some(execs.len())
        },
    )
    .await;
    rig.worked_past(Duration::from_millis(1_000)).await;
    assert_eq!(
        rig.executions(&job).await.len(),
        settled,
        "paused: no trigger"
    );
    rig.shutdown().await;
}

/// A trigger is claimed ahead of its due time, already recorded
/// `dispatched` to the worker the leader chose; if the term ends before the
/// due time, the leader hands it back to `pending` and the next leader
/// publishes it at its due time: it runs once, not early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_claimed_ahead_is_handed_back_when_the_term_ends_before_its_due_time() {
    let mut rig = Rig::new().await;
    let first = CancellationToken::new();
    rig.dispatcher_with(first.clone(), |cfg| {
        cfg.claim_ahead = Duration::from_secs(60);
    });
    rig.worker("w-1");
    let witness = rig.one_shot("witness", now_ms()).await;
    rig.wait_succeeded(&witness, 1).await;

    let due = now_ms() + 3_000;
    let job = rig.one_shot("ahead", due).await;
    rig.due.announce(Due::At(now_ms())).await;
    let claimed = wait_for("the claim, recorded as dispatched", DEADLINE, || async {
        let execs = rig.executions(&job).await;
        execs
            .into_iter()
            .find(|e| e.status == ExecStatus::Dispatched)
    })
    .await;
    assert_eq!(claimed.worker_id.as_deref(), Some("w-1"));

    first.cancel();
    let handed_back = wait_for("the unpublished claim handed back", DEADLINE, || async {
        let execs = rig.executions(&job).await;
        execs
            .into_iter()
            .find(|e| e.status == ExecStatus::Pending && e.worker_id.is_none())
    })
    .await;
    assert_eq!(handed_back.id, claimed.id);
    assert_eq!(handed_back.attempt, 1);

    // The next leader's sweep publishes it once it is due.
    rig.dispatcher(rig.stop.clone());
    let execs = rig.wait_succeeded(&job, 1).await;
    assert_eq!(execs.len(), 1, "one execution for the trigger: {execs:?}");
    let started = execs[0].started_at.expect("started");
    assert!(started >= due, "started {} ms early", due - started);
    let events = rig
        .store
        .execution_events(TENANT, &claimed.id)
        .await
        .expect("events");
    let statuses: Vec<ExecStatus> = events.iter().map(|e| e.status).collect();
    assert_eq!(
        statuses[..3],
        [
            ExecStatus::Dispatched,
            ExecStatus::Pending,
            ExecStatus::Dispatched
        ],
        "{events:?}"
    );
    rig.shutdown().await;
}

/// A burst the leader sees coming is claimed ahead of the usual lead, by
/// what claiming it takes (here: 2,000 triggers in batches of 5, ~400 ms at
/// the first guess of the claim cost); each still runs once, not early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_seen_ahead_is_claimed_early_and_runs_at_its_due_time() {
    let mut rig = Rig::new().await;
    rig.dispatcher_with(rig.stop.clone(), |cfg| {
        cfg.batch = 5;
        cfg.claim_ahead = Duration::from_millis(100);
        cfg.lookahead = Duration::from_secs(5);
    });
    rig.worker("w-1");
    let due = now_ms() + 3_000;
    let mut ids = Vec::new();
    for chunk in 0..4 {
        let jobs: Vec<NewJob> = (0..500)
            .map(|i| {
                let name = format!("burst-{chunk}-{i}");
                new_job(&name, Schedule::Once { at: due }, due)
            })
            .collect();
        ids.extend(jobs.iter().map(|j| j.id.clone()));
        rig.store.jobs_create_many(jobs).await.expect("create");
    }
    rig.due.announce(Due::At(due)).await;
    // With only the usual lead, nothing is claimed before `due - 100 ms`.
    let early = Duration::from_millis((due - 150 - now_ms()).max(0) as u64);
    wait_for(
        "a claim at least 150 ms before the due time",
        early,
        || async {
            for id in &ids[..50] {
                if !rig.executions(id).await.is_empty() {
                    return Some(());
                }
            }
            None
        },
    )
    .await;
    assert!(now_ms() < due, "the claim was seen before the due time");
    for id in &ids {
        let execs = rig.wait_succeeded(id, 1).await;
        assert_eq!(execs.len(), 1, "one execution per trigger: {execs:?}");
        let started = execs[0].started_at.expect("started");
        assert!(started >= due, "started {} ms early", due - started);
    }
    rig.shutdown().await;
}

/// A job cancelled while its trigger is claimed ahead (recorded
/// `dispatched`, not yet published): the stop reaches the worker before the
/// dispatch does, so the handler never starts and the execution ends
/// `cancelled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_cancelled_while_its_trigger_is_claimed_ahead_never_runs() {
    let mut rig = Rig::new().await;
    rig.dispatcher_with(rig.stop.clone(), |cfg| {
        cfg.claim_ahead = Duration::from_secs(60);
        cfg.stop_relay_every = Duration::from_millis(50);
    });
    rig.worker("w-1");
    let witness = rig.one_shot("witness", now_ms()).await;
    rig.wait_succeeded(&witness, 1).await;

    let due = now_ms() + 2_000;
    let job = rig.one_shot("cancelled-ahead", due).await;
    rig.due.announce(Due::At(now_ms())).await;
    wait_for("the claim, recorded as dispatched", DEADLINE, || async {
        let execs = rig.executions(&job).await;
        execs
            .iter()
            .any(|e| e.status == ExecStatus::Dispatched)
            .then_some(())
    })
    .await;
    rig.store
        .job_cancel(TENANT, &job, now_ms())
        .await
        .expect("cancel");
    let ended = wait_for("the execution cancelled", DEADLINE, || async {
        let execs = rig.executions(&job).await;
        execs
            .into_iter()
            .find(|e| e.status == ExecStatus::Cancelled)
    })
    .await;
    assert!(now_ms() >= due, "settled by the worker, at the due time");
    assert_eq!(ended.started_at, None, "the handler never started");
    rig.shutdown().await;
}

/// A leader whose claim rounds find nothing due never meets the stored
/// fence there; when storage refuses its sweep's dispatches as stale, it
/// steps down all the same, and its next term (one past the stored fence)
/// dispatches the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leader_refused_by_its_sweep_steps_down_and_recovers() {
    let mut rig = Rig::new().await;
    rig.dispatcher(rig.stop.clone());
    rig.worker("w-1");
    let witness = rig.one_shot("witness", now_ms()).await;
    rig.wait_succeeded(&witness, 1).await;

    // A newer fence reaches storage (as when the lock service lost its
    // counter and another term wrote first): the running term is stale.
    rig.store
        .concurrency_slots_purge(1_000, 1)
        .await
        .expect("raise the stored fence");
    // Nothing is due for the claim rounds; only the sweep sees this.
    let hourly = every(3_600_000);
    let job = rig.create("hourly", hourly, now_ms() + 3_600_000).await;
    rig.store
        .job_trigger_now(TENANT, &job, "manual-1", now_ms())
        .await
        .expect("trigger now");
    let execs = rig.wait_succeeded(&job, 1).await;
    assert_eq!(execs.len(), 1, "{execs:?}");
    rig.shutdown().await;
}
