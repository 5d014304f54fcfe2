//! Forms keep what was typed after a refusal: the new key's role, the job
//! forms' every field, a pause's reason.

use crate::support::{Db, hidden, ui, urlencode};
use axum::http::Method;
use kairos_core::tenant::Role;
use serde_json::json;

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
