use super::*;
use crate::time::parse_rfc3339;

fn ms(s: &str) -> Millis {
    parse_rfc3339(s).unwrap()
}

fn timeline(s: &Schedule) -> Timeline {
    s.recurrence().unwrap().timeline().unwrap()
}

fn windowed(s: Schedule, start: Option<&str>, end: Option<&str>) -> Schedule {
    let Schedule::Recurring(mut r) = s else {
        panic!("recurring expected")
    };
    r.start_at = start.map(ms);
    r.end_at = end.map(ms);
    Schedule::Recurring(r)
}

#[test]
fn six_fields_fire_every_second() {
    let s = Schedule::cron("* * * * * *", "UTC");
    let t0 = ms("2026-03-01T10:00:00.250Z");
    let first = s.first_trigger(t0).unwrap();
    assert_eq!(first, ms("2026-03-01T10:00:01Z"));
    assert_eq!(
        s.next_trigger(first, first),
        Some(ms("2026-03-01T10:00:02Z"))
    );
}

#[test]
fn five_fields_mean_minutes() {
    let s = Schedule::cron("*/15 * * * *", "UTC");
    assert_eq!(
        s.first_trigger(ms("2026-03-01T10:01:00Z")).unwrap(),
        ms("2026-03-01T10:15:00Z")
    );
}

#[test]
fn a_due_time_exactly_now_fires_now() {
    let s = Schedule::cron("0 * * * * *", "UTC");
    let now = ms("2026-03-01T10:01:00Z");
    assert_eq!(s.first_trigger(now).unwrap(), now);
}

#[test]
fn time_zone_is_honoured() {
    let s = Schedule::cron("0 0 9 * * *", "Asia/Shanghai");
    assert_eq!(
        s.first_trigger(ms("2026-03-01T00:00:00Z")).unwrap(),
        ms("2026-03-01T01:00:00Z")
    );
}

#[test]
fn missed_triggers_collapse_into_one() {
    let s = Schedule::cron("* * * * * *", "UTC");
    let fired = ms("2026-03-01T10:00:00Z");
    let now = ms("2026-03-01T10:05:00.500Z");
    assert_eq!(s.next_trigger(fired, now), Some(ms("2026-03-01T10:05:01Z")));
}

#[test]
fn a_local_time_skipped_by_spring_forward_fires_once_after_the_gap() {
    // Europe/Berlin 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 never happens.
    let t = timeline(&Schedule::cron("0 30 2 * * *", "Europe/Berlin"));
    let day_before = ms("2026-03-28T01:30:00Z"); // 02:30 CET on the 28th
    let in_gap_day = t.after(day_before).unwrap();
    assert_eq!(in_gap_day, ms("2026-03-29T01:00:00Z"), "03:00 CEST, once");
    assert_eq!(
        t.after(in_gap_day),
        Some(ms("2026-03-30T00:30:00Z")),
        "then 02:30 CEST the next day, nothing else on the 29th"
    );
}

#[test]
fn a_local_time_repeated_by_fall_back_fires_once() {
    // Europe/Berlin 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    let t = timeline(&Schedule::cron("0 30 2 * * *", "Europe/Berlin"));
    let first = t.after(ms("2026-10-24T00:30:00Z")).unwrap();
    assert_eq!(first, ms("2026-10-25T00:30:00Z"), "02:30 CEST");
    assert_eq!(
        t.after(first),
        Some(ms("2026-10-26T01:30:00Z")),
        "not 02:30 CET on the 25th, but 02:30 CET on the 26th"
    );
    // Starting inside the repeated hour changes nothing.
    assert_eq!(
        t.at_or_after(ms("2026-10-25T01:10:00Z"), 0),
        Some(ms("2026-10-26T01:30:00Z"))
    );
}

#[test]
fn an_interval_expression_keeps_real_time_rhythm_through_fall_back() {
    let t = timeline(&Schedule::cron("0 */30 * * * *", "Europe/Berlin"));
    let mut at = ms("2026-10-24T23:30:00Z"); // 01:30 CEST
    let mut seen = Vec::new();
    for _ in 0..5 {
        at = t.after(at).unwrap();
        seen.push(at);
    }
    let half_hour = 30 * 60 * 1000;
    for pair in seen.windows(2) {
        assert_eq!(pair[1] - pair[0], half_hour, "{seen:?}");
    }
}

