//! The dispatcher's long-lived loops are supervised: a panic in the
//! immediate lane stops the process (exit status 70,
//! `EXIT_TASK_PANICKED`) so its supervisor restarts it whole, instead of
//! the lane being gone, silently, for the rest of the term.
//!
//! The process under test is this test binary run again on one ignored
//! test, so its exit can be watched from here.

mod rig;

use futures::StreamExt;
use kairos_core::broker::{Broker, BrokerResult, DeliveryStream, DispatchQueue, QueueStats};
use kairos_core::due::{Due, DueSignal};
use kairos_core::protocol::{DispatchMsg, HeartbeatMsg, LogMsg, ResultMsg};
use kairos_core::supervise::EXIT_TASK_PANICKED;
use kairos_core::time::now_ms;
use kairos_dispatcher::{Dispatcher, DispatcherConfig};
use kairos_inproc::MemoryBroker;
use rig::Rig;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// Set in the environment of the process the parent test runs.
const CHILD: &str = "KAIROS_TEST_SUPERVISED_CHILD";

#[test]
fn a_panic_in_the_immediate_lane_stops_the_dispatcher_process() {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "lane_panics_in_a_child_process",
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
        "the dispatcher process must stop when its immediate lane panics\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("an urgent publish that panics"),
        "the panic is the injected one:\n{stderr}"
    );
}

/// Runs a dispatcher whose broker panics on publishing work someone waits
/// for (the immediate lane's), and creates such a job: the lane's publish
/// panics. Returns (the process goes on) only if that panic did not stop
/// the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a child process by a_panic_in_the_immediate_lane_stops_the_dispatcher_process"]
async fn lane_panics_in_a_child_process() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let mut rig = Rig::new().await;
    let dispatcher = Dispatcher::new(
        rig.store.clone(),
        Arc::new(UrgentPanics(rig.broker.clone())),
        rig.coord.clone(),
        DispatcherConfig {
            names: rig.names.clone(),
            lease_ttl_ms: 2_000,
            ..DispatcherConfig::default()
        },
    )
    .due_signal(rig.due.clone());
    rig.tasks.push(tokio::spawn(
        dispatcher.run_until(rig.stop.clone(), rig.stop.clone()),
    ));
    let mut queue = rig.tap_worker("w-1", 1).await;
    // A schedule's trigger (due after its creation) reaches the worker
    // through the main loop: the dispatcher's worker view knows the worker
    // from then on, so the lane's claim below picks it and the lane
    // publishes that claim itself.
    rig.one_shot("witness", now_ms() + 200).await;
    let witness = rig::next(&mut queue).await;
    witness.acker.ack().await.expect("ack");
    // Due at creation: the immediate lane's.
    let now = now_ms();
    rig.one_shot("waited-for", now).await;
    rig.due.announce(Due::At(now)).await;
    // Its publish panics in the lane: nothing reaches the worker, and the
    // process should be gone before this deadline.
    let delivered = tokio::time::timeout(Duration::from_secs(10), queue.next()).await;
    assert!(delivered.is_err(), "nothing is published: {delivered:?}");
    rig.shutdown().await;
}

/// The in-process broker, panicking on a dispatch someone waits for
/// (`immediate`): a fault inside the immediate lane, which publishes its
/// own claims.
struct UrgentPanics(Arc<MemoryBroker>);

#[async_trait::async_trait]
impl Broker for UrgentPanics {
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
        if msgs.iter().any(|m| m.immediate) {
            panic!("an urgent publish that panics");
        }
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
    ) -> BrokerResult<DeliveryStream> {
        self.0.dispatch_consume_from(w, queue, prefetch).await
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
