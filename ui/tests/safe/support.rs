//! The dashboard over a fresh database, a browser's session in it, and
//! calls to the REST API beside it.

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
pub(crate) enum Db {
    Sqlite,
    Mysql,
    Postgres,
}

pub(crate) struct Ui {
    router: Router,
    api: Router,
    store: SqlStore,
    /// Dropped with the test: the PostgreSQL database goes with it.
    _pg: Option<kairos_testkit::PgDatabase>,
}

/// A logged-in browser: its session cookie and CSRF token.
pub(crate) struct Session {
    id: String,
    pub(crate) csrf: String,
}

/// An answer: status, `Location`, content type, body.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) location: String,
    pub(crate) kind: String,
    pub(crate) body: String,
}

/// The dashboard over a fresh database of kind `db`; `None` when that
/// service is not configured (testkit skips, or fails the test when
/// services are required).
pub(crate) async fn ui(db: Db) -> Option<Ui> {
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

pub(crate) fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// The value of the first hidden field `name` in `body`.
pub(crate) fn hidden(body: &str, name: &str) -> Option<String> {
    body.split(&format!("name=\"{name}\" value=\""))
        .nth(1)
        .and_then(|r| r.split('"').next())
        .map(|v| v.replace("&quot;", "\"").replace("&amp;", "&"))
}

impl Ui {
    /// A new key of `role` in `tenant` (made if need be); its token.
    pub(crate) async fn key(&self, tenant: &str, role: Role) -> String {
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

    pub(crate) async fn send(&self, req: Request<Body>) -> Answer {
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
    pub(crate) async fn session(&self, tenant: &str, role: Role) -> (Session, String) {
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

    pub(crate) async fn get(&self, path: &str, s: &Session) -> Answer {
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
    pub(crate) async fn post(&self, path: &str, s: &Session, form: &str) -> Answer {
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
    pub(crate) async fn api(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Value,
    ) -> (u16, Value) {
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
    pub(crate) async fn job(&self, key: &str, name: &str) -> String {
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

    pub(crate) async fn status(&self, key: &str, id: &str) -> String {
        let (_, job) = self
            .api(key, Method::GET, &format!("/openapi/jobs/{id}"), json!({}))
            .await;
        job["status"].as_str().unwrap_or_default().to_string()
    }
}
