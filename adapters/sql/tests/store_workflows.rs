//! Store suite, workflows (issue 34): a run creates its roots' executions,
//! each node's end advances the run in the transaction that records it
//! (children due with their parents' outputs, unreachable nodes skipped,
//! the run ended), one execution per node per run; cancel, idempotent
//! create, delete — on SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::protocol::ResultKind::{self, Failed, Started, Succeeded};
use kairos_core::protocol::ResultMsg;
use kairos_core::store::{Dispatch, DispatchWork, History, JobFilter, JobStore};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;
use kairos_core::workflow::{
    NewWorkflow, NodeStatus, RunControl, RunStatus, Workflow, WorkflowCreated, WorkflowRun,
    WorkflowStore, WorkflowTriggered,
};
use kairos_store_sql::SqlStore;
use serde_json::json;
use support::{T0, id, result};

store_cases!(
    a_diamond_runs_to_succeeded_and_the_fan_in_sees_every_output,
    a_failing_middle_node_skips_the_fan_in_and_fails_the_run,
    an_on_failure_branch_runs_when_its_parent_fails,
    a_node_is_settled_only_after_its_retries,
    cancel_ends_the_run_and_its_nodes,
    create_is_idempotent_and_delete_cancels_running_runs,
    scheduled_workflows_start_a_run_per_trigger,
    cancelling_a_node_job_by_hand_ends_its_run,
    a_node_whose_trigger_time_is_taken_still_runs_once,
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

fn new_wf(tenant: &str, def: Workflow, run_now: bool) -> NewWorkflow {
    NewWorkflow {
        id: id(),
        tenant: tenant.into(),
        name: "wf".into(),
        definition: def,
        client_request_id: None,
        request_hash: None,
        run_now: run_now.then(id),
        schedule: None,
        next_trigger_at: None,
        callback_url: None,
        created_at: T0,
    }
}

/// Creates and starts a workflow; its first run.
async fn started(store: &SqlStore, tenant: &str, def: Workflow) -> WorkflowRun {
    match store
        .workflow_create(new_wf(tenant, def, true))
        .await
        .unwrap()
    {
        WorkflowCreated::Created(_, Some(run)) => run,
        other => panic!("expected a new workflow with a run, got {other:?}"),
    }
}

/// What the dispatcher's sweep finds due at `now`, as `(job name's node
/// id, work)`, sorted by node id.
async fn sweep(store: &SqlStore, now: Millis) -> Vec<(String, DispatchWork)> {
    let work = store
        .executions_find_unpublished(now, 100, &Routable::Any)
        .await
        .unwrap();
    let mut out = Vec::new();
    for w in work {
        let job = store.job_get(&w.tenant, &w.job_id).await.unwrap().unwrap();
        let node = job.name.rsplit('/').next().unwrap().to_string();
        out.push((node, w));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn nodes(found: &[(String, DispatchWork)]) -> Vec<&str> {
    found.iter().map(|(n, _)| n.as_str()).collect()
}

fn outcome(
    w: &DispatchWork,
    attempt: u32,
    kind: ResultKind,
    output: serde_json::Value,
    at: Millis,
) -> ResultMsg {
    let mut r = result(w, attempt, kind, at);
    if kind == Succeeded {
        r.output = Some(output);
    }
    r
}

async fn apply(store: &SqlStore, results: &[ResultMsg], at: Millis) {
    let applied = store.results_apply(results, at).await.expect("apply");
    for a in applied {
        // A node that ended moved its run on: the dispatcher is told to
        // sweep its next nodes up.
        let ended = a.new_status.is_some_and(|s| s.is_terminal());
        assert_eq!(a.next_work, ended, "{a:?}");
    }
}

async fn run_now(store: &SqlStore, run: &WorkflowRun) -> kairos_core::workflow::RunDetail {
    store
        .workflow_run_get(&run.tenant, &run.workflow_id, &run.id)
        .await
        .unwrap()
        .expect("run")
}

fn state_of(d: &kairos_core::workflow::RunDetail, node: &str) -> NodeStatus {
    d.nodes.iter().find(|n| n.node_id == node).unwrap().status
}

async fn a_diamond_runs_to_succeeded_and_the_fan_in_sees_every_output(store: SqlStore) {
    let run = started(&store, "wf1", diamond()).await;
    let due = sweep(&store, T0).await;
    assert_eq!(nodes(&due), ["a"]);
    assert_eq!(due[0].1.parent_outputs, None, "a root has no parents");
    assert_eq!(due[0].1.scheduled_at, run.scheduled_at);
    apply(
        &store,
        &[outcome(
            &due[0].1,
            1,
            Succeeded,
            json!({"from": "a"}),
            T0 + 1,
        )],
        T0 + 1,
    )
    .await;

    let mid = sweep(&store, T0 + 2).await;
    assert_eq!(nodes(&mid), ["b1", "b2", "b3"]);
    for (_, w) in &mid {
        assert_eq!(w.parent_outputs, Some(json!({"a": {"from": "a"}})));
        assert_eq!(w.to_message().parent_outputs, w.parent_outputs);
    }
    // Two parents end in one batch, the third alone: the fan-in waits.
    apply(
        &store,
        &[
            outcome(&mid[0].1, 1, Succeeded, json!(1), T0 + 3),
            outcome(&mid[1].1, 1, Succeeded, json!(2), T0 + 3),
        ],
        T0 + 3,
    )
    .await;
    assert_eq!(
        nodes(&sweep(&store, T0 + 4).await),
        ["b3"],
        "c waits for b3"
    );
    assert_eq!(run_now(&store, &run).await.run.status, RunStatus::Running);
    apply(
        &store,
        &[outcome(&mid[2].1, 1, Succeeded, json!(3), T0 + 5)],
        T0 + 5,
    )
    .await;
    let last = sweep(&store, T0 + 6).await;
    assert_eq!(nodes(&last), ["c"], "b3 ended, c is due");
    assert_eq!(
        last[0].1.parent_outputs,
        Some(json!({"b1": 1, "b2": 2, "b3": 3}))
    );
    // A replayed result changes nothing: still one execution per node.
    apply(
        &store,
        &[outcome(&mid[2].1, 1, Succeeded, json!(3), T0 + 5)],
        T0 + 6,
    )
    .await;
    assert_eq!(nodes(&sweep(&store, T0 + 6).await), ["c"]);

    apply(
        &store,
        &[outcome(&last[0].1, 1, Succeeded, json!("done"), T0 + 7)],
        T0 + 7,
    )
    .await;
    let d = run_now(&store, &run).await;
    assert_eq!(d.run.status, RunStatus::Succeeded);
    assert_eq!(d.run.finished_at, Some(T0 + 7));
    assert!(d.nodes.iter().all(|n| n.status == NodeStatus::Succeeded));
    assert!(
        d.nodes
            .iter()
            .all(|n| n.execution_status == Some(ExecStatus::Succeeded))
    );
    let order: Vec<&str> = d.nodes.iter().map(|n| n.node_id.as_str()).collect();
    assert_eq!(order, ["a", "b1", "b2", "b3", "c"]);
    // The node executions are the tenant's executions; the node jobs are
    // not in the tenant's job list.
    let e = d.nodes[0].execution_id.as_deref().unwrap();
    assert!(store.execution_get("wf1", e).await.unwrap().is_some());
    let filter = JobFilter {
        limit: 100,
        ..JobFilter::default()
    };
    assert!(
        store
            .job_list("wf1", &filter)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

async fn a_failing_middle_node_skips_the_fan_in_and_fails_the_run(store: SqlStore) {
    let run = started(&store, "wf2", diamond()).await;
    let a = sweep(&store, T0).await;
    apply(
        &store,
        &[outcome(&a[0].1, 1, Succeeded, json!(0), T0 + 1)],
        T0 + 1,
    )
    .await;
    let mid = sweep(&store, T0 + 2).await;
    apply(
        &store,
        &[
            outcome(&mid[0].1, 1, Succeeded, json!(1), T0 + 3),
            outcome(&mid[1].1, 1, Failed, json!(null), T0 + 3),
        ],
        T0 + 3,
    )
    .await;
    assert_eq!(
        run_now(&store, &run).await.run.status,
        RunStatus::Running,
        "b3 still runs"
    );
    apply(
        &store,
        &[outcome(&mid[2].1, 1, Succeeded, json!(3), T0 + 4)],
        T0 + 4,
    )
    .await;
    let d = run_now(&store, &run).await;
    assert_eq!(d.run.status, RunStatus::Failed);
    assert_eq!(state_of(&d, "b2"), NodeStatus::Failed);
    assert_eq!(state_of(&d, "c"), NodeStatus::Skipped);
    assert!(sweep(&store, T0 + 5).await.is_empty(), "c never runs");
}

async fn an_on_failure_branch_runs_when_its_parent_fails(store: SqlStore) {
    let def: Workflow = serde_json::from_value(json!({
        "nodes": [{"id": "a", "handler": "h"}, {"id": "ok", "handler": "h"}, {"id": "fix", "handler": "h"}],
        "edges": [{"from": "a", "to": "ok"}, {"from": "a", "to": "fix", "condition": "onFailure"}]
    }))
    .unwrap();
    let run = started(&store, "wf3", def).await;
    let a = sweep(&store, T0).await;
    apply(
        &store,
        &[outcome(&a[0].1, 1, Failed, json!(null), T0 + 1)],
        T0 + 1,
    )
    .await;
    let next = sweep(&store, T0 + 2).await;
    assert_eq!(nodes(&next), ["fix"]);
    assert_eq!(next[0].1.parent_outputs, Some(json!({"a": null})));
    apply(
        &store,
        &[outcome(&next[0].1, 1, Succeeded, json!(1), T0 + 3)],
        T0 + 3,
    )
    .await;
    let d = run_now(&store, &run).await;
    assert_eq!(
        d.run.status,
        RunStatus::Succeeded,
        "the failure was handled"
    );
    assert_eq!(state_of(&d, "ok"), NodeStatus::Skipped);
}

async fn a_node_is_settled_only_after_its_retries(store: SqlStore) {
    let def: Workflow = serde_json::from_value(json!({
        "nodes": [{"id": "a", "handler": "h", "maxAttempts": 2, "retryBackoffMs": 10},
                  {"id": "b", "handler": "h"}],
        "edges": [{"from": "a", "to": "b"}]
    }))
    .unwrap();
    let run = started(&store, "wf4", def).await;
    let a = sweep(&store, T0).await;
    apply(
        &store,
        &[outcome(&a[0].1, 1, Failed, json!(null), T0 + 1)],
        T0 + 1,
    )
    .await;
    let d = run_now(&store, &run).await;
    assert_eq!(state_of(&d, "a"), NodeStatus::Active);
    assert_eq!(d.nodes[0].attempt, Some(2));
    let retry = sweep(&store, T0 + 20).await;
    assert_eq!(nodes(&retry), ["a"]);
    assert_eq!(retry[0].1.attempt, 2);
    apply(
        &store,
        &[outcome(&retry[0].1, 2, Succeeded, json!("second"), T0 + 21)],
        T0 + 21,
    )
    .await;
    let b = sweep(&store, T0 + 22).await;
    assert_eq!(nodes(&b), ["b"]);
    assert_eq!(b[0].1.parent_outputs, Some(json!({"a": "second"})));
}

async fn cancel_ends_the_run_and_its_nodes(store: SqlStore) {
    let def: Workflow = serde_json::from_value(json!({
        "nodes": [{"id": "a", "handler": "h"}, {"id": "r", "handler": "h"}, {"id": "b", "handler": "h"}],
        "edges": [{"from": "a", "to": "b"}]
    }))
    .unwrap();
    let run = started(&store, "wf5", def).await;
    let due = sweep(&store, T0).await;
    assert_eq!(nodes(&due), ["a", "r"]);
    // `a` runs; `r` is still pending.
    apply(&store, &[result(&due[0].1, 1, Started, T0 + 1)], T0 + 1).await;
    let done = store
        .workflow_run_cancel("wf5", &run.workflow_id, &run.id, T0 + 2)
        .await
        .unwrap();
    assert!(matches!(done, RunControl::Done(ref r) if r.status == RunStatus::Cancelled));
    let d = run_now(&store, &run).await;
    assert!(d.nodes.iter().all(|n| n.status == NodeStatus::Cancelled));
    let r = store
        .execution_get("wf5", &due[1].1.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, ExecStatus::Cancelled, "pending node cancelled");
    let a = store
        .execution_get("wf5", &due[0].1.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert!(a.stop_requested_at.is_some(), "running node asked to stop");
    // Its stop ends the execution; the run stays as it is.
    apply(
        &store,
        &[outcome(&due[0].1, 1, Failed, json!(null), T0 + 3)],
        T0 + 3,
    )
    .await;
    assert_eq!(run_now(&store, &run).await.run.status, RunStatus::Cancelled);
    assert!(sweep(&store, T0 + 4).await.is_empty());
    let again = store
        .workflow_run_cancel("wf5", &run.workflow_id, &run.id, T0 + 5)
        .await
        .unwrap();
    assert!(matches!(again, RunControl::Conflict(_)));
    let other = store
        .workflow_run_cancel("nobody", &run.workflow_id, &run.id, T0 + 5)
        .await
        .unwrap();
    assert_eq!(other, RunControl::NotFound);
}

async fn create_is_idempotent_and_delete_cancels_running_runs(store: SqlStore) {
    let mut new = new_wf("wf6", diamond(), false);
    new.client_request_id = Some("req-1".into());
    let WorkflowCreated::Created(wf, None) = store.workflow_create(new.clone()).await.unwrap()
    else {
        panic!("created without a run")
    };
    let again = store
        .workflow_create(NewWorkflow { id: id(), ..new })
        .await
        .unwrap();
    assert_eq!(again, WorkflowCreated::Existing(wf.clone()));
    assert_eq!(wf.node_jobs.len(), 5);
    assert!(
        sweep(&store, T0).await.is_empty(),
        "nothing runs before a trigger"
    );

    let started = |t: WorkflowTriggered| match t {
        WorkflowTriggered::Started(run) => run,
        other => panic!("a run, not {other:?}"),
    };
    let first = started(
        store
            .workflow_trigger("wf6", &wf.id, &id(), T0)
            .await
            .unwrap(),
    );
    let second = started(
        store
            .workflow_trigger("wf6", &wf.id, &id(), T0)
            .await
            .unwrap(),
    );
    assert_eq!(
        (first.scheduled_at, second.scheduled_at),
        (T0, T0 + 1),
        "one trigger time each"
    );
    assert_eq!(nodes(&sweep(&store, T0 + 1).await), ["a", "a"]);
    let runs = store
        .workflow_runs_list("wf6", &wf.id, 10, None)
        .await
        .unwrap();
    let ids: Vec<&str> = runs.items.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [second.id.as_str(), first.id.as_str()], "newest first");
    let listed = store.workflows_list("wf6", 10, None).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert!(store.workflow_get("other", &wf.id).await.unwrap().is_none());

    assert!(store.workflow_delete("wf6", &wf.id, T0 + 2).await.unwrap());
    assert!(!store.workflow_delete("wf6", &wf.id, T0 + 3).await.unwrap());
    assert!(
        store
            .workflows_list("wf6", 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    for r in [&first, &second] {
        assert_eq!(run_now(&store, r).await.run.status, RunStatus::Cancelled);
    }
    assert!(
        sweep(&store, T0 + 4).await.is_empty(),
        "pending roots cancelled"
    );
    assert_eq!(
        store
            .workflow_trigger("wf6", &wf.id, &id(), T0 + 5)
            .await
            .unwrap(),
        WorkflowTriggered::NotFound
    );
}

async fn scheduled_workflows_start_a_run_per_trigger(store: SqlStore) {
    use kairos_core::schedule::Schedule;
    use kairos_core::workflow::WorkflowScheduler;
    let mut once = new_wf("wf7", diamond(), false);
    once.schedule = Some(Schedule::Once { at: T0 + 100 });
    once.next_trigger_at = Some(T0 + 100);
    store.workflow_create(once.clone()).await.unwrap();
    let mut cron = new_wf("wf7", diamond(), false);
    cron.schedule = Some(Schedule::cron("*/10 * * * * *", "UTC"));
    cron.next_trigger_at = Some(T0 + 10_000);
    store.workflow_create(cron.clone()).await.unwrap();

    assert!(store.workflows_fire_due(T0, 10).await.unwrap().is_empty());
    let runs = store.workflows_fire_due(T0 + 100, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0].workflow_id.as_str(), runs[0].scheduled_at),
        (once.id.as_str(), T0 + 100)
    );
    assert_eq!(nodes(&sweep(&store, T0 + 100).await), ["a"]);
    let wf = store.workflow_get("wf7", &once.id).await.unwrap().unwrap();
    assert_eq!(wf.next_trigger_at, None, "a one-shot fires once");
    assert!(
        store
            .workflows_fire_due(T0 + 200, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Three cron triggers missed: one late run, then the next one ahead.
    let runs = store.workflows_fire_due(T0 + 35_000, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_at, T0 + 10_000);
    let wf = store.workflow_get("wf7", &cron.id).await.unwrap().unwrap();
    assert_eq!(wf.next_trigger_at, Some(T0 + 40_000));
    assert!(
        store
            .workflows_fire_due(T0 + 39_999, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .workflows_fire_due(T0 + 40_000, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    // A deleted workflow fires no more.
    store
        .workflow_delete("wf7", &cron.id, T0 + 40_001)
        .await
        .unwrap();
    assert!(
        store
            .workflows_fire_due(T0 + 60_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn cancelling_a_node_job_by_hand_ends_its_run(store: SqlStore) {
    let run = started(&store, "wf8", diamond()).await;
    let a = sweep(&store, T0).await;
    let job = a[0].1.job_id.clone();
    let cancelled = store.job_cancel("wf8", &job, T0 + 1).await.unwrap();
    assert!(matches!(
        cancelled,
        kairos_core::store::ControlOutcome::Done(_)
    ));
    let d = run_now(&store, &run).await;
    assert_eq!(state_of(&d, "a"), NodeStatus::Cancelled);
    assert_eq!(state_of(&d, "c"), NodeStatus::Skipped);
    assert_eq!(d.run.status, RunStatus::Cancelled, "not left running");
}

async fn a_node_whose_trigger_time_is_taken_still_runs_once(store: SqlStore) {
    let run = started(&store, "wf9", diamond()).await;
    let wf = store
        .workflow_get("wf9", &run.workflow_id)
        .await
        .unwrap()
        .unwrap();
    // A manual trigger of b1's internal job takes the run's trigger time.
    let stray = id();
    store
        .job_trigger_now("wf9", &wf.node_jobs["b1"], &stray, run.scheduled_at)
        .await
        .unwrap();
    let a = sweep(&store, T0).await;
    let a = a.iter().find(|(n, _)| n == "a").unwrap();
    apply(
        &store,
        &[outcome(&a.1, 1, Succeeded, json!("a"), T0 + 1)],
        T0 + 1,
    )
    .await;
    let d = run_now(&store, &run).await;
    let b1 = d.nodes.iter().find(|n| n.node_id == "b1").unwrap();
    let exec = b1.execution_id.clone().expect("b1 became due");
    assert_ne!(exec, stray);
    let e = store
        .execution_get("wf9", &exec)
        .await
        .unwrap()
        .expect("its execution exists");
    assert_eq!(
        e.scheduled_at,
        run.scheduled_at + 1,
        "the next free trigger time"
    );
}
