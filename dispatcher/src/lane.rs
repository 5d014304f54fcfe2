//! The immediate lane: while the main loop works through a backlog, a loop
//! of its own claims and publishes the jobs someone is waiting for (one-shots
//! due when they were created, see [`kairos_core::priority::Lane`]).
//!
//! Without a backlog the main loop claims everything within one round of its
//! due signal, and this loop stays idle. With one (a full batch due, say a
//! cron flood at second 0), the main loop's rounds each take hundreds of
//! milliseconds, and a job created now would wait for the rounds ahead of
//! it. This loop wakes on each due signal instead, claims what is due in
//! the lane (a few rows, through their own index; newest first, while the
//! main loop's ranked scan takes the oldest first, so the two rarely pick
//! the same job, and when they do the version check lets one win) and
//! publishes it itself, without waiting for the main loop's publishers.
//! Both loops claim under the same term and fence. The store locks the
//! fence row (the concurrency gate counts under that lock), so the two
//! loops' claim transactions take turns, but the lane never waits for the
//! backlog's scans or publishers.

use crate::lease::Term;
use crate::publish::Publisher;
use crate::scan::Unpublished;
use kairos_core::store::{DispatcherStore, StoreError};
use kairos_core::time::now_ms;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tracing::{debug, warn};

/// What the main loop and the due-signal listener tell the lane.
#[derive(Debug, Default)]
pub(crate) struct LaneSignal {
    /// Set while the main loop has more due than one round claims.
    backlog: AtomicBool,
    /// A job became due now, or a backlog began.
    wake: Notify,
    /// A sweep of pending work is asked for: executions were left pending
    /// (a manual trigger, a workflow's next nodes, a child job), or
    /// something became due now during a backlog (it may be such a trigger
    /// whose announcement predates the pending signal). The main loop sweeps
    /// at the start of its next round instead of on its timer.
    sweep: AtomicBool,
    /// Wakes the main loop's sleep when a sweep is asked for.
    pub(crate) sweep_wake: Notify,
}

impl LaneSignal {
    /// The main loop's view after each round.
    pub(crate) fn set_backlog(&self, backlog: bool) {
        let was = self.backlog.swap(backlog, Ordering::AcqRel);
        if backlog && !was {
            // Jobs announced before the backlog began were left to the
            // main loop, which will now rank them out: claim them here.
            self.wake.notify_one();
        }
    }

    /// A due signal for `at` (ms UTC) arrived.
    pub(crate) fn due(&self, at: kairos_core::time::Millis) {
        if at <= now_ms() && self.backlog.load(Ordering::Acquire) {
            self.sweep.store(true, Ordering::Release);
            self.wake.notify_one();
        }
    }

    /// Executions were left pending now: the main loop wakes and sweeps.
    pub(crate) fn ask_sweep(&self) {
        self.sweep.store(true, Ordering::Release);
        self.sweep_wake.notify_one();
    }

    /// Whether a sweep was asked for since the last call.
    pub(crate) fn take_sweep(&self) -> bool {
        self.sweep.swap(false, Ordering::AcqRel)
    }

    fn in_backlog(&self) -> bool {
        self.backlog.load(Ordering::Acquire)
    }
}

/// The lane's loop for one term.
pub(crate) struct ImmediateLane {
    pub(crate) store: Arc<dyn DispatcherStore>,
    pub(crate) publisher: Arc<Publisher>,
    pub(crate) unpublished: Arc<Unpublished>,
    pub(crate) signal: Arc<LaneSignal>,
    /// Jobs claimed per transaction.
    pub(crate) batch: u32,
    /// How often it looks without a signal while a backlog lasts (signals
    /// can be lost; the main loop's starvation bound is the last net).
    pub(crate) interval: Duration,
}

impl ImmediateLane {
    /// Runs until the term ends.
    pub(crate) async fn run(self, term: Term) {
        while term.is_valid() {
            tokio::select! {
                _ = term.token.cancelled() => break,
                _ = self.signal.wake.notified() => {}
                _ = tokio::time::sleep(self.interval) => {}
            }
            while self.signal.in_backlog() && term.is_valid() {
                match self.round(&term).await {
                    Ok(full) if full => continue,
                    Ok(_) => break,
                    // The main loop sees the same fence and steps down.
                    Err(StoreError::Fenced { .. }) => return,
                    Err(e) => {
                        warn!(error = %e, "immediate lane round failed; retrying on the next signal");
                        break;
                    }
                }
            }
        }
    }

    /// Claims and publishes one batch of the lane; `true` if it was full.
    async fn round(&self, term: &Term) -> Result<bool, StoreError> {
        let now = now_ms();
        let began = std::time::Instant::now();
        let due = self.store.jobs_find_due_immediate(now, self.batch).await?;
        if due.is_empty() {
            return Ok(false);
        }
        let found = began.elapsed();
        let jobs = due.len();
        let claimed = self.publisher.claim_due(due, term.fence, now).await?;
        let full = jobs as u32 >= self.batch || claimed.more;
        let work = claimed.work;
        // Where a waited-for job's time goes on a busy database.
        debug!(
            claimed = work.len(),
            find_ms = found.as_millis() as u64,
            claim_ms = (began.elapsed() - found).as_millis() as u64,
            "immediate lane round"
        );
        self.unpublished.hold(&work);
        let ids: Vec<String> = work.iter().map(|w| w.execution_id.clone()).collect();
        if term.is_valid() {
            let report = self.publisher.publish(work, term).await;
            if report.no_worker > 0 || report.failed > 0 {
                self.unpublished.leave_behind();
            }
        } else {
            self.publisher
                .hand_back(&work, crate::scan::NOT_PUBLISHED)
                .await;
        }
        self.unpublished.release(&ids);
        Ok(full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_backlog_wakes_the_lane_once_and_due_signals_only_during_one() {
        let s = LaneSignal::default();
        s.due(now_ms());
        let quiet = tokio::time::timeout(Duration::from_millis(20), s.wake.notified()).await;
        assert!(quiet.is_err(), "no backlog: the main loop claims it");
        s.set_backlog(true);
        s.wake.notified().await;
        assert!(!s.take_sweep(), "nothing asked for a sweep yet");
        s.due(now_ms());
        s.wake.notified().await;
        assert!(s.take_sweep(), "a trigger during a backlog is swept soon");
        assert!(!s.take_sweep());
        s.due(now_ms() + 60_000);
        let later = tokio::time::timeout(Duration::from_millis(20), s.wake.notified()).await;
        assert!(later.is_err(), "a job due later is the main loop's");
        s.set_backlog(false);
        assert!(!s.in_backlog());
    }
}
