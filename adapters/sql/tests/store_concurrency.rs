//! Store suite, concurrency limits: slots taken in the transaction that
//! dispatches (claim with a worker, admission of pending work), given back
//! by every path that ends, retries or requeues an execution (a dead
//! worker's recovery included), and the gate that leaves work over a limit
//! `pending`, waiting, and admits it once a slot frees — on every database.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::concurrency::{Limit, Scope, ScopeKey};
use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, RetryPolicy};
use kairos_core::outcome::Verdict;
use kairos_core::protocol::ResultKind;
use kairos_core::store::{
    Claim, ControlOutcome, Dispatch, DispatchScope, DispatchWork, DispatchedTo, History, JobStore,
    LimitStore, Maintenance,
};
use kairos_core::worker::Routable;
use kairos_store_sql::SqlStore;
use support::{T0, create, id, one_shot, result};

store_cases!(
    a_handler_limit_holds_claims_back_and_admits_them_as_slots_free,
    every_end_gives_the_slot_back,
    a_new_limit_counts_what_already_runs,
    a_jobs_own_limit_holds_its_extra_triggers,
    without_limits_admission_records_every_dispatch,
    a_handler_rate_admits_a_burst_then_one_token_at_a_time,
    an_attempt_started_after_its_hand_back_occupies_a_slot,
    concurrent_claims_never_pass_a_limit,
);

/// A claim of `job`'s current trigger, dispatched to `worker`.
fn claim_to(job: &Job, worker: &str) -> Claim {
    Claim {
        job: std::sync::Arc::new(job.clone()),
        scheduled_at: job.next_trigger_at.unwrap(),
        next_trigger_at: None,
        execution_id: id(),
        worker_id: Some(worker.to_string()),
        shard: kairos_core::shard::Shard::SINGLE,
    }
}

/// Picks of `work` for `worker`, as the publisher asks for them.
fn picks(work: &[&DispatchWork], worker: &str) -> Vec<DispatchedTo> {
    work.iter()
        .map(|w| DispatchedTo {
            execution_id: w.execution_id.clone(),
            attempt: w.attempt,
            worker_id: worker.to_string(),
        })
        .collect()
}

async fn in_use(store: &SqlStore, key: &str) -> u32 {
    store
        .concurrency_in_use(&ScopeKey::parse(key).unwrap())
        .await
        .unwrap()
}

/// Jobs of `handler` for `tenant`, due one ms apart from `T0`.
async fn jobs(store: &SqlStore, tenant: &str, handler: &str, n: usize) -> Vec<Job> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut new = one_shot(tenant, T0 + i as i64);
        new.handler = handler.to_string();
        out.push(create(store, new).await);
    }
    out
}

async fn status(store: &SqlStore, tenant: &str, id: &str) -> (ExecStatus, Option<String>) {
    let e = store.execution_get(tenant, id).await.unwrap().unwrap();
    (e.status, e.waiting_for)
}

