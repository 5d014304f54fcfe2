//! Store suite, worker incarnations: a worker id coming back as a new
//! process retires the old one, whose late heartbeats and results change
//! nothing; the ledger says what the worker holds; attempts with no time
//! limit of their own are found for the default timeout — on SQLite and on
//! MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::RetryPolicy;
use kairos_core::protocol::ResultKind::{Started, Succeeded};
use kairos_core::protocol::{HeartbeatMsg, HeldRef, PROTOCOL_VERSION};
use kairos_core::store::{Dispatch, DispatchedTo, Maintenance, WorkerStore};
use kairos_core::worker::WorkerState;
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, one_shot, result};

store_cases!(
    a_new_incarnation_retires_the_old_one,
    results_of_a_replaced_process_change_nothing,
    the_ledger_lists_what_the_worker_holds,
    attempts_without_a_limit_are_found_for_the_default_timeout,
    existing_workers_and_executions_survive_the_migration,
    a_gone_worker_is_forgotten_only_offline_and_silent,
);

fn beat(id: &str, inc: Option<&str>, held: Option<Vec<HeldRef>>, at: i64) -> HeartbeatMsg {
    HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: id.into(),
        queue: format!("kairos.worker.{id}"),
        capacity: 4,
        active: 0,
        avg_cost_ms: 0.0,
        cpu_idle: 100.0,
        state: WorkerState::Online,
        at,
        incarnation: inc.map(str::to_string),
        held,
        handlers: None,
        group: None,
        dispatch_batch: None,
        immediate_queue: false,
    }
}

async fn dispatched_to(
    store: &SqlStore,
    worker: &str,
    at: i64,
) -> kairos_core::store::DispatchWork {
    let job = create(
        store,
        kairos_core::job::NewJob {
            trace: None,
            retry: RetryPolicy {
                max_attempts: 2,
                backoff_ms: 0,
            },
            ..one_shot("u", T0)
        },
    )
    .await;
    let w = claim(store, &job, None).await;
    let sent = [DispatchedTo {
        execution_id: w.execution_id.clone(),
        attempt: 1,
        worker_id: worker.into(),
    }];
    store.executions_mark_dispatched(&sent, at).await.unwrap();
    w
}

