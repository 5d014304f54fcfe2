//! The figures the balancer weighs a worker by, beside the pool's: the mean
//! cost of its last runs, the machine's CPU idle, and its lifecycle state.

use kairos_core::worker::WorkerState;
use std::sync::{Mutex, PoisonError};
use sysinfo::System;
use tokio::sync::Notify;

/// Runs averaged over for `avg_cost_ms`.
const COST_WINDOW: usize = 100;

/// Cost of recent runs and the lifecycle state, shared by the attempts that
/// record them and the heartbeat that reports them.
pub(crate) struct Load {
    costs: Mutex<CostWindow>,
    state: Mutex<WorkerState>,
    /// Wakes the heartbeat loop when the state changes.
    pub(crate) state_changed: Notify,
}

impl Load {
    /// An online worker that has run nothing yet.
    pub(crate) fn new() -> Self {
        Self {
            costs: Mutex::new(CostWindow::default()),
            state: Mutex::new(WorkerState::Online),
            state_changed: Notify::new(),
        }
    }

    pub(crate) fn record_cost(&self, ms: f64) {
        self.costs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(ms);
    }

    pub(crate) fn avg_cost_ms(&self) -> f64 {
        self.costs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .mean()
    }

    pub(crate) fn state(&self) -> WorkerState {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_state(&self, state: WorkerState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = state;
        self.state_changed.notify_one();
    }
}

/// Durations of the last [`COST_WINDOW`] handler runs, oldest overwritten first.
#[derive(Debug, Default)]
struct CostWindow {
    samples: Vec<f64>,
    next: usize,
}

impl CostWindow {
    fn record(&mut self, ms: f64) {
        if self.samples.len() < COST_WINDOW {
            self.samples.push(ms);
        } else {
            self.samples[self.next] = ms;
        }
        self.next = (self.next + 1) % COST_WINDOW;
    }

    /// Mean of the window; 0 before the first run.
    fn mean(&self) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }
}

/// CPU idle of the whole machine, measured between two calls.
pub(crate) struct CpuSampler {
    system: Option<System>,
}

impl CpuSampler {
    pub(crate) fn new() -> Self {
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
    pub(crate) fn idle(&mut self) -> f64 {
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

    #[test]
    fn a_state_change_wakes_the_heartbeat() {
        let load = Load::new();
        assert_eq!(load.state(), WorkerState::Online);
        load.set_state(WorkerState::Draining);
        assert_eq!(load.state(), WorkerState::Draining);
        // The permit stored by `notify_one` completes the next wait at once.
        use futures::FutureExt;
        assert!(load.state_changed.notified().now_or_never().is_some());
    }
}
