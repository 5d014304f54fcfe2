//! The dispatch loop: find due triggers, claim them, publish them; and
//! sweep what was left `pending`. The single leader runs one over every
//! job; in partitioned mode every dispatcher runs one over the partitions
//! it holds, and the leader's only sweeps (see [`Duty`] and [`ClaimScope`]).
//! Its parts: the scope it claims in (`scope`, `rate`), the claim itself
//! (`claim`, `claim_lead`), the immediate lane beside it (`lane`), the
//! publisher and the work on its way (`publish`, `unpublished`), and the
//! sweeps (`sweeps`).
//!
//! Each round reads due jobs through the `(status, next_trigger_at)` index,
//! computes each job's following trigger, fans broadcast and sharded triggers
//! out into one claim per shard, claims the batch in one transaction
//! (version check per job, fencing token, unique `(job_id, scheduled_at,
//! shard_index)`), and hands the claimed work to publishing tasks.
//!
//! Timing: a trigger is claimed a little *before* it is due (`claim_ahead`),
//! so the claim transaction is paid while waiting, and its publishing task
//! sleeps until exactly the due time and publishes then. A burst seen coming
//! (a full page of triggers not yet due) is claimed further ahead, by what
//! claiming it takes (see `claim_lead`). Each scan also looks
//! further ahead, and the loop sleeps until the next trigger's claim time. A
//! due signal from the API (a job created, triggered or resumed) cuts the
//! sleep short when it names an earlier time. A full batch starts the next
//! round at once. Publishing runs beside the loop (a few batches at once), so
//! a slow confirm does not hold up the next claim.
//!
//! While a full round claims, the next round's scan already runs (on a read
//! connection, beside the claim's write transaction): it leaves out the jobs
//! the running claim holds, which it may still see as due. A job it read
//! stale loses its version check and comes back in a later scan, so scanning
//! ahead only moves latency off the serial path.
//!
//! The periodic scan stays as the safety net: a lost signal costs latency,
//! never a trigger. Executions left `pending` (retries, failed publishes, a
//! predecessor's unfinished work, work no worker could take) are swept up
//! regularly, and at once after a publish left some behind. Work a
//! concurrency limit holds back is swept on its own (so it never fills the
//! other sweep's batch), with the regular sweep and, while some waits,
//! whenever this dispatcher's results consumer saw a slot given back.

mod claim;
mod claim_lead;
mod lane;
mod publish;
mod rate;
mod scope;
mod sweeps;
mod unpublished;

pub(crate) use claim::Claimer;
pub(crate) use lane::LaneSignal;
pub(crate) use publish::{Publisher, PublisherParts};
pub(crate) use rate::RateLimit;
pub(crate) use scope::ClaimScope;

use crate::balancer::Balancer;
use crate::lease::Term;
use claim_lead::ClaimLead;
use kairos_core::job::Job;
use kairos_core::store::{Dispatch, DispatchWork, StoreError, WorkerStore};
use kairos_core::supervise::spawn_critical;
use kairos_core::time::{Millis, now_ms};
use lane::{ImmediateLane, lane_owns};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, warn};
use unpublished::{NOT_PUBLISHED, Unpublished, ids_of, publish_at};

/// Dispatch loop settings.
#[derive(Debug, Clone)]
pub(crate) struct LoopConfig {
    /// Longest sleep between two scans (the safety net for lost signals).
    pub(crate) interval: Duration,
    /// How far ahead each scan looks for the next trigger to sleep until.
    pub(crate) lookahead: Duration,
    /// How long before its due time a trigger is claimed; it is published at
    /// the due time. Covers the claim transaction's latency.
    pub(crate) claim_ahead: Duration,
    /// Jobs claimed per transaction.
    pub(crate) batch: u32,
    /// How often `pending` executions are swept up and published.
    pub(crate) sweep_every: Duration,
    /// How often the worker view is reloaded from the database.
    pub(crate) workers_every: Duration,
    /// Batches published at once.
    pub(crate) publishers: usize,
    /// The longest a due trigger waits behind higher priorities in a
    /// backlog: past it, it is claimed before any priority.
    pub(crate) starvation: Duration,
    /// What this loop does: everything (the single leader), or in
    /// partitioned mode either the claims of a dispatcher's partitions or
    /// the leader's sweeps.
    pub(crate) duty: Duty,
}