async fn a_handler_limit_holds_claims_back_and_admits_them_as_slots_free(store: SqlStore) {
    let limit = Limit {
        scope: Scope::Handler,
        name: "exp".into(),
        max_running: Some(2),
        rate_per_sec: None,
    };
    store.limit_set(&limit, T0).await.unwrap();
    let jobs = jobs(&store, "hl", "exp", 4).await;
    let claims: Vec<Claim> = jobs.iter().map(|j| claim_to(j, "w1")).collect();
    let work = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0 + 10)
        .await
        .unwrap()
        .work;
    let ids: Vec<&str> = work.iter().map(|w| w.execution_id.as_str()).collect();
    assert_eq!(
        ids,
        [
            claims[0].execution_id.as_str(),
            claims[1].execution_id.as_str()
        ],
        "the two oldest go, dispatched"
    );
    assert_eq!(in_use(&store, "handler:exp").await, 2);
    for c in &claims[2..] {
        assert_eq!(
            status(&store, "hl", &c.execution_id).await,
            (ExecStatus::Pending, Some("handler:exp".to_string())),
            "over the limit: pending, waiting, not failed"
        );
    }
    assert!(
        store
            .executions_find_unpublished(T0 + 20, 10, &Routable::Any)
            .await
            .unwrap()
            .is_empty(),
        "waiting work never fills the other sweep's batch"
    );
    let waiting = store
        .executions_find_waiting(T0 + 20, 10, &Routable::Any)
        .await
        .unwrap();
    assert_eq!(waiting.len(), 2);
    assert_eq!(
        waiting[0].execution_id, claims[2].execution_id,
        "oldest first"
    );
    assert_eq!(store.executions_count_waiting(100).await.unwrap(), 2);
    let all: Vec<&DispatchWork> = waiting.iter().collect();

    let none = store
        .executions_admit(1, &picks(&all, "w1"), T0 + 20)
        .await
        .unwrap();
    assert!(none.dispatched.is_empty());
    assert_eq!(none.waiting.len(), 2, "still full");

    // One ends: exactly one slot frees, and the oldest waiting one takes it.
    let done = [
        result(&work[0], 1, ResultKind::Started, T0 + 30),
        result(&work[0], 1, ResultKind::Succeeded, T0 + 40),
    ];
    store.results_apply(&done, T0 + 40).await.unwrap();
    assert_eq!(in_use(&store, "handler:exp").await, 1);
    let one = store
        .executions_admit(1, &picks(&all, "w2"), T0 + 50)
        .await
        .unwrap();
    assert_eq!(one.dispatched, [(claims[2].execution_id.clone(), 1)]);
    assert_eq!(one.waiting, [(claims[3].execution_id.clone(), 1)]);
    assert_eq!(in_use(&store, "handler:exp").await, 2);
    let e = store
        .execution_get("hl", &claims[2].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            e.status,
            e.worker_id.as_deref(),
            e.dispatched_at,
            e.waiting_for
        ),
        (ExecStatus::Dispatched, Some("w2"), Some(T0 + 50), None)
    );
    assert_eq!(store.executions_count_waiting(100).await.unwrap(), 1);

    // An admission by a stale leader is refused.
    assert!(
        store
            .executions_admit(0, &picks(&all, "w1"), T0 + 60)
            .await
            .is_err(),
        "fenced"
    );

    let listed = store.limits_list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].limit.clone(), listed[0].running), (limit, 2));

    // Without the limit the last one goes.
    assert!(store.limit_delete(Scope::Handler, "exp").await.unwrap());
    assert!(!store.limit_delete(Scope::Handler, "exp").await.unwrap());
    let last = store
        .executions_admit(1, &picks(&all[1..], "w1"), T0 + 70)
        .await
        .unwrap();
    assert_eq!(last.dispatched, [(claims[3].execution_id.clone(), 1)]);
    assert_eq!(store.executions_count_waiting(100).await.unwrap(), 0);
}

