//! `GET /openapi/executions`: the tenant's executions across jobs, filtered
//! by state, job, handler, worker and due time, paged newest first.

use super::support::App;
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::store::Dispatch;
use kairos_core::time::{now_ms, to_rfc3339};
use serde_json::{Value, json};

/// Claims `job`'s first trigger and applies `kind` from `worker`; the
/// execution id and its due time.
async fn run(app: &App, job_id: &str, worker: &str, kind: ResultKind) -> (String, i64) {
    let (id, due) = super::support::claim_first(app, job_id).await;
    let result = ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: id.clone(),
        attempt: 1,
        worker_id: worker.into(),
        kind,
        output: None,
        error: (kind == ResultKind::Failed).then(|| "boom".to_string()),
        at: now_ms(),
        retryable: Some(false),
        incarnation: None,
    };
    app.store
        .results_apply(std::slice::from_ref(&result), now_ms())
        .await
        .unwrap();
    (id, due)
}

fn ids(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["executionId"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn sorted(mut v: Vec<&String>) -> Vec<String> {
    v.sort();
    v.into_iter().cloned().collect()
}

pub async fn executions_are_filtered_across_jobs(app: App) {
    let early = "2030-01-01T00:00:00Z";
    let late = "2030-01-01T01:00:00Z";
    let a = app
        .create(&json!({"jobName": "a", "jobHandler": "noop", "triggerAt": early}))
        .await;
    let b = app
        .create(&json!({"jobName": "b", "jobHandler": "fail", "triggerAt": early}))
        .await;
    let c = app
        .create(&json!({"jobName": "c", "jobHandler": "fail", "triggerAt": late}))
        .await;
    let (ea, due_early) = run(&app, &a, "w1", ResultKind::Succeeded).await;
    let (eb, _) = run(&app, &b, "w2", ResultKind::Failed).await;
    let (ec, due_late) = run(&app, &c, "w1", ResultKind::Failed).await;
    let other = app
        .as_new_key("bravo", kairos_core::tenant::Role::Write)
        .await;
    let foreign = other
        .create(&json!({"jobName": "x", "jobHandler": "fail"}))
        .await;
    assert!(!foreign.is_empty());

    let list = |q: &str| {
        let app = app.clone();
        let q = q.to_string();
        async move { ids(&app.get(&format!("/openapi/executions{q}")).await.ok(200)) }
    };
    assert_eq!(
        list("").await,
        sorted(vec![&ea, &eb, &ec]),
        "this tenant's only"
    );
    assert_eq!(list("?status=failed").await, sorted(vec![&eb, &ec]));
    assert_eq!(
        list("?status=succeeded,%20failed").await,
        sorted(vec![&ea, &eb, &ec])
    );
    assert_eq!(
        list(&format!("?jobId={b}")).await,
        std::slice::from_ref(&eb)
    );
    assert_eq!(list("?handler=fail").await, sorted(vec![&eb, &ec]));
    assert_eq!(list("?workerId=w1").await, sorted(vec![&ea, &ec]));
    assert_eq!(
        list("?handler=fail&workerId=w1&status=failed").await,
        std::slice::from_ref(&ec)
    );
    let from = to_rfc3339(due_late);
    assert_eq!(
        list(&format!("?from={from}")).await,
        std::slice::from_ref(&ec),
        "from is inclusive"
    );
    assert_eq!(
        list(&format!("?to={from}")).await,
        sorted(vec![&ea, &eb]),
        "to is exclusive"
    );
    assert_eq!(
        list(&format!(
            "?from={}&to={}",
            to_rfc3339(due_early),
            to_rfc3339(due_early + 1)
        ))
        .await,
        sorted(vec![&ea, &eb])
    );
    assert!(list("?handler=nothing").await.is_empty());

    // Paging keeps the filter.
    let first = app
        .get("/openapi/executions?handler=fail&limit=1")
        .await
        .ok(200);
    assert_eq!(
        ids(&first),
        std::slice::from_ref(&ec),
        "newest trigger first"
    );
    let cursor = first["nextCursor"].as_str().unwrap();
    let second = app
        .get(&format!(
            "/openapi/executions?handler=fail&limit=1&cursor={cursor}"
        ))
        .await
        .ok(200);
    assert_eq!(ids(&second), std::slice::from_ref(&eb));
    assert!(second["nextCursor"].is_null());

    // Bad filters are refused, naming the parameter.
    for (q, field) in [
        ("?status=broken", "status"),
        ("?from=yesterday", "from"),
        ("?to=2030-13-01T00:00:00Z", "to"),
        (&format!("?from={late}&to={early}") as &str, "to"),
        ("?limit=501", "limit"),
    ] {
        let err = app
            .get(&format!("/openapi/executions{q}"))
            .await
            .error(422, "invalid_field");
        assert_eq!(err["field"], field, "{q}: {err}");
    }
}
