//! Heartbeats: the figures the balancer reads (running handlers, mean cost over
//! the last runs, CPU idle from the OS) and the loop that publishes them.

use crate::shared::Shared;
use kairos_core::protocol::{HeartbeatMsg, PROTOCOL_VERSION};
use kairos_core::time::now_ms;
use std::sync::Arc;
use std::time::Duration;
use sysinfo::System;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

/// Runs averaged over for `avg_cost_ms`.
const COST_WINDOW: usize = 100;

/// Durations of the last [`COST_WINDOW`] handler runs, oldest overwritten first.
#[derive(Debug, Default)]
pub(crate) struct CostWindow {
    samples: Vec<f64>,
    next: usize,
}

impl CostWindow {
    pub(crate) fn record(&mut self, ms: f64) {
        if self.samples.len() < COST_WINDOW {
            self.samples.push(ms);
        } else {
            self.samples[self.next] = ms;
        }
        self.next = (self.next + 1) % COST_WINDOW;
    }

    /// Mean of the window; 0 before the first run.
    pub(crate) fn mean(&self) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }
}

/// CPU idle of the whole machine, measured between two calls.
struct CpuSampler {
    system: Option<System>,
}

impl CpuSampler {
    fn new() -> Self {
        let system = match System::new() {
            Ok(mut s) => {
                s.refresh_cpu_usage();
                Some(s)
            }
            Err(e) => {
                tracing::warn!("cannot read CPU usage from the OS ({e}); reporting 100% idle");
                None
            }
        };
        Self { system }
    }

    /// Idle percentage since the previous call.
    fn idle(&mut self) -> f64 {
        let Some(s) = &mut self.system else {
            return 100.0;
        };
        s.refresh_cpu_usage();
        let busy = f64::from(s.global_cpu_usage());
        // Two refreshes very close together can yield NaN (no ticks elapsed).
        let busy = if busy.is_finite() { busy } else { 0.0 };
        (100.0 - busy).clamp(0.0, 100.0)
    }
}

fn heartbeat(shared: &Shared, cpu: &mut CpuSampler) -> HeartbeatMsg {
    HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: shared.id.clone(),
        queue: shared.names.worker_queue(&shared.id),
        capacity: shared.capacity,
        active: shared.running(),
        avg_cost_ms: shared.avg_cost_ms(),
        cpu_idle: cpu.idle(),
        state: shared.state(),
        at: now_ms(),
        handlers: Some(shared.handlers.names()),
        group: shared.group.clone(),
        incarnation: Some(shared.incarnation.clone()),
        held: Some(shared.held()),
        dispatch_batch: (shared.dispatch_batch > 1).then_some(shared.dispatch_batch),
    }
}

async fn beat(shared: &Shared, cpu: &mut CpuSampler) {
    crate::metrics::pool(shared);
    let msg = heartbeat(shared, cpu);
    if let Err(e) = shared.broker.heartbeat_publish(&msg).await {
        // Transient by design: the next beat replaces a lost one.
        tracing::warn!(state = ?msg.state, "heartbeat not published: {e}");
    }
}

/// Beats at once, then every `every`, and at once whenever the state changes
/// (so the balancer learns about `draining` without waiting). On `stop` it
/// sends one last beat with the state at that moment and returns.
pub(crate) async fn run(shared: Arc<Shared>, every: Duration, stop: CancellationToken) {
    let mut cpu = CpuSampler::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {
                beat(&shared, &mut cpu).await;
                return;
            }
            _ = tick.tick() => {}
            _ = shared.state_changed.notified() => {}
        }
        beat(&shared, &mut cpu).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_window_is_the_mean_of_the_last_hundred_runs() {
        let mut w = CostWindow::default();
        assert_eq!(w.mean(), 0.0);
        w.record(10.0);
        w.record(30.0);
        assert_eq!(w.mean(), 20.0);
        for _ in 0..COST_WINDOW {
            w.record(5.0);
        }
        assert_eq!(w.mean(), 5.0);
        for _ in 0..COST_WINDOW / 2 {
            w.record(15.0);
        }
        assert_eq!(w.mean(), 10.0);
    }

    #[test]
    fn cpu_idle_is_a_percentage() {
        let mut cpu = CpuSampler::new();
        for _ in 0..3 {
            let idle = cpu.idle();
            assert!((0.0..=100.0).contains(&idle), "{idle}");
            std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        }
    }
}