/// A dispatch loop's share of the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Duty {
    /// Claims of due triggers (and the immediate lane) and the sweeps of
    /// pending and waiting work: the single leader.
    All,
    /// Claims only: a partitioned dispatcher's loop over its partitions.
    Claims,
    /// Sweeps and slot purges only: the leader in partitioned mode.
    Sweeps,
}

impl Duty {
    fn claims(self) -> bool {
        self != Duty::Sweeps
    }

    fn sweeps(self) -> bool {
        self != Duty::Claims
    }
}

/// Everything the loop needs.
pub(crate) struct DispatchLoop {
    /// Due scans and sweeps.
    pub(crate) dispatch: Arc<dyn Dispatch>,
    /// The worker view's source.
    pub(crate) workers: Arc<dyn WorkerStore>,
    /// What the loop claims, and how (see [`ClaimScope`]).
    pub(crate) scope: Arc<ClaimScope>,
    /// Claims due triggers in `scope`.
    pub(crate) claimer: Arc<Claimer>,
    /// Sends claimed work.
    pub(crate) publisher: Arc<Publisher>,
    /// Worker view shared with the claimer and the publisher.
    pub(crate) balancer: Arc<Mutex<Balancer>>,
    /// Due times announced by the API (see [`kairos_core::due`]).
    pub(crate) due: mpsc::Receiver<Millis>,
    /// Notified when applied results gave concurrency slots back.
    pub(crate) slots_freed: Arc<Notify>,
    /// Settings.
    pub(crate) cfg: LoopConfig,
    /// Tells the immediate lane when a backlog starts and ends (it polls
    /// while one lasts), and hands the main loop the due signals it found
    /// nothing for.
    pub(crate) lane: Arc<LaneSignal>,
}

/// What one claim round found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Round {
    /// The batch was full: more triggers are due now.
    more_due: bool,
    /// Earliest trigger inside the look-ahead window not claimed yet.
    next_due: Option<Millis>,
    /// The scan's page was full: a burst may be coming.
    crowded: bool,
}

/// The next round's scan, started while the current round claims.
type Ahead = AbortOnDropHandle<Result<Vec<Job>, StoreError>>;

