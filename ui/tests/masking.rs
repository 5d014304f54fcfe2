//! Issue 44: no dashboard page shows a secret, for any role. A job and a
//! workflow whose params carry secrets under every spelling of a sensitive
//! name (and one copied into `message`), with executions echoing them
//! (JSON-escaped too) in outputs, errors, log lines and callback errors;
//! every GET page of the dashboard is read with a session of each role.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use kairos_api::auth::keys;
use kairos_api::{ApiConfig, AppState};
use kairos_core::callback::CallbackAttempt;
use kairos_core::protocol::{LogLevel, LogLine, LogMsg, PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::sensitive::MASK;
use kairos_core::store::{
    CallbackNext, CallbackStore, Claim, Dispatch, DispatchScope, JobStore, LogLimits, LogStore,
    TenantStore,
};
use kairos_core::tenant::{Role, Tenant, TenantLimits};
use kairos_core::time::now_ms;
use kairos_store_sql::SqlStore;
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

/// Every secret holds this, so that any part of one is found on a page.
const MARK: &str = "S3CR3T";

fn secret_params() -> Value {
    json!({
        "url": "https://api.example.test/report",
        "headers": {"Authorization": "Bearer S3CR3T-bearer-09", "X-Api-Key": "S3CR3T-xapikey-10"},
        "apikey": "S3CR3T-apikey-01",
        "accesstoken": "S3CR3T-accesstoken-02",
        "clientsecret": "S3CR3T-clientsecret-03",
        "PassWord": "S3CR3T-PassWord-04",
        "password2": "S3CR3T-password2-05",
        "passwd": "S3CR3T-passwd-06",
        "pwd": "S3CR3T-pwd-07",
        "privateKey": "S3CR3T-privateKey-08",
        "password": r#"S3CR3T-"quoted\slash-11"#,
        "message": "log in with S3CR3T-passwd-06 please",
        "greeting": "visible-value",
    })
}

async fn store() -> SqlStore {
    let store = SqlStore::connect(&kairos_testkit::sqlite_temp_url())
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    store
}

async fn key(store: &SqlStore, role: Role) -> String {
    let t = Tenant {
        id: "default".into(),
        callback_secret: None,
        previous_secret: None,
        previous_valid_until: None,
        limits: TenantLimits::default(),
        created_at: now_ms(),
    };
    store.tenant_create(&t).await.expect("tenant");
    let issued = keys::issue("default", role, None, None, now_ms());
    assert!(store.api_key_create(&issued.key).await.expect("key"));
    issued.token
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, Vec<String>, String) {
    let res = router.clone().oneshot(req).await.expect("infallible");
    let status = res.status();
    let cookies = res
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let body = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, cookies, String::from_utf8_lossy(&body).into_owned())
}

/// `POST path` with a JSON body through the API as `key`; the answer.
async fn api_post(api: &Router, key: &str, path: &str, body: &Value) -> Value {
    let req = Request::post(path)
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let (status, _, body) = call(api, req).await;
    assert!(status.is_success(), "{path}: {status} {body}");
    serde_json::from_str(&body).unwrap()
}

/// Logs in with `key`; the session id.
async fn session(ui: &Router, key: &str) -> String {
    let req = Request::get("/ui/login")
        .header(header::HOST, "kairos.test")
        .body(Body::empty())
        .unwrap();
    let form = call(ui, req).await.2;
    let csrf = form
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a token")
        .to_string();
    let req = Request::post("/ui/login")
        .header(header::HOST, "kairos.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, format!("kairos_login_csrf={csrf}"))
        .body(Body::from(format!("csrf={csrf}&key={key}")))
        .unwrap();
    call(ui, req)
        .await
        .1
        .iter()
        .find_map(|c| c.strip_prefix("kairos_session="))
        .map(|c| c.split(';').next().unwrap().to_string())
        .expect("a session")
}

/// Logs, a result of `kind` and a failed callback attempt for `exec`, all
/// echoing the params.
async fn finish(store: &SqlStore, exec: &str, kind: ResultKind) {
    let text = secret_params().to_string();
    let logs = LogMsg {
        v: PROTOCOL_VERSION,
        execution_id: exec.to_string(),
        attempt: 1,
        worker_id: "w-1".into(),
        lines: vec![LogLine {
            at: now_ms(),
            level: LogLevel::Info,
            message: format!("sending {text}"),
        }],
        progress: None,
    };
    store
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
        output: ok.then(
            || json!({"status": 200, "body": {"request": text, "apikey": "S3CR3T-apikey-01"}}),
        ),
        error: (!ok).then(|| format!("HTTP 401 for {text}")),
        at: now_ms(),
        retryable: Some(false),
        incarnation: None,
    };
    store.results_apply(&[result], now_ms()).await.unwrap();
    let due = store
        .callbacks_claim_due("relay-test", now_ms(), 60_000, 10)
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
            error: Some(format!("HTTP 400: the receiver answered {text}")),
        };
        store
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

