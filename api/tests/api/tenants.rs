//! Tenants and API keys: every `/openapi/*` route needs a usable key (401),
//! roles decide what it may do (403), one tenant never sees or changes
//! another's jobs, executions or callbacks (404 as for an unknown id),
//! revocation takes effect within a second, creates are rate limited and
//! capped, and every control action lands in the audit trail.

use super::callbacks::{attempt_once, succeed_first_trigger};
use super::support::{App, Resp, issue_key, one_shot, spawn_app_config};
use axum::http::header;
use kairos_api::ApiConfig;
use kairos_core::store::CallbackNext;
use kairos_core::tenant::Role;
use kairos_testkit as testkit;
use serde_json::{Value, json};
use std::time::Duration;

/// A 401 with the JSON body and `WWW-Authenticate: Bearer`.
fn unauthorized(resp: &Resp) {
    resp.error(401, "unauthorized");
    let www = resp.headers[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(www.starts_with("Bearer"), "{www}");
}

pub async fn every_route_needs_a_usable_key(app: App) {
    let job = app.create(&one_shot("mine")).await;
    let routes: Vec<(&str, String)> = vec![
        ("GET", "/openapi/jobs".into()),
        ("POST", "/openapi/jobs".into()),
        ("GET", format!("/openapi/jobs/{job}")),
        ("PATCH", format!("/openapi/jobs/{job}")),
        ("DELETE", format!("/openapi/jobs/{job}")),
        ("POST", format!("/openapi/jobs/{job}/pause")),
        ("GET", format!("/openapi/jobs/{job}/executions")),
        ("GET", "/openapi/executions".into()),
        ("GET", "/openapi/executions/x".into()),
        ("GET", "/openapi/workers".into()),
        ("GET", "/openapi/keys".into()),
        ("GET", "/openapi/audit".into()),
        ("GET", "/openapi/no-such-route".into()),
    ];
    let revoked = app.as_new_key("default", Role::Admin).await;
    let prefix = revoked.token.as_ref().unwrap()[4..16].to_string();
    app.delete(&format!("/openapi/keys/{prefix}")).await.ok(200);
    let wrong_secret = format!("kai_{prefix}_{}", "0".repeat(64));
    let tokens: Vec<Option<String>> = vec![
        None,
        Some("not-a-key".into()),
        Some(format!("kai_{}_{}", "a".repeat(12), "b".repeat(64))),
        Some(wrong_secret),
        revoked.token.clone(),
    ];
    for token in tokens {
        let caller = app.with_token(token.clone());
        for (method, path) in &routes {
            let resp = caller
                .raw(
                    method.parse().unwrap(),
                    path,
                    Some("application/json"),
                    b"{}".to_vec(),
                )
                .await;
            assert_eq!(resp.status, 401, "{method} {path} with {token:?}");
            unauthorized(&resp);
        }
    }
    // A scheme other than Bearer.
    let mut req = axum::http::Request::builder().uri("/openapi/jobs");
    req = req.header(header::AUTHORIZATION, "Basic dXNlcjpwYXNz");
    unauthorized(&app.send(req.body(axum::body::Body::empty()).unwrap()).await);
    // Public routes stay public.
    let anonymous = app.with_token(None);
    anonymous.get("/healthz").await.ok(200);
    anonymous.get("/readyz").await.ok(200);
    anonymous.get("/openapi.json").await.ok(200);
    assert!(anonymous.get("/docs").await.status.is_redirection());
}

pub async fn expired_keys_are_refused(app: App) {
    let created = app
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": "read",
                    "expiresAt": kairos_core::time::to_rfc3339(kairos_core::time::now_ms() + 300)}),
        )
        .await
        .ok(201);
    let reader = app.with_token(Some(created["keyToken"].as_str().unwrap().to_string()));
    reader.get("/openapi/jobs").await.ok(200);
    testkit::wait_for("the key to expire", Duration::from_secs(3), || async {
        let resp = reader.get("/openapi/jobs").await;
        (resp.status == 401).then(|| unauthorized(&resp))
    })
    .await;
    let msg = reader.get("/openapi/jobs").await.error(401, "unauthorized");
    assert!(
        msg["message"].as_str().unwrap().contains("expired"),
        "{msg}"
    );
}

