//! Every kind of bad input gets a 4xx JSON error and leaves the store as it was.

use super::support::{App, one_shot};
use axum::http::Method;
use serde_json::{Value, json};

/// `one_shot` with `extra` fields set.
fn with(extra: Value) -> Vec<u8> {
    let mut body = one_shot("bad");
    for (k, v) in extra.as_object().expect("object") {
        body[k] = v.clone();
    }
    body.to_string().into_bytes()
}

pub async fn bad_input_is_refused_and_changes_nothing(app: App) {
    let existing = app.create(&one_shot("existing")).await;
    let before = app.snapshot().await;
    assert_eq!(before.len(), 1);
    let due_before = app.due.lock().unwrap().len();

    let json = |v: Value| v.to_string().into_bytes();
    let big_params = json!({"params": {"blob": "x".repeat(70 * 1024)}});
    let big_body = json!({"params": {"blob": "x".repeat(1024 * 1024 + 1)}});
    let both = json!({"cronExpr": "* * * * *", "triggerAt": "2099-01-01T00:00:00Z"});
    let mars = json!({"cronExpr": "* * * * *", "timezone": "Mars/Olympus"});
    // Bodies POSTed to /openapi/jobs as JSON: (body, status, code, field or "").
    let creates: Vec<(Vec<u8>, u16, &str, &str)> = vec![
        (b"{\"jobName\":".to_vec(), 400, "invalid_json", ""),
        (b"{} {}".to_vec(), 400, "invalid_json", ""),
        (Vec::new(), 400, "invalid_json", ""),
        (b"[1, 2]".to_vec(), 422, "invalid_field", "body"),
        (
            json(json!({"jobHandler": "noop"})),
            422,
            "missing_field",
            "jobName",
        ),
        (
            json(json!({"jobName": "a"})),
            422,
            "missing_field",
            "jobHandler",
        ),
        (with(json!({"jobName": 5})), 422, "invalid_field", "jobName"),
        (
            with(json!({"jobName": ""})),
            422,
            "invalid_field",
            "jobName",
        ),
        (
            with(json!({"maxAttempts": "3"})),
            422,
            "invalid_field",
            "maxAttempts",
        ),
        (
            with(json!({"maxAttempts": 1.5})),
            422,
            "invalid_field",
            "maxAttempts",
        ),
        (
            with(json!({"cronExpr": "every minute"})),
            422,
            "invalid_cron",
            "cronExpr",
        ),
        (with(mars), 422, "unknown_timezone", "timezone"),
        (
            with(json!({"callbackUrl": "ftp://x.org/a"})),
            422,
            "invalid_url",
            "callbackUrl",
        ),
        (
            with(json!({"callbackUrl": "not a url"})),
            422,
            "invalid_url",
            "callbackUrl",
        ),
        (with(big_params), 413, "payload_too_large", ""),
        (with(big_body), 413, "payload_too_large", ""),
        (
            with(json!({"maxAttempts": -1})),
            422,
            "invalid_field",
            "maxAttempts",
        ),
        (
            with(json!({"maxAttempts": 0})),
            422,
            "invalid_field",
            "maxAttempts",
        ),
        (
            with(json!({"timeoutMs": -1})),
            422,
            "invalid_field",
            "timeoutMs",
        ),
        (
            with(json!({"retryBackoffMs": -1})),
            422,
            "invalid_field",
            "retryBackoffMs",
        ),
        (with(both), 422, "invalid_field", "triggerAt"),
        (
            with(json!({"triggerAt": "next tuesday"})),
            422,
            "invalid_field",
            "triggerAt",
        ),
        (
            with(json!({"clientRequestId": ""})),
            422,
            "invalid_field",
            "clientRequestId",
        ),
        (
            with(json!({"surprise": true})),
            422,
            "unknown_field",
            "surprise",
        ),
    ];
    for (body, status, code, field) in creates {
        let what = format!("POST /openapi/jobs {:.80}", String::from_utf8_lossy(&body));
        let resp = app
            .raw(
                Method::POST,
                "/openapi/jobs",
                Some("application/json"),
                body,
            )
            .await;
        assert_eq!(resp.status.as_u16(), status, "{what}: {:?}", resp.body);
        let err = resp.error(status, code);
        if !field.is_empty() {
            assert_eq!(err["field"], field, "{what}");
            let message = err["message"].as_str().unwrap();
            assert!(
                message.contains(field) || field == "body",
                "{what}: {message:?} names no field"
            );
        }
        assert_eq!(app.snapshot().await, before, "{what} changed stored jobs");
    }

    let ok_body = with(json!({}));
    // Other requests: (method, uri, content type, status, code).
    let others: Vec<(Method, String, Option<&str>, u16, &str)> = vec![
        (
            Method::POST,
            "/openapi/jobs".into(),
            Some("text/plain"),
            415,
            "unsupported_media_type",
        ),
        (
            Method::POST,
            "/openapi/jobs".into(),
            None,
            415,
            "unsupported_media_type",
        ),
        (
            Method::GET,
            "/openapi/jobs?status=done".into(),
            None,
            422,
            "invalid_field",
        ),
        (
            Method::GET,
            "/openapi/jobs?limit=0".into(),
            None,
            422,
            "invalid_field",
        ),
        (
            Method::GET,
            "/openapi/jobs?limit=501".into(),
            None,
            422,
            "invalid_field",
        ),
        (
            Method::GET,
            format!("/openapi/jobs/{existing}/executions?limit=-1"),
            None,
            422,
            "invalid_field",
        ),
        (
            Method::GET,
            "/openapi/jobs/no-such-job".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::GET,
            "/openapi/jobs/no-such-job/executions".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::GET,
            "/openapi/executions/no-such-execution".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/openapi/jobs/no-such-job/pause".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/openapi/jobs/no-such-job/resume".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/openapi/jobs/no-such-job/trigger".into(),
            None,
            404,
            "not_found",
        ),
        (
            Method::DELETE,
            "/openapi/jobs/no-such-job".into(),
            None,
            404,
            "not_found",
        ),
        (Method::GET, "/no/such/route".into(), None, 404, "not_found"),
        (
            Method::POST,
            "/openapi/nothing".into(),
            Some("application/json"),
            404,
            "not_found",
        ),
        (
            Method::PUT,
            "/openapi/jobs".into(),
            Some("application/json"),
            405,
            "method_not_allowed",
        ),
        (
            Method::GET,
            format!("/openapi/jobs/{existing}/pause"),
            None,
            405,
            "method_not_allowed",
        ),
        (
            Method::DELETE,
            "/openapi/workers".into(),
            None,
            405,
            "method_not_allowed",
        ),
    ];
    for (method, uri, content_type, status, code) in others {
        let what = format!("{method} {uri}");
        let resp = app.raw(method, &uri, content_type, ok_body.clone()).await;
        assert_eq!(resp.status.as_u16(), status, "{what}: {:?}", resp.body);
        resp.error(status, code);
        assert_eq!(app.snapshot().await, before, "{what} changed stored jobs");
    }
    assert_eq!(
        app.due.lock().unwrap().len(),
        due_before,
        "no refused request woke the dispatcher"
    );
}
