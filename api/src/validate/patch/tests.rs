//! Unit tests of the PATCH merge: kinds switch, fields keep their values
//! unless named, `null` clears, and what is refused.

use super::*;
use kairos_core::job::{JobStatus, RetryPolicy};
use kairos_core::schedule::{CronDialect, MisfirePolicy, OverlapPolicy, Rule};
use serde_json::{Value, json};

const NOW: Millis = 1_772_359_200_000; // 2026-03-01T10:00:00Z

fn job(schedule: Schedule) -> Job {
    Job {
        execution_mode: Default::default(),
        id: "j".into(),
        tenant: "default".into(),
        name: "n".into(),
        handler: "noop".into(),
        params: json!({"a": 1}),
        sensitive_params: Vec::new(),
        schedule,
        next_trigger_at: Some(NOW),
        status: JobStatus::Scheduled,
        version: 3,
        revision: 3,
        callback_url: Some("https://example.com/cb".into()),
        client_request_id: None,
        request_hash: None,
        retry: RetryPolicy {
            max_attempts: 2,
            backoff_ms: 10,
        },
        timeout_ms: Some(5_000),
        created_at: NOW - 30_000,
        updated_at: NOW,
        worker_group: None,
        priority: Default::default(),
        lane: Default::default(),
        max_concurrency: None,
        trace: None,
        pause_reason: None,
        last_result: None,
        last_result_at: None,
        fail_streak: 0,
    }
}

fn patch(j: &Job, body: Value) -> Result<JobUpdate, ApiError> {
    let mut v = json!({"version": 3});
    for (k, x) in body.as_object().unwrap() {
        v[k] = x.clone();
    }
    let req: PatchJobRequest = crate::extract::parse_json(v.to_string().as_bytes()).unwrap();
    job_update(j, &req, &ApiConfig::default(), NOW)
}

fn field(r: Result<JobUpdate, ApiError>) -> Option<String> {
    r.unwrap_err().field().map(str::to_string)
}

#[test]
fn an_empty_patch_changes_nothing() {
    let j = job(Schedule::cron("0 * * * *", "Europe/Berlin"));
    let u = patch(&j, json!({})).unwrap();
    assert!(!u.reschedule);
    assert_eq!(u.schedule, j.schedule);
    assert_eq!(
        (u.params, u.callback_url, u.retry, u.timeout_ms),
        (j.params, j.callback_url, j.retry, j.timeout_ms)
    );
}

#[test]
fn named_fields_change_and_null_clears() {
    let j = job(Schedule::every(1_000));
    let u = patch(
        &j,
        json!({"params": null, "callbackUrl": null, "timeoutMs": null, "maxAttempts": 5, "overlapPolicy": "replace"}),
    )
    .unwrap();
    assert_eq!(u.params, Value::Null);
    assert_eq!((u.callback_url, u.timeout_ms), (None, None));
    assert_eq!(
        u.retry,
        RetryPolicy {
            max_attempts: 5,
            backoff_ms: 10
        }
    );
    assert!(!u.reschedule, "a policy is not a new timing");
    assert_eq!(
        u.schedule.recurrence().unwrap().overlap,
        OverlapPolicy::Replace
    );
}

#[test]
fn a_kind_field_switches_the_rule_and_keeps_window_and_policies() {
    let mut s = Schedule::every(1_000);
    if let Schedule::Recurring(r) = &mut s {
        r.end_at = Some(NOW + 99_000);
        r.misfire = MisfirePolicy::Skip;
    }
    let j = job(s);
    let u = patch(
        &j,
        json!({"cronExpr": "*/5 * * * * *", "timezone": "Asia/Tokyo"}),
    )
    .unwrap();
    assert!(u.reschedule);
    let r = u.schedule.recurrence().unwrap();
    assert_eq!(
        r.rule,
        Rule::Cron {
            expr: "*/5 * * * * *".into(),
            tz: "Asia/Tokyo".into(),
            dialect: CronDialect::Standard,
        }
    );
    assert_eq!(
        (r.end_at, r.misfire),
        (Some(NOW + 99_000), MisfirePolicy::Skip)
    );
    let u = patch(&j, json!({"endAt": null})).unwrap();
    assert!(u.reschedule);
    assert_eq!(u.schedule.recurrence().unwrap().end_at, None);
    let u = patch(&j, json!({"triggerAt": "2026-03-01T12:00:00Z"})).unwrap();
    assert_eq!(
        u.schedule,
        Schedule::Once {
            at: NOW + 7_200_000
        }
    );
    // Ending the window now is how a recurring job is wound down.
    assert!(patch(&j, json!({"endAt": "2026-03-01T09:00:00Z"})).is_ok());
}

