//! The test rig shared by the dispatcher's in-process tests: SQLite, the
//! in-process broker, coordination and due signal, dispatchers and workers
//! started on them, and waits on what the store shows.
#![allow(dead_code)]

use futures::StreamExt;
use kairos_core::broker::{Broker, Delivery, DeliveryStream, DispatchQueue};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::{NewJob, RetryPolicy};
use kairos_core::protocol::{HeartbeatMsg, Names, PROTOCOL_VERSION};
use kairos_core::schedule::{Recurrence, Rule, Schedule};
use kairos_core::store::{CreateOutcome, Store};
use kairos_core::time::{Millis, now_ms};
use kairos_core::worker::WorkerState;
use kairos_dispatcher::{Dispatcher, DispatcherConfig};
use kairos_inproc::{MemoryBroker, MemoryCoord, MemoryDue};
use kairos_store_sql::SqlStore;
use kairos_testkit::{sqlite_temp_url, wait_for};
use kairos_worker::Worker;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const TENANT: &str = "default";
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A store, a broker and a coordination service shared by the dispatchers
/// and the worker of one test.
pub struct Rig {
    pub store: Arc<dyn Store>,
    pub broker: Arc<MemoryBroker>,
    pub coord: Arc<MemoryCoord>,
    /// Due times announced to the dispatchers, as the API does.
    pub due: Arc<MemoryDue>,
    pub names: Names,
    pub stop: CancellationToken,
    pub tasks: Vec<JoinHandle<()>>,
}

impl Rig {
    pub async fn new() -> Self {
        let store = SqlStore::connect(&sqlite_temp_url())
            .await
            .expect("open SQLite");
        store.migrate().await.expect("migrate");
        let names = Names::new(kairos_testkit::unique("ip"));
        Self {
            store: Arc::new(store),
            broker: Arc::new(MemoryBroker::new(names.clone())),
            coord: Arc::new(MemoryCoord::new()),
            due: Arc::new(MemoryDue::new()),
            names,
            stop: CancellationToken::new(),
            tasks: Vec::new(),
        }
    }

    /// Starts a dispatcher that leads until `leading` is cancelled.
    pub fn dispatcher(&mut self, leading: CancellationToken) {
        self.dispatcher_with(leading, |_| {});
    }

    /// Like [`Rig::dispatcher`], with settings changed by `tweak`.
    pub fn dispatcher_with(
        &mut self,
        leading: CancellationToken,
        tweak: impl FnOnce(&mut DispatcherConfig),
    ) {
        self.dispatcher_showing(leading, tweak, Default::default());
    }

    /// Like [`Rig::dispatcher_with`], showing the partitions it holds in `held`.
    pub fn dispatcher_showing(
        &mut self,
        leading: CancellationToken,
        tweak: impl FnOnce(&mut DispatcherConfig),
        held: kairos_dispatcher::partitions::HeldView,
    ) {
        let mut cfg = DispatcherConfig {
            names: self.names.clone(),
            lease_ttl_ms: 2_000,
            ..DispatcherConfig::default()
        };
        tweak(&mut cfg);
        let d = Dispatcher::new(
            self.store.clone(),
            self.broker.clone(),
            self.coord.clone(),
            cfg,
        )
        .due_signal(self.due.clone())
        .membership(self.coord.clone())
        .partitions_view(held);
        let consuming = self.stop.clone();
        self.tasks
            .push(tokio::spawn(d.run_until(leading, consuming)));
    }

    pub fn worker(&mut self, id: &str) {
        let worker = Worker::builder()
            .id(id)
            .builtin_handlers()
            .heartbeat_every(Duration::from_millis(200))
            .broker(self.broker.clone())
            .coordination(self.coord.clone())
            .names(self.names.clone())
            .build()
            .expect("worker");
        let stop = self.stop.clone();
        self.tasks.push(tokio::spawn(async move {
            worker.run(stop).await.expect("worker runs");
        }));
    }

    pub async fn create(&self, name: &str, schedule: Schedule, next: Millis) -> String {
        let job = new_job(name, schedule, next);
        let id = job.id.clone();
        match self.store.job_create(job).await.expect("create") {
            CreateOutcome::Created(_) => id,
            other => panic!("not created: {other:?}"),
        }
    }

    pub async fn one_shot(&self, name: &str, at: Millis) -> String {
        self.create(name, Schedule::Once { at }, at).await
    }

    /// Waits until a worker's heartbeat is recorded, so the dispatcher's
    /// claims have somewhere to go.
    pub async fn wait_for_a_worker(&self) {
        wait_for("the worker's first heartbeat", DEADLINE, || async {
            let workers = self.store.workers_list().await.expect("workers");
            (!workers.is_empty()).then_some(())
        })
        .await;
    }

    pub async fn executions(&self, job: &str) -> Vec<Execution> {
        self.store
            .executions_list_for_job(TENANT, job, 1000, None)
            .await
            .expect("list executions")
            .items
    }

