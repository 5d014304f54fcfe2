//! Issue 33, concurrency limits through the API: a job's `maxConcurrency`
//! (validated, shown, changed), the operators' `/openapi/limits`, and an
//! execution held back by a limit showing `waitingFor.reason: concurrency`.

use super::support::App;
use kairos_core::protocol::{HeartbeatMsg, PROTOCOL_VERSION};
use kairos_core::store::DispatchScope;
use kairos_core::store::{Claim, Dispatch, JobStore, WorkerStore};
use kairos_core::tenant::Role;
use kairos_core::time::now_ms;
use kairos_core::worker::WorkerState;
use serde_json::{Value, json};
use std::sync::Arc;

pub async fn max_concurrency_is_validated_and_shown(app: App) {
    let id = app
        .create(&json!({"jobName": "m", "jobHandler": "noop", "maxConcurrency": 3}))
        .await;
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(job["maxConcurrency"], 3);
    let plain = app.create(&super::support::one_shot("p")).await;
    let shown = app.get(&format!("/openapi/jobs/{plain}")).await.ok(200);
    assert_eq!(shown["maxConcurrency"], Value::Null);

    for bad in [json!(0), json!(-1), json!(100_001)] {
        let refused = app
            .post_json(
                "/openapi/jobs",
                &json!({"jobName": "x", "jobHandler": "noop", "maxConcurrency": bad}),
            )
            .await
            .error(422, "invalid_field");
        assert_eq!(refused["field"], "maxConcurrency", "{bad}: {refused}");
    }

    let version = job["version"].clone();
    let patched = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": version, "maxConcurrency": 1}),
        )
        .await
        .ok(200);
    assert_eq!(patched["maxConcurrency"], 1);
    let refused = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": patched["version"], "maxConcurrency": 0}),
        )
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "maxConcurrency");
    let cleared = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": patched["version"], "maxConcurrency": null}),
        )
        .await
        .ok(200);
    assert_eq!(cleared["maxConcurrency"], Value::Null);
}

async fn beat(app: &App) {
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
        handlers: Some(vec!["export".into()]),
        group: None,
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

pub async fn operators_set_limits_and_held_work_shows_it(app: App) {
    let set = app
        .put_json("/openapi/limits/handler/export", &json!({"maxRunning": 1}))
        .await
        .ok(200);
    assert_eq!(
        set,
        json!({"scope": "handler", "name": "export", "maxRunning": 1, "ratePerSec": null, "running": 0})
    );
    let refused = app
        .put_json("/openapi/limits/job/x", &json!({"maxRunning": 1}))
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "scope");
    let refused = app
        .put_json("/openapi/limits/tenant/default", &json!({"maxRunning": 0}))
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "maxRunning");
    let refused = app
        .put_json("/openapi/limits/tenant/default", &json!({}))
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "maxRunning", "one of the two is needed");
    let refused = app
        .put_json("/openapi/limits/handler/x", &json!({"ratePerSec": 0}))
        .await
        .error(422, "invalid_field");
    assert_eq!(refused["field"], "ratePerSec");
    let rated = app
        .put_json("/openapi/limits/handler/slow", &json!({"ratePerSec": 0.5}))
        .await
        .ok(200);
    assert_eq!(rated["ratePerSec"], 0.5);
    assert_eq!(rated["maxRunning"], Value::Null);
    app.delete("/openapi/limits/handler/slow").await;
    let admin = app.as_new_key("default", Role::Admin).await;
    admin.get("/openapi/limits").await.error(403, "forbidden");

    // Two triggers of the handler, both claimed with a worker: one goes,
    // one waits for the slot.
    beat(&app).await;
    let mut claims = Vec::new();
    for name in ["a", "b"] {
        let id = app
            .create(&json!({"jobName": name, "jobHandler": "export"}))
            .await;
        let job = app.store.job_get("default", &id).await.unwrap().unwrap();
        claims.push(Claim {
            scheduled_at: job.next_trigger_at.unwrap(),
            job: Arc::new(job),
            next_trigger_at: None,
            execution_id: uuid::Uuid::now_v7().to_string(),
            worker_id: Some("w-1".into()),
            shard: kairos_core::shard::Shard::SINGLE,
        });
    }
    let at = claims.iter().map(|c| c.scheduled_at).max().unwrap();
    let work = app
        .store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, now_ms().max(at))
        .await
        .unwrap()
        .work;
    assert_eq!(work.len(), 1);
    let held = claims
        .iter()
        .find(|c| c.execution_id != work[0].execution_id)
        .unwrap();
    let shown = app
        .get(&format!("/openapi/executions/{}", held.execution_id))
        .await
        .ok(200);
    assert_eq!(shown["status"], "pending");
    assert_eq!(
        shown["waitingFor"],
        json!({"reason": "concurrency", "handler": "export", "group": null, "limit": "handler:export"})
    );
    let running = app
        .get(&format!("/openapi/executions/{}", work[0].execution_id))
        .await
        .ok(200);
    assert_eq!(running["waitingFor"], Value::Null);

    let list = app.get("/openapi/limits").await.ok(200);
    assert_eq!(
        list["items"],
        json!([{"scope": "handler", "name": "export", "maxRunning": 1, "ratePerSec": null, "running": 1}])
    );
    let gone = app.delete("/openapi/limits/handler/export").await;
    assert_eq!(gone.status.as_u16(), 204);
    app.delete("/openapi/limits/handler/export")
        .await
        .error(404, "not_found");
    let audit = app.get("/openapi/audit").await.ok(200);
    let actions: Vec<&str> = audit["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(actions.contains(&"limit.set") && actions.contains(&"limit.delete"));
}
