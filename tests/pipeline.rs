//! End-to-end: the core pipeline on every stack, with real processes.
//!
//! Services stack: `kairos api`, two dispatchers and two workers on MySQL
//! (`services_*`) or PostgreSQL (`postgres_*`), Redis and RabbitMQ. Embedded
//! stack: one `kairos dev` process.

use kairos_testkit::cluster as support;

use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;
use support::{Cluster, Stack};

async fn many_one_shot_jobs_each_run_exactly_once(
    stack: Stack,
    dispatchers: usize,
    workers: usize,
) {
    let Some(mut cluster) = Cluster::start(stack, dispatchers, workers).await else {
        return;
    };
    cluster.wait_workers(workers.max(1)).await;
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(
            cluster
                .create_one_shot(&format!("noop-{i}"), "noop", json!({"i": i}))
                .await,
        );
    }
    cluster
        .wait_jobs(&ids, &["succeeded"], Duration::from_secs(120))
        .await;
    let mut workers_used = HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        let execs = cluster.executions(id).await;
        assert_eq!(execs.len(), 1, "job {id} has {} executions", execs.len());
        let e = &execs[0];
        assert_eq!(e["status"], "succeeded");
        assert_eq!(e["attempt"], 1);
        assert_eq!(e["output"], json!({"i": i}), "noop echoes its params");
        workers_used.insert(e["workerId"].as_str().unwrap_or_default().to_string());
    }
    if stack.is_services() {
        assert_eq!(
            workers_used.len(),
            workers,
            "work is spread over every worker: {workers_used:?}"
        );
    }
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn services_200_one_shot_jobs_each_run_exactly_once() {
    many_one_shot_jobs_each_run_exactly_once(Stack::Services, 2, 2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_200_one_shot_jobs_each_run_exactly_once() {
    many_one_shot_jobs_each_run_exactly_once(Stack::ServicesPg, 2, 2).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_200_one_shot_jobs_each_run_exactly_once() {
    many_one_shot_jobs_each_run_exactly_once(Stack::Embedded, 1, 1).await;
}

async fn every_second_cron_gets_a_new_trigger_each_second(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 2, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let id = cluster
        .create_job(json!({"jobName": "tick", "jobHandler": "noop", "cronExpr": "* * * * * *"}))
        .await;
    let execs = kairos_testkit::wait_for("four cron triggers", Duration::from_secs(30), || async {
        let execs = cluster.executions(&id).await;
        let done = execs.iter().filter(|e| e["status"] == "succeeded").count();
        (done >= 4).then_some(execs)
    })
    .await;
    let mut scheduled: Vec<i64> = execs
        .iter()
        .map(|e| kairos_core::time::parse_rfc3339(e["scheduledAt"].as_str().unwrap()).unwrap())
        .collect();
    scheduled.sort();
    let distinct: HashSet<i64> = scheduled.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        scheduled.len(),
        "each trigger is dispatched once"
    );
    for pair in scheduled.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            1000,
            "triggers are one second apart: {scheduled:?}"
        );
        assert_eq!(pair[0] % 1000, 0, "triggers fall on whole seconds");
    }
    let job = cluster.get(&format!("/openapi/jobs/{id}")).await;
    assert!(
        job["nextTriggerAt"].is_string(),
        "a cron job always has a next trigger: {job}"
    );
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn services_every_second_cron_gets_a_new_trigger_each_second() {
    every_second_cron_gets_a_new_trigger_each_second(Stack::Services).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_every_second_cron_gets_a_new_trigger_each_second() {
    every_second_cron_gets_a_new_trigger_each_second(Stack::ServicesPg).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_every_second_cron_gets_a_new_trigger_each_second() {
    every_second_cron_gets_a_new_trigger_each_second(Stack::Embedded).await;
}

/// Handler failures end `failed` (after their retries); a handler no worker
/// serves is not a failure: the execution waits for a worker that serves it.
async fn failures_end_failed_and_unknown_handlers_wait(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let failing = cluster
        .create_one_shot("boom", "fail", json!({"message": "kaput"}))
        .await;
    let unknown = cluster
        .create_one_shot("what", "no-such-handler", json!({}))
        .await;
    let retried = cluster
        .create_job(json!({"jobName": "retry", "jobHandler": "fail", "maxAttempts": 3, "retryBackoffMs": 10}))
        .await;
    cluster
        .wait_jobs(
            &[failing.clone(), retried.clone()],
            &["failed"],
            Duration::from_secs(60),
        )
        .await;
    let e = &cluster.executions(&failing).await[0];
    assert_eq!(e["error"], "kaput");
    let job = cluster.get(&format!("/openapi/jobs/{unknown}")).await;
    assert_eq!(job["status"], "running", "claimed, not failed: {job}");
    assert_eq!(
        job["waitingFor"],
        json!({"reason": "worker", "handler": "no-such-handler", "group": null, "limit": null}),
        "{job}"
    );
    assert_eq!(job["lastExecution"]["status"], "pending");
    assert_eq!(job["lastExecution"]["error"], serde_json::Value::Null);
    let e = &cluster.executions(&retried).await[0];
    assert_eq!(e["attempt"], 3, "three attempts were made: {e}");
    let detail = cluster
        .get(&format!(
            "/openapi/executions/{}",
            e["executionId"].as_str().unwrap()
        ))
        .await;
    let failed_events = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|ev| ev["status"] == "failed")
        .count();
    assert_eq!(
        failed_events, 3,
        "every failed attempt is in the history: {detail}"
    );
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn services_failures_end_failed_and_unknown_handlers_wait() {
    failures_end_failed_and_unknown_handlers_wait(Stack::Services).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_failures_end_failed_and_unknown_handlers_wait() {
    failures_end_failed_and_unknown_handlers_wait(Stack::ServicesPg).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_failures_end_failed_and_unknown_handlers_wait() {
    failures_end_failed_and_unknown_handlers_wait(Stack::Embedded).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_jobs_survive_a_restart() {
    let Some(mut cluster) = Cluster::start(Stack::Embedded, 1, 1).await else {
        return;
    };
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            cluster
                .create_one_shot(&format!("keep-{i}"), "noop", json!({}))
                .await,
        );
    }
    cluster
        .wait_jobs(&ids, &["succeeded"], Duration::from_secs(60))
        .await;
    cluster.signal("dev", "INT");
    assert!(
        cluster.wait_exit("dev"),
        "kairos dev exits cleanly on Ctrl-C"
    );
    cluster.spawn("dev", &["dev"]);
    kairos_testkit::wait_for("restarted API", Duration::from_secs(60), || async {
        cluster.try_get("/healthz").await.map(|_| ())
    })
    .await;
    let listed = cluster.get("/openapi/jobs?limit=500").await;
    let listed: HashSet<String> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobId"].as_str().unwrap().to_string())
        .collect();
    for id in &ids {
        assert!(listed.contains(id), "job {id} is listed after the restart");
        assert_eq!(cluster.executions(id).await.len(), 1);
    }
    cluster.stop_all();
}
