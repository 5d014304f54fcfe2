//! Issue 13 through the API: a job's worker group, executions waiting for a
//! worker that serves their handler, progress, and the execution log.

use super::support::App;
use kairos_core::protocol::{HeartbeatMsg, LogLevel, LogLine, LogMsg, PROTOCOL_VERSION};
use kairos_core::store::{LogLimits, LogStore, WorkerStore};
use kairos_core::time::now_ms;
use kairos_core::worker::WorkerState;
use serde_json::{Value, json};

/// Claims the job's first trigger as the dispatcher does; the execution id.
async fn claim_first(app: &App, job_id: &str) -> String {
    super::support::claim_first(app, job_id).await.0
}

async fn beat(app: &App, handlers: &[&str], group: Option<&str>) {
    let now = now_ms();
    let beat = HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: "w-1".into(),
        queue: "kairos.worker.w-1".into(),
        capacity: 8,
        active: 0,
        avg_cost_ms: 0.0,
        cpu_idle: 100.0,
        state: WorkerState::Online,
        at: now,
        handlers: Some(handlers.iter().map(|h| h.to_string()).collect()),
        group: group.map(str::to_string),
        incarnation: None,
        held: None,
        dispatch_batch: None,
        immediate_queue: false,
    };
    app.store
        .workers_record_heartbeats(&[beat], now)
        .await
        .unwrap();
}

pub async fn worker_groups_and_waiting_executions(app: App) {
    let id = app
        .create(&json!({"jobName": "r", "jobHandler": "report", "workerGroup": "edge"}))
        .await;
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(job["workerGroup"], "edge");
    assert_eq!(job["waitingFor"], Value::Null, "nothing claimed yet");

    let exec = claim_first(&app, &id).await;
    let want = json!({"reason": "worker", "handler": "report", "group": "edge", "limit": null});
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(job["waitingFor"], want, "no worker at all");
    assert_eq!(job["lastExecution"]["waitingFor"], want);
    let shown = app
        .get(&format!("/openapi/executions/{exec}"))
        .await
        .ok(200);
    assert_eq!(shown["waitingFor"], want);
    let list = app
        .get(&format!("/openapi/jobs/{id}/executions"))
        .await
        .ok(200);
    assert_eq!(list["items"][0]["waitingFor"], want);

    beat(&app, &["report"], None).await;
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(
        job["waitingFor"], want,
        "the right handler, outside the group"
    );
    beat(&app, &["report"], Some("edge")).await;
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(
        job["waitingFor"],
        Value::Null,
        "a live worker serves it now"
    );
    let workers = app.get("/openapi/workers").await.ok(200);
    assert_eq!(workers["items"][0]["handlers"], json!(["report"]));
    assert_eq!(workers["items"][0]["group"], "edge");

    // PATCH sets, clears and checks the group.
    let version = job["version"].as_i64().unwrap();
    let patched = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": version, "workerGroup": null}),
        )
        .await
        .ok(200);
    assert_eq!(patched["workerGroup"], Value::Null);
    let refused = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": patched["version"], "workerGroup": " "}),
        )
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "workerGroup");
    let refused = app
        .post_json(
            "/openapi/jobs",
            &json!({"jobName": "x", "jobHandler": "noop", "workerGroup": ""}),
        )
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "workerGroup");
}

/// Issue 33: a job's priority is set on create, shown, changed by PATCH,
/// part of the idempotency fingerprint, and checked.
pub async fn priorities_are_set_shown_changed_and_checked(app: App) {
    let id = app
        .create(&json!({"jobName": "p", "jobHandler": "noop", "priority": 9}))
        .await;
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(job["priority"], 9);
    let plain = app
        .create(&json!({"jobName": "q", "jobHandler": "noop"}))
        .await;
    let plain = app.get(&format!("/openapi/jobs/{plain}")).await.ok(200);
    assert_eq!(plain["priority"], 5, "the default");

    let patched = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": job["version"], "priority": 0}),
        )
        .await
        .ok(200);
    assert_eq!(patched["priority"], 0);
    let (exec, _) = super::support::claim_first(&app, &id).await;
    let shown = app
        .get(&format!("/openapi/executions/{exec}"))
        .await
        .ok(200);
    assert_eq!(shown["jobId"], id.as_str());

    for bad in [json!(10), json!(-1), json!("high")] {
        let body = json!({"jobName": "x", "jobHandler": "noop", "priority": bad});
        let refused = app.post_json("/openapi/jobs", &body).await;
        let status = refused.status.as_u16();
        assert!(status == 422 || status == 400, "{bad}: {status}");
        let error = refused.json()["error"].to_string();
        assert!(
            error.contains("priority"),
            "{bad}: the error names the field: {error}"
        );
    }
    let refused = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": patched["version"], "priority": 12}),
        )
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "priority");

    // Same key, another priority: a different request.
    let body = json!({"jobName": "k", "jobHandler": "noop", "clientRequestId": "prio-1"});
    app.post_json("/openapi/jobs", &body).await.ok(201);
    let mut urgent = body.clone();
    urgent["priority"] = json!(9);
    app.post_json("/openapi/jobs", &urgent)
        .await
        .error(409, "idempotency_conflict");
}

pub async fn execution_logs_are_paged_and_progress_is_shown(app: App) {
    app.get("/openapi/executions/nope/logs")
        .await
        .error(404, "not_found");
    let id = app.create(&super::support::one_shot("logs")).await;
    let exec = claim_first(&app, &id).await;
    let empty = app
        .get(&format!("/openapi/executions/{exec}/logs"))
        .await
        .ok(200);
    assert_eq!(empty, json!({"items": [], "nextCursor": null}));
    let lines = (1..=3)
        .map(|i| LogLine {
            at: now_ms(),
            level: LogLevel::Info,
            message: format!("line {i}"),
        })
        .collect();
    let batch = LogMsg {
        v: PROTOCOL_VERSION,
        execution_id: exec.clone(),
        attempt: 1,
        worker_id: "w-1".into(),
        lines,
        progress: Some(66.5),
    };
    app.store
        .logs_append(&[batch], &LogLimits::default(), now_ms())
        .await
        .unwrap();
    let first = app
        .get(&format!("/openapi/executions/{exec}/logs?limit=2"))
        .await
        .ok(200);
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let line = &first["items"][0];
    assert_eq!(line["message"], "line 1");
    assert_eq!(line["level"], "info");
    assert_eq!(line["attempt"], 1);
    assert_eq!(line["workerId"], "w-1");
    assert!(line["at"].is_string() && line["seq"].is_i64());
    let cursor = first["nextCursor"].as_str().unwrap();
    let rest = app
        .get(&format!("/openapi/executions/{exec}/logs?cursor={cursor}"))
        .await
        .ok(200);
    assert_eq!(rest["items"][0]["message"], "line 3");
    assert_eq!(rest["nextCursor"], Value::Null);
    app.get(&format!("/openapi/executions/{exec}/logs?limit=0"))
        .await
        .error(422, "invalid_field");
    let shown = app
        .get(&format!("/openapi/executions/{exec}"))
        .await
        .ok(200);
    assert_eq!(shown["progress"], 66.5);

    let doc = app.get("/openapi.json").await.ok(200);
    assert!(
        doc["paths"]["/openapi/executions/{id}/logs"]["get"].is_object(),
        "the OpenAPI document lists the logs endpoint"
    );
}