    pub async fn wait_succeeded(&self, job: &str, n: usize) -> Vec<Execution> {
        wait_for(
            &format!("{n} succeeded executions of {job}"),
            DEADLINE,
            || async {
                let execs = self.executions(job).await;
                let done = execs
                    .iter()
                    .filter(|e| e.status == ExecStatus::Succeeded)
                    .count();
                (done >= n).then_some(execs)
            },
        )
        .await
    }

    /// Waits until the scheduler has worked past `span` from now (a one-shot
    /// witness due then has succeeded): triggers are claimed in due order, so
    /// anything else due before it would have been claimed by then.
    pub async fn worked_past(&self, span: Duration) {
        let witness = self
            .one_shot("witness", now_ms() + span.as_millis() as Millis)
            .await;
        self.wait_succeeded(&witness, 1).await;
    }

    /// Announces a worker `id` serving `noop` that takes `batch` dispatches
    /// per message, played by the test itself (it reads the returned queue
    /// and answers on the protocol), and waits until the dispatcher has
    /// recorded it.
    pub async fn tap_worker(&self, id: &str, batch: u32) -> DeliveryStream {
        self.tap_worker_queues(id, batch, false).await.0
    }

    /// Like [`Rig::tap_worker`], for a worker whose heartbeats offer
    /// (`immediate`) or not its immediate queue: its main queue, and its
    /// immediate queue when offered.
    pub async fn tap_worker_queues(
        &self,
        id: &str,
        batch: u32,
        immediate: bool,
    ) -> (DeliveryStream, Option<DeliveryStream>) {
        self.broker.worker_queue_declare(id).await.unwrap();
        let queue = self.broker.dispatch_consume(id, 1000).await.unwrap();
        let now = match immediate {
            true => Some(
                self.broker
                    .dispatch_consume_from(id, DispatchQueue::Immediate, 1000)
                    .await
                    .unwrap(),
            ),
            false => None,
        };
        let beat = HeartbeatMsg {
            queue: self.names.worker_queue(id),
            dispatch_batch: Some(batch),
            immediate_queue: immediate,
            ..heartbeat(id)
        };
        self.broker.heartbeat_publish(&beat).await.unwrap();
        wait_for("the dispatcher to record the worker", DEADLINE, || async {
            let workers = self.store.workers_list().await.unwrap();
            workers
                .iter()
                .any(|w| w.id == id && w.dispatch_batch == batch && w.immediate_queue == immediate)
                .then_some(())
        })
        .await;
        (queue, now)
    }

    pub async fn shutdown(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(10), t).await;
        }
    }
}

/// The next delivery on `queue`, within the deadline.
pub async fn next(queue: &mut DeliveryStream) -> Delivery {
    tokio::time::timeout(DEADLINE, queue.next())
        .await
        .expect("a delivery in time")
        .expect("the queue is open")
}

/// A schedule firing every `every_ms`, with the defaults for the rest.
pub fn every(every_ms: u64) -> Schedule {
    Schedule::Recurring(Recurrence {
        rule: Rule::Every { every_ms },
        start_at: None,
        end_at: None,
        misfire: Default::default(),
        overlap: Default::default(),
    })
}

/// A `noop` job named `name`, not stored yet.
pub fn new_job(name: &str, schedule: Schedule, next: Millis) -> NewJob {
    NewJob {
        execution_mode: Default::default(),
        trace: None,
        id: uuid::Uuid::now_v7().to_string(),
        tenant: TENANT.into(),
        name: name.into(),
        handler: "noop".into(),
        params: serde_json::json!({"job": name}),
        sensitive_params: Vec::new(),
        schedule,
        next_trigger_at: next,
        callback_url: None,
        client_request_id: None,
        request_hash: None,
        retry: RetryPolicy::default(),
        timeout_ms: None,
        worker_group: None,
        priority: Default::default(),
        max_concurrency: None,
        created_at: now_ms(),
        created_by: None,
    }
}

/// An execution with every field empty, for tests that set a few.
pub fn execution_stub() -> Execution {
    Execution {
        id: String::new(),
        job_id: String::new(),
        tenant: TENANT.into(),
        scheduled_at: 0,
        attempt: 1,
        status: ExecStatus::Pending,
        worker_id: None,
        output: None,
        error: None,
        not_before: 0,
        dispatched_at: None,
        started_at: None,
        finished_at: None,
        stop_requested_at: None,
        progress: None,
        created_at: 0,
        waiting_for: None,
        shard: kairos_core::shard::Shard::SINGLE,
    }
}

/// A heartbeat of an idle, online worker `id` serving `noop`, taken now
/// (capacity 1000, no process id, nothing held, no batch offer).
pub fn heartbeat(id: &str) -> HeartbeatMsg {
    HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: id.into(),
        queue: format!("q.{id}"),
        capacity: 1000,
        active: 0,
        avg_cost_ms: 0.0,
        cpu_idle: 100.0,
        state: WorkerState::Online,
        at: now_ms(),
        handlers: Some(vec!["noop".into()]),
        group: None,
        incarnation: None,
        held: None,
        dispatch_batch: None,
        immediate_queue: false,
    }
}
