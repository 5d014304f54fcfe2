//! The OpenAPI document tells the truth: real responses of every documented
//! route — successes and the errors a caller can provoke — are documented
//! for their status, and their bodies validate against the schema the
//! document gives for it (JSON Schema 2020-12, as OpenAPI 3.1 uses).

use super::callbacks::{attempt_once, succeed_first_trigger};
use super::support::{App, Resp, one_shot, spawn_app_config};
use kairos_api::ApiConfig;
use kairos_core::store::CallbackNext;
use kairos_core::tenant::Role;
use serde_json::{Value, json};

/// Checks responses against one document.
struct Contract {
    doc: Value,
    checked: std::cell::RefCell<Vec<String>>,
}

impl Contract {
    async fn load(app: &App) -> Contract {
        Contract {
            doc: app.with_token(None).get("/openapi.json").await.ok(200),
            checked: Default::default(),
        }
    }

    /// Asserts `resp` is documented for `method path` and its body matches.
    fn check(&self, method: &str, path: &str, resp: &Resp) {
        let status = resp.status.as_str();
        let op = &self.doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is not documented");
        let documented = &op["responses"][status];
        assert!(
            documented.is_object(),
            "{method} {path} answered {status}, which the document does not list: {}",
            String::from_utf8_lossy(&resp.body)
        );
        let media = &documented["content"];
        let Some((content_type, media)) = media.as_object().and_then(|m| m.iter().next()) else {
            assert!(
                resp.body.is_empty(),
                "{method} {path} {status}: undocumented body"
            );
            return;
        };
        if content_type != "application/json" {
            return;
        }
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": self.doc["components"],
            "allOf": [media["schema"]],
        });
        let validator = jsonschema::draft202012::new(&schema)
            .unwrap_or_else(|e| panic!("{method} {path} {status}: bad schema: {e}"));
        let body = resp.json();
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {path} {status} breaks the document:\n{}\nbody: {body}",
            errors.join("\n")
        );
        self.checked
            .borrow_mut()
            .push(format!("{method} {path} {status}"));
    }
}

