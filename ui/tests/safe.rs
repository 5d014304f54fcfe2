//! Issue 44, "safe by construction", over the API's own router and a real
//! store: a NUL in an address is a clean 400 page on every database (never
//! PostgreSQL's 500), notices come from a fixed set and errors only with
//! the session's signature (a link cannot make the dashboard say
//! anything), a bulk confirmation acts on exactly what it showed, forms
//! keep what was typed after a refusal, and every POST route refuses a
//! read key and a missing CSRF token.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use kairos_api::auth::keys;
use kairos_api::{ApiConfig, AppState};
use kairos_core::store::TenantStore;
use kairos_core::tenant::{Role, Tenant, TenantLimits};
use kairos_core::time::now_ms;
use kairos_store_sql::SqlStore;
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

/// The databases a test runs on.
#[derive(Debug, Clone, Copy)]
enum Db {
    Sqlite,
    Mysql,
    Postgres,
}

struct Ui {
    router: Router,
    api: Router,
    store: SqlStore,
    /// Dropped with the test: the PostgreSQL database goes with it.
    _pg: Option<kairos_testkit::PgDatabase>,
}

/// A logged-in browser: its session cookie and CSRF token.
struct Session {
    id: String,
    csrf: String,
}

/// An answer: status, `Location`, content type, body.
struct Answer {
    status: StatusCode,
    location: String,
    kind: String,
    body: String,
}

