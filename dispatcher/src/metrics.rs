//! The dispatcher's Prometheus figures, recorded through the `metrics` facade
//! (the binary installs the exporter; without one these calls do nothing).
//!
//! Names follow Prometheus conventions: counters end in `_total`, durations
//! are histograms in seconds, and labels take a small fixed set of values —
//! never a job or execution id. docs/operations.md lists every figure.

use kairos_core::priority::Priority;
use kairos_core::retention::History;
use kairos_core::store::Applied;
use kairos_core::time::Millis;
use kairos_core::worker::WorkerState;
use std::time::Duration;

/// Registers every dispatcher figure at zero with its help text, so
/// dashboards and alerts find them before the first event.
pub(crate) fn register() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "kairos_dispatcher_is_leader",
        "1 while this instance holds the lease"
    );
    describe_gauge!(
        "kairos_dispatcher_partitions_owned",
        "Partitions whose leases this instance holds (partitioned dispatch)"
    );
    describe_gauge!(
        "kairos_dispatcher_fencing_token",
        "Fencing token of this instance's term (0 while following)"
    );
    describe_counter!(
        "kairos_triggers_claimed_total",
        "Triggers claimed into executions to publish"
    );
    describe_counter!(
        "kairos_triggers_dispatched_total",
        "Dispatches confirmed by the broker and recorded"
    );
    describe_counter!(
        "kairos_triggers_rerouted_total",
        "Dispatches refused by a full worker and sent to another"
    );
    describe_counter!(
        "kairos_triggers_skipped_total",
        "Claims that produced no dispatch (misfire skip, overlap, lost version check)"
    );
    describe_counter!(
        "kairos_publish_failures_total",
        "Publishes that failed; the work stays pending and is retried"
    );
    describe_histogram!(
        "kairos_trigger_lateness_seconds",
        Unit::Seconds,
        "Due time to confirmed publish, by the job's priority"
    );
    describe_histogram!(
        "kairos_publish_confirm_seconds",
        Unit::Seconds,
        "Publish to broker confirm"
    );
    describe_counter!(
        "kairos_results_applied_total",
        "Worker results applied, by the state they moved to (ignored: stale or duplicate)"
    );
    describe_counter!(
        "kairos_reaper_actions_total",
        "Attempts the reaper requeued, declared lost or timed out"
    );
    describe_gauge!(
        "kairos_due_backlog",
        "Triggers due at the last scan (capped at the claim batch size)"
    );
    describe_gauge!(
        "kairos_claim_lead_seconds",
        Unit::Seconds,
        "How long before their due time the leader claims triggers (raised for a burst ahead)"
    );
    describe_gauge!("kairos_workers", "Workers by state as the leader sees them");
    describe_gauge!(
        "kairos_executions_waiting_for_concurrency",
        "Pending executions held back by a concurrency limit (handler, tenant or job), as the leader last counted"
    );
    describe_counter!(
        "kairos_retention_purged_total",
        "Rows of finished history deleted past their retention, by kind"
    );
    describe_gauge!(
        "kairos_retention_backlog",
        "Rows of history past their retention not deleted yet, by kind (counted at each pass, up to 100000 per tenant)"
    );
    leadership(false, 0);
    claimed(0, 0);
    metrics::counter!("kairos_triggers_dispatched_total").increment(0);
    metrics::counter!("kairos_triggers_rerouted_total").increment(0);
    metrics::counter!("kairos_publish_failures_total").increment(0);
    let _ = metrics::histogram!(
        "kairos_trigger_lateness_seconds",
        "priority" => priority_label(Priority::DEFAULT)
    );
    let _ = metrics::histogram!("kairos_publish_confirm_seconds");
    for outcome in [
        "running",
        "succeeded",
        "failed",
        "timed_out",
        "cancelled",
        "ignored",
    ] {
        metrics::counter!("kairos_results_applied_total", "outcome" => outcome).increment(0);
    }
    for action in ["lost", "requeued", "timed_out"] {
        metrics::counter!("kairos_reaper_actions_total", "action" => action).increment(0);
    }
    due_backlog(0);
    workers(0, 0, 0);
    waiting_for_concurrency(0);
    partitions_owned(0);
    for kind in History::ALL {
        metrics::counter!("kairos_retention_purged_total", "kind" => kind.as_str()).increment(0);
        retention_backlog(kind, 0);
    }
}

/// Rows of `kind` the retention purge deleted.
pub(crate) fn retention_purged(kind: History, n: u64) {
    metrics::counter!("kairos_retention_purged_total", "kind" => kind.as_str()).increment(n);
}

