//! `PATCH /openapi/jobs/{id}`: changes at the version read, recomputed next
//! trigger and wake-up, 409s, and bad input that changes nothing.

use super::support::App;
use axum::http::Method;
use kairos_core::due::Due;
use kairos_core::store::DispatchScope;
use kairos_core::store::{Dispatch, JobStore};
use kairos_core::time::{now_ms, parse_rfc3339};
use serde_json::{Value, json};

fn time(v: &Value) -> i64 {
    parse_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}"))).expect("RFC 3339")
}

pub async fn patch_changes_a_job_at_its_version(app: App) {
    // Yearly: its next trigger is far away.
    let id = app
        .create(&json!({"jobName": "p", "jobHandler": "noop", "cronExpr": "0 0 0 1 1 *"}))
        .await;
    let uri = format!("/openapi/jobs/{id}");
    let read = app.get(&uri).await.ok(200);
    let version = read["version"].as_i64().unwrap();
    let due_before = app.due.lock().unwrap().len();

    let before = now_ms();
    let changed = app
        .patch_json(
            &uri,
            &json!({
                "version": version, "everyMs": 60000, "params": {"n": 2}, "maxAttempts": 3,
                "timeoutMs": 1000, "overlapPolicy": "forbid", "callbackUrl": "https://example.com/h"
            }),
        )
        .await
        .ok(200);
    assert_eq!(changed["version"], version + 1);
    assert_eq!(changed["cronExpr"], Value::Null);
    assert_eq!(changed["timezone"], Value::Null);
    assert_eq!(changed["everyMs"], 60000);
    assert_eq!(changed["params"], json!({"n": 2}));
    assert_eq!(changed["maxAttempts"], 3);
    assert_eq!(changed["timeoutMs"], 1000);
    assert_eq!(changed["overlapPolicy"], "forbid");
    assert_eq!(changed["misfirePolicy"], "fireOnce");
    assert_eq!(changed["callbackUrl"], "https://example.com/h");
    let next = time(&changed["nextTriggerAt"]);
    assert!(
        next >= before - 60_000 && next <= now_ms() + 60_000,
        "{next}"
    );
    assert_eq!(
        app.due.lock().unwrap()[due_before..],
        [Due::At(next)],
        "due sooner: the dispatcher is woken"
    );
    assert_eq!(app.get(&uri).await.ok(200)["version"], version + 1);

    // Policies and params alone keep the trigger and wake nobody.
    let kept = app
        .patch_json(
            &uri,
            &json!({"version": version + 1, "misfirePolicy": "skip", "timeoutMs": null}),
        )
        .await
        .ok(200);
    assert_eq!(kept["nextTriggerAt"], changed["nextTriggerAt"]);
    assert_eq!(kept["timeoutMs"], Value::Null);
    assert_eq!(app.due.lock().unwrap().len(), due_before + 1);

    // The version read is stale now.
    let snapshot = app.snapshot().await;
    let err = app
        .patch_json(&uri, &json!({"version": version, "everyMs": 1000}))
        .await
        .error(409, "version_conflict");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&(version + 2).to_string()),
        "{err}"
    );
    assert_eq!(app.snapshot().await, snapshot);
}

