//! Partitioned dispatch on the services stack (MariaDB or PostgreSQL,
//! Redis, RabbitMQ, one process per role; `mariadb::…` and `postgres::…`): four dispatchers with `KAIROS_DISPATCH_PARTITIONED`
//! share the 256 partitions while cron and one-shot jobs run, and are killed,
//! frozen (SIGSTOP past their lease, then SIGCONT), terminated and started
//! again. After each fault the survivors hold every partition; at the end
//! every one-shot ran exactly once and every cron trigger exactly once (no
//! gap, no repeat: `misfirePolicy: fireAll` makes a late trigger run late
//! rather than vanish), and nothing is left unfinished.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use kairos_core::time::{Millis, now_ms, parse_rfc3339};
use kairos_testkit::cluster::check::{LONG, create_jobs, noop_job, one_execution_each};
use kairos_testkit::wait_for;
use serde_json::{Value, json};
use support::{Cluster, Stack};

const ENV: &[(&str, &str)] = &[
    ("KAIROS_DISPATCH_PARTITIONED", "true"),
    ("KAIROS_LEASE_TTL_MS", "3000"),
    ("KAIROS_WORKER_DEAD_AFTER_MS", "3000"),
    ("KAIROS_WORKER_HEARTBEAT_MS", "1000"),
];

const PARTITIONS: f64 = 256.0;

/// Partitions `name` says it holds, or `None` while it does not answer.
async fn held(cluster: &Cluster, name: &str) -> Option<f64> {
    let text = cluster.metrics_text(name).await;
    text.contains("kairos_dispatcher_partitions_owned")
        .then(|| support::prom::sum(&text, "kairos_dispatcher_partitions_owned", &[]))
}

/// Waits until the dispatchers in `names` hold every partition between
/// them, each some. Never asks a frozen process (it would not answer).
async fn shared_among(cluster: &Cluster, names: &[&str]) {
    wait_for(
        &format!("{names:?} to hold every partition"),
        LONG,
        || async {
            let mut total = 0.0;
            for n in names {
                match held(cluster, n).await {
                    Some(h) if h > 0.0 => total += h,
                    _ => return None,
                }
            }
            (total == PARTITIONS).then_some(())
        },
    )
    .await;
}

fn every_second(name: String) -> Value {
    json!({
        "jobName": name, "jobHandler": "noop",
        "cronExpr": "* * * * * *", "misfirePolicy": "fireAll",
    })
}

/// One-shots due now, then waits until they all succeeded.
async fn one_shots_run(cluster: &Cluster, tag: &str, n: usize) -> Vec<String> {
    let ids = create_jobs(cluster, n, |i| noop_job(format!("{tag}-{i}"))).await;
    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    ids
}

fn scheduled(execs: &[Value]) -> Vec<Millis> {
    let mut at: Vec<Millis> = execs
        .iter()
        .map(|e| parse_rfc3339(e["scheduledAt"].as_str().unwrap_or_default()).expect("RFC 3339"))
        .collect();
    at.sort_unstable();
    at
}

on_server_stacks!(four_partitioned_dispatchers_through_kills_freezes_and_restarts);

async fn four_partitioned_dispatchers_through_kills_freezes_and_restarts(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 4, 2, ENV).await else {
        return;
    };
    cluster.wait_workers(2).await;
    let all = [
        "dispatcher-0",
        "dispatcher-1",
        "dispatcher-2",
        "dispatcher-3",
    ];
    shared_among(&cluster, &all).await;

    let created = now_ms();
    let crons = create_jobs(&cluster, 12, |i| every_second(format!("cron-{i}"))).await;
    let mut shots = one_shots_run(&cluster, "start", 30).await;

    // Killed, then started again.
    cluster.signal("dispatcher-1", "KILL");
    assert!(!cluster.wait_exit("dispatcher-1"));
    shared_among(&cluster, &["dispatcher-0", "dispatcher-2", "dispatcher-3"]).await;
    shots.extend(one_shots_run(&cluster, "killed", 30).await);
    cluster.spawn("dispatcher-1", &["dispatcher"]);
    shared_among(&cluster, &all).await;

    // Frozen past its leases: the others take its partitions and dispatch
    // there; woken, it claims nothing until it holds its share again.
    cluster.signal("dispatcher-2", "STOP");
    shared_among(&cluster, &["dispatcher-0", "dispatcher-1", "dispatcher-3"]).await;
    shots.extend(one_shots_run(&cluster, "frozen", 30).await);
    cluster.signal("dispatcher-2", "CONT");
    shared_among(&cluster, &all).await;

    // Terminated (its leases released at once), then started again.
    cluster.signal("dispatcher-3", "TERM");
    assert!(
        cluster.wait_exit("dispatcher-3"),
        "dispatcher-3 exits cleanly"
    );
    shared_among(&cluster, &["dispatcher-0", "dispatcher-1", "dispatcher-2"]).await;
    cluster.spawn("dispatcher-3", &["dispatcher"]);
    // Killed and started again at once, with work due meanwhile.
    cluster.signal("dispatcher-0", "KILL");
    assert!(!cluster.wait_exit("dispatcher-0"));
    cluster.spawn("dispatcher-0", &["dispatcher"]);
    shots.extend(one_shots_run(&cluster, "restarted", 30).await);
    shared_among(&cluster, &all).await;

    for e in one_execution_each(&cluster, &shots, "succeeded")
        .await
        .values()
    {
        assert_eq!(e["attempt"], 1, "{e}");
    }
    for id in &crons {
        let (status, body) = cluster
            .post(&format!("/openapi/jobs/{id}/pause"), &json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let first_due = (created / 1_000 + 1) * 1_000;
    for id in &crons {
        let execs = wait_for("the cron job's executions to finish", LONG, || async {
            let execs = cluster.executions(id).await;
            execs
                .iter()
                .all(|e| e["status"] == "succeeded")
                .then_some(execs)
        })
        .await;
        let at = scheduled(&execs);
        assert!(
            at.first().is_some_and(|&t| t <= first_due + 1_000),
            "{id}: its first trigger ran: {at:?}"
        );
        for w in at.windows(2) {
            assert_eq!(
                w[1] - w[0],
                1_000,
                "{id}: a trigger skipped or repeated: {at:?}"
            );
        }
        assert!(at.len() >= 5, "{id}: {} triggers", at.len());
    }
    // Every instance that took part held partitions (logged as it did).
    for name in all {
        assert!(
            cluster.log(name).contains("partition leases taken"),
            "{name}:\n{}",
            cluster.log(name)
        );
    }
    cluster.stop_all();
}
