//! Store suite, a caller's control of workflows (issue 34): pause and
//! resume (the leader's triggers skip a paused workflow, a missed trigger
//! fires once on resume or is skipped per the misfire policy), `PATCH` at
//! a version (runs already started keep their graph and node jobs), and
//! the run-end callback queued in the transaction that ends the run — on
//! SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::callback::{CallbackAttempt, CallbackSubject, RUN_ENDED_EVENT};
use kairos_core::job::JobStatus;
use kairos_core::protocol::ResultKind::{Failed, Succeeded};
use kairos_core::schedule::{MisfirePolicy, Schedule};
use kairos_core::store::{CallbackNext, CallbackStore, Dispatch, DispatchWork, JobStore};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;
use kairos_core::workflow::{
    NewWorkflow, RunStatus, StoredWorkflow, Workflow, WorkflowControl, WorkflowCreated,
    WorkflowRun, WorkflowScheduler, WorkflowStatus, WorkflowStore, WorkflowTriggered,
    WorkflowUpdate, WorkflowUpdated,
};
use kairos_store_sql::SqlStore;
use serde_json::json;
use support::{T0, id, result};

store_cases!(
    a_paused_workflow_fires_nothing_until_resumed,
    a_resume_skips_missed_triggers_under_the_skip_policy,
    a_patch_leaves_started_runs_on_their_graph,
    a_patch_checks_the_version_and_the_state,
    a_run_end_queues_one_signed_callback_in_its_transaction,
    a_cancelled_run_queues_its_callback_too,
);

fn def(body: serde_json::Value) -> Workflow {
    serde_json::from_value(body).unwrap()
}

/// a → b.
fn chain() -> Workflow {
    def(json!({
        "nodes": [{"id": "a", "handler": "h"}, {"id": "b", "handler": "h"}],
        "edges": [{"from": "a", "to": "b"}]
    }))
}

fn new_wf(tenant: &str, definition: Workflow) -> NewWorkflow {
    NewWorkflow {
        id: id(),
        tenant: tenant.into(),
        name: "wf".into(),
        definition,
        client_request_id: None,
        request_hash: None,
        run_now: None,
        schedule: None,
        next_trigger_at: None,
        callback_url: None,
        created_at: T0,
    }
}

async fn create(store: &SqlStore, new: NewWorkflow) -> (StoredWorkflow, Option<WorkflowRun>) {
    match store.workflow_create(new).await.unwrap() {
        WorkflowCreated::Created(wf, run) => (wf, run),
        other => panic!("expected a new workflow, got {other:?}"),
    }
}