async fn every_end_gives_the_slot_back(store: SqlStore) {
    store
        .limit_set(
            &Limit {
                scope: Scope::Tenant,
                name: "ends".into(),
                max_running: Some(10),
                rate_per_sec: None,
            },
            T0,
        )
        .await
        .unwrap();
    let mut jobs = jobs(&store, "ends", "noop", 6).await;
    // The second one may retry.
    let mut retried = one_shot("ends", T0 + 1);
    retried.retry = RetryPolicy {
        max_attempts: 2,
        backoff_ms: 0,
    };
    jobs[1] = create(&store, retried).await;
    let claims: Vec<Claim> = jobs.iter().map(|j| claim_to(j, "w1")).collect();
    let won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0 + 10)
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 6);
    // In the order of the claims (the store returns them by job).
    let w: Vec<DispatchWork> = claims
        .iter()
        .map(|c| {
            won.iter()
                .find(|w| w.execution_id == c.execution_id)
                .unwrap()
                .clone()
        })
        .collect();
    let key = "tenant:ends";
    assert_eq!(in_use(&store, key).await, 6);
    let start = |i: usize| result(&w[i], 1, ResultKind::Started, T0 + 20);
    store
        .results_apply(&[start(0), start(1), start(2), start(4), start(5)], T0 + 20)
        .await
        .unwrap();
    assert_eq!(in_use(&store, key).await, 6, "running holds its slot");

    // A success.
    let ok = result(&w[0], 1, ResultKind::Succeeded, T0 + 30);
    store.results_apply(&[ok], T0 + 30).await.unwrap();
    assert_eq!(in_use(&store, key).await, 5);
    // A failure with an attempt left: back to pending, no slot.
    let failed = result(&w[1], 1, ResultKind::Failed, T0 + 31);
    let applied = store.results_apply(&[failed], T0 + 31).await.unwrap();
    assert_eq!(applied[0].new_status, Some(ExecStatus::Pending));
    assert_eq!(in_use(&store, key).await, 4);
    // A dead worker's recovery: the started attempt is lost…
    let lost = [(w[2].execution_id.clone(), 1)];
    store
        .executions_apply_verdict(&lost, Verdict::Lost, "worker dead", T0 + 40)
        .await
        .unwrap();
    assert_eq!(in_use(&store, key).await, 3);
    // …and the one it never started goes back to pending.
    let unstarted = [(w[3].execution_id.clone(), 1)];
    let moved = store
        .executions_requeue_unstarted(&unstarted, "worker dead", T0 + 40)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    assert_eq!(in_use(&store, key).await, 2);
    // A timeout.
    let overdue = [(w[4].execution_id.clone(), 1)];
    store
        .executions_apply_verdict(&overdue, Verdict::TimedOut, "silent", T0 + 50)
        .await
        .unwrap();
    assert_eq!(in_use(&store, key).await, 1);
    // A stop: the job is cancelled, its worker reports the stop.
    let ControlOutcome::Done(_) = store
        .job_cancel("ends", &jobs[5].id, T0 + 60)
        .await
        .unwrap()
    else {
        panic!("cancel must apply");
    };
    assert_eq!(in_use(&store, key).await, 1, "a stop is only asked for");
    let stopped = result(&w[5], 1, ResultKind::Failed, T0 + 70);
    let applied = store.results_apply(&[stopped], T0 + 70).await.unwrap();
    assert_eq!(applied[0].new_status, Some(ExecStatus::Cancelled));
    assert_eq!(
        in_use(&store, key).await,
        0,
        "no slot outlives its execution"
    );
    // Their rows, inert, are deleted by the leader's housekeeping.
    assert_eq!(store.concurrency_slots_purge(1, 100).await.unwrap(), 6);
    assert_eq!(store.concurrency_slots_purge(1, 100).await.unwrap(), 0);
    assert!(
        store.concurrency_slots_purge(0, 100).await.is_err(),
        "fenced"
    );

    // What went back to pending takes a slot again when it is admitted.
    let again = store
        .executions_find_unpublished(T0 + 80, 10, &Routable::Any)
        .await
        .unwrap();
    assert_eq!(again.len(), 2, "the retry and the requeued one");
    let all: Vec<&DispatchWork> = again.iter().collect();
    let admitted = store
        .executions_admit(1, &picks(&all, "w2"), T0 + 80)
        .await
        .unwrap();
    assert_eq!(admitted.dispatched.len(), 2);
    assert_eq!(in_use(&store, key).await, 2);
    let listed = store.limits_list().await.unwrap();
    assert_eq!(listed[0].running, 2);
}

async fn a_new_limit_counts_what_already_runs(store: SqlStore) {
    let jobs = jobs(&store, "nl", "late", 4).await;
    let claims: Vec<Claim> = jobs[..3].iter().map(|j| claim_to(j, "w1")).collect();
    assert_eq!(
        store
            .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0 + 10)
            .await
            .unwrap()
            .work
            .len(),
        3
    );
    assert_eq!(
        in_use(&store, "handler:late").await,
        0,
        "no limit, no count"
    );
    store
        .limit_set(
            &Limit {
                scope: Scope::Handler,
                name: "late".into(),
                max_running: Some(2),
                rate_per_sec: None,
            },
            T0 + 20,
        )
        .await
        .unwrap();
    assert_eq!(in_use(&store, "handler:late").await, 3);
    let fourth = claim_to(&jobs[3], "w1");
    let work = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            std::slice::from_ref(&fourth),
            T0 + 30,
        )
        .await
        .unwrap()
        .work;
    assert!(work.is_empty(), "over a limit lowered below what runs");
    assert_eq!(
        status(&store, "nl", &fourth.execution_id).await,
        (ExecStatus::Pending, Some("handler:late".to_string()))
    );
    let events = store
        .execution_events("nl", &fourth.execution_id)
        .await
        .unwrap();
    assert!(
        events[0]
            .error
            .as_deref()
            .is_some_and(|e| e.contains("handler:late")),
        "the history says what it waits for"
    );
}

