//! Store suite, the callback outbox and workers: leases under concurrency,
//! attempts, redelivery, heartbeats; plus connection and migration basics —
//! on SQLite and on MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::callback::{CallbackAttempt, CallbackState};
use kairos_core::protocol::ResultKind::{Started, Succeeded};
use kairos_core::protocol::{HeartbeatMsg, PROTOCOL_VERSION};
use kairos_core::store::JobStore;
use kairos_core::store::{CallbackNext, CallbackStore, Dispatch, Health, StoreError, WorkerStore};
use kairos_core::trace::CallerTrace;
use kairos_core::worker::WorkerState;
use kairos_store_sql::{Dialect, SqlStore};
use std::collections::HashSet;
use support::{T0, claim, create, one_shot, result, terminal_with_callbacks};

store_cases!(
    concurrent_relays_never_lease_the_same_callback,
    attempts_retries_and_redelivery,
    heartbeats_upsert_workers,
    migrate_twice_and_ping,
    a_caller_trace_reaches_dispatches_and_callbacks,
    results_say_which_of_them_queued_a_callback,
);

/// The trace context a job was created with is read back with the job, in
/// its dispatch work (claim and the unpublished scan) and with its
/// callbacks; a job created without one has none anywhere.
async fn a_caller_trace_reaches_dispatches_and_callbacks(store: SqlStore) {
    let trace = CallerTrace::from_headers(
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        Some("congo=t61rcWkgMzE"),
    );
    assert!(trace.is_some());
    let mut ids = Vec::new();
    for t in [trace.clone(), None] {
        let mut new = one_shot("tr", T0);
        new.callback_url = Some("http://example.test/cb".into());
        new.trace = t.clone();
        let job = create(&store, new).await;
        let read = store.job_get("tr", &job.id).await.unwrap().unwrap();
        assert_eq!(read.trace, t);
        let w = claim(&store, &job, None).await;
        assert_eq!(w.trace, t, "claimed work carries the job's trace");
        assert_eq!(w.to_message().trace, t);
        let pending = store
            .executions_find_unpublished(T0 + 1, 100, &kairos_core::worker::Routable::Any)
            .await
            .unwrap();
        let again = pending
            .iter()
            .find(|p| p.execution_id == w.execution_id)
            .expect("the unpublished execution");
        assert_eq!(again.trace, t, "the unpublished scan reads it too");
        store
            .results_apply(&[result(&w, 1, Succeeded, T0 + 1)], T0 + 1)
            .await
            .unwrap();
        ids.push((w.execution_id, t));
    }
    let due = store
        .callbacks_claim_due("relay", T0 + 10, 60_000, 100)
        .await
        .unwrap();
    for (exec, t) in ids {
        let cb = due
            .iter()
            .find(|c| c.subject.execution_id() == Some(exec.as_str()))
            .expect("callback");
        assert_eq!(cb.trace, t, "callbacks read their job's trace");
    }
}

/// What wakes the in-process relay: only the final result of a job with a
/// callback URL queued one; a `started`, a job without a URL and a
/// duplicate did not.
async fn results_say_which_of_them_queued_a_callback(store: SqlStore) {
    let mut with_url = one_shot("cq", T0);
    with_url.callback_url = Some("http://example.test/cb".into());
    let with_url = claim(&store, &create(&store, with_url).await, None).await;
    let without = claim(&store, &create(&store, one_shot("cq", T0)).await, None).await;
    let batch = [
        result(&with_url, 1, Started, T0 + 1),
        result(&without, 1, Succeeded, T0 + 2),
        result(&with_url, 1, Succeeded, T0 + 2),
        result(&with_url, 1, Succeeded, T0 + 2),
    ];
    let applied = store.results_apply(&batch, T0 + 3).await.unwrap();
    let queued: Vec<bool> = applied.iter().map(|a| a.callback_queued).collect();
    assert_eq!(queued, [false, false, true, false]);
}

fn attempt(n: u32, code: Option<u16>, error: Option<&str>) -> CallbackAttempt {
    CallbackAttempt {
        attempt: n,
        at: T0 + 10,
        status_code: code,
        latency_ms: 12,
        error: error.map(str::to_string),
    }
}