impl DispatchLoop {
    /// Runs until the term ends, then waits for its immediate lane and
    /// publishing tasks.
    pub(crate) async fn run(mut self, term: Term) {
        let unpublished = Arc::new(Unpublished::new(self.cfg.publishers));
        let sweeper = sweeps::Sweeps {
            dispatch: self.dispatch.clone(),
            publisher: self.publisher.clone(),
            balancer: self.balancer.clone(),
            batch: self.cfg.batch,
        };
        let lane = ImmediateLane {
            dispatch: self.dispatch.clone(),
            scope: self.scope.clone(),
            claimer: self.claimer.clone(),
            publisher: self.publisher.clone(),
            unpublished: unpublished.clone(),
            signal: self.lane.clone(),
            batch: self.cfg.batch,
            interval: self.cfg.interval.max(Duration::from_millis(250)),
            claiming: Default::default(),
        };
        // The lane lives as long as the term: a panic in it stops the
        // process (see `spawn_critical`) rather than leave the term
        // without it.
        let lane = self
            .cfg
            .duty
            .claims()
            .then(|| spawn_critical("immediate lane", lane.run(term.clone())));
        let mut last_sweep = Instant::now() - self.cfg.sweep_every;
        let mut last_workers = Instant::now() - self.cfg.workers_every;
        let mut last_purge = Instant::now();
        let mut ahead = None;
        let mut lead = ClaimLead::new(self.cfg.claim_ahead, self.cfg.lookahead);
        crate::metrics::claim_lead(lead.current());
        // Whether work waits for a concurrency slot, whether a slot was
        // given back since the last look, and when a rate that holds some
        // back has room again.
        let (mut waiting, mut freed) = (false, false);
        let mut rate_retry: Option<Millis> = None;
        while term.is_valid() {
            // Work left behind usually means the worker view is out of date
            // (a worker just started): reload it and sweep now, not later.
            let left_behind = unpublished.left_behind.swap(false, Ordering::AcqRel);
            if left_behind || last_workers.elapsed() >= self.cfg.workers_every {
                self.refresh_workers().await;
                last_workers = Instant::now();
            }
            // The sweep goes first: when it was asked for (a workflow's
            // next nodes, a manual trigger), someone waits for that work, and
            // a claim round found nothing due in most such wake-ups.
            let asked = self.lane.take_sweep();
            let sweeps = self.cfg.duty.sweeps();
            let mut swept_more = false;
            if (left_behind || asked || last_sweep.elapsed() >= self.cfg.sweep_every)
                && sweeps
                && term.is_valid()
            {
                swept_more = sweeper.sweep(&term, &unpublished).await;
                (waiting, rate_retry) = sweeper.sweep_waiting(&term, &unpublished).await;
                last_sweep = Instant::now();
            } else if waiting && freed && sweeps && term.is_valid() {
                (waiting, rate_retry) = sweeper.sweep_waiting(&term, &unpublished).await;
            }
            let claimed = if self.cfg.duty.claims() {
                self.claim_round(&term, &unpublished, &mut ahead, &mut lead)
                    .await
            } else {
                Ok(Round::default())
            };
            let mut round = match claimed {
                Ok(round) => round,
                Err(StoreError::Fenced { ours, current }) => {
                    warn!(
                        ours,
                        current,
                        "storage holds a newer fence (a newer leader, or a lock service that lost its counter); stepping down"
                    );
                    term.fenced(current);
                    break;
                }
                Err(e) => {
                    ahead = None;
                    warn!(error = %e, "dispatch round failed; retrying");
                    let pause = self.cfg.interval.max(Duration::from_millis(500));
                    let wake_at = now_ms() + pause.as_millis() as Millis;
                    self.sleep_until(&term, &unpublished, wake_at, false).await;
                    continue;
                }
            };
            round.more_due |= swept_more;
            if last_purge.elapsed() >= sweeps::SLOTS_PURGE_EVERY && sweeps && term.is_valid() {
                sweeper.purge_slots(&term).await;
                last_purge = Instant::now();
            }
            freed = false;
            if !round.more_due {
                self.plan_lead(&mut lead, &round, term.fence).await;
                let safety_net = now_ms() + self.cfg.interval.as_millis() as Millis;
                let wake_at = round
                    .next_due
                    .map_or(safety_net, |t| (t - lead.current()).min(safety_net));
                let wake_at = rate_retry
                    .filter(|_| waiting)
                    .map_or(wake_at, |t| t.min(wake_at));
                freed = self
                    .sleep_until(&term, &unpublished, wake_at, waiting)
                    .await;
                // A rate's next token is as good as a freed slot.
                freed |= rate_retry.is_some_and(|t| now_ms() >= t);
            }
        }
        if let Some(lane) = lane {
            let _ = lane.await;
        }
        unpublished.tasks.close();
        unpublished.tasks.wait().await;
        debug!("dispatch loop ended with the term");
    }

    fn claim_ahead_ms(&self) -> Millis {
        self.cfg.claim_ahead.as_millis() as Millis
    }

    /// Before sleeping: if the scan saw a full page of triggers ahead, counts
    /// those due with the next one and sets the lead to claim them in time;
    /// otherwise the usual lead will do.
    async fn plan_lead(&self, lead: &mut ClaimLead, round: &Round, fence: u64) {
        let was = lead.current();
        match round.next_due.filter(|_| round.crowded) {
            None => lead.relax(),
            Some(next) => {
                let until = next + self.claim_ahead_ms();
                let held = self.scope.held();
                let counted = self
                    .dispatch
                    .jobs_count_due(held.scope(fence), until, lead.count_cap())
                    .await;
                match counted {
                    Ok(due) => lead.plan(due),
                    // The usual lead still claims everything, later.
                    Err(e) => debug!(error = %e, "cannot count the triggers ahead"),
                }
            }
        }
        if lead.current() != was {
            debug!(lead_ms = lead.current(), "claim lead changed");
            crate::metrics::claim_lead(lead.current());
        }
    }

