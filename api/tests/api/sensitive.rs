//! Issue 35: sensitive params. Read keys get values under sensitive key
//! names (at any depth, header maps included) and at the job's own
//! `sensitiveParams` paths masked, in jobs, executions (per job and across
//! jobs), events, logs and callback deliveries, where an echo of a value is
//! redacted too; write keys get the stored values and can
//! send masked params back without losing a secret; the list is validated
//! and configurable.

use super::support::{App, spawn_app_config};
use kairos_api::ApiConfig;
use kairos_core::callback::CallbackAttempt;
use kairos_core::protocol::{LogLevel, LogLine, LogMsg, PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::sensitive::MASK;
use kairos_core::store::{CallbackNext, CallbackStore, Dispatch, JobStore, LogLimits, LogStore};
use kairos_core::tenant::Role;
use kairos_core::time::now_ms;
use serde_json::{Value, json};

const AUTH: &str = "Bearer auth-secret-4f1c9e2a";
const TOKEN_PART: &str = "auth-secret-4f1c9e2a";
const PASSWORD: &str = "pw-secret-77aa";
const CUSTOM: &str = "custom-secret-b3";
const LISTED: &str = "listed-secret-c9";
const SECRETS: [&str; 4] = [TOKEN_PART, PASSWORD, CUSTOM, LISTED];

fn params() -> Value {
    json!({
        "url": "https://api.example.test/report",
        "headers": {"Authorization": AUTH, "Accept": "application/json", "X-Custom": CUSTOM},
        "db": {"user": "reporter", "password": PASSWORD},
        "list": ["first", LISTED],
        "greeting": "hello",
        "max_tokens": 512,
    })
}

fn job(name: &str) -> Value {
    json!({"jobName": name, "jobHandler": "http", "params": params(),
           "sensitiveParams": ["headers.X-Custom", "list.1"],
           "callbackUrl": "https://example.com/hooks/kairos"})
}

/// What the receiver of the callback answered: the body it was sent, which
/// holds the output.
fn callback_error() -> String {
    format!("HTTP 400: bad body, password {PASSWORD}")
}

/// Claims the job's trigger and applies a result of `kind`, as the
/// dispatcher would; the execution id.
async fn run(
    app: &App,
    job_id: &str,
    kind: ResultKind,
    output: Option<Value>,
    error: Option<&str>,
) -> String {
    let (exec, _) = super::support::claim_first(app, job_id).await;
    let lines = vec![LogLine {
        at: now_ms(),
        level: LogLevel::Info,
        message: format!("calling with {AUTH} and {PASSWORD}"),
    }];
    let logs = LogMsg {
        v: PROTOCOL_VERSION,
        execution_id: exec.clone(),
        attempt: 1,
        worker_id: "w-1".into(),
        lines,
        progress: None,
    };
    app.store
        .logs_append(&[logs], &LogLimits::default(), now_ms())
        .await
        .unwrap();
    let result = ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: exec.clone(),
        attempt: 1,
        worker_id: "w-1".into(),
        kind,
        output,
        error: error.map(str::to_string),
        at: now_ms(),
        retryable: Some(false),
        incarnation: None,
    };
    app.store.results_apply(&[result], now_ms()).await.unwrap();
    // The relay's first attempt at the callback the result queued fails.
    let due = app
        .store
        .callbacks_claim_due("relay-test", now_ms(), 1_000, 10)
        .await
        .unwrap();
    let cb = due
        .iter()
        .find(|c| c.subject.execution_id() == Some(exec.as_str()))
        .expect("a callback");
    let attempt = CallbackAttempt {
        attempt: 1,
        at: now_ms(),
        status_code: Some(400),
        latency_ms: 5,
        error: Some(callback_error()),
    };
    let next = CallbackNext::RetryAt(now_ms() + 3_600_000);
    app.store
        .callback_record_attempt(&cb.id, "relay-test", &attempt, next, now_ms())
        .await
        .unwrap();
    exec
}

