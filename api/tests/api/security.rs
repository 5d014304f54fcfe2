//! Limits that cannot be bypassed and key lookups that cannot be abused
//! (issue 32): batches cost a token per job, triggers, resumes and
//! redeliveries have a bucket of their own, unknown keys cost one store read
//! per prefix and never push a valid key out, an address that keeps failing
//! to authenticate is refused, a revoke takes effect at once on the instance
//! that made it, and text holding NUL is refused the same on every database.

use super::support::{App, one_shot, spawn_app_config};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, header};
use kairos_api::ApiConfig;
use kairos_core::tenant::Role;
use kairos_testkit as testkit;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Duration;

/// The whole seconds of a 429's `Retry-After`.
fn retry_after(resp: &super::support::Resp) -> u64 {
    resp.headers[header::RETRY_AFTER]
        .to_str()
        .expect("text")
        .parse()
        .expect("whole seconds")
}

fn batch(prefix: &str, n: usize) -> Value {
    let jobs: Vec<Value> = (0..n).map(|i| one_shot(&format!("{prefix}{i}"))).collect();
    json!({ "jobs": jobs })
}

pub async fn batches_cost_a_token_per_job(app: App) {
    let config = ApiConfig {
        api_create_rate: 1.0,
        api_create_burst: 1000,
        ..ApiConfig::default()
    };
    let limited = spawn_app_config(app.store.clone(), config, |s| s).await;
    let mut created = 0;
    for round in 0..5 {
        let resp = limited
            .post_json("/openapi/jobs/batch", &batch(&format!("r{round}-"), 1000))
            .await;
        if resp.status == 200 {
            created += resp.json()["results"].as_array().expect("results").len();
        } else {
            resp.error(429, "rate_limited");
            assert!(retry_after(&resp) >= 1);
        }
    }
    assert_eq!(created, 1000, "one bucket's worth, however many batches");
    assert_eq!(
        limited.snapshot().await.len(),
        1000,
        "only those are stored"
    );

    // A batch above the burst could never pass: the caller is told to split it.
    limited
        .put_json("/openapi/tenants/acme/limits", &json!({}))
        .await
        .error(404, "not_found");
    let acme = limited.as_new_key("acme", Role::Write).await;
    limited
        .put_json(
            "/openapi/tenants/acme/limits",
            &json!({"createBurst": 10, "createRatePerSec": 0.01}),
        )
        .await
        .ok(200);
    let resp = acme
        .post_json("/openapi/jobs/batch", &batch("big", 11))
        .await;
    let err = resp.error(429, "batch_exceeds_burst");
    assert_eq!(err["field"], "jobs");
    assert!(err["message"].as_str().unwrap().contains("10"), "{err}");
    assert!(retry_after(&resp) >= 1);
    let fits = acme
        .post_json("/openapi/jobs/batch", &batch("fits", 10))
        .await;
    assert_eq!(fits.ok(200)["results"].as_array().unwrap().len(), 10);
    acme.post_json("/openapi/jobs", &one_shot("one-more"))
        .await
        .error(429, "rate_limited");
}

pub async fn triggers_resumes_and_redeliveries_are_rate_limited(app: App) {
    let config = ApiConfig {
        api_action_rate: 0.01,
        api_action_burst: 5,
        ..ApiConfig::default()
    };
    let limited = spawn_app_config(app.store.clone(), config, |s| s).await;
    let job = limited
        .create(&json!({"jobName": "c", "jobHandler": "http", "cronExpr": "0 0 0 1 1 *"}))
        .await;
    let trigger = format!("/openapi/jobs/{job}/trigger");
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..300 {
        let resp = limited.post(&trigger).await;
        if resp.status == 202 {
            accepted += 1;
        } else {
            resp.error(429, "rate_limited");
            assert!(retry_after(&resp) >= 1);
            refused += 1;
        }
    }
    assert_eq!((accepted, refused), (5, 295));
    let execs = limited
        .get(&format!("/openapi/jobs/{job}/executions?limit=500"))
        .await
        .ok(200);
    assert_eq!(
        execs["items"].as_array().unwrap().len(),
        5,
        "refused triggers made nothing"
    );
    // Resume and redeliver draw on the same bucket; pause does not.
    limited
        .post(&format!("/openapi/jobs/{job}/pause"))
        .await
        .ok(200);
    limited
        .post(&format!("/openapi/jobs/{job}/resume"))
        .await
        .error(429, "rate_limited");
    limited
        .post("/openapi/executions/x/callbacks/redeliver")
        .await
        .error(429, "rate_limited");
    // Another key has its own bucket; a tenant's override sets its size.
    let other = limited.as_new_key("default", Role::Write).await;
    other
        .post(&format!("/openapi/jobs/{job}/resume"))
        .await
        .ok(200);
    limited
        .put_json(
            "/openapi/tenants/acme/limits",
            &json!({"actionBurst": 2, "actionRatePerSec": 0.01}),
        )
        .await
        .error(404, "not_found");
    let acme = limited.as_new_key("acme", Role::Write).await;
    limited
        .put_json(
            "/openapi/tenants/acme/limits",
            &json!({"actionBurst": 2, "actionRatePerSec": 0.01}),
        )
        .await
        .ok(200);
    let tenants = limited.get("/openapi/tenants").await.ok(200);
    let shown = tenants["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tenantId"] == "acme")
        .cloned()
        .expect("acme listed");
    assert_eq!(
        (
            shown["actionBurst"].clone(),
            shown["actionRatePerSec"].clone()
        ),
        (json!(2), json!(0.01))
    );
    let acme_job = acme.create(&one_shot("a")).await;
    let acme_trigger = format!("/openapi/jobs/{acme_job}/trigger");
    acme.post(&acme_trigger).await.ok(202);
    acme.post(&acme_trigger).await.ok(202);
    acme.post(&acme_trigger).await.error(429, "rate_limited");
    limited
        .put_json("/openapi/tenants/acme/limits", &json!({"actionBurst": 0}))
        .await
        .error(422, "invalid_field");
}