pub async fn every_route_answers_as_documented(app: App) {
    let c = Contract::load(&app).await;
    let anon = app.with_token(None);
    let reader = app.as_new_key("default", Role::Read).await;

    // Operations.
    c.check("get", "/healthz", &anon.get("/healthz").await);
    c.check("get", "/readyz", &anon.get("/readyz").await);

    // Jobs of every kind, and their views.
    let cb = "https://example.com/hook";
    let one = app
        .create(&json!({"jobName": "one", "jobHandler": "noop", "callbackUrl": cb}))
        .await;
    let bodies = [
        json!({"jobName": "cron", "jobHandler": "noop", "cronExpr": "0 0 1 1 *", "timezone": "Europe/Berlin",
               "misfirePolicy": "skip", "overlapPolicy": "forbid", "clientRequestId": "c-1"}),
        json!({"jobName": "every", "jobHandler": "noop", "everyMs": 60000, "startAt": "2030-01-01T00:00:00Z",
               "endAt": "2031-01-01T00:00:00Z", "maxAttempts": 3, "timeoutMs": 1000}),
        json!({"jobName": "delay", "jobHandler": "sleep", "delayMs": 5000, "params": {"ms": 1}}),
    ];
    let mut ids = vec![one.clone()];
    for body in &bodies {
        let resp = app.post_json("/openapi/jobs", body).await;
        c.check("post", "/openapi/jobs", &resp);
        ids.push(resp.json()["jobId"].as_str().unwrap().to_string());
    }
    // Idempotent replay (200) and conflict (409).
    c.check(
        "post",
        "/openapi/jobs",
        &app.post_json("/openapi/jobs", &bodies[0]).await,
    );
    let mut changed = bodies[0].clone();
    changed["jobName"] = json!("other");
    c.check(
        "post",
        "/openapi/jobs",
        &app.post_json("/openapi/jobs", &changed).await,
    );
    for resp in [
        app.raw(
            "POST".parse().unwrap(),
            "/openapi/jobs",
            Some("application/json"),
            b"{".to_vec(),
        )
        .await,
        app.raw(
            "POST".parse().unwrap(),
            "/openapi/jobs",
            Some("text/plain"),
            b"{}".to_vec(),
        )
        .await,
        app.post_json("/openapi/jobs", &json!({"jobName": "x"}))
            .await,
        app.post_json(
            "/openapi/jobs",
            &json!({"jobName": "x", "jobHandler": "noop", "cronExpr": "nope"}),
        )
        .await,
        app.post_json(
            "/openapi/jobs",
            &json!({"jobName": "x", "jobHandler": "noop", "params": "x".repeat(70_000)}),
        )
        .await,
        anon.post_json("/openapi/jobs", &one_shot("x")).await,
        reader.post_json("/openapi/jobs", &one_shot("x")).await,
    ] {
        c.check("post", "/openapi/jobs", &resp);
    }
    // Bulk create: per-item results (created, invalid, replay), and the
    // request-level refusals.
    let batch = json!({"jobs": [
        one_shot("bulk-a"),
        {"jobName": "bulk-bad", "jobHandler": "noop", "cronExpr": "nope"},
        bodies[0].clone(),
    ]});
    c.check(
        "post",
        "/openapi/jobs/batch",
        &app.post_json("/openapi/jobs/batch", &batch).await,
    );
    c.check(
        "post",
        "/openapi/jobs/batch",
        &app.post_json("/openapi/jobs/batch", &json!({"jobs": []}))
            .await,
    );
    for id in &ids {
        c.check(
            "get",
            "/openapi/jobs/{id}",
            &app.get(&format!("/openapi/jobs/{id}")).await,
        );
    }
    c.check(
        "get",
        "/openapi/jobs/{id}",
        &app.get("/openapi/jobs/nope").await,
    );
    c.check(
        "get",
        "/openapi/jobs/{id}",
        &anon.get(&format!("/openapi/jobs/{one}")).await,
    );
    c.check(
        "get",
        "/openapi/jobs",
        &app.get("/openapi/jobs?limit=2").await,
    );
    c.check(
        "get",
        "/openapi/jobs",
        &app.get("/openapi/jobs?status=paused").await,
    );
    c.check(
        "get",
        "/openapi/jobs",
        &app.get("/openapi/jobs?status=bogus").await,
    );
    c.check("get", "/openapi/jobs", &anon.get("/openapi/jobs").await);

    // Schedule preview: each kind, the create's refusals, and the roles.
    for body in [
        json!({"cronExpr": "0 30 2 * * *", "timezone": "Europe/Berlin", "count": 3}),
        json!({"everyMs": 60000, "startAt": "2030-01-01T00:00:00Z"}),
        json!({"delayMs": 5000}),
        json!({"triggerAt": "2030-01-01T00:00:00Z"}),
        json!({"cronExpr": "nope"}),
        json!({"timezone": "Mars/Base"}),
        json!({"everyMs": 5}),
        json!({"cronExpr": "* * * * * *", "count": 0}),
        json!({"cronExpr": "* * * * * *", "bogus": 1}),
    ] {
        c.check(
            "post",
            "/openapi/schedules/preview",
            &app.post_json("/openapi/schedules/preview", &body).await,
        );
    }
    let preview = app
        .post_json(
            "/openapi/schedules/preview",
            &json!({"cronExpr": "0 0 1 1 *", "timezone": "Europe/Berlin", "count": 2}),
        )
        .await
        .ok(200);
    assert_eq!(preview["kind"], "cron");
    let times = preview["nextTriggers"].as_array().unwrap();
    assert_eq!(times.len(), 2);
    assert!(
        times[0]["local"]
            .as_str()
            .unwrap()
            .ends_with("-01-01T00:00:00.000+01:00")
    );
    let bad = app
        .post_json("/openapi/schedules/preview", &json!({"cronExpr": "nope"}))
        .await;
    assert_eq!(
        (bad.status.as_u16(), bad.json()["error"]["code"].as_str()),
        (422, Some("invalid_cron"))
    );
    for resp in [
        app.raw(
            "POST".parse().unwrap(),
            "/openapi/schedules/preview",
            Some("application/json"),
            b"{".to_vec(),
        )
        .await,
        anon.post_json("/openapi/schedules/preview", &json!({}))
            .await,
        reader
            .post_json("/openapi/schedules/preview", &json!({}))
            .await,
    ] {
        c.check("post", "/openapi/schedules/preview", &resp);
    }

    // Executions, callbacks, redelivery.
    let exec = succeed_first_trigger(&app, &one).await;
    c.check(
        "get",
        "/openapi/jobs/{id}/executions",
        &app.get(&format!("/openapi/jobs/{one}/executions")).await,
    );
    c.check(
        "get",
        "/openapi/jobs/{id}/executions",
        &app.get("/openapi/jobs/nope/executions").await,
    );
    c.check(
        "get",
        "/openapi/jobs/{id}/executions",
        &app.get(&format!("/openapi/jobs/{one}/executions?limit=0"))
            .await,
    );
    c.check(
        "get",
        "/openapi/jobs/{id}",
        &app.get(&format!("/openapi/jobs/{one}")).await,
    );
    c.check(
        "get",
        "/openapi/executions/{id}",
        &app.get(&format!("/openapi/executions/{exec}")).await,
    );
    c.check(
        "get",
        "/openapi/executions/{id}",
        &app.get("/openapi/executions/nope").await,
    );
    c.check(
        "get",
        "/openapi/executions/{id}/logs",
        &app.get(&format!("/openapi/executions/{exec}/logs?limit=10"))
            .await,
    );
    c.check(
        "get",
        "/openapi/executions/{id}/logs",
        &app.get("/openapi/executions/nope/logs").await,
    );
    c.check(
        "get",
        "/openapi/executions/{id}/logs",
        &app.get(&format!("/openapi/executions/{exec}/logs?limit=0"))
            .await,
    );
    for query in [
        format!(
            "?status=succeeded,failed&jobId={one}&handler=noop&from=2020-01-01T00:00:00Z&limit=5"
        ),
        "?workerId=nobody&to=2020-01-01T00:00:00Z".to_string(),
        "?status=bogus".to_string(),
        "?from=yesterday".to_string(),
        "?from=2030-01-01T00:00:00Z&to=2020-01-01T00:00:00Z".to_string(),
        "?limit=0".to_string(),
    ] {
        c.check(
            "get",
            "/openapi/executions",
            &app.get(&format!("/openapi/executions{query}")).await,
        );
    }
    c.check(
        "get",
        "/openapi/executions",
        &anon.get("/openapi/executions").await,
    );
    let redeliver = format!("/openapi/executions/{exec}/callbacks/redeliver");
    c.check(
        "post",
        "/openapi/executions/{id}/callbacks/redeliver",
        &app.post(&redeliver).await,
    );
    attempt_once(&app, 500, Some("boom"), CallbackNext::Dead).await;
    c.check(
        "get",
        "/openapi/executions/{id}/callbacks",
        &app.get(&format!("/openapi/executions/{exec}/callbacks"))
            .await,
    );
    c.check(
        "get",
        "/openapi/executions/{id}/callbacks",
        &app.get("/openapi/executions/nope/callbacks").await,
    );
    c.check(
        "post",
        "/openapi/executions/{id}/callbacks/redeliver",
        &app.post(&redeliver).await,
    );
    c.check(
        "post",
        "/openapi/executions/{id}/callbacks/redeliver",
        &reader.post(&redeliver).await,
    );

    // Pause with a reason (shown on the job, cleared by resume) and refused bodies.
    let every = &ids[2];
    let paused = app
        .post_json(
            &format!("/openapi/jobs/{every}/pause"),
            &json!({"reason": "upstream maintenance"}),
        )
        .await;
    c.check("post", "/openapi/jobs/{id}/pause", &paused);
    assert_eq!(paused.json()["pauseReason"], "upstream maintenance");
    let shown = app.get(&format!("/openapi/jobs/{every}")).await.ok(200);
    assert_eq!(shown["pauseReason"], "upstream maintenance");
    // A JSON `null` body (what kairos-client sends) is no reason.
    let again = app
        .post_json(&format!("/openapi/jobs/{every}/pause"), &Value::Null)
        .await;
    c.check("post", "/openapi/jobs/{id}/pause", &again);
    assert_eq!(again.status.as_u16(), 409, "already paused");
    let resumed = app.post(&format!("/openapi/jobs/{every}/resume")).await;
    c.check("post", "/openapi/jobs/{id}/resume", &resumed);
    assert_eq!(resumed.json()["pauseReason"], Value::Null);
    let null_body = app
        .post_json(&format!("/openapi/jobs/{every}/pause"), &Value::Null)
        .await;
    assert_eq!(null_body.status.as_u16(), 200, "{:?}", null_body.body);
    assert_eq!(null_body.json()["pauseReason"], Value::Null);
    app.post(&format!("/openapi/jobs/{every}/resume"))
        .await
        .ok(200);
    for body in [json!({"reason": "x".repeat(501)}), json!({"why": "x"})] {
        let refused = app
            .post_json(&format!("/openapi/jobs/{every}/pause"), &body)
            .await;
        assert_eq!(refused.status.as_u16(), 422, "{body}");
        c.check("post", "/openapi/jobs/{id}/pause", &refused);
    }

    // Control and edits.
    let cron = &ids[1];
    for (path, method, uri) in [
        (
            "/openapi/jobs/{id}/pause",
            "post",
            format!("/openapi/jobs/{cron}/pause"),
        ),
        (
            "/openapi/jobs/{id}/pause",
            "post",
            format!("/openapi/jobs/{cron}/pause"),
        ),
        (
            "/openapi/jobs/{id}/resume",
            "post",
            format!("/openapi/jobs/{cron}/resume"),
        ),
        (
            "/openapi/jobs/{id}/resume",
            "post",
            format!("/openapi/jobs/{cron}/resume"),
        ),
        (
            "/openapi/jobs/{id}/trigger",
            "post",
            format!("/openapi/jobs/{cron}/trigger"),
        ),
        (
            "/openapi/jobs/{id}/trigger",
            "post",
            "/openapi/jobs/nope/trigger".to_string(),
        ),
        (
            "/openapi/jobs/{id}",
            "delete",
            format!("/openapi/jobs/{}", ids[3]),
        ),
        (
            "/openapi/jobs/{id}",
            "delete",
            format!("/openapi/jobs/{}", ids[3]),
        ),
    ] {
        let resp = match method {
            "post" => app.post(&uri).await,
            _ => app.delete(&uri).await,
        };
        c.check(method, path, &resp);
    }
    let job = app.get(&format!("/openapi/jobs/{cron}")).await.json();
    let version = job["version"].as_i64().unwrap();
    for body in [
        json!({"version": version, "cronExpr": "0 0 2 1 *", "params": {"a": 1}}),
        json!({"version": version, "params": null}),
        json!({"version": version + 1, "cronExpr": "bad"}),
        json!({"params": 1}),
    ] {
        c.check(
            "patch",
            "/openapi/jobs/{id}",
            &app.patch_json(&format!("/openapi/jobs/{cron}"), &body)
                .await,
        );
    }

    // Workers and the admin API.
    c.check(
        "get",
        "/openapi/workers",
        &app.get("/openapi/workers").await,
    );
    c.check(
        "get",
        "/openapi/workers",
        &reader.get("/openapi/workers").await,
    );
    // Concurrency limits.
    let limit = "/openapi/limits/{scope}/{name}";
    for (uri, body) in [
        ("/openapi/limits/handler/export", json!({"maxRunning": 5})),
        ("/openapi/limits/job/export", json!({"maxRunning": 5})),
        ("/openapi/limits/tenant/acme", json!({"maxRunning": 0})),
    ] {
        c.check("put", limit, &app.put_json(uri, &body).await);
    }
    c.check("get", "/openapi/limits", &app.get("/openapi/limits").await);
    c.check(
        "get",
        "/openapi/limits",
        &reader.get("/openapi/limits").await,
    );
    for _ in 0..2 {
        let gone = app.delete("/openapi/limits/handler/export").await;
        c.check("delete", limit, &gone);
    }
    let tenant = app
        .post_json(
            "/openapi/tenants",
            &json!({"tenantId": "acme", "maxLiveJobs": 5}),
        )
        .await;
    c.check("post", "/openapi/tenants", &tenant);
    c.check(
        "post",
        "/openapi/tenants",
        &app.post_json("/openapi/tenants", &json!({"tenantId": "acme"}))
            .await,
    );
    c.check(
        "post",
        "/openapi/tenants",
        &app.post_json("/openapi/tenants", &json!({"tenantId": "A B"}))
            .await,
    );
    c.check(
        "get",
        "/openapi/tenants",
        &app.get("/openapi/tenants").await,
    );
    let rotate = "/openapi/tenants/{id}/callback-secret";
    c.check(
        "post",
        rotate,
        &app.post_json("/openapi/tenants/acme/callback-secret", &json!({}))
            .await,
    );
    c.check(
        "post",
        rotate,
        &app.post_json("/openapi/tenants/nope/callback-secret", &json!({}))
            .await,
    );
    c.check(
        "post",
        rotate,
        &app.post_json(
            "/openapi/tenants/acme/callback-secret",
            &json!({"graceSeconds": 99999999}),
        )
        .await,
    );
    let limits = "/openapi/tenants/{id}/limits";
    for (tenant, body) in [
        (
            "acme",
            json!({"maxLiveJobs": 5, "actionRatePerSec": 5, "actionBurst": 10}),
        ),
        ("nope", json!({})),
        ("acme", json!({"actionBurst": 0})),
    ] {
        let uri = format!("/openapi/tenants/{tenant}/limits");
        c.check("put", limits, &app.put_json(&uri, &body).await);
    }
    let retention = "/openapi/tenants/{id}/retention";
    for (tenant, body) in [
        ("acme", json!({"executions": "7d", "audit": "400d"})),
        ("nope", json!({})),
        ("acme", json!({"jobs": "1mo"})),
    ] {
        let uri = format!("/openapi/tenants/{tenant}/retention");
        c.check("put", retention, &app.put_json(&uri, &body).await);
    }
    let kept = app.get("/openapi/tenants/acme/retention").await;
    assert_eq!(
        kept.json()["executions"],
        "7d",
        "the refused PUT changed nothing"
    );
    c.check("get", retention, &kept);
    c.check(
        "get",
        retention,
        &app.get("/openapi/tenants/nope/retention").await,
    );
    let key = app
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "acme", "role": "write", "name": "k",
                                                     "expiresAt": "2099-01-01T00:00:00Z"}),
        )
        .await;
    c.check("post", "/openapi/keys", &key);
    c.check(
        "post",
        "/openapi/keys",
        &app.post_json(
            "/openapi/keys",
            &json!({"tenantId": "nope", "role": "read"}),
        )
        .await,
    );
    c.check(
        "post",
        "/openapi/keys",
        &app.post_json("/openapi/keys", &json!({"tenantId": "acme", "role": "god"}))
            .await,
    );
    c.check("get", "/openapi/keys", &app.get("/openapi/keys").await);
    c.check(
        "get",
        "/openapi/keys",
        &app.get("/openapi/keys?tenant=acme").await,
    );
    // An unknown query parameter is a 422, documented like every query
    // error (found by the schemathesis run: it was missing here).
    let unknown = app.get("/openapi/keys?bogus=1").await;
    assert_eq!(unknown.status.as_u16(), 422);
    c.check("get", "/openapi/keys", &unknown);
    let prefix = key.json()["prefix"].as_str().unwrap().to_string();
    c.check(
        "delete",
        "/openapi/keys/{prefix}",
        &app.delete(&format!("/openapi/keys/{prefix}")).await,
    );
    c.check(
        "delete",
        "/openapi/keys/{prefix}",
        &app.delete("/openapi/keys/nope").await,
    );
    c.check(
        "get",
        "/openapi/audit",
        &app.get("/openapi/audit?limit=3").await,
    );
    c.check(
        "get",
        "/openapi/audit",
        &app.get("/openapi/audit?tenant=acme").await,
    );
    c.check(
        "get",
        "/openapi/audit",
        &app.get("/openapi/audit?limit=abc").await,
    );

    // The limits.
    let limited = spawn_app_config(
        app.store.clone(),
        ApiConfig {
            api_create_burst: 1,
            api_create_rate: 0.01,
            ..ApiConfig::default()
        },
        |s| s,
    )
    .await;
    c.check(
        "post",
        "/openapi/jobs",
        &limited.post_json("/openapi/jobs", &one_shot("a")).await,
    );
    c.check(
        "post",
        "/openapi/jobs",
        &limited.post_json("/openapi/jobs", &one_shot("b")).await,
    );
    let too_big = json!({"jobs": [one_shot("c"), one_shot("d")]});
    c.check(
        "post",
        "/openapi/jobs/batch",
        &limited.post_json("/openapi/jobs/batch", &too_big).await,
    );
    let actions = spawn_app_config(
        app.store.clone(),
        ApiConfig {
            api_action_burst: 1,
            api_action_rate: 0.01,
            ..ApiConfig::default()
        },
        |s| s,
    )
    .await;
    let job = actions.create(&one_shot("t")).await;
    for _ in 0..2 {
        let uri = format!("/openapi/jobs/{job}/trigger");
        c.check(
            "post",
            "/openapi/jobs/{id}/trigger",
            &actions.post(&uri).await,
        );
    }
    c.check(
        "post",
        "/openapi/executions/{id}/callbacks/redeliver",
        &actions
            .post("/openapi/executions/x/callbacks/redeliver")
            .await,
    );

    workflow_routes(&c, &app, &reader).await;

    // Every documented operation was exercised.
    let checked = c.checked.borrow();
    for (path, item) in c.doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if path == "/metrics" {
                continue; // text/plain; needs the process-wide recorder (ops tests)
            }
            let prefix = format!("{method} {path} ");
            assert!(
                checked.iter().any(|c| c.starts_with(&prefix)),
                "{method} {path} was never checked"
            );
        }
    }
}

