//! A worker cut off from RabbitMQ and Redis while it runs a job: the reaper
//! declares its attempt lost and retries it elsewhere; when the worker comes
//! back it finds the stop request for the lost attempt and stops the handler,
//! whose late result the database refuses anyway.

use crate::check::{FAST, LONG, detail, events_with, in_state_on, one_execution_each, sleep_job};
use crate::proxy::Proxy;
use crate::support::{Cluster, Stack};
use kairos_testkit::wait_for;

/// `url` with its port replaced by a forwarder's, and the forwarder.
async fn through_proxy(url: &str) -> (String, Proxy) {
    let mut parsed = reqwest::Url::parse(url).expect("service URL");
    let target = format!(
        "{}:{}",
        parsed.host_str().unwrap_or("127.0.0.1"),
        parsed.port_or_known_default().expect("a port")
    );
    let proxy = Proxy::start(target).await;
    parsed.set_port(Some(proxy.port)).expect("set the port");
    (parsed.to_string(), proxy)
}

async fn a_worker_back_from_a_partition_stops_the_attempt_declared_lost(stack: Stack) {
    let Some(mut cluster) = Cluster::start_with(stack, 1, 0, FAST).await else {
        return;
    };
    let (amqp, amqp_proxy) = through_proxy(&cluster.env["KAIROS_AMQP_URL"]).await;
    let (redis, redis_proxy) = through_proxy(&cluster.env["KAIROS_REDIS_URL"]).await;
    cluster.spawn_worker_with(
        "worker-0",
        &[
            ("KAIROS_AMQP_URL", amqp.as_str()),
            ("KAIROS_REDIS_URL", redis.as_str()),
            ("KAIROS_WORKER_CAPACITY", "1"),
        ],
    );
    cluster.wait_workers(1).await;
    // Long enough that only a stop can end it on worker-0 during the test.
    let id = cluster
        .create_job(sleep_job("cut-off".into(), 30_000, 2))
        .await;
    let ids = [id.clone()];
    wait_for("the job running on worker-0", LONG, || async {
        (!in_state_on(&cluster, &ids, "running", "worker-0")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    cluster.spawn_worker("worker-1");

    amqp_proxy.down();
    redis_proxy.down();
    wait_for("attempt 2 running on worker-1", LONG, || async {
        (!in_state_on(&cluster, &ids, "running", "worker-1")
            .await
            .is_empty())
        .then_some(())
    })
    .await;
    amqp_proxy.up();
    redis_proxy.up();
    wait_for("worker-0 to stop the lost attempt", LONG, || async {
        cluster
            .log("worker-0")
            .contains("stopping an attempt at the scheduler's request")
            .then_some(())
    })
    .await;

    cluster.wait_jobs(&ids, &["succeeded"], LONG).await;
    let execs = one_execution_each(&cluster, &ids, "succeeded").await;
    let e = &execs[&id];
    assert_eq!(
        (e["attempt"].as_u64(), e["workerId"].as_str()),
        (Some(2), Some("worker-1")),
        "{e}"
    );
    let d = detail(&cluster, e).await;
    assert!(
        events_with(&d, "lost")
            .iter()
            .any(|ev| ev["attempt"] == 1 && ev["workerId"] == "worker-0"),
        "{d}"
    );
    // worker-0's report of the stopped attempt 1 changed nothing.
    assert!(events_with(&d, "failed").is_empty(), "{d}");
    assert!(events_with(&d, "cancelled").is_empty(), "{d}");
    cluster.stop_all();
}

on_server_stacks!(a_worker_back_from_a_partition_stops_the_attempt_declared_lost,);
