//! Broadcast and sharded jobs on the services stack (MySQL, Redis,
//! RabbitMQ, one process per role): a sharded job with `shardCount: 8` runs
//! 8 executions across 2 workers, shard indices 0–7 once each; a broadcast
//! job runs once on each of 3 workers, and the sharded trigger's one
//! callback carries every shard's result. The workers are Rust services
//! embedding the worker library, whose handler answers with what
//! `ctx.shard()` told it. Then the same fan-out under `kairos dev` (SQLite,
//! in-process broker, its one worker).

use kairos_testkit::cluster as support;

use axum::Json;
use axum::extract::State;
use std::sync::Mutex;

use kairos_client::{Client, Execution, NewJob, PageRequest};
use kairos_core::protocol::Names;
use kairos_testkit as testkit;
use kairos_worker::{HandlerOutcome, JobContext, Worker};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use support::{Cluster, Stack};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(60);

/// Answers with the shard the worker's context carries, and who ran it.
async fn shard(ctx: JobContext, worker: &'static str) -> HandlerOutcome {
    let (index, count) = ctx.shard();
    HandlerOutcome::Success(json!({"index": index, "count": count, "worker": worker}))
}

/// A worker service with id `id` serving `shard`, against the cluster's broker.
async fn start_worker(
    cluster: &Cluster,
    id: &'static str,
    stop: &CancellationToken,
) -> JoinHandle<Result<(), kairos_worker::WorkerError>> {
    let names = Names::new(cluster.namespace());
    let broker = kairos::connect::rabbitmq(&cluster.env["KAIROS_AMQP_URL"], names.clone(), None)
        .await
        .expect("connect RabbitMQ");
    let coord = kairos::connect::redis(&cluster.env["KAIROS_REDIS_URL"], names.clone())
        .await
        .expect("connect Redis");
    let worker = Worker::builder()
        .id(id)
        .handler("shard", move |ctx: JobContext| shard(ctx, id))
        .broker(Arc::new(broker))
        .coordination(Arc::new(coord))
        .names(names)
        .heartbeat_every(Duration::from_millis(500))
        .build()
        .expect("build the worker");
    tokio::spawn(worker.run(stop.clone()))
}

/// Waits until the leading dispatcher's worker view has `n` online workers
/// (its `kairos_workers` gauge is set as it takes the view a claim uses).
async fn wait_dispatcher_sees(cluster: &Cluster, n: usize) {
    testkit::wait_for(
        &format!("the dispatcher to see {n} workers"),
        LONG,
        || async {
            let text = cluster.metrics_text("dispatcher-0").await;
            let online = support::prom::sum(&text, "kairos_workers", &[("state", "online")]);
            (online as usize >= n).then_some(())
        },
    )
    .await;
}

/// Callback bodies received, in order.
type Received = Arc<Mutex<Vec<serde_json::Value>>>;

async fn receive(State(rx): State<Received>, Json(body): Json<serde_json::Value>) {
    rx.lock().unwrap().push(body);
}

/// A callback receiver; its URL and what it got.
async fn start_receiver() -> (String, Received) {
    let rx = Received::default();
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(rx.clone());
    (support::receiver::serve(app, "/hook").await, rx)
}

/// Runs `job` to its end; its status and its executions by shard index.
async fn run(client: &Client, job: NewJob) -> (String, BTreeMap<u32, Execution>) {
    let id = client.create_job(&job).await.expect("create").job_id;
    let done = testkit::wait_for(&format!("job {id} to end"), LONG, || async {
        let d = client.job(&id).await.ok()?;
        matches!(d.job.status.as_str(), "succeeded" | "failed").then_some(d)
    })
    .await;
    assert_eq!(
        done.job.last_result.as_deref(),
        Some(done.job.status.as_str())
    );
    let page = client
        .executions(&id, &PageRequest::first(100))
        .await
        .expect("list executions");
    let mut by_shard = BTreeMap::new();
    for e in page.items {
        let index = e.shard_index;
        assert!(
            by_shard.insert(index, e).is_none(),
            "shard {index} ran more than once"
        );
    }
    (done.job.status, by_shard)
}

