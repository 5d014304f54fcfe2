//! Stop requests end to end on real processes, on both stacks: cancelling a
//! job stops the handler running its execution, and the `replace` overlap
//! policy stops the previous execution when the next trigger comes. The
//! handlers sleep for ten minutes, so only a stop can end them in time.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use kairos_testkit::wait_for;
use serde_json::{Value, json};
use std::time::Duration;
use support::{Cluster, Stack};

const DEADLINE: Duration = Duration::from_secs(60);
const STOPPED: &str = "stopped at the scheduler's request";

async fn execution_in(cluster: &Cluster, job_id: &str, status: &str) -> Value {
    wait_for(&format!("an execution {status}"), DEADLINE, || async {
        cluster
            .executions(job_id)
            .await
            .into_iter()
            .find(|e| e["status"] == status)
    })
    .await
}

async fn cancelling_a_running_job_stops_its_handler(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let id = cluster
        .create_one_shot("long", "sleep", json!({"ms": 600_000}))
        .await;
    let running = execution_in(&cluster, &id, "running").await;
    let (status, job) = cluster.delete(&format!("/openapi/jobs/{id}")).await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["status"], "cancelled");

    let stopped = execution_in(&cluster, &id, "cancelled").await;
    assert_eq!(stopped["executionId"], running["executionId"]);
    assert_eq!(stopped["attempt"], 1, "a stop is not retried: {stopped}");
    assert_eq!(stopped["error"], STOPPED, "{stopped}");
    assert!(stopped["stopRequestedAt"].is_string(), "{stopped}");
    assert_eq!(cluster.executions(&id).await.len(), 1);

    let next = cluster.create_one_shot("next", "noop", json!({})).await;
    cluster.wait_jobs(&[next], &["succeeded"], DEADLINE).await;
    cluster.stop_all();
}

async fn replace_stops_the_previous_execution(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let id = cluster
        .create_job(json!({
            "jobName": "replaced", "jobHandler": "sleep", "params": {"ms": 600_000},
            "everyMs": 2000, "overlapPolicy": "replace"
        }))
        .await;
    let first = execution_in(&cluster, &id, "running").await;
    let first_id = first["executionId"].clone();
    let stopped = execution_in(&cluster, &id, "cancelled").await;
    assert_eq!(stopped["executionId"], first_id, "the older one is stopped");
    assert_eq!(stopped["error"], STOPPED, "{stopped}");
    // Its replacement runs on.
    wait_for("the replacement running", DEADLINE, || async {
        cluster
            .executions(&id)
            .await
            .into_iter()
            .find(|e| e["status"] == "running" && e["executionId"] != first_id)
    })
    .await;
    let (status, _) = cluster.delete(&format!("/openapi/jobs/{id}")).await;
    assert_eq!(status, 200);
    wait_for("every execution ended", DEADLINE, || async {
        let execs = cluster.executions(&id).await;
        execs
            .iter()
            .all(|e| e["status"] == "cancelled")
            .then_some(())
    })
    .await;
    cluster.stop_all();
}

on_both_stacks!(
    cancelling_a_running_job_stops_its_handler,
    replace_stops_the_previous_execution,
);