pub async fn roles_decide_what_a_key_may_do(app: App) {
    let reader = app.as_new_key("default", Role::Read).await;
    let writer = app.as_new_key("default", Role::Write).await;
    let job = writer.create(&one_shot("w")).await;
    reader.get(&format!("/openapi/jobs/{job}")).await.ok(200);
    reader.get("/openapi/jobs").await.ok(200);
    for resp in [
        reader.post_json("/openapi/jobs", &one_shot("r")).await,
        reader.post(&format!("/openapi/jobs/{job}/pause")).await,
        reader.delete(&format!("/openapi/jobs/{job}")).await,
        reader
            .patch_json(&format!("/openapi/jobs/{job}"), &json!({"version": 1}))
            .await,
        reader.get("/openapi/workers").await,
        writer.get("/openapi/workers").await,
        writer.get("/openapi/audit").await,
        writer.get("/openapi/keys").await,
        writer
            .post_json(
                "/openapi/keys",
                &json!({"tenantId": "default", "role": "admin"}),
            )
            .await,
        writer
            .post_json("/openapi/tenants", &json!({"tenantId": "evil"}))
            .await,
    ] {
        resp.error(403, "forbidden");
    }
    writer
        .post(&format!("/openapi/jobs/{job}/pause"))
        .await
        .ok(200);
    app.get("/openapi/workers").await.ok(200);
}

pub async fn a_revoked_key_stops_within_a_second(app: App) {
    let created = app
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": "write", "name": "ci"}),
        )
        .await
        .ok(201);
    let token = created["keyToken"].as_str().unwrap().to_string();
    assert!(token.starts_with("kai_"));
    let prefix = created["prefix"].as_str().unwrap().to_string();
    let keys = app.get("/openapi/keys?tenant=default").await.ok(200);
    let listed = keys["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["prefix"] == prefix.as_str())
        .expect("listed");
    assert_eq!(listed["name"], "ci");
    assert!(
        !keys.to_string().contains(&token[17..]),
        "the secret is never listed"
    );
    let user = app.with_token(Some(token));
    user.get("/openapi/jobs").await.ok(200); // cached now
    let revoked_at = std::time::Instant::now();
    app.delete(&format!("/openapi/keys/{prefix}")).await.ok(200);
    testkit::wait_for(
        "the revoked key to be refused",
        Duration::from_secs(1),
        || async {
            let resp = user.get("/openapi/jobs").await;
            (resp.status == 401).then_some(())
        },
    )
    .await;
    assert!(revoked_at.elapsed() < Duration::from_secs(1));
    app.delete("/openapi/keys/000000000000")
        .await
        .error(404, "not_found");
}

/// Tenant A (the app's own `default`) owns a job with a delivered callback;
/// tenant B, with write and read keys, probes every route with A's ids.
pub async fn tenants_never_see_each_other(app: App) {
    let a_job = app
        .create(&json!({"jobName": "a", "jobHandler": "noop",
                        "callbackUrl": "https://example.com/hook", "clientRequestId": "same"}))
        .await;
    let a_exec = succeed_first_trigger(&app, &a_job).await;
    attempt_once(&app, 200, None, CallbackNext::Delivered).await;
    let b_write = app.as_new_key("bravo", Role::Write).await;
    let b_read = app.as_new_key("bravo", Role::Read).await;
    let b_admin = app.as_new_key("bravo", Role::Admin).await;

    for b in [&b_write, &b_read, &b_admin] {
        for path in [
            format!("/openapi/jobs/{a_job}"),
            format!("/openapi/jobs/{a_job}/executions"),
            format!("/openapi/executions/{a_exec}"),
            format!("/openapi/executions/{a_exec}/callbacks"),
        ] {
            b.get(&path).await.error(404, "not_found");
        }
        assert_eq!(b.get("/openapi/jobs").await.ok(200)["items"], json!([]));
        assert_eq!(
            b.get("/openapi/executions").await.ok(200)["items"],
            json!([])
        );
    }
    for b in [&b_write, &b_admin] {
        for path in ["pause", "resume", "trigger"] {
            b.post(&format!("/openapi/jobs/{a_job}/{path}"))
                .await
                .error(404, "not_found");
        }
        b.patch_json(
            &format!("/openapi/jobs/{a_job}"),
            &json!({"version": 1, "params": 1}),
        )
        .await
        .error(404, "not_found");
        b.delete(&format!("/openapi/jobs/{a_job}"))
            .await
            .error(404, "not_found");
        b.post(&format!("/openapi/executions/{a_exec}/callbacks/redeliver"))
            .await
            .error(404, "not_found");
    }
    // The same clientRequestId in another tenant is another job.
    let b_job = b_write
        .create(&json!({"jobName": "b", "jobHandler": "sleep", "clientRequestId": "same"}))
        .await;
    assert_ne!(b_job, a_job);
    app.get(&format!("/openapi/jobs/{b_job}"))
        .await
        .error(404, "not_found");
    let a_list = app.get("/openapi/jobs").await.ok(200);
    assert_eq!(a_list["items"].as_array().unwrap().len(), 1);
    // A's data is untouched and still A's to control.
    let a = app.get(&format!("/openapi/jobs/{a_job}")).await.ok(200);
    assert_eq!(a["status"], "succeeded");
    app.post(&format!("/openapi/executions/{a_exec}/callbacks/redeliver"))
        .await
        .ok(202);
}

