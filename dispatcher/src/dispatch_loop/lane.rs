//! The immediate lane: a loop of the leader's own that claims and publishes
//! the jobs someone is waiting for (one-shots due when they were created,
//! see [`kairos_core::priority::Lane`]), beside the main loop.
//!
//! The main loop claims in rounds of up to a batch, and a round takes longer
//! the more it claims: hundreds of milliseconds in a cron flood (a full
//! batch due, claimed by priority round after round), and about 100 ms a
//! round for 120 jobs when a thousand are created a second on a busy box.
//! A job created now would wait for the round in progress and its own. This
//! loop wakes on each signal of a job due now instead, claims what is due
//! in the lane (a few rows, through their own index, newest first) and
//! publishes it itself, without waiting for the main loop's publishers. The
//! main loop leaves a lane job to it for [`LANE_OWNS_MS`] after its due
//! time, so the two do not claim the same jobs; after that the main loop's
//! scans take what the lane has not (a lost signal, a failed round). A
//! signal this loop finds nothing for (a schedule's trigger announced when
//! already due) is handed to the main loop.
//!
//! Up to two of its rounds run at once, on different jobs, so a job created
//! while a round's claim transaction runs need not wait for it to end.
//! Both loops claim under the same term and fence. The store share-locks
//! the fence row (the concurrency gate counts under a lock of its own), so
//! the lane never waits for the main loop's scans, claims or publishers.

use super::claim::Claimer;
use super::publish::Publisher;
use super::scope::ClaimScope;
use super::unpublished::{NOT_PUBLISHED, Unpublished};
use crate::lease::Term;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kairos_core::priority::Lane;
use kairos_core::store::{Dispatch, StoreError};
use kairos_core::time::{Millis, now_ms};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, warn};

/// How long after its due time an immediate-lane job is left to the lane by
/// the main loop's scans (ms).
pub(crate) const LANE_OWNS_MS: Millis = 1_000;

/// Whether the main loop leaves a job of `lane` due at `due` to the lane at
/// `now`.
pub(crate) fn lane_owns(lane: Lane, due: Option<Millis>, now: Millis) -> bool {
    lane == Lane::Immediate && due.is_some_and(|at| at > now - LANE_OWNS_MS)
}

/// What the main loop and the due-signal listener tell the lane, and what
/// the lane hands back to the main loop.
#[derive(Debug, Default)]
pub(crate) struct LaneSignal {
    /// Set while the main loop has more due than one round claims.
    backlog: AtomicBool,
    /// A job became due now, or a backlog began.
    wake: Notify,
    /// A signal of a job due now that the lane found nothing for: the main
    /// loop scans (the job is a schedule's).
    pub(crate) handoff: Notify,
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
            // A lane job the main loop took over (its signal lost, a
            // failed round) would now be ranked behind the backlog: a lane
            // round claims it, and the lane polls while the backlog lasts.
            self.wake.notify_one();
        }
    }

    /// A due signal for `at` (ms UTC) arrived; `true` if it is the lane's
    /// (due now), `false` if it is the main loop's (due later).
    pub(crate) fn due(&self, at: Millis) -> bool {
        if at > now_ms() {
            return false;
        }
        if self.backlog.load(Ordering::Acquire) {
            self.sweep.store(true, Ordering::Release);
        }
        self.wake.notify_one();
        true
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

/// Rounds of the lane in flight at once. Each round's claim transaction is
/// most of a waited-for job's time on a busy database (see
/// docs/performance.md, "The immediate lane in the flood, taken apart"):
/// with one round at a time, a job created just after a round began
/// waited for that round to end before its own began.
const ROUNDS_IN_FLIGHT: usize = 2;

/// How long a round runs before a second may start beside it. Rounds one
/// after the other batch themselves (the longer one takes, the more the
/// next claims); a second round at every signal instead made many tiny
/// rounds whose fixed cost slowed the database for everything else
/// (measured in the 100,000-schedule flood: the flood's triggers ran 15 %
/// slower and the creates 39 %; with this delay 8 % and 17 %, see
/// docs/performance.md). A round shorter than this never has company.
const OVERLAP_AFTER: Duration = Duration::from_millis(40);

/// The lane's loop for one term.
pub(crate) struct ImmediateLane {
    pub(crate) dispatch: Arc<dyn Dispatch>,
    /// The main loop's scope: the lane claims what it claims.
    pub(crate) scope: Arc<ClaimScope>,
    pub(crate) claimer: Arc<Claimer>,
    pub(crate) publisher: Arc<Publisher>,
    pub(crate) unpublished: Arc<Unpublished>,
    pub(crate) signal: Arc<LaneSignal>,
    /// Jobs claimed per transaction.
    pub(crate) batch: u32,
    /// How often it looks without a signal while a backlog lasts (signals
    /// can be lost; the main loop's starvation bound is the last net).
    pub(crate) interval: Duration,
    /// Jobs a round in flight is claiming: the next round leaves them out,
    /// so rounds in flight at once claim different jobs.
    pub(crate) claiming: Claiming,
}

impl ImmediateLane {
    /// Runs until the term ends: a round starts on each signal of a job due
    /// now (and at once after a full one), with up to [`ROUNDS_IN_FLIGHT`]
    /// running at once.
    pub(crate) async fn run(self, term: Term) {
        let mut rounds = FuturesUnordered::new();
        // A round is wanted (a due signal or a full round came) and starts
        // at once with none in flight, or beside the one in flight once
        // [`OVERLAP_AFTER`] has passed since that one began.
        let mut wanted = false;
        let mut last_start = Instant::now();
        while term.is_valid() {
            let room = rounds.len() < ROUNDS_IN_FLIGHT;
            let start_at = if rounds.is_empty() {
                Instant::now()
            } else {
                last_start + OVERLAP_AFTER
            };
            tokio::select! {
                _ = term.token.cancelled() => break,
                // A signal that comes meanwhile is kept by the `Notify`.
                _ = self.signal.wake.notified(), if !wanted => wanted = true,
                _ = tokio::time::sleep(self.interval), if rounds.is_empty() && !wanted => {
                    wanted = self.signal.in_backlog();
                }
                _ = tokio::time::sleep_until(start_at), if wanted && room => {
                    wanted = false;
                    last_start = Instant::now();
                    rounds.push(self.round(&term));
                }
                Some(ended) = rounds.next(), if !rounds.is_empty() => match ended {
                    Ok(full) => wanted |= full,
                    // The main loop sees the same fence and steps down.
                    Err(StoreError::Fenced { .. }) => break,
                    Err(e) => warn!(error = %e, "immediate lane round failed; retrying on the next signal"),
                },
            }
        }
        // A round ends what it claimed either way (published, or handed
        // back once the term is over): let the ones in flight finish.
        while rounds.next().await.is_some() {}
    }

    /// Claims and publishes one batch of the lane; `true` if it was full.
    async fn round(&self, term: &Term) -> Result<bool, StoreError> {
        let now = now_ms();
        let began = std::time::Instant::now();
        let held = self.scope.held();
        let due = self
            .dispatch
            .jobs_find_due_immediate(held.scope(term.fence), now, self.scope.page(self.batch))
            .await?;
        if due.is_empty() {
            // The signal was for a job of the main loop's.
            self.signal.handoff.notify_one();
            return Ok(false);
        }
        // What another round is claiming stays its own. Full only with a
        // whole batch of its own: a round that found the other's jobs
        // leaves the rest to that one's next round.
        let (due, _claim) = self.claiming.take(due, |j| &j.id);
        if due.is_empty() {
            return Ok(false);
        }
        let full = due.len() as u32 >= self.batch;
        let found = began.elapsed();
        let claimed = self.claimer.claim_due(due, term.fence, now).await?;
        let full = full || claimed.more;
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
            self.publisher.hand_back(&work, NOT_PUBLISHED).await;
        }
        self.unpublished.release(&ids);
        Ok(full)
    }
}