#[test]
fn bad_patches_are_refused_naming_the_field() {
    let once = job(Schedule::Once { at: NOW });
    let cron = job(Schedule::cron("0 * * * *", "UTC"));
    let f = |s: &str| Some(s.to_string());
    assert_eq!(
        field(patch(&once, json!({"timezone": "Europe/Berlin"}))),
        f("timezone")
    );
    assert_eq!(field(patch(&once, json!({"startAt": null}))), f("startAt"));
    assert_eq!(
        field(patch(&once, json!({"overlapPolicy": "forbid"}))),
        f("overlapPolicy")
    );
    assert_eq!(field(patch(&cron, json!({"everyMs": 5, }))), f("everyMs"));
    assert_eq!(
        field(patch(&cron, json!({"everyMs": 500, "delayMs": 500}))),
        f("delayMs")
    );
    assert_eq!(
        field(patch(&cron, json!({"cronExpr": "nope"}))),
        f("cronExpr")
    );
    assert_eq!(
        field(patch(&cron, json!({"cronExpr": "0 0 30 2 *"}))),
        f("cronExpr")
    );
    assert_eq!(
        field(patch(&cron, json!({"timezone": "Mars/Olympus"}))),
        f("timezone")
    );
    assert_eq!(
        field(patch(&cron, json!({"callbackUrl": "ftp://x"}))),
        f("callbackUrl")
    );
    assert_eq!(field(patch(&cron, json!({"timeoutMs": 0}))), f("timeoutMs"));
    assert_eq!(
        field(patch(&cron, json!({"misfirePolicy": "never"}))),
        f("misfirePolicy")
    );
}

#[test]
fn masked_secrets_sent_back_keep_their_values() {
    let mut j = job(Schedule::Once { at: NOW });
    j.params = json!({"headers": {"Authorization": "Bearer real"}, "pin": "4321", "n": 1});
    j.sensitive_params = vec!["pin".into()];
    let mask = kairos_core::sensitive::MASK;
    // The params as the dashboard shows them, with one plain field changed.
    let u = patch(
        &j,
        json!({"params": {"headers": {"Authorization": mask}, "pin": mask, "n": 2}}),
    )
    .unwrap();
    assert_eq!(
        u.params,
        json!({"headers": {"Authorization": "Bearer real"}, "pin": "4321", "n": 2})
    );
    assert_eq!(u.sensitive_params, ["pin"], "kept unless named");
    // A path dropped in the same edit still protected what the form showed.
    let u = patch(&j, json!({"params": {"pin": mask}, "sensitiveParams": []})).unwrap();
    assert_eq!(u.params, json!({"pin": "4321"}));
    assert!(u.sensitive_params.is_empty());
    assert_eq!(
        field(patch(&j, json!({"sensitiveParams": ["a..b"]}))),
        Some("sensitiveParams".to_string())
    );
}

fn dialect_of(u: &JobUpdate) -> CronDialect {
    match &u.schedule.recurrence().unwrap().rule {
        Rule::Cron { dialect, .. } => *dialect,
        other => panic!("cron expected, got {other:?}"),
    }
}

#[test]
fn a_new_expression_keeps_a_quartz_dialect_and_checks_a_standard_one() {
    let quartz = job(Schedule::cron_in(CronDialect::Quartz, "0 0 2 ? * 2", "UTC"));
    let u = patch(&quartz, json!({"cronExpr": "0 0 3 ? * 3"})).unwrap();
    assert_eq!(dialect_of(&u), CronDialect::Quartz);
    let u = patch(&quartz, json!({"timezone": "Asia/Tokyo"})).unwrap();
    assert_eq!(dialect_of(&u), CronDialect::Quartz);

    let standard = job(Schedule::cron("0 0 2 * * 2", "UTC"));
    let r = patch(&standard, json!({"cronExpr": "0 0 2 ? * 2"}));
    assert_eq!(field(r), Some("cronDialect".into()));
    let u = patch(
        &standard,
        json!({"cronExpr": "0 0 2 ? * 2", "cronDialect": "standard"}),
    )
    .unwrap();
    assert_eq!(dialect_of(&u), CronDialect::Standard);
}

#[test]
fn a_dialect_alone_rereads_the_current_expression() {
    let j = job(Schedule::cron("0 0 2 ? * 2", "UTC"));
    let u = patch(&j, json!({"cronDialect": "quartz"})).unwrap();
    assert!(u.reschedule);
    assert_eq!(dialect_of(&u), CronDialect::Quartz);
    let r = patch(&j, json!({"cronDialect": "crontab"}));
    assert_eq!(field(r), Some("cronDialect".into()));
    let r = patch(
        &job(Schedule::every(1_000)),
        json!({"cronDialect": "quartz"}),
    );
    assert_eq!(field(r), Some("cronDialect".into()));
}