pub async fn admin_api_tenants_keys_and_audit(app: App) {
    let created = app
        .post_json(
            "/openapi/tenants",
            &json!({"tenantId": "acme", "maxLiveJobs": 1}),
        )
        .await
        .ok(201);
    assert_eq!(created["tenantId"], "acme");
    assert!(created["callbackSecret"].as_str().unwrap().len() >= 32);
    app.post_json("/openapi/tenants", &json!({"tenantId": "acme"}))
        .await
        .error(409, "already_exists");
    app.post_json("/openapi/tenants", &json!({"tenantId": "Not Valid"}))
        .await
        .error(422, "invalid_field");
    app.post_json(
        "/openapi/keys",
        &json!({"tenantId": "nope", "role": "read"}),
    )
    .await
    .error(404, "not_found");
    app.post_json(
        "/openapi/keys",
        &json!({"tenantId": "acme", "role": "root"}),
    )
    .await
    .error(422, "invalid_field");
    let tenants = app.get("/openapi/tenants").await.ok(200);
    let ids: Vec<&str> = tenants["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tenantId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["acme", "default"]);
    assert!(!tenants.to_string().contains("callbackSecret"));

    let key = app
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "acme", "role": "write"}),
        )
        .await
        .ok(201);
    let acme = app.with_token(Some(key["keyToken"].as_str().unwrap().to_string()));
    let first = acme.create(&one_shot("one")).await;
    // The cap: one live job.
    let refused = acme.post_json("/openapi/jobs", &one_shot("two")).await;
    let err = refused.error(429, "live_job_limit");
    assert!(
        err["message"].as_str().unwrap().contains("limit is 1"),
        "{err}"
    );
    acme.delete(&format!("/openapi/jobs/{first}")).await.ok(200);

    let rotated = app
        .post_json(
            "/openapi/tenants/acme/callback-secret",
            &json!({"graceSeconds": 60}),
        )
        .await
        .ok(200);
    assert_ne!(rotated["callbackSecret"], created["callbackSecret"]);
    app.post_json("/openapi/tenants/nope/callback-secret", &json!({}))
        .await
        .error(404, "not_found");

    let page = app.get("/openapi/audit?tenant=acme&limit=2").await.ok(200);
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["action"], "tenant.rotate_secret");
    assert_eq!(items[1]["action"], "job.cancel");
    assert_eq!(items[1]["target"], first.as_str());
    assert_eq!(items[1]["actor"], key["prefix"]);
    let cursor = page["nextCursor"].as_str().expect("more pages");
    let rest = app
        .get(&format!(
            "/openapi/audit?tenant=acme&limit=10&cursor={cursor}"
        ))
        .await
        .ok(200);
    let actions: Vec<&str> = rest["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["job.create", "key.create", "tenant.create"]);
    assert_eq!(rest["nextCursor"], Value::Null);
}

pub async fn creates_are_rate_limited_per_key(app: App) {
    let config = ApiConfig {
        api_create_rate: 1.0,
        api_create_burst: 2,
        ..ApiConfig::default()
    };
    let limited = spawn_app_config(app.store.clone(), config, |s| s).await;
    limited.create(&one_shot("1")).await;
    limited.create(&one_shot("2")).await;
    let resp = limited.post_json("/openapi/jobs", &one_shot("3")).await;
    resp.error(429, "rate_limited");
    let retry: u64 = resp.headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    // Another key of the same tenant has its own bucket.
    let other = issue_key(&limited.store, "default", Role::Write).await;
    limited.with_token(other).create(&one_shot("4")).await;
    // Reads are not limited.
    limited.get("/openapi/jobs").await.ok(200);
}
