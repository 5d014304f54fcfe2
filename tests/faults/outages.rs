//! Outages of the services as the processes see them: connections cut by
//! RabbitMQ, Redis and the database (MariaDB or PostgreSQL), and the
//! database unreachable for a while.

use crate::check::{
    LONG, count_in, create_jobs, last_executions, leader, noop_job, one_execution_each, sleep_job,
    wait_count, wait_leader,
};
use crate::support::{Cluster, Stack, TestDb};
use crate::{inject, proxy};
use kairos_testkit::wait_for;

/// RabbitMQ closes the processes' connections, Redis kills their clients,
/// the database kills their connections, one after the other while jobs run: every
/// job still succeeds on its first attempt, and the cluster keeps working.
async fn connections_cut_by_the_services_are_reestablished(stack: Stack) {
    // The default dead-worker threshold: a reconnect is not a death.
    let env = [
        ("KAIROS_LEASE_TTL_MS", "4000"),
        ("KAIROS_WORKER_HEARTBEAT_MS", "1000"),
        ("KAIROS_WORKER_CAPACITY", "4"),
    ];
    let Some(mut cluster) = Cluster::start_with(stack, 2, 2, &env).await else {
        return;
    };
    cluster.wait_workers(2).await;
    wait_leader(&cluster, 0).await;
    let ids = create_jobs(&cluster, 60, |i| sleep_job(format!("cut-{i}"), 1500, 1)).await;
    let mut done = 4;
    wait_count(&cluster, &ids, "succeeded", done).await;

    let closed = inject::rabbitmq_close_connections(cluster.namespace());
    assert!(closed >= 4, "closed {closed} RabbitMQ connections");
    done = count_in(&cluster, &ids, "succeeded").await + 4;
    wait_count(&cluster, &ids, "succeeded", done.min(ids.len())).await;

    let pids: Vec<u32> = ["dispatcher-", "worker-"]
        .iter()
        .flat_map(|p| cluster.names(p))
        .map(|n| cluster.pid(&n))
        .collect();
    let killed = inject::redis_kill_clients(&pids).await;
    assert!(killed >= 4, "killed {killed} Redis clients");
    done = count_in(&cluster, &ids, "succeeded").await + 4;
    wait_count(&cluster, &ids, "succeeded", done.min(ids.len())).await;

    let db_url = cluster.env["KAIROS_DATABASE_URL"].clone();
    let killed = inject::database_kill_connections(&db_url).await;
    assert!(killed >= 1, "killed {killed} database connections");

    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    for e in one_execution_each(&cluster, &ids, "succeeded")
        .await
        .values()
    {
        assert_eq!(e["attempt"], 1, "{e}");
    }
    let more = create_jobs(&cluster, 10, |i| noop_job(format!("later-{i}"))).await;
    cluster.wait_jobs(&more, &["succeeded"], LONG).await;
    one_execution_each(&cluster, &more, "succeeded").await;
    cluster.stop_all();
}

/// With the database unreachable, `/readyz` answers 503; when it is back,
/// jobs accepted before the outage and new ones succeed.
async fn readyz_is_unready_while_the_database_is_unreachable(stack: Stack) {
    let Some(db) = TestDb::fresh(stack).await else {
        return;
    };
    let mut url = reqwest::Url::parse(&db.url).expect("database URL");
    let default_port = if stack == Stack::ServicesPg {
        5432
    } else {
        3306
    };
    let target = format!(
        "{}:{}",
        url.host_str().unwrap_or("127.0.0.1"),
        url.port().unwrap_or(default_port)
    );
    let db_proxy = proxy::Proxy::start(target).await;
    url.set_port(Some(db_proxy.port)).expect("set the port");
    let env = [
        ("KAIROS_DATABASE_URL", url.as_str()),
        ("KAIROS_WORKER_HEARTBEAT_MS", "1000"),
    ];
    let Some(mut cluster) = Cluster::start_with(stack, 1, 1, &env).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let early = cluster.create_job(sleep_job("early".into(), 3000, 1)).await;
    wait_for("the early job to start", LONG, || async {
        let last = last_executions(&cluster, std::slice::from_ref(&early)).await;
        (last[&early]["status"] == "running").then_some(())
    })
    .await;

    db_proxy.down();
    let body = wait_for("/readyz to report the database down", LONG, || async {
        let (status, body) = cluster.get_status("/readyz").await;
        (status == 503).then_some(body)
    })
    .await;
    assert_ne!(body["checks"]["database"], "ok", "{body}");

    db_proxy.up();
    wait_for("/readyz to recover", LONG, || async {
        (cluster.get_status("/readyz").await.0 == 200).then_some(())
    })
    .await;
    let late = cluster.create_job(noop_job("late".into())).await;
    let ids = [early, late];
    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    for e in one_execution_each(&cluster, &ids, "succeeded")
        .await
        .values()
    {
        assert_eq!(e["attempt"], 1, "{e}");
    }
    assert!(
        leader(&cluster).is_some(),
        "a dispatcher leads after the outage"
    );
    cluster.stop_all();
}

on_server_stacks!(
    connections_cut_by_the_services_are_reestablished,
    readyz_is_unready_while_the_database_is_unreachable,
);
