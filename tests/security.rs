//! End-to-end on both stacks: API keys and tenants through real processes
//! (the harness's admin key comes from `kairos keys create` on a fresh
//! database, or from `kairos dev`'s key file), and the `http` handler's
//! request-forgery guard and header rules in a real worker.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use serde_json::{Value, json};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// A worker without `KAIROS_HTTP_ALLOW_PRIVATE` refuses `http` jobs aimed at
/// a loopback service, at the blocks and IPv6 forms the probe of issue #32
/// reached, and at this host's own non-loopback addresses; each execution
/// fails naming the rule, and a service listening on every interface sees
/// nothing. A job setting `Host` fails naming the header.
async fn http_jobs_to_internal_addresses_are_refused(stack: Stack) {
    let env = [("KAIROS_HTTP_ALLOW_PRIVATE", "false")];
    let Some(mut cluster) = Cluster::start_with(stack, 1, 1, &env).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let hits = Arc::new(AtomicUsize::new(0));
    let port = listen_everywhere(hits.clone()).await;
    // The API itself is a loopback service that answers.
    let mut cases = vec![
        (
            format!("{}/healthz", cluster.base),
            "127.0.0.0/8 loopback (RFC 1122)".to_string(),
        ),
        (
            format!("http://198.18.0.1:{port}/"),
            "198.18.0.0/15 benchmarking (RFC 2544)".to_string(),
        ),
        (
            format!("http://192.0.0.1:{port}/"),
            "192.0.0.0/29 IPv4 service continuity prefix (RFC 7335)".to_string(),
        ),
        (
            format!("http://[2002:7f00:1::]:{port}/"),
            "2002::/16 6to4 (RFC 3056) carrying 127.0.0.0/8 loopback (RFC 1122)".to_string(),
        ),
    ];
    let own: Vec<IpAddr> = kairos_netguard::host_addresses()
        .expect("this host's addresses")
        .into_iter()
        .filter(|a| a.is_ipv4() && !a.is_loopback())
        .collect();
    assert!(!own.is_empty(), "this host has a non-loopback IPv4 address");
    for ip in own {
        // Refused by its block if it has one, else as this host's.
        let rule = kairos_netguard::special_rule(ip)
            .map(|r| r.to_string())
            .unwrap_or_else(|| "an address of this host".to_string());
        cases.push((format!("http://{ip}:{port}/"), rule));
    }
    let mut jobs = Vec::new();
    for (url, _) in &cases {
        jobs.push(
            cluster
                .create_one_shot("ssrf", "http", json!({ "url": url }))
                .await,
        );
    }
    let host_header = cluster
        .create_one_shot(
            "ssrf-host",
            "http",
            json!({"url": "http://example.com/", "headers": {"Host": "admin.internal"}}),
        )
        .await;
    jobs.push(host_header.clone());
    cluster
        .wait_jobs(&jobs, &["failed"], Duration::from_secs(60))
        .await;
    for ((url, rule), job) in cases.iter().zip(&jobs) {
        let execs = cluster.executions(job).await;
        let error = execs[0]["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with(&format!("http handler: refused: {rule}, for host ")),
            "{url}: {error}"
        );
        assert!(error.contains("KAIROS_HTTP_ALLOW_PRIVATE=true"), "{error}");
    }
    let execs = cluster.executions(&host_header).await;
    let error = execs[0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("http handler: params.headers may not set \"Host\""),
        "{error}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "no request got through");
    cluster.stop_all();
}

/// A service on every interface (as an admin port or a database might be)
/// counting the requests it gets; returns its port.
async fn listen_everywhere(hits: Arc<AtomicUsize>) -> u16 {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind on every interface");
    let port = listener.local_addr().expect("local address").port();
    let app = axum::Router::new().fallback(move || {
        hits.fetch_add(1, Ordering::SeqCst);
        async { "internal secret" }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

on_both_stacks!(
    keys_and_tenants_through_real_processes,
    http_jobs_to_internal_addresses_are_refused,
);
