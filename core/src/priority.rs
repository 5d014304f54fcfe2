//! Priorities and lanes: which due triggers the dispatcher claims first.
//!
//! A job's [`Priority`] (0–9, higher first, default 5) orders triggers that
//! are due at the same moment of a backlog: with more due than one claim
//! takes, the dispatcher claims the highest priorities first, oldest due
//! first within one priority. A trigger overdue by more than the
//! starvation bound is claimed before any priority, so bulk work is delayed,
//! never starved.
//!
//! The [`Lane`] separates work a caller is waiting for from work a schedule
//! made: a one-shot job due when it was created (no `runAt`, or one already
//! past) is `Immediate`, and the leader claims that lane in a loop of its
//! own, so a cron flood of any size never stands in front of it.

use crate::schedule::Schedule;
use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// How urgent a job is, 0 (lowest) to 9 (highest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Priority(u8);

impl Priority {
    /// The lowest priority.
    pub const MIN: Priority = Priority(0);
    /// The highest priority.
    pub const MAX: Priority = Priority(9);
    /// What a job gets when its creator says nothing: the middle, so bulk
    /// work can be marked below the rest as well as urgent work above it.
    pub const DEFAULT: Priority = Priority(5);

    /// Every priority, highest first: the order claims serve them in.
    pub fn highest_first() -> impl Iterator<Item = Priority> {
        (Self::MIN.0..=Self::MAX.0).rev().map(Priority)
    }

    /// `value` if it is 0–9.
    pub fn new(value: u8) -> Option<Priority> {
        (value <= Self::MAX.0).then_some(Priority(value))
    }

    /// The stored and shown number.
    pub fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl TryFrom<u8> for Priority {
    type Error = String;
    fn try_from(v: u8) -> Result<Self, Self::Error> {
        Priority::new(v).ok_or_else(|| format!("priority must be 0 to 9, got {v}"))
    }
}

impl From<Priority> for u8 {
    fn from(p: Priority) -> u8 {
        p.0
    }
}

/// Which claim loop serves a job's triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Lane {
    /// Triggers a schedule made (cron, fixed rate or delay, a one-shot's
    /// future `runAt`): the main claim loop, in priority order under a backlog.
    #[default]
    Scheduled,
    /// A one-shot due when it was created: someone is waiting for it. Its
    /// own claim loop serves it as soon as the API signals it.
    Immediate,
}

impl Lane {
    /// The lane of a job created at `created_at` with its first trigger at
    /// `first_due`.
    pub fn of_new(schedule: &Schedule, first_due: Millis, created_at: Millis) -> Lane {
        if schedule.recurrence().is_none() && first_due <= created_at {
            Lane::Immediate
        } else {
            Lane::Scheduled
        }
    }

    /// The stored number.
    pub fn code(self) -> u8 {
        match self {
            Lane::Scheduled => 0,
            Lane::Immediate => 1,
        }
    }

    /// The lane a stored number names (an unknown one is scheduled: the
    /// main loop claims everything eventually).
    pub fn from_code(code: u8) -> Lane {
        match code {
            1 => Lane::Immediate,
            _ => Lane::Scheduled,
        }
    }
}

/// How many delivery ranks a worker's queue orders by (see
/// [`delivery_rank`]): RabbitMQ's `x-max-priority` for worker queues.
pub const DELIVERY_RANKS: u8 = 2 * Priority::MAX.0 + 1;

/// The rank a worker's queue delivers a dispatch by, higher first: its
/// priority, and within one priority work someone waits for (`immediate`:
/// an immediate-lane job or a retry) before work a schedule made. Without
/// the half step, an immediate job dispatched during a flood of the same
/// priority would wait in the worker's queue behind every flood dispatch
/// published before it.
pub fn delivery_rank(priority: Priority, immediate: bool) -> u8 {
    2 * priority.0 + u8::from(immediate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_ranks_put_priority_first_and_immediate_work_within_it() {
        assert_eq!(delivery_rank(Priority::MIN, false), 0);
        assert_eq!(delivery_rank(Priority::MAX, true), DELIVERY_RANKS);
        assert!(delivery_rank(Priority(5), true) > delivery_rank(Priority(5), false));
        assert!(delivery_rank(Priority(6), false) > delivery_rank(Priority(5), true));
    }

    #[test]
    fn priorities_are_zero_to_nine_and_default_to_five() {
        assert_eq!(Priority::new(0), Some(Priority::MIN));
        assert_eq!(Priority::new(9), Some(Priority::MAX));
        assert_eq!(Priority::new(10), None);
        assert_eq!(Priority::default().get(), 5);
        let order: Vec<u8> = Priority::highest_first().map(Priority::get).collect();
        assert_eq!(order, vec![9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    }

    #[test]
    fn priority_deserializes_only_in_range() {
        let p: Priority = serde_json::from_str("7").unwrap();
        assert_eq!(p.get(), 7);
        let err = serde_json::from_str::<Priority>("12").unwrap_err();
        assert!(err.to_string().contains("0 to 9"), "{err}");
    }

    #[test]
    fn only_a_one_shot_due_at_creation_is_immediate() {
        let once = Schedule::Once { at: 1_000 };
        assert_eq!(Lane::of_new(&once, 1_000, 1_000), Lane::Immediate);
        assert_eq!(Lane::of_new(&once, 900, 1_000), Lane::Immediate);
        assert_eq!(Lane::of_new(&once, 1_001, 1_000), Lane::Scheduled);
        let cron = Schedule::Recurring(crate::schedule::Recurrence {
            rule: crate::schedule::Rule::Every { every_ms: 60_000 },
            start_at: None,
            end_at: None,
            misfire: Default::default(),
            overlap: Default::default(),
        });
        assert_eq!(Lane::of_new(&cron, 1_000, 1_000), Lane::Scheduled);
        for lane in [Lane::Scheduled, Lane::Immediate] {
            assert_eq!(Lane::from_code(lane.code()), lane);
        }
    }
}