async fn concurrent_relays_never_lease_the_same_callback(store: SqlStore) {
    terminal_with_callbacks(&store, "cc", 40).await;
    let mut tasks = Vec::new();
    for r in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let owner = format!("relay-{r}");
            let mut mine = Vec::new();
            loop {
                let got = store
                    .callbacks_claim_due(&owner, T0 + 5, 60_000, 7)
                    .await
                    .unwrap();
                if got.is_empty() {
                    break;
                }
                mine.extend(got.into_iter().map(|c| c.id));
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "a callback was leased twice");
    assert_eq!(all.len(), 40);

    // Leased rows stay out of reach until the lease runs out.
    assert!(
        store
            .callbacks_claim_due("late", T0 + 60_005, 1_000, 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.callbacks_next_due().await.unwrap(), Some(T0 + 60_006));
    let expired = store
        .callbacks_claim_due("late", T0 + 60_006, 1_000, 100)
        .await
        .unwrap();
    assert_eq!(expired.len(), 40);
}

async fn attempts_retries_and_redelivery(store: SqlStore) {
    let execs = terminal_with_callbacks(&store, "at", 1).await;
    let exec = &execs[0];
    assert!(
        store
            .callbacks_claim_due("r1", T0, 1_000, 10)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    let leased = store
        .callbacks_claim_due("r1", T0 + 1, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    let cb = &leased[0];
    assert_eq!(
        (
            cb.state,
            cb.attempts,
            cb.subject.execution_id().unwrap_or_default()
        ),
        (CallbackState::Pending, 0, exec.as_str())
    );

    let a1 = attempt(1, Some(503), None);
    let next = CallbackNext::RetryAt(T0 + 2_000);
    assert!(
        store
            .callback_record_attempt(&cb.id, "r1", &a1, next, T0 + 10)
            .await
            .unwrap()
    );
    assert_eq!(store.callbacks_next_due().await.unwrap(), Some(T0 + 2_000));
    assert!(
        store
            .callbacks_claim_due("r2", T0 + 1_999, 1_000, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = store
        .callbacks_claim_due("r2", T0 + 2_000, 1_000, 10)
        .await
        .unwrap();
    assert_eq!((again.len(), again[0].attempts), (1, 1));
    assert_eq!(again[0].last_error.as_deref(), Some("HTTP 503"));
    assert_eq!(again[0].id, cb.id, "one delivery id across attempts");

    // The lease moved on: r1's late report is recorded but changes nothing.
    let stale = attempt(2, None, Some("connection reset"));
    assert!(
        !store
            .callback_record_attempt(&cb.id, "r1", &stale, CallbackNext::Dead, T0 + 2_001)
            .await
            .unwrap()
    );
    assert!(
        store
            .callback_redeliver("at", exec, &support::id(), T0)
            .await
            .unwrap()
            .is_none(),
        "still pending"
    );
    let ok = attempt(2, Some(204), None);
    assert!(
        store
            .callback_record_attempt(&cb.id, "r2", &ok, CallbackNext::Delivered, T0 + 2_002)
            .await
            .unwrap()
    );
    assert_eq!(store.callbacks_next_due().await.unwrap(), None);

    let listed = store.callbacks_for_execution("at", exec).await.unwrap();
    assert_eq!(listed.len(), 1);
    let (c, attempts) = &listed[0];
    assert_eq!((c.state, c.attempts), (CallbackState::Delivered, 2));
    let codes: Vec<Option<u16>> = attempts.iter().map(|a| a.status_code).collect();
    assert_eq!(codes, [Some(503), None, Some(204)]);
    assert_eq!(attempts[1].error.as_deref(), Some("connection reset"));
    assert_eq!(attempts[0].latency_ms, 12);

    assert!(
        store
            .callback_redeliver("other", exec, &support::id(), T0)
            .await
            .unwrap()
            .is_none()
    );
    let new_id = support::id();
    let fresh = store
        .callback_redeliver("at", exec, &new_id, T0 + 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (fresh.id.as_str(), fresh.state, fresh.attempts),
        (new_id.as_str(), CallbackState::Pending, 0)
    );
    assert_eq!(
        (fresh.payload.as_str(), fresh.next_attempt_at),
        (c.payload.as_str(), T0 + 3_000)
    );
    assert!(
        store
            .callback_redeliver("at", exec, &support::id(), T0)
            .await
            .unwrap()
            .is_none()
    );
    let listed = store.callbacks_for_execution("at", exec).await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|(c, _)| c.id.as_str())
            .collect::<Vec<_>>(),
        [cb.id.as_str(), new_id.as_str()]
    );

    let leased = store
        .callbacks_claim_due("r3", T0 + 3_000, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    let gone = attempt(1, Some(410), None);
    assert!(
        store
            .callback_record_attempt(&new_id, "r3", &gone, CallbackNext::Dead, T0 + 3_001)
            .await
            .unwrap()
    );
    let listed = store.callbacks_for_execution("at", exec).await.unwrap();
    assert_eq!(listed[1].0.state, CallbackState::Dead);
    assert_eq!(listed[1].0.last_error.as_deref(), Some("HTTP 410"));
}

fn beat(id: &str, active: u32, at: i64) -> HeartbeatMsg {
    HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: id.to_string(),
        queue: format!("kairos.worker.{id}"),
        capacity: 8,
        active,
        avg_cost_ms: 12.5,
        cpu_idle: 87.0,
        state: WorkerState::Online,
        at,
        handlers: None,
        group: None,
        incarnation: None,
        held: None,
        dispatch_batch: None,
        immediate_queue: false,
    }
}

async fn heartbeats_upsert_workers(store: SqlStore) {
    store
        .workers_record_heartbeats(&[beat("w2", 1, T0), beat("w1", 0, T0)], T0 + 1)
        .await
        .unwrap();
    let batch = [beat("w1", 3, T0 + 1_000), beat("w1", 2, T0 + 500)];
    store
        .workers_record_heartbeats(&batch, T0 + 1_001)
        .await
        .unwrap();
    store.workers_record_heartbeats(&[], T0).await.unwrap();
    let workers = store.workers_list().await.unwrap();
    assert_eq!(
        workers.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        ["w1", "w2"]
    );
    let w1 = &workers[0];
    assert_eq!(
        (w1.active, w1.last_heartbeat_at, w1.registered_at),
        (3, T0 + 1_000, T0 + 1)
    );
    assert_eq!((w1.capacity, w1.avg_cost_ms, w1.cpu_idle), (8, 12.5, 87.0));
    assert_eq!(
        (w1.queue.as_str(), w1.state),
        ("kairos.worker.w1", WorkerState::Online)
    );

    store
        .worker_set_state("w2", WorkerState::Offline, T0 + 2)
        .await
        .unwrap();
    store
        .worker_set_state("unknown", WorkerState::Offline, T0 + 2)
        .await
        .unwrap();
    let workers = store.workers_list().await.unwrap();
    assert_eq!(workers[1].state, WorkerState::Offline);
    let mut back = beat("w2", 0, T0 + 3_000);
    back.state = WorkerState::Draining;
    store
        .workers_record_heartbeats(&[back], T0 + 3_000)
        .await
        .unwrap();
    assert_eq!(
        store.workers_list().await.unwrap()[1].state,
        WorkerState::Draining
    );
}

async fn migrate_twice_and_ping(store: SqlStore) {
    store.migrate().await.unwrap();
    store.ping().await.unwrap();
    let copy = store.clone();
    copy.close().await;
    assert!(matches!(
        store.ping().await,
        Err(StoreError::Unavailable(_))
    ));
}

#[tokio::test]
async fn bad_urls_and_unreachable_databases_are_unavailable() {
    for (url, names) in [
        ("redis://h/0", "unsupported"),
        ("mysql://root@127.0.0.1:1/x", "MySQL"),
        ("postgres://postgres@127.0.0.1:1/x", "PostgreSQL"),
        ("sqlite:///nonexistent-dir/k/x.db", "SQLite"),
    ] {
        match SqlStore::connect(url).await {
            Err(StoreError::Unavailable(msg)) => {
                eprintln!("{msg}");
                assert!(msg.contains(names), "{msg}");
            }
            other => panic!("{url}: expected Unavailable, got {other:?}"),
        }
    }
    for url in [
        "mysql://root:secret@127.0.0.1:1/x",
        "postgres://kairos:secret@127.0.0.1:1/x",
    ] {
        match SqlStore::connect(url).await {
            Err(StoreError::Unavailable(msg)) => assert!(!msg.contains("secret"), "{msg}"),
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn sqlite_keeps_data_across_reopen() {
    let url = kairos_testkit::sqlite_temp_url();
    let store = SqlStore::connect(&url).await.unwrap();
    assert_eq!(store.dialect(), Dialect::Sqlite);
    store.migrate().await.unwrap();
    let job = create(&store, one_shot("keep", T0)).await;
    store.close().await;
    let reopened = SqlStore::connect(&url).await.unwrap();
    reopened.migrate().await.unwrap();
    use kairos_core::store::JobStore;
    assert_eq!(reopened.job_get("keep", &job.id).await.unwrap(), Some(job));
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut {
            use sqlx::Connection;
            sqlx::SqliteConnection::connect(&url).await.unwrap()
        })
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}
