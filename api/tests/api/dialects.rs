//! `cronDialect` (issue 46) through the API: a Quartz expression is created,
//! shown, previewed and changed in its dialect; the same expression without
//! a dialect, read differently by the two, is refused naming both readings
//! and stores nothing — for jobs and workflows, and in the OpenAPI document.

use super::support::App;
use kairos_core::time::parse_rfc3339;
use serde_json::{Value, json};

/// Whether `at` (RFC 3339, UTC) is a Monday at 02:00:00.
fn monday_two(at: &Value) -> bool {
    let t = parse_rfc3339(at.as_str().expect("a time")).unwrap();
    let d = chrono::DateTime::from_timestamp_millis(t).unwrap();
    use chrono::{Datelike, Timelike};
    d.weekday() == chrono::Weekday::Mon && (d.hour(), d.minute(), d.second()) == (2, 0, 0)
}

fn quartz_job(name: &str) -> Value {
    json!({"jobName": name, "jobHandler": "noop",
           "cronExpr": "0 0 2 ? * 2 *", "cronDialect": "quartz"})
}

/// The refusal of `0 0 2 ? * 2` without a dialect: 422 on `cronDialect`,
/// naming both readings.
fn assert_names_both_readings(err: &Value) {
    assert_eq!(err["field"], "cronDialect", "{err}");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("as standard cron: at 02:00, on Tuesday"),
        "{msg}"
    );
    assert!(msg.contains("as Quartz: at 02:00, on Monday"), "{msg}");
    assert!(msg.contains("set cronDialect"), "{msg}");
}

pub async fn jobs_take_show_and_change_a_cron_dialect(app: App) {
    let created = app
        .post_json("/openapi/jobs", &quartz_job("q"))
        .await
        .ok(201);
    assert!(monday_two(&created["nextTriggerAt"]), "{created}");
    let id = created["jobId"].as_str().unwrap().to_string();
    let job = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(
        (&job["cronExpr"], &job["cronDialect"]),
        (&json!("0 0 2 ? * 2 *"), &json!("quartz"))
    );
    let listed = app.get("/openapi/jobs").await.ok(200);
    let item = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobId"] == id.as_str())
        .expect("listed");
    assert_eq!(item["cronDialect"], "quartz");
    let rate = app
        .create(&json!({"jobName": "r", "jobHandler": "noop", "everyMs": 1000}))
        .await;
    let rate = app.get(&format!("/openapi/jobs/{rate}")).await.ok(200);
    assert_eq!(rate["cronDialect"], Value::Null);

    // A new expression keeps Quartz; the dialect alone rereads it.
    let patched = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": job["version"], "cronExpr": "0 0 2 ? * 2"}),
        )
        .await
        .ok(200);
    assert_eq!(patched["cronDialect"], "quartz");
    assert!(monday_two(&patched["nextTriggerAt"]), "{patched}");
    let patched = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": patched["version"], "cronDialect": "standard"}),
        )
        .await
        .ok(200);
    assert_eq!(patched["cronDialect"], "standard");
    assert!(!monday_two(&patched["nextTriggerAt"]), "Tuesdays now");

    let before = app.snapshot().await;
    let mut bare = quartz_job("bare");
    bare["cronExpr"] = json!("0 0 2 ? * 2");
    bare.as_object_mut().unwrap().remove("cronDialect");
    let err = app
        .post_json("/openapi/jobs", &bare)
        .await
        .error(422, "invalid_field");
    assert_names_both_readings(&err);
    for (body, field) in [
        (json!({"cronExpr": "0 0 2 ? * 2 *"}), "cronDialect"),
        (json!({"cronDialect": "crontab"}), "cronDialect"),
        (
            json!({"cronExpr": null, "everyMs": 1000, "cronDialect": "quartz"}),
            "cronDialect",
        ),
        // Quartz wants `?` in exactly one day field.
        (json!({"cronExpr": "0 0 2 * * 2"}), "cronExpr"),
    ] {
        let mut b = quartz_job("bad");
        for (k, v) in body.as_object().unwrap() {
            b[k] = v.clone();
        }
        if b["cronExpr"].is_null() {
            b.as_object_mut().unwrap().remove("cronExpr");
        }
        if field == "cronDialect" && body.get("cronDialect").is_none() {
            b.as_object_mut().unwrap().remove("cronDialect");
        }
        let resp = app.post_json("/openapi/jobs", &b).await;
        let code = if field == "cronExpr" {
            "invalid_cron"
        } else {
            "invalid_field"
        };
        let err = resp.error(422, code);
        assert_eq!(err["field"], field, "{b}");
    }
    let err = app
        .patch_json(
            &format!("/openapi/jobs/{id}"),
            &json!({"version": patched["version"], "cronExpr": "0 0 2 ? * 2"}),
        )
        .await
        .error(422, "invalid_field");
    assert_names_both_readings(&err);
    assert_eq!(app.snapshot().await, before);
}