/// What the sweep finds due at `now`, as `(node id, work)` by node id.
async fn sweep(store: &SqlStore, now: Millis) -> Vec<(String, DispatchWork)> {
    let work = store
        .executions_find_unpublished(now, 100, &Routable::Any)
        .await
        .unwrap();
    let mut out = Vec::new();
    for w in work {
        let job = store.job_get(&w.tenant, &w.job_id).await.unwrap().unwrap();
        out.push((job.name.rsplit('/').next().unwrap().to_string(), w));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn names(found: &[(String, DispatchWork)]) -> Vec<&str> {
    found.iter().map(|(n, _)| n.as_str()).collect()
}

fn done(c: WorkflowControl) -> StoredWorkflow {
    match c {
        WorkflowControl::Done(wf) => wf,
        other => panic!("expected it applied, got {other:?}"),
    }
}

fn updated(u: WorkflowUpdated) -> StoredWorkflow {
    match u {
        WorkflowUpdated::Done(wf) => wf,
        other => panic!("expected it changed, got {other:?}"),
    }
}

async fn a_paused_workflow_fires_nothing_until_resumed(store: SqlStore) {
    let mut new = new_wf("wc1", chain());
    new.schedule = Some(Schedule::cron("*/10 * * * * *", "UTC"));
    new.next_trigger_at = Some(T0 + 10_000);
    let (wf, _) = create(&store, new).await;
    assert_eq!((wf.version, wf.definition_version), (1, 1));

    let paused = done(store.workflow_pause("wc1", &wf.id, T0 + 1).await.unwrap());
    assert_eq!((paused.status, paused.version), (WorkflowStatus::Paused, 2));
    assert_eq!(
        store.workflow_get("wc1", &wf.id).await.unwrap().unwrap(),
        paused,
        "stored as answered"
    );
    assert!(matches!(
        store.workflow_pause("wc1", &wf.id, T0 + 2).await.unwrap(),
        WorkflowControl::Conflict(ref w) if w.status == WorkflowStatus::Paused
    ));
    assert_eq!(
        store.workflow_pause("other", &wf.id, T0 + 2).await.unwrap(),
        WorkflowControl::NotFound,
        "another tenant's workflow is unknown"
    );
    // Three triggers pass while paused: the leader starts nothing, and a
    // manual trigger is refused.
    assert!(
        store
            .workflows_fire_due(T0 + 35_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        store
            .workflow_trigger("wc1", &wf.id, &id(), T0 + 35_000)
            .await
            .unwrap(),
        WorkflowTriggered::Paused
    ));
    assert!(sweep(&store, T0 + 35_000).await.is_empty());
    assert_eq!(
        store
            .workflows_list("wc1", 10, None)
            .await
            .unwrap()
            .items
            .len(),
        1,
        "a paused workflow is still listed"
    );

    // Resumed: the missed trigger fires once, late, then the schedule
    // goes on from now.
    let resumed = done(
        store
            .workflow_resume("wc1", &wf.id, T0 + 35_000)
            .await
            .unwrap(),
    );
    assert_eq!(
        (resumed.status, resumed.version),
        (WorkflowStatus::Active, 3)
    );
    assert_eq!(resumed.next_trigger_at, Some(T0 + 10_000));
    assert!(matches!(
        store
            .workflow_resume("wc1", &wf.id, T0 + 35_001)
            .await
            .unwrap(),
        WorkflowControl::Conflict(_)
    ));
    let runs = store.workflows_fire_due(T0 + 35_001, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].scheduled_at, T0 + 10_000);
    let wf_now = store.workflow_get("wc1", &wf.id).await.unwrap().unwrap();
    assert_eq!(wf_now.next_trigger_at, Some(T0 + 40_000));
    assert!(matches!(
        store
            .workflow_trigger("wc1", &wf.id, &id(), T0 + 35_002)
            .await
            .unwrap(),
        WorkflowTriggered::Started(_)
    ));
    // Deleted: neither pause nor resume.
    assert!(
        store
            .workflow_delete("wc1", &wf.id, T0 + 36_000)
            .await
            .unwrap()
    );
    assert!(matches!(
        store.workflow_resume("wc1", &wf.id, T0 + 36_001).await.unwrap(),
        WorkflowControl::Conflict(ref w) if w.status == WorkflowStatus::Deleted
    ));
}

async fn a_resume_skips_missed_triggers_under_the_skip_policy(store: SqlStore) {
    let mut schedule = Schedule::cron("*/10 * * * * *", "UTC");
    if let Schedule::Recurring(r) = &mut schedule {
        r.misfire = MisfirePolicy::Skip;
    }
    let mut new = new_wf("wc2", chain());
    new.schedule = Some(schedule);
    new.next_trigger_at = Some(T0 + 10_000);
    let (wf, _) = create(&store, new).await;
    done(store.workflow_pause("wc2", &wf.id, T0 + 1).await.unwrap());
    let resumed = done(
        store
            .workflow_resume("wc2", &wf.id, T0 + 35_000)
            .await
            .unwrap(),
    );
    assert_eq!(resumed.next_trigger_at, Some(T0 + 40_000), "no catch-up");
    assert!(
        store
            .workflows_fire_due(T0 + 35_001, 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_patch_leaves_started_runs_on_their_graph(store: SqlStore) {
    let mut new = new_wf("wc3", chain());
    new.run_now = Some(id());
    let (wf, Some(old_run)) = create(&store, new).await else {
        panic!("a first run")
    };
    let due = sweep(&store, T0).await;
    assert_eq!(names(&due), ["a"]);

    // `a` changes its handler (a new job), `b` goes, `c` comes after `a`.
    let next = def(json!({
        "nodes": [{"id": "a", "handler": "h2"}, {"id": "c", "handler": "h"}],
        "edges": [{"from": "a", "to": "c"}]
    }));
    let changed = updated(
        store
            .workflow_update(
                "wc3",
                &wf.id,
                1,
                &WorkflowUpdate {
                    name: Some("renamed".into()),
                    definition: Some(next.clone()),
                    schedule: Some(Some((Schedule::Once { at: T0 + 500 }, Some(T0 + 500)))),
                    callback_url: Some(Some("http://example.test/wf".into())),
                },
                T0 + 1,
            )
            .await
            .unwrap(),
    );
    assert_eq!((changed.version, changed.definition_version), (2, 2));
    assert_eq!(changed.name, "renamed");
    assert_eq!(changed.definition, next);
    assert_eq!(changed.next_trigger_at, Some(T0 + 500));
    assert_eq!(
        changed.callback_url.as_deref(),
        Some("http://example.test/wf")
    );
    assert_ne!(
        changed.node_jobs["a"], wf.node_jobs["a"],
        "a's template changed"
    );
    assert_eq!(
        store.workflow_get("wc3", &wf.id).await.unwrap().unwrap(),
        changed
    );

    // The run started before goes on with `a` → `b`.
    store
        .results_apply(&[result(&due[0].1, 1, Succeeded, T0 + 2)], T0 + 2)
        .await
        .unwrap();
    let mid = sweep(&store, T0 + 3).await;
    assert_eq!(names(&mid), ["b"], "the old graph's child, on its old job");
    let old = store
        .workflow_run_get("wc3", &wf.id, &old_run.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (old.definition.clone(), old.run.definition_version),
        (chain(), 1)
    );
    store
        .results_apply(&[result(&mid[0].1, 1, Succeeded, T0 + 4)], T0 + 4)
        .await
        .unwrap();
    let old = store
        .workflow_run_get("wc3", &wf.id, &old_run.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(old.run.status, RunStatus::Succeeded);

    // A new run follows the new graph, on the new job of `a`.
    let WorkflowTriggered::Started(run) = store
        .workflow_trigger("wc3", &wf.id, &id(), T0 + 5)
        .await
        .unwrap()
    else {
        panic!("a run")
    };
    assert_eq!(run.definition_version, 2);
    let roots = sweep(&store, T0 + 5).await;
    assert_eq!(names(&roots), ["a"]);
    assert_eq!(roots[0].1.job_id, changed.node_jobs["a"]);
    assert_eq!(roots[0].1.handler, "h2");
    store
        .results_apply(&[result(&roots[0].1, 1, Failed, T0 + 6)], T0 + 6)
        .await
        .unwrap();
    let d = store
        .workflow_run_get("wc3", &wf.id, &run.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.definition, next);
    assert_eq!(
        d.run.status,
        RunStatus::Failed,
        "c skipped, a's failure unhandled"
    );

    // Delete cancels the node jobs of every version.
    assert!(store.workflow_delete("wc3", &wf.id, T0 + 7).await.unwrap());
    for job in [
        &wf.node_jobs["a"],
        &wf.node_jobs["b"],
        &changed.node_jobs["a"],
    ] {
        let j = store.job_get("wc3", job).await.unwrap().unwrap();
        assert_eq!(j.status, JobStatus::Cancelled, "job {job}");
    }
}

async fn a_patch_checks_the_version_and_the_state(store: SqlStore) {
    let (wf, _) = create(&store, new_wf("wc4", chain())).await;
    let rename = WorkflowUpdate {
        name: Some("n2".into()),
        ..Default::default()
    };
    assert_eq!(
        store
            .workflow_update("other", &wf.id, 1, &rename, T0 + 1)
            .await
            .unwrap(),
        WorkflowUpdated::NotFound
    );
    let changed = updated(
        store
            .workflow_update("wc4", &wf.id, 1, &rename, T0 + 1)
            .await
            .unwrap(),
    );
    assert_eq!(changed.definition_version, 1, "the graph did not change");
    assert!(matches!(
        store.workflow_update("wc4", &wf.id, 1, &rename, T0 + 2).await.unwrap(),
        WorkflowUpdated::VersionConflict(ref w) if w.version == 2
    ));
    // The same graph again keeps its version and its jobs.
    let same = updated(
        store
            .workflow_update(
                "wc4",
                &wf.id,
                2,
                &WorkflowUpdate {
                    definition: Some(chain()),
                    schedule: Some(None),
                    callback_url: Some(None),
                    ..Default::default()
                },
                T0 + 3,
            )
            .await
            .unwrap(),
    );
    assert_eq!((same.definition_version, same.node_jobs), (1, wf.node_jobs));
    assert!(store.workflow_delete("wc4", &wf.id, T0 + 4).await.unwrap());
    assert!(matches!(
        store.workflow_update("wc4", &wf.id, 3, &rename, T0 + 5).await.unwrap(),
        WorkflowUpdated::Conflict(ref w) if w.status == WorkflowStatus::Deleted
    ));
}

/// The pending run callbacks, claimed.
async fn run_callbacks(store: &SqlStore, now: Millis) -> Vec<kairos_core::callback::Callback> {
    store
        .callbacks_claim_due("relay", now, 60_000, 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.subject.run_id().is_some())
        .collect()
}

async fn a_run_end_queues_one_signed_callback_in_its_transaction(store: SqlStore) {
    let mut new = new_wf("wc5", chain());
    new.run_now = Some(id());
    new.callback_url = Some("http://example.test/runs".into());
    let (wf, Some(run)) = create(&store, new).await else {
        panic!("a first run")
    };
    let a = sweep(&store, T0).await;
    let applied = store
        .results_apply(&[result(&a[0].1, 1, Succeeded, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    assert!(!applied[0].callback_queued);
    assert!(
        run_callbacks(&store, T0 + 1).await.is_empty(),
        "not ended yet"
    );
    let b = sweep(&store, T0 + 2).await;
    let last = result(&b[0].1, 1, Succeeded, T0 + 3);
    let applied = store
        .results_apply(std::slice::from_ref(&last), T0 + 3)
        .await
        .unwrap();
    assert!(
        applied[0].callback_queued,
        "the result that ended the run says it queued a callback (the relay is woken)"
    );
    // A replayed result ends nothing twice.
    store.results_apply(&[last], T0 + 4).await.unwrap();

    let found = run_callbacks(&store, T0 + 5).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let cb = &found[0];
    assert_eq!(
        cb.subject,
        CallbackSubject::WorkflowRun {
            run_id: run.id.clone()
        }
    );
    assert_eq!(
        (cb.tenant.as_str(), cb.url.as_str()),
        ("wc5", "http://example.test/runs")
    );
    let body: serde_json::Value = serde_json::from_str(&cb.payload).unwrap();
    assert_eq!(body["event"], RUN_ENDED_EVENT);
    assert_eq!(body["workflowId"], wf.id.as_str());
    assert_eq!(body["runId"], run.id.as_str());
    assert_eq!(body["status"], "succeeded");
    assert!(body["finishedAt"].is_string() && body["startedAt"].is_string());
    let nodes = body["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["nodeId"], "a");
    assert_eq!(nodes[0]["executionId"], a[0].1.execution_id.as_str());
    assert_eq!(nodes[1]["executionId"], b[0].1.execution_id.as_str());
    assert_eq!(
        (
            nodes[1]["state"].as_str(),
            nodes[1]["executionStatus"].as_str()
        ),
        (Some("succeeded"), Some("succeeded"))
    );
    // The relay's bookkeeping works for it like for an execution's.
    let attempt = CallbackAttempt {
        attempt: 1,
        at: T0 + 6,
        status_code: Some(200),
        latency_ms: 3,
        error: None,
    };
    assert!(
        store
            .callback_record_attempt(&cb.id, "relay", &attempt, CallbackNext::Delivered, T0 + 6)
            .await
            .unwrap()
    );
    assert!(run_callbacks(&store, T0 + 60_000 * 2).await.is_empty());

    // A workflow without a callback URL queues none; node executions queue
    // no job callbacks (their jobs have no URL).
    let mut quiet = new_wf("wc5", def(json!({"nodes": [{"id": "x", "handler": "h"}]})));
    quiet.run_now = Some(id());
    create(&store, quiet).await;
    let x = sweep(&store, T0 + 7).await;
    store
        .results_apply(&[result(&x[0].1, 1, Succeeded, T0 + 8)], T0 + 8)
        .await
        .unwrap();
    assert!(
        store
            .callbacks_claim_due("relay", T0 + 60_000 * 3, 60_000, 100)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_cancelled_run_queues_its_callback_too(store: SqlStore) {
    let mut new = new_wf("wc6", chain());
    new.run_now = Some(id());
    new.callback_url = Some("http://example.test/runs".into());
    let (wf, Some(run)) = create(&store, new).await else {
        panic!("a first run")
    };
    store
        .workflow_run_cancel("wc6", &wf.id, &run.id, T0 + 1)
        .await
        .unwrap();
    let found = run_callbacks(&store, T0 + 2).await;
    assert_eq!(found.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&found[0].payload).unwrap();
    assert_eq!(body["status"], "cancelled");
    assert_eq!(body["nodes"][1]["state"], "cancelled");
    assert!(body["nodes"][1]["executionId"].is_null(), "b never ran");

    // Deleting a workflow cancels its running runs, each with its callback.
    let WorkflowTriggered::Started(second) = store
        .workflow_trigger("wc6", &wf.id, &id(), T0 + 3)
        .await
        .unwrap()
    else {
        panic!("a run")
    };
    assert!(store.workflow_delete("wc6", &wf.id, T0 + 4).await.unwrap());
    let found = run_callbacks(&store, T0 + 5).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].subject.run_id(), Some(second.id.as_str()));
}
