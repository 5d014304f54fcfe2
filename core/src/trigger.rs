//! What a due trigger becomes: the pure decisions behind the dispatcher's
//! claims (misfire policy, fixed rate and delay, the end of a window) and
//! behind the store's claim transaction (overlap policy, misfire `skip`).
//!
//! The dispatcher turns due jobs into [`Claim`]s with [`claims_for`]; the
//! store applies them, asking [`resolve`] what each claimed trigger of one job
//! becomes once it knows whether an earlier execution is still live.

use crate::job::Job;
use crate::schedule::{MisfirePolicy, OverlapPolicy, Schedule};
use crate::store::Claim;
use crate::time::Millis;
use std::sync::Arc;

/// A trigger due longer ago than this is a misfire: it was missed while no
/// dispatcher ran, and the job's misfire policy decides what happens. Below
/// it, a late trigger is simply late and fires like any other: 5 s covers a
/// leader failover's scan pause and a slow claim round, but not an outage.
pub const MISFIRE_THRESHOLD_MS: i64 = 5_000;

/// Most executions one `fireAll` job catches up on in one claim round; the
/// rest follow in the next rounds, so one long outage cannot make a claim
/// transaction unbounded.
pub const FIRE_ALL_PER_JOB: usize = 100;

/// Most catch-up executions beyond the first per job in one claim round,
/// across all `fireAll` jobs of the batch.
pub const FIRE_ALL_PER_ROUND: usize = 1_000;

/// Whether a trigger due at `due` is a misfire at `now`.
pub fn is_misfire(due: Millis, now: Millis) -> bool {
    now.saturating_sub(due) > MISFIRE_THRESHOLD_MS
}

/// Whether the trigger due at `due` is dropped without an execution: a
/// misfire of a job whose policy is `skip`. The store and [`claims_for`] both
/// ask, with the same `now`.
pub fn misfire_skips(schedule: &Schedule, due: Millis, now: Millis) -> bool {
    schedule
        .recurrence()
        .is_some_and(|r| r.misfire == MisfirePolicy::Skip && is_misfire(due, now))
}

/// The claims for a batch of due jobs at `now`, each with a fresh execution
/// id. A job yields one claim, or several consecutive ones (sharing its
/// version) when its policy is `fireAll`; the last claim of a job carries the
/// job's next trigger (`None` when none is left, or for a fixed delay, whose
/// next trigger is written when the execution ends).
pub fn claims_for(due: impl IntoIterator<Item = Job>, now: Millis) -> Vec<Claim> {
    let mut budget = FIRE_ALL_PER_ROUND;
    let due = due.into_iter();
    let mut out = Vec::with_capacity(due.size_hint().0);
    for job in due {
        let Some(at) = job.next_trigger_at else {
            continue;
        };
        let job = Arc::new(job);
        for (scheduled_at, next) in due_triggers(&job.schedule, at, now, &mut budget) {
            out.push(Claim {
                job: job.clone(),
                scheduled_at,
                next_trigger_at: next,
                execution_id: uuid::Uuid::now_v7().to_string(),
                worker_id: None,
                shard: crate::shard::Shard::SINGLE,
            });
        }
    }
    out
}

/// The triggers a schedule whose trigger due at `at` fires at `now`, each
/// as its due time and the trigger that follows it, by the misfire policy:
/// one, or several consecutive ones under `fireAll` (taken from `budget`,
/// the round's catch-up allowance beyond the first per schedule). The last
/// one's follower is the schedule's next trigger: `None` when none is left,
/// or for a fixed delay, whose next trigger is written when the execution
/// (or workflow run) ends. Jobs ([`claims_for`]) and scheduled workflows
/// both fire through it.
pub fn due_triggers(
    schedule: &Schedule,
    at: Millis,
    now: Millis,
    budget: &mut usize,
) -> Vec<(Millis, Option<Millis>)> {
    let Some(rec) = schedule.recurrence() else {
        return vec![(at, None)];
    };
    // A stored rule that no longer parses fires this trigger and stops.
    let Ok(timeline) = rec.timeline() else {
        return vec![(at, None)];
    };
    let next = if !is_misfire(at, now) {
        timeline.after(at)
    } else if timeline.is_delay() {
        // One trigger is pending at most; `skip` restarts the delay now.
        (rec.misfire == MisfirePolicy::Skip)
            .then(|| timeline.after_finish(now))
            .flatten()
    } else if rec.misfire == MisfirePolicy::FireAll {
        let mut out = Vec::new();
        let mut t = at;
        let mut extra = 0;
        loop {
            let following = timeline.after(t);
            let more = following.filter(|f| *f <= now);
            match more {
                Some(f) if extra < FIRE_ALL_PER_JOB - 1 && *budget > 0 => {
                    out.push((t, Some(f)));
                    extra += 1;
                    *budget -= 1;
                    t = f;
                }
                _ => {
                    out.push((t, following));
                    return out;
                }
            }
        }
    } else {
        timeline.at_or_after(now, at)
    };
    vec![(at, next)]
}

