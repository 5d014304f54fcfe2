//! Test doubles shared by the unit tests: a broker that fails on demand
//! in front of the in-process one.

use kairos_core::broker::{Broker, BrokerError};
use kairos_core::protocol::{Names, ResultMsg};
use kairos_inproc::MemoryBroker;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU32};

/// A broker whose result publishes fail while `down` is set, and each
/// wait for a permit of `gate` when there is one; its first
/// `log_failures` log publishes fail too.
pub(crate) struct Flaky {
    pub(crate) inner: MemoryBroker,
    pub(crate) down: AtomicBool,
    /// Result publishes refused.
    pub(crate) refused: AtomicU32,
    pub(crate) gate: Option<tokio::sync::Semaphore>,
    /// Log publishes still to fail.
    pub(crate) log_failures: AtomicU32,
    /// Log publishes tried.
    pub(crate) log_tries: AtomicU32,
}

impl Flaky {
    /// Up or `down` for results, with every log publish going through.
    pub(crate) fn new(name: &str, down: bool, gate: Option<tokio::sync::Semaphore>) -> Self {
        Self {
            inner: MemoryBroker::new(Names::new(name)),
            down: down.into(),
            refused: 0.into(),
            gate,
            log_failures: 0.into(),
            log_tries: 0.into(),
        }
    }
}

#[async_trait::async_trait]
impl Broker for Flaky {
    async fn worker_queue_declare(&self, w: &str) -> Result<(), BrokerError> {
        self.inner.worker_queue_declare(w).await
    }
    async fn worker_queue_stats(
        &self,
        w: &str,
    ) -> Result<Option<kairos_core::broker::QueueStats>, BrokerError> {
        self.inner.worker_queue_stats(w).await
    }
    async fn worker_queue_delete(&self, w: &str) -> Result<(), BrokerError> {
        self.inner.worker_queue_delete(w).await
    }
    async fn dispatch_publish_to(
        &self,
        w: &str,
        queue: kairos_core::broker::DispatchQueue,
        msgs: &[kairos_core::protocol::DispatchMsg],
    ) -> Result<(), BrokerError> {
        self.inner.dispatch_publish_to(w, queue, msgs).await
    }
    async fn results_publish(&self, msgs: &[ResultMsg]) -> Result<(), BrokerError> {
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        if self.down.load(SeqCst) {
            self.refused.fetch_add(1, SeqCst);
            return Err(BrokerError::Unavailable("down for the test".into()));
        }
        self.inner.results_publish(msgs).await
    }
    async fn heartbeat_publish(
        &self,
        msg: &kairos_core::protocol::HeartbeatMsg,
    ) -> Result<(), BrokerError> {
        self.inner.heartbeat_publish(msg).await
    }
    async fn log_publish(&self, msg: &kairos_core::protocol::LogMsg) -> Result<(), BrokerError> {
        self.log_tries.fetch_add(1, SeqCst);
        let failing = self
            .log_failures
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            return Err(BrokerError::Unavailable("down for the test".into()));
        }
        self.inner.log_publish(msg).await
    }
    async fn dispatch_consume_from(
        &self,
        w: &str,
        queue: kairos_core::broker::DispatchQueue,
        prefetch: u16,
    ) -> Result<kairos_core::broker::DeliveryStream, BrokerError> {
        self.inner.dispatch_consume_from(w, queue, prefetch).await
    }
    async fn results_consume(
        &self,
        prefetch: u16,
    ) -> Result<kairos_core::broker::DeliveryStream, BrokerError> {
        self.inner.results_consume(prefetch).await
    }
    async fn heartbeats_consume(
        &self,
        prefetch: u16,
    ) -> Result<kairos_core::broker::DeliveryStream, BrokerError> {
        self.inner.heartbeats_consume(prefetch).await
    }
    async fn logs_consume(
        &self,
        prefetch: u16,
    ) -> Result<kairos_core::broker::DeliveryStream, BrokerError> {
        self.inner.logs_consume(prefetch).await
    }
    async fn reroute_consume(
        &self,
        prefetch: u16,
    ) -> Result<kairos_core::broker::DeliveryStream, BrokerError> {
        self.inner.reroute_consume(prefetch).await
    }
    async fn is_healthy(&self) -> bool {
        true
    }
}