/// Rows of `kind` past their retention still waiting for the purge.
pub(crate) fn retention_backlog(kind: History, n: u64) {
    metrics::gauge!("kairos_retention_backlog", "kind" => kind.as_str()).set(n as f64);
}

/// Pending executions a concurrency limit holds back.
pub(crate) fn waiting_for_concurrency(n: u64) {
    metrics::gauge!("kairos_executions_waiting_for_concurrency").set(n as f64);
}

/// Whether this instance holds the lease, and the fencing token of its term
/// (0 while following).
pub(crate) fn leadership(leader: bool, fence: u64) {
    metrics::gauge!("kairos_dispatcher_is_leader").set(if leader { 1.0 } else { 0.0 });
    metrics::gauge!("kairos_dispatcher_fencing_token").set(fence as f64);
}

/// How many partition leases this instance holds.
pub(crate) fn partitions_owned(n: usize) {
    metrics::gauge!("kairos_dispatcher_partitions_owned").set(n as f64);
}

/// One claim round: `claimed` triggers became executions to publish,
/// `skipped` claims produced none (misfire `skip`, overlap `forbid`/`replace`,
/// or a version check lost to a concurrent change).
pub(crate) fn claimed(claimed: usize, skipped: usize) {
    metrics::counter!("kairos_triggers_claimed_total").increment(claimed as u64);
    metrics::counter!("kairos_triggers_skipped_total").increment(skipped as u64);
}

/// Triggers due at the last scan and not claimed yet (capped at the batch size).
pub(crate) fn due_backlog(n: usize) {
    metrics::gauge!("kairos_due_backlog").set(n as f64);
}

/// The leader's claim lead, in milliseconds.
pub(crate) fn claim_lead(ms: Millis) {
    metrics::gauge!("kairos_claim_lead_seconds").set(ms as f64 / 1000.0);
}

/// One dispatch confirmed by the broker and recorded: counted, with its
/// lateness (due time → confirmed publish).
pub(crate) fn dispatched(scheduled_at: Millis, priority: Priority, now: Millis) {
    metrics::counter!("kairos_triggers_dispatched_total").increment(1);
    let late = (now - scheduled_at).max(0) as f64 / 1000.0;
    metrics::histogram!("kairos_trigger_lateness_seconds", "priority" => priority_label(priority))
        .record(late);
}

/// The `priority` label's value: one of ten fixed strings.
fn priority_label(p: Priority) -> &'static str {
    const LABELS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    LABELS[usize::from(p.get()).min(LABELS.len() - 1)]
}

/// How long one publish waited for the broker's confirm.
pub(crate) fn publish_confirm(took: Duration) {
    metrics::histogram!("kairos_publish_confirm_seconds").record(took.as_secs_f64());
}

/// Publishes that failed (the work stays pending and is retried).
pub(crate) fn publish_failed(n: usize) {
    if n > 0 {
        metrics::counter!("kairos_publish_failures_total").increment(n as u64);
    }
}

/// A refused dispatch sent on to another worker.
pub(crate) fn rerouted() {
    metrics::counter!("kairos_triggers_rerouted_total").increment(1);
}

/// Results applied in one batch, by what they did: the new state, or
/// `ignored` for a stale or duplicate report.
pub(crate) fn results_applied(applied: &[Applied]) {
    for a in applied {
        let outcome = match a.new_status {
            Some(s) => s.as_str(),
            None => "ignored",
        };
        metrics::counter!("kairos_results_applied_total", "outcome" => outcome).increment(1);
    }
}

/// Reaper work: `action` is `lost`, `requeued`, `timed_out` or `forgotten`
/// (a gone worker's row deleted).
pub(crate) fn reaper(action: &'static str, n: u64) {
    if n > 0 {
        metrics::counter!("kairos_reaper_actions_total", "action" => action).increment(n);
    }
}

/// Workers by state as the leader sees them: `online` (heartbeating),
/// `draining`, `dead` (silent past the stale threshold or offline).
pub(crate) fn workers(online: usize, draining: usize, dead: usize) {
    metrics::gauge!("kairos_workers", "state" => "online").set(online as f64);
    metrics::gauge!("kairos_workers", "state" => "draining").set(draining as f64);
    metrics::gauge!("kairos_workers", "state" => "dead").set(dead as f64);
}

/// Sorts a worker into the three `kairos_workers` states.
pub(crate) fn worker_bucket(
    state: WorkerState,
    last_heartbeat_at: Millis,
    now: Millis,
    stale_ms: i64,
) -> &'static str {
    if state == WorkerState::Offline || now - last_heartbeat_at > stale_ms {
        "dead"
    } else if state == WorkerState::Draining {
        "draining"
    } else {
        "online"
    }
}
