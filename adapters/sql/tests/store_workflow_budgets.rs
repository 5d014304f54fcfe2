//! Store suite, the budgets of a workflow run (issue 44): a run makes at
//! most its budget of executions, and the parent outputs it copies into
//! its nodes' executions are capped per node and per run. A node refused
//! is settled `failed` with the reason as its execution's error, and the
//! run moves on as for any failure; on SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::protocol::ResultKind::Succeeded;
use kairos_core::store::{Dispatch, DispatchWork, History};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::{
    NewWorkflow, NodeStatus, RunDetail, RunStatus, Workflow, WorkflowCreated, WorkflowRun,
    WorkflowStore,
};
use kairos_store_sql::SqlStore;
use serde_json::json;
use support::{T0, id, result};

store_cases!(
    a_run_stops_at_its_execution_budget,
    parent_outputs_are_capped_per_node,
    parent_outputs_are_capped_per_run,
);

/// 1 → 3 in parallel → 1.
fn diamond() -> Workflow {
    serde_json::from_value(json!({
        "nodes": [
            {"id": "a", "handler": "h"},
            {"id": "b1", "handler": "h"}, {"id": "b2", "handler": "h"}, {"id": "b3", "handler": "h"},
            {"id": "c", "handler": "h"}
        ],
        "edges": [
            {"from": "a", "to": "b1"}, {"from": "a", "to": "b2"}, {"from": "a", "to": "b3"},
            {"from": "b1", "to": "c"}, {"from": "b2", "to": "c"}, {"from": "b3", "to": "c"}
        ]
    }))
    .unwrap()
}

async fn started(store: &SqlStore, tenant: &str) -> WorkflowRun {
    let new = NewWorkflow {
        id: id(),
        tenant: tenant.into(),
        name: "wf".into(),
        definition: diamond(),
        client_request_id: None,
        request_hash: None,
        run_now: Some(id()),
        schedule: None,
        next_trigger_at: None,
        callback_url: None,
        created_at: T0,
    };
    match store.workflow_create(new).await.unwrap() {
        WorkflowCreated::Created(_, Some(run)) => run,
        other => panic!("expected a new workflow with a run, got {other:?}"),
    }
}

/// Every pending execution succeeds with `output`, each in its own
/// transaction, until none is left.
async fn run_out(store: &SqlStore, output: serde_json::Value) {
    for round in 1..20 {
        let at: Millis = T0 + round;
        let due: Vec<DispatchWork> = store
            .executions_find_unpublished(at, 100, &Routable::Any)
            .await
            .unwrap();
        if due.is_empty() {
            return;
        }
        for w in due {
            let mut r = result(&w, 1, Succeeded, at);
            r.output = Some(output.clone());
            store.results_apply(&[r], at).await.unwrap();
        }
    }
    panic!("the run never ended");
}

async fn detail(store: &SqlStore, run: &WorkflowRun) -> RunDetail {
    store
        .workflow_run_get(&run.tenant, &run.workflow_id, &run.id)
        .await
        .unwrap()
        .expect("run")
}

/// Each node's state, and the error of its execution.
async fn nodes(store: &SqlStore, run: &WorkflowRun) -> Vec<(String, NodeStatus, Option<String>)> {
    let d = detail(store, run).await;
    let mut out = Vec::new();
    for n in &d.nodes {
        let error = match &n.execution_id {
            Some(e) => store
                .execution_get(&run.tenant, e)
                .await
                .unwrap()
                .and_then(|e| e.error),
            None => None,
        };
        out.push((n.node_id.clone(), n.status, error));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

async fn a_run_stops_at_its_execution_budget(store: SqlStore) {
    let store = store.with_run_limits(RunLimits {
        max_executions: 2,
        ..RunLimits::default()
    });
    let run = started(&store, "wb1").await;
    run_out(&store, json!(1)).await;
    let states = nodes(&store, &run).await;
    let state = |n: &str| states.iter().find(|s| s.0 == n).unwrap().clone();
    assert_eq!(state("a").1, NodeStatus::Succeeded);
    assert_eq!(state("b1").1, NodeStatus::Succeeded);
    for refused in ["b2", "b3"] {
        let (_, st, error) = state(refused);
        assert_eq!(st, NodeStatus::Failed, "{refused}");
        let error = error.unwrap_or_default();
        assert!(
            error.contains("budget of 2 executions"),
            "{refused}: {error}"
        );
    }
    assert_eq!(
        state("c").1,
        NodeStatus::Skipped,
        "its failed parents skip it"
    );
    assert_eq!(detail(&store, &run).await.run.status, RunStatus::Failed);
}

async fn parent_outputs_are_capped_per_node(store: SqlStore) {
    let store = store.with_run_limits(RunLimits {
        node_parent_outputs_bytes: 100,
        ..RunLimits::default()
    });
    let run = started(&store, "wb2").await;
    // a's output, as b's parent outputs, is about 210 bytes.
    run_out(&store, json!({"blob": "x".repeat(200)})).await;
    for (node, st, error) in nodes(&store, &run).await {
        match node.as_str() {
            "a" => assert_eq!(st, NodeStatus::Succeeded),
            "c" => assert_eq!(st, NodeStatus::Skipped),
            _ => {
                assert_eq!(st, NodeStatus::Failed, "{node}");
                let error = error.unwrap_or_default();
                assert!(error.contains("100 bytes a node may receive"), "{error}");
            }
        }
    }
    // Nothing was stored for the refused nodes.
    let d = detail(&store, &run).await;
    for n in d.nodes.iter().filter(|n| n.status == NodeStatus::Failed) {
        let e = n.execution_id.as_deref().unwrap();
        let exec = store.execution_get("wb2", e).await.unwrap().unwrap();
        assert_eq!(exec.status, ExecStatus::Failed);
        let events = store.execution_events("wb2", e).await.unwrap();
        assert!(
            events.iter().any(|ev| ev.error.is_some()),
            "the reason is in its history"
        );
    }
    assert_eq!(d.run.status, RunStatus::Failed);
}

async fn parent_outputs_are_capped_per_run(store: SqlStore) {
    // Each b receives {"a":{"blob":"…40…"}}: 55 bytes; the run may store
    // 120, so two of them run and the third is refused.
    let store = store.with_run_limits(RunLimits {
        run_parent_outputs_bytes: 120,
        ..RunLimits::default()
    });
    let run = started(&store, "wb3").await;
    run_out(&store, json!({"blob": "y".repeat(40)})).await;
    let states = nodes(&store, &run).await;
    let ran = states
        .iter()
        .filter(|s| s.0.starts_with('b') && s.1 == NodeStatus::Succeeded)
        .count();
    let refused: Vec<_> = states
        .iter()
        .filter(|s| s.0.starts_with('b') && s.1 == NodeStatus::Failed)
        .collect();
    assert_eq!(ran, 2, "{states:?}");
    assert_eq!(refused.len(), 1, "{states:?}");
    let error = refused[0].2.clone().unwrap_or_default();
    assert!(error.contains("past 120 bytes"), "{error}");
    assert_eq!(detail(&store, &run).await.run.status, RunStatus::Failed);
}
