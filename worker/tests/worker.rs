//! The worker end to end on a broker and a guard: every case runs on the
//! in-process adapters and on RabbitMQ + Redis, under a unique namespace.

use futures::StreamExt;
use kairos_broker_rabbitmq::AmqpBroker;
use kairos_coord_redis::RedisCoord;
use kairos_core::broker::{Broker, DispatchQueue};
use kairos_core::coord::{CoordResult, Coordination, Lease, LeaseStore, OnceGuard, StopBoard};
use kairos_core::protocol::{
    DispatchMsg, HeartbeatMsg, Names, PROTOCOL_VERSION, ResultKind, ResultMsg,
};
use kairos_core::worker::WorkerState;
use kairos_inproc::MemoryBroker;
use kairos_inproc::MemoryCoord;
use kairos_testkit::{amqp_available, redis_available, unique, wait_for};
use kairos_worker::{HandlerOutcome, JobContext, Worker, WorkerBuilder};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(20);

/// One test's broker, coordination and what the worker sent back.
struct Env {
    names: Names,
    broker: Arc<dyn Broker>,
    coord: Arc<dyn Coordination>,
    amqp: Option<AmqpBroker>,
    results: Arc<Mutex<Vec<ResultMsg>>>,
    beats: Arc<Mutex<Vec<HeartbeatMsg>>>,
    collectors: CancellationToken,
}

impl Env {
    fn memory() -> Env {
        let names = Names::new(unique("wk"));
        let broker = Arc::new(MemoryBroker::new(names.clone()));
        Env::with(names, broker, Arc::new(MemoryCoord::new()), None)
    }

    /// `None` when a service is missing (and the policy allows skipping).
    async fn real() -> Option<Env> {
        let amqp_url = amqp_available().await?;
        let redis_url = redis_available().await?;
        let names = Names::new(unique("wk"));
        let broker = AmqpBroker::connect(&amqp_url, names.clone()).await.unwrap();
        let guard = RedisCoord::connect(&redis_url, names.clone())
            .await
            .unwrap();
        Some(Env::with(
            names,
            Arc::new(broker.clone()),
            Arc::new(guard),
            Some(broker),
        ))
    }

    fn with(
        names: Names,
        broker: Arc<dyn Broker>,
        coord: Arc<dyn Coordination>,
        amqp: Option<AmqpBroker>,
    ) -> Env {
        Env {
            names,
            broker,
            coord,
            amqp,
            results: Arc::default(),
            beats: Arc::default(),
            collectors: CancellationToken::new(),
        }
    }

    /// Collects results and heartbeats into vectors the test waits on.
    async fn collect(&self) {
        let results = self.broker.results_consume(100).await.unwrap();
        let beats = self.broker.heartbeats_consume(100).await.unwrap();
        // A results message carries one result or several (the worker
        // groups what becomes ready together); a heartbeat is one object.
        tokio::spawn(drain(
            results,
            kairos_core::protocol::decode_results,
            self.results.clone(),
            self.collectors.clone(),
        ));
        tokio::spawn(drain(
            beats,
            |p| serde_json::from_slice(p).map(|m| vec![m]),
            self.beats.clone(),
            self.collectors.clone(),
        ));
    }

    fn builder(&self) -> WorkerBuilder {
        Worker::builder()
            .id(unique("w").replace('_', "-"))
            .names(self.names.clone())
            .broker(self.broker.clone())
            .coordination(self.coord.clone())
            .stop_poll(Duration::from_millis(50))
            .heartbeat_every(Duration::from_millis(200))
            .builtin_handlers()
    }

    /// Runs the worker and waits for its first heartbeat (its queue exists then).
    async fn start(&self, builder: WorkerBuilder) -> Running {
        let worker = builder.build().unwrap();
        let id = worker.id().to_string();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(worker.run(shutdown.clone()));
        wait_for("the first heartbeat", DEADLINE, || async {
            self.beats
                .lock()
                .unwrap()
                .iter()
                .any(|b| b.worker_id == id)
                .then_some(())
        })
        .await;
        Running { id, shutdown, task }
    }

    async fn dispatch(
        &self,
        worker: &str,
        handler: &str,
        params: serde_json::Value,
        timeout_ms: Option<u64>,
    ) -> String {
        let msg = DispatchMsg {
            params,
            timeout_ms,
            ..first_attempt(&unique("e"), handler)
        };
        self.broker.dispatch_publish(worker, &msg).await.unwrap();
        msg.execution_id
    }

    fn results_for(&self, execution_id: &str) -> Vec<ResultMsg> {
        let all = self.results.lock().unwrap();
        all.iter()
            .filter(|r| r.execution_id == execution_id)
            .cloned()
            .collect()
    }