/// Claims the job's trigger as the dispatcher does, as execution `exec`.
async fn claim(store: &SqlStore, job_id: &str, exec: &str) -> String {
    let job = store.job_get("default", job_id).await.unwrap().unwrap();
    let due = job.next_trigger_at.unwrap();
    let claim = Claim {
        shard: Default::default(),
        job: Arc::new(job),
        scheduled_at: due,
        next_trigger_at: None,
        execution_id: exec.to_string(),
        worker_id: None,
    };
    let won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[claim], now_ms().max(due))
        .await
        .unwrap()
        .work;
    won[0].execution_id.clone()
}

#[tokio::test]
async fn no_dashboard_page_shows_a_secret_to_any_role() {
    let store = store().await;
    let state = AppState::new(Arc::new(store.clone()), ApiConfig::default());
    let api = kairos_api::router(state.clone());
    let ui = kairos_ui::router(state);
    let op = key(&store, Role::Operator).await;
    let body = json!({"jobName": "report", "jobHandler": "http", "params": secret_params(),
                      "callbackUrl": "https://example.com/hooks/kairos"});
    let job = api_post(&api, &op, "/openapi/jobs", &body).await["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let ok = claim(&store, &job, "01900000-0000-7000-8000-000000000001").await;
    finish(&store, &ok, ResultKind::Succeeded).await;
    let failing = api_post(&api, &op, "/openapi/jobs", &body).await["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let failed = claim(&store, &failing, "01900000-0000-7000-8000-000000000002").await;
    finish(&store, &failed, ResultKind::Failed).await;
    let wf = api_post(
        &api,
        &op,
        "/openapi/workflows",
        &json!({"name": "wf", "nodes": [{"id": "call", "handler": "http", "params": secret_params()}]}),
    )
    .await;
    let workflow = wf["workflow"]["id"].as_str().unwrap().to_string();
    let run = wf["run"]["id"].as_str().unwrap().to_string();

    let mut pages = vec![
        "/ui/overview".to_string(),
        "/ui/overview/live".to_string(),
        "/ui/jobs".to_string(),
        "/ui/executions".to_string(),
        "/ui/executions/export?format=csv".to_string(),
        "/ui/executions/export?format=json".to_string(),
        "/ui/workflows".to_string(),
        format!("/ui/workflows/{workflow}"),
        format!("/ui/workflows/{workflow}/runs/{run}"),
        "/ui/workers".to_string(),
        "/ui/admin/keys".to_string(),
        "/ui/admin/audit".to_string(),
    ];
    for j in [&job, &failing] {
        pages.push(format!("/ui/jobs/{j}"));
        pages.push(format!("/ui/jobs/{j}/live"));
        pages.push(format!("/ui/jobs/{j}/edit"));
    }
    for e in [&ok, &failed] {
        pages.push(format!("/ui/executions/{e}"));
        pages.push(format!("/ui/executions/{e}/live"));
        pages.push(format!("/ui/executions/{e}/tail"));
    }
    for role in [Role::Read, Role::Write, Role::Operator] {
        let session = session(&ui, &key(&store, role).await).await;
        let mut masked = 0;
        for page in &pages {
            let req = Request::get(page.as_str())
                .header(header::HOST, "kairos.test")
                .header(header::COOKIE, format!("kairos_session={session}"))
                .body(Body::empty())
                .unwrap();
            let (status, _, body) = call(&ui, req).await;
            assert!(
                !body.to_uppercase().contains(MARK),
                "{role:?} GET {page} ({status}) shows a secret: {body}"
            );
            masked += usize::from(status == StatusCode::OK && body.contains(MASK));
        }
        assert!(masked >= 6, "{role:?}: {masked} pages showed masked values");
    }
    // The job page shows what is not secret, and the copy in `message`
    // masked.
    let session = session(&ui, &key(&store, Role::Read).await).await;
    let req = Request::get(format!("/ui/jobs/{job}"))
        .header(header::HOST, "kairos.test")
        .header(header::COOKIE, format!("kairos_session={session}"))
        .body(Body::empty())
        .unwrap();
    let page = call(&ui, req).await.2;
    assert!(page.contains("visible-value"), "{page}");
    assert!(
        page.contains(&format!("log in with {MASK} please")),
        "{page}"
    );
}