pub async fn the_preview_reads_the_dialect(app: App) {
    let p = app
        .post_json(
            "/openapi/schedules/preview",
            &json!({"cronExpr": "0 0 2 ? * 2 *", "cronDialect": "quartz", "count": 3}),
        )
        .await
        .ok(200);
    assert_eq!(
        (&p["kind"], &p["cronDialect"], &p["description"]),
        (
            &json!("cron"),
            &json!("quartz"),
            &json!("at 02:00, on Monday")
        )
    );
    let times = p["nextTriggers"].as_array().unwrap();
    assert_eq!(times.len(), 3);
    assert!(times.iter().all(|t| monday_two(&t["at"])), "{p}");

    let err = app
        .post_json(
            "/openapi/schedules/preview",
            &json!({"cronExpr": "0 0 2 ? * 2"}),
        )
        .await
        .error(422, "invalid_field");
    assert_names_both_readings(&err);
    // The same fields as standard cron, named: Tuesdays.
    let p = app
        .post_json(
            "/openapi/schedules/preview",
            &json!({"cronExpr": "0 0 2 ? * 2", "cronDialect": "standard"}),
        )
        .await
        .ok(200);
    assert_eq!(p["description"], "at 02:00, on Tuesday");
    // Reading the same in both needs no dialect.
    let p = app
        .post_json(
            "/openapi/schedules/preview",
            &json!({"cronExpr": "0 0 2 ? * MON"}),
        )
        .await
        .ok(200);
    assert_eq!(p["cronDialect"], "standard");
    assert!(monday_two(&p["nextTriggers"][0]["at"]), "{p}");
}

pub async fn workflows_take_a_cron_dialect(app: App) {
    let wf = |extra: Value| {
        let mut b = json!({"name": "wq", "nodes": [{"id": "a", "handler": "noop"}]});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let created = app
        .post_json(
            "/openapi/workflows",
            &wf(json!({"cronExpr": "0 0 2 ? * 2 *", "cronDialect": "quartz"})),
        )
        .await
        .ok(201);
    let w = &created["workflow"];
    assert_eq!(w["cronDialect"], "quartz", "{created}");
    assert!(monday_two(&w["nextTriggerAt"]), "{created}");
    let id = w["id"].as_str().unwrap();
    // Standard cron has no year field: the dialect alone cannot change.
    let path = format!("/openapi/workflows/{id}");
    let err = app
        .patch_json(&path, &json!({"version": 1, "cronDialect": "standard"}))
        .await
        .error(422, "invalid_cron");
    assert_eq!(err["field"], "cronExpr");
    let patched = app
        .patch_json(
            &path,
            &json!({"version": 1, "cronExpr": "0 0 2 ? * 2", "cronDialect": "standard"}),
        )
        .await
        .ok(200);
    assert_eq!(patched["cronDialect"], "standard");
    assert!(!monday_two(&patched["nextTriggerAt"]), "Tuesdays now");

    let err = app
        .post_json(
            "/openapi/workflows",
            &wf(json!({"cronExpr": "0 0 2 ? * 2"})),
        )
        .await
        .error(422, "invalid_field");
    assert_names_both_readings(&err);
    let err = app
        .post_json("/openapi/workflows", &wf(json!({"cronDialect": "quartz"})))
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "cronDialect");
}

pub async fn the_openapi_document_describes_cron_dialect(app: App) {
    let doc = app.get("/openapi.json").await.ok(200);
    let schemas = &doc["components"]["schemas"];
    for schema in [
        "CreateJobRequest",
        "PatchJobRequest",
        "JobView",
        "SchedulePreviewRequest",
        "SchedulePreview",
        "CreateWorkflowRequest",
        "PatchWorkflowRequest",
    ] {
        let field = &schemas[schema]["properties"]["cronDialect"];
        let text = field.to_string();
        assert!(
            text.contains("\"standard\"") && text.contains("\"quartz\""),
            "{schema}: {field}"
        );
    }
    assert!(schemas["SchedulePreview"]["properties"]["description"].is_object());
}
