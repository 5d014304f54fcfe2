//! Issue 44: a read key sees no secret on any GET route. Every GET route of
//! the OpenAPI document is called with a read key, over a job, a workflow
//! and a run whose params carry secrets under every spelling of a sensitive
//! name, and whose executions echo them (JSON-escaped too) in outputs,
//! errors, log lines and callback errors; no response may hold one.

use super::support::{App, claim_first};
use kairos_core::callback::CallbackAttempt;
use kairos_core::protocol::{LogLevel, LogLine, LogMsg, PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::sensitive::MASK;
use kairos_core::store::{CallbackNext, CallbackStore, Dispatch, LogLimits, LogStore};
use kairos_core::tenant::{DEFAULT_TENANT, Role};
use kairos_core::time::now_ms;
use serde_json::{Value, json};

/// Every secret holds this, so that any part of one is found in a response.
const MARK: &str = "S3CR3T";
/// A secret a JSON text escapes (`"` and `\`).
const QUOTED: &str = r#"S3CR3T-"quoted\slash-11"#;

/// Params with a secret under each spelling issue 44 found unmasked, the
/// usual ones, and one copied into a param whose name is not sensitive.
pub fn secret_params() -> Value {
    json!({
        "url": "https://api.example.test/report?q=1&access_token=S3CR3T-url-12",
        "method": "POST",
        "headers": {
            "Authorization": "Bearer S3CR3T-bearer-09",
            "X-Api-Key": "S3CR3T-xapikey-10",
            "Accept": "application/json",
        },
        "apikey": "S3CR3T-apikey-01",
        "accesstoken": "S3CR3T-accesstoken-02",
        "clientsecret": "S3CR3T-clientsecret-03",
        "PassWord": "S3CR3T-PassWord-04",
        "password2": "S3CR3T-password2-05",
        "passwd": "S3CR3T-passwd-06",
        "pwd": "S3CR3T-pwd-07",
        "privateKey": "S3CR3T-privateKey-08",
        "password": QUOTED,
        "message": "log in with S3CR3T-passwd-06 please",
        "greeting": "hello",
        "max_tokens": 512,
    })
}

/// What a handler could echo: the params as JSON text (so `QUOTED` is
/// escaped) and a few secrets in plain text.
fn echo() -> (Value, String, String) {
    let text = secret_params().to_string();
    assert!(text.contains(r#"S3CR3T-\"quoted\\slash-11"#));
    let output = json!({"status": 200, "body": {"request": text, "headers": {"x-api-key": "S3CR3T-xapikey-10"}}});
    let error = format!("HTTP 401 for {text}");
    let log = "calling with Bearer S3CR3T-bearer-09, apikey S3CR3T-apikey-01".to_string();
    (output, error, log)
}

/// Applies a result of `kind` to execution `exec` at attempt 1, with a log
/// line, and a failed first callback attempt echoing the output.
async fn finish(app: &App, exec: &str, kind: ResultKind) {
    let (output, error, log) = echo();
    let logs = LogMsg {
        v: PROTOCOL_VERSION,
        execution_id: exec.to_string(),
        attempt: 1,
        worker_id: "w-1".into(),
        lines: vec![LogLine {
            at: now_ms(),
            level: LogLevel::Info,
            message: log,
        }],
        progress: None,
    };
    app.store
        .logs_append(&[logs], &LogLimits::default(), now_ms())
        .await
        .unwrap();
    let ok = kind == ResultKind::Succeeded;
    let result = ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: exec.to_string(),
        attempt: 1,
        worker_id: "w-1".into(),
        kind,
        output: ok.then_some(output.clone()),
        error: (!ok).then_some(error.clone()),
        at: now_ms(),
        retryable: Some(false),
        incarnation: None,
    };
    app.store.results_apply(&[result], now_ms()).await.unwrap();
    let due = app
        .store
        .callbacks_claim_due("relay-test", now_ms(), 1_000, 10)
        .await
        .unwrap();
    for cb in due
        .iter()
        .filter(|c| c.subject.execution_id() == Some(exec))
    {
        let attempt = CallbackAttempt {
            attempt: 1,
            at: now_ms(),
            status_code: Some(400),
            latency_ms: 5,
            error: Some(format!("HTTP 400: the receiver answered {output}")),
        };
        app.store
            .callback_record_attempt(
                &cb.id,
                "relay-test",
                &attempt,
                CallbackNext::RetryAt(now_ms() + 3_600_000),
                now_ms(),
            )
            .await
            .unwrap();
    }
}

/// The ids the walk substitutes into path templates.
struct Ids {
    jobs: Vec<String>,
    executions: Vec<String>,
    workflow: String,
    run: String,
}

/// Every concrete path for `template`; panics on a path parameter the walk
/// does not know, so a new route cannot be left out.
fn concrete(template: &str, ids: &Ids) -> Vec<String> {
    let mut out = vec![template.to_string()];
    let mut bind = |param: &str, values: &[String]| {
        out = out
            .iter()
            .flat_map(|p| {
                if p.contains(param) {
                    values.iter().map(|v| p.replacen(param, v, 1)).collect()
                } else {
                    vec![p.clone()]
                }
            })
            .collect();
    };
    if template.starts_with("/openapi/jobs/") {
        bind("{id}", &ids.jobs);
    } else if template.starts_with("/openapi/executions/") {
        bind("{id}", &ids.executions);
    } else if template.starts_with("/openapi/workflows/") {
        bind("{id}", std::slice::from_ref(&ids.workflow));
        bind("{runId}", std::slice::from_ref(&ids.run));
    } else if template.starts_with("/openapi/tenants/") {
        // The key's own tenant: a tenant's settings (operators only).
        bind("{id}", &[DEFAULT_TENANT.to_string()]);
    }
    for p in &out {
        assert!(
            !p.contains('{'),
            "GET {template}: the walk does not know its path parameters; teach it"
        );
    }
    out
}

pub async fn read_keys_see_no_secret_on_any_get_route(app: App) {
    // Two jobs: one execution succeeds, the other fails.
    let body = json!({"jobName": "report", "jobHandler": "http", "params": secret_params(),
                      "callbackUrl": "https://example.com/hooks/kairos"});
    let job = app.create(&body).await;
    let (ok, _) = claim_first(&app, &job).await;
    finish(&app, &ok, ResultKind::Succeeded).await;
    let failing = app.create(&body).await;
    let (failed, _) = claim_first(&app, &failing).await;
    finish(&app, &failed, ResultKind::Failed).await;

    // A workflow whose node carries the same params, with a run.
    let created = app
        .post_json(
            "/openapi/workflows",
            &json!({"name": "wf", "callbackUrl": "https://example.com/hooks/wf",
                    "nodes": [{"id": "call", "handler": "http", "params": secret_params()},
                              {"id": "notify", "handler": "noop",
                               "params": {"text": "the key was S3CR3T-apikey-01"}}],
                    "edges": [{"from": "call", "to": "notify"}]}),
        )
        .await
        .ok(201);
    let workflow = created["workflow"]["id"].as_str().unwrap().to_string();
    let run = created["run"]["id"].as_str().unwrap().to_string();
    let detail = app
        .get(&format!("/openapi/workflows/{workflow}/runs/{run}"))
        .await
        .ok(200);
    let node_exec = detail["nodes"][0]["executionId"]
        .as_str()
        .expect("the root node's execution")
        .to_string();
    finish(&app, &node_exec, ResultKind::Succeeded).await;
    let node_job = app
        .get(&format!("/openapi/executions/{node_exec}"))
        .await
        .ok(200)["jobId"]
        .as_str()
        .unwrap()
        .to_string();

    // The stored values are there: an operator sees them, so the walk below
    // cannot pass by having nothing to hide.
    for path in [
        format!("/openapi/jobs/{job}"),
        format!("/openapi/workflows/{workflow}"),
        format!("/openapi/executions/{ok}"),
        format!("/openapi/executions/{failed}"),
        format!("/openapi/executions/{node_exec}"),
        format!("/openapi/executions/{ok}/logs"),
        format!("/openapi/executions/{failed}/callbacks"),
    ] {
        let r = app.get(&path).await;
        assert!(
            String::from_utf8_lossy(&r.body).contains(MARK),
            "{path} shows the stored values to an operator: {r:?}"
        );
    }

    let ids = Ids {
        jobs: vec![job.clone(), failing, node_job],
        executions: vec![ok, failed, node_exec],
        workflow,
        run,
    };
    let read = app.as_new_key("default", Role::Read).await;
    let doc = read.get("/openapi.json").await.ok(200);
    let mut walked = 0;
    let mut shown = 0;
    for (template, item) in doc["paths"].as_object().expect("paths") {
        if item.get("get").is_none() {
            continue;
        }
        for path in concrete(template, &ids) {
            let r = read.get(&path).await;
            let body = String::from_utf8_lossy(&r.body).to_string();
            assert!(
                !body.to_uppercase().contains(MARK),
                "GET {path} ({}) shows a secret to a read key: {body}",
                r.status
            );
            walked += 1;
            shown += usize::from(r.status.is_success() && body.contains(MASK));
        }
    }
    assert!(walked >= 20, "every GET route walked ({walked})");
    // Jobs, workflows, executions (3 ways each), logs, callbacks: masked,
    // not missing.
    assert!(shown >= 10, "{shown} answers showed masked values");

    let wf = read
        .get(&format!("/openapi/workflows/{}", ids.workflow))
        .await
        .ok(200);
    let params = &wf["nodes"][0]["params"];
    assert_eq!(params["headers"]["Authorization"], MASK);
    assert_eq!(params["headers"]["X-Api-Key"], MASK);
    assert_eq!(params["headers"]["Accept"], "application/json");
    assert_eq!(params["message"], format!("log in with {MASK} please"));
    assert_eq!(params["max_tokens"], 512);
    // Another node's copy of it too.
    assert_eq!(
        wf["nodes"][1]["params"]["text"],
        format!("the key was {MASK}")
    );
}