/// The workflow routes (issue 34), each success and a provoked error.
async fn workflow_routes(c: &Contract, app: &App, reader: &App) {
    let created = app
        .post_json("/openapi/workflows", &super::workflows::diamond("c"))
        .await;
    c.check("post", "/openapi/workflows", &created);
    let wf = created.json()["workflow"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let run = created.json()["run"]["id"].as_str().unwrap().to_string();
    let mut cyc = super::workflows::diamond("cyc");
    cyc["edges"] = json!([{"from": "a", "to": "b1"}, {"from": "b1", "to": "a"}]);
    c.check(
        "post",
        "/openapi/workflows",
        &app.post_json("/openapi/workflows", &cyc).await,
    );
    c.check(
        "post",
        "/openapi/workflows",
        &reader
            .post_json("/openapi/workflows", &super::workflows::diamond("r"))
            .await,
    );
    c.check(
        "get",
        "/openapi/workflows",
        &app.get("/openapi/workflows").await,
    );
    let one = format!("/openapi/workflows/{wf}");
    c.check("get", "/openapi/workflows/{id}", &app.get(&one).await);
    c.check(
        "get",
        "/openapi/workflows/{id}",
        &app.get("/openapi/workflows/x").await,
    );
    let triggered = app.post(&format!("{one}/trigger")).await;
    c.check("post", "/openapi/workflows/{id}/trigger", &triggered);
    c.check(
        "post",
        "/openapi/workflows/{id}/trigger",
        &app.post("/openapi/workflows/x/trigger").await,
    );
    c.check(
        "get",
        "/openapi/workflows/{id}/runs",
        &app.get(&format!("{one}/runs")).await,
    );
    c.check(
        "get",
        "/openapi/workflows/{id}/runs",
        &app.get("/openapi/workflows/x/runs").await,
    );
    let run_path = format!("{one}/runs/{run}");
    c.check(
        "get",
        "/openapi/workflows/{id}/runs/{runId}",
        &app.get(&run_path).await,
    );
    c.check(
        "get",
        "/openapi/workflows/{id}/runs/{runId}",
        &app.get(&format!("{one}/runs/x")).await,
    );
    let cancel = format!("{run_path}/cancel");
    c.check(
        "post",
        "/openapi/workflows/{id}/runs/{runId}/cancel",
        &app.post(&cancel).await,
    );
    c.check(
        "post",
        "/openapi/workflows/{id}/runs/{runId}/cancel",
        &app.post(&cancel).await,
    );
    c.check(
        "post",
        "/openapi/workflows/{id}/runs/{runId}/cancel",
        &app.post(&format!("{one}/runs/x/cancel")).await,
    );
    // Edit (the schedule fields of a job), pause, resume, and refusals.
    let edit = "/openapi/workflows/{id}";
    let patched = app
        .patch_json(
            &one,
            &json!({"version": 1, "everyMs": 60000, "startAt": "2999-01-01T00:00:00Z",
                    "misfirePolicy": "fireAll", "overlapPolicy": "replace"}),
        )
        .await;
    c.check("patch", edit, &patched);
    assert_eq!(patched.json()["overlapPolicy"], "replace");
    for body in [
        json!({"version": 2, "overlapPolicy": "never"}),
        json!({"version": 1, "name": "late"}),
        json!({"version": 2, "colour": "red"}),
    ] {
        c.check("patch", edit, &app.patch_json(&one, &body).await);
    }
    c.check(
        "patch",
        edit,
        &app.patch_json("/openapi/workflows/x", &json!({"version": 1}))
            .await,
    );
    for (action, doc) in [
        ("pause", "/openapi/workflows/{id}/pause"),
        ("pause", "/openapi/workflows/{id}/pause"),
        ("resume", "/openapi/workflows/{id}/resume"),
        ("resume", "/openapi/workflows/{id}/resume"),
    ] {
        c.check("post", doc, &app.post(&format!("{one}/{action}")).await);
        let unknown = format!("/openapi/workflows/x/{action}");
        c.check("post", doc, &app.post(&unknown).await);
    }
    c.check("delete", "/openapi/workflows/{id}", &app.delete(&one).await);
    c.check("delete", "/openapi/workflows/{id}", &app.delete(&one).await);

    // Child jobs.
    let parent = app.create(&one_shot("p")).await;
    let child = app.create(&one_shot("c")).await;
    let fu = format!("/openapi/jobs/{parent}/followups");
    let doc = "/openapi/jobs/{id}/followups";
    c.check("get", doc, &app.get(&fu).await);
    c.check("get", doc, &app.get("/openapi/jobs/x/followups").await);
    c.check(
        "put",
        doc,
        &app.put_json(&fu, &json!({"onSuccess": [child]})).await,
    );
    c.check(
        "put",
        doc,
        &app.put_json(&fu, &json!({"onSuccess": ["x"]})).await,
    );
    c.check(
        "put",
        doc,
        &app.put_json("/openapi/jobs/x/followups", &json!({})).await,
    );
}
