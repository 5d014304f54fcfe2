//! Unit tests of request validation: every refusal names its field, defaults
//! apply, and the fingerprint ignores spelling but not meaning.

use super::*;
use kairos_core::schedule::Schedule;
use kairos_core::time::parse_rfc3339;

const NOW: Millis = 1_772_359_200_000; // 2026-03-01T10:00:00Z

fn req(body: Value) -> CreateJobRequest {
    crate::extract::parse_json(body.to_string().as_bytes()).unwrap()
}

fn build(body: Value) -> Result<NewJob, ApiError> {
    new_job(
        req(body),
        &ApiConfig::default(),
        "default",
        "id-1".into(),
        NOW,
    )
}

fn refusal(body: Value) -> (&'static str, Option<String>) {
    let err = build(body).unwrap_err();
    (err.code(), err.field().map(str::to_string))
}

#[test]
fn a_minimal_request_is_a_one_shot_due_now_with_defaults() {
    let job = build(json!({"jobName": "a", "jobHandler": "noop"})).unwrap();
    assert_eq!(job.schedule, Schedule::Once { at: NOW });
    assert_eq!(job.next_trigger_at, NOW);
    assert_eq!(job.params, Value::Null);
    assert_eq!(
        job.retry,
        RetryPolicy {
            max_attempts: 1,
            backoff_ms: 1_000
        }
    );
    assert_eq!(job.timeout_ms, None);
    assert_eq!(job.tenant, "default");
    assert_eq!(job.created_at, NOW);
    assert_eq!(job.request_hash.as_deref().map(str::len), Some(64));
}

#[test]
fn a_cron_job_gets_its_first_trigger_in_its_zone() {
    let job = build(json!({
        "jobName": "a", "jobHandler": "noop",
        "cronExpr": "0 0 9 * * *", "timezone": "Asia/Shanghai"
    }))
    .unwrap();
    assert_eq!(
        job.next_trigger_at,
        parse_rfc3339("2026-03-02T01:00:00Z").unwrap()
    );
    assert!(job.schedule.is_recurring());
}

#[test]
fn trigger_at_is_honoured_for_one_shots() {
    let job = build(json!({
        "jobName": "a", "jobHandler": "noop", "triggerAt": "2026-03-01T12:00:00+02:00"
    }))
    .unwrap();
    assert_eq!(
        job.next_trigger_at,
        parse_rfc3339("2026-03-01T10:00:00Z").unwrap()
    );
}

#[test]
fn bad_values_are_refused_naming_the_field() {
    let base = |extra: Value| {
        let mut v = json!({"jobName": "a", "jobHandler": "noop"});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        refusal(v)
    };
    let f = |s: &str| Some(s.to_string());
    assert_eq!(
        base(json!({"jobName": " "})),
        ("invalid_field", f("jobName"))
    );
    assert_eq!(
        base(json!({"jobHandler": "x".repeat(256)})),
        ("invalid_field", f("jobHandler"))
    );
    assert_eq!(
        base(json!({"cronExpr": "not a cron"})),
        ("invalid_cron", f("cronExpr"))
    );
    assert_eq!(
        base(json!({"cronExpr": ""})),
        ("invalid_cron", f("cronExpr"))
    );
    assert_eq!(
        base(json!({"cronExpr": "0 0 30 2 *"})),
        ("invalid_cron", f("cronExpr"))
    );
    assert_eq!(
        base(json!({"cronExpr": "* * * * *", "timezone": "Mars/Olympus"})),
        ("unknown_timezone", f("timezone"))
    );
    assert_eq!(
        base(json!({"timezone": "Nowhere"})),
        ("unknown_timezone", f("timezone"))
    );
    assert_eq!(
        base(json!({"cronExpr": "* * * * *", "triggerAt": "2026-03-01T10:00:00Z"})),
        ("invalid_field", f("triggerAt"))
    );
    assert_eq!(
        base(json!({"triggerAt": "tomorrow"})),
        ("invalid_field", f("triggerAt"))
    );
    assert_eq!(
        base(json!({"callbackUrl": "ftp://example.com/x"})),
        ("invalid_url", f("callbackUrl"))
    );
    assert_eq!(
        base(json!({"callbackUrl": "/relative"})),
        ("invalid_url", f("callbackUrl"))
    );
    assert_eq!(
        base(json!({"callbackUrl": "http://"})),
        ("invalid_url", f("callbackUrl"))
    );
    assert_eq!(
        base(json!({"clientRequestId": ""})),
        ("invalid_field", f("clientRequestId"))
    );
    assert_eq!(
        base(json!({"clientRequestId": "k".repeat(129)})),
        ("invalid_field", f("clientRequestId"))
    );
    assert_eq!(
        base(json!({"maxAttempts": 0})),
        ("invalid_field", f("maxAttempts"))
    );
    assert_eq!(
        base(json!({"maxAttempts": -1})),
        ("invalid_field", f("maxAttempts"))
    );
    assert_eq!(
        base(json!({"maxAttempts": 101})),
        ("invalid_field", f("maxAttempts"))
    );
    assert_eq!(
        base(json!({"retryBackoffMs": -5})),
        ("invalid_field", f("retryBackoffMs"))
    );
    assert_eq!(
        base(json!({"timeoutMs": 0})),
        ("invalid_field", f("timeoutMs"))
    );
    assert_eq!(
        base(json!({"timeoutMs": -1})),
        ("invalid_field", f("timeoutMs"))
    );
    assert_eq!(
        base(json!({"timeoutMs": 86_400_001})),
        ("invalid_field", f("timeoutMs"))
    );
}