async fn a_jobs_own_limit_holds_its_extra_triggers(store: SqlStore) {
    let mut new = one_shot("jl", T0);
    new.max_concurrency = Some(1);
    let job = create(&store, new).await;
    assert_eq!(job.max_concurrency, Some(1));
    assert_eq!(
        support::job_now(&store, &job).await.max_concurrency,
        Some(1)
    );
    for at in [T0, T0 + 1] {
        let exec = id();
        let ControlOutcome::Done(_) = store
            .job_trigger_now("jl", &job.id, &exec, at)
            .await
            .unwrap()
        else {
            panic!("trigger must apply");
        };
    }
    let found = store
        .executions_find_unpublished(T0 + 10, 10, &Routable::Any)
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    let all: Vec<&DispatchWork> = found.iter().collect();
    let admitted = store
        .executions_admit(1, &picks(&all, "w1"), T0 + 10)
        .await
        .unwrap();
    assert_eq!(admitted.dispatched.len(), 1);
    assert_eq!(admitted.waiting, [(found[1].execution_id.clone(), 1)]);
    let key = format!("job:{}", job.id);
    assert_eq!(in_use(&store, &key).await, 1);
    assert_eq!(
        status(&store, "jl", &found[1].execution_id).await,
        (ExecStatus::Pending, Some(key))
    );
}

async fn without_limits_admission_records_every_dispatch(store: SqlStore) {
    let jobs = jobs(&store, "nol", "free", 3).await;
    let mut work = Vec::new();
    for j in &jobs {
        work.push(support::claim(&store, j, None).await);
    }
    // The third is cancelled before its publish: it is not admitted, so
    // it is never sent.
    let ControlOutcome::Done(_) = store.job_cancel("nol", &jobs[2].id, T0 + 5).await.unwrap()
    else {
        panic!("cancel must apply");
    };
    let all: Vec<&DispatchWork> = work.iter().collect();
    let admitted = store
        .executions_admit(1, &picks(&all, "w1"), T0 + 10)
        .await
        .unwrap();
    assert_eq!(admitted.dispatched.len(), 2);
    assert!(admitted.waiting.is_empty());
    let e = store
        .execution_get("nol", &work[0].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.status, e.worker_id.as_deref()),
        (ExecStatus::Dispatched, Some("w1"))
    );
    let events = store
        .execution_events("nol", &work[0].execution_id)
        .await
        .unwrap();
    assert_eq!(events.last().unwrap().status, ExecStatus::Dispatched);
    // Admitted twice: the second changes nothing.
    let again = store
        .executions_admit(1, &picks(&all, "w1"), T0 + 20)
        .await
        .unwrap();
    assert!(again.dispatched.is_empty() && again.waiting.is_empty());
}

async fn a_handler_rate_admits_a_burst_then_one_token_at_a_time(store: SqlStore) {
    let limit = Limit {
        scope: Scope::Handler,
        name: "rl".into(),
        max_running: None,
        rate_per_sec: Some(2.0),
    };
    store.limit_set(&limit, T0).await.unwrap();
    let jobs = jobs(&store, "rt", "rl", 4).await;
    let claims: Vec<Claim> = jobs.iter().map(|j| claim_to(j, "w1")).collect();
    let work = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0 + 10)
        .await
        .unwrap()
        .work;
    assert_eq!(work.len(), 2, "a second's worth at once");
    for c in &claims[2..] {
        assert_eq!(
            status(&store, "rt", &c.execution_id).await,
            (ExecStatus::Pending, Some("rate:handler:rl".to_string()))
        );
    }
    let waiting = store
        .executions_find_waiting(T0 + 10, 10, &Routable::Any)
        .await
        .unwrap();
    let all: Vec<&DispatchWork> = waiting.iter().collect();
    let none = store
        .executions_admit(1, &picks(&all, "w1"), T0 + 10)
        .await
        .unwrap();
    assert_eq!(none.waiting.len(), 2);
    assert_eq!(none.retry_at, Some(T0 + 510), "the next token's time");
    let one = store
        .executions_admit(1, &picks(&all, "w1"), T0 + 510)
        .await
        .unwrap();
    assert_eq!(one.dispatched, [(claims[2].execution_id.clone(), 1)]);
    assert_eq!(one.retry_at, Some(T0 + 1_010));
    let last = store
        .executions_admit(1, &picks(&all[1..], "w1"), T0 + 1_010)
        .await
        .unwrap();
    assert_eq!(last.dispatched, [(claims[3].execution_id.clone(), 1)]);
    assert_eq!(
        in_use(&store, "handler:rl").await,
        0,
        "a rate takes no slot"
    );
    let listed = store.limits_list().await.unwrap();
    assert_eq!(listed[0].limit, limit);
    // Setting the limit again starts with a full bucket.
    store.limit_set(&limit, T0 + 1_020).await.unwrap();
    let mut more = one_shot("rt", T0);
    more.handler = "rl".into();
    let more = create(&store, more).await;
    let c = claim_to(&more, "w1");
    assert_eq!(
        store
            .triggers_claim(DispatchScope::All { fence: 1 }, &[c], T0 + 1_030)
            .await
            .unwrap()
            .work
            .len(),
        1
    );
}

