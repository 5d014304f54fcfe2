//! Store suite, the row locks of applying workflow nodes' results, on MySQL
//! and PostgreSQL (SQLite has one writer: nothing there runs side by side).
//!
//! Every run's execution of a node is an execution of the node's one
//! internal job, and inserting a run's next executions takes a foreign-key
//! share lock on their node's job row. Applying results used to lock the
//! ended executions' job rows for update too, so two result batches ending
//! different nodes of different runs took those rows in opposite orders
//! and deadlocked (the loser was run again). Here:
//!
//! - a node's result goes on while another transaction inserts an execution
//!   of the same node (a second connection holds that insert open), and
//!   leaves the node's job row as it was;
//! - many runs of one graph, their results applied in concurrent mixed
//!   batches, all end, each node once per run, and no transaction had to be
//!   run again.

#[macro_use]
mod store_support;
use store_support as support;
use support::raw::Raw;

use kairos_core::execution::ExecStatus;
use kairos_core::job::JobStatus;
use kairos_core::protocol::ResultKind::Succeeded;
use kairos_core::store::{Dispatch, DispatchWork, JobStore};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;
use kairos_core::workflow::{
    NewWorkflow, RunStatus, StoredWorkflow, Workflow, WorkflowCreated, WorkflowStore,
    WorkflowTriggered,
};
use kairos_store_sql::SqlStore;
use kairos_testkit as testkit;
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;
use support::{T0, id, result};

/// How long anything here may take before it counts as stuck.
const STUCK: Duration = Duration::from_secs(30);

raw_cases!(
    a_node_result_goes_on_beside_an_insert_of_the_same_node,
    concurrent_mixed_batches_of_many_runs_never_collide,
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
    .expect("graph")
}

/// A workflow of `def` with `runs` runs started (triggered by hand).
async fn with_runs(store: &SqlStore, tenant: &str, def: Workflow, runs: usize) -> StoredWorkflow {
    let new = NewWorkflow {
        id: id(),
        tenant: tenant.into(),
        name: "wf".into(),
        definition: def,
        client_request_id: None,
        request_hash: None,
        run_now: None,
        schedule: None,
        next_trigger_at: None,
        callback_url: None,
        created_at: T0,
    };
    let wf = match store.workflow_create(new).await.expect("create") {
        WorkflowCreated::Created(wf, None) => wf,
        other => panic!("expected a new idle workflow, got {other:?}"),
    };
    for _ in 0..runs {
        match store
            .workflow_trigger(tenant, &wf.id, &id(), T0)
            .await
            .expect("trigger")
        {
            WorkflowTriggered::Started(_) => {}
            other => panic!("expected a run, got {other:?}"),
        }
    }
    wf
}

/// The work the dispatcher's sweep finds due at `now`.
async fn due(store: &SqlStore, now: Millis) -> Vec<DispatchWork> {
    store
        .executions_find_unpublished(now, 10_000, &Routable::Any)
        .await
        .expect("sweep")
}

