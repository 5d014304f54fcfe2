//! Fault injection on real `kairos` processes over MariaDB or PostgreSQL,
//! Redis and RabbitMQ: workers and leaders killed or frozen, a full worker,
//! connections cut by the services, a database outage, time limits. Every
//! case runs on both databases (`mariadb::<case>`, `postgres::<case>`).
//!
//! Every test checks through the API that each accepted job ended terminal
//! with exactly one execution (its trigger was dispatched once) and the
//! expected attempts. Only this test's processes and connections are hit; the
//! shared services keep running for the tests beside it.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use kairos_testkit::cluster::check;
mod inject;
mod outages;
mod partition;
use kairos_testkit::proxy;

use check::{
    FAST, LONG, create_jobs, detail, events_with, in_state_on, last_executions, noop_job,
    one_execution_each, sleep_job, wait_leader, wait_leader_within, wait_stepped_down,
};
use kairos_testkit::wait_for;
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;
use support::{Cluster, Stack};

/// The "done when": 40 jobs of 3 s on two workers and two
/// dispatchers; one worker and the leader are SIGKILLed mid-run and a fresh
/// worker starts; all 40 succeed, and so do 20 jobs created afterwards.
async fn killing_a_worker_and_the_leader_mid_run_loses_nothing(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 2, 2, FAST).await else {
        return;
    };
    cluster.wait_workers(2).await;
    let (leader, _) = wait_leader(&cluster, 0).await;
    let ids = create_jobs(&cluster, 40, |i| sleep_job(format!("dw-{i}"), 3000, 3)).await;
    let doomed = wait_for("worker-0 to run several jobs", LONG, || async {
        let running = in_state_on(&cluster, &ids, "running", "worker-0").await;
        (running.len() >= 3).then_some(running)
    })
    .await;
    cluster.signal("worker-0", "KILL");
    cluster.signal(&leader, "KILL");
    cluster.spawn_worker("worker-2");

    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    let execs = one_execution_each(&cluster, &ids, "succeeded").await;
    for e in execs.values() {
        let attempt = e["attempt"].as_u64().unwrap_or(0);
        assert!((1..=3).contains(&attempt), "{e}");
    }
    // Something worker-0 was running when it died was lost and retried
    // elsewhere as a new attempt (the rest of `doomed` may have finished
    // between the look and the kill).
    let mut retried = 0;
    for id in &doomed {
        let e = &execs[id];
        if e["attempt"].as_u64() >= Some(2) {
            assert_ne!(e["workerId"], "worker-0", "{e}");
            let d = detail(&cluster, e).await;
            let lost = events_with(&d, "lost");
            assert!(
                lost.iter().any(|ev| ev["workerId"] == "worker-0"),
                "the killed worker's attempt is recorded as lost: {d}"
            );
            retried += 1;
        }
    }
    assert!(retried > 0, "no attempt of the killed worker was retried");

    let more = create_jobs(&cluster, 20, |i| sleep_job(format!("after-{i}"), 3000, 3)).await;
    cluster.wait_jobs(&more, &["succeeded"], LONG).await;
    for e in one_execution_each(&cluster, &more, "succeeded")
        .await
        .values()
    {
        assert_eq!(e["attempt"], 1, "{e}");
        assert_ne!(e["workerId"], "worker-0", "{e}");
    }
    cluster.stop_all();
}

