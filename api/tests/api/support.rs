//! The harness: an app over a real, freshly migrated store (SQLite file, a
//! fresh MySQL or PostgreSQL database), driven in-process with
//! `tower::ServiceExt::oneshot`.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use kairos_api::auth::keys;
use kairos_api::{ApiConfig, AppState, router};
use kairos_core::due::Due;
use kairos_core::job::JobStatus;
use kairos_core::store::DispatchScope;
use kairos_core::store::{Dispatch, JobFilter, JobStore, TenantStore};
use kairos_core::tenant::{DEFAULT_TENANT, Role, Tenant, TenantLimits};
use kairos_core::time::{Millis, now_ms};
use kairos_store_sql::SqlStore;
use kairos_testkit as testkit;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tower::ServiceExt;

/// Which database a test runs on.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    MySql,
}

/// A migrated store on `backend`, or `None` when MySQL is not reachable
/// (the testkit's skip-or-fail policy has then been applied).
pub async fn store(backend: Backend) -> Option<SqlStore> {
    let url = match backend {
        Backend::Sqlite => testkit::sqlite_temp_url(),
        Backend::MySql => testkit::mysql_fresh_database().await?,
    };
    Some(migrated(&url).await)
}

/// A migrated store on a fresh PostgreSQL database, with the guard that
/// drops the database (keep it until the test ends), or `None` when
/// PostgreSQL is not reachable (after the testkit's skip-or-fail policy).
pub async fn postgres_store() -> Option<(SqlStore, testkit::PgDatabase)> {
    let db = testkit::postgres_fresh_database().await?;
    Some((migrated(db.url()).await, db))
}

async fn migrated(url: &str) -> SqlStore {
    let store = SqlStore::connect(url)
        .await
        .expect("connect to the test database");
    store.migrate().await.expect("migrate the test database");
    store
}

/// The app under test and what it was built over.
#[derive(Clone)]
pub struct App {
    pub router: Router,
    pub store: SqlStore,
    /// Every due time the app reported through its due notifier.
    pub due: Arc<Mutex<Vec<Due>>>,
    /// Sent as `Authorization: Bearer <token>` on every request, if set.
    pub token: Option<String>,
    /// The client address requests come from, as a socket server sees it
    /// (`None`: driven in process, no address).
    pub peer: Option<SocketAddr>,
    /// The state the router was built over.
    pub state: AppState,
}

/// The app with the default configuration over `store`.
pub async fn spawn_app(store: SqlStore) -> App {
    spawn_app_with(store, |state| state).await
}

/// The app over `store`, with `customize` applied to its state, calling as
/// an operator key of the `default` tenant.
pub async fn spawn_app_with(store: SqlStore, customize: impl FnOnce(AppState) -> AppState) -> App {
    spawn_app_config(store, ApiConfig::default(), customize).await
}

/// The app over `store` with `config`, calling as an operator key of `default`.
pub async fn spawn_app_config(
    store: SqlStore,
    config: ApiConfig,
    customize: impl FnOnce(AppState) -> AppState,
) -> App {
    let due = Arc::new(Mutex::new(Vec::new()));
    let seen = due.clone();
    let state = AppState::new(Arc::new(store.clone()), config)
        .with_due_notifier(Arc::new(move |at| seen.lock().unwrap().push(at)));
    let state = customize(state);
    let mut app = App {
        router: router(state.clone()),
        store,
        due,
        token: None,
        peer: None,
        state,
    };
    // The store may be closed on purpose (the 503 test): then no key.
    app.token = issue_key(&app.store, DEFAULT_TENANT, Role::Operator).await;
    app
}

/// A new key of `role` for `tenant` (created if missing), straight through
/// the store; `None` if the store refuses (closed).
pub async fn issue_key(store: &SqlStore, tenant: &str, role: Role) -> Option<String> {
    let now = now_ms();
    let row = Tenant {
        id: tenant.to_string(),
        callback_secret: None,
        previous_secret: None,
        previous_valid_until: None,
        limits: TenantLimits::default(),
        created_at: now,
    };
    store.tenant_create(&row).await.ok()?;
    let issued = keys::issue(tenant, role, None, None, now);
    store
        .api_key_create(&issued.key)
        .await
        .ok()?
        .then_some(issued.token)
}