async fn a_node_result_goes_on_beside_an_insert_of_the_same_node(store: SqlStore, mut raw: Raw) {
    let wf = with_runs(&store, "wl1", diamond(), 2).await;
    let a = wf.node_jobs["a"].clone();
    let roots = due(&store, T0).await;
    assert_eq!(roots.len(), 2, "each run's root is due");
    assert!(roots.iter().all(|w| w.job_id == a));

    // Another transaction in flight inserts an execution of node `a` (as
    // a run's start or a parent's end does): its foreign key holds a share
    // lock on `a`'s job row until it ends.
    raw.run("BEGIN").await;
    // (A copy of the other run's root, as another shard of its trigger.)
    raw.run(&format!(
        "INSERT INTO executions (id, job_id, tenant, scheduled_at, attempt, status, \
         not_before, created_at, updated_at, shard_index, shard_count) \
         SELECT '{}', job_id, tenant, scheduled_at, 1, 'pending', not_before, created_at, \
         updated_at, 7, 1 FROM executions WHERE id = '{}'",
        id(),
        roots[1].execution_id
    ))
    .await;

    // One run's `a` ends meanwhile: applying it must not wait for that
    // row (it used to lock it for update, and wait for the insert's end).
    let ending = {
        let store = store.clone();
        let r = result(&roots[0], 1, Succeeded, T0 + 10);
        tokio::spawn(async move { store.results_apply(&[r], T0 + 10).await })
    };
    let waited = raw.blocked(&ending, STUCK).await;
    raw.run("ROLLBACK").await;
    let applied = tokio::time::timeout(STUCK, ending)
        .await
        .expect("the result is applied")
        .expect("task")
        .expect("apply");
    assert!(
        !waited,
        "a node's result waited for an insert holding its job row"
    );
    assert_eq!(applied[0].new_status, Some(ExecStatus::Succeeded));
    assert!(applied[0].next_work, "its run moved on");
    let next = due(&store, T0 + 11).await;
    let children = next.iter().filter(|w| w.job_id != a).count();
    assert_eq!(children, 3, "the run's b1, b2 and b3 are due: {next:?}");

    // The node's job is as it was: no trigger of its own, nothing moved,
    // no result recorded on it (the run has the node's).
    let job = store
        .job_get("wl1", &a)
        .await
        .expect("get")
        .expect("node job");
    assert_eq!(job.status, JobStatus::Scheduled);
    assert_eq!((job.last_result, job.last_result_at), (None, None));
    assert_eq!(job.fail_streak, 0);
}

/// Runs of the diamond at once.
const RUNS: usize = 40;
/// Results per batch, as a dispatcher applies what has arrived.
const BATCH: usize = 4;

async fn concurrent_mixed_batches_of_many_runs_never_collide(store: SqlStore, mut raw: Raw) {
    let wf = with_runs(&store, "wl2", diamond(), RUNS).await;
    // A fixed pseudo-random sequence (an LCG): what is applied each round,
    // and in which batch, is shuffled the same way every time.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        seed >> 33
    };
    let mut now = T0;
    let mut seen = HashSet::new();
    for round in 0.. {
        assert!(round < 200, "the runs never ended");
        now += 10;
        let mut work = due(&store, now).await;
        if work.is_empty() {
            break;
        }
        // Some of what is due, so that the runs drift apart and each round
        // ends different nodes of different runs (all of it once little is
        // left), shuffled into batches applied side by side.
        for i in (1..work.len()).rev() {
            let j = usize::try_from(next()).unwrap_or_default() % (i + 1);
            work.swap(i, j);
        }
        if work.len() > 2 * BATCH {
            work.truncate(work.len() * 3 / 5);
        }
        let tasks: Vec<_> = work
            .chunks(BATCH)
            .map(|chunk| {
                let results: Vec<_> = chunk.iter().map(|w| result(w, 1, Succeeded, now)).collect();
                let store = store.clone();
                tokio::spawn(async move { store.results_apply(&results, now).await })
            })
            .collect();
        for t in tasks {
            let applied = tokio::time::timeout(STUCK, t)
                .await
                .expect("a batch got stuck")
                .expect("task")
                .expect("apply");
            for a in applied {
                assert_eq!(a.new_status, Some(ExecStatus::Succeeded), "{a:?}");
                assert!(seen.insert(a.execution_id.clone()), "applied twice: {a:?}");
            }
        }
    }

    // Every run ended as its graph says, with one execution per node.
    let runs = store
        .workflow_runs_list("wl2", &wf.id, 1_000, None)
        .await
        .expect("runs")
        .items;
    assert_eq!(runs.len(), RUNS);
    assert!(
        runs.iter().all(|r| r.status == RunStatus::Succeeded),
        "{runs:?}"
    );
    assert_eq!(seen.len(), RUNS * 5);
    for (node, job) in &wf.node_jobs {
        let n = raw
            .count(&format!(
                "SELECT COUNT(*) FROM executions WHERE job_id = '{job}' AND status = 'succeeded'"
            ))
            .await;
        assert_eq!(n, i64::try_from(RUNS).expect("runs"), "node {node}");
    }
    // And no batch lost a lock race on the way: none had to run again.
    assert_eq!(
        store.contention_reruns(),
        0,
        "result batches deadlocked and were run again"
    );
}
