//! End-to-end on both stacks: API keys and tenants through real processes
//! (the harness's admin key comes from `kairos keys create` on a fresh
//! database, or from `kairos dev`'s key file), and the `http` handler's
//! request-forgery guard in a real worker.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use serde_json::{Value, json};
use std::time::Duration;
use support::{Cluster, Stack};

async fn status_of(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.expect("API reachable");
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn keys_and_tenants_through_real_processes(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    let http = reqwest::Client::new();
    let url = |p: &str| format!("{}{p}", cluster.base);
    let (code, body) = status_of(http.get(url("/openapi/jobs"))).await;
    assert_eq!(
        (code, &body["error"]["code"]),
        (401, &json!("unauthorized"))
    );
    let a_job = cluster.create_one_shot("mine", "noop", json!({})).await;
    let (code, tenant) = cluster
        .post("/openapi/tenants", &json!({"tenantId": "bravo"}))
        .await;
    assert_eq!(code, 201, "{tenant}");
    let (code, key) = cluster
        .post(
            "/openapi/keys",
            &json!({"tenantId": "bravo", "role": "write"}),
        )
        .await;
    assert_eq!(code, 201, "{key}");
    let b_key = key["keyToken"].as_str().unwrap();
    let (code, _) = status_of(
        http.get(url(&format!("/openapi/jobs/{a_job}")))
            .bearer_auth(b_key),
    )
    .await;
    assert_eq!(code, 404, "another tenant's job is unknown");
    let (code, _) = status_of(
        http.delete(url(&format!("/openapi/jobs/{a_job}")))
            .bearer_auth(b_key),
    )
    .await;
    assert_eq!(code, 404);
    let (code, _) = status_of(http.get(url("/openapi/workers")).bearer_auth(b_key)).await;
    assert_eq!(code, 403, "workers are for admin keys");
    let (code, _) = status_of(
        http.post(url(&format!(
            "/openapi/keys/{}",
            key["prefix"].as_str().unwrap()
        )))
        .bearer_auth(&cluster.key),
    )
    .await;
    assert_eq!(code, 405);
    let (code, _) = cluster
        .delete(&format!(
            "/openapi/keys/{}",
            key["prefix"].as_str().unwrap()
        ))
        .await;
    assert_eq!(code, 200);
    kairos_testkit::wait_for(
        "the revoked key to be refused",
        Duration::from_secs(1),
        || async {
            let r = http
                .get(url("/openapi/jobs"))
                .bearer_auth(b_key)
                .send()
                .await
                .ok()?;
            (r.status().as_u16() == 401).then_some(())
        },
    )
    .await;
    cluster
        .wait_jobs(&[a_job], &["succeeded"], Duration::from_secs(60))
        .await;
    cluster.stop_all();
}

/// A worker without `KAIROS_HTTP_ALLOW_PRIVATE` refuses an `http` job aimed
/// at a loopback service, and the execution fails saying why.
async fn http_jobs_to_loopback_are_refused(stack: Stack) {
    let env = [("KAIROS_HTTP_ALLOW_PRIVATE", "false")];
    let Some(mut cluster) = Cluster::start_with(stack, 1, 1, &env).await else {
        return;
    };
    cluster.wait_workers(1).await;
    // The API itself is a loopback service that answers.
    let target = format!("{}/healthz", cluster.base);
    let job = cluster
        .create_one_shot("ssrf", "http", json!({"url": target}))
        .await;
    cluster
        .wait_jobs(
            std::slice::from_ref(&job),
            &["failed"],
            Duration::from_secs(60),
        )
        .await;
    let execs = cluster.executions(&job).await;
    let error = execs[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("refused"), "{error}");
    assert!(error.contains("loopback"), "{error}");
    assert!(error.contains("KAIROS_HTTP_ALLOW_PRIVATE=true"), "{error}");
    cluster.stop_all();
}

on_both_stacks!(
    keys_and_tenants_through_real_processes,
    http_jobs_to_loopback_are_refused,
);
