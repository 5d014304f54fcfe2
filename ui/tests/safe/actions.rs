//! What the dashboard says and does after a change: notices by key and
//! signed errors, a bulk confirmation acting on what it showed, and every
//! POST route refusing a read key and a missing CSRF token.

use crate::support::{Db, hidden, ui, urlencode};
use axum::http::Method;
use kairos_core::tenant::Role;
use serde_json::json;

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

/// Every POST route of the dashboard's router, read from its source, so a
/// route added later is walked too.
fn post_routes() -> Vec<String> {
    let src = include_str!("../../src/lib.rs");
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
