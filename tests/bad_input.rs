//! End-to-end: bad requests to a running API each get a 4xx JSON error, the
//! API stays up, and nothing already stored changes.

use kairos_testkit::cluster as support;

use serde_json::{Value, json};
use support::{Cluster, Stack};

fn cases() -> Vec<(&'static str, &'static str, String, &'static str)> {
    let big = "x".repeat(70 * 1024);
    vec![
        ("malformed JSON", "POST", r#"{"jobName": "#.to_string(), "application/json"),
        ("missing jobName", "POST", json!({"jobHandler": "noop"}).to_string(), "application/json"),
        ("wrong type", "POST", json!({"jobName": 5, "jobHandler": "noop"}).to_string(), "application/json"),
        ("invalid cron", "POST", json!({"jobName": "a", "jobHandler": "noop", "cronExpr": "every day"}).to_string(), "application/json"),
        ("unknown timezone", "POST", json!({"jobName": "a", "jobHandler": "noop", "cronExpr": "* * * * *", "timezone": "Mars/Base"}).to_string(), "application/json"),
        ("bad callback URL", "POST", json!({"jobName": "a", "jobHandler": "noop", "callbackUrl": "ftp://x"}).to_string(), "application/json"),
        ("oversized params", "POST", json!({"jobName": "a", "jobHandler": "noop", "params": {"blob": big}}).to_string(), "application/json"),
        ("negative maxAttempts", "POST", json!({"jobName": "a", "jobHandler": "noop", "maxAttempts": -1}).to_string(), "application/json"),
        ("negative timeoutMs", "POST", json!({"jobName": "a", "jobHandler": "noop", "timeoutMs": -5}).to_string(), "application/json"),
        ("triggerAt with cron", "POST", json!({"jobName": "a", "jobHandler": "noop", "cronExpr": "* * * * *", "triggerAt": "2030-01-01T00:00:00Z"}).to_string(), "application/json"),
        ("wrong content type", "POST", json!({"jobName": "a", "jobHandler": "noop"}).to_string(), "text/plain"),
    ]
}

async fn bad_input_gets_4xx_json_and_changes_nothing(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 1).await else {
        return;
    };
    let existing = cluster
        .create_job(json!({"jobName": "keep", "jobHandler": "noop", "cronExpr": "0 0 1 1 *"}))
        .await;
    let before = cluster.get(&format!("/openapi/jobs/{existing}")).await;
    let http = reqwest::Client::new();
    for (what, method, body, content_type) in cases() {
        let req = cluster
            .authorized(http.request(
                method.parse().unwrap(),
                format!("{}/openapi/jobs", cluster.base),
            ))
            .header("content-type", content_type)
            .body(body);
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{what}: API unreachable: {e}"));
        let status = resp.status().as_u16();
        let body: Value = resp
            .json()
            .await
            .unwrap_or_else(|e| panic!("{what}: error body is not JSON: {e}"));
        assert!(
            (400..500).contains(&status),
            "{what}: expected 4xx, got {status} {body}"
        );
        assert!(body["error"]["code"].is_string(), "{what}: {body}");
        assert!(body["error"]["message"].is_string(), "{what}: {body}");
    }
    for path in [
        "/openapi/jobs/does-not-exist",
        "/openapi/executions/does-not-exist",
        "/no/such/route",
    ] {
        let resp = cluster
            .authorized(http.get(format!("{}{path}", cluster.base)))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 404, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["error"]["code"].is_string(), "{path}: {body}");
    }
    let listed = cluster.get("/openapi/jobs").await;
    assert_eq!(
        listed["items"].as_array().unwrap().len(),
        1,
        "no bad request stored a job: {listed}"
    );
    assert_eq!(
        cluster.get(&format!("/openapi/jobs/{existing}")).await,
        before,
        "the stored job is unchanged"
    );
    assert_eq!(
        cluster.get("/healthz").await["status"],
        "ok",
        "the API is still up"
    );
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn services_bad_input_gets_4xx_json_and_changes_nothing() {
    bad_input_gets_4xx_json_and_changes_nothing(Stack::Services).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_bad_input_gets_4xx_json_and_changes_nothing() {
    bad_input_gets_4xx_json_and_changes_nothing(Stack::Embedded).await;
}