/// A response, read whole.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    /// The body as JSON; panics with the raw body when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} body is not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Asserts the status and the 2xx JSON body; returns the body.
    pub fn ok(&self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self.json()
    }

    /// Asserts a JSON error of `status` with `code`; returns `error`.
    pub fn error(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        let ct = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        assert_eq!(ct, Some("application/json"), "error content type");
        let body = self.json();
        let err = body["error"].clone();
        assert_eq!(err["code"], code, "error body: {body}");
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "error without message: {body}"
        );
        err
    }
}

impl App {
    /// The same app, calling with `token` (or with no key at all).
    pub fn with_token(&self, token: Option<String>) -> App {
        App {
            token,
            ..self.clone()
        }
    }

    /// The same app, calling from `peer`.
    pub fn calling_from(&self, peer: &str) -> App {
        App {
            peer: Some(peer.parse().expect("a socket address")),
            ..self.clone()
        }
    }

    /// The same app, calling as a new `role` key of `tenant` (created if missing).
    pub async fn as_new_key(&self, tenant: &str, role: Role) -> App {
        let token = issue_key(&self.store, tenant, role)
            .await
            .expect("issue a key");
        self.with_token(Some(token))
    }

    /// Sends one request through the router.
    pub async fn send(&self, req: Request<Body>) -> Resp {
        let res = self
            .router
            .clone()
            .oneshot(req)
            .await
            .expect("router is infallible");
        let status = res.status();
        let headers = res.headers().clone();
        let body = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .expect("read response body");
        Resp {
            status,
            headers,
            body,
        }
    }

    /// A request with an optional content type and a raw body.
    pub async fn raw(
        &self,
        method: Method,
        uri: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Resp {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(token) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        if let Some(peer) = self.peer {
            req = req.extension(ConnectInfo(peer));
        }
        self.send(req.body(Body::from(body)).expect("valid request"))
            .await
    }

    pub async fn get(&self, uri: &str) -> Resp {
        self.raw(Method::GET, uri, None, Vec::new()).await
    }

    pub async fn post_json(&self, uri: &str, body: &Value) -> Resp {
        self.raw(
            Method::POST,
            uri,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn patch_json(&self, uri: &str, body: &Value) -> Resp {
        self.raw(
            Method::PATCH,
            uri,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn put_json(&self, uri: &str, body: &Value) -> Resp {
        self.raw(
            Method::PUT,
            uri,
            Some("application/json"),
            body.to_string().into_bytes(),
        )
        .await
    }

    pub async fn post(&self, uri: &str) -> Resp {
        self.raw(Method::POST, uri, None, Vec::new()).await
    }

    pub async fn delete(&self, uri: &str) -> Resp {
        self.raw(Method::DELETE, uri, None, Vec::new()).await
    }

    /// Creates a job from `body` and returns its id.
    pub async fn create(&self, body: &Value) -> String {
        let created = self.post_json("/openapi/jobs", body).await.ok(201);
        created["jobId"].as_str().expect("jobId").to_string()
    }

    /// Every stored job of the tenant as `(id, status, version)`: what a
    /// refused request must leave untouched.
    pub async fn snapshot(&self) -> Vec<(String, JobStatus, i64)> {
        let mut all = Vec::new();
        let mut cursor = None;
        loop {
            let filter = JobFilter {
                limit: 500,
                cursor,
                ..JobFilter::default()
            };
            let page = self
                .store
                .job_list("default", &filter)
                .await
                .expect("list jobs");
            all.extend(page.items.into_iter().map(|j| (j.id, j.status, j.version)));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return all,
            }
        }
    }
}

/// The smallest valid create body.
pub fn one_shot(name: &str) -> Value {
    serde_json::json!({"jobName": name, "jobHandler": "noop"})
}

/// Claims the job's first trigger as the dispatcher does; the execution id
/// and the trigger's due time.
pub async fn claim_first(app: &App, job_id: &str) -> (String, Millis) {
    let job = app
        .store
        .job_get(DEFAULT_TENANT, job_id)
        .await
        .expect("get job")
        .expect("job exists");
    let due = job.next_trigger_at.expect("a due trigger");
    let claim = kairos_core::store::Claim {
        shard: Default::default(),
        job: Arc::new(job),
        scheduled_at: due,
        next_trigger_at: None,
        execution_id: uuid::Uuid::now_v7().to_string(),
        worker_id: None,
    };
    let won = app
        .store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[claim], now_ms().max(due))
        .await
        .expect("claim")
        .work;
    assert_eq!(won.len(), 1, "the claim must win");
    (won[0].execution_id.clone(), due)
}