/// `kai_<prefix>_<secret>` for a random, surely unknown prefix.
fn random_token() -> String {
    let prefix = rand::random::<u64>() & 0xffff_ffff_ffff;
    format!("kai_{prefix:012x}_{}", "0".repeat(64))
}

pub async fn unknown_keys_cost_one_read_per_prefix(app: App) {
    let config = ApiConfig {
        key_cache_ttl: Duration::from_secs(3600),
        api_key_cache_size: 4,
        ..ApiConfig::default()
    };
    let cached = spawn_app_config(app.store.clone(), config, |s| s).await;
    let reads = || cached.state.key_store_reads();
    cached.get("/openapi/jobs").await.ok(200);
    assert_eq!(reads(), 1, "the valid key is read once");
    let same = cached.with_token(Some(random_token()));
    for _ in 0..20 {
        same.get("/openapi/jobs").await.error(401, "unauthorized");
    }
    assert_eq!(reads(), 2, "one read for a prefix sent twenty times");
    for _ in 0..50 {
        let random = cached.with_token(Some(random_token()));
        random.get("/openapi/jobs").await.error(401, "unauthorized");
    }
    assert_eq!(reads(), 52, "one read per new prefix");
    cached.get("/openapi/jobs").await.ok(200);
    assert_eq!(reads(), 52, "the flood did not push the valid key out");
}

/// A request from `peer` with `token` and, if given, `X-Forwarded-For`.
fn from(peer: &str, token: &str, forwarded: Option<&str>) -> Request<Body> {
    let mut req = Request::get("/openapi/jobs")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .extension(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
    if let Some(f) = forwarded {
        req = req.header("x-forwarded-for", f);
    }
    req.body(Body::empty()).unwrap()
}

pub async fn failed_authentications_are_limited_per_address(app: App) {
    let config = ApiConfig {
        api_auth_fail_limit: 3,
        api_trusted_proxies: vec!["10.0.0.1".parse().unwrap()],
        ..ApiConfig::default()
    };
    let limited = spawn_app_config(app.store.clone(), config, |s| s).await;
    let good = limited.token.clone().unwrap();
    let attacker = limited.calling_from("192.0.2.1:4000");
    let guessing = attacker.with_token(Some(random_token()));
    for _ in 0..3 {
        guessing
            .get("/openapi/jobs")
            .await
            .error(401, "unauthorized");
    }
    let reads = limited.state.key_store_reads();
    let resp = attacker
        .with_token(Some(random_token()))
        .get("/openapi/jobs")
        .await;
    resp.error(429, "rate_limited");
    assert_eq!(retry_after(&resp), 20, "one failure back every 20 s");
    assert_eq!(
        limited.state.key_store_reads(),
        reads,
        "a refused address costs no read"
    );
    attacker
        .get("/openapi/jobs")
        .await
        .error(429, "rate_limited");
    // Other addresses, and requests with no address, are not affected.
    limited
        .calling_from("192.0.2.2:4000")
        .get("/openapi/jobs")
        .await
        .ok(200);
    for _ in 0..5 {
        limited
            .with_token(Some(random_token()))
            .get("/openapi/jobs")
            .await
            .error(401, "unauthorized");
    }
    // Behind a trusted proxy, the forwarded client is counted, not the proxy.
    let bad = random_token();
    for _ in 0..3 {
        let resp = limited
            .send(from("10.0.0.1:1", &bad, Some("198.51.100.7")))
            .await;
        resp.error(401, "unauthorized");
    }
    limited
        .send(from("10.0.0.1:1", &good, Some("198.51.100.7")))
        .await
        .error(429, "rate_limited");
    limited
        .send(from("10.0.0.1:1", &good, Some("198.51.100.8")))
        .await
        .ok(200);
    // An untrusted peer cannot pick its address by the header.
    for _ in 0..3 {
        let resp = limited
            .send(from("192.0.2.9:1", &bad, Some("198.51.100.9")))
            .await;
        resp.error(401, "unauthorized");
    }
    limited
        .send(from("192.0.2.9:1", &good, Some("198.51.100.10")))
        .await
        .error(429, "rate_limited");
}

pub async fn a_revoke_evicts_the_key_here_at_once(app: App) {
    let long_cache = ApiConfig {
        key_cache_ttl: Duration::from_secs(3600),
        ..ApiConfig::default()
    };
    let here = spawn_app_config(app.store.clone(), long_cache, |s| s).await;
    let there = spawn_app_config(app.store.clone(), ApiConfig::default(), |s| s).await;
    let created = here
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": "write"}),
        )
        .await
        .ok(201);
    let token = created["keyToken"].as_str().unwrap().to_string();
    let prefix = created["prefix"].as_str().unwrap().to_string();
    let user_here = here.with_token(Some(token.clone()));
    let user_there = there.with_token(Some(token));
    user_here.get("/openapi/jobs").await.ok(200);
    user_there.get("/openapi/jobs").await.ok(200);
    here.delete(&format!("/openapi/keys/{prefix}"))
        .await
        .ok(200);
    // Cached for an hour here, yet refused on the very next request.
    user_here
        .get("/openapi/jobs")
        .await
        .error(401, "unauthorized");
    testkit::wait_for(
        "the other instance to refuse the revoked key",
        Duration::from_secs(2),
        || async { (user_there.get("/openapi/jobs").await.status == 401).then_some(()) },
    )
    .await;
}

