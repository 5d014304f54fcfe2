//! Store suite, the row locks of the dispatching transactions, on MySQL and
//! PostgreSQL (SQLite has one writer: nothing there runs side by side). A
//! second connection plays the part of another transaction in flight, so
//! what must wait and what must not is seen directly:
//!
//! - claims under one fence share its row: one in flight does not hold up
//!   another (a lane's small claim behind a big batch), limited or not, and
//!   a newer leader's raise waits for it, after which the old fence is
//!   refused;
//! - the start of an attempt that was handed back (a "ghost start") waits
//!   for a concurrency gate in flight, so the gate cannot delete the slot
//!   row the start relies on after counting the attempt as ended.

#[macro_use]
mod store_support;
use store_support as support;
use support::raw::Raw;

use kairos_core::concurrency::{Limit, Scope, ScopeKey};
use kairos_core::execution::ExecStatus;
use kairos_core::job::Job;
use kairos_core::protocol::ResultKind;
use kairos_core::store::{
    Claim, Dispatch, DispatchScope, DispatchWork, History, LimitStore, Maintenance, StoreError,
};
use kairos_store_sql::SqlStore;
use kairos_testkit as testkit;
use std::time::Duration;
use support::{T0, create, id, one_shot, result};

/// How long anything here may take before it counts as stuck.
const STUCK: Duration = Duration::from_secs(20);

raw_cases!(
    claims_share_the_fence_and_a_newer_leader_waits_for_them,
    a_ghost_start_waits_for_a_gate_in_flight_and_keeps_its_slot,
);

/// A claim of `job`'s trigger, dispatched to `w1`.
fn claim_of(job: &Job) -> Claim {
    Claim {
        job: std::sync::Arc::new(job.clone()),
        scheduled_at: job.next_trigger_at.expect("due"),
        next_trigger_at: None,
        execution_id: id(),
        worker_id: Some("w1".to_string()),
        shard: kairos_core::shard::Shard::SINGLE,
    }
}

async fn job_of(store: &SqlStore, tenant: &str, handler: &str) -> Job {
    let mut new = one_shot(tenant, T0);
    new.handler = handler.to_string();
    create(store, new).await
}

async fn limit(store: &SqlStore, handler: &str, max: u32) {
    let limit = Limit {
        scope: Scope::Handler,
        name: handler.to_string(),
        max_running: Some(max),
        rate_per_sec: None,
    };
    store.limit_set(&limit, T0).await.expect("limit");
}

async fn in_use(store: &SqlStore, key: &str) -> u32 {
    let key = ScopeKey::parse(key).expect("key");
    store.concurrency_in_use(&key).await.expect("in use")
}

/// Claims `job` with `fence`, failing the test if it does not finish.
async fn claim_now(store: &SqlStore, fence: u64, job: &Job) -> Vec<DispatchWork> {
    tokio::time::timeout(
        STUCK,
        store.triggers_claim(DispatchScope::All { fence }, &[claim_of(job)], T0 + 10),
    )
    .await
    .expect("a claim waited for another claim of the same term")
    .expect("claim")
    .work
}

async fn claims_share_the_fence_and_a_newer_leader_waits_for_them(store: SqlStore, mut raw: Raw) {
    limit(&store, "capped", 5).await;
    let first = job_of(&store, "fl", "free").await;
    assert_eq!(claim_now(&store, 1, &first).await.len(), 1, "term 1 begins");

    // A claim of term 1 in flight: the fence row read under its share.
    raw.run("BEGIN").await;
    let share = raw.share();
    raw.count(&format!(
        "SELECT COUNT(*) FROM (SELECT fence FROM leader_fences WHERE name = 'dispatcher'{share}) f"
    ))
    .await;
    // Another claim of the same term goes on beside it, unlimited…
    let free = job_of(&store, "fl", "free").await;
    assert_eq!(claim_now(&store, 1, &free).await.len(), 1);
    // …and limited (the gate's lock is a row of its own).
    let capped = job_of(&store, "fl", "capped").await;
    assert_eq!(claim_now(&store, 1, &capped).await.len(), 1);
    assert_eq!(in_use(&store, "handler:capped").await, 1);

    // A newer leader's first claim raises the fence: it waits for the
    // claim in flight, and goes once that commits.
    let next = job_of(&store, "fl", "free").await;
    let raising = {
        let store = store.clone();
        let c = claim_of(&next);
        tokio::spawn(async move {
            store
                .triggers_claim(DispatchScope::All { fence: 2 }, &[c], T0 + 20)
                .await
        })
    };
    assert!(
        raw.blocked(&raising, STUCK).await,
        "the raise must wait for the claim in flight"
    );
    raw.run("COMMIT").await;
    let won = tokio::time::timeout(STUCK, raising)
        .await
        .expect("the raise goes once the claim commits")
        .expect("task")
        .expect("claim")
        .work;
    assert_eq!(won.len(), 1);

    // The old leader is refused from then on.
    let late = job_of(&store, "fl", "free").await;
    match store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[claim_of(&late)], T0 + 30)
        .await
    {
        Err(StoreError::Fenced {
            ours: 1,
            current: 2,
        }) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
}

async fn a_ghost_start_waits_for_a_gate_in_flight_and_keeps_its_slot(
    store: SqlStore,
    mut raw: Raw,
) {
    limit(&store, "gh", 1).await;
    let key = "handler:gh";
    let job = job_of(&store, "gs", "gh").await;
    let work = claim_now(&store, 1, &job).await;
    assert_eq!(in_use(&store, key).await, 1);
    let exec = work[0].execution_id.clone();
    // Its publish was not confirmed: handed back, its slot row stays (it
    // no longer counts).
    store
        .executions_requeue_unstarted(&[(exec.clone(), 1)], "not confirmed", T0 + 11)
        .await
        .expect("requeue");
    assert_eq!(in_use(&store, key).await, 0);

    // A gate in flight (another dispatcher's admission) has counted it as
    // ended and is about to delete its slot row.
    raw.run("BEGIN").await;
    raw.count(
        "SELECT COUNT(*) FROM (SELECT fence FROM leader_fences \
         WHERE name = 'concurrency-gate' FOR UPDATE) g",
    )
    .await;
    let ended = raw
        .count(&format!(
            "SELECT COUNT(*) FROM concurrency_slots s JOIN executions e ON e.id = s.execution_id \
             WHERE s.execution_id = '{exec}' AND e.status = 'pending'"
        ))
        .await;
    assert_eq!(ended, 1, "the gate sees its row, and the attempt pending");

    // Meanwhile the message reached a worker after all, which starts it.
    let starting = {
        let store = store.clone();
        let started = result(&work[0], 1, ResultKind::Started, T0 + 20);
        tokio::spawn(async move { store.results_apply(&[started], T0 + 20).await })
    };
    raw.blocked(&starting, STUCK).await;
    raw.run(&format!(
        "DELETE FROM concurrency_slots WHERE execution_id = '{exec}'"
    ))
    .await;
    raw.run("COMMIT").await;
    let applied = tokio::time::timeout(STUCK, starting)
        .await
        .expect("the start goes once the gate commits")
        .expect("task")
        .expect("apply");
    assert_eq!(applied[0].new_status, Some(ExecStatus::Running));
    assert_eq!(
        in_use(&store, key).await,
        1,
        "it runs: its slot counts, whatever the gate deleted"
    );

    // So the next one is held back.
    let other = job_of(&store, "gs", "gh").await;
    assert!(
        claim_now(&store, 1, &other).await.is_empty(),
        "the limit is full"
    );
    let e = store
        .execution_get("gs", &exec)
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(e.status, ExecStatus::Running);
}