#[test]
fn params_over_the_limit_are_too_large() {
    let cfg = ApiConfig::default();
    let big = "x".repeat(cfg.max_params_bytes);
    let err =
        build(json!({"jobName": "a", "jobHandler": "noop", "params": {"blob": big}})).unwrap_err();
    assert_eq!(err.code(), "payload_too_large");
    let fits = "x".repeat(cfg.max_params_bytes - 2);
    assert!(build(json!({"jobName": "a", "jobHandler": "noop", "params": fits})).is_ok());
}

#[test]
fn the_fingerprint_ignores_key_order_defaults_and_offsets() {
    let a = build(json!({
        "jobName": "a", "jobHandler": "noop", "params": {"x": 1, "y": [1, {"b": 2, "a": 1}]},
        "triggerAt": "2026-03-01T12:00:00+02:00"
    }))
    .unwrap();
    let b = build(json!({
        "params": {"y": [1, {"a": 1, "b": 2}], "x": 1}, "jobHandler": "noop", "jobName": "a",
        "triggerAt": "2026-03-01T10:00:00Z", "timezone": "UTC", "maxAttempts": 1
    }))
    .unwrap();
    assert_eq!(a.request_hash, b.request_hash);
    let c = build(json!({
        "jobName": "a", "jobHandler": "noop", "params": {"x": 2, "y": [1, {"b": 2, "a": 1}]},
        "triggerAt": "2026-03-01T12:00:00+02:00"
    }))
    .unwrap();
    assert_ne!(a.request_hash, c.request_hash);
}

#[test]
fn listing_parameters_are_checked() {
    assert_eq!(page_limit(None).unwrap(), 50);
    assert_eq!(page_limit(Some("500")).unwrap(), 500);
    for bad in ["0", "501", "-1", "ten"] {
        assert_eq!(page_limit(Some(bad)).unwrap_err().field(), Some("limit"));
    }
    assert_eq!(job_status(Some("paused")).unwrap(), Some(JobStatus::Paused));
    assert_eq!(job_status(None).unwrap(), None);
    assert_eq!(
        job_status(Some("done")).unwrap_err().field(),
        Some("status")
    );
}

#[test]
fn execution_filters_parse_or_name_their_field() {
    assert_eq!(exec_statuses(None).unwrap(), []);
    assert_eq!(
        exec_statuses(Some("failed, timed_out,,lost")).unwrap(),
        [ExecStatus::Failed, ExecStatus::TimedOut, ExecStatus::Lost]
    );
    assert_eq!(
        exec_statuses(Some("broken")).unwrap_err().field(),
        Some("status")
    );
    let (from, to) = time_range(Some("2026-03-01T10:00:00Z"), Some("")).unwrap();
    assert_eq!((from, to), (Some(NOW), None));
    assert_eq!(
        time_range(Some("yesterday"), None).unwrap_err().field(),
        Some("from")
    );
    let same = "2026-03-01T10:00:00Z";
    assert_eq!(
        time_range(Some(same), Some(same)).unwrap_err().field(),
        Some("to")
    );
}
