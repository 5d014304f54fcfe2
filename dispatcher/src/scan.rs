//! The leader's dispatch loop: find due triggers, claim them, publish them.
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

use crate::balancer::Balancer;
use crate::claim_lead::ClaimLead;
use crate::lane::{ImmediateLane, LaneSignal, lane_owns};
use crate::lease::Term;
use crate::publish::Publisher;
use kairos_core::job::Job;
use kairos_core::store::{DispatchWork, DispatcherStore, StoreError};
use kairos_core::time::{Millis, now_ms};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_util::task::{AbortOnDropHandle, TaskTracker};
use tracing::{debug, info, warn};

/// Dispatch loop settings.
#[derive(Debug, Clone)]
pub struct ScanConfig {
    /// Longest sleep between two scans (the safety net for lost signals).
    pub interval: Duration,
    /// How far ahead each scan looks for the next trigger to sleep until.
    pub lookahead: Duration,
    /// How long before its due time a trigger is claimed; it is published at
    /// the due time. Covers the claim transaction's latency.
    pub claim_ahead: Duration,
    /// Jobs claimed per transaction.
    pub batch: u32,
    /// How often `pending` executions are swept up and published.
    pub sweep_every: Duration,
    /// How often the worker view is reloaded from the database.
    pub workers_every: Duration,
    /// Batches published at once.
    pub publishers: usize,
    /// The longest a due trigger waits behind higher priorities in a
    /// backlog: past it, it is claimed before any priority.
    pub starvation: Duration,
    /// What this loop does: everything (the single leader), or in
    /// partitioned mode either the claims of a dispatcher's partitions or
    /// the leader's sweeps.
    pub duty: Duty,
}

