//! Pause, resume, trigger and cancel, with 409 naming the current status.

use super::support::App;
use kairos_core::due::Due;
use kairos_core::time::parse_rfc3339;
use serde_json::json;

pub async fn pause_resume_trigger_cancel(app: App) {
    let id = app
        .create(&json!({"jobName": "c", "jobHandler": "noop", "cronExpr": "0 0 * * * *"}))
        .await;
    let job = |suffix: &str| format!("/openapi/jobs/{id}{suffix}");

    let paused = app.post(&job("/pause")).await.ok(200);
    assert_eq!(paused["jobId"], id.as_str());
    assert_eq!(paused["status"], "paused");
    let err = app.post(&job("/pause")).await.error(409, "invalid_state");
    assert!(err["message"].as_str().unwrap().contains("paused"), "{err}");
    let err = app.post(&job("/trigger")).await.error(409, "invalid_state");
    assert!(err["message"].as_str().unwrap().contains("paused"), "{err}");
    assert_eq!(app.get(&job("")).await.ok(200)["status"], "paused");

    let due_before = app.due.lock().unwrap().len();
    let resumed = app.post(&job("/resume")).await.ok(200);
    assert_eq!(resumed["status"], "scheduled");
    assert!(resumed["version"].as_i64() > paused["version"].as_i64());
    let next = parse_rfc3339(resumed["nextTriggerAt"].as_str().unwrap()).unwrap();
    assert_eq!(
        app.due.lock().unwrap()[due_before..],
        [Due::At(next)],
        "resume wakes the dispatcher"
    );
    let err = app.post(&job("/resume")).await.error(409, "invalid_state");
    assert!(
        err["message"].as_str().unwrap().contains("scheduled"),
        "{err}"
    );

    let triggered = app.post(&job("/trigger")).await.ok(202);
    let exec = triggered["executionId"].as_str().unwrap();
    assert_eq!(
        app.due.lock().unwrap()[due_before + 1..],
        [Due::Pending],
        "trigger asks the dispatcher to sweep its pending execution up"
    );
    let execution = app
        .get(&format!("/openapi/executions/{exec}"))
        .await
        .ok(200);
    assert_eq!(execution["jobId"], id.as_str());

    let cancelled = app.delete(&job("")).await.ok(200);
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(cancelled["jobName"], "c");
    let execution = app
        .get(&format!("/openapi/executions/{exec}"))
        .await
        .ok(200);
    assert_eq!(
        execution["status"], "cancelled",
        "its pending execution goes with it"
    );
    for (method, path) in [
        ("DELETE", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/trigger"),
    ] {
        let resp = if method == "DELETE" {
            app.delete(&job(path)).await
        } else {
            app.post(&job(path)).await
        };
        let err = resp.error(409, "invalid_state");
        assert!(
            err["message"].as_str().unwrap().contains("cancelled"),
            "{method} {path}: {err}"
        );
    }
    assert_eq!(app.get(&job("")).await.ok(200)["status"], "cancelled");
}
