//! Input the databases or the routes could take otherwise: a NUL anywhere,
//! an id from the address holding `/`, `?` or a line break.

use crate::support::{Db, ui, urlencode};
use axum::body::Body;
use axum::http::{Method, Request};
use kairos_core::tenant::Role;
use serde_json::json;

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
