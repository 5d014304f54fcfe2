//! Which attempts a live worker no longer holds: pure decisions behind the
//! dispatcher's recovery of a restarted worker's work and its reconciliation
//! of what the database gives a worker against what the worker reports.
//!
//! Two rules, each about attempts the database says worker `W` holds
//! (`dispatched` or `running` on `W`):
//!
//! - [`superseded`]: `W` came back as a new process (incarnation). What the
//!   previous one had started is gone with it, and what it had taken but not
//!   started may sit behind its attempt keys: recovered at once.
//! - [`missing`]: `W`'s heartbeat lists what it holds (running and buffered).
//!   An attempt dispatched or started at least a grace period before the
//!   heartbeat was taken and not listed is unknown to `W`. [`Suspects`] asks
//!   for it to be missing from two heartbeats a grace period apart before it
//!   is recovered, so a result still on its way is not mistaken for a loss.

use crate::execution::ExecStatus;
use crate::store::{HeldAttempt, WorkerLedger};
use crate::time::Millis;
use std::collections::{HashMap, HashSet};

/// Attempts held by a process of the worker that a later one replaced: the
/// ones it started (`running` under a retired incarnation), and the
/// unstarted ones dispatched before the current process appeared (the old
/// one may have taken their attempt keys).
pub fn superseded<'a>(ledger: &WorkerLedger, inflight: &'a [HeldAttempt]) -> Vec<&'a HeldAttempt> {
    if ledger.retired.is_empty() {
        return Vec::new();
    }
    let retired: HashSet<&str> = ledger.retired.iter().map(String::as_str).collect();
    inflight
        .iter()
        .filter(|h| match h.status {
            ExecStatus::Running => h
                .incarnation
                .as_deref()
                .is_some_and(|i| retired.contains(i)),
            ExecStatus::Dispatched => match (h.dispatched_at, ledger.current_since) {
                (Some(at), Some(since)) => at < since,
                _ => false,
            },
            _ => false,
        })
        .collect()
}

/// Attempts the worker's latest heartbeat does not list although they were
/// dispatched (and, if started, started) at least `grace_ms` before it was
/// taken. Nothing for a worker that does not report what it holds.
pub fn missing<'a>(
    ledger: &WorkerLedger,
    inflight: &'a [HeldAttempt],
    grace_ms: i64,
) -> Vec<&'a HeldAttempt> {
    let Some(held) = &ledger.held else {
        return Vec::new();
    };
    let held: HashSet<(&str, u32)> = held
        .iter()
        .map(|h| (h.execution_id.as_str(), h.attempt))
        .collect();
    inflight
        .iter()
        .filter(|h| !held.contains(&(h.execution_id.as_str(), h.attempt)))
        .filter(|h| {
            let since = h.started_at.max(h.dispatched_at);
            since.is_some_and(|at| at.saturating_add(grace_ms) <= ledger.beat_at)
        })
        .collect()
}

/// Attempts seen missing, per worker, with the heartbeat time they were
/// first seen missing at. Kept in memory by each dispatcher's reaper: losing
/// it only delays a recovery by one grace period.
#[derive(Debug, Default)]
pub struct Suspects {
    first_missing: HashMap<String, HashMap<(String, u32), Millis>>,
}

impl Suspects {
    /// Records which attempts of `worker_id` the heartbeat taken at `beat_at`
    /// does not list, forgets the ones it lists again, and returns those
    /// missing from heartbeats at least `grace_ms` apart: the ones to recover.
    pub fn observe(
        &mut self,
        worker_id: &str,
        missing: &[(String, u32)],
        beat_at: Millis,
        grace_ms: i64,
    ) -> Vec<(String, u32)> {
        let seen = self.first_missing.entry(worker_id.to_string()).or_default();
        let now_missing: HashSet<&(String, u32)> = missing.iter().collect();
        seen.retain(|k, _| now_missing.contains(k));
        let mut due = Vec::new();
        for m in missing {
            let first = *seen.entry(m.clone()).or_insert(beat_at);
            if beat_at.saturating_sub(first) >= grace_ms {
                due.push(m.clone());
            }
        }
        for d in &due {
            seen.remove(d);
        }
        if seen.is_empty() {
            self.first_missing.remove(worker_id);
        }
        due
    }