    /// Sleeps until `wake_at` (ms UTC), the end of the term, a due signal
    /// whose claim time is before `wake_at`, a publish that left work behind,
    /// a sweep asked for, or, when `waiting` (work waits for a concurrency
    /// slot), a slot given back: then returns `true`.
    async fn sleep_until(
        &mut self,
        term: &Term,
        unpublished: &Unpublished,
        wake_at: Millis,
        waiting: bool,
    ) -> bool {
        let ahead = self.claim_ahead_ms();
        let slots_freed = self.slots_freed.clone();
        loop {
            let left = Duration::from_millis((wake_at - now_ms()).max(0) as u64);
            if left.is_zero() {
                return false;
            }
            tokio::select! {
                _ = term.token.cancelled() => return false,
                _ = tokio::time::sleep(left) => return false,
                _ = unpublished.wake.notified() => return false,
                _ = self.lane.sweep_wake.notified() => return false,
                _ = self.lane.handoff.notified() => return false,
                _ = slots_freed.notified(), if waiting => return true,
                signal = self.due.recv() => match signal {
                    Some(at) if at - ahead < wake_at => return false,
                    Some(_) => continue,
                    // No signal source any more: the timer alone is enough.
                    None => {
                        tokio::time::sleep(left).await;
                        return false;
                    }
                },
            }
        }
    }

    async fn refresh_workers(&self) {
        match self.workers.workers_list().await {
            Ok(workers) => {
                let mut balancer = self.balancer.lock().unwrap_or_else(|p| p.into_inner());
                count_workers(&workers, balancer.stale_after_ms());
                balancer.refresh(workers)
            }
            Err(e) => warn!(error = %e, "cannot load workers; keeping the previous view"),
        }
    }