/// SIGSTOP of the leader past its lease: another instance takes over and
/// dispatches; after SIGCONT the old one steps down, and no trigger runs twice.
async fn a_frozen_leader_is_replaced_and_steps_down_when_it_wakes(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 2, 2, FAST).await else {
        return;
    };
    cluster.wait_workers(2).await;
    let (old, fence) = wait_leader(&cluster, 0).await;
    let before = create_jobs(&cluster, 10, |i| noop_job(format!("before-{i}"))).await;
    cluster.wait_jobs(&before, &["succeeded"], LONG).await;

    cluster.signal(&old, "STOP");
    let (new, _) = wait_leader(&cluster, fence).await;
    assert_ne!(new, old, "the frozen instance cannot renew");
    let during = create_jobs(&cluster, 10, |i| sleep_job(format!("during-{i}"), 200, 1)).await;
    // The successor dispatches them while the old leader is still frozen
    // (their results may wait in the frozen instance's prefetch until it wakes).
    wait_for("the successor to dispatch", LONG, || async {
        let last = last_executions(&cluster, &during).await;
        last.values()
            .all(|e| {
                ["dispatched", "running", "succeeded"].contains(&e["status"].as_str().unwrap_or(""))
            })
            .then_some(())
    })
    .await;
    cluster.signal(&old, "CONT");
    wait_stepped_down(&cluster, &old, fence).await;
    let after = create_jobs(&cluster, 10, |i| sleep_job(format!("after-{i}"), 200, 1)).await;

    let all: Vec<String> = [before, during, after].concat();
    cluster.wait_jobs(&all, &["succeeded"], LONG).await;
    for e in one_execution_each(&cluster, &all, "succeeded")
        .await
        .values()
    {
        assert_eq!(e["attempt"], 1, "{e}");
    }
    cluster.stop_all();
}

/// SIGTERM of the leader releases the lease at once: with a 60 s lease, the
/// other instance leads long before the lease could have expired.
async fn a_terminated_leader_releases_the_lease_at_once(stack: Stack) {
    let env = [
        ("KAIROS_LEASE_TTL_MS", "60000"),
        ("KAIROS_WORKER_HEARTBEAT_MS", "1000"),
    ];
    let Some(mut cluster) = Cluster::start_with(stack, 2, 1, &env).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let (old, fence) = wait_leader(&cluster, 0).await;
    cluster.signal(&old, "TERM");
    assert!(cluster.wait_exit(&old), "{old} exits cleanly on SIGTERM");
    let log = cluster.log(&old);
    assert!(
        check::fences(&log, "released the lease").contains(&fence),
        "{old} released its lease on the way out:\n{log}"
    );
    let (new, _) = wait_leader_within(&cluster, fence, Duration::from_secs(30)).await;
    assert_ne!(new, old);
    let ids = create_jobs(&cluster, 10, |i| noop_job(format!("next-{i}"))).await;
    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    one_execution_each(&cluster, &ids, "succeeded").await;
    cluster.stop_all();
}

/// A worker with one slot and no buffer refuses what it cannot take; the
/// refused dispatches reach the other worker through the reroute queue, and
/// none runs twice.
async fn a_full_worker_refuses_and_its_dispatches_run_elsewhere_once(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 1, 0, FAST).await else {
        return;
    };
    cluster.spawn_worker_with(
        "worker-small",
        &[
            ("KAIROS_WORKER_CAPACITY", "1"),
            ("KAIROS_WORKER_BUFFER", "0"),
        ],
    );
    cluster.spawn_worker("worker-big");
    cluster.wait_workers(2).await;
    let ids = create_jobs(&cluster, 30, |i| sleep_job(format!("burst-{i}"), 1000, 1)).await;
    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    let execs = one_execution_each(&cluster, &ids, "succeeded").await;
    let mut used = HashSet::new();
    for e in execs.values() {
        assert_eq!(e["attempt"], 1, "{e}");
        let d = detail(&cluster, e).await;
        assert_eq!(events_with(&d, "running").len(), 1, "ran once: {d}");
        used.insert(e["workerId"].as_str().unwrap_or_default().to_string());
    }
    assert_eq!(used.len(), 2, "both workers ran some: {used:?}");
    assert!(
        cluster
            .log("worker-small")
            .contains("rejecting a dispatch for reroute"),
        "the small worker refused dispatches"
    );
    cluster.stop_all();
}