/// What one claimed trigger becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// An execution is created and published.
    Dispatch,
    /// Recorded as a `skipped` execution (overlap policy), with this reason.
    Skipped(&'static str),
    /// Dropped without an execution (misfire policy `skip`).
    Dropped,
}

/// What the claim does to the job itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobMove {
    /// Something was dispatched: the job is `running`.
    Run,
    /// Nothing new runs; the job keeps its state (only its next trigger moves).
    Keep,
    /// Nothing new runs, nothing is live and no trigger is left: the job is
    /// done (`succeeded`).
    Complete,
}

/// The decision for one job's claimed triggers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// One fate per trigger, in the order given.
    pub fates: Vec<Fate>,
    /// Whether the job's live executions are asked to stop (`replace`).
    pub stop_live: bool,
    /// The job's move.
    pub job: JobMove,
}

/// Reason recorded on a trigger skipped because an earlier one still runs.
pub const SKIPPED_OVERLAP: &str =
    "skipped: an earlier execution of this job is still running (overlapPolicy forbid)";
/// Reason recorded on a caught-up trigger superseded by a newer one in the same round.
pub const SKIPPED_REPLACED: &str =
    "skipped: superseded by a newer trigger of this job (overlapPolicy replace)";

/// Decides what the claimed triggers of one job (due times ascending) become,
/// given whether the job had a live execution before this claim and whether a
/// trigger is left after them.
pub fn resolve(
    schedule: &Schedule,
    due: &[Millis],
    live_before: bool,
    next_left: bool,
    now: Millis,
) -> Resolution {
    let overlap = schedule
        .recurrence()
        .map_or(OverlapPolicy::Allow, |r| r.overlap);
    let mut fates: Vec<Fate> = due
        .iter()
        .map(|&at| {
            if misfire_skips(schedule, at, now) {
                Fate::Dropped
            } else {
                Fate::Dispatch
            }
        })
        .collect();
    let mut stop_live = false;
    match overlap {
        OverlapPolicy::Allow => {}
        OverlapPolicy::Forbid => {
            let mut live = live_before;
            for f in fates.iter_mut().filter(|f| **f == Fate::Dispatch) {
                if live {
                    *f = Fate::Skipped(SKIPPED_OVERLAP);
                }
                live = true;
            }
        }
        OverlapPolicy::Replace => {
            let last = fates.iter().rposition(|f| *f == Fate::Dispatch);
            if let Some(last) = last {
                for f in fates[..last].iter_mut().filter(|f| **f == Fate::Dispatch) {
                    *f = Fate::Skipped(SKIPPED_REPLACED);
                }
                stop_live = live_before;
            }
        }
    }
    let dispatched = fates.contains(&Fate::Dispatch);
    let job = if dispatched {
        JobMove::Run
    } else if !next_left && !live_before {
        JobMove::Complete
    } else {
        JobMove::Keep
    };
    Resolution {
        fates,
        stop_live,
        job,
    }
}

/// A job's next trigger after its schedule was changed at `now` (`PATCH`):
/// a one-shot's due time; a recurring job's first trigger at or after `now`
/// (on the fixed-rate grid of a job created at `created_at`), or `None` if
/// the window has none left, or for a fixed delay while an execution is
/// live (its end writes the next trigger).
pub fn rescheduled(
    schedule: &Schedule,
    now: Millis,
    created_at: Millis,
    live: bool,
) -> Option<Millis> {
    match schedule {
        Schedule::Once { at } => Some(*at),
        Schedule::Recurring(r) => {
            let timeline = r.timeline().ok()?;
            if timeline.is_delay() && live {
                None
            } else {
                timeline.at_or_after(now, created_at)
            }
        }
    }
}

#[cfg(test)]
mod tests;