/// The jobs the lane's rounds in flight are claiming.
#[derive(Debug, Default, Clone)]
pub(crate) struct Claiming(Arc<Mutex<HashSet<String>>>);

impl Claiming {
    fn lock(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The jobs of `due` no round is claiming, marked as this round's
    /// until the returned guard is dropped (once the claim has committed,
    /// a claimed job is not due any more).
    fn take<T>(&self, due: Vec<T>, id_of: impl Fn(&T) -> &str) -> (Vec<T>, ClaimGuard) {
        let mut claiming = self.lock();
        let mine: Vec<T> = due
            .into_iter()
            .filter(|j| claiming.insert(id_of(j).to_string()))
            .collect();
        let ids = mine.iter().map(|j| id_of(j).to_string()).collect();
        let guard = ClaimGuard {
            claiming: self.clone(),
            ids,
        };
        (mine, guard)
    }
}

/// A round's jobs in [`Claiming`], given back on drop.
pub(crate) struct ClaimGuard {
    claiming: Claiming,
    ids: Vec<String>,
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        let mut claiming = self.claiming.lock();
        for id in &self.ids {
            claiming.remove(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_due_now_are_the_lanes_and_a_backlog_asks_for_sweeps() {
        let s = LaneSignal::default();
        assert!(s.due(now_ms()), "due now: the lane's");
        s.wake.notified().await;
        assert!(!s.take_sweep(), "no backlog, no sweep");
        assert!(!s.due(now_ms() + 60_000), "due later: the main loop's");
        let later = tokio::time::timeout(Duration::from_millis(20), s.wake.notified()).await;
        assert!(later.is_err(), "a job due later does not wake the lane");
        s.set_backlog(true);
        s.wake.notified().await;
        assert!(!s.take_sweep(), "nothing asked for a sweep yet");
        assert!(s.due(now_ms()));
        s.wake.notified().await;
        assert!(s.take_sweep(), "a trigger during a backlog is swept soon");
        assert!(!s.take_sweep());
        s.set_backlog(false);
        assert!(!s.in_backlog());
    }

    #[test]
    fn the_main_loop_leaves_fresh_lane_jobs_to_the_lane() {
        let now = 1_000_000;
        assert!(lane_owns(Lane::Immediate, Some(now - 10), now));
        assert!(
            !lane_owns(Lane::Immediate, Some(now - LANE_OWNS_MS), now),
            "not claimed within its time: the main loop's"
        );
        assert!(
            !lane_owns(Lane::Scheduled, Some(now - 10), now),
            "a schedule's trigger"
        );
        assert!(!lane_owns(Lane::Immediate, None, now));
    }

    #[test]
    fn rounds_in_flight_claim_different_jobs() {
        let claiming = Claiming::default();
        fn id<'a>(j: &'a &str) -> &'a str {
            j
        }
        let (first, guard) = claiming.take(vec!["a", "b"], id);
        assert_eq!(first, ["a", "b"]);
        let (second, _g2) = claiming.take(vec!["c", "b", "a"], id);
        assert_eq!(second, ["c"], "a and b are the first round's");
        drop(guard);
        let (third, _g3) = claiming.take(vec!["a", "c"], id);
        assert_eq!(third, ["a"], "given back once the first round ended");
    }
}
