//! Broadcast and sharded jobs through the API: `executionMode` and
//! `shardCount` validated (422 naming the field), shown on the job, in the
//! OpenAPI document, and each execution's shard shown.

use super::support::{App, one_shot};
use kairos_core::store::DispatchScope;
use kairos_core::store::{Dispatch, JobStore};
use kairos_core::tenant::DEFAULT_TENANT;
use kairos_core::time::now_ms;
use serde_json::{Value, json};

/// `one_shot` with `extra` fields set.
fn with(extra: Value) -> Value {
    let mut body = one_shot("shards");
    for (k, v) in extra.as_object().expect("object") {
        body[k] = v.clone();
    }
    body
}

pub async fn execution_modes_are_validated_shown_and_documented(app: App) {
    let before = app.snapshot().await;
    let refused = [
        (json!({"executionMode": "fanout"}), "executionMode"),
        (json!({"executionMode": 3}), "executionMode"),
        (json!({"executionMode": "sharded"}), "shardCount"),
        (
            json!({"executionMode": "sharded", "shardCount": 0}),
            "shardCount",
        ),
        (
            json!({"executionMode": "sharded", "shardCount": -1}),
            "shardCount",
        ),
        (
            json!({"executionMode": "sharded", "shardCount": 1025}),
            "shardCount",
        ),
        (
            json!({"executionMode": "sharded", "shardCount": "8"}),
            "shardCount",
        ),
        (
            json!({"executionMode": "sharded", "shardCount": 2.5}),
            "shardCount",
        ),
        (
            json!({"executionMode": "broadcast", "shardCount": 2}),
            "shardCount",
        ),
        (json!({"shardCount": 2}), "shardCount"),
    ];
    for (extra, field) in refused {
        let resp = app.post_json("/openapi/jobs", &with(extra.clone())).await;
        let err = resp.error(422, "invalid_field");
        assert_eq!(err["field"], field, "{extra}");
        assert!(
            err["message"].as_str().unwrap().contains(field),
            "{extra}: {err}"
        );
    }
    assert_eq!(app.snapshot().await, before, "nothing stored");

    let single = app.create(&one_shot("single")).await;
    let shown = app.get(&format!("/openapi/jobs/{single}")).await.ok(200);
    assert_eq!(
        (&shown["executionMode"], &shown["shardCount"]),
        (&json!("single"), &Value::Null)
    );
    let broadcast = app
        .create(&with(json!({"executionMode": "broadcast"})))
        .await;
    let shown = app.get(&format!("/openapi/jobs/{broadcast}")).await.ok(200);
    assert_eq!(shown["executionMode"], "broadcast");
    assert_eq!(shown["shardCount"], Value::Null);
    let sharded = app
        .create(&with(json!({"executionMode": "sharded", "shardCount": 4})))
        .await;
    let shown = app.get(&format!("/openapi/jobs/{sharded}")).await.ok(200);
    assert_eq!(
        (&shown["executionMode"], &shown["shardCount"]),
        (&json!("sharded"), &json!(4))
    );

    // Its trigger claimed as the dispatcher does: four executions, each
    // showing its shard.
    let job = app
        .store
        .job_get(DEFAULT_TENANT, &sharded)
        .await
        .unwrap()
        .unwrap();
    let now = now_ms().max(job.next_trigger_at.unwrap());
    let claims =
        kairos_core::shard::fan_out(kairos_core::trigger::claims_for([job], now), |_| Vec::new());
    assert_eq!(
        app.store
            .triggers_claim(DispatchScope::All { fence: 1 }, &claims, now)
            .await
            .unwrap()
            .work
            .len(),
        4
    );
    let page = app
        .get(&format!("/openapi/jobs/{sharded}/executions"))
        .await
        .ok(200);
    let mut shards: Vec<(u64, u64)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["shardIndex"].as_u64().unwrap(),
                e["shardCount"].as_u64().unwrap(),
            )
        })
        .collect();
    shards.sort();
    assert_eq!(shards, [(0, 4), (1, 4), (2, 4), (3, 4)]);

    let doc = app.get("/openapi.json").await.ok(200);
    let schemas = &doc["components"]["schemas"];
    let mode = &schemas["CreateJobRequest"]["properties"]["executionMode"];
    assert_eq!(mode["enum"], json!(["single", "broadcast", "sharded"]));
    assert!(schemas["CreateJobRequest"]["properties"]["shardCount"].is_object());
    for field in ["executionMode", "shardCount"] {
        assert!(
            schemas["JobView"]["properties"][field].is_object(),
            "{field}"
        );
    }
    for field in ["shardIndex", "shardCount"] {
        assert!(
            schemas["ExecutionView"]["properties"][field].is_object(),
            "{field}"
        );
    }
}
