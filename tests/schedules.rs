//! Schedule semantics end to end on real processes, on every stack (MySQL,
//! PostgreSQL, embedded): misfire
//! policies after the scheduler was down, the `forbid` overlap policy, and
//! pause / resume / trigger / PATCH / DELETE on a running recurring job.
//! (`replace` and stopping are in `stops.rs`.)

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use kairos_core::time::{Millis, now_ms, parse_rfc3339, to_rfc3339};
use kairos_testkit::wait_for;
use serde_json::{Value, json};
use std::time::Duration;
use support::{Cluster, Stack};

const DEADLINE: Duration = Duration::from_secs(60);
/// Long enough that a trigger missed at its start is a misfire (more than
/// 5 s late) when scheduling resumes.
const DOWNTIME: Duration = Duration::from_secs(10);

fn ms(v: &Value) -> Millis {
    parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}"))).expect("RFC 3339")
}

/// Scheduled times of a job's executions, ascending.
async fn scheduled(cluster: &Cluster, id: &str) -> Vec<Millis> {
    let mut at: Vec<Millis> = cluster
        .executions(id)
        .await
        .iter()
        .map(|e| ms(&e["scheduledAt"]))
        .collect();
    at.sort_unstable();
    at
}

/// Waits until the scheduler has demonstrably worked past `span` from now: a
/// one-shot witness job due then has succeeded. Triggers are claimed in due
/// order, so any trigger a paused or cancelled job would have fired before
/// the witness would exist by then. An event to wait on, rather than a fixed
/// sleep that a slow machine could outrun.
async fn scheduler_worked_past(cluster: &Cluster, span: Duration) {
    let due = now_ms() + span.as_millis() as Millis;
    let witness = cluster
        .create_job(json!({
            "jobName": "witness", "jobHandler": "noop", "triggerAt": to_rfc3339(due)
        }))
        .await;
    wait_executions(cluster, &witness, "succeeded", 1).await;
}

/// Waits until none of the job's executions is live any more.
async fn settle(cluster: &Cluster, id: &str) -> Vec<Millis> {
    wait_for("the job's executions to settle", DEADLINE, || async {
        let execs = cluster.executions(id).await;
        let live = ["pending", "dispatched", "running"];
        execs
            .iter()
            .all(|e| !live.contains(&e["status"].as_str().unwrap_or_default()))
            .then_some(())
    })
    .await;
    scheduled(cluster, id).await
}

async fn wait_executions(cluster: &Cluster, id: &str, status: &str, n: usize) -> Vec<Value> {
    wait_for(&format!("{n} executions {status}"), DEADLINE, || async {
        let execs = cluster.executions(id).await;
        (execs.iter().filter(|e| e["status"] == status).count() >= n).then_some(execs)
    })
    .await
}

/// Stops whatever dispatches: the dispatcher (services) or the whole `kairos
/// dev` process (embedded).
fn stop_scheduling(cluster: &mut Cluster, stack: Stack) {
    let name = match stack {
        Stack::Services | Stack::ServicesPg => "dispatcher-0",
        Stack::Embedded => "dev",
    };
    cluster.signal(name, "TERM");
    assert!(cluster.wait_exit(name), "{name} exits on SIGTERM");
}

async fn resume_scheduling(cluster: &mut Cluster, stack: Stack) {
    match stack {
        Stack::Services | Stack::ServicesPg => cluster.spawn("dispatcher-0", &["dispatcher"]),
        Stack::Embedded => {
            cluster.spawn("dev", &["dev"]);
            wait_for("the restarted API", DEADLINE, || async {
                cluster.try_get("/healthz").await.map(|_| ())
            })
            .await;
        }
    }
}

async fn misfire_policies_after_downtime(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let mut jobs = Vec::new();
    for policy in ["skip", "fireOnce", "fireAll"] {
        let body = json!({
            "jobName": policy, "jobHandler": "noop", "everyMs": 1000, "misfirePolicy": policy
        });
        jobs.push((policy, cluster.create_job(body).await));
    }
    for (_, id) in &jobs {
        wait_executions(&cluster, id, "succeeded", 1).await;
    }
    let stopped_at = now_ms();
    stop_scheduling(&mut cluster, stack);
    tokio::time::sleep(DOWNTIME).await;
    let resumed_at = now_ms();
    resume_scheduling(&mut cluster, stack).await;
    // Catch-up happens in the first rounds; then the schedule goes on.
    for (_, id) in &jobs {
        wait_for("a trigger after the downtime", DEADLINE, || async {
            scheduled(&cluster, id)
                .await
                .last()
                .is_some_and(|&t| t >= resumed_at)
                .then_some(())
        })
        .await;
    }
    // Triggers missed by more than the 5 s misfire threshold: well after the
    // stop (any claimed before it are excluded) and well before the restart.
    let missed = (stopped_at + 300)..(resumed_at - 5_500);
    for (policy, id) in &jobs {
        let at = scheduled(&cluster, id).await;
        let caught_up = at.iter().filter(|t| missed.contains(t)).count();
        let biggest_gap = at.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        match *policy {
            "skip" => {
                assert_eq!(caught_up, 0, "skip runs no missed trigger: {at:?}");
                assert!(biggest_gap >= 3_000, "{at:?}");
            }
            "fireOnce" => {
                assert_eq!(caught_up, 1, "fireOnce runs one missed trigger: {at:?}");
                assert!(biggest_gap >= 3_000, "then jumps to now: {at:?}");
            }
            _ => {
                assert!(caught_up >= 4, "fireAll runs every missed trigger: {at:?}");
                assert_eq!(biggest_gap, 1_000, "no trigger left out: {at:?}");
            }
        }
        let distinct: std::collections::HashSet<_> = at.iter().collect();
        assert_eq!(distinct.len(), at.len(), "each trigger once: {at:?}");
    }
    cluster.stop_all();
}

