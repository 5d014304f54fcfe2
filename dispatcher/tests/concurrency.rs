//! Concurrency limits end to end, in one process (SQLite, the in-process
//! broker and coordination, two stock workers): a handler limit is never
//! exceeded, as the executions' own start and finish times show, and work
//! held back waits and runs, none failed.

use kairos_core::concurrency::{Limit, Scope, ScopeKey};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::schedule::Schedule;
use kairos_core::time::{Millis, now_ms};
use kairos_testkit::wait_for;
use std::time::Duration;

mod rig;

use rig::{Rig, TENANT, new_job};

/// The most executions whose `[startedAt, finishedAt]` overlap at any
/// moment (an end at the moment of a start does not overlap it).
fn most_at_once(execs: &[Execution]) -> usize {
    let mut edges: Vec<(Millis, i32)> = Vec::new();
    for e in execs {
        let (Some(s), Some(f)) = (e.started_at, e.finished_at) else {
            panic!("a finished execution has both times: {e:?}");
        };
        edges.push((s, 1));
        edges.push((f, -1));
    }
    // Ends first at equal times.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn overlap_is_counted_from_the_times() {
    let e = |s, f| Execution {
        started_at: Some(s),
        finished_at: Some(f),
        ..rig::execution_stub()
    };
    assert_eq!(most_at_once(&[e(0, 10), e(10, 20), e(5, 15)]), 2);
    assert_eq!(most_at_once(&[e(0, 10), e(1, 9), e(2, 8)]), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_limit_of_five_is_never_exceeded() {
    const JOBS: usize = 1_000;
    const LIMIT: u32 = 5;
    let mut rig = Rig::new().await;
    rig.store
        .limit_set(
            &Limit {
                scope: Scope::Handler,
                name: "sleep".into(),
                max_running: Some(LIMIT),
                rate_per_sec: None,
            },
            now_ms(),
        )
        .await
        .unwrap();
    rig.dispatcher(rig.stop.clone());
    rig.worker("w-1");
    rig.worker("w-2");
    // All due at one moment, so one claim sees far more than the limit.
    let due = now_ms() + 1_500;
    let mut jobs = Vec::with_capacity(JOBS);
    for i in 0..JOBS {
        let mut job = new_job(&format!("c{i}"), Schedule::Once { at: due }, due);
        job.handler = "sleep".into();
        job.params = serde_json::json!({"ms": 5});
        jobs.push(job);
    }
    let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    rig.store.jobs_create_many(jobs).await.expect("create");

    let execs: Vec<Execution> = wait_for("every job to run", Duration::from_secs(120), || async {
        let mut all = Vec::with_capacity(JOBS);
        for id in &ids {
            let e = rig.executions(id).await;
            if e.len() != 1 || !e[0].status.is_terminal() {
                return None;
            }
            all.extend(e);
        }
        Some(all)
    })
    .await;
    assert!(
        execs.iter().all(|e| e.status == ExecStatus::Succeeded),
        "waiting work is not failed"
    );
    let most = most_at_once(&execs);
    assert!(
        most <= LIMIT as usize,
        "{most} ran at once under a limit of {LIMIT}"
    );
    // The gate really held work back: the claim left most of it waiting.
    let mut held = 0;
    for e in &execs {
        let events = rig.store.execution_events(TENANT, &e.id).await.unwrap();
        if events.iter().any(|ev| {
            ev.error
                .as_deref()
                .is_some_and(|m| m.contains("concurrency slot"))
        }) {
            held += 1;
        }
    }
    assert!(held >= JOBS - LIMIT as usize * 2, "only {held} waited");
    let key = ScopeKey::new(Scope::Handler, "sleep");
    assert_eq!(
        rig.store.concurrency_in_use(&key).await.unwrap(),
        0,
        "every slot was given back"
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_rate_spreads_dispatches_over_time() {
    const JOBS: usize = 30;
    const RATE: f64 = 10.0;
    let mut rig = Rig::new().await;
    rig.store
        .limit_set(
            &Limit {
                scope: Scope::Handler,
                name: "noop".into(),
                max_running: None,
                rate_per_sec: Some(RATE),
            },
            now_ms(),
        )
        .await
        .unwrap();
    rig.dispatcher(rig.stop.clone());
    rig.worker("w-1");
    let due = now_ms() + 1_000;
    let jobs: Vec<_> = (0..JOBS)
        .map(|i| new_job(&format!("r{i}"), Schedule::Once { at: due }, due))
        .collect();
    let ids: Vec<String> = jobs.iter().map(|j| j.id.clone()).collect();
    rig.store.jobs_create_many(jobs).await.expect("create");
    let mut sent = Vec::with_capacity(JOBS);
    for id in &ids {
        let e = rig.wait_succeeded(id, 1).await;
        sent.push(e[0].dispatched_at.expect("dispatched"));
    }
    sent.sort();
    // A second's worth at once (taken when the claim ran, at most the claim
    // lead before the due time), then one every 100 ms: the last of the 20
    // others no sooner than 2 s after the bucket was full, less that lead.
    let span = sent[JOBS - 1] - sent[0];
    assert!(span >= 1_500, "30 dispatches at 10/s took only {span} ms");
    // In any second, at most a full bucket and a second's refill (and a
    // token of slack for the lead).
    for (i, t) in sent.iter().enumerate() {
        let within = sent[i..].iter().take_while(|&&u| u < t + 1_000).count();
        assert!(within <= 21, "{within} dispatches within a second of {t}");
    }
    rig.shutdown().await;
}
