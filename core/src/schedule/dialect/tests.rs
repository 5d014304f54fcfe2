//! The dialect translation: Quartz fields read as Quartz reads them, and the
//! refusal of an expression whose dialect matters but was not named.

use super::*;
use crate::schedule::{Rule, Schedule};
use crate::time::{Millis, parse_rfc3339};

fn ms(s: &str) -> Millis {
    parse_rfc3339(s).unwrap()
}

/// The first `n` triggers of `expr` in `dialect` (UTC) from `from`.
fn fires(dialect: CronDialect, expr: &str, from: &str, n: usize) -> Vec<Millis> {
    let s = Schedule::cron_in(dialect, expr, "UTC");
    let mut at = s.first_trigger(ms(from)).unwrap();
    let mut out = vec![at];
    while out.len() < n {
        at = s.next_trigger(at, at).unwrap();
        out.push(at);
    }
    out
}

fn quartz(expr: &str, from: &str, n: usize) -> Vec<Millis> {
    fires(CronDialect::Quartz, expr, from, n)
}

fn all(times: &[&str]) -> Vec<Millis> {
    times.iter().map(|t| ms(t)).collect()
}

// 2026-01-01 is a Thursday.
const NEW_YEAR: &str = "2026-01-01T00:00:00Z";

#[test]
fn quartz_day_of_week_two_is_monday_with_or_without_a_year_field() {
    let mondays = all(&[
        "2026-01-05T02:00:00Z",
        "2026-01-12T02:00:00Z",
        "2026-01-19T02:00:00Z",
    ]);
    assert_eq!(quartz("0 0 2 ? * 2 *", NEW_YEAR, 3), mondays);
    assert_eq!(quartz("0 0 2 ? * 2", NEW_YEAR, 3), mondays);
    assert_eq!(quartz("0 0 2 ? * MON", NEW_YEAR, 3), mondays);
    // The standard reading of the same fields: Tuesdays.
    assert_eq!(
        fires(CronDialect::Standard, "0 0 2 ? * 2", NEW_YEAR, 1),
        all(&["2026-01-06T02:00:00Z"])
    );
}

#[test]
fn quartz_days_of_week_run_one_to_seven_from_sunday() {
    assert_eq!(
        quartz("0 0 2 ? * 1", NEW_YEAR, 1),
        all(&["2026-01-04T02:00:00Z"])
    );
    assert_eq!(
        quartz("0 0 2 ? * 7", NEW_YEAR, 1),
        all(&["2026-01-03T02:00:00Z"])
    );
    assert_eq!(
        quartz("0 0 2 ? * 2-6", NEW_YEAR, 2),
        all(&["2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"])
    );
    assert_eq!(
        quartz("0 0 2 ? * SAT,SUN", NEW_YEAR, 2),
        all(&["2026-01-03T02:00:00Z", "2026-01-04T02:00:00Z"])
    );
}

#[test]
fn quartz_last_nearest_weekday_and_nth() {
    // Last day of the month.
    assert_eq!(
        quartz("0 0 2 L * ?", NEW_YEAR, 2),
        all(&["2026-01-31T02:00:00Z", "2026-02-28T02:00:00Z"])
    );
    // The weekday nearest the 15th: 2026-02-15 is a Sunday, so Monday 16th.
    assert_eq!(
        quartz("0 0 2 15W * ?", "2026-02-01T00:00:00Z", 1),
        all(&["2026-02-16T02:00:00Z"])
    );
    // 6#3: the third Friday (6 = FRI in Quartz); 6L: the last Friday.
    assert_eq!(
        quartz("0 0 2 ? * 6#3", NEW_YEAR, 1),
        all(&["2026-01-16T02:00:00Z"])
    );
    assert_eq!(
        quartz("0 0 2 ? * 6L", NEW_YEAR, 1),
        all(&["2026-01-30T02:00:00Z"])
    );
}

