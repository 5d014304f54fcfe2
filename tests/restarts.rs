//! A worker SIGKILLed mid-job and started again under the same id at once
//! (what docs/operations.md recommends): the new process has a new
//! incarnation, so what the old one had started is lost and retried at once
//! and what it had not started runs — without a time limit on the jobs and
//! long before the dead-worker threshold could matter (the restarted worker
//! heartbeats and consumes, so it is never declared dead).

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use kairos_testkit::cluster::check;

use check::{LONG, create_jobs, detail, events_with, last_executions, one_execution_each};
use kairos_testkit::wait_for;
use serde_json::json;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use support::{Cluster, Stack};

on_both_stacks!(a_worker_restarted_under_its_own_id_gives_up_what_it_held);

/// Two handlers in parallel and two waiting: four 4 s jobs fill it.
const WORKER: &[(&str, &str)] = &[
    ("KAIROS_WORKER_CAPACITY", "2"),
    ("KAIROS_WORKER_BUFFER", "2"),
    ("KAIROS_WORKER_HEARTBEAT_MS", "1000"),
];

fn sleep_job(name: String) -> serde_json::Value {
    // No timeoutMs: nothing but the restart can end the killed attempts.
    json!({
        "jobName": name,
        "jobHandler": "sleep",
        "params": {"ms": 4000},
        "maxAttempts": 2,
        "retryBackoffMs": 100,
    })
}

async fn a_worker_restarted_under_its_own_id_gives_up_what_it_held(stack: Stack) {
    let (process, worker_id) = match stack {
        Stack::Services | Stack::ServicesPg => ("worker-0", "worker-0"),
        Stack::Embedded => ("dev", ""),
    };
    let Some(mut cluster) = Cluster::start_with(stack, 1, 0, WORKER).await else {
        return;
    };
    if stack.is_services() {
        cluster.spawn_worker(process);
        cluster.wait_workers(1).await;
    }
    let ids = create_jobs(&cluster, 4, |i| sleep_job(format!("restart-{i}"))).await;
    let started: HashSet<String> = wait_for("two jobs to run", LONG, || async {
        let last = last_executions(&cluster, &ids).await;
        let running: HashSet<String> = last
            .iter()
            .filter(|(_, e)| e["status"] == "running")
            .map(|(id, _)| id.clone())
            .collect();
        (running.len() == 2).then_some(running)
    })
    .await;
    let worker_id = if worker_id.is_empty() {
        let last = last_executions(&cluster, &ids).await;
        let any = started.iter().next().expect("a running job");
        last[any]["workerId"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    } else {
        worker_id.to_string()
    };

    cluster.signal(process, "KILL");
    assert!(!cluster.wait_exit(process), "SIGKILL ends the process");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let restarted = Instant::now();
    match stack {
        Stack::Services | Stack::ServicesPg => cluster.spawn_worker_with(process, WORKER),
        Stack::Embedded => {
            cluster.spawn(process, &["dev"]);
            wait_for("the restarted process to be ready", LONG, || async {
                cluster.try_get("/openapi/workers").await.map(|_| ())
            })
            .await;
        }
    }

    // 4 s handlers: the killed attempts are retried and the waiting ones run
    // right after the restart, two at a time — well within 20 s, while the
    // reaper's dead-worker rule never fires for a worker that heartbeats.
    wait_for("every job to succeed", LONG, || async {
        let last = last_executions(&cluster, &ids).await;
        last.values()
            .all(|e| e["status"] == "succeeded")
            .then_some(())
    })
    .await;
    let took = restarted.elapsed();
    assert!(
        took < Duration::from_secs(20),
        "recovery waited for something other than the restart: {took:?}"
    );
    let execs = one_execution_each(&cluster, &ids, "succeeded").await;
    for (id, e) in &execs {
        let d = detail(&cluster, e).await;
        if started.contains(id) {
            assert_eq!(
                e["attempt"], 2,
                "a started attempt is lost and retried: {d}"
            );
            let lost = events_with(&d, "lost");
            assert!(
                lost.iter().any(|ev| ev["workerId"] == worker_id.as_str()),
                "the killed process's attempt is recorded lost: {d}"
            );
        } else {
            assert_eq!(
                e["attempt"], 1,
                "an unstarted attempt keeps its number: {d}"
            );
        }
    }
    if stack.is_services() {
        let log = cluster.log("dispatcher-0");
        assert!(
            log.contains("worker restarted as a new process"),
            "the dispatcher noticed the new incarnation: {log}"
        );
        assert!(
            !log.contains("declared worker dead"),
            "recovery did not wait for the dead-worker rule: {log}"
        );
    }
    cluster.stop_all();
}