    /// One claim round: claims what is due within `claim_ahead` and hands it
    /// to publishing tasks. Takes the scan `ahead` started, if any, and
    /// starts the next one when this round is full.
    async fn claim_round(
        &mut self,
        term: &Term,
        unpublished: &Arc<Unpublished>,
        ahead: &mut Option<Ahead>,
        lead: &mut ClaimLead,
    ) -> Result<Round, StoreError> {
        let now = now_ms();
        let claim_by = now + lead.current();
        let horizon = now + self.cfg.lookahead.as_millis() as Millis;
        let started = Instant::now();
        let found = match ahead.take() {
            Some(scan) => scan
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))??,
            None => {
                self.forget_announced();
                let held = self.scope.held();
                let page = self.scope.page(self.cfg.batch);
                self.dispatch
                    .jobs_find_due(held.scope(term.fence), horizon, page, &[])
                    .await?
            }
        };
        let scanned = started.elapsed();
        let crowded = found.len() as u32 >= self.cfg.batch;
        // A job the immediate lane serves is left to it (see `lane_owns`).
        let is_due = |j: &Job| {
            j.next_trigger_at.is_some_and(|t| t <= claim_by)
                && !lane_owns(j.lane, j.next_trigger_at, now)
        };
        let next_due = found
            .iter()
            .filter_map(|j| j.next_trigger_at)
            .find(|&t| t > claim_by);
        let due: Vec<Job> = found.into_iter().filter(is_due).collect();
        // A full page of due jobs may have more behind it: a backlog, whose
        // next rounds are claimed by priority while the immediate lane
        // claims beside them.
        let more_due = due.len() as u32 >= self.cfg.batch;
        crate::metrics::due_backlog(due.len());
        self.lane.set_backlog(more_due);
        if more_due && term.is_valid() {
            self.forget_announced();
            *ahead = Some(self.scan_ahead(&due, claim_by, term.fence));
        }
        if due.is_empty() || !term.is_valid() {
            return Ok(Round {
                more_due: false,
                next_due,
                crowded,
            });
        }
        let claimed = self.claimer.claim_due(due, term.fence, now).await?;
        let more_due = more_due || claimed.more;
        let work = claimed.work;
        let claim_took = started.elapsed() - scanned;
        lead.measured(claimed.tried, claim_took);
        debug!(
            claimed = work.len(),
            scan_ms = scanned.as_millis() as u64,
            claim_ms = claim_took.as_millis() as u64,
            "claim round"
        );
        if work.len() < claimed.tried {
            debug!(
                lost = claimed.tried - work.len(),
                "some claims produced no work (version check lost, skipped or dropped)"
            );
        }
        // A leader frozen between claim and publish must not publish on waking:
        // the claimed rows go back to `pending` for the current leader's sweep.
        if term.is_valid() {
            self.send(work, term, unpublished).await;
        } else {
            self.publisher.hand_back(&work, NOT_PUBLISHED).await;
        }
        Ok(Round {
            more_due,
            next_due,
            crowded,
        })
    }

    /// Drops the due signals received so far, just before a scan starts:
    /// each announced a job committed before it was sent, which that scan
    /// sees. Left queued, every one of them would wake the loop for a scan
    /// of its own after a burst of creates (the channel holds 1,024). One
    /// announcing a time beyond the scan's horizon is dropped as the sleep
    /// drops it: the periodic scan finds that job in time.
    fn forget_announced(&mut self) {
        while self.due.try_recv().is_ok() {}
    }

    /// Starts the next round's scan while `claiming` is being claimed: a
    /// batch of the due jobs other than those, in the backlog's order
    /// (starving first, then by priority; the immediate lane left out).
    fn scan_ahead(&self, claiming: &[Job], due_by: Millis, fence: u64) -> Ahead {
        let store = self.dispatch.clone();
        let held = self.scope.held();
        let limit = self.scope.page(self.cfg.batch);
        let starving_before = now_ms() - self.cfg.starvation.as_millis() as Millis;
        let claiming: Vec<String> = claiming.iter().map(|j| j.id.clone()).collect();
        AbortOnDropHandle::new(tokio::spawn(async move {
            let except: Vec<&str> = claiming.iter().map(String::as_str).collect();
            store
                .jobs_find_due_ranked(held.scope(fence), due_by, starving_before, limit, &except)
                .await
        }))
    }

    /// Hands `work` to publishing tasks, one per due time; each publishes at
    /// its due time. Waits for a free publisher only for work due now, so a
    /// backlog slows claiming down instead of piling up tasks.
    async fn send(&self, work: Vec<DispatchWork>, term: &Term, unpublished: &Arc<Unpublished>) {
        unpublished.hold(&work);
        let now = now_ms();
        let mut by_time: BTreeMap<Millis, Vec<DispatchWork>> = BTreeMap::new();
        for w in work {
            by_time.entry(w.scheduled_at.max(now)).or_default().push(w);
        }
        let mut batches = by_time.into_iter();
        while let Some((at, batch)) = batches.next() {
            let permit = if at <= now {
                let permit = tokio::select! {
                    _ = term.token.cancelled() => {
                        let unsent: Vec<DispatchWork> =
                            batch.into_iter().chain(batches.flat_map(|(_, b)| b)).collect();
                        self.publisher.hand_back(&unsent, NOT_PUBLISHED).await;
                        unpublished.release(&ids_of(&unsent));
                        return;
                    }
                    p = unpublished.permits.clone().acquire_owned() => p,
                };
                // The semaphore is never closed.
                permit.ok()
            } else {
                None
            };
            let task = publish_at(
                at,
                batch,
                permit,
                self.publisher.clone(),
                unpublished.clone(),
                term.clone(),
            );
            unpublished.tasks.spawn(task);
        }
    }
}

/// Sets the leader's `kairos_workers{state}` gauges from a fresh worker list.
fn count_workers(workers: &[kairos_core::worker::WorkerInfo], stale_ms: i64) {
    let now = now_ms();
    let (mut online, mut draining, mut dead) = (0, 0, 0);
    for w in workers {
        match crate::metrics::worker_bucket(w.state, w.last_heartbeat_at, now, stale_ms) {
            "online" => online += 1,
            "draining" => draining += 1,
            _ => dead += 1,
        }
    }
    crate::metrics::workers(online, draining, dead);
}