#[test]
fn quartz_year_field_bounds_the_triggers() {
    let s = Schedule::cron_in(CronDialect::Quartz, "0 0 2 1 1 ? 2028", "UTC");
    let first = s.first_trigger(ms(NEW_YEAR)).unwrap();
    assert_eq!(first, ms("2028-01-01T02:00:00Z"));
    assert_eq!(s.next_trigger(first, first), None);
    assert_eq!(
        quartz("0 0 2 1 1 ? 2027-2028", NEW_YEAR, 2),
        all(&["2027-01-01T02:00:00Z", "2028-01-01T02:00:00Z"])
    );
    let past = Schedule::cron_in(CronDialect::Quartz, "0 0 2 1 1 ? 2020", "UTC");
    assert!(matches!(
        past.first_trigger(ms(NEW_YEAR)),
        Err(ScheduleError::NeverFires(_))
    ));
}

#[test]
fn quartz_refuses_what_quartz_refuses() {
    for expr in [
        "0 2 * * 1",          // no seconds
        "0 0 2 * * 2",        // no `?`
        "0 0 2 ? * ?",        // `?` twice
        "0 0 2 ? * 2 * 1",    // eight fields
        "0 0 2 ? * 2 twenty", // not a year
    ] {
        assert!(
            matches!(
                CronDialect::Quartz.compile(expr),
                Err(ScheduleError::InvalidCron { .. })
            ),
            "{expr}"
        );
    }
}

#[test]
fn standard_reading_is_unchanged() {
    assert!(CronDialect::Standard.compile("0 0 2 ? * 2 *").is_err());
    assert_eq!(
        fires(CronDialect::Standard, "0 2 * * 0,7", NEW_YEAR, 1),
        all(&["2026-01-04T02:00:00Z"])
    );
}

#[test]
fn readings_in_words() {
    assert_eq!(
        CronDialect::Quartz.describe("0 0 2 ? * 2 *").unwrap(),
        "at 02:00, on Monday"
    );
    assert_eq!(
        CronDialect::Standard.describe("0 0 2 ? * 2").unwrap(),
        "at 02:00, on Tuesday"
    );
}

#[test]
fn an_unnamed_dialect_is_refused_only_when_it_changes_the_reading() {
    let a = ambiguity("0 0 2 ? * 2").unwrap();
    assert_eq!(a.standard.as_deref(), Ok("at 02:00, on Tuesday"));
    assert_eq!(a.quartz, "at 02:00, on Monday");
    let text = a.to_string();
    assert!(
        text.contains("as standard cron: at 02:00, on Tuesday"),
        "{text}"
    );
    assert!(text.contains("as Quartz: at 02:00, on Monday"), "{text}");
    assert!(text.contains("set cronDialect"), "{text}");

    // Seven fields: standard cron refuses it, Quartz reads Mondays.
    let a = ambiguity("0 0 2 ? * 2 *").unwrap();
    assert!(a.standard.is_err());
    assert_eq!(a.quartz, "at 02:00, on Monday");

    for same in [
        "0 0 2 ? * MON",  // names read the same
        "0 0 2 ? * *",    // every day in both
        "0 0 2 15 * ?",   // no day of the week
        "0 0 2 * * 2",    // not Quartz (no `?`): standard only
        "*/5 * * * *",    // crontab
        "0 30 9 * * 1-5", // six-field standard without `?`
        "nonsense",
    ] {
        assert_eq!(ambiguity(same), None, "{same}");
    }
}

#[test]
fn dialect_is_serialized_only_when_not_standard() {
    let standard: Rule =
        serde_json::from_str(r#"{"rule":"cron","expr":"* * * * *","tz":"UTC"}"#).unwrap();
    assert!(matches!(
        standard,
        Rule::Cron {
            dialect: CronDialect::Standard,
            ..
        }
    ));
    assert!(
        !serde_json::to_string(&standard)
            .unwrap()
            .contains("dialect")
    );
    let q = Rule::Cron {
        expr: "0 0 2 ? * 2".into(),
        tz: "UTC".into(),
        dialect: CronDialect::Quartz,
    };
    let json = serde_json::to_string(&q).unwrap();
    assert!(json.contains(r#""dialect":"quartz""#), "{json}");
    assert_eq!(serde_json::from_str::<Rule>(&json).unwrap(), q);
}

#[test]
fn names_round_trip() {
    for d in CronDialect::ALL {
        assert_eq!(CronDialect::parse(d.as_str()), Some(d));
    }
    assert_eq!(CronDialect::parse("Quartz"), None);
}