/// A dispatch loop's share of the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Duty {
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
pub struct DispatchLoop {
    /// Storage.
    pub store: Arc<dyn DispatcherStore>,
    /// Sends claimed work.
    pub publisher: Arc<Publisher>,
    /// Worker view shared with the publisher.
    pub balancer: Arc<Mutex<Balancer>>,
    /// Due times announced by the API (see [`kairos_core::due`]).
    pub due: mpsc::Receiver<Millis>,
    /// Notified when applied results gave concurrency slots back.
    pub slots_freed: Arc<Notify>,
    /// Settings.
    pub cfg: ScanConfig,
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

/// Claimed work this term has not finished publishing, so the sweep leaves
/// it alone, and the publishing tasks' shared limits.
pub(crate) struct Unpublished {
    held: Mutex<HashSet<String>>,
    /// One permit per batch being published.
    permits: Arc<Semaphore>,
    /// Set when a publish left work pending (no worker, broker error).
    left_behind: AtomicBool,
    /// Wakes the loop when `left_behind` is set.
    wake: Notify,
    tasks: TaskTracker,
}

impl Unpublished {
    fn new(publishers: usize) -> Self {
        Self {
            held: Mutex::new(HashSet::new()),
            permits: Arc::new(Semaphore::new(publishers.max(1))),
            left_behind: AtomicBool::new(false),
            wake: Notify::new(),
            tasks: TaskTracker::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn hold(&self, work: &[DispatchWork]) {
        self.lock()
            .extend(work.iter().map(|w| w.execution_id.clone()));
    }

    pub(crate) fn leave_behind(&self) {
        self.left_behind.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    pub(crate) fn release(&self, ids: &[String]) {
        let mut held = self.lock();
        for id in ids {
            held.remove(id);
        }
    }
}

impl DispatchLoop {
    /// Runs until the term ends, then waits for its publishing tasks.
    pub async fn run(mut self, term: Term) {
        let unpublished = Arc::new(Unpublished::new(self.cfg.publishers));
        let lane = ImmediateLane {
            store: self.store.clone(),
            publisher: self.publisher.clone(),
            unpublished: unpublished.clone(),
            signal: self.lane.clone(),
            batch: self.cfg.batch,
            interval: self.cfg.interval.max(Duration::from_millis(250)),
            claiming: Default::default(),
        };
        if self.cfg.duty.claims() {
            unpublished.tasks.spawn(lane.run(term.clone()));
        }
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
                swept_more = self.sweep(&term, &unpublished).await;
                (waiting, rate_retry) = self.sweep_waiting(&term, &unpublished).await;
                last_sweep = Instant::now();
            } else if waiting && freed && sweeps && term.is_valid() {
                (waiting, rate_retry) = self.sweep_waiting(&term, &unpublished).await;
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
            if last_purge.elapsed() >= SLOTS_PURGE_EVERY && sweeps && term.is_valid() {
                self.purge_slots(&term).await;
                last_purge = Instant::now();
            }
            freed = false;
            if !round.more_due {
                self.plan_lead(&mut lead, &round).await;
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
    async fn plan_lead(&self, lead: &mut ClaimLead, round: &Round) {
        let was = lead.current();
        match round.next_due.filter(|_| round.crowded) {
            None => lead.relax(),
            Some(next) => {
                let until = next + self.claim_ahead_ms();
                match self.store.jobs_count_due(until, lead.count_cap()).await {
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
        match self.store.workers_list().await {
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
                self.store
                    .jobs_find_due(horizon, self.cfg.batch, &[])
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
            *ahead = Some(self.scan_ahead(&due, claim_by));
        }
        if due.is_empty() || !term.is_valid() {
            return Ok(Round {
                more_due: false,
                next_due,
                crowded,
            });
        }
        let claimed = self.publisher.claim_due(due, term.fence, now).await?;
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
    fn scan_ahead(&self, claiming: &[Job], due_by: Millis) -> Ahead {
        let store = self.store.clone();
        let limit = self.cfg.batch;
        let starving_before = now_ms() - self.cfg.starvation.as_millis() as Millis;
        let claiming: Vec<String> = claiming.iter().map(|j| j.id.clone()).collect();
        AbortOnDropHandle::new(tokio::spawn(async move {
            let except: Vec<&str> = claiming.iter().map(String::as_str).collect();
            store
                .jobs_find_due_ranked(due_by, starving_before, limit, &except)
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

    /// Publishes executions left `pending`; `true` if there may be more.
    async fn sweep(&self, term: &Term, unpublished: &Unpublished) -> bool {
        let now = now_ms();
        // Only what some live worker can run: work waiting for a handler no
        // worker serves stays pending (and visible as waiting) without
        // filling the batch ahead of work that can go.
        let routable = self
            .balancer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routable(now);
        match self
            .store
            .executions_find_unpublished(now, self.cfg.batch, &routable)
            .await
        {
            Ok(work) if work.is_empty() || !term.is_valid() => false,
            Ok(work) => {
                let full = work.len() as u32 >= self.cfg.batch;
                let work: Vec<DispatchWork> = {
                    let held = unpublished.lock();
                    work.into_iter()
                        .filter(|w| !held.contains(&w.execution_id))
                        .collect()
                };
                if work.is_empty() {
                    return false;
                }
                let report = self.publisher.publish(work, term).await;
                if report.no_worker > 0 || report.failed > 0 {
                    // Retried on the next round, not at once: no spinning.
                    unpublished.left_behind.store(true, Ordering::Release);
                }
                if report.dispatched > 0 {
                    info!(?report, "published pending executions");
                }
                full && report.dispatched > 0
            }
            Err(e) => {
                warn!(error = %e, "cannot sweep pending executions");
                false
            }
        }
    }
}

impl DispatchLoop {
    /// Publishes the work a concurrency limit held back, as far as slots
    /// (and rates) allow now; whether some still waits, and when a rate that
    /// holds some back has room again. Sets the gauge of executions waiting
    /// for a limit.
    async fn sweep_waiting(
        &self,
        term: &Term,
        unpublished: &Unpublished,
    ) -> (bool, Option<Millis>) {
        let now = now_ms();
        let routable = self
            .balancer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .routable(now);
        let work = match self
            .store
            .executions_find_waiting(now, self.cfg.batch, &routable)
            .await
        {
            Ok(work) => work,
            Err(e) => {
                warn!(error = %e, "cannot sweep work waiting for a concurrency slot");
                return (true, None);
            }
        };
        if work.is_empty() {
            crate::metrics::waiting_for_concurrency(0);
            return (false, None);
        }
        let mut retry_at = None;
        let work: Vec<DispatchWork> = {
            let held = unpublished.lock();
            work.into_iter()
                .filter(|w| !held.contains(&w.execution_id))
                .collect()
        };
        if term.is_valid() && !work.is_empty() {
            let report = self.publisher.publish(work, term).await;
            retry_at = report.retry_at;
            if report.dispatched > 0 {
                debug!(?report, "published work that waited for a concurrency slot");
            }
        }
        match self.store.executions_count_waiting(WAITING_COUNT_CAP).await {
            Ok(n) => {
                crate::metrics::waiting_for_concurrency(n);
                (n > 0, retry_at)
            }
            Err(e) => {
                debug!(error = %e, "cannot count work waiting for a concurrency slot");
                (true, retry_at)
            }
        }
    }
}

impl DispatchLoop {
    /// Deletes slot rows that count for nothing any more (see
    /// `concurrency_slots_purge`): housekeeping only, a failure costs nothing.
    async fn purge_slots(&self, term: &Term) {
        match self
            .store
            .concurrency_slots_purge(term.fence, SLOTS_PURGE_BATCH)
            .await
        {
            Ok(0) => {}
            Ok(n) => debug!(deleted = n, "slot rows of ended executions deleted"),
            Err(StoreError::Fenced { ours, current }) => {
                warn!(ours, current, "storage holds a newer fence; stepping down");
                term.fenced(current);
            }
            Err(e) => debug!(error = %e, "cannot purge slot rows now"),
        }
    }
}

/// How often the leader deletes slot rows of ended executions, and at most
/// how many at a time.
const SLOTS_PURGE_EVERY: Duration = Duration::from_secs(60);
const SLOTS_PURGE_BATCH: u32 = 5_000;

/// The gauge of work waiting for a concurrency slot counts no further.
const WAITING_COUNT_CAP: u32 = 1_000_000;

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

/// Waits until `at` (ms UTC), then publishes `batch` if the term still holds.
async fn publish_at(
    at: Millis,
    batch: Vec<DispatchWork>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
    publisher: Arc<Publisher>,
    unpublished: Arc<Unpublished>,
    term: Term,
) {
    let ids = ids_of(&batch);
    let wait = Duration::from_millis((at - now_ms()).max(0) as u64);
    let ready = tokio::select! {
        _ = term.token.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    };
    let permit = match (ready, permit) {
        (false, _) => None,
        (true, Some(p)) => Some(p),
        (true, None) => tokio::select! {
            _ = term.token.cancelled() => None,
            p = unpublished.permits.clone().acquire_owned() => p.ok(),
        },
    };
    // Unpublished work is (or goes back to) `pending`: this term's sweep
    // (once released here) or the next leader's picks it up.
    if permit.is_some() && term.is_valid() {
        let report = publisher.publish(batch, &term).await;
        if report.no_worker > 0 || report.failed > 0 {
            unpublished.leave_behind();
        }
        if report.dispatched > 0 {
            debug!(?report, "dispatched");
        }
    } else {
        publisher.hand_back(&batch, NOT_PUBLISHED).await;
    }
    unpublished.release(&ids);
}

/// Why work claimed as dispatched went back to `pending` unpublished.
pub(crate) const NOT_PUBLISHED: &str = "not published: the dispatcher's leadership ended first";

fn ids_of(work: &[DispatchWork]) -> Vec<String> {
    work.iter().map(|w| w.execution_id.clone()).collect()
}
