//! When a failed attempt is retried: the exponential schedule (computed by
//! `backon`), the receiver's `Retry-After`, and when to give up.
//!
//! Everything here is a pure function of the attempt number and the times
//! passed in, because the schedule must survive restarts: the relay keeps no
//! state between attempts, only the stored attempt count and creation time.

use crate::config::BackoffPolicy;
use backon::{BackoffBuilder, ExponentialBuilder};
use kairos_core::store::CallbackNext;
use kairos_core::time::Millis;
use std::time::Duration;

/// `backon` yields successive delays; stepping further than this gains nothing
/// (every realistic schedule has reached its cap) and bounds the work.
const MAX_STEPS: u32 = 1_000;

/// Delay after failed attempt `attempt` (1-based).
///
/// Without jitter: `min(base · factor^(attempt-1), cap)`. With jitter,
/// `backon` adds up to 100 % to a nominal delay that is capped at `cap / 2`,
/// so the result lies in `[d, 2d)` with `d = min(base · factor^(attempt-1),
/// cap / 2)` — spread out even at the cap, and never above it.
pub fn delay(policy: &BackoffPolicy, attempt: u32) -> Duration {
    let mut builder = ExponentialBuilder::new()
        .with_min_delay(policy.base)
        .with_factor(policy.factor)
        .without_max_times();
    builder = if policy.jitter {
        builder.with_jitter().with_max_delay(policy.cap / 2)
    } else {
        builder.with_max_delay(policy.cap)
    };
    let step = attempt.clamp(1, MAX_STEPS) - 1;
    builder
        .build()
        .nth(step as usize)
        .unwrap_or(policy.cap)
        .min(policy.cap)
}

/// What follows failed attempt `attempt` of a callback created at
/// `created_at`, failing at `now`. `retry_after` is the receiver's
/// `Retry-After` (429/503), honoured up to the cap in place of the schedule.
/// A retry that would fall later than `give_up_after` past `created_at` is not
/// scheduled: the callback is dead.
pub fn after_failure(
    policy: &BackoffPolicy,
    attempt: u32,
    created_at: Millis,
    now: Millis,
    retry_after: Option<Duration>,
) -> CallbackNext {
    let wait = match retry_after {
        Some(asked) => asked.min(policy.cap),
        None => delay(policy, attempt),
    };
    let at = now.saturating_add(millis(wait));
    if at > created_at.saturating_add(millis(policy.give_up_after)) {
        CallbackNext::Dead
    } else {
        CallbackNext::RetryAt(at)
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Parses a `Retry-After` value: delta seconds, or an HTTP date (IMF-fixdate,
/// which RFC 2822 parsing accepts) relative to `now`. A date in the past means
/// "now". `None` if it is neither.
pub fn parse_retry_after(value: &str, now: Millis) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    let at = chrono::DateTime::parse_from_rfc2822(value)
        .ok()?
        .timestamp_millis();
    Some(Duration::from_millis(
        u64::try_from(at.saturating_sub(now)).unwrap_or(0),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn nominal(p: &BackoffPolicy, attempt: u32) -> Duration {
        let grown = p.base.as_secs_f64() * f64::from(p.factor).powi(attempt as i32 - 1);
        Duration::from_secs_f64(grown.min(p.cap.as_secs_f64()))
    }

    /// Allows for backon computing in f32.
    fn close_or_above(d: Duration, low: Duration) -> bool {
        d + Duration::from_millis(2) >= low
    }

    #[test]
    fn without_jitter_the_schedule_doubles_up_to_the_cap() {
        let p = BackoffPolicy {
            jitter: false,
            ..BackoffPolicy::default()
        };
        let got: Vec<u64> = (1..=14).map(|a| delay(&p, a).as_secs()).collect();
        assert_eq!(
            got,
            [
                1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3600, 3600
            ]
        );
        assert_eq!(delay(&p, u32::MAX), p.cap);
    }

    #[test]
    fn jittered_delays_stay_within_their_bounds() {
        let p = BackoffPolicy::default();
        for attempt in 1..=40 {
            let d = nominal(&p, attempt).min(p.cap / 2);
            for _ in 0..50 {
                let got = delay(&p, attempt);
                assert!(close_or_above(got, d), "attempt {attempt}: {got:?} < {d:?}");
                assert!(
                    got <= (d * 2).min(p.cap),
                    "attempt {attempt}: {got:?} > 2×{d:?}"
                );
            }
        }
    }

    #[test]
    fn jitter_spreads_retries() {
        let p = BackoffPolicy::default();
        let samples: std::collections::HashSet<Duration> = (0..20).map(|_| delay(&p, 5)).collect();
        assert!(samples.len() > 1, "jitter produced identical delays");
    }

    #[test]
    fn a_whole_schedule_stays_within_bounds_and_gives_up() {
        let p = BackoffPolicy::default();
        let created = 1_767_225_600_000;
        let deadline = created + millis(p.give_up_after);
        let mut now = created;
        let mut attempt = 1;
        loop {
            match after_failure(&p, attempt, created, now, None) {
                CallbackNext::RetryAt(at) => {
                    let waited = Duration::from_millis((at - now) as u64);
                    let d = nominal(&p, attempt).min(p.cap / 2);
                    assert!(close_or_above(waited, d) && waited <= p.cap);
                    assert!(at <= deadline);
                    now = at;
                    attempt += 1;
                }
                CallbackNext::Dead => break,
                CallbackNext::Delivered => unreachable!(),
            }
        }
        // Capped at an hour, 24 hours hold a few dozen attempts, not hundreds.
        assert!((20..80).contains(&attempt), "{attempt} attempts");
        assert!(deadline - now < millis(p.cap));
    }

    #[test]
    fn retry_after_is_honoured_within_the_cap() {
        let p = BackoffPolicy::default();
        let now = 1_000_000;
        assert_eq!(
            after_failure(&p, 1, now, now, Some(SEC * 30)),
            CallbackNext::RetryAt(now + 30_000)
        );
        assert_eq!(
            after_failure(&p, 1, now, now, Some(SEC * 86_400)),
            CallbackNext::RetryAt(now + 3_600_000)
        );
    }

    #[test]
    fn no_retry_past_the_give_up_time() {
        let p = BackoffPolicy::default();
        let created = 0;
        let late = millis(p.give_up_after) - 500;
        assert_eq!(
            after_failure(&p, 30, created, late, None),
            CallbackNext::Dead
        );
    }

    #[test]
    fn retry_after_forms() {
        let now = chrono::DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .unwrap()
            .timestamp_millis();
        assert_eq!(parse_retry_after("120", now), Some(SEC * 120));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", now),
            Some(SEC * 120)
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
    }
}