/// Every answer a read key gets about the job and its executions.
async fn read_views(read: &App, job: &str, execs: &[&str]) -> Vec<(String, Value)> {
    let mut paths = vec![
        format!("/openapi/jobs/{job}"),
        "/openapi/jobs".to_string(),
        format!("/openapi/jobs/{job}/executions"),
        "/openapi/executions".to_string(),
        format!("/openapi/executions?jobId={job}&status=succeeded,failed"),
    ];
    for e in execs {
        paths.push(format!("/openapi/executions/{e}"));
        paths.push(format!("/openapi/executions/{e}/logs"));
        paths.push(format!("/openapi/executions/{e}/callbacks"));
    }
    let mut out = Vec::new();
    for p in paths {
        let body = read.get(&p).await.ok(200);
        out.push((p, body));
    }
    out
}

pub async fn read_keys_never_see_sensitive_values(app: App) {
    let id = app.create(&job("report")).await;
    let echo = json!({"status": 200, "body": {"seen": {"authorization": AUTH}, "note": format!("custom was {CUSTOM}"), "list": LISTED}});
    let ok = run(&app, &id, ResultKind::Succeeded, Some(echo), None).await;
    let failing = app.create(&job("report-2")).await;
    let failed = run(
        &app,
        &failing,
        ResultKind::Failed,
        None,
        Some(&format!(
            "HTTP 401 from the server, token {TOKEN_PART} refused"
        )),
    )
    .await;

    let read = app.as_new_key("default", Role::Read).await;
    for (job, exec) in [(&id, &ok), (&failing, &failed)] {
        for (path, body) in read_views(&read, job, &[exec.as_str()]).await {
            let text = body.to_string();
            for secret in SECRETS {
                assert!(
                    !text.contains(secret),
                    "{path} shows {secret:?} to a read key: {text}"
                );
            }
        }
    }
    let shown = read.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(
        shown["params"],
        json!({
            "url": "https://api.example.test/report",
            "headers": {"Authorization": MASK, "Accept": "application/json", "X-Custom": MASK},
            "db": {"user": "reporter", "password": MASK},
            "list": ["first", MASK],
            "greeting": "hello",
            "max_tokens": 512,
        })
    );
    assert_eq!(
        shown["sensitiveParams"],
        json!(["headers.X-Custom", "list.1"])
    );
    assert_eq!(
        shown["lastExecution"]["output"]["body"]["seen"]["authorization"],
        MASK
    );
    let error = read
        .get(&format!("/openapi/executions/{failed}"))
        .await
        .ok(200)["error"]
        .clone();
    assert_eq!(
        error,
        format!("HTTP 401 from the server, token {MASK} refused")
    );
    let log = read
        .get(&format!("/openapi/executions/{ok}/logs"))
        .await
        .ok(200);
    assert_eq!(
        log["items"][0]["message"],
        format!("calling with {MASK} and {MASK}")
    );
    // Across jobs: each execution redacted with its own job's values.
    let across = read.get("/openapi/executions").await.ok(200);
    let item = |page: &Value, exec: &str| {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["executionId"] == exec)
            .unwrap_or_else(|| panic!("{exec} listed: {page}"))
            .clone()
    };
    assert_eq!(
        item(&across, &ok)["output"]["body"]["seen"]["authorization"],
        MASK
    );
    assert_eq!(
        item(&across, &ok)["output"]["body"]["note"],
        format!("custom was {MASK}")
    );
    assert_eq!(
        item(&across, &failed)["error"],
        format!("HTTP 401 from the server, token {MASK} refused")
    );
    let cbs = read
        .get(&format!("/openapi/executions/{failed}/callbacks"))
        .await
        .ok(200);
    let masked_error = format!("HTTP 400: bad body, password {MASK}");
    assert_eq!(cbs["items"][0]["lastError"], masked_error.as_str());
    assert_eq!(
        cbs["items"][0]["attemptsLog"][0]["error"],
        masked_error.as_str()
    );

    // Write keys (and stronger) get the stored values: they copy and edit jobs.
    let write = app.as_new_key("default", Role::Write).await;
    for caller in [&write, &app] {
        let real = caller.get(&format!("/openapi/jobs/{id}")).await.ok(200);
        assert_eq!(real["params"], params());
        assert_eq!(
            real["lastExecution"]["output"]["body"]["seen"]["authorization"],
            AUTH
        );
        let across = caller.get("/openapi/executions").await.ok(200);
        assert_eq!(
            item(&across, &ok)["output"]["body"]["seen"]["authorization"],
            AUTH
        );
        assert_eq!(
            item(&across, &failed)["error"],
            format!("HTTP 401 from the server, token {TOKEN_PART} refused")
        );
        let cbs = caller
            .get(&format!("/openapi/executions/{failed}/callbacks"))
            .await
            .ok(200);
        assert_eq!(cbs["items"][0]["lastError"], callback_error());
    }
    // Workers too: what a dispatch carries is the stored job, untouched.
    assert_eq!(
        app.store
            .job_get("default", &id)
            .await
            .unwrap()
            .unwrap()
            .params,
        params()
    );

    // Params edited as shown (masked) keep every secret left masked.
    let cron = app
        .create(&json!({"jobName": "c", "jobHandler": "http", "params": params(),
                        "sensitiveParams": ["headers.X-Custom", "list.1"], "cronExpr": "0 0 0 1 1 *"}))
        .await;
    let as_read = read.get(&format!("/openapi/jobs/{cron}")).await.ok(200);
    let mut edited = as_read["params"].clone();
    edited["greeting"] = json!("bonjour");
    edited["db"]["password"] = json!("pw-new-1234");
    let patched = write
        .patch_json(
            &format!("/openapi/jobs/{cron}"),
            &json!({"version": as_read["version"], "params": edited}),
        )
        .await
        .ok(200);
    let mut expected = params();
    expected["greeting"] = json!("bonjour");
    expected["db"]["password"] = json!("pw-new-1234");
    assert_eq!(patched["params"], expected);
    assert_eq!(
        app.store
            .job_get("default", &cron)
            .await
            .unwrap()
            .unwrap()
            .params,
        expected
    );
    // The job's list can change; a bad one is refused naming the field.
    let v = patched["version"].clone();
    let cleared = write
        .patch_json(
            &format!("/openapi/jobs/{cron}"),
            &json!({"version": v, "sensitiveParams": []}),
        )
        .await
        .ok(200);
    assert_eq!(cleared["sensitiveParams"], json!([]));
    let listed = read.get(&format!("/openapi/jobs/{cron}")).await.ok(200);
    assert_eq!(
        listed["params"]["headers"]["X-Custom"], CUSTOM,
        "no longer marked"
    );
    assert_eq!(
        listed["params"]["headers"]["Authorization"], MASK,
        "still a sensitive name"
    );
    for bad in [json!(["a..b"]), json!([""]), json!(vec!["p"; 65])] {
        let mut body = job("bad");
        body["sensitiveParams"] = bad;
        let err = app
            .post_json("/openapi/jobs", &body)
            .await
            .error(422, "invalid_field");
        assert_eq!(err["field"], "sensitiveParams", "{err}");
    }
}