async fn a_new_incarnation_retires_the_old_one(store: SqlStore) {
    let first = store
        .workers_record_heartbeats(&[beat("w1", Some("a"), None, T0)], T0)
        .await
        .unwrap();
    assert!(first.is_empty(), "a first registration replaces nothing");
    let again = store
        .workers_record_heartbeats(&[beat("w1", Some("a"), None, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    assert!(again.is_empty());
    let changed = store
        .workers_record_heartbeats(&[beat("w1", Some("b"), None, T0 + 2)], T0 + 2)
        .await
        .unwrap();
    assert_eq!(changed.len(), 1);
    assert_eq!(
        (changed[0].previous.as_str(), changed[0].current.as_str()),
        ("a", "b")
    );
    // A late beat of the replaced process is dropped: `b` stays current.
    let late = store
        .workers_record_heartbeats(&[beat("w1", Some("a"), None, T0 + 3)], T0 + 3)
        .await
        .unwrap();
    assert!(late.is_empty());
    let l = store.worker_ledger("w1").await.unwrap().unwrap();
    assert_eq!(l.current.as_deref(), Some("b"));
    assert_eq!(l.current_since, Some(T0 + 2));
    assert_eq!(l.retired, ["a"]);
    assert_eq!(l.beat_at, T0 + 2);
    // Old and new beats in one batch: the newest decides.
    let both = store
        .workers_record_heartbeats(
            &[
                beat("w2", Some("x"), None, T0),
                beat("w2", Some("y"), None, T0 + 5),
            ],
            T0 + 5,
        )
        .await
        .unwrap();
    assert!(both.is_empty(), "w2 was unknown: nothing replaced");
    assert_eq!(
        store
            .worker_ledger("w2")
            .await
            .unwrap()
            .unwrap()
            .current
            .as_deref(),
        Some("y")
    );
    assert!(store.worker_ledger("nobody").await.unwrap().is_none());
}

async fn results_of_a_replaced_process_change_nothing(store: SqlStore) {
    store
        .workers_record_heartbeats(&[beat("w1", Some("old"), None, T0)], T0)
        .await
        .unwrap();
    let w = dispatched_to(&store, "w1", T0).await;
    let mut started = result(&w, 1, Started, T0 + 1);
    started.worker_id = "w1".into();
    started.incarnation = Some("old".into());
    let applied = store
        .results_apply(&[started.clone()], T0 + 1)
        .await
        .unwrap();
    assert_eq!(applied[0].new_status, Some(ExecStatus::Running));
    let held = store.executions_in_flight_on("w1").await.unwrap();
    assert_eq!(held[0].incarnation.as_deref(), Some("old"));
    assert_eq!(held[0].started_at, Some(T0 + 1));
    assert_eq!(held[0].dispatched_at, Some(T0));
    // The worker comes back as `new`: `old` is retired.
    store
        .workers_record_heartbeats(&[beat("w1", Some("new"), None, T0 + 2)], T0 + 2)
        .await
        .unwrap();
    let mut done = result(&w, 1, Succeeded, T0 + 3);
    done.worker_id = "w1".into();
    done.incarnation = Some("old".into());
    let applied = store.results_apply(&[done.clone()], T0 + 3).await.unwrap();
    assert_eq!(applied[0].new_status, None, "a retired process's result");
    // A live process other than the one that started it: not about this run.
    done.incarnation = Some("other".into());
    let applied = store.results_apply(&[done.clone()], T0 + 3).await.unwrap();
    assert_eq!(applied[0].new_status, None);
    // Lost and retried: the new attempt is nobody's until started.
    let lost = store
        .executions_apply_verdict(
            &[(w.execution_id.clone(), 1)],
            kairos_core::outcome::Verdict::Lost,
            "gone",
            T0 + 4,
        )
        .await
        .unwrap();
    assert_eq!(lost[0].new_status, Some(ExecStatus::Pending));
    // The retry, started by the new process, ends with its result.
    let sent = [DispatchedTo {
        execution_id: w.execution_id.clone(),
        attempt: 2,
        worker_id: "w1".into(),
    }];
    store
        .executions_mark_dispatched(&sent, T0 + 5)
        .await
        .unwrap();
    let mut s2 = result(&w, 2, Started, T0 + 6);
    s2.worker_id = "w1".into();
    s2.incarnation = Some("new".into());
    let mut d2 = result(&w, 2, Succeeded, T0 + 7);
    d2.worker_id = "w1".into();
    d2.incarnation = Some("new".into());
    let applied = store.results_apply(&[s2, d2], T0 + 7).await.unwrap();
    assert_eq!(
        applied.iter().map(|a| a.new_status).collect::<Vec<_>>(),
        [Some(ExecStatus::Running), Some(ExecStatus::Succeeded)]
    );
}

async fn the_ledger_lists_what_the_worker_holds(store: SqlStore) {
    let held = vec![HeldRef {
        execution_id: "e1".into(),
        attempt: 2,
    }];
    store
        .workers_record_heartbeats(&[beat("w1", Some("a"), Some(held.clone()), T0)], T0)
        .await
        .unwrap();
    let l = store.worker_ledger("w1").await.unwrap().unwrap();
    assert_eq!(l.held, Some(held));
    assert!(l.retired.is_empty());
    // A legacy worker reports nothing to reconcile against.
    store
        .workers_record_heartbeats(&[beat("w2", None, None, T0)], T0)
        .await
        .unwrap();
    let l = store.worker_ledger("w2").await.unwrap().unwrap();
    assert_eq!((l.current, l.held), (None, None));
}

async fn attempts_without_a_limit_are_found_for_the_default_timeout(store: SqlStore) {
    let sent = dispatched_to(&store, "w1", T0).await;
    let running = dispatched_to(&store, "w1", T0).await;
    let mut started = result(&running, 1, Started, T0 + 100);
    started.worker_id = "w1".into();
    store.results_apply(&[started], T0 + 100).await.unwrap();
    let limited_job = create(
        &store,
        kairos_core::job::NewJob {
            trace: None,
            timeout_ms: Some(10),
            ..one_shot("u", T0)
        },
    )
    .await;
    let limited = claim(&store, &limited_job, None).await;
    store
        .executions_mark_dispatched(
            &[DispatchedTo {
                execution_id: limited.execution_id.clone(),
                attempt: 1,
                worker_id: "w1".into(),
            }],
            T0,
        )
        .await
        .unwrap();
    let mut started = result(&limited, 1, Started, T0);
    started.worker_id = "w1".into();
    store.results_apply(&[started], T0).await.unwrap();
    let found = store
        .executions_find_unbounded(T0 + 1_050, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(
        found,
        [(sent.execution_id.clone(), 1)],
        "counted from dispatch"
    );
    let mut found = store
        .executions_find_unbounded(T0 + 1_200, 1_000, 10)
        .await
        .unwrap();
    found.sort();
    let mut want = vec![
        (sent.execution_id.clone(), 1),
        (running.execution_id.clone(), 1),
    ];
    want.sort();
    assert_eq!(
        found, want,
        "the one with a deadline of its own is not listed"
    );
}

async fn existing_workers_and_executions_survive_the_migration(store: SqlStore) {
    // Rows written without the new columns (as before 0003) read back with
    // them unset, and a worker that starts speaking incarnations is not
    // mistaken for a restart.
    store
        .workers_record_heartbeats(&[beat("w1", None, None, T0)], T0)
        .await
        .unwrap();
    let changed = store
        .workers_record_heartbeats(&[beat("w1", Some("a"), None, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    assert!(changed.is_empty());
    let w = dispatched_to(&store, "w1", T0).await;
    let held = store.executions_in_flight_on("w1").await.unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].execution_id, w.execution_id);
    assert_eq!(held[0].incarnation, None);
}

/// `worker_forget` deletes a worker's row and its processes only while it
/// is offline and silent since before the cutoff; a later beat of the id
/// registers it afresh, with no retired process.
async fn a_gone_worker_is_forgotten_only_offline_and_silent(store: SqlStore) {
    store
        .workers_record_heartbeats(&[beat("gone", Some("i-1"), None, T0)], T0)
        .await
        .unwrap();
    store
        .workers_record_heartbeats(&[beat("gone", Some("i-2"), None, T0 + 10)], T0 + 10)
        .await
        .unwrap();
    assert!(
        !store.worker_forget("gone", T0 + 1_000).await.unwrap(),
        "online"
    );
    store
        .worker_set_state("gone", WorkerState::Offline, T0 + 20)
        .await
        .unwrap();
    assert!(
        !store.worker_forget("gone", T0 + 10).await.unwrap(),
        "not silent long enough"
    );
    assert!(store.worker_ledger("gone").await.unwrap().is_some());
    assert!(store.worker_forget("gone", T0 + 1_000).await.unwrap());
    assert!(store.worker_ledger("gone").await.unwrap().is_none());
    assert!(
        store
            .workers_list()
            .await
            .unwrap()
            .iter()
            .all(|w| w.id != "gone")
    );
    assert!(
        !store.worker_forget("gone", T0 + 1_000).await.unwrap(),
        "already gone"
    );
    store
        .workers_record_heartbeats(&[beat("gone", Some("i-3"), None, T0 + 2_000)], T0 + 2_000)
        .await
        .unwrap();
    let ledger = store.worker_ledger("gone").await.unwrap().unwrap();
    assert_eq!(ledger.current.as_deref(), Some("i-3"));
    assert!(ledger.retired.is_empty(), "{:?}", ledger.retired);
}
