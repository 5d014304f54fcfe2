//! Heartbeats: the loop that publishes what the balancer reads about this
//! worker (its pool, its load, its state, what it serves), on a period and
//! at once whenever the state changes.

use crate::connections::Connections;
use crate::load::{CpuSampler, Load};
use crate::pool::Pool;
use kairos_core::protocol::{HeartbeatMsg, PROTOCOL_VERSION};
use kairos_core::time::now_ms;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// What a heartbeat reports.
pub(crate) struct Sources {
    pub(crate) conn: Arc<Connections>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) load: Arc<Load>,
    /// Handler names served (fixed once the worker is built).
    pub(crate) handlers: Vec<String>,
    /// Worker group announced.
    pub(crate) group: Option<String>,
    /// Most dispatches offered per message.
    pub(crate) dispatch_batch: u32,
    /// Whether the immediate queue is consumed (see `crate::consume`).
    pub(crate) immediate_queue: bool,
}

impl Sources {
    fn heartbeat(&self, cpu: &mut CpuSampler) -> HeartbeatMsg {
        let conn = &self.conn;
        HeartbeatMsg {
            v: PROTOCOL_VERSION,
            worker_id: conn.id.clone(),
            queue: conn.names.worker_queue(&conn.id),
            capacity: self.pool.capacity,
            active: self.pool.running(),
            avg_cost_ms: self.load.avg_cost_ms(),
            cpu_idle: cpu.idle(),
            state: self.load.state(),
            at: now_ms(),
            handlers: Some(self.handlers.clone()),
            group: self.group.clone(),
            incarnation: Some(conn.incarnation.clone()),
            held: Some(self.pool.held()),
            dispatch_batch: (self.dispatch_batch > 1).then_some(self.dispatch_batch),
            immediate_queue: self.immediate_queue,
        }
    }

    async fn beat(&self, cpu: &mut CpuSampler) {
        self.pool.report();
        let msg = self.heartbeat(cpu);
        if let Err(e) = self.conn.broker.heartbeat_publish(&msg).await {
            // Transient by design: the next beat replaces a lost one.
            tracing::warn!(state = ?msg.state, "heartbeat not published: {e}");
        }
    }
}

/// Beats at once, then every `every`, and at once whenever the state changes
/// (so the balancer learns about `draining` without waiting). On `stop` it
/// sends one last beat with the state at that moment and returns.
pub(crate) async fn run(sources: Sources, every: Duration, stop: CancellationToken) {
    let mut cpu = CpuSampler::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {
                sources.beat(&mut cpu).await;
                return;
            }
            _ = tick.tick() => {}
            _ = sources.load.state_changed.notified() => {}
        }
        sources.beat(&mut cpu).await;
    }
}
