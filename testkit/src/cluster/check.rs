//! What every fault test needs: fast failure-detection settings, job
//! creation, the "every trigger ran once" check through the API, and who the
//! leader is, read from the dispatchers' logs.

use super::Cluster;
use crate as testkit;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// Failure detection short enough for tests: a 4 s lease, workers declared
/// dead 3 s after their last heartbeat (they beat every second).
pub const FAST: &[(&str, &str)] = &[
    ("KAIROS_LEASE_TTL_MS", "4000"),
    ("KAIROS_WORKER_DEAD_AFTER_MS", "3000"),
    ("KAIROS_WORKER_HEARTBEAT_MS", "1000"),
];

/// Generous: the box may be busy compiling.
pub const LONG: Duration = Duration::from_secs(180);

/// Creates `n` one-shot jobs from `body(i)`, all at once so they arrive as a
/// burst, and returns their ids in order.
pub async fn create_jobs(
    cluster: &Cluster,
    n: usize,
    body: impl Fn(usize) -> Value,
) -> Vec<String> {
    futures::future::join_all((0..n).map(|i| cluster.create_job(body(i)))).await
}

/// How many of `ids` have reached `status`.
pub async fn count_in(cluster: &Cluster, ids: &[String], status: &str) -> usize {
    jobs(cluster)
        .await
        .iter()
        .filter(|j| j["status"] == status && ids.iter().any(|id| j["jobId"] == id.as_str()))
        .count()
}

/// Waits until at least `n` of `ids` have reached `status`.
pub async fn wait_count(cluster: &Cluster, ids: &[String], status: &str, n: usize) {
    testkit::wait_for(&format!("{n} jobs {status}"), LONG, || async {
        (count_in(cluster, ids, status).await >= n).then_some(())
    })
    .await
}

/// A `noop` job body.
pub fn noop_job(name: String) -> Value {
    json!({"jobName": name, "jobHandler": "noop", "params": {}})
}

/// A `sleep` job body.
pub fn sleep_job(name: String, ms: u64, max_attempts: u32) -> Value {
    json!({
        "jobName": name,
        "jobHandler": "sleep",
        "params": {"ms": ms},
        "maxAttempts": max_attempts,
        "retryBackoffMs": 100,
    })
}

/// Checks, through the API, that each job has exactly one execution (its one
/// trigger was dispatched once: the unique `(job_id, scheduled_at)` held) in
/// `status`, and returns those executions by job id.
pub async fn one_execution_each(
    cluster: &Cluster,
    ids: &[String],
    status: &str,
) -> HashMap<String, Value> {
    let mut out = HashMap::with_capacity(ids.len());
    for id in ids {
        let execs = cluster.executions(id).await;
        assert_eq!(
            execs.len(),
            1,
            "job {id} has {} executions: {execs:?}",
            execs.len()
        );
        let e = execs.into_iter().next().unwrap_or_default();
        assert_eq!(e["status"], status, "job {id}: {e}");
        out.insert(id.clone(), e);
    }
    out
}

/// An execution with its history.
pub async fn detail(cluster: &Cluster, execution: &Value) -> Value {
    let id = execution["executionId"].as_str().expect("executionId");
    cluster.get(&format!("/openapi/executions/{id}")).await
}

/// Events of an execution's history with this status.
pub fn events_with<'a>(detail: &'a Value, status: &str) -> Vec<&'a Value> {
    detail["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["status"] == status)
        .collect()
}

/// Every job (first page of up to 500), with its last execution.
pub async fn jobs(cluster: &Cluster) -> Vec<Value> {
    let body = cluster.get("/openapi/jobs?limit=500").await;
    body["items"].as_array().cloned().unwrap_or_default()
}

/// The newest execution of each job (`Null` before its first trigger).
pub async fn last_executions(cluster: &Cluster, ids: &[String]) -> HashMap<String, Value> {
    let views = futures::future::join_all(
        ids.iter()
            .map(|id| async move { cluster.get(&format!("/openapi/jobs/{id}")).await }),
    )
    .await;
    ids.iter()
        .cloned()
        .zip(views.into_iter().map(|v| v["lastExecution"].clone()))
        .collect()
}

/// Ids of the jobs among `ids` whose newest execution is in `status` on `worker`.
pub async fn in_state_on(
    cluster: &Cluster,
    ids: &[String],
    status: &str,
    worker: &str,
) -> Vec<String> {
    let mut found: Vec<String> = last_executions(cluster, ids)
        .await
        .into_iter()
        .filter(|(_, e)| e["status"] == status && e["workerId"] == worker)
        .map(|(id, _)| id)
        .collect();
    found.sort();
    found
}

/// The fence of each log line containing `what` (`… what … fence=N`).
pub fn fences(log: &str, what: &str) -> Vec<u64> {
    log.lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            let rest = &l[l.find("fence=")? + "fence=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect()
}

/// The dispatcher holding the newest lease, with its fence, unless it has
/// stepped down since. Fences only grow, so the newest lease is the highest.
pub fn leader(cluster: &Cluster) -> Option<(String, u64)> {
    let mut best: Option<(String, u64)> = None;
    for name in cluster.names("dispatcher-") {
        let log = cluster.log(&name);
        if let Some(f) = fences(&log, "became leader").into_iter().max()
            && best.as_ref().is_none_or(|(_, b)| f > *b)
        {
            best = Some((name, f));
        }
    }
    let (name, fence) = best?;
    let log = cluster.log(&name);
    let ended = fences(&log, "no longer leader")
        .into_iter()
        .chain(fences(&log, "released the lease"))
        .any(|f| f == fence);
    (!ended).then_some((name, fence))
}

/// Waits for a leader with a fence above `after` (0: any leader).
pub async fn wait_leader(cluster: &Cluster, after: u64) -> (String, u64) {
    wait_leader_within(cluster, after, LONG).await
}

/// Waits up to `deadline` for a leader with a fence above `after`.
pub async fn wait_leader_within(
    cluster: &Cluster,
    after: u64,
    deadline: Duration,
) -> (String, u64) {
    testkit::wait_for("a dispatcher to lead", deadline, || async {
        leader(cluster).filter(|(_, f)| *f > after)
    })
    .await
}

/// Waits until `name` has logged that it stopped leading the term `fence`.
pub async fn wait_stepped_down(cluster: &Cluster, name: &str, fence: u64) {
    testkit::wait_for(&format!("{name} to step down"), LONG, || async {
        let log = cluster.log(name);
        fences(&log, "no longer leader")
            .into_iter()
            .chain(fences(&log, "released the lease"))
            .any(|f| f == fence)
            .then_some(())
    })
    .await
}
