//! The dashboard's login against login CSRF, its cookies' `Secure` flag as
//! configured, and what an operator and an admin key are shown, over the
//! API's own router and a real store: each test runs on SQLite, MariaDB and
//! PostgreSQL.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use kairos_api::auth::keys;
use kairos_api::{ApiConfig, AppState, CookieSecure};
use kairos_core::store::TenantStore;
use kairos_core::tenant::{Role, Tenant, TenantLimits};
use kairos_core::time::now_ms;
use kairos_store_sql::SqlStore;
use std::sync::Arc;
use tower::ServiceExt;

struct Ui {
    router: Router,
    store: SqlStore,
    /// Dropped with the test: the PostgreSQL database goes with it.
    _pg: Option<kairos_testkit::PgDatabase>,
}

/// The databases every test runs on.
#[derive(Debug, Clone, Copy)]
enum Db {
    Sqlite,
    Mysql,
    Postgres,
}

const EVERY_DB: [Db; 3] = [Db::Sqlite, Db::Mysql, Db::Postgres];

/// The dashboard over a fresh database of kind `db`; `None` when that
/// service is not configured (testkit skips, or fails the test when
/// services are required).
async fn ui(db: Db, secure: CookieSecure) -> Option<Ui> {
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
    let config = ApiConfig {
        ui_cookie_secure: secure,
        ..ApiConfig::default()
    };
    let router = kairos_ui::router(AppState::new(Arc::new(store.clone()), config));
    Some(Ui {
        router,
        store,
        _pg: pg,
    })
}

