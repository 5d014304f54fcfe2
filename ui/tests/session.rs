//! Issue 35, over a real SQLite store and the dashboard's router: sessions
//! live in the database (a second router over the same store, as after a
//! restart or on another API instance, serves them; logout and a revoked key
//! end them everywhere), a deep link survives the login (and only our own
//! paths are followed), unknown pages are an HTML 404, the favicon is
//! served, and every role sees sensitive params masked in pages, and their
//! echoes redacted wherever execution data is shown (the execution page and
//! its live regions, the log tail, the CSV and JSON export, the overview).

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use kairos_api::auth::keys;
use kairos_api::{ApiConfig, AppState};
use kairos_core::callback::CallbackAttempt;
use kairos_core::protocol::{LogLevel, LogLine, LogMsg, PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::sensitive::MASK;
use kairos_core::store::DispatchScope;
use kairos_core::store::{
    CallbackNext, CallbackStore, Claim, Dispatch, DispatchWork, JobStore, LogLimits, LogStore,
    TenantStore,
};
use kairos_core::tenant::{Role, Tenant, TenantLimits};
use kairos_core::time::now_ms;
use kairos_store_sql::SqlStore;
use std::sync::Arc;
use tower::ServiceExt;

/// An answer: status, `Location`, `Set-Cookie`s, content type, body.
struct Answer {
    status: StatusCode,
    location: Option<String>,
    cookies: Vec<String>,
    kind: String,
    body: String,
}

async fn store() -> SqlStore {
    let store = SqlStore::connect(&kairos_testkit::sqlite_temp_url())
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    store
}

/// A dashboard over `store`, as one `kairos api` process serves it.
fn instance(store: &SqlStore) -> Router {
    kairos_ui::router(AppState::new(Arc::new(store.clone()), ApiConfig::default()))
}

async fn key(store: &SqlStore, tenant: &str, role: Role) -> String {
    let t = Tenant {
        id: tenant.into(),
        callback_secret: None,
        previous_secret: None,
        previous_valid_until: None,
        limits: TenantLimits::default(),
        created_at: now_ms(),
    };
    store.tenant_create(&t).await.expect("tenant");
    let issued = keys::issue(tenant, role, None, None, now_ms());
    assert!(store.api_key_create(&issued.key).await.expect("key"));
    issued.token
}

async fn send(router: &Router, req: Request<Body>) -> Answer {
    let res = router.clone().oneshot(req).await.expect("infallible");
    let status = res.status();
    let h = res.headers().clone();
    let text = |n: header::HeaderName| h.get(n).map(|v| v.to_str().unwrap().to_string());
    let body = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        location: text(header::LOCATION),
        cookies: h
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect(),
        kind: text(header::CONTENT_TYPE).unwrap_or_default(),
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

async fn get(router: &Router, path: &str, session: Option<&str>) -> Answer {
    let mut req = Request::get(path).header(header::HOST, "kairos.test");
    if let Some(s) = session {
        req = req.header(header::COOKIE, format!("kairos_session={s}"));
    }
    send(router, req.body(Body::empty()).unwrap()).await
}

/// Logs in with `key` through the login page, sending `next` along; the
/// answer of the login POST.
async fn login(router: &Router, key: &str, next: Option<&str>) -> Answer {
    let page = match next {
        Some(n) => format!("/ui/login?next={}", urlencode(n)),
        None => "/ui/login".to_string(),
    };
    let form = get(router, &page, None).await;
    let token = form
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a token")
        .to_string();
    let kept = form
        .body
        .split("name=\"next\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(|v| v.replace("&amp;", "&"));
    let mut body = format!("csrf={token}&key={key}");
    if let Some(n) = &kept {
        body.push_str(&format!("&next={}", urlencode(n)));
    }
    let req = Request::post("/ui/login")
        .header(header::HOST, "kairos.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, format!("kairos_login_csrf={token}"))
        .body(Body::from(body))
        .unwrap();
    send(router, req).await
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn session_of(a: &Answer) -> String {
    a.cookies
        .iter()
        .find_map(|c| c.strip_prefix("kairos_session="))
        .map(|c| c.split(';').next().unwrap().to_string())
        .filter(|id| !id.is_empty())
        .expect("a session cookie")
}

#[tokio::test]
async fn sessions_outlive_the_process_and_end_with_logout_or_revocation() {
    let store = store().await;
    let first = instance(&store);
    let write = key(&store, "default", Role::Write).await;
    let session = session_of(&login(&first, &write, None).await);
    let csrf_page = get(&first, "/ui/jobs", Some(&session)).await;
    assert_eq!(csrf_page.status, 200);

    // Another process over the same database (a restart, or a second API
    // instance behind a load balancer): the same cookie is logged in, with
    // the same CSRF token.
    let second = instance(&store);
    let again = get(&second, "/ui/jobs", Some(&session)).await;
    assert_eq!(again.status, 200, "{}", again.body);
    let token = |body: &str| {
        body.split("X-CSRF-Token&quot;:&quot;")
            .nth(1)
            .map(|r| r[..64].to_string())
            .expect("a CSRF token in the page")
    };
    assert_eq!(token(&csrf_page.body), token(&again.body));
    // Nothing of the key is in the cookie or the database.
    assert_eq!(session.len(), 64);
    assert!(!write.contains(&session));

    // Logout on one instance ends the session on the other.
    let req = Request::post("/ui/logout")
        .header(header::COOKIE, format!("kairos_session={session}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("csrf={}", token(&again.body))))
        .unwrap();
    let out = send(&second, req).await;
    assert_eq!(out.status, 303);
    let gone = get(&first, "/ui/jobs", Some(&session)).await;
    assert_eq!(gone.status, 303);
    assert_eq!(
        gone.location.as_deref(),
        Some("/ui/login?next=%2Fui%2Fjobs")
    );

    // A revoked key's session stops at its next request, on every instance.
    let admin = key(&store, "default", Role::Admin).await;
    let session = session_of(&login(&first, &admin, None).await);
    assert_eq!(
        get(&second, "/ui/overview", Some(&session)).await.status,
        200
    );
    store
        .api_key_revoke(&admin[4..16], None, now_ms())
        .await
        .unwrap()
        .expect("revoked");
    for instance in [&first, &second] {
        let refused = get(instance, "/ui/overview", Some(&session)).await;
        assert_eq!(refused.status, 303);
        assert!(refused.location.unwrap().starts_with("/ui/login"));
    }
    // An id this dashboard never made is no session.
    let forged = get(&first, "/ui/jobs", Some(&"0".repeat(64))).await;
    assert_eq!(forged.status, 303);
}

#[tokio::test]
async fn the_deep_link_survives_login_and_only_our_own_pages_are_followed() {
    let store = store().await;
    let ui = instance(&store);
    let read = key(&store, "default", Role::Read).await;
    let asked = "/ui/jobs?status=paused&q=nightly";
    let out = get(&ui, asked, None).await;
    assert_eq!(out.status, 303);
    let to = out.location.expect("to the login page");
    assert_eq!(to, format!("/ui/login?next={}", urlencode(asked)));
    let page = get(&ui, &to, None).await;
    assert!(
        page.body
            .contains("name=\"next\" value=\"/ui/jobs?status=paused&amp;q=nightly\""),
        "{}",
        page.body
    );
    let done = login(&ui, &read, Some(asked)).await;
    assert_eq!(done.status, 303);
    assert_eq!(done.location.as_deref(), Some(asked));

    // Anywhere else is refused: the login goes to the overview.
    for evil in [
        "https://evil.example/",
        "//evil.example/ui/jobs",
        "/\\evil.example",
        "/openapi/jobs",
        "/ui/../openapi/jobs",
        "/ui/login",
    ] {
        let page = get(&ui, &format!("/ui/login?next={}", urlencode(evil)), None).await;
        assert!(
            !page.body.contains("name=\"next\""),
            "{evil}: {}",
            page.body
        );
        let done = login(&ui, &read, Some(evil)).await;
        assert_eq!(done.location.as_deref(), Some("/ui/overview"), "{evil}");
    }
    // A forged POST carrying a bad next directly is refused the same way.
    let form = get(&ui, "/ui/login", None).await;
    let token = form
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_string();
    let req = Request::post("/ui/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, format!("kairos_login_csrf={token}"))
        .body(Body::from(format!(
            "csrf={token}&key={read}&next={}",
            urlencode("https://evil.example/")
        )))
        .unwrap();
    assert_eq!(
        send(&ui, req).await.location.as_deref(),
        Some("/ui/overview")
    );
    // htmx polls without a session are told to load the login page, with the
    // page they were made from.
    let req = Request::get("/ui/overview/live")
        .header("hx-request", "true")
        .header("hx-current-url", "http://kairos.test/ui/overview")
        .body(Body::empty())
        .unwrap();
    let res = instance(&store).oneshot(req).await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["hx-redirect"].to_str().unwrap(),
        "/ui/login?next=%2Fui%2Foverview"
    );
}

#[tokio::test]
async fn unknown_pages_are_html_and_the_favicon_is_served() {
    let store = store().await;
    let ui = instance(&store);
    for path in ["/ui/nope", "/ui/jobs/x/nope", "/ui/assets-missing/x"] {
        let out = get(&ui, path, None).await;
        assert_eq!(out.status, 404, "{path}");
        assert!(out.kind.starts_with("text/html"), "{path}: {}", out.kind);
        assert!(out.body.contains("Page not found") && out.body.contains("/ui/login"));
        assert!(!out.body.contains("\"error\""), "not the API's JSON");
    }
    let session = session_of(&login(&ui, &key(&store, "default", Role::Read).await, None).await);
    let out = get(&ui, "/ui/nope", Some(&session)).await;
    assert_eq!(out.status, 404);
    assert!(out.body.contains("Page not found") && out.body.contains("aria-label=\"Main\""));
    // Without script nothing of the shortcuts shows: the help is a closed
    // dialog and its button is hidden until keys.js shows it.
    assert!(
        out.body.contains(
            "<dialog class=\"shortcuts\" id=\"shortcuts\" aria-labelledby=\"shortcuts-h\">"
        )
    );
    assert!(out.body.contains("data-shortcuts-open=\"\" hidden>"));
    let icon = get(&ui, "/ui/assets/favicon.svg", None).await;
    assert_eq!(
        (icon.status.as_u16(), icon.kind.as_str()),
        (200, "image/svg+xml")
    );
    assert!(icon.body.starts_with("<svg"));
    let ico = get(&ui, "/favicon.ico", None).await;
    assert_eq!(ico.status, 308);
    assert_eq!(ico.location.as_deref(), Some("/ui/assets/favicon.svg"));
    let page = get(&ui, "/ui/login", None).await;
    assert!(
        page.body
            .contains("rel=\"icon\" href=\"/ui/assets/favicon.svg\"")
    );
    assert!(page.body.contains("src=\"/ui/assets/keys.js\""));
    let js = get(&ui, "/ui/assets/keys.js", None).await;
    assert!(js.kind.starts_with("text/javascript") && js.body.contains("showModal"));
}

#[tokio::test]
async fn every_role_sees_sensitive_params_masked_in_pages() {
    let store = store().await;
    let ui = instance(&store);
    let op = key(&store, "default", Role::Operator).await;
    let api = kairos_api::router(AppState::new(Arc::new(store.clone()), ApiConfig::default()));
    let body = serde_json::json!({
        "jobName": "with-secrets", "jobHandler": "http", "cronExpr": "0 0 0 1 1 *",
        "params": {"headers": {"Authorization": "Bearer page-secret-1234"}, "pin": "7777-pin", "plain": "visible-value"},
        "sensitiveParams": ["pin"],
    });
    let req = Request::post("/openapi/jobs")
        .header(header::AUTHORIZATION, format!("Bearer {op}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = api.oneshot(req).await.unwrap();
    assert_eq!(res.status(), 201);
    let created: serde_json::Value = serde_json::from_slice(
        &axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    let id = created["jobId"].as_str().unwrap().to_string();
    for role in [Role::Read, Role::Write, Role::Operator] {
        let session = session_of(&login(&ui, &key(&store, "default", role).await, None).await);
        let mut pages = vec![format!("/ui/jobs/{id}"), "/ui/jobs".to_string()];
        if role != Role::Read {
            pages.push(format!("/ui/jobs/{id}/edit"));
        }
        for page in pages {
            let out = get(&ui, &page, Some(&session)).await;
            assert_eq!(out.status, 200, "{role:?} {page}");
            for secret in ["page-secret-1234", "7777-pin"] {
                assert!(!out.body.contains(secret), "{role:?} {page} shows {secret}");
            }
            if page.ends_with(&id) || page.ends_with("/edit") {
                assert!(out.body.contains(MASK) && out.body.contains("visible-value"));
            }
        }
    }
    // Saving the edit form as shown (masked) keeps the secrets.
    let session = session_of(&login(&ui, &key(&store, "default", Role::Write).await, None).await);
    let form = get(&ui, &format!("/ui/jobs/{id}/edit"), Some(&session)).await;
    let field = |name: &str| {
        let marker = format!("name=\"{name}\" value=\"");
        form.body
            .split(&marker)
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("field {name}"))
            .replace("&quot;", "\"")
    };
    let csrf = field("csrf");
    let orig = field("orig_params");
    let edited = orig.replace("visible-value", "changed-value");
    assert_ne!(orig, edited);
    let body = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("csrf", &csrf)
        .append_pair("version", &field("version"))
        .append_pair("params", &edited)
        .append_pair("orig_params", &orig)
        .finish();
    let req = Request::post(format!("/ui/jobs/{id}/edit"))
        .header(header::COOKIE, format!("kairos_session={session}"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(body))
        .unwrap();
    let saved = send(&ui, req).await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let stored = kairos_core::store::JobStore::job_get(&store, "default", &id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stored.params,
        serde_json::json!({"headers": {"Authorization": "Bearer page-secret-1234"}, "pin": "7777-pin", "plain": "changed-value"})
    );
}

/// The secrets of [`secret_params`], which no page may show.
const SECRETS: [&str; 2] = ["page-secret-1234", "7777-pin"];

/// Params with an `Authorization` header (a sensitive name) and a `pin`
/// the job marks sensitive.
fn secret_params() -> serde_json::Value {
    serde_json::json!({"headers": {"Authorization": "Bearer page-secret-1234"}, "pin": "7777-pin", "plain": "visible-value"})
}

/// Creates a job through the API with `key`; its id.
async fn create_job(store: &SqlStore, key: &str, body: serde_json::Value) -> String {
    let api = kairos_api::router(AppState::new(Arc::new(store.clone()), ApiConfig::default()));
    let req = Request::post("/openapi/jobs")
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let res = api.oneshot(req).await.unwrap();
    assert_eq!(res.status(), 201);
    let created: serde_json::Value = serde_json::from_slice(
        &axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap(),
    )
    .unwrap();
    created["jobId"].as_str().unwrap().to_string()
}

/// What a worker reports about one attempt.
struct Report {
    kind: ResultKind,
    output: Option<serde_json::Value>,
    error: Option<String>,
    retryable: bool,
    log: Option<String>,
}

/// Claims the job's trigger as the dispatcher does, as execution `exec`,
/// and applies the worker's `report` of attempt 1; what was dispatched.
async fn run(store: &SqlStore, job_id: &str, exec: &str, report: Report) -> DispatchWork {
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
    let mut won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[claim], now_ms().max(due))
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 1, "the claim wins");
    if let Some(message) = report.log {
        let logs = LogMsg {
            v: PROTOCOL_VERSION,
            execution_id: exec.to_string(),
            attempt: 1,
            worker_id: "w-1".into(),
            lines: vec![LogLine {
                at: now_ms(),
                level: LogLevel::Info,
                message,
            }],
            progress: None,
        };
        store
            .logs_append(&[logs], &LogLimits::default(), now_ms())
            .await
            .unwrap();
    }
    let result = ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: exec.to_string(),
        attempt: 1,
        worker_id: "w-1".into(),
        kind: report.kind,
        output: report.output,
        error: report.error,
        at: now_ms(),
        retryable: Some(report.retryable),
        incarnation: None,
    };
    store.results_apply(&[result], now_ms()).await.unwrap();
    won.remove(0)
}

#[tokio::test]
async fn every_role_sees_execution_data_redacted() {
    let store = store().await;
    let ui = instance(&store);
    let op = key(&store, "default", Role::Operator).await;
    let job = |name: &str, extra: serde_json::Value| {
        let mut body = serde_json::json!({
            "jobName": name, "jobHandler": "http", "params": secret_params(),
            "sensitiveParams": ["pin"],
        });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    // A run whose output, log line and callback error echo the secrets.
    let echo_job = create_job(
        &store,
        &op,
        job(
            "echoing",
            serde_json::json!({"callbackUrl": "https://example.com/hooks/kairos"}),
        ),
    )
    .await;
    let echo = "01900000-0000-7000-8000-000000000001";
    let sent = run(
        &store,
        &echo_job,
        echo,
        Report {
            kind: ResultKind::Succeeded,
            output: Some(serde_json::json!({
                "status": 200,
                "seen": {"authorization": "Bearer page-secret-1234"},
                "note": "pin was 7777-pin", "plain": "visible-value",
            })),
            error: None,
            retryable: false,
            log: Some("calling with Bearer page-secret-1234 and pin 7777-pin".into()),
        },
    )
    .await;
    // The worker got the real values.
    assert_eq!(sent.params, secret_params());
    let due = store
        .callbacks_claim_due("relay-test", now_ms(), 60_000, 10)
        .await
        .unwrap();
    assert_eq!(due.len(), 1, "the callback is queued");
    let attempt = CallbackAttempt {
        attempt: 1,
        at: now_ms(),
        status_code: Some(400),
        latency_ms: 5,
        error: Some("HTTP 400: the body held 7777-pin".into()),
    };
    store
        .callback_record_attempt(
            &due[0].id,
            "relay-test",
            &attempt,
            CallbackNext::RetryAt(now_ms() + 3_600_000),
            now_ms(),
        )
        .await
        .unwrap();
    // A first attempt that failed, its retry waiting: its error is in the
    // attempt timeline (rebuilt from the events), the events and the row.
    let retry_job = create_job(
        &store,
        &op,
        job(
            "retrying",
            serde_json::json!({"maxAttempts": 2, "retryBackoffMs": 3_600_000}),
        ),
    )
    .await;
    let retrying = "01900000-0000-7000-8000-000000000002";
    run(
        &store,
        &retry_job,
        retrying,
        Report {
            kind: ResultKind::Failed,
            output: None,
            error: Some("HTTP 401: token page-secret-1234 refused".into()),
            retryable: true,
            log: None,
        },
    )
    .await;
    // A failure for the overview's latest failures.
    let failed_job = create_job(&store, &op, job("failing", serde_json::json!({}))).await;
    let failed = "01900000-0000-7000-8000-000000000003";
    run(
        &store,
        &failed_job,
        failed,
        Report {
            kind: ResultKind::Failed,
            output: None,
            error: Some("login with pin 7777-pin refused".into()),
            retryable: false,
            log: None,
        },
    )
    .await;

    for role in [Role::Read, Role::Write, Role::Operator] {
        let session = session_of(&login(&ui, &key(&store, "default", role).await, None).await);
        // Each path with what it must show, masked, to prove the data is there.
        let pages = [
            (
                format!("/ui/executions/{echo}"),
                vec![MASK, "visible-value"],
            ),
            (
                format!("/ui/executions/{echo}/live"),
                vec![MASK, "visible-value"],
            ),
            (
                format!("/ui/executions/{echo}/live?part=history"),
                vec!["HTTP 400: the body held ••••••"],
            ),
            (
                format!("/ui/executions/{echo}/tail"),
                vec!["calling with •••••• and pin ••••••"],
            ),
            (
                format!("/ui/executions/{retrying}"),
                vec!["HTTP 401: token •••••• refused"],
            ),
            (
                format!("/ui/executions/{retrying}/live?part=history"),
                vec!["HTTP 401: token •••••• refused"],
            ),
            (
                "/ui/executions/export?format=csv&filtered=1".to_string(),
                vec![echo, retrying, failed, "visible-value", MASK],
            ),
            (
                "/ui/executions/export?format=json&filtered=1".to_string(),
                vec![echo, retrying, failed, "visible-value", MASK],
            ),
            (
                "/ui/overview".to_string(),
                vec!["login with pin •••••• refused"],
            ),
            (
                "/ui/overview/live".to_string(),
                vec!["login with pin •••••• refused"],
            ),
        ];
        for (page, shown) in pages {
            let out = get(&ui, &page, Some(&session)).await;
            assert_eq!(out.status, 200, "{role:?} {page}: {}", out.body);
            for secret in SECRETS {
                assert!(
                    !out.body.contains(secret),
                    "{role:?} {page} shows {secret}: {}",
                    out.body
                );
            }
            for text in shown {
                assert!(
                    out.body.contains(text),
                    "{role:?} {page} shows {text:?}: {}",
                    out.body
                );
            }
        }
        // The page's log, without script, is redacted like the tail.
        let page = get(&ui, &format!("/ui/executions/{echo}"), Some(&session)).await;
        assert!(page.body.contains("calling with •••••• and pin ••••••"));
        // The retry's first attempt, rebuilt from the events, shows its
        // error redacted in the timeline.
        let page = get(&ui, &format!("/ui/executions/{retrying}"), Some(&session)).await;
        let timeline = page
            .body
            .split("data-attempt=\"1\"")
            .nth(1)
            .and_then(|r| r.split("</li>").next())
            .expect("attempt 1 in the timeline");
        assert!(
            timeline.contains("HTTP 401: token •••••• refused"),
            "{timeline}"
        );
        assert!(
            page.body.contains("data-attempt=\"2\""),
            "the retry is attempt 2"
        );
    }
    // What the store keeps, and dispatches, is untouched.
    for id in [&echo_job, &retry_job, &failed_job] {
        let stored = store.job_get("default", id).await.unwrap().unwrap();
        assert_eq!(stored.params, secret_params());
    }
}