pub async fn nul_is_refused_on_every_database(app: App) {
    let before = app.snapshot().await;
    let create = |body: Value| {
        let app = app.clone();
        async move { app.post_json("/openapi/jobs", &body).await }
    };
    for (body, field) in [
        (
            json!({"jobName": "a\u{0}b", "jobHandler": "noop"}),
            "jobName",
        ),
        (json!({"jobName": "a", "jobHandler": "\u{0}"}), "jobHandler"),
        (
            json!({"jobName": "a", "jobHandler": "noop", "params": {"k": "v\u{0}"}}),
            "params.k",
        ),
        (
            json!({"jobName": "a", "jobHandler": "noop", "params": {"l": [1, {"k\u{0}": 1}]}}),
            "params.l[1]",
        ),
        (
            json!({"jobName": "a", "jobHandler": "noop", "clientRequestId": "x\u{0}"}),
            "clientRequestId",
        ),
        (
            json!({"jobName": "a", "jobHandler": "noop", "callbackUrl": "http://h/\u{0}"}),
            "callbackUrl",
        ),
        (
            json!({"jobName": "a", "jobHandler": "noop", "workerGroup": "g\u{0}"}),
            "workerGroup",
        ),
    ] {
        let err = create(body).await.error(422, "invalid_field");
        assert_eq!(err["field"], field, "{err}");
        assert!(err["message"].as_str().unwrap().contains("NUL"), "{err}");
    }
    // In a batch, only the item holding it fails.
    let out = app
        .post_json(
            "/openapi/jobs/batch",
            &json!({"jobs": [one_shot("ok"), {"jobName": "b\u{0}", "jobHandler": "noop"}]}),
        )
        .await
        .ok(200);
    assert_eq!(out["results"][0]["status"], 201, "{out}");
    assert_eq!(out["results"][1]["status"], 422, "{out}");
    assert_eq!(out["results"][1]["error"]["field"], "jobName", "{out}");
    let job = out["results"][0]["job"]["jobId"]
        .as_str()
        .unwrap()
        .to_string();
    let after_batch = app.snapshot().await;
    assert_eq!(after_batch.len(), before.len() + 1);

    // Every other way text comes in: patch, pause reason, query, path, admin.
    let uri = format!("/openapi/jobs/{job}");
    app.patch_json(&uri, &json!({"version": 1, "params": {"\u{0}": 1}}))
        .await
        .error(422, "invalid_field");
    let err = app
        .post_json(&format!("{uri}/pause"), &json!({"reason": "r\u{0}"}))
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "reason");
    let err = app
        .get("/openapi/jobs?cursor=%00")
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "cursor");
    let err = app
        .get("/openapi/jobs/a%00b")
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "id");
    let err = app
        .post_json(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": "read", "name": "\u{0}"}),
        )
        .await
        .error(422, "invalid_field");
    assert_eq!(err["field"], "name");
    assert_eq!(app.snapshot().await, after_batch, "nothing changed");

    // A backslash followed by `u0000` is text like any other.
    let id = app
        .create(
            &json!({"jobName": "\\u0000", "jobHandler": "noop", "params": {"\\u0000": "\\u0000"}}),
        )
        .await;
    let stored = app.get(&format!("/openapi/jobs/{id}")).await.ok(200);
    assert_eq!(stored["jobName"], "\\u0000");
    assert_eq!(stored["params"], json!({"\\u0000": "\\u0000"}));
}