pub async fn the_sensitive_names_are_configurable(app: App) {
    // The field is documented where it is sent and where it is read.
    let doc = app.get("/openapi.json").await.ok(200);
    for schema in ["CreateJobRequest", "PatchJobRequest", "JobView"] {
        let field = &doc["components"]["schemas"][schema]["properties"]["sensitiveParams"];
        assert!(field.is_object(), "{schema} documents sensitiveParams");
    }

    let config = ApiConfig {
        api_sensitive_params: vec!["pin".into()],
        ..ApiConfig::default()
    };
    let custom = spawn_app_config(app.store.clone(), config, |s| s).await;
    let id = custom
        .create(&json!({"jobName": "p", "jobHandler": "noop",
                        "params": {"card_pin": "9876", "password": "plain-here"}}))
        .await;
    let read = custom.as_new_key("default", Role::Read).await;
    let shown = read.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(
        shown["params"],
        json!({"card_pin": MASK, "password": "plain-here"})
    );
    // None configured: only the job's own paths are masked.
    let none = ApiConfig {
        api_sensitive_params: Vec::new(),
        ..ApiConfig::default()
    };
    let bare = spawn_app_config(app.store.clone(), none, |s| s).await;
    let read = bare.as_new_key("default", Role::Read).await;
    let shown = read.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(
        shown["params"],
        json!({"card_pin": "9876", "password": "plain-here"})
    );
}