/// A handler past `timeoutMs` is stopped and reported `timed_out`; each of
/// the `maxAttempts` attempts is in the history with its number.
async fn a_handler_past_its_time_limit_times_out_on_every_attempt(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 1, 1, FAST).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let id = cluster
        .create_job(json!({
            "jobName": "too-slow", "jobHandler": "sleep", "params": {"ms": 5000},
            "timeoutMs": 300, "maxAttempts": 3, "retryBackoffMs": 100,
        }))
        .await;
    cluster
        .wait_jobs(std::slice::from_ref(&id), &["failed"], LONG)
        .await;
    let execs = one_execution_each(&cluster, std::slice::from_ref(&id), "timed_out").await;
    let e = &execs[&id];
    assert_eq!(e["attempt"], 3, "{e}");
    assert!(
        e["error"]
            .as_str()
            .unwrap_or("")
            .contains("timeout of 300 ms"),
        "{e}"
    );
    let d = detail(&cluster, e).await;
    let attempts = |status: &str| -> Vec<u64> {
        events_with(&d, status)
            .iter()
            .filter_map(|ev| ev["attempt"].as_u64())
            .collect()
    };
    assert_eq!(attempts("running"), [1, 2, 3], "{d}");
    assert_eq!(attempts("timed_out"), [1, 2, 3], "{d}");
    cluster.stop_all();
}

/// A worker SIGKILLed mid-job: the attempts it had started are lost and run
/// again as attempt 2 elsewhere; those it held without starting are requeued
/// with their attempt number unchanged.
async fn a_worker_killed_mid_job_has_started_work_retried_and_the_rest_requeued(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 1, 0, FAST).await else {
        return;
    };
    cluster.spawn_worker_with(
        "worker-0",
        &[
            ("KAIROS_WORKER_CAPACITY", "2"),
            ("KAIROS_WORKER_BUFFER", "2"),
        ],
    );
    cluster.wait_workers(1).await;
    let ids = create_jobs(&cluster, 8, |i| sleep_job(format!("held-{i}"), 5000, 3)).await;
    let (running, waiting) = wait_for("worker-0 to run two jobs and hold more", LONG, || async {
        let running = in_state_on(&cluster, &ids, "running", "worker-0").await;
        let waiting = in_state_on(&cluster, &ids, "dispatched", "worker-0").await;
        (running.len() == 2 && !waiting.is_empty()).then_some((running, waiting))
    })
    .await;
    cluster.signal("worker-0", "KILL");
    cluster.spawn_worker("worker-1");

    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    let execs = one_execution_each(&cluster, &ids, "succeeded").await;
    for id in &running {
        let e = &execs[id];
        assert_eq!(e["attempt"], 2, "a started attempt is retried: {e}");
        assert_eq!(e["workerId"], "worker-1", "{e}");
        let d = detail(&cluster, e).await;
        let lost = events_with(&d, "lost");
        assert!(
            lost.iter()
                .any(|ev| ev["attempt"] == 1 && ev["workerId"] == "worker-0"),
            "{d}"
        );
    }
    // Those sent to worker-0 but not started: two waited in its buffer and
    // are requeued when it is declared dead; the rest it refused, and the
    // reroute queue held them until worker-1 came. All keep attempt 1.
    let mut requeued = 0;
    for id in &waiting {
        let e = &execs[id];
        assert_eq!(
            e["attempt"], 1,
            "an unstarted attempt keeps its number: {e}"
        );
        assert_eq!(e["workerId"], "worker-1", "{e}");
        let d = detail(&cluster, e).await;
        assert!(events_with(&d, "lost").is_empty(), "{d}");
        assert_eq!(events_with(&d, "running").len(), 1, "ran once: {d}");
        let by_reaper =
            |ev: &&serde_json::Value| ev["error"].as_str().is_some_and(|m| m.contains("worker-0"));
        if events_with(&d, "pending").iter().any(by_reaper) {
            requeued += 1;
        }
    }
    assert!(requeued > 0, "some unstarted attempt was requeued");
    cluster.stop_all();
}

on_server_stacks!(
    killing_a_worker_and_the_leader_mid_run_loses_nothing,
    a_frozen_leader_is_replaced_and_steps_down_when_it_wakes,
    a_terminated_leader_releases_the_lease_at_once,
    a_full_worker_refuses_and_its_dispatches_run_elsewhere_once,
    a_handler_past_its_time_limit_times_out_on_every_attempt,
    a_worker_killed_mid_job_has_started_work_retried_and_the_rest_requeued,
);