#[tokio::test(flavor = "multi_thread")]
async fn sharded_and_broadcast_jobs_fan_out_across_workers() {
    let Some(mut cluster) = Cluster::start(Stack::Services, 1, 0).await else {
        return;
    };
    let client = Client::with_key(cluster.base.clone(), &cluster.key).unwrap();
    let stop = CancellationToken::new();
    let mut workers = vec![
        start_worker(&cluster, "shard-a", &stop).await,
        start_worker(&cluster, "shard-b", &stop).await,
    ];
    cluster.wait_workers(2).await;
    wait_dispatcher_sees(&cluster, 2).await;

    let (url, received) = start_receiver().await;
    let mut job = NewJob::one_shot("sharded", "shard").sharded(8);
    job.callback_url = Some(url);
    let (status, shards) = run(&client, job).await;
    assert_eq!(status, "succeeded");
    assert_eq!(
        shards.keys().copied().collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    let mut used = BTreeSet::new();
    for (index, e) in &shards {
        assert_eq!((e.status.as_str(), e.shard_count), ("succeeded", 8));
        let out = e.output.as_ref().expect("output");
        assert_eq!(out["index"], *index, "the handler was told its shard");
        assert_eq!(out["count"], 8);
        assert_eq!(e.worker_id.as_deref(), out["worker"].as_str());
        used.insert(out["worker"].as_str().unwrap().to_string());
    }
    assert_eq!(used.len(), 2, "spread across both workers: {used:?}");
    // One callback for the trigger, written with the job's end: no
    // execution of it has another.
    let mut queued = 0;
    for e in shards.values() {
        let cbs = cluster
            .get(&format!("/openapi/executions/{}/callbacks", e.execution_id))
            .await;
        queued += cbs["items"].as_array().map_or(0, Vec::len);
    }
    assert_eq!(queued, 1, "one callback per trigger");
    let body = testkit::wait_for("the trigger's callback", LONG, || async {
        received.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(
        (body["status"].as_str(), body["shardCount"].as_u64()),
        (Some("succeeded"), Some(8))
    );
    let reported: Vec<(u64, String)> = body["shards"]
        .as_array()
        .expect("shards")
        .iter()
        .map(|s| {
            (
                s["shardIndex"].as_u64().unwrap(),
                s["executionId"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(u64, String)> = shards
        .iter()
        .map(|(i, e)| (u64::from(*i), e.execution_id.clone()))
        .collect();
    assert_eq!(reported, expected, "every shard's result, by index");

    workers.push(start_worker(&cluster, "shard-c", &stop).await);
    cluster.wait_workers(3).await;
    wait_dispatcher_sees(&cluster, 3).await;
    let (status, shards) = run(&client, NewJob::one_shot("broadcast", "shard").broadcast()).await;
    assert_eq!(status, "succeeded");
    let ran: Vec<(u32, u32, &str)> = shards
        .values()
        .map(|e| {
            (
                e.shard_index,
                e.shard_count,
                e.worker_id.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        ran,
        [(0, 3, "shard-a"), (1, 3, "shard-b"), (2, 3, "shard-c")],
        "once on each worker, indexed in worker order"
    );
    for e in shards.values() {
        let out = e.output.as_ref().expect("output");
        assert_eq!(
            (out["index"].as_u64(), out["count"].as_u64()),
            (Some(u64::from(e.shard_index)), Some(3))
        );
    }

    stop.cancel();
    for w in workers {
        w.await.unwrap().unwrap();
    }
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn kairos_dev_runs_a_sharded_job() {
    let Some(mut cluster) = Cluster::start(Stack::Embedded, 0, 0).await else {
        return;
    };
    let client = Client::with_key(cluster.base.clone(), &cluster.key).unwrap();
    let job = NewJob::one_shot("sharded-dev", "noop")
        .params(json!({"part": "of eight"}))
        .sharded(8);
    let (status, shards) = run(&client, job).await;
    assert_eq!(status, "succeeded");
    assert_eq!(
        shards.keys().copied().collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert!(
        shards
            .values()
            .all(|e| e.status == "succeeded" && e.shard_count == 8)
    );
    cluster.stop_all();
}
