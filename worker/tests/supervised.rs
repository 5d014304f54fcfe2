//! The worker's long-lived loops are supervised: a panic in its dispatch
//! intake stops the process (exit status 70, `EXIT_TASK_PANICKED`) so its
//! supervisor restarts it whole, instead of the worker running on with
//! nothing taking deliveries while its heartbeats still offer free places.
//!
//! The process under test is this test binary run again on one ignored
//! test, so its exit can be watched from here.

use futures::StreamExt;
use kairos_core::broker::{
    Acker, Broker, BrokerError, BrokerResult, Delivery, DeliveryStream, DispatchQueue, QueueStats,
};
use kairos_core::protocol::{
    DispatchMsg, HeartbeatMsg, LogMsg, Names, PROTOCOL_VERSION, ResultMsg,
};
use kairos_core::supervise::{CriticalTasks, EXIT_TASK_PANICKED};
use kairos_inproc::{MemoryBroker, MemoryCoord};
use kairos_testkit::{unique, wait_for};
use kairos_worker::{HandlerOutcome, JobContext, Worker};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Set in the environment of the process the parent test runs.
const CHILD: &str = "KAIROS_TEST_SUPERVISED_CHILD";

#[test]
fn a_panic_in_the_dispatch_intake_stops_the_worker_process() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "intake_panics_in_a_child_process",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the child process");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(EXIT_TASK_PANICKED),
        "the worker process must stop when its intake panics\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("a refusal that panics"),
        "the panic is the injected one:\n{stderr}"
    );
}

/// Runs a worker of one place whose broker panics when a delivery is
/// refused: the second dispatch, refused for want of a place, panics inside
/// the intake loop. Returns (the process goes on) only if that panic did
/// not stop the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process by a_panic_in_the_dispatch_intake_stops_the_worker_process"]
async fn intake_panics_in_a_child_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let names = Names::new(unique("sup"));
    let broker = Arc::new(RefusalPanics(MemoryBroker::new(names.clone())));
    let tasks = CriticalTasks::new();
    let stop = CancellationToken::new();
    let worker = Worker::builder()
        .id("holder")
        .names(names)
        .broker(broker.clone())
        .coordination(Arc::new(MemoryCoord::new()))
        .capacity(1)
        .buffer(0)
        .heartbeat_every(Duration::from_millis(100))
        .handler("hold", |_ctx: JobContext| async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            HandlerOutcome::Success(serde_json::Value::Null)
        })
        .critical_tasks(tasks.clone())
        .build()
        .expect("worker");
    let task = tokio::spawn(worker.run(stop.clone()));
    let mut beats = broker.heartbeats_consume(10).await.expect("heartbeats");
    tokio::time::timeout(Duration::from_secs(10), beats.next())
        .await
        .expect("a first heartbeat: the worker's queue exists");
    for n in 0..2 {
        broker
            .dispatch_publish("holder", &dispatch(&format!("e{n}")))
            .await
            .expect("publish");
    }
    // The refusal comes after the worker waited for a place (100 ms);
    // the process should be gone well before this.
    wait_for("the intake to end", Duration::from_secs(10), || async {
        (!tasks.ended().is_empty()).then_some(())
    })
    .await;
    stop.cancel();
    let _ = task.await;
}

fn dispatch(execution_id: &str) -> DispatchMsg {
    DispatchMsg {
        v: PROTOCOL_VERSION,
        execution_id: execution_id.into(),
        job_id: unique("j"),
        attempt: 1,
        handler: "hold".into(),
        params: serde_json::Value::Null,
        scheduled_at: 0,
        timeout_ms: None,
        group: None,
        trace: None,
        priority: None,
        immediate: false,
        shard: None,
        parent_outputs: None,
    }
}

/// The in-process broker, with dispatch deliveries whose refusal panics:
/// a fault inside the intake loop, which refuses what it has no place for.
struct RefusalPanics(MemoryBroker);

struct PanickyAcker(Box<dyn Acker>);

#[async_trait::async_trait]
impl Acker for PanickyAcker {
    async fn ack(&self) -> BrokerResult<()> {
        self.0.ack().await
    }
    async fn reject(&self, _requeue: bool) -> BrokerResult<()> {
        panic!("a refusal that panics");
    }
}

#[async_trait::async_trait]
impl Broker for RefusalPanics {
    async fn worker_queue_declare(&self, w: &str) -> BrokerResult<()> {
        self.0.worker_queue_declare(w).await
    }
    async fn worker_queue_stats(&self, w: &str) -> BrokerResult<Option<QueueStats>> {
        self.0.worker_queue_stats(w).await
    }
    async fn worker_queue_delete(&self, w: &str) -> BrokerResult<()> {
        self.0.worker_queue_delete(w).await
    }
    async fn dispatch_publish_to(
        &self,
        w: &str,
        queue: DispatchQueue,
        msgs: &[DispatchMsg],
    ) -> BrokerResult<()> {
        self.0.dispatch_publish_to(w, queue, msgs).await
    }
    async fn results_publish(&self, msgs: &[ResultMsg]) -> BrokerResult<()> {
        self.0.results_publish(msgs).await
    }
    async fn heartbeat_publish(&self, msg: &HeartbeatMsg) -> BrokerResult<()> {
        self.0.heartbeat_publish(msg).await
    }
    async fn log_publish(&self, msg: &LogMsg) -> BrokerResult<()> {
        self.0.log_publish(msg).await
    }
    async fn dispatch_consume_from(
        &self,
        w: &str,
        queue: DispatchQueue,
        prefetch: u16,
    ) -> Result<DeliveryStream, BrokerError> {
        let inner = self.0.dispatch_consume_from(w, queue, prefetch).await?;
        Ok(inner
            .map(|d| Delivery {
                acker: Box::new(PanickyAcker(d.acker)),
                ..d
            })
            .boxed())
    }
    async fn results_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.0.results_consume(prefetch).await
    }
    async fn heartbeats_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.0.heartbeats_consume(prefetch).await
    }
    async fn logs_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.0.logs_consume(prefetch).await
    }
    async fn reroute_consume(&self, prefetch: u16) -> BrokerResult<DeliveryStream> {
        self.0.reroute_consume(prefetch).await
    }
    async fn is_healthy(&self) -> bool {
        true
    }
}