/// The dashboard over a fresh database of kind `db`; `None` when that
/// service is not configured (testkit skips, or fails the test when
/// services are required).
async fn ui(db: Db) -> Option<Ui> {
    let (url, pg) = match db {
        Db::Sqlite => (kairos_testkit::sqlite_temp_url(), None),
        Db::Mysql => (kairos_testkit::mysql_fresh_database().await?, None),
        Db::Postgres => {
            let pg = kairos_testkit::postgres_fresh_database().await?;
            (pg.url().to_string(), Some(pg))
        }
    };
    let store = SqlStore::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    let state = AppState::new(Arc::new(store.clone()), ApiConfig::default());
    Some(Ui {
        router: kairos_ui::router(state.clone()),
        api: kairos_api::router(state),
        store,
        _pg: pg,
    })
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The value of the first hidden field `name` in `body`.
fn hidden(body: &str, name: &str) -> Option<String> {
    body.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(|v| v.replace("&quot;", "\"").replace("&amp;", "&"))
}

impl Ui {
    /// A new key of `role` in `tenant` (made if need be); its token.
    async fn key(&self, tenant: &str, role: Role) -> String {
        let t = Tenant {
            id: tenant.into(),
            callback_secret: None,
            previous_secret: None,
            previous_valid_until: None,
            limits: TenantLimits::default(),
            created_at: now_ms(),
        };
        // A second key of the tenant finds it made already.
        let _ = self.store.tenant_create(&t).await;
        let issued = keys::issue(tenant, role, None, None, now_ms());
        assert!(self.store.api_key_create(&issued.key).await.expect("key"));
        issued.token
    }

    async fn send(&self, req: Request<Body>) -> Answer {
        let res = self.router.clone().oneshot(req).await.expect("infallible");
        let status = res.status();
        let h = res.headers().clone();
        let text = |n: header::HeaderName| {
            h.get(n)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default()
        };
        let body = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        Answer {
            status,
            location: text(header::LOCATION),
            kind: text(header::CONTENT_TYPE),
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    /// Logs in with a new key of `role` in `tenant`.
    async fn session(&self, tenant: &str, role: Role) -> (Session, String) {
        let key = self.key(tenant, role).await;
        let page = self
            .send(
                Request::get("/ui/login")
                    .header(header::HOST, "kairos.test")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await;
        let token = hidden(&page.body, "csrf").expect("a login token");
        let req = Request::post("/ui/login")
            .header(header::HOST, "kairos.test")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::COOKIE, format!("kairos_login_csrf={token}"))
            .body(Body::from(format!("csrf={token}&key={key}")))
            .unwrap();
        let res = self.router.clone().oneshot(req).await.unwrap();
        let id = res
            .headers()
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|c| c.to_str().ok()?.strip_prefix("kairos_session="))
            .map(|c| c.split(';').next().unwrap().to_string())
            .find(|c| !c.is_empty())
            .expect("logged in");
        let mut s = Session {
            id,
            csrf: String::new(),
        };
        let overview = self.get("/ui/overview", &s).await;
        s.csrf = hidden(&overview.body, "csrf").expect("the logout form's token");
        (s, key)
    }

    async fn get(&self, path: &str, s: &Session) -> Answer {
        self.send(
            Request::get(path)
                .header(header::HOST, "kairos.test")
                .header(header::COOKIE, format!("kairos_session={}", s.id))
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// Posts `form` (already encoded) as session `s`.
    async fn post(&self, path: &str, s: &Session, form: &str) -> Answer {
        self.send(
            Request::post(path)
                .header(header::HOST, "kairos.test")
                .header(header::COOKIE, format!("kairos_session={}", s.id))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form.to_string()))
                .unwrap(),
        )
        .await
    }

    /// Calls the REST API with `key`; status and JSON answer.
    async fn api(&self, key: &str, method: Method, path: &str, body: Value) -> (u16, Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let res = self.api.clone().oneshot(req).await.unwrap();
        let status = res.status().as_u16();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// A job firing hourly, made with `key`; its id.
    async fn job(&self, key: &str, name: &str) -> String {
        let (status, created) = self
            .api(
                key,
                Method::POST,
                "/openapi/jobs",
                json!({"jobName": name, "jobHandler": "noop", "cronExpr": "0 0 * * * *"}),
            )
            .await;
        assert_eq!(status, 201, "{created}");
        created["jobId"].as_str().unwrap().to_string()
    }

    async fn status(&self, key: &str, id: &str) -> String {
        let (_, job) = self
            .api(key, Method::GET, &format!("/openapi/jobs/{id}"), json!({}))
            .await;
        job["status"].as_str().unwrap_or_default().to_string()
    }
}

#[tokio::test]
async fn a_nul_in_an_address_or_a_form_is_a_clean_400_on_every_database() {
    for db in [Db::Sqlite, Db::Mysql, Db::Postgres] {
        a_nul_is_a_clean_400_on(db).await;
    }
}

async fn a_nul_is_a_clean_400_on(db: Db) {
    let Some(ui) = ui(db).await else {
        return;
    };
    let (s, _) = ui.session("default", Role::Write).await;
    for path in [
        "/ui/jobs/a%00b",
        "/ui/jobs/a%00b/live",
        "/ui/jobs/a%00b/edit",
        "/ui/executions/a%00b",
        "/ui/executions/a%00b/live",
        "/ui/executions/a%00b/tail?after=1",
        "/ui/executions/0190/tail?after=%00",
        "/ui/workflows/a%00b",
        "/ui/workflows/a/runs/b%00",
        "/ui/jobs?q=a%00b",
        "/ui/jobs?handler=%00&cursor=x",
        "/ui/jobs?a%00=1",
        "/ui/executions?filtered=1&job=a%00b",
        "/ui/executions?worker=w%00",
        "/ui/executions/export?format=csv&job=%00",
        "/ui/admin/keys?tenant=%00",
        "/ui/admin/audit?cursor=%00",
        "/ui/no-such-page%00",
    ] {
        let a = ui.get(path, &s).await;
        assert_eq!(a.status, 400, "{db:?} {path}: {}", a.body);
        assert!(a.kind.starts_with("text/html"), "{db:?} {path}: {}", a.kind);
        assert!(a.body.contains("NUL"), "{db:?} {path}: {}", a.body);
    }
    // Logged out too (the login page's `next`).
    let a = ui
        .send(
            Request::get("/ui/login?next=/ui/jobs/%00")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(a.status, 400, "{db:?}");
    // A form holding one: the ids a bulk action looks up, the job to run again.
    let csrf = urlencode(&s.csrf);
    for (path, form) in [
        (
            "/ui/jobs/bulk",
            format!("csrf={csrf}&action=pause&ids=a%00b"),
        ),
        ("/ui/executions/rerun", format!("csrf={csrf}&job=a%00b")),
    ] {
        let a = ui.post(path, &s, &form).await;
        assert_eq!(a.status, 400, "{db:?} {path}: {}", a.body);
        assert!(a.kind.starts_with("text/html"), "{db:?} {path}");
    }
}

#[tokio::test]
async fn notices_come_from_a_fixed_set_and_errors_only_signed_by_the_session() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (s, key) = ui.session("default", Role::Write).await;
    let (other, _) = ui.session("default", Role::Write).await;
    let id = ui.job(&key, "notices").await;
    let page = format!("/ui/jobs/{id}");

    // A link from anywhere: nothing it says is shown.
    for (q, text) in [
        ("notice=Your+key+leaked%2C+call+555-0100", "555-0100"),
        ("notice=Created.", "Created."),
        ("error=Log+in+again+at+evil.example", "evil.example"),
        (
            "error=Log+in+again+at+evil.example&sig=00ff",
            "evil.example",
        ),
    ] {
        let a = ui.get(&format!("{page}?{q}"), &s).await;
        assert_eq!(a.status, 200);
        assert!(!a.body.contains(text), "{q}: shown");
        assert!(
            !a.body.contains("class=\"notice\"") && !a.body.contains("class=\"error-box\""),
            "{q}: a banner"
        );
    }
    // A known key shows its own text.
    let a = ui.get(&format!("{page}?notice=paused"), &s).await;
    assert!(
        a.body
            .contains("<p class=\"notice\" role=\"status\">Paused.</p>")
    );

    // An action's outcome: its notice by key.
    let csrf = urlencode(&s.csrf);
    let a = ui
        .post(
            &format!("{page}/action"),
            &s,
            &format!("csrf={csrf}&action=pause"),
        )
        .await;
    assert_eq!(a.status, 303);
    assert_eq!(a.location, format!("{page}?notice=paused"));
    // The API's refusal (cancelling is fine, so: trigger a paused job):
    // shown to this session only.
    let a = ui
        .post(
            &format!("{page}/action"),
            &s,
            &format!("csrf={csrf}&action=trigger"),
        )
        .await;
    assert_eq!(a.status, 303);
    let refused = ui.get(&a.location, &s).await;
    let message = refused
        .body
        .split("<p class=\"error-box\" role=\"alert\">")
        .nth(1)
        .and_then(|r| r.split("</p>").next())
        .expect("the API's error shown")
        .to_string();
    assert!(!message.is_empty());
    let elsewhere = ui.get(&a.location, &other).await;
    assert!(
        !elsewhere.body.contains(&message),
        "another session's link shows nothing"
    );
}

#[tokio::test]
async fn a_bulk_confirmation_acts_only_on_what_it_showed() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (s, key) = ui.session("default", Role::Write).await;
    let (other, _) = ui.session("default", Role::Write).await;
    // A paused, B scheduled: "resume applies to 1 of 2".
    let a = ui.job(&key, "bulk-a").await;
    let b = ui.job(&key, "bulk-b").await;
    let (st, _) = ui
        .api(
            &key,
            Method::POST,
            &format!("/openapi/jobs/{a}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200);
    let csrf = urlencode(&s.csrf);
    let preview = ui
        .post(
            "/ui/jobs/bulk",
            &s,
            &format!("csrf={csrf}&action=resume&ids={a}&ids={b}"),
        )
        .await;
    assert_eq!(preview.status, 200);
    assert!(
        preview.body.contains("applies to 1 of the 2 jobs"),
        "{}",
        preview.body
    );
    let snapshot = hidden(&preview.body, "snapshot").expect("a snapshot");
    let sig = hidden(&preview.body, "sig").expect("its signature");

    // B is paused after the confirmation was shown.
    let (st, _) = ui
        .api(
            &key,
            Method::POST,
            &format!("/openapi/jobs/{b}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200);
    let confirm = |snapshot: &str, sig: &str, ids: &str| {
        format!(
            "csrf={csrf}&action=resume&confirm=yes&snapshot={}&sig={}{ids}",
            urlencode(snapshot),
            urlencode(sig)
        )
    };

    // A snapshot edited in the browser (B shown as paused), or confirmed by
    // another session, or no snapshot at all (just ids): refused whole.
    let forged = snapshot.replace(
        &format!("[\"{b}\",\"scheduled\"]"),
        &format!("[\"{b}\",\"paused\"]"),
    );
    assert_ne!(forged, snapshot, "{snapshot}");
    let other_csrf = urlencode(&other.csrf);
    for (who, form) in [
        (&s, confirm(&forged, &sig, "")),
        (
            &s,
            confirm(&snapshot, &sig, "").replace("action=resume", "action=pause"),
        ),
        (
            &s,
            format!("csrf={csrf}&action=resume&confirm=yes&ids={a}&ids={b}"),
        ),
        (
            &other,
            confirm(&snapshot, &sig, "").replace(&csrf, &other_csrf),
        ),
    ] {
        let r = ui.post("/ui/jobs/bulk", who, &form).await;
        assert!(r.body.contains("cannot be used"), "{form}: {}", r.body);
    }
    assert_eq!(ui.status(&key, &a).await, "paused");
    assert_eq!(ui.status(&key, &b).await, "paused");

    // The confirmation: A resumed; B stays paused (it was shown as
    // skipped), and an id added to the form is not read.
    let c = ui.job(&key, "bulk-c").await;
    let (st, _) = ui
        .api(
            &key,
            Method::POST,
            &format!("/openapi/jobs/{c}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200);
    let done = ui
        .post(
            "/ui/jobs/bulk",
            &s,
            &confirm(&snapshot, &sig, &format!("&ids={c}")),
        )
        .await;
    assert_eq!(done.status, 200);
    assert!(
        done.body.contains("resume: 1 of 1 job done. 1 job skipped"),
        "{}",
        done.body
    );
    assert!(
        done.body.contains("skipped: not paused (scheduled)"),
        "{}",
        done.body
    );
    assert_eq!(ui.status(&key, &a).await, "scheduled");
    assert_eq!(
        ui.status(&key, &b).await,
        "paused",
        "B was shown as skipped"
    );
    assert_eq!(ui.status(&key, &c).await, "paused", "C was never shown");

    // A job shown as applying that changed before the confirm (a cancel
    // shown for a scheduled job, paused since): skipped, and said so.
    let preview = ui
        .post(
            "/ui/jobs/bulk",
            &s,
            &format!("csrf={csrf}&action=cancel&ids={a}"),
        )
        .await;
    let (snapshot, sig) = (
        hidden(&preview.body, "snapshot").unwrap(),
        hidden(&preview.body, "sig").unwrap(),
    );
    let (st, _) = ui
        .api(
            &key,
            Method::POST,
            &format!("/openapi/jobs/{a}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200);
    let form = confirm(&snapshot, &sig, "").replace("action=resume", "action=cancel");
    let done = ui.post("/ui/jobs/bulk", &s, &form).await;
    assert!(
        done.body
            .contains("skipped: changed since the confirmation (scheduled then, paused now)"),
        "{}",
        done.body
    );
    assert_eq!(ui.status(&key, &a).await, "paused");
}

#[tokio::test]
async fn the_new_key_form_keeps_its_role_and_fields_after_a_refusal() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (s, _) = ui.session("default", Role::Admin).await;
    let csrf = urlencode(&s.csrf);
    let a = ui
        .post(
            "/ui/admin/keys",
            &s,
            &format!("csrf={csrf}&tenant=default&role=read&name=ci-reader&expiresAt=next+week"),
        )
        .await;
    assert_eq!(
        a.status, 422,
        "refused in place, not redirected: {}",
        a.location
    );
    assert!(a.body.contains("class=\"error-box\""), "{}", a.body);
    assert!(
        a.body.contains("<option value=\"read\" selected>"),
        "the role asked for: {}",
        a.body
    );
    assert!(!a.body.contains("<option value=\"write\" selected>"));
    assert!(a.body.contains("value=\"ci-reader\"") && a.body.contains("value=\"next week\""));
    let (_, keys) = ui
        .api(
            &ui.key("default", Role::Admin).await,
            Method::GET,
            "/openapi/keys",
            json!({}),
        )
        .await;
    assert!(!keys.to_string().contains("ci-reader"), "nothing created");
    // Fixed, the same form makes a read key.
    let a = ui
        .post(
            "/ui/admin/keys",
            &s,
            &format!("csrf={csrf}&tenant=default&role=read&name=ci-reader&expiresAt="),
        )
        .await;
    assert_eq!(a.status, 200);
    assert!(a.body.contains("(read) created"), "{}", a.body);
}

#[tokio::test]
async fn job_forms_keep_every_field_after_a_refusal() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (s, key) = ui.session("default", Role::Write).await;
    let csrf = urlencode(&s.csrf);
    // New job: every field typed, the cron expression refused by the API.
    let typed = [
        ("jobName", "kept-name"),
        ("jobHandler", "kept-handler"),
        ("params", "{\"kept\": 1}"),
        ("sensitiveParams", "kept.path"),
        ("kind", "cron"),
        ("cronExpr", "not a cron"),
        ("timezone", "Europe/Berlin"),
        ("startAt", "2030-01-01T10:00"),
        ("endAt", "2031-01-01T10:00"),
        ("misfirePolicy", "skip"),
        ("overlapPolicy", "forbid"),
        ("maxAttempts", "7"),
        ("retryBackoffMs", "2500"),
        ("timeoutMs", "9000"),
        ("callbackUrl", "https://example.com/kept"),
        ("workerGroup", "kept-group"),
        ("priority", "8"),
        ("maxConcurrency", "3"),
        ("executionMode", "sharded"),
        ("shardCount", "4"),
    ];
    let form: String = typed
        .iter()
        .map(|(k, v)| format!("&{k}={}", urlencode(v)))
        .collect();
    let a = ui
        .post("/ui/jobs/new", &s, &format!("csrf={csrf}{form}"))
        .await;
    assert_eq!(a.status, 422, "{}", a.body);
    assert_kept(&a.body, &typed);

    // Edit: the job's form with changes, one of them refused.
    let id = ui.job(&key, "edited").await;
    let edit = ui.get(&format!("/ui/jobs/{id}/edit"), &s).await;
    let version = hidden(&edit.body, "version").expect("the version");
    let changed = [
        ("kind", "cron"),
        ("cronExpr", "not a cron"),
        ("timezone", "UTC"),
        ("misfirePolicy", "skip"),
        ("overlapPolicy", "forbid"),
        ("maxAttempts", "7"),
        ("workerGroup", "kept-group"),
        ("params", "{\"kept\": 2}"),
    ];
    let mut form = format!("csrf={csrf}&version={version}");
    for (k, v) in changed {
        form.push_str(&format!("&{k}={}", urlencode(v)));
        let orig = hidden(&edit.body, &format!("orig_{k}")).unwrap_or_default();
        form.push_str(&format!("&orig_{k}={}", urlencode(&orig)));
    }
    let a = ui.post(&format!("/ui/jobs/{id}/edit"), &s, &form).await;
    assert!(a.status.is_client_error(), "{}: {}", a.status, a.body);
    assert_kept(&a.body, &changed);
}

#[tokio::test]
async fn a_refused_pause_keeps_its_reason() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (s, key) = ui.session("default", Role::Write).await;
    let id = ui.job(&key, "paused-at-length").await;
    // One character over the API's bound: refused, the page shown again in
    // place with the reason as typed (a redirect lost it).
    let reason = format!("db migration {}", "x".repeat(490));
    let a = ui
        .post(
            &format!("/ui/jobs/{id}/action"),
            &s,
            &format!(
                "csrf={}&action=pause&reason={}",
                urlencode(&s.csrf),
                urlencode(&reason)
            ),
        )
        .await;
    assert_eq!(a.status, 422, "{}", a.location);
    assert!(a.body.contains("at most 500 characters"), "{}", a.body);
    assert!(
        a.body.contains(&format!("value=\"{reason}\"")),
        "{}",
        a.body
    );
    assert_eq!(ui.status(&key, &id).await, "scheduled");
}

/// An id in the dashboard's address names that id only: decoded, it may
/// hold `/` and `?` (which reached another API route: "pause" resumed) or a
/// line break (which no redirect can carry).
#[tokio::test]
async fn an_id_in_the_address_reaches_no_other_route() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (s, key) = ui.session("default", Role::Write).await;
    let id = ui.job(&key, "held").await;
    let (st, _) = ui
        .api(
            &key,
            Method::POST,
            &format!("/openapi/jobs/{id}/pause"),
            json!({}),
        )
        .await;
    assert_eq!(st, 200);
    let csrf = urlencode(&s.csrf);
    for (path, form) in [
        (
            format!("/ui/jobs/{id}%2Fresume%3F/action"),
            format!("csrf={csrf}&action=pause"),
        ),
        (
            format!("/ui/jobs/{id}%2Fresume%23/action"),
            format!("csrf={csrf}&action=trigger"),
        ),
        (
            format!("/ui/jobs/{id}%0Ax/action"),
            format!("csrf={csrf}&action=pause"),
        ),
        (
            format!("/ui/executions/{id}%0A/redeliver"),
            format!("csrf={csrf}&job=a%0Ab"),
        ),
        (
            format!("/ui/jobs/{id}%2Fresume%3F/edit"),
            format!("csrf={csrf}&version=1&maxAttempts=3&orig_maxAttempts=1"),
        ),
    ] {
        let a = ui.post(&path, &s, &form).await;
        assert!(
            a.status.is_redirection() || a.status.is_client_error(),
            "{path}: {}",
            a.status
        );
        assert_eq!(ui.status(&key, &id).await, "paused", "{path}");
    }
}

/// Every typed value is in the form again, as typed.
fn assert_kept(body: &str, typed: &[(&str, &str)]) {
    for (name, value) in typed {
        let escaped = value.replace('"', "&quot;");
        let shown = match *name {
            "params" => body.contains(&format!(">{escaped}</textarea>")),
            "kind" => body.contains(&format!("name=\"kind\" value=\"{value}\" checked")),
            "misfirePolicy" | "overlapPolicy" | "executionMode" => {
                let select = body
                    .split(&format!("name=\"{name}\""))
                    .nth(1)
                    .and_then(|r| r.split("</select>").next())
                    .unwrap_or_default();
                select.contains(&format!("value=\"{value}\" selected"))
            }
            _ => {
                body.contains(&format!("name=\"{name}\" type="))
                    && body
                        .split(&format!("name=\"{name}\" type="))
                        .nth(1)
                        .is_some_and(|r| {
                            r.split('>')
                                .next()
                                .unwrap_or_default()
                                .contains(&format!("value=\"{escaped}\""))
                        })
            }
        };
        assert!(shown, "{name} = {value:?} not kept");
    }
}

/// Every POST route of the dashboard's router, read from its source, so a
/// route added later is walked too.
fn post_routes() -> Vec<String> {
    let src = include_str!("../src/lib.rs");
    let start = src.find("pub fn router(").expect("the router");
    let body = &src[start..];
    let body = &body[..body.find("\n}\n").expect("its end")];
    let routes: Vec<String> = body
        .split(".route(")
        .skip(1)
        .filter(|r| r.contains("post(") || r.contains("any("))
        .map(|r| r.split('"').nth(1).expect("a path").to_string())
        .collect();
    for known in [
        "/ui/jobs/bulk",
        "/ui/admin/keys",
        "/ui/jobs/{id}/action",
        "/ui/logout",
    ] {
        assert!(routes.iter().any(|r| r == known), "{known} in {routes:?}");
    }
    routes
}

#[tokio::test]
async fn every_post_route_refuses_a_read_key_and_a_missing_csrf_token() {
    let ui = ui(Db::Sqlite).await.expect("sqlite");
    let (read, _) = ui.session("default", Role::Read).await;
    let (admin, admin_key) = ui.session("default", Role::Admin).await;
    let id = ui.job(&admin_key, "walked").await;
    let (_, before) = ui
        .api(&admin_key, Method::GET, "/openapi/keys", json!({}))
        .await;
    // A body each route would act on, were it allowed.
    let fields = format!(
        "action=pause&ids={id}&job={id}&confirm=yes&reason=r&prefix={}&tenant=default&role=operator\
         &name=walked&jobName=walked-new&jobHandler=noop&kind=cron&cronExpr=0+0+*+*+*+*&version=1\
         &orig_kind=cron&maxAttempts=5&orig_maxAttempts=1",
        &admin_key[4..16]
    );
    let routes = post_routes();
    for route in &routes {
        let path = route
            .replace("{id}", &id)
            .replace("{*rest}", "no-such-page");
        let unknown = route.contains("{*rest}");
        // A read key, with its valid CSRF token: refused (the logout is
        // every role's; the login takes no session).
        if route != "/ui/logout" {
            let form = format!("csrf={}&{fields}", urlencode(&read.csrf));
            let a = ui.post(&path, &read, &form).await;
            let expected = if unknown { 404 } else { 403 };
            assert_eq!(a.status, expected, "read key on {route}: {}", a.body);
            assert!(a.kind.starts_with("text/html"), "{route}: {}", a.kind);
        }
        // An admin key without the token, and with another's: refused.
        for csrf in [String::new(), format!("csrf={}&", urlencode(&read.csrf))] {
            let a = ui.post(&path, &admin, &format!("{csrf}{fields}")).await;
            let expected = if unknown { 404 } else { 403 };
            assert_eq!(a.status, expected, "no CSRF token on {route}: {}", a.body);
        }
    }
    assert_eq!(
        ui.status(&admin_key, &id).await,
        "scheduled",
        "nothing changed"
    );
    let (_, after) = ui
        .api(&admin_key, Method::GET, "/openapi/keys", json!({}))
        .await;
    assert_eq!(before, after, "no key made or revoked");
    let (_, jobs) = ui
        .api(&admin_key, Method::GET, "/openapi/jobs", json!({}))
        .await;
    assert_eq!(
        jobs["items"].as_array().map(Vec::len),
        Some(1),
        "no job made"
    );
    // Both sessions still work: nothing logged them out.
    assert_eq!(ui.get("/ui/overview", &read).await.status, 200);
    assert_eq!(ui.get("/ui/overview", &admin).await.status, 200);
}