    /// Waits for the final result of an execution and checks what came before.
    async fn outcome(&self, execution_id: &str) -> ResultMsg {
        let results = wait_for("a final result", DEADLINE, || async {
            let rs = self.results_for(execution_id);
            rs.iter()
                .any(|r| r.kind != ResultKind::Started)
                .then_some(rs)
        })
        .await;
        let kinds: Vec<ResultKind> = results.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds.len(),
            2,
            "one started and one final result: {kinds:?}"
        );
        assert_eq!(kinds[0], ResultKind::Started);
        results[1].clone()
    }

    async fn cleanup(&self, workers: &[&str]) {
        self.collectors.cancel();
        for w in workers {
            let _ = self.broker.worker_queue_delete(w).await;
        }
        if let Some(amqp) = &self.amqp {
            let _ = amqp.topology_delete().await;
        }
    }
}

async fn drain<T>(
    mut stream: kairos_core::broker::DeliveryStream,
    decode: fn(&[u8]) -> serde_json::Result<Vec<T>>,
    into: Arc<Mutex<Vec<T>>>,
    stop: CancellationToken,
) {
    loop {
        let d = tokio::select! {
            _ = stop.cancelled() => return,
            d = stream.next() => match d { Some(d) => d, None => return },
        };
        let msgs = decode(&d.payload).unwrap();
        into.lock().unwrap().extend(msgs);
        d.acker.ack().await.unwrap();
    }
}

struct Running {
    id: String,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), kairos_worker::WorkerError>>,
}

impl Running {
    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

/// Attempt 1 of `execution_id` for `handler`, without params or time limit.
fn first_attempt(execution_id: &str, handler: &str) -> DispatchMsg {
    DispatchMsg {
        shard: None,
        immediate: false,
        parent_outputs: None,
        v: PROTOCOL_VERSION,
        execution_id: execution_id.to_string(),
        job_id: unique("j"),
        attempt: 1,
        handler: handler.into(),
        params: json!(null),
        scheduled_at: 0,
        timeout_ms: None,
        group: None,
        trace: None,
        priority: None,
    }
}

/// A handler that counts its runs.
fn counting(
    runs: Arc<AtomicU32>,
) -> impl Fn(JobContext) -> std::future::Ready<HandlerOutcome> + Send + Sync {
    move |_ctx| {
        runs.fetch_add(1, Ordering::SeqCst);
        std::future::ready(HandlerOutcome::Success(json!("counted")))
    }
}

/// A handler that runs until `release` is cancelled, then succeeds.
fn held_until(
    release: &CancellationToken,
) -> impl Fn(JobContext) -> std::pin::Pin<Box<dyn std::future::Future<Output = HandlerOutcome> + Send>>
+ Send
+ Sync
+ 'static {
    let gate = release.clone();
    move |_ctx| {
        let gate = gate.clone();
        Box::pin(async move {
            gate.cancelled().await;
            HandlerOutcome::Success(json!("released"))
        })
    }
}