async fn forbid_skips_triggers_while_one_runs(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let id = cluster
        .create_job(json!({
            "jobName": "slow", "jobHandler": "sleep", "params": {"ms": 2500},
            "everyMs": 1000, "overlapPolicy": "forbid"
        }))
        .await;
    let execs = wait_executions(&cluster, &id, "succeeded", 2).await;
    let skipped: Vec<&Value> = execs.iter().filter(|e| e["status"] == "skipped").collect();
    assert!(!skipped.is_empty(), "{execs:?}");
    for s in &skipped {
        let why = s["error"].as_str().unwrap_or_default();
        assert!(why.contains("overlapPolicy forbid"), "{s}");
        assert!(
            s["startedAt"].is_null(),
            "a skipped trigger never runs: {s}"
        );
    }
    // Never two at once: the runs do not overlap.
    let mut runs: Vec<(Millis, Millis)> = execs
        .iter()
        .filter(|e| e["status"] == "succeeded")
        .map(|e| (ms(&e["startedAt"]), ms(&e["finishedAt"])))
        .collect();
    runs.sort_unstable();
    for pair in runs.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "overlapping runs: {runs:?}");
    }
    cluster.delete(&format!("/openapi/jobs/{id}")).await;
    cluster.stop_all();
}

async fn control_of_a_recurring_job(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let id = cluster
        .create_job(json!({"jobName": "ctl", "jobHandler": "noop", "everyMs": 1000}))
        .await;
    let job = |suffix: &str| format!("/openapi/jobs/{id}{suffix}");
    wait_executions(&cluster, &id, "succeeded", 2).await;

    let (status, paused) = cluster.post(&job("/pause"), &json!({})).await;
    assert_eq!(
        (status, paused["status"].as_str()),
        (200, Some("paused")),
        "{paused}"
    );
    // A trigger claimed just before the pause may still run; then nothing,
    // while the scheduler works on past two and a half of its periods.
    let frozen = settle(&cluster, &id).await;
    scheduler_worked_past(&cluster, Duration::from_millis(2_500)).await;
    assert_eq!(scheduled(&cluster, &id).await, frozen, "paused: no trigger");

    let (status, resumed) = cluster.post(&job("/resume"), &json!({})).await;
    assert_eq!(
        (status, resumed["status"].as_str()),
        (200, Some("scheduled")),
        "{resumed}"
    );
    let before = frozen.len();
    wait_for("triggers after resume", DEADLINE, || async {
        (scheduled(&cluster, &id).await.len() >= before + 2).then_some(())
    })
    .await;

    // PATCH at a stale version is refused; at the current one it applies.
    // An hourly rate leaves the next step without regular triggers.
    let version = cluster.get(&job("")).await["version"]
        .as_i64()
        .expect("version");
    let (status, err) = cluster
        .patch(&job(""), &json!({"version": version - 1, "everyMs": 500}))
        .await;
    assert_eq!(status, 409, "{err}");
    let hourly = wait_for("PATCH at the current version", DEADLINE, || async {
        // A trigger may fire between the read and the PATCH: read again.
        let version = cluster.get(&job("")).await["version"].as_i64()?;
        let (status, changed) = cluster
            .patch(&job(""), &json!({"version": version, "everyMs": 3_600_000}))
            .await;
        (status == 200).then_some(changed)
    })
    .await;
    assert_eq!(hourly["everyMs"], 3_600_000);
    // Whatever was claimed before the PATCH runs to its end first.
    let settled = settle(&cluster, &id).await;

    // Run once now, outside the schedule.
    let asked = now_ms();
    let (status, body) = cluster.post(&job("/trigger"), &json!({})).await;
    assert_eq!(status, 202, "{body}");
    let now_run = wait_for("the extra execution", DEADLINE, || async {
        let at = scheduled(&cluster, &id).await;
        (at.len() > settled.len()).then_some(at)
    })
    .await;
    assert_eq!(now_run.len(), settled.len() + 1, "{now_run:?}");
    let extra = *now_run.last().expect("an execution");
    assert!(
        extra >= asked && extra - asked < 1_000,
        "{extra} vs {asked}"
    );

    let (status, cancelled) = cluster.delete(&job("")).await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("cancelled")),
        "{cancelled}"
    );
    let after = settle(&cluster, &id).await;
    scheduler_worked_past(&cluster, Duration::from_millis(1_500)).await;
    assert_eq!(
        scheduled(&cluster, &id).await,
        after,
        "cancelled: no trigger"
    );
    cluster.stop_all();
}

on_all_stacks!(
    misfire_policies_after_downtime,
    forbid_skips_triggers_while_one_runs,
    control_of_a_recurring_job,
);