impl Ui {
    async fn key(&self, tenant: &str, role: Role) -> String {
        let t = Tenant {
            id: tenant.into(),
            callback_secret: None,
            previous_secret: None,
            previous_valid_until: None,
            limits: TenantLimits::default(),
            created_at: now_ms(),
        };
        self.store.tenant_create(&t).await.expect("tenant");
        let issued = keys::issue(tenant, role, None, None, now_ms());
        assert!(self.store.api_key_create(&issued.key).await.expect("key"));
        issued.token
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, Vec<String>, String) {
        let res = self.router.clone().oneshot(req).await.expect("infallible");
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

    /// The login page: its token (as in the form) and its cookie.
    async fn login_page(&self, headers: &[(&str, &str)]) -> (String, Vec<String>) {
        let mut req = Request::get("/ui/login").header(header::HOST, "kairos.test");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let (status, cookies, body) = self.send(req.body(Body::empty()).unwrap()).await;
        assert_eq!(status, 200);
        let token = body
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("a token in the form")
            .to_string();
        (token, cookies)
    }

    /// Posts the login form with `cookie` and `headers`.
    async fn login(
        &self,
        key: &str,
        form_token: &str,
        cookie: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Vec<String>, String) {
        let mut req = Request::post("/ui/login")
            .header(header::HOST, "kairos.test")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        if let Some(c) = cookie {
            req = req.header(header::COOKIE, format!("kairos_login_csrf={c}"));
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let body = format!("csrf={form_token}&key={key}");
        self.send(req.body(Body::from(body)).unwrap()).await
    }

    async fn get(&self, path: &str, session: &str) -> (StatusCode, String) {
        let req = Request::get(path)
            .header(header::COOKIE, format!("kairos_session={session}"))
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = self.send(req).await;
        (status, body)
    }
}

fn session_of(cookies: &[String]) -> Option<String> {
    cookies
        .iter()
        .find_map(|c| c.strip_prefix("kairos_session="))
        .map(|c| c.split(';').next().unwrap().to_string())
        .filter(|id| !id.is_empty())
}

#[tokio::test]
async fn a_cross_site_login_is_refused_and_a_same_origin_one_logs_in() {
    for db in EVERY_DB {
        a_cross_site_login_is_refused_and_a_same_origin_one_logs_in_on(db).await;
    }
}

async fn a_cross_site_login_is_refused_and_a_same_origin_one_logs_in_on(db: Db) {
    let Some(ui) = ui(db, CookieSecure::Auto).await else {
        return;
    };
    let key = ui.key("acme", Role::Write).await;
    let (token, cookies) = ui.login_page(&[]).await;
    assert!(cookies[0].starts_with(&format!("kairos_login_csrf={token};")));
    assert!(cookies[0].contains("HttpOnly") && cookies[0].contains("SameSite=Strict"));

    // Cross-site, by either header, even with a valid token pair.
    for h in [
        ("sec-fetch-site", "cross-site"),
        ("sec-fetch-site", "same-site"),
        ("origin", "https://evil.example"),
        ("origin", "null"),
    ] {
        let (status, cookies, body) = ui.login(&key, &token, Some(&token), &[h]).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{h:?}");
        assert!(body.contains("Login refused"), "{body}");
        assert_eq!(session_of(&cookies), None, "{h:?}");
    }
    // A forged form has no login cookie (SameSite=Strict), or another token.
    let origin = [("origin", "http://kairos.test")];
    for cookie in [None, Some("a".repeat(64))] {
        let (status, cookies, body) = ui.login(&key, &token, cookie.as_deref(), &origin).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(body.contains("form token"), "{body}");
        assert_eq!(session_of(&cookies), None);
    }

    // Same origin, with the token: logged in.
    let (status, cookies, _) = ui.login(&key, &token, Some(&token), &origin).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let session = session_of(&cookies).expect("a session cookie");
    assert!(!cookies.iter().any(|c| c.contains("Secure")), "plain HTTP");
    let (status, body) = ui.get("/ui/jobs", &session).await;
    assert_eq!(status, 200);
    assert!(body.contains("acme"));
    // Sec-Fetch-Site alone does too.
    let (status, cookies, _) = ui
        .login(
            &key,
            &token,
            Some(&token),
            &[("sec-fetch-site", "same-origin")],
        )
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(session_of(&cookies).is_some());
}

#[tokio::test]
async fn cookies_are_secure_as_configured() {
    for db in EVERY_DB {
        cookies_are_secure_as_configured_on(db).await;
    }
}

async fn cookies_are_secure_as_configured_on(db: Db) {
    let https = [("x-forwarded-proto", "https")];
    for (setting, headers, secure) in [
        (CookieSecure::Auto, &[][..], false),
        (CookieSecure::Auto, &https[..], true),
        (CookieSecure::Always, &[][..], true),
        (CookieSecure::Never, &https[..], false),
    ] {
        let Some(ui) = ui(db, setting).await else {
            return;
        };
        let key = ui.key("acme", Role::Read).await;
        let (token, cookies) = ui.login_page(headers).await;
        assert_eq!(
            cookies[0].contains("; Secure"),
            secure,
            "{setting} {headers:?}"
        );
        let (status, cookies, _) = ui.login(&key, &token, Some(&token), headers).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        let session = cookies
            .iter()
            .find(|c| c.starts_with("kairos_session="))
            .expect("session cookie");
        assert_eq!(
            session.contains("; Secure"),
            secure,
            "{setting} {headers:?}"
        );
    }
}

/// Logs in with `key`; the session id.
async fn session(ui: &Ui, key: &str) -> String {
    let (token, _) = ui.login_page(&[]).await;
    let (_, cookies, _) = ui.login(key, &token, Some(&token), &[]).await;
    session_of(&cookies).expect("logged in")
}

#[tokio::test]
async fn operators_see_every_tenant_admins_their_own() {
    for db in EVERY_DB {
        operators_see_every_tenant_admins_their_own_on(db).await;
    }
}

async fn operators_see_every_tenant_admins_their_own_on(db: Db) {
    let Some(ui) = ui(db, CookieSecure::Auto).await else {
        return;
    };
    let op = session(&ui, &ui.key("default", Role::Operator).await).await;
    let admin = session(&ui, &ui.key("acme", Role::Admin).await).await;
    let bravo_key = ui.key("bravo", Role::Write).await;
    let bravo_prefix = &bravo_key[4..16];

    let (status, body) = ui.get("/ui/admin/keys?tenant=bravo", &op).await;
    assert_eq!(status, 200);
    assert!(body.contains(bravo_prefix) && body.contains("data-tenant=\"acme\""));
    assert!(
        body.contains("value=\"operator\""),
        "operators may make operators"
    );
    let (status, _) = ui.get("/ui/workers", &op).await;
    assert_eq!(status, 200);

    // The admin asks for bravo and is shown its own tenant.
    let (status, body) = ui.get("/ui/admin/keys?tenant=bravo", &admin).await;
    assert_eq!(status, 200);
    assert!(
        !body.contains(bravo_prefix) && !body.contains("bravo"),
        "{body}"
    );
    assert!(!body.contains("value=\"operator\""));
    let (_, body) = ui.get("/ui/admin/audit?tenant=bravo", &admin).await;
    assert!(!body.contains("bravo"));
    let (status, _) = ui.get("/ui/workers", &admin).await;
    assert_eq!(status, 403, "workers are an operator's");
    let (_, body) = ui.get("/ui/overview", &admin).await;
    assert!(
        !body.contains("/ui/workers"),
        "no Workers link for an admin"
    );
}
