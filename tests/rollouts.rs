//! Rollouts and scale-downs on the services stack: every replaced worker
//! is a new worker id (on Kubernetes, the pod name).
//!
//! - Twenty workers, each started under a new id and stopped (most with
//!   SIGTERM, some killed), leave no queue on RabbitMQ and no row in
//!   `GET /openapi/workers`: a stopping worker deletes its queues, and the
//!   reaper deletes a dead one's and forgets gone workers.
//! - A job longer than the drain window, on a worker stopped mid-run, still
//!   succeeds on another worker, although it allows a single attempt: the
//!   stopped worker hands it back, and that retry does not count.

use kairos_broker_rabbitmq::AmqpBroker;
use kairos_core::protocol::Names;
use kairos_testkit::cluster::check::{self, LONG};
use kairos_testkit::cluster::{Cluster, Stack};
use kairos_testkit::wait_for;
use serde_json::Value;
use std::process::Command;

/// Fast detection, so the test waits seconds rather than minutes.
const FAST: &[(&str, &str)] = &[
    ("KAIROS_WORKER_HEARTBEAT_MS", "500"),
    ("KAIROS_WORKER_DEAD_AFTER_MS", "2000"),
    ("KAIROS_WORKER_FORGET_AFTER_MS", "1000"),
];

async fn worker_rows(cluster: &Cluster, prefix: &str) -> Vec<Value> {
    let body = cluster.get("/openapi/workers").await;
    body["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| {
            w["workerId"]
                .as_str()
                .is_some_and(|id| id.starts_with(prefix))
        })
        .cloned()
        .collect()
}

async fn wait_online(cluster: &Cluster, id: &str) {
    wait_for(&format!("worker {id} online"), LONG, || async {
        worker_rows(cluster, id)
            .await
            .iter()
            .any(|w| w["workerId"] == id && w["state"] == "online")
            .then_some(())
    })
    .await;
}

/// Whether a queue exists, by a passive declare on a channel of its own (a
/// missing queue closes the channel).
async fn queue_exists(conn: &lapin::Connection, name: &str) -> bool {
    let ch = conn.create_channel().await.expect("open a channel");
    let opts = lapin::options::QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    let exists = ch
        .queue_declare(name.into(), opts, Default::default())
        .await
        .is_ok();
    let _ = ch.close(200, "checked".into()).await;
    exists
}

/// The namespace's worker queues `rabbitmqctl` lists, or `None` where it
/// cannot be run (a broker on another host).
fn listed_worker_queues(ns: &str) -> Option<Vec<String>> {
    let out = Command::new("rabbitmqctl")
        .args(["list_queues", "-q", "--no-table-headers", "name"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let worker = format!("{ns}.worker.");
    let immediate = format!("{ns}.immediate.");
    Some(
        text.lines()
            .map(str::trim)
            .filter(|q| q.starts_with(&worker) || q.starts_with(&immediate))
            .map(str::to_string)
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_worker_restarts_leave_no_queue_and_no_row() {
    let Some(mut cluster) = Cluster::start_with(Stack::Services, 1, 0, FAST).await else {
        return;
    };
    let ns = cluster.namespace().to_string();
    let names = Names::new(ns.clone());
    let ids: Vec<String> = (0..20).map(|i| format!("roll-{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        cluster.spawn_worker(id);
        wait_online(&cluster, id).await;
        // Each one runs a job before it goes, as a real pod would.
        let job = cluster
            .create_one_shot(&format!("job-{id}"), "noop", serde_json::json!({}))
            .await;
        cluster
            .wait_jobs(std::slice::from_ref(&job), &["succeeded"], LONG)
            .await;
        // Most stop cleanly (a rollout); every fifth dies (a lost node).
        if i % 5 == 4 {
            cluster.signal(id, "KILL");
            cluster.wait_exit(id);
        } else {
            cluster.signal(id, "TERM");
            assert!(cluster.wait_exit(id), "worker {id} exited with an error");
        }
    }
    let url = cluster.env["KAIROS_AMQP_URL"].clone();
    let conn = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    wait_for("every worker queue deleted", LONG, || async {
        for id in &ids {
            for q in [names.worker_queue(id), names.immediate_queue(id)] {
                if queue_exists(&conn, &q).await {
                    return None;
                }
            }
        }
        Some(())
    })
    .await;
    if let Some(left) = listed_worker_queues(&ns) {
        assert!(left.is_empty(), "worker queues left behind: {left:?}");
    }
    wait_for("every gone worker forgotten", LONG, || async {
        worker_rows(&cluster, "roll-")
            .await
            .is_empty()
            .then_some(())
    })
    .await;
    // The broker's passive view agrees through the adapter too.
    let broker = AmqpBroker::connect(&url, names.clone())
        .await
        .expect("connect the adapter");
    use kairos_core::broker::Broker;
    for id in &ids {
        assert_eq!(broker.worker_queue_stats(id).await.unwrap(), None, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_longer_than_the_drain_window_succeeds_on_another_worker() {
    let env: Vec<(&str, &str)> = FAST
        .iter()
        .copied()
        .chain([("KAIROS_WORKER_GRACE_MS", "500")])
        .collect();
    let Some(mut cluster) = Cluster::start_with(Stack::Services, 1, 0, &env).await else {
        return;
    };
    cluster.spawn_worker("drain-old");
    wait_online(&cluster, "drain-old").await;
    // One attempt allowed, and a handler far longer than the drain window.
    let job = cluster
        .create_job(check::sleep_job("outlasts-the-drain".into(), 4000, 1))
        .await;
    wait_for("the job running on drain-old", LONG, || async {
        let e = cluster.executions(&job).await.into_iter().next()?;
        (e["status"] == "running" && e["workerId"] == "drain-old").then_some(())
    })
    .await;
    cluster.spawn_worker("drain-new");
    wait_online(&cluster, "drain-new").await;
    cluster.signal("drain-old", "TERM");
    assert!(
        cluster.wait_exit("drain-old"),
        "drain-old exited with an error"
    );
    cluster
        .wait_jobs(std::slice::from_ref(&job), &["succeeded"], LONG)
        .await;
    let execs = cluster.executions(&job).await;
    assert_eq!(execs.len(), 1, "{execs:?}");
    let e = &execs[0];
    assert_eq!(e["status"], "succeeded", "{e}");
    assert_eq!(e["workerId"], "drain-new", "{e}");
    assert_eq!(e["attempt"], 2, "{e}");
    let detail = check::detail(&cluster, e).await;
    let lost = check::events_with(&detail, "lost");
    assert_eq!(lost.len(), 1, "attempt 1 handed back as lost: {detail}");
    assert_eq!(lost[0]["attempt"], 1, "{detail}");
    assert!(
        lost[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("handed back")),
        "{detail}"
    );
}
