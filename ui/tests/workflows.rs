//! The dashboard's workflow pages (issue 34): a run drawn as SVG, each node
//! with its state and a link to its execution; another tenant's run is not
//! found.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use kairos_api::auth::keys;
use kairos_api::{ApiConfig, AppState};
use kairos_core::store::TenantStore;
use kairos_core::tenant::{Role, Tenant, TenantLimits};
use kairos_core::time::now_ms;
use kairos_core::workflow::{NewWorkflow, WorkflowCreated, WorkflowStore};
use kairos_store_sql::SqlStore;
use std::sync::Arc;
use tower::ServiceExt;

async fn send(router: &Router, req: Request<Body>) -> (StatusCode, Vec<String>, String) {
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

async fn get(router: &Router, path: &str, session: &str) -> (StatusCode, String) {
    let req = Request::get(path)
        .header(header::HOST, "kairos.test")
        .header(header::COOKIE, format!("kairos_session={session}"))
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = send(router, req).await;
    (status, body)
}

/// Logs in with a new key of `tenant`; the session id.
async fn session(store: &SqlStore, router: &Router, tenant: &str) -> String {
    let t = Tenant {
        id: tenant.into(),
        callback_secret: None,
        previous_secret: None,
        previous_valid_until: None,
        limits: TenantLimits::default(),
        created_at: now_ms(),
    };
    store.tenant_create(&t).await.expect("tenant");
    let issued = keys::issue(tenant, Role::Read, None, None, now_ms());
    assert!(store.api_key_create(&issued.key).await.expect("key"));
    let form = send(
        router,
        Request::get("/ui/login")
            .header(header::HOST, "kairos.test")
            .body(Body::empty())
            .unwrap(),
    )
    .await
    .2;
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
        .body(Body::from(format!("csrf={csrf}&key={}", issued.token)))
        .unwrap();
    let (_, cookies, _) = send(router, req).await;
    cookies
        .iter()
        .find_map(|c| c.strip_prefix("kairos_session="))
        .map(|c| c.split(';').next().unwrap().to_string())
        .filter(|id| !id.is_empty())
        .expect("a session cookie")
}

#[tokio::test]
async fn a_run_is_drawn_with_its_node_states_and_execution_links() {
    let store = SqlStore::connect(&kairos_testkit::sqlite_temp_url())
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let router = kairos_ui::router(AppState::new(Arc::new(store.clone()), ApiConfig::default()));
    let def = serde_json::from_value(serde_json::json!({
        "nodes": [{"id": "extract", "handler": "noop"}, {"id": "load", "handler": "noop"}],
        "edges": [{"from": "extract", "to": "load", "condition": "always"}]
    }))
    .unwrap();
    let created = store
        .workflow_create(NewWorkflow {
            id: "wf-ui".into(),
            tenant: "ui-t".into(),
            name: "etl".into(),
            definition: def,
            client_request_id: None,
            request_hash: None,
            run_now: Some("run-ui".into()),
            schedule: None,
            next_trigger_at: None,
            callback_url: None,
            created_at: now_ms(),
        })
        .await
        .unwrap();
    let WorkflowCreated::Created(_, Some(run)) = created else {
        panic!("a new run")
    };
    let s = session(&store, &router, "ui-t").await;
    let (status, page) = get(&router, "/ui/workflows/wf-ui/runs/run-ui", &s).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("<svg viewBox="), "{page}");
    assert!(
        page.contains(r#"data-node="extract" data-state="pending""#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-node="load" data-state="waiting""#),
        "{page}"
    );
    let detail = store
        .workflow_run_get("ui-t", "wf-ui", &run.id)
        .await
        .unwrap()
        .unwrap();
    let exec = detail.nodes[0].execution_id.clone().unwrap();
    assert!(page.contains(&format!("/ui/executions/{exec}")), "linked");
    assert!(page.contains(">always<"));
    let (status, list) = get(&router, "/ui/workflows/wf-ui", &s).await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains("/ui/workflows/wf-ui/runs/run-ui"));
    assert!(
        list.contains(r#"<a href="/ui/workflows" aria-current="page">Workflows</a>"#),
        "the navigation leads to the workflows and marks them current: {list}"
    );
    let (_, jobs) = get(&router, "/ui/jobs", &s).await;
    assert!(
        jobs.contains(r#"<a href="/ui/workflows">Workflows</a>"#),
        "{jobs}"
    );
    assert!(get(&router, "/ui/workflows", &s).await.1.contains("etl"));

    let other = session(&store, &router, "ui-other").await;
    let (status, _) = get(&router, "/ui/workflows/wf-ui/runs/run-ui", &other).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another tenant's run");
}