#[test]
fn fixed_rate_runs_on_a_grid_from_creation_or_start() {
    let created = ms("2026-03-01T10:00:00Z");
    let s = Schedule::every(60_000);
    assert_eq!(s.first_trigger_from(created, created).unwrap(), created);
    // Recomputed later (e.g. after a PATCH), it stays on the creation grid.
    assert_eq!(
        s.first_trigger_from(ms("2026-03-01T10:05:30Z"), created)
            .unwrap(),
        ms("2026-03-01T10:06:00Z")
    );
    let t = timeline(&s);
    assert_eq!(t.after(created), Some(created + 60_000));
    // fireOnce after a long outage: the next grid point after now.
    assert_eq!(
        s.next_trigger(created, ms("2026-03-01T11:00:00.001Z")),
        Some(ms("2026-03-01T11:01:00Z"))
    );

    let started = windowed(
        Schedule::every(1_000),
        Some("2026-03-01T10:00:00.500Z"),
        None,
    );
    assert_eq!(
        started.first_trigger_from(created, created).unwrap(),
        ms("2026-03-01T10:00:00.500Z"),
        "no trigger before startAt"
    );
    assert_eq!(
        started
            .first_trigger_from(ms("2026-03-01T10:00:02Z"), created)
            .unwrap(),
        ms("2026-03-01T10:00:02.500Z"),
        "startAt anchors the grid"
    );
}

#[test]
fn end_at_bounds_every_rule() {
    let now = ms("2026-03-01T10:00:00Z");
    let every = windowed(
        Schedule::every(1_000),
        None,
        Some("2026-03-01T10:00:01.500Z"),
    );
    let t = timeline(&every);
    assert_eq!(t.after(now), Some(now + 1_000));
    assert_eq!(t.after(now + 1_000), None, "10:00:02 is past endAt");

    let cron = windowed(
        Schedule::cron("0 0 * * * *", "UTC"),
        None,
        Some("2026-03-01T09:00:00Z"),
    );
    assert_eq!(cron.first_trigger(now), Err(ScheduleError::Ended));
    let never = Schedule::cron("0 0 0 30 2 *", "UTC");
    assert!(matches!(
        never.first_trigger(now),
        Err(ScheduleError::NeverFires(_))
    ));

    let delay = windowed(Schedule::delay(500), None, Some("2026-03-01T10:00:01Z"));
    let t = timeline(&delay);
    assert!(t.is_delay());
    assert_eq!(delay.first_trigger(now).unwrap(), now);
    assert_eq!(t.after(now), None, "a fixed delay waits for the end");
    assert_eq!(t.after_finish(now + 200), Some(now + 700));
    assert_eq!(t.after_finish(now + 600), None, "past endAt: the job ends");
}

#[test]
fn start_at_delays_the_first_trigger_of_every_rule() {
    let now = ms("2026-03-01T10:00:00Z");
    let start = "2026-03-02T00:00:00Z";
    let cron = windowed(Schedule::cron("0 0 */6 * * *", "UTC"), Some(start), None);
    assert_eq!(cron.first_trigger(now).unwrap(), ms(start));
    let delay = windowed(Schedule::delay(1_000), Some(start), None);
    assert_eq!(delay.first_trigger(now).unwrap(), ms(start));
}

#[test]
fn bad_input_is_named() {
    assert!(matches!(
        CronSchedule::parse("not a cron", "UTC", CronDialect::Standard),
        Err(ScheduleError::InvalidCron { .. })
    ));
    assert_eq!(
        CronSchedule::parse("* * * * *", "Mars/Olympus", CronDialect::Standard).unwrap_err(),
        ScheduleError::UnknownTimeZone("Mars/Olympus".into())
    );
    assert!(CronSchedule::parse("* * * * * * *", "UTC", CronDialect::Standard).is_err());
}

#[test]
fn one_shot_has_no_successor() {
    let s = Schedule::Once { at: 5 };
    assert_eq!(s.first_trigger(100).unwrap(), 5);
    assert_eq!(s.next_trigger(5, 100), None);
    assert!(!s.is_recurring());
    assert!(s.recurrence().is_none());
}

#[test]
fn policy_names_round_trip() {
    for p in MisfirePolicy::ALL {
        assert_eq!(MisfirePolicy::parse(p.as_str()), Some(p));
    }
    for p in OverlapPolicy::ALL {
        assert_eq!(OverlapPolicy::parse(p.as_str()), Some(p));
    }
    assert_eq!(MisfirePolicy::default(), MisfirePolicy::FireOnce);
    assert_eq!(OverlapPolicy::default(), OverlapPolicy::Allow);
    assert_eq!(MisfirePolicy::parse("fire_once"), None);
}