    /// Forgets a worker (declared dead, or nothing in flight on it).
    pub fn forget(&mut self, worker_id: &str) {
        self.first_missing.remove(worker_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::HeldRef;

    fn held(id: &str, status: ExecStatus, inc: Option<&str>, at: Millis) -> HeldAttempt {
        HeldAttempt {
            execution_id: id.into(),
            attempt: 1,
            status,
            incarnation: inc.map(str::to_string),
            dispatched_at: Some(at),
            started_at: (status == ExecStatus::Running).then_some(at + 1),
        }
    }

    fn ledger(retired: &[&str], listed: Option<&[&str]>, beat_at: Millis) -> WorkerLedger {
        WorkerLedger {
            worker_id: "w".into(),
            current: Some("new".into()),
            current_since: Some(1_000),
            retired: retired.iter().map(|s| s.to_string()).collect(),
            held: listed.map(|l| {
                l.iter()
                    .map(|id| HeldRef {
                        execution_id: id.to_string(),
                        attempt: 1,
                    })
                    .collect()
            }),
            beat_at,
            state: crate::worker::WorkerState::Online,
        }
    }

    fn ids(found: Vec<&HeldAttempt>) -> Vec<&str> {
        found.iter().map(|h| h.execution_id.as_str()).collect()
    }

    #[test]
    fn a_replaced_process_gives_up_what_it_started_and_what_was_sent_to_it() {
        let inflight = [
            held("old-run", ExecStatus::Running, Some("old"), 500),
            held("new-run", ExecStatus::Running, Some("new"), 1_200),
            held("legacy-run", ExecStatus::Running, None, 500),
            held("sent-before", ExecStatus::Dispatched, None, 900),
            held("sent-after", ExecStatus::Dispatched, None, 1_100),
        ];
        let l = ledger(&["old"], None, 2_000);
        assert_eq!(ids(superseded(&l, &inflight)), ["old-run", "sent-before"]);
        // No process was replaced: nothing to recover.
        assert!(superseded(&ledger(&[], None, 2_000), &inflight).is_empty());
    }

    #[test]
    fn only_attempts_older_than_the_grace_can_be_missing() {
        let inflight = [
            held("listed", ExecStatus::Running, Some("new"), 1_000),
            held("gone", ExecStatus::Running, Some("new"), 1_000),
            held("just-sent", ExecStatus::Dispatched, None, 9_000),
        ];
        let l = ledger(&[], Some(&["listed"]), 10_000);
        assert_eq!(ids(missing(&l, &inflight, 2_000)), ["gone"]);
        // A worker that does not report what it holds is not reconciled.
        assert!(missing(&ledger(&[], None, 10_000), &inflight, 2_000).is_empty());
    }

    #[test]
    fn suspects_are_recovered_only_when_missing_for_the_grace() {
        let mut s = Suspects::default();
        let e = |id: &str| (id.to_string(), 1);
        assert!(s.observe("w", &[e("a"), e("b")], 10_000, 3_000).is_empty());
        // `b` is listed again: forgotten. `a` is still missing, not for long enough.
        assert!(s.observe("w", &[e("a")], 12_000, 3_000).is_empty());
        assert_eq!(s.observe("w", &[e("a"), e("b")], 13_000, 3_000), [e("a")]);
        // `b` restarted its clock at 13 000.
        assert!(s.observe("w", &[e("b")], 15_000, 3_000).is_empty());
        assert_eq!(s.observe("w", &[e("b")], 16_000, 3_000), [e("b")]);
        s.forget("w");
        assert!(s.observe("w", &[e("c")], 30_000, 3_000).is_empty());
    }
}
