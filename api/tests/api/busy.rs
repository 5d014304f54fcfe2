//! Issue 35: a job that fires every second is changed at the `version` just
//! read (the scheduler's claims and results do not move it), while two
//! callers' changes still conflict; and a job shows its last result and its
//! health (`failing` after 3 failed runs in a row of a recurring job), with
//! a `health` filter on the listing.

use super::support::App;
use kairos_core::job::FAILING_AFTER;
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::store::DispatchScope;
use kairos_core::store::{Dispatch, JobStore};
use kairos_core::trigger::claims_for;
use serde_json::json;

/// What the dispatcher and a worker would do: claim the job's due trigger
/// and record `kind` for it.
async fn fire(app: &App, id: &str, kind: ResultKind) {
    let job = app
        .store
        .job_get("default", id)
        .await
        .unwrap()
        .expect("the job");
    let due = job.next_trigger_at.expect("a trigger");
    let won = app
        .store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &claims_for([job], due),
            due,
        )
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 1, "the claim wins");
    let result = ResultMsg {
        v: PROTOCOL_VERSION,
        execution_id: won[0].execution_id.clone(),
        attempt: 1,
        worker_id: "w1".into(),
        kind,
        output: None,
        error: (kind != ResultKind::Succeeded).then(|| "boom".to_string()),
        at: due + 5,
        started_at: Some(due + 1),
        retryable: None,
        incarnation: None,
        traceparent: None,
    };
    app.store.results_apply(&[result], due + 5).await.unwrap();
}

pub async fn a_busy_job_is_changed_at_the_version_just_read(app: App) {
    let id = app
        .create(&json!({"jobName": "busy", "jobHandler": "noop", "cronExpr": "* * * * * *"}))
        .await;
    let uri = format!("/openapi/jobs/{id}");
    let read = app.get(&uri).await.ok(200);
    let version = read["version"].as_i64().unwrap();
    // It fires (twice) while the caller edits.
    fire(&app, &id, ResultKind::Succeeded).await;
    fire(&app, &id, ResultKind::Succeeded).await;
    assert_eq!(app.get(&uri).await.ok(200)["version"], version);

    let changed = app
        .patch_json(
            &uri,
            &json!({"version": version, "cronExpr": "*/5 * * * * *"}),
        )
        .await
        .ok(200);
    assert_eq!(changed["cronExpr"], "*/5 * * * * *");
    assert_eq!(changed["version"], version + 1);

    // Another caller who read the same version is refused, and nothing of
    // theirs is saved.
    let err = app
        .patch_json(&uri, &json!({"version": version, "maxAttempts": 9}))
        .await
        .error(409, "version_conflict");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains(&format!("at version {}", version + 1)),
        "{err}"
    );
    assert_eq!(app.get(&uri).await.ok(200)["maxAttempts"], 1);

    // A pause is a caller's change: it moves the version.
    let paused = app.post(&format!("{uri}/pause")).await.ok(200);
    assert_eq!(paused["version"], version + 2);
    app.patch_json(&uri, &json!({"version": version + 1, "maxAttempts": 9}))
        .await
        .error(409, "version_conflict");
}

pub async fn jobs_show_their_last_result_and_health(app: App) {
    let id = app
        .create(&json!({"jobName": "rate", "jobHandler": "fail", "everyMs": 1000}))
        .await;
    let ok = app
        .create(&json!({"jobName": "fine", "jobHandler": "noop", "everyMs": 1000}))
        .await;
    let uri = format!("/openapi/jobs/{id}");
    let fresh = app.get(&uri).await.ok(200);
    assert_eq!(
        (
            &fresh["lastResult"],
            &fresh["lastResultAt"],
            &fresh["health"]
        ),
        (&json!(null), &json!(null), &json!("ok"))
    );
    fire(&app, &ok, ResultKind::Succeeded).await;
    for _ in 0..FAILING_AFTER - 1 {
        fire(&app, &id, ResultKind::Failed).await;
    }
    let almost = app.get(&uri).await.ok(200);
    assert_eq!(
        (&almost["lastResult"], &almost["health"]),
        (&json!("failed"), &json!("ok"))
    );
    fire(&app, &id, ResultKind::TimedOut).await;
    let failing = app.get(&uri).await.ok(200);
    assert_eq!(failing["lastResult"], "timed_out");
    assert_eq!(failing["health"], "failing");
    assert_eq!(
        failing["status"], "scheduled",
        "its status alone looks healthy"
    );
    assert!(failing["lastResultAt"].is_string());

    let ids = |page: serde_json::Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["jobId"].as_str().unwrap().to_string())
            .collect()
    };
    let listed = app.get("/openapi/jobs?health=failing").await.ok(200);
    assert_eq!(ids(listed.clone()), [id.as_str()]);
    assert_eq!(listed["items"][0]["health"], "failing");
    assert_eq!(
        ids(app.get("/openapi/jobs?health=ok").await.ok(200)),
        [ok.as_str()]
    );
    let err = app
        .get("/openapi/jobs?health=sick")
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "health", "{err}");

    // One success and it is fine again.
    fire(&app, &id, ResultKind::Succeeded).await;
    let well = app.get(&uri).await.ok(200);
    assert_eq!(
        (&well["lastResult"], &well["health"]),
        (&json!("succeeded"), &json!("ok"))
    );
}