async fn noop_succeeds_after_started(env: Env) {
    env.collect().await;
    let w = env.start(env.builder()).await;
    let params = json!({"hello": ["world", 1]});
    let exec = env.dispatch(&w.id, "noop", params.clone(), None).await;
    let done = env.outcome(&exec).await;
    assert_eq!(done.kind, ResultKind::Succeeded);
    assert_eq!(done.output, Some(params));
    assert_eq!(done.worker_id, w.id);
    assert_eq!(done.attempt, 1);
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

async fn a_duplicate_attempt_runs_once(env: Env) {
    env.collect().await;
    let runs = Arc::new(AtomicU32::new(0));
    // Capacity 1 and no buffer: one delivery in hand at a time, so the
    // sentinel below is delivered only after the duplicate was settled.
    let w = env
        .start(
            env.builder()
                .capacity(1)
                .buffer(0)
                .keep_queues_on_stop()
                .handler("count", counting(runs.clone())),
        )
        .await;
    let msg = first_attempt(&unique("e"), "count");
    env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
    env.outcome(&msg.execution_id).await;
    env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
    let sentinel = env
        .dispatch(&w.id, "noop", json!("after the duplicate"), None)
        .await;
    env.outcome(&sentinel).await;
    let id = w.id.clone();
    w.stop().await;
    let left = env.broker.worker_queue_stats(&id).await.unwrap().unwrap();
    assert_eq!(left.messages, 0, "both dispatches were handled");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(env.results_for(&msg.execution_id).len(), 2);
    env.cleanup(&[&id]).await;
}

async fn an_unknown_handler_fails_and_the_worker_goes_on(env: Env) {
    env.collect().await;
    let w = env.start(env.builder()).await;
    let exec = env.dispatch(&w.id, "nope", json!({}), None).await;
    let done = env.outcome(&exec).await;
    assert_eq!(done.kind, ResultKind::Failed);
    assert_eq!(
        done.error.as_deref(),
        Some("unknown handler \"nope\"; this worker runs: fail, http, noop, sleep")
    );
    let next = env.dispatch(&w.id, "noop", json!(1), None).await;
    assert_eq!(env.outcome(&next).await.kind, ResultKind::Succeeded);
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

async fn a_slow_handler_times_out(env: Env) {
    env.collect().await;
    let w = env.start(env.builder()).await;
    let exec = env
        .dispatch(&w.id, "sleep", json!({"ms": 600_000}), Some(100))
        .await;
    let done = env.outcome(&exec).await;
    assert_eq!(done.kind, ResultKind::TimedOut);
    assert_eq!(
        done.error.as_deref(),
        Some("handler exceeded its timeout of 100 ms")
    );
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

async fn a_panicking_handler_fails_and_the_worker_survives(env: Env) {
    env.collect().await;
    let boom = |_ctx: JobContext| async move {
        if std::hint::black_box(true) {
            panic!("kaboom");
        }
        HandlerOutcome::Success(json!(null))
    };
    let w = env.start(env.builder().handler("boom", boom)).await;
    let exec = env.dispatch(&w.id, "boom", json!({}), None).await;
    let done = env.outcome(&exec).await;
    assert_eq!(done.kind, ResultKind::Failed);
    assert_eq!(done.error.as_deref(), Some("handler panicked: kaboom"));
    let next = env.dispatch(&w.id, "noop", json!("still here"), None).await;
    assert_eq!(env.outcome(&next).await.output, Some(json!("still here")));
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

async fn a_full_pool_and_buffer_reroutes(env: Env) {
    env.collect().await;
    let release = CancellationToken::new();
    let hold = held_until(&release);
    let w = env
        .start(env.builder().capacity(1).buffer(1).handler("hold", hold))
        .await;
    let mut reroute = env.broker.reroute_consume(10).await.unwrap();
    let first = env.dispatch(&w.id, "hold", json!(1), None).await;
    let second = env.dispatch(&w.id, "hold", json!(2), None).await;
    let third = env.dispatch(&w.id, "hold", json!(3), None).await;
    let refused = tokio::time::timeout(DEADLINE, reroute.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(refused.rejected_by.as_deref(), Some(w.id.as_str()));
    let msg: DispatchMsg = serde_json::from_slice(&refused.payload).unwrap();
    assert_eq!(msg.execution_id, third);
    refused.acker.ack().await.unwrap();
    release.cancel();
    for exec in [&first, &second] {
        assert_eq!(env.outcome(exec).await.output, Some(json!("released")));
    }
    assert!(env.results_for(&third).is_empty());
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// Dispatches waiting in the buffer take the freed permit by delivery rank
/// (priority, then immediate), not in arrival order: an urgent one accepted
/// behind a queue of bulk work runs next.
async fn buffered_dispatches_run_by_rank(env: Env) {
    env.collect().await;
    let release = CancellationToken::new();
    let started = Arc::new(Mutex::new(Vec::new()));
    let record = {
        let started = started.clone();
        move |ctx: JobContext| {
            started.lock().unwrap().push(ctx.execution_id.clone());
            std::future::ready(HandlerOutcome::Success(json!("recorded")))
        }
    };
    let w = env
        .start(
            env.builder()
                .capacity(1)
                .buffer(10)
                .handler("hold", held_until(&release))
                .handler("record", record),
        )
        .await;
    let first = env.dispatch(&w.id, "hold", json!(1), None).await;
    wait_for("the first to start", DEADLINE, || async {
        (!env.results_for(&first).is_empty()).then_some(())
    })
    .await;
    let sent: Vec<(&str, Option<u8>, bool)> = vec![
        ("bulk-1", Some(0), false),
        ("cron", None, false),
        ("bulk-2", Some(0), false),
        ("waited-for", None, true),
        ("urgent", Some(9), false),
    ];
    let mut ids = HashMap::new();
    for (name, priority, immediate) in &sent {
        let msg = DispatchMsg {
            priority: priority.and_then(kairos_core::priority::Priority::new),
            immediate: *immediate,
            ..first_attempt(&unique(name), "record")
        };
        env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
        ids.insert(msg.execution_id.clone(), *name);
    }
    // All of them wait in the buffer (the heartbeat lists them held) while
    // the first holds the only permit.
    wait_for("every dispatch held", DEADLINE, || async {
        let beats = env.beats.lock().unwrap();
        beats
            .iter()
            .rev()
            .find(|b| b.worker_id == w.id)
            .and_then(|b| b.held.as_ref())
            .is_some_and(|held| held.len() == sent.len() + 1)
            .then_some(())
    })
    .await;
    release.cancel();
    assert_eq!(env.outcome(&first).await.output, Some(json!("released")));
    let order = wait_for("every dispatch run", DEADLINE, || async {
        let started = started.lock().unwrap();
        (started.len() == sent.len()).then(|| started.clone())
    })
    .await;
    let mut names: Vec<&str> = order.iter().map(|id| ids[id]).collect();
    // Within one rank the order is the tasks' arrival at the permits, which
    // the runtime's scheduling may swap.
    names[3..].sort_unstable();
    assert_eq!(names, ["urgent", "waited-for", "cron", "bulk-1", "bulk-2"]);
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// A dispatch that outranks everything waiting on a full worker is taken at
/// once, beyond the buffer, and runs next, instead of being refused for
/// reroute after the full wait; one that does not outrank is refused.
async fn an_urgent_dispatch_is_taken_past_a_full_buffer(env: Env) {
    let mut reroute = env.broker.reroute_consume(10).await.unwrap();
    let (w, release, first) = one_slot_running(&env, 1).await;
    // Fills the buffer: pool and buffer are full from here on.
    let bulk = DispatchMsg {
        priority: kairos_core::priority::Priority::new(0),
        ..first_attempt(&unique("bulk"), "hold")
    };
    env.broker.dispatch_publish(&w.id, &bulk).await.unwrap();
    let same = DispatchMsg {
        priority: kairos_core::priority::Priority::new(0),
        ..first_attempt(&unique("same"), "hold")
    };
    env.broker.dispatch_publish(&w.id, &same).await.unwrap();
    let refused = tokio::time::timeout(DEADLINE, reroute.next())
        .await
        .unwrap()
        .unwrap();
    let back: DispatchMsg = serde_json::from_slice(&refused.payload).unwrap();
    assert_eq!(
        back.execution_id, same.execution_id,
        "no higher rank: refused"
    );
    refused.acker.ack().await.unwrap();
    let urgent = DispatchMsg {
        priority: kairos_core::priority::Priority::new(9),
        ..first_attempt(&unique("urgent"), "hold")
    };
    env.broker.dispatch_publish(&w.id, &urgent).await.unwrap();
    wait_for("the urgent one held", DEADLINE, || async {
        let beats = env.beats.lock().unwrap();
        beats
            .iter()
            .rev()
            .find(|b| b.worker_id == w.id)
            .and_then(|b| b.held.as_ref())
            .is_some_and(|held| held.iter().any(|h| h.execution_id == urgent.execution_id))
            .then_some(())
    })
    .await;
    release.cancel();
    let urgent_done = env.outcome(&urgent.execution_id).await;
    let bulk_done = env.outcome(&bulk.execution_id).await;
    assert_eq!(urgent_done.output, Some(json!("released")));
    // One permit: the first to start ran alone, so report order is run order.
    let started_at = |exec: &str| {
        env.results
            .lock()
            .unwrap()
            .iter()
            .position(|r| r.execution_id == exec && r.kind == ResultKind::Started)
            .unwrap()
    };
    assert!(
        started_at(&urgent.execution_id) < started_at(&bulk.execution_id),
        "the urgent one ran before the bulk one it passed"
    );
    assert_eq!(bulk_done.output, Some(json!("released")));
    let _ = first;
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// Urgent work sent to the immediate queue reaches a worker whose main
/// queue's prefetch window is full of batches waiting for its one permit
/// (a flood's state): it is taken and runs next, while the same dispatch
/// sent to the main queue waits in the broker until a batch has started.
async fn an_immediate_dispatch_passes_a_full_main_window(env: Env) {
    let (w, release, first) = one_slot_running(&env, 4).await;
    let ranked = |name: &str, priority: u8| DispatchMsg {
        priority: kairos_core::priority::Priority::new(priority),
        ..first_attempt(&unique(name), "hold")
    };
    let held = |execs: Vec<String>| {
        let env = &env;
        let id = w.id.clone();
        async move {
            wait_for("the worker to hold them", DEADLINE, || async {
                let beats = env.beats.lock().unwrap();
                let held = beats
                    .iter()
                    .rev()
                    .find(|b| b.worker_id == id)
                    .and_then(|b| b.held.clone())?;
                execs
                    .iter()
                    .all(|e| held.iter().any(|h| &h.execution_id == e))
                    .then_some(())
            })
            .await
        }
    };
    // Two batches fill the main window (prefetch 2): the first's rank is
    // the running one's, the second outranks it, and neither has started.
    let bulk: Vec<DispatchMsg> = (0..4).map(|_| ranked("bulk", 6)).collect();
    let more: Vec<DispatchMsg> = (0..4).map(|_| ranked("more", 7)).collect();
    for batch in [&bulk, &more] {
        env.broker
            .dispatch_publish_many(&w.id, batch)
            .await
            .unwrap();
        held(batch.iter().map(|m| m.execution_id.clone()).collect()).await;
    }
    let urgent = DispatchMsg {
        immediate: true,
        ..ranked("urgent", 9)
    };
    env.broker
        .dispatch_publish_to(
            &w.id,
            DispatchQueue::Immediate,
            std::slice::from_ref(&urgent),
        )
        .await
        .unwrap();
    held(vec![urgent.execution_id.clone()]).await;
    // The same urgency through the main queue stays in the broker.
    let behind = ranked("behind", 9);
    env.broker.dispatch_publish(&w.id, &behind).await.unwrap();
    let ready = env.broker.worker_queue_stats(&w.id).await.unwrap().unwrap();
    assert_eq!(ready.messages, 1, "the main window is full: it waits there");
    release.cancel();
    for exec in bulk.iter().chain(&more).chain([&urgent, &behind]) {
        assert_eq!(
            env.outcome(&exec.execution_id).await.output,
            Some(json!("released"))
        );
    }
    let started: Vec<String> = env
        .results
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.kind == ResultKind::Started && r.execution_id != first)
        .map(|r| r.execution_id.clone())
        .collect();
    assert_eq!(
        started.first(),
        Some(&urgent.execution_id),
        "the immediate one ran next"
    );
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// A batch (one message, several dispatches) runs each of its dispatches
/// once, skips one that already ran, and is acked once all have started.
async fn a_batch_runs_each_of_its_dispatches_once(env: Env) {
    env.collect().await;
    let runs = Arc::new(AtomicU32::new(0));
    let w = env
        .start(
            env.builder()
                .capacity(2)
                .buffer(2)
                .dispatch_batch(4)
                .keep_queues_on_stop()
                .handler("count", counting(runs.clone())),
        )
        .await;
    assert!(
        env.beats
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.worker_id == w.id && b.dispatch_batch == Some(4) && b.immediate_queue),
        "its heartbeats offer batches of 4 and the immediate queue"
    );
    // Told not to, a worker neither consumes nor offers the second queue.
    let single = env.start(env.builder().immediate_queue(false)).await;
    assert!(
        env.beats
            .lock()
            .unwrap()
            .iter()
            .any(|b| b.worker_id == single.id && !b.immediate_queue),
        "no immediate queue offered"
    );
    let single_id = single.id.clone();
    single.stop().await;
    let ran = first_attempt(&unique("e"), "count");
    env.broker.dispatch_publish(&w.id, &ran).await.unwrap();
    env.outcome(&ran.execution_id).await;
    let fresh: Vec<DispatchMsg> = (0..3)
        .map(|_| first_attempt(&unique("e"), "count"))
        .collect();
    let mut batch = vec![ran.clone()];
    batch.extend(fresh.iter().cloned());
    env.broker
        .dispatch_publish_many(&w.id, &batch)
        .await
        .unwrap();
    for msg in &fresh {
        assert_eq!(
            env.outcome(&msg.execution_id).await.kind,
            ResultKind::Succeeded
        );
    }
    let id = w.id.clone();
    w.stop().await;
    let left = env.broker.worker_queue_stats(&id).await.unwrap().unwrap();
    assert_eq!(left.messages, 0, "the batch was acked, not handed back");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        4,
        "the one that ran is skipped"
    );
    assert_eq!(env.results_for(&ran.execution_id).len(), 2);
    env.cleanup(&[&id, &single_id]).await;
}

/// Collects, starts a worker of capacity 1 and buffer 1 offering batches of
/// `batch`, and has it run one `hold` dispatch until the returned token is
/// cancelled: its buffer is the only place left.
async fn one_slot_running(env: &Env, batch: u32) -> (Running, CancellationToken, String) {
    env.collect().await;
    let release = CancellationToken::new();
    let w = env
        .start(
            env.builder()
                .capacity(1)
                .buffer(1)
                .dispatch_batch(batch)
                .keep_queues_on_stop()
                .handler("hold", held_until(&release)),
        )
        .await;
    let first = env.dispatch(&w.id, "hold", json!(1), None).await;
    wait_for("the first to start", DEADLINE, || async {
        (!env.results_for(&first).is_empty()).then_some(())
    })
    .await;
    (w, release, first)
}

/// A batch meeting a worker whose pool and buffer are full is refused whole,
/// for the dispatchers to split: none of it starts here.
async fn a_batch_meeting_a_full_worker_is_refused_whole(env: Env) {
    let mut reroute = env.broker.reroute_consume(10).await.unwrap();
    let (w, release, first) = one_slot_running(&env, 2).await;
    // Waits in the buffer: pool and buffer are full from here on.
    let second = env.dispatch(&w.id, "hold", json!(2), None).await;
    let batch = vec![
        first_attempt(&unique("e"), "hold"),
        first_attempt(&unique("e"), "hold"),
    ];
    env.broker
        .dispatch_publish_many(&w.id, &batch)
        .await
        .unwrap();
    let refused = tokio::time::timeout(DEADLINE, reroute.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(refused.rejected_by.as_deref(), Some(w.id.as_str()));
    let back = kairos_core::protocol::decode_dispatches(&refused.payload).unwrap();
    assert_eq!(back, batch, "the whole batch, as sent");
    refused.acker.ack().await.unwrap();
    release.cancel();
    for exec in [&first, &second] {
        assert_eq!(env.outcome(exec).await.output, Some(json!("released")));
    }
    for msg in &batch {
        assert!(
            env.results_for(&msg.execution_id).is_empty(),
            "never started"
        );
    }
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// A batch larger than the places free is taken whole once one place is:
/// the rest waits beyond the buffer instead of the batch being refused.
async fn a_batch_larger_than_the_free_places_is_taken_and_waits(env: Env) {
    let (w, release, _first) = one_slot_running(&env, 3).await;
    let batch: Vec<DispatchMsg> = (0..3)
        .map(|_| first_attempt(&unique("e"), "hold"))
        .collect();
    env.broker
        .dispatch_publish_many(&w.id, &batch)
        .await
        .unwrap();
    release.cancel();
    // Nothing consumes the reroute queue here: a refused batch never ends.
    for msg in &batch {
        let done = env.outcome(&msg.execution_id).await;
        assert_eq!(done.output, Some(json!("released")));
        assert_eq!(done.worker_id, w.id);
    }
    let id = w.id.clone();
    w.stop().await;
    let left = env.broker.worker_queue_stats(&id).await.unwrap().unwrap();
    assert_eq!(left.messages, 0, "the batch was acked");
    env.cleanup(&[&id]).await;
}

async fn shutdown_hands_back_unfinished_work_and_deregisters(env: Env) {
    env.collect().await;
    let w = env
        .start(env.builder().grace_period(Duration::from_millis(300)))
        .await;
    let exec = env
        .dispatch(&w.id, "sleep", json!({"ms": 600_000}), None)
        .await;
    wait_for("the started result", DEADLINE, || async {
        (!env.results_for(&exec).is_empty()).then_some(())
    })
    .await;
    let id = w.id.clone();
    w.stop().await;
    // Handed back: no final result (the dispatcher retries the attempt once
    // it sees the worker offline, without counting it against maxAttempts).
    // A result sent after the worker stopped arrives after any it sent.
    let sentinel = unique("after-stop");
    let mut marker = env.results_for(&exec)[0].clone();
    marker.execution_id = sentinel.clone();
    env.broker.results_publish(&[marker]).await.unwrap();
    wait_for("the sentinel result", DEADLINE, || async {
        (!env.results_for(&sentinel).is_empty()).then_some(())
    })
    .await;
    let results: Vec<ResultKind> = env.results_for(&exec).iter().map(|r| r.kind).collect();
    assert_eq!(
        results,
        [ResultKind::Started],
        "only `started` was reported"
    );
    // Deregistered: the worker deleted its queues.
    assert_eq!(env.broker.worker_queue_stats(&id).await.unwrap(), None);
    let states = wait_for("the offline heartbeat", DEADLINE, || async {
        let beats = env.beats.lock().unwrap();
        let states: Vec<WorkerState> = beats
            .iter()
            .filter(|b| b.worker_id == id)
            .map(|b| b.state)
            .collect();
        states.contains(&WorkerState::Offline).then_some(states)
    })
    .await;
    let draining = states.iter().position(|s| *s == WorkerState::Draining);
    let offline = states.iter().position(|s| *s == WorkerState::Offline);
    assert!(
        draining.is_some() && draining < offline,
        "draining before offline: {states:?}"
    );
    assert_eq!(states.last(), Some(&WorkerState::Offline));
    assert!(
        states[..draining.unwrap()]
            .iter()
            .all(|s| *s == WorkerState::Online)
    );
    env.cleanup(&[&id]).await;
}

async fn a_stop_request_stops_the_running_handler(env: Env) {
    env.collect().await;
    // A buffer of one: the next dispatch may arrive before the stopped
    // attempt has given its place back.
    let w = env.start(env.builder().capacity(1).buffer(1)).await;
    let exec = env
        .dispatch(&w.id, "sleep", json!({"ms": 600_000}), None)
        .await;
    wait_for("the attempt to start", DEADLINE, || async {
        (!env.results_for(&exec).is_empty()).then_some(())
    })
    .await;
    let other = env.names.stop_key(&exec, 2);
    env.coord
        .stops_post(&[other], Duration::from_secs(60))
        .await
        .unwrap();
    env.coord
        .stops_post(&[env.names.stop_key(&exec, 1)], Duration::from_secs(60))
        .await
        .unwrap();
    let done = env.outcome(&exec).await;
    assert_eq!(done.kind, ResultKind::Failed);
    assert_eq!(
        done.error.as_deref(),
        Some("stopped at the scheduler's request")
    );
    // The slot is free again: the next attempt runs.
    let next = env.dispatch(&w.id, "noop", json!("next"), None).await;
    assert_eq!(env.outcome(&next).await.kind, ResultKind::Succeeded);
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// A job cancelled while its trigger waited (claimed ahead of its due time,
/// or queued behind other work): the stop is posted before the dispatch
/// arrives, so the handler never runs and the attempt ends stopped.
async fn an_attempt_stopped_before_it_starts_never_runs(env: Env) {
    env.collect().await;
    let runs = Arc::new(AtomicU32::new(0));
    let w = env
        .start(env.builder().handler("count", counting(runs.clone())))
        .await;
    let exec = unique("e");
    env.coord
        .stops_post(&[env.names.stop_key(&exec, 1)], Duration::from_secs(60))
        .await
        .unwrap();
    env.broker
        .dispatch_publish(&w.id, &first_attempt(&exec, "count"))
        .await
        .unwrap();
    // `outcome` expects a `started` first; this attempt has none.
    let done = wait_for("attempt 1's final result", DEADLINE, || async {
        env.results_for(&exec).into_iter().next()
    })
    .await;
    assert_eq!(done.kind, ResultKind::Failed);
    assert_eq!(
        done.error.as_deref(),
        Some("stopped at the scheduler's request")
    );
    assert_eq!(done.started_at, None, "it never started");
    // The next attempt of the same execution, not stopped, runs.
    let mut second = first_attempt(&exec, "count");
    second.attempt = 2;
    env.broker.dispatch_publish(&w.id, &second).await.unwrap();
    wait_for("the second attempt's result", DEADLINE, || async {
        env.results_for(&exec)
            .iter()
            .any(|r| r.attempt == 2 && r.kind == ResultKind::Succeeded)
            .then_some(())
    })
    .await;
    let kinds: Vec<(u32, ResultKind)> = env
        .results_for(&exec)
        .iter()
        .map(|r| (r.attempt, r.kind))
        .collect();
    assert!(
        !kinds.contains(&(1, ResultKind::Started)),
        "attempt 1 never reported started: {kinds:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "only attempt 2 ran");
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

async fn an_attempt_key_released_for_its_dead_owner_runs_again(env: Env) {
    env.collect().await;
    let runs = Arc::new(AtomicU32::new(0));
    let counting_worker = || {
        env.builder()
            .capacity(1)
            .buffer(0)
            .keep_queues_on_stop()
            .handler("count", counting(runs.clone()))
    };
    let exec = unique("e");
    let key = env.names.attempt_key(&exec, 1);
    // A worker that died after taking the key, before confirming `started`.
    assert!(
        env.coord
            .once(&key, "ghost", Duration::from_secs(60))
            .await
            .unwrap()
    );
    let msg = first_attempt(&exec, "count");
    let w = env.start(counting_worker()).await;
    env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
    let sentinel = env.dispatch(&w.id, "noop", json!(1), None).await;
    env.outcome(&sentinel).await;
    let first = w.id.clone();
    // Stopping settles every delivery the worker had.
    w.stop().await;
    let left = env
        .broker
        .worker_queue_stats(&first)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(left.messages, 0, "the duplicate was acked");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "skipped while the ghost held it"
    );
    assert!(env.results_for(&exec).is_empty());

    // What the reaper does for a dead worker's unstarted attempts.
    assert!(env.coord.release(&key, "ghost").await.unwrap());
    let w = env.start(counting_worker()).await;
    env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
    assert_eq!(env.outcome(&exec).await.kind, ResultKind::Succeeded);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&first, &id]).await;
}

/// Coordination that notes the TTL of every attempt key taken through it.
struct TtlSpy {
    inner: Arc<dyn Coordination>,
    ttls: Mutex<Vec<Duration>>,
}

#[async_trait::async_trait]
impl LeaseStore for TtlSpy {
    async fn lease_try_acquire(&self, name: &str, ttl: Duration) -> CoordResult<Option<Lease>> {
        self.inner.lease_try_acquire(name, ttl).await
    }
    async fn lease_renew(&self, lease: &Lease) -> CoordResult<bool> {
        self.inner.lease_renew(lease).await
    }
    async fn lease_release(&self, lease: &Lease) -> CoordResult<()> {
        self.inner.lease_release(lease).await
    }
    async fn lease_raise_fence(&self, name: &str, seen: u64) -> CoordResult<()> {
        self.inner.lease_raise_fence(name, seen).await
    }
}

#[async_trait::async_trait]
impl OnceGuard for TtlSpy {
    async fn once(&self, key: &str, owner: &str, ttl: Duration) -> CoordResult<bool> {
        self.ttls.lock().unwrap().push(ttl);
        self.inner.once(key, owner, ttl).await
    }
    async fn release(&self, key: &str, owner: &str) -> CoordResult<bool> {
        self.inner.release(key, owner).await
    }
    async fn holder(&self, key: &str) -> CoordResult<Option<String>> {
        self.inner.holder(key).await
    }
    async fn is_healthy(&self) -> bool {
        self.inner.is_healthy().await
    }
}

#[async_trait::async_trait]
impl StopBoard for TtlSpy {
    async fn stops_post(&self, keys: &[String], ttl: Duration) -> CoordResult<()> {
        self.inner.stops_post(keys, ttl).await
    }
    async fn stops_posted(&self, keys: &[String]) -> CoordResult<Vec<bool>> {
        self.inner.stops_posted(keys).await
    }
}

/// The attempt key is taken for the configured TTL. (The shortest TTL
/// accepted is a minute, too long to wait out here; the coordination
/// contract tests show that a key expires after its TTL.)
async fn an_attempt_key_lives_as_long_as_configured(env: Env) {
    env.collect().await;
    let runs = Arc::new(AtomicU32::new(0));
    let ttl = Duration::from_secs(120);
    let spy = Arc::new(TtlSpy {
        inner: env.coord.clone(),
        ttls: Mutex::default(),
    });
    let w = env
        .start(
            env.builder()
                .coordination(spy.clone())
                .attempt_key_ttl(ttl)
                .handler("count", counting(runs.clone())),
        )
        .await;
    let msg = first_attempt(&unique("e"), "count");
    let key = env.names.attempt_key(&msg.execution_id, 1);
    env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
    env.outcome(&msg.execution_id).await;
    let holder = env.coord.holder(&key).await.unwrap();
    assert!(holder.is_some(), "the key is held after the attempt ran");
    assert_eq!(
        *spy.ttls.lock().unwrap(),
        [ttl],
        "the default TTL would be a day: this one is the setting's"
    );
    // The price of a TTL, as documented: a copy of the dispatch delivered
    // once its key is gone (released here, as expiry would) runs again.
    assert!(
        env.coord
            .release(&key, &holder.unwrap_or_default())
            .await
            .unwrap()
    );
    env.broker.dispatch_publish(&w.id, &msg).await.unwrap();
    wait_for("the late copy's result", DEADLINE, || async {
        let done = env
            .results_for(&msg.execution_id)
            .iter()
            .filter(|r| r.kind == ResultKind::Succeeded)
            .count();
        (done == 2).then_some(())
    })
    .await;
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

async fn a_lost_consumer_is_restarted(env: Env) {
    env.collect().await;
    let w = env.start(env.builder()).await;
    // Deleting the queue cancels the consumer, as a broker restart would.
    env.broker.worker_queue_delete(&w.id).await.unwrap();
    wait_for(
        "the queue declared and consumed again",
        DEADLINE,
        || async {
            let s = env.broker.worker_queue_stats(&w.id).await.unwrap()?;
            (s.consumers == 1).then_some(())
        },
    )
    .await;
    let exec = env.dispatch(&w.id, "noop", json!("again"), None).await;
    assert_eq!(env.outcome(&exec).await.output, Some(json!("again")));
    let id = w.id.clone();
    w.stop().await;
    env.cleanup(&[&id]).await;
}

/// Each case once on the in-process adapters and once on RabbitMQ + Redis.
macro_rules! on_both {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(super::Env::memory()).await;
                }
            )*
        }
        mod rabbitmq_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(env) = super::Env::real().await else { return };
                    super::$case(env).await;
                }
            )*
        }
    };
}

on_both!(
    noop_succeeds_after_started,
    a_duplicate_attempt_runs_once,
    an_unknown_handler_fails_and_the_worker_goes_on,
    a_slow_handler_times_out,
    a_panicking_handler_fails_and_the_worker_survives,
    a_full_pool_and_buffer_reroutes,
    buffered_dispatches_run_by_rank,
    an_urgent_dispatch_is_taken_past_a_full_buffer,
    an_immediate_dispatch_passes_a_full_main_window,
    a_batch_runs_each_of_its_dispatches_once,
    a_batch_meeting_a_full_worker_is_refused_whole,
    a_batch_larger_than_the_free_places_is_taken_and_waits,
    shutdown_hands_back_unfinished_work_and_deregisters,
    a_lost_consumer_is_restarted,
    a_stop_request_stops_the_running_handler,
    an_attempt_stopped_before_it_starts_never_runs,
    an_attempt_key_released_for_its_dead_owner_runs_again,
    an_attempt_key_lives_as_long_as_configured,
);
