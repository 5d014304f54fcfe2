//! Unit tests of the schedule fields of a create: the kinds, the window,
//! the policies and the fingerprint of the new fields.

use super::*;
use kairos_core::schedule::{Recurrence, Rule, Schedule};
use kairos_core::time::parse_rfc3339;

const NOW: Millis = 1_772_359_200_000; // 2026-03-01T10:00:00Z

fn build(body: Value) -> Result<NewJob, ApiError> {
    let mut v = json!({"jobName": "a", "jobHandler": "noop"});
    for (k, x) in body.as_object().unwrap() {
        v[k] = x.clone();
    }
    let req = crate::extract::parse_json(v.to_string().as_bytes()).unwrap();
    new_job(req, &ApiConfig::default(), "default", "id-1".into(), NOW)
}

fn refusal(body: Value) -> (&'static str, Option<String>) {
    let err = build(body).unwrap_err();
    (err.code(), err.field().map(str::to_string))
}

fn ms(s: &str) -> Millis {
    parse_rfc3339(s).unwrap()
}

#[test]
fn fixed_rate_and_fixed_delay_with_window_and_policies() {
    let job = build(json!({
        "everyMs": 1500, "startAt": "2026-03-01T11:00:00Z", "endAt": "2026-03-02T00:00:00Z",
        "misfirePolicy": "fireAll", "overlapPolicy": "forbid"
    }))
    .unwrap();
    let Schedule::Recurring(r) = &job.schedule else {
        panic!("recurring expected")
    };
    assert_eq!(r.rule, Rule::Every { every_ms: 1500 });
    assert_eq!(r.start_at, Some(ms("2026-03-01T11:00:00Z")));
    assert_eq!(r.end_at, Some(ms("2026-03-02T00:00:00Z")));
    assert_eq!(r.misfire.as_str(), "fireAll");
    assert_eq!(r.overlap.as_str(), "forbid");
    assert_eq!(job.next_trigger_at, ms("2026-03-01T11:00:00Z"));

    let job = build(json!({"delayMs": 250})).unwrap();
    assert_eq!(
        job.schedule,
        Schedule::Recurring(Recurrence::new(Rule::Delay { delay_ms: 250 }))
    );
    assert_eq!(job.next_trigger_at, NOW, "a fixed delay starts at once");
}

#[test]
fn schedule_fields_are_refused_naming_the_field() {
    let f = |s: &str| Some(s.to_string());
    let cases = [
        (json!({"cronExpr": "* * * * *", "everyMs": 1000}), "everyMs"),
        (json!({"everyMs": 1000, "delayMs": 1000}), "delayMs"),
        (
            json!({"everyMs": 1000, "triggerAt": "2026-03-01T10:00:00Z"}),
            "triggerAt",
        ),
        (json!({"everyMs": 99}), "everyMs"),
        (json!({"delayMs": 31_622_400_001_i64}), "delayMs"),
        (json!({"startAt": "2026-03-01T10:00:00Z"}), "startAt"),
        (json!({"misfirePolicy": "skip"}), "misfirePolicy"),
        (json!({"overlapPolicy": "forbid"}), "overlapPolicy"),
        (
            json!({"everyMs": 1000, "misfirePolicy": "fire_once"}),
            "misfirePolicy",
        ),
        (
            json!({"everyMs": 1000, "overlapPolicy": "Allow"}),
            "overlapPolicy",
        ),
        (json!({"everyMs": 1000, "endAt": "soon"}), "endAt"),
        (
            json!({"everyMs": 1000, "startAt": "2026-03-02T00:00:00Z", "endAt": "2026-03-01T00:00:00Z"}),
            "endAt",
        ),
        (
            json!({"cronExpr": "0 0 * * *", "endAt": "2026-03-01T09:00:00Z"}),
            "endAt",
        ),
    ];
    for (body, field) in cases {
        assert_eq!(refusal(body.clone()), ("invalid_field", f(field)), "{body}");
    }
}

#[test]
fn new_fields_enter_the_fingerprint_only_when_they_say_something() {
    let plain = build(json!({"cronExpr": "0 * * * *"})).unwrap();
    let defaults = build(json!({
        "cronExpr": "0 * * * *", "misfirePolicy": "fireOnce", "overlapPolicy": "allow"
    }))
    .unwrap();
    assert_eq!(plain.request_hash, defaults.request_hash);
    let forbid = build(json!({"cronExpr": "0 * * * *", "overlapPolicy": "forbid"})).unwrap();
    assert_ne!(plain.request_hash, forbid.request_hash);
    let a = build(json!({"everyMs": 1000})).unwrap();
    let b = build(json!({"everyMs": 2000})).unwrap();
    let c = build(json!({"delayMs": 1000})).unwrap();
    assert_ne!(a.request_hash, b.request_hash);
    assert_ne!(a.request_hash, c.request_hash);
    let ended = build(json!({"everyMs": 1000, "endAt": "2026-03-02T00:00:00+01:00"})).unwrap();
    let same = build(json!({"everyMs": 1000, "endAt": "2026-03-01T23:00:00Z"})).unwrap();
    assert_eq!(ended.request_hash, same.request_hash);
}
