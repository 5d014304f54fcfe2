//! The worker as a library (on the in-process broker): what its heartbeats
//! announce, typed handlers and their errors, the context, and log lines.

use futures::StreamExt;
use kairos_core::broker::Broker;
use kairos_core::protocol::{
    DispatchMsg, HeartbeatMsg, LogLevel, LogMsg, Names, PROTOCOL_VERSION, ResultKind, ResultMsg,
};
use kairos_inproc::{MemoryBroker, MemoryCoord};
use kairos_testkit::{unique, wait_for};
use kairos_worker::{HandlerError, JobContext, Worker, WorkerBuilder, typed};
use serde::Deserialize;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(10);

struct Seen {
    results: Arc<Mutex<Vec<ResultMsg>>>,
    beats: Arc<Mutex<Vec<HeartbeatMsg>>>,
    logs: Arc<Mutex<Vec<LogMsg>>>,
}

/// One message as one item.
fn one<T: serde::de::DeserializeOwned>(payload: &[u8]) -> serde_json::Result<Vec<T>> {
    serde_json::from_slice(payload).map(|m| vec![m])
}

/// Collects what `stream` carries; `decode` turns a message into its items
/// (a results message holds one result or several).
async fn collect<T: Send + 'static>(
    mut stream: kairos_core::broker::DeliveryStream,
    decode: fn(&[u8]) -> serde_json::Result<Vec<T>>,
) -> Arc<Mutex<Vec<T>>> {
    let into = Arc::new(Mutex::new(Vec::new()));
    let sink = into.clone();
    tokio::spawn(async move {
        while let Some(d) = stream.next().await {
            sink.lock().unwrap().extend(decode(&d.payload).unwrap());
            d.acker.ack().await.unwrap();
        }
    });
    into
}

async fn setup() -> (Names, Arc<MemoryBroker>, Seen) {
    let names = Names::new(unique("sdk"));
    let broker = Arc::new(MemoryBroker::new(names.clone()));
    let seen = Seen {
        results: collect(
            broker.results_consume(100).await.unwrap(),
            kairos_core::protocol::decode_results,
        )
        .await,
        beats: collect(broker.heartbeats_consume(100).await.unwrap(), one).await,
        logs: collect(broker.logs_consume(100).await.unwrap(), one).await,
    };
    (names, broker, seen)
}

fn builder(names: &Names, broker: &Arc<MemoryBroker>) -> WorkerBuilder {
    Worker::builder()
        .id("sdk-worker")
        .names(names.clone())
        .broker(broker.clone())
        .coordination(Arc::new(MemoryCoord::new()))
        .heartbeat_every(Duration::from_millis(100))
}

fn dispatch(handler: &str, params: serde_json::Value, timeout_ms: Option<u64>) -> DispatchMsg {
    DispatchMsg {
        shard: None,
        immediate: false,
        parent_outputs: None,
        v: PROTOCOL_VERSION,
        execution_id: unique("e"),
        job_id: "j".into(),
        attempt: 1,
        handler: handler.into(),
        params,
        scheduled_at: 1_000,
        timeout_ms,
        group: None,
        trace: None,
        priority: None,
    }
}

async fn final_result(seen: &Seen, execution_id: &str) -> ResultMsg {
    wait_for("a final result", DEADLINE, || async {
        seen.results
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.execution_id == execution_id && r.kind != ResultKind::Started)
            .cloned()
    })
    .await
}

#[derive(Deserialize)]
struct Steps {
    steps: u32,
}