pub async fn bad_patches_change_nothing(app: App) {
    let id = app
        .create(&json!({"jobName": "b", "jobHandler": "noop", "cronExpr": "0 * * * *"}))
        .await;
    let uri = format!("/openapi/jobs/{id}");
    let version = app.get(&uri).await.ok(200)["version"].as_i64().unwrap();
    let snapshot = app.snapshot().await;
    let v = |extra: Value| {
        let mut b = json!({"version": version});
        for (k, x) in extra.as_object().unwrap() {
            b[k] = x.clone();
        }
        b
    };
    let cases = [
        (json!({}), 422, "missing_field", "version"),
        (v(json!({"surprise": 1})), 422, "unknown_field", "surprise"),
        (v(json!({"everyMs": 10})), 422, "invalid_field", "everyMs"),
        (
            v(json!({"everyMs": 1000, "delayMs": 1000})),
            422,
            "invalid_field",
            "delayMs",
        ),
        (
            v(json!({"cronExpr": "soon"})),
            422,
            "invalid_cron",
            "cronExpr",
        ),
        (
            v(json!({"timezone": "Mars/Olympus"})),
            422,
            "unknown_timezone",
            "timezone",
        ),
        (
            v(json!({"triggerAt": "2099-01-01T00:00:00Z", "cronExpr": "* * * * *"})),
            422,
            "invalid_field",
            "triggerAt",
        ),
        (
            v(json!({"startAt": "later"})),
            422,
            "invalid_field",
            "startAt",
        ),
        (
            v(json!({"overlapPolicy": "maybe"})),
            422,
            "invalid_field",
            "overlapPolicy",
        ),
        (
            v(json!({"callbackUrl": "ftp://x.org"})),
            422,
            "invalid_url",
            "callbackUrl",
        ),
        (
            v(json!({"maxAttempts": 0})),
            422,
            "invalid_field",
            "maxAttempts",
        ),
        (
            v(json!({"params": {"blob": "x".repeat(70 * 1024)}})),
            413,
            "payload_too_large",
            "",
        ),
    ];
    for (body, status, code, field) in cases {
        let err = app.patch_json(&uri, &body).await.error(status, code);
        if !field.is_empty() {
            assert_eq!(err["field"], field, "{body:.100}");
        }
    }
    let resp = app
        .raw(Method::PATCH, &uri, Some("text/plain"), b"{}".to_vec())
        .await;
    resp.error(415, "unsupported_media_type");
    let resp = app
        .raw(
            Method::PATCH,
            &uri,
            Some("application/json"),
            b"{\"version\":".to_vec(),
        )
        .await;
    resp.error(400, "invalid_json");
    app.patch_json("/openapi/jobs/nope", &json!({"version": 1}))
        .await
        .error(404, "not_found");
    assert_eq!(app.snapshot().await, snapshot);
    assert!(
        app.due.lock().unwrap().len() <= 1,
        "only the create woke anyone"
    );
}

pub async fn patch_refuses_finished_and_fired_jobs_and_ends_closed_windows(app: App) {
    // A one-shot whose trigger was claimed keeps it; its params may change.
    let once = app.create(&super::support::one_shot("fired")).await;
    let job = app.store.job_get("default", &once).await.unwrap().unwrap();
    let due = job.next_trigger_at.unwrap();
    let claims = kairos_core::trigger::claims_for([job], due);
    assert_eq!(
        app.store
            .triggers_claim(DispatchScope::All { fence: 1 }, &claims, due)
            .await
            .unwrap()
            .work
            .len(),
        1
    );
    let uri = format!("/openapi/jobs/{once}");
    let version = app.get(&uri).await.ok(200)["version"].as_i64().unwrap();
    let err = app
        .patch_json(
            &uri,
            &json!({"version": version, "triggerAt": "2099-01-01T00:00:00Z"}),
        )
        .await
        .error(409, "invalid_state");
    assert!(
        err["message"].as_str().unwrap().contains("already fired"),
        "{err}"
    );
    app.patch_json(&uri, &json!({"version": version, "params": [1]}))
        .await
        .ok(200);

    // A recurring job whose window closes with nothing running ends at once.
    let rate = app
        .create(&json!({"jobName": "r", "jobHandler": "noop", "everyMs": 1000, "startAt": "2099-01-01T00:00:00Z"}))
        .await;
    let uri = format!("/openapi/jobs/{rate}");
    let version = app.get(&uri).await.ok(200)["version"].as_i64().unwrap();
    let ended = app
        .patch_json(
            &uri,
            &json!({"version": version, "startAt": null, "endAt": "2000-01-01T00:00:00Z"}),
        )
        .await
        .ok(200);
    assert_eq!(ended["status"], "succeeded");
    assert_eq!(ended["nextTriggerAt"], Value::Null);
    let err = app
        .patch_json(&uri, &json!({"version": ended["version"], "everyMs": 2000}))
        .await
        .error(409, "invalid_state");
    assert!(
        err["message"].as_str().unwrap().contains("succeeded"),
        "{err}"
    );

    // Cancelled jobs are finished too.
    let c = app
        .create(&json!({"jobName": "c", "jobHandler": "noop", "delayMs": 1000}))
        .await;
    let cancelled = app.delete(&format!("/openapi/jobs/{c}")).await.ok(200);
    app.patch_json(
        &format!("/openapi/jobs/{c}"),
        &json!({"version": cancelled["version"]}),
    )
    .await
    .error(409, "invalid_state");
    assert!(
        app.store
            .executions_find_unpublished(now_ms(), 10, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .iter()
            .all(|w| w.job_id != c)
    );
}