/// A dispatch handed back to `pending` (its publish was not confirmed) that
/// reached a worker all the same: its start is recorded, and from then on it
/// counts against the limit, so the gate holds the next one back.
async fn an_attempt_started_after_its_hand_back_occupies_a_slot(store: SqlStore) {
    store
        .limit_set(
            &Limit {
                scope: Scope::Handler,
                name: "ghost".into(),
                max_running: Some(1),
                rate_per_sec: None,
            },
            T0,
        )
        .await
        .unwrap();
    let jobs = jobs(&store, "gh", "ghost", 2).await;
    let key = "handler:ghost";
    let won = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &[claim_to(&jobs[0], "w1")],
            T0 + 10,
        )
        .await
        .unwrap()
        .work;
    assert_eq!(in_use(&store, key).await, 1);
    let handed_back = [(won[0].execution_id.clone(), 1)];
    store
        .executions_requeue_unstarted(&handed_back, "not confirmed", T0 + 11)
        .await
        .unwrap();
    assert_eq!(in_use(&store, key).await, 0, "pending holds no slot");
    // The gate's counting deletes the rows of what holds no slot.
    let c = claim_to(&jobs[1], "w1");
    let other = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[c], T0 + 12)
        .await
        .unwrap()
        .work;
    assert_eq!(in_use(&store, key).await, 1);
    store
        .executions_requeue_unstarted(
            &[(other[0].execution_id.clone(), 1)],
            "not confirmed",
            T0 + 13,
        )
        .await
        .unwrap();
    assert_eq!(in_use(&store, key).await, 0);

    // The first one's message was delivered after all: its worker starts it.
    let started = result(&won[0], 1, ResultKind::Started, T0 + 20);
    let applied = store.results_apply(&[started], T0 + 20).await.unwrap();
    assert_eq!(applied[0].new_status, Some(ExecStatus::Running));
    assert_eq!(in_use(&store, key).await, 1, "it runs: it occupies a slot");
    let pending = store
        .executions_find_unpublished(T0 + 30, 10, &Routable::Any)
        .await
        .unwrap();
    assert_eq!(pending.len(), 1, "the other one");
    let all: Vec<&DispatchWork> = pending.iter().collect();
    let admitted = store
        .executions_admit(1, &picks(&all, "w2"), T0 + 30)
        .await
        .unwrap();
    assert!(admitted.dispatched.is_empty(), "the limit is full");
    assert_eq!(admitted.waiting.len(), 1);
}

/// Claims of one term run side by side (they share the fence's row), and
/// the gate's own lock still decides them one at a time: however they
/// interleave, exactly the limit's worth is dispatched.
async fn concurrent_claims_never_pass_a_limit(store: SqlStore) {
    store
        .limit_set(
            &Limit {
                scope: Scope::Handler,
                name: "par".into(),
                max_running: Some(3),
                rate_per_sec: None,
            },
            T0,
        )
        .await
        .unwrap();
    let jobs = jobs(&store, "par", "par", 12).await;
    let claims: Vec<Vec<Claim>> = jobs
        .chunks(2)
        .map(|pair| pair.iter().map(|j| claim_to(j, "w1")).collect())
        .collect();
    let runs = claims.iter().map(|c| {
        let store = store.clone();
        let c = c.clone();
        tokio::spawn(async move {
            store
                .triggers_claim(DispatchScope::All { fence: 1 }, &c, T0 + 10)
                .await
        })
    });
    let mut dispatched = 0;
    for run in futures::future::join_all(runs).await {
        dispatched += run.unwrap().unwrap().work.len();
    }
    assert_eq!(dispatched, 3, "the limit's worth, no more");
    assert_eq!(in_use(&store, "handler:par").await, 3);
    assert_eq!(store.executions_count_waiting(100).await.unwrap(), 9);
}