async fn steps(ctx: JobContext, p: Steps) -> Result<serde_json::Value, HandlerError> {
    if p.steps == 0 {
        return Err(HandlerError::permanent("nothing to do"));
    }
    for i in 1..=p.steps {
        ctx.log(LogLevel::Debug, format!("step {i}"));
        ctx.progress(f64::from(i) * 100.0 / f64::from(p.steps));
    }
    Ok(json!({
        "deadline_set": ctx.deadline.is_some(),
        "scheduled_at": ctx.scheduled_at,
        "attempt": ctx.attempt,
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_announce_the_handlers_served_and_the_group() {
    let (names, broker, seen) = setup().await;
    let worker = builder(&names, &broker)
        .builtin_handlers()
        .handler("steps", typed(steps))
        .only_handlers(["noop", "steps"])
        .group("edge")
        .build()
        .unwrap();
    assert_eq!(worker.handlers(), ["noop", "steps"]);
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker.run(stop.clone()));
    let beat = wait_for("a heartbeat", DEADLINE, || async {
        seen.beats.lock().unwrap().first().cloned()
    })
    .await;
    assert_eq!(beat.handlers, Some(vec!["noop".into(), "steps".into()]));
    assert_eq!(beat.group.as_deref(), Some("edge"));
    // A handler left out is not run even if a dispatch names it.
    let msg = dispatch("sleep", json!({"ms": 1}), None);
    broker.dispatch_publish("sdk-worker", &msg).await.unwrap();
    let r = final_result(&seen, &msg.execution_id).await;
    assert_eq!(r.kind, ResultKind::Failed);
    assert!(r.error.unwrap().contains("unknown handler"));
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[test]
fn serving_an_unregistered_handler_is_a_configuration_error() {
    let names = Names::new("x");
    let broker = Arc::new(MemoryBroker::new(names.clone()));
    let err = builder(&names, &broker)
        .builtin_handlers()
        .only_handlers(["noop", "thumbnail"])
        .build()
        .err()
        .expect("refused");
    assert!(err.to_string().contains("thumbnail"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_handlers_log_report_progress_and_fail_permanently() {
    let (names, broker, seen) = setup().await;
    let worker = builder(&names, &broker)
        .handler("steps", typed(steps))
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker.run(stop.clone()));
    wait_for("a heartbeat", DEADLINE, || async {
        (!seen.beats.lock().unwrap().is_empty()).then_some(())
    })
    .await;

    let ok = dispatch("steps", json!({"steps": 3}), Some(60_000));
    broker.dispatch_publish("sdk-worker", &ok).await.unwrap();
    let r = final_result(&seen, &ok.execution_id).await;
    assert_eq!(r.kind, ResultKind::Succeeded);
    assert_eq!(
        r.output,
        Some(json!({"deadline_set": true, "scheduled_at": 1_000, "attempt": 1}))
    );
    // The last lines are sent before the result.
    let logs: Vec<LogMsg> = seen
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.execution_id == ok.execution_id)
        .cloned()
        .collect();
    let lines: Vec<String> = logs
        .iter()
        .flat_map(|m| m.lines.iter().map(|l| l.message.clone()))
        .collect();
    assert_eq!(lines, ["step 1", "step 2", "step 3"]);
    assert!(
        logs.iter()
            .all(|m| m.worker_id == "sdk-worker" && m.attempt == 1)
    );
    assert_eq!(logs.last().unwrap().progress, Some(100.0));

    for (params, why) in [
        (json!({"steps": 0}), "nothing to do"),
        (json!({}), "invalid params"),
    ] {
        let bad = dispatch("steps", params, None);
        broker.dispatch_publish("sdk-worker", &bad).await.unwrap();
        let r = final_result(&seen, &bad.execution_id).await;
        assert_eq!(r.kind, ResultKind::Failed);
        assert_eq!(r.retryable, Some(false), "a retry cannot help");
        assert!(r.error.unwrap().contains(why));
    }
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_tells_a_handler_its_shard() {
    let (names, broker, seen) = setup().await;
    let worker = builder(&names, &broker)
        .handler("shard", |ctx: JobContext| async move {
            let (index, count) = ctx.shard();
            kairos_worker::HandlerOutcome::Success(json!([index, count]))
        })
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker.run(stop.clone()));
    // Its queue exists once it beats.
    wait_for("a heartbeat", DEADLINE, || async {
        (!seen.beats.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let single = dispatch("shard", json!({}), None);
    let third = DispatchMsg {
        execution_id: unique("e"),
        shard: Some(kairos_core::shard::Shard::new(3, 8)),
        parent_outputs: None,
        ..single.clone()
    };
    for msg in [&single, &third] {
        broker.dispatch_publish("sdk-worker", msg).await.unwrap();
    }
    let r = final_result(&seen, &third.execution_id).await;
    assert_eq!(r.output, Some(json!([3, 8])));
    let r = final_result(&seen, &single.execution_id).await;
    assert_eq!(
        r.output,
        Some(json!([0, 1])),
        "a single job is shard 0 of 1"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_node_reads_its_parents_outputs() {
    let (names, broker, seen) = setup().await;
    let worker = builder(&names, &broker)
        .handler("fan-in", |ctx: JobContext| async move {
            kairos_worker::HandlerOutcome::Success(json!(ctx.parent_outputs()))
        })
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker.run(stop.clone()));
    wait_for("a heartbeat", DEADLINE, || async {
        (!seen.beats.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let root = dispatch("fan-in", json!({}), None);
    let node = DispatchMsg {
        execution_id: unique("e"),
        parent_outputs: Some(json!({"b1": 1, "b2": {"k": 2}, "b3": null})),
        ..root.clone()
    };
    for msg in [&root, &node] {
        broker.dispatch_publish("sdk-worker", msg).await.unwrap();
    }
    let r = final_result(&seen, &node.execution_id).await;
    assert_eq!(r.output, Some(json!({"b1": 1, "b2": {"k": 2}, "b3": null})));
    let r = final_result(&seen, &root.execution_id).await;
    assert_eq!(
        r.output, None,
        "a root node has no parents (null: no output)"
    );
    stop.cancel();
    task.await.unwrap().unwrap();
}
