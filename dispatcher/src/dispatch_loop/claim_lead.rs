//! The claim lead: how long before their due time the leader claims
//! triggers. `claim_ahead` normally, and more when many are due at once, so a
//! burst is claimed by the time it is due instead of for seconds after.
//!
//! Claims are serial (one transaction per batch on the leader), so a burst
//! of N triggers due at one instant takes N times the claim cost per trigger
//! to claim. The leader measures that cost on its own rounds, counts a burst
//! it sees coming (through the due index, capped), and starts claiming it
//! that long ahead, with a margin, never more than the look-ahead window it
//! can see. Claimed work still waits in memory and is published at its due
//! time: claiming early moves the database's work off the due instant, not
//! the job's.

use kairos_core::time::Millis;
use std::time::Duration;

/// First guess of the claim cost per trigger (µs), before a round is measured.
const INITIAL_COST_US: f64 = 100.0;
/// Rounds smaller than this say more about a transaction's fixed cost than
/// about the cost per trigger, and are not measured.
const MIN_MEASURED: usize = 50;
/// Weight of the newest measurement in the running average.
const SMOOTHING: f64 = 0.2;
/// Margin over the measured cost: claims slow down while other writes run.
const MARGIN: f64 = 1.5;

/// The leader's claim lead, adjusted to what is due.
#[derive(Debug, Clone)]
pub(crate) struct ClaimLead {
    base: Millis,
    max: Millis,
    cost_us: f64,
    current: Millis,
}

impl ClaimLead {
    /// `base` is the usual lead (`claim_ahead`); `max` bounds it (the look-ahead).
    pub(crate) fn new(base: Duration, max: Duration) -> Self {
        let base = millis(base);
        Self {
            base,
            max: millis(max).max(base),
            cost_us: INITIAL_COST_US,
            current: base,
        }
    }

    /// The lead in force: claim what is due before now plus this.
    pub(crate) fn current(&self) -> Millis {
        self.current
    }

    /// Learns from a claim round that claimed `claimed` triggers in `took`.
    pub(crate) fn measured(&mut self, claimed: usize, took: Duration) {
        if claimed < MIN_MEASURED {
            return;
        }
        let cost = took.as_secs_f64() * 1e6 / claimed as f64;
        self.cost_us += SMOOTHING * (cost - self.cost_us);
    }

    /// The most triggers worth counting: beyond this the lead is `max` anyway.
    pub(crate) fn count_cap(&self) -> u32 {
        let span_us = (self.max - self.base) as f64 * 1000.0;
        (span_us / (self.cost_us * MARGIN))
            .ceil()
            .clamp(1.0, f64::from(u32::MAX)) as u32
    }

    /// Sets the lead for a burst of `due` triggers ahead.
    pub(crate) fn plan(&mut self, due: u32) {
        let extra_ms = (f64::from(due) * self.cost_us * MARGIN / 1000.0).ceil() as Millis;
        self.current = self.base.saturating_add(extra_ms).min(self.max);
    }

    /// Back to the usual lead once the backlog is claimed.
    pub(crate) fn relax(&mut self) {
        self.current = self.base;
    }
}

fn millis(d: Duration) -> Millis {
    Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_lead() -> ClaimLead {
        ClaimLead::new(Duration::from_millis(100), Duration::from_secs(5))
    }

    #[test]
    fn a_burst_is_claimed_ahead_by_its_measured_cost_with_a_margin() {
        let mut l = claim_lead();
        for _ in 0..100 {
            // 500 triggers in 20 ms: 40 µs each.
            l.measured(500, Duration::from_millis(20));
        }
        l.plan(20_000);
        // 20,000 × 40 µs × 1.5 = 1.2 s, on top of the usual 100 ms.
        assert!((1_290..=1_310).contains(&l.current()), "{}", l.current());
        l.relax();
        assert_eq!(l.current(), 100);
    }

    #[test]
    fn the_lead_never_exceeds_what_the_leader_can_see() {
        let mut l = claim_lead();
        l.plan(u32::MAX);
        assert_eq!(l.current(), 5_000);
        // With 100 µs a trigger, 4.9 s of extra lead is 32,667 triggers.
        assert_eq!(l.count_cap(), 32_667);
        let mut tiny = ClaimLead::new(Duration::from_secs(60), Duration::from_secs(2));
        tiny.plan(1_000_000);
        assert_eq!(tiny.current(), 60_000, "a base above the window is kept");
    }

    #[test]
    fn small_rounds_do_not_teach_the_cost() {
        let mut l = claim_lead();
        l.measured(3, Duration::from_millis(30));
        l.plan(1_000);
        assert_eq!(l.current(), 100 + 150);
    }
}
