//! Store suite, the dispatcher's hot path: claims (version check, concurrency,
//! fencing, duplicates) and publisher confirms — on SQLite and on MySQL, plus
//! an EXPLAIN of the due scan on MySQL.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::JobStatus;
use kairos_core::store::{
    Claim, ControlOutcome, Dispatch, DispatchedTo, History, JobStore, Maintenance, StoreError,
};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, id, job_now, one_shot};

store_cases!(
    claim_checks_the_version_and_returns_the_work,
    a_claim_naming_its_worker_records_the_dispatch,
    concurrent_claims_of_one_trigger_make_one_execution,
    a_trigger_with_an_execution_is_left_out_of_the_batch,
    an_older_fence_is_refused_and_writes_nothing,
    mark_dispatched_moves_only_the_named_pending_attempt,
    mark_dispatched_reports_attempts_cancelled_since_the_claim,
    a_rerouted_dispatch_names_its_new_worker,
    a_batch_of_several_statements_gives_each_row_its_own_values,
    due_triggers_are_counted_up_to_a_time_and_a_cap,
);

fn claim_of(job: &kairos_core::job::Job, next: Option<i64>) -> Claim {
    Claim {
        shard: Default::default(),
        job: std::sync::Arc::new(job.clone()),
        scheduled_at: job.next_trigger_at.unwrap(),
        next_trigger_at: next,
        execution_id: id(),
        worker_id: None,
    }
}

async fn due_triggers_are_counted_up_to_a_time_and_a_cap(store: SqlStore) {
    for at in [T0, T0, T0 + 10, T0 + 20, T0 + 1_000] {
        create(&store, one_shot("cd", at)).await;
    }
    let paused = create(&store, one_shot("cd", T0)).await;
    let ControlOutcome::Done(_) = store.job_pause("cd", &paused.id, None, T0).await.unwrap() else {
        panic!("pause must apply");
    };
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::All { fence: 1 }, T0 - 1, 100)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::All { fence: 1 }, T0, 100)
            .await
            .unwrap(),
        2,
        "a paused job has no trigger to claim"
    );
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::All { fence: 1 }, T0 + 20, 100)
            .await
            .unwrap(),
        4
    );
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::All { fence: 1 }, T0 + 5_000, 100)
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::All { fence: 1 }, T0 + 5_000, 3)
            .await
            .unwrap(),
        3,
        "capped"
    );
}

async fn claim_checks_the_version_and_returns_the_work(store: SqlStore) {
    let mut new = support::cron("k", T0);
    new.timeout_ms = Some(2_500);
    let job = create(&store, new).await;
    let stale = claim_of(&job, Some(T0 + 1_000));
    let won = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &[claim_of(&job, Some(T0 + 1_000))],
            T0,
        )
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 1);
    let w = &won[0];
    assert_eq!(
        (w.job_id.as_str(), w.tenant.as_str(), w.attempt),
        (job.id.as_str(), "k", 1)
    );
    assert_eq!((w.handler.as_str(), &w.params), ("noop", &job.params));
    assert_eq!((w.scheduled_at, w.timeout_ms), (T0, Some(2_500)));
    assert_eq!(w.to_message().execution_id, w.execution_id);

    let after = job_now(&store, &job).await;
    assert_eq!(after.status, JobStatus::Running);
    assert_eq!(after.version, job.version + 1);
    assert_eq!(after.next_trigger_at, Some(T0 + 1_000));

    assert!(
        store
            .triggers_claim(DispatchScope::All { fence: 1 }, &[stale], T0)
            .await
            .unwrap()
            .work
            .is_empty(),
        "stale version"
    );
    let exec = store
        .execution_get("k", &w.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (exec.status, exec.attempt, exec.not_before),
        (ExecStatus::Pending, 1, T0)
    );
    let events = store.execution_events("k", &w.execution_id).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].status, ExecStatus::Pending);

    // The next trigger is claimable with the new version.
    let again = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &[claim_of(&after, Some(T0 + 2_000))],
            T0 + 1_000,
        )
        .await;
    assert_eq!(again.unwrap().work.len(), 1);
    assert!(
        store
            .triggers_claim(DispatchScope::All { fence: 1 }, &[], T0)
            .await
            .unwrap()
            .work
            .is_empty()
    );
}

async fn a_claim_naming_its_worker_records_the_dispatch(store: SqlStore) {
    let early = create(&store, one_shot("cw", T0)).await;
    let late = create(&store, one_shot("cw", T0 + 500)).await;
    let mut claims = vec![claim_of(&early, None), claim_of(&late, None)];
    for c in &mut claims {
        c.worker_id = Some("w1".into());
    }
    // Claimed 100 ms after the first is due and 400 ms before the second.
    let won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0 + 100)
        .await
        .unwrap()
        .work;
    assert_eq!(won.len(), 2);
    let unpublished = store
        .executions_find_unpublished(T0 + 1_000, 10, &kairos_core::worker::Routable::Any)
        .await
        .unwrap();
    assert!(unpublished.is_empty(), "dispatched work is not swept up");
    for (w, dispatched_at) in won.iter().zip([T0 + 100, T0 + 500]) {
        assert_eq!(w.worker_id.as_deref(), Some("w1"));
        let exec = store
            .execution_get("cw", &w.execution_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (exec.status, exec.worker_id.as_deref(), exec.dispatched_at),
            (ExecStatus::Dispatched, Some("w1"), Some(dispatched_at))
        );
        let events = store.execution_events("cw", &w.execution_id).await.unwrap();
        let events: Vec<_> = events
            .iter()
            .map(|e| (e.status, e.worker_id.as_deref()))
            .collect();
        assert_eq!(events, [(ExecStatus::Dispatched, Some("w1"))]);
    }
    let held = store.executions_in_flight_on("w1").await.unwrap();
    assert_eq!(held.len(), 2, "the worker holds both for the reaper");

    // Work that is not published is handed back, and then swept up.
    let first = (won[0].execution_id.clone(), 1);
    let moved = store
        .executions_requeue_unstarted(&[first], "not published", T0 + 200)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let unpublished = store
        .executions_find_unpublished(T0 + 1_000, 10, &kairos_core::worker::Routable::Any)
        .await
        .unwrap();
    let ids: Vec<&str> = unpublished
        .iter()
        .map(|w| w.execution_id.as_str())
        .collect();
    assert_eq!(ids, [won[0].execution_id.as_str()]);
    assert_eq!(unpublished[0].worker_id, None);
}

async fn concurrent_claims_of_one_trigger_make_one_execution(store: SqlStore) {
    let jobs = {
        let mut v = Vec::new();
        for _ in 0..10 {
            v.push(create(&store, one_shot("cc", T0)).await);
        }
        v
    };
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = store.clone();
        let claims: Vec<Claim> = jobs.iter().map(|j| claim_of(j, None)).collect();
        tasks.push(tokio::spawn(async move {
            store
                .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0)
                .await
        }));
    }
    let mut won = 0;
    for t in tasks {
        won += t.await.unwrap().unwrap().work.len();
    }
    assert_eq!(won, jobs.len(), "each trigger is won exactly once");
    for j in &jobs {
        let page = store
            .executions_list_for_job("cc", &j.id, 10, None)
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);
    }
}

async fn a_trigger_with_an_execution_is_left_out_of_the_batch(store: SqlStore) {
    let dup = create(&store, one_shot("du", T0)).await;
    let fine = create(&store, one_shot("du", T0)).await;
    let manual = id();
    let ControlOutcome::Done(_) = store
        .job_trigger_now("du", &dup.id, &manual, T0)
        .await
        .unwrap()
    else {
        panic!("trigger must apply");
    };
    let dup = job_now(&store, &dup).await;
    let won = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &[claim_of(&dup, None), claim_of(&fine, None)],
            T0,
        )
        .await
        .unwrap()
        .work;
    assert_eq!(
        won.iter().map(|w| w.job_id.as_str()).collect::<Vec<_>>(),
        [fine.id.as_str()]
    );
    let page = store
        .executions_list_for_job("du", &dup.id, 10, None)
        .await
        .unwrap();
    assert_eq!(
        page.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        [manual.as_str()]
    );
}

async fn an_older_fence_is_refused_and_writes_nothing(store: SqlStore) {
    let a = create(&store, one_shot("f", T0)).await;
    let b = create(&store, one_shot("f", T0)).await;
    assert_eq!(
        store
            .triggers_claim(DispatchScope::All { fence: 5 }, &[claim_of(&a, None)], T0)
            .await
            .unwrap()
            .work
            .len(),
        1
    );
    match store
        .triggers_claim(DispatchScope::All { fence: 3 }, &[claim_of(&b, None)], T0)
        .await
    {
        Err(StoreError::Fenced {
            ours: 3,
            current: 5,
        }) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
    let b_now = job_now(&store, &b).await;
    assert_eq!(
        (b_now.version, b_now.status),
        (b.version, JobStatus::Scheduled)
    );
    assert!(
        store
            .executions_list_for_job("f", &b.id, 10, None)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        store
            .triggers_claim(DispatchScope::All { fence: 6 }, &[claim_of(&b, None)], T0)
            .await
            .unwrap()
            .work
            .len(),
        1
    );
    assert!(matches!(
        store.triggers_claim(DispatchScope::All { fence: 5 }, &[], T0).await,
        Ok(v) if v.work.is_empty()
    ));
}

async fn mark_dispatched_moves_only_the_named_pending_attempt(store: SqlStore) {
    let mut works = Vec::new();
    for _ in 0..4 {
        let job = create(&store, one_shot("md", T0)).await;
        works.push(claim(&store, &job, None).await);
    }
    let to = |i: usize, attempt: u32, worker: &str| DispatchedTo {
        execution_id: works[i].execution_id.clone(),
        attempt,
        worker_id: worker.to_string(),
    };
    let sent = [
        to(0, 1, "w1"),
        to(1, 1, "w2"),
        to(2, 2, "w1"),
        to(0, 1, "w1"),
    ];
    assert_eq!(
        store
            .executions_mark_dispatched(&sent, T0 + 5)
            .await
            .unwrap()
            .dispatched,
        2
    );
    let e0 = store
        .execution_get("md", &works[0].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e0.status, ExecStatus::Dispatched);
    assert_eq!(
        (e0.worker_id.as_deref(), e0.dispatched_at),
        (Some("w1"), Some(T0 + 5))
    );
    let e1 = store
        .execution_get("md", &works[1].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e1.worker_id.as_deref(), Some("w2"));
    let e2 = store
        .execution_get("md", &works[2].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        e2.status,
        ExecStatus::Pending,
        "a confirm for another attempt changes nothing"
    );

    // A confirm that arrives after `started` does not rewind the execution.
    let started = support::result(&works[3], 1, kairos_core::protocol::ResultKind::Started, T0);
    store.results_apply(&[started], T0).await.unwrap();
    assert_eq!(
        store
            .executions_mark_dispatched(&[to(3, 1, "w1")], T0)
            .await
            .unwrap()
            .dispatched,
        0
    );
    let e3 = store
        .execution_get("md", &works[3].execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e3.status, ExecStatus::Running);
    assert_eq!(
        store
            .executions_mark_dispatched(&sent, T0 + 6)
            .await
            .unwrap()
            .dispatched,
        0,
        "duplicates"
    );
    let events = store
        .execution_events("md", &works[0].execution_id)
        .await
        .unwrap();
    let states: Vec<ExecStatus> = events.iter().map(|e| e.status).collect();
    assert_eq!(states, [ExecStatus::Pending, ExecStatus::Dispatched]);
    assert_eq!(events[1].worker_id.as_deref(), Some("w1"));
}

/// 300 future jobs (a third of them cancelled) and 3 due ones: a table on
/// which the due scan has an index worth using.
async fn seed_due_scan(store: &SqlStore) {
    for i in 0..300 {
        let job = create(store, one_shot("x", T0 + 1_000 + i)).await;
        if i % 3 == 0 {
            store.job_cancel("x", &job.id, T0).await.unwrap();
        }
    }
    for _ in 0..3 {
        create(store, one_shot("x", T0 - 5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_due_scan_uses_the_status_next_trigger_index() {
    use sqlx::{Connection, Row};
    let Some(url) = kairos_testkit::mysql_fresh_database().await else {
        return;
    };
    let store = SqlStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    seed_due_scan(&store).await;
    let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("ANALYZE TABLE jobs")
        .execute(&mut conn)
        .await
        .unwrap();
    let sql = format!(
        "EXPLAIN {}",
        kairos_store_sql::due_scan_sql(kairos_store_sql::Dialect::MySql)
    );
    let at = chrono::DateTime::from_timestamp_millis(T0)
        .unwrap()
        .naive_utc();
    let states = kairos_core::job::JobTransition::Claim.from_states();
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for s in states {
        query = query.bind(s.as_str()).bind(at).bind(100_i64);
    }
    let rows = query.bind(100_i64).fetch_all(&mut conn).await.unwrap();
    // One index range per claimable state, each read in due order: no
    // part sorts what it reads (the sort of every due row this replaced).
    let parts: Vec<_> = rows
        .iter()
        .filter(|r| r.try_get::<Option<String>, _>("table").unwrap().as_deref() == Some("j"))
        .collect();
    assert_eq!(parts.len(), states.len(), "EXPLAIN: {rows:?}");
    for part in parts {
        let key: Option<String> = part.try_get("key").unwrap();
        let extra: Option<String> = part.try_get("Extra").unwrap();
        assert_eq!(
            key.as_deref(),
            Some("idx_jobs_status_next"),
            "EXPLAIN: {rows:?}"
        );
        assert!(
            !extra.unwrap_or_default().contains("filesort"),
            "a part sorts: {rows:?}"
        );
    }
    assert_eq!(
        store
            .jobs_find_due(DispatchScope::All { fence: 1 }, T0, 100, &[])
            .await
            .unwrap()
            .len(),
        3
    );
}

/// On PostgreSQL the due scan can read through `idx_jobs_status_next` (with
/// sequential scans ruled out, as on a table large enough for it to matter).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_due_scan_can_use_the_status_next_trigger_index() {
    use sqlx::Connection;
    let Some(db) = kairos_testkit::postgres_fresh_database().await else {
        return;
    };
    let store = SqlStore::connect(db.url()).await.unwrap();
    store.migrate().await.unwrap();
    seed_due_scan(&store).await;
    let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
    sqlx::raw_sql("ANALYZE jobs; SET enable_seqscan = off")
        .execute(&mut conn)
        .await
        .unwrap();
    let sql = format!(
        "EXPLAIN {}",
        kairos_store_sql::due_scan_sql(kairos_store_sql::Dialect::Postgres)
    );
    let at = chrono::DateTime::from_timestamp_millis(T0).unwrap();
    let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql));
    for s in kairos_core::job::JobTransition::Claim.from_states() {
        query = query.bind(s.as_str()).bind(at).bind(100_i64);
    }
    let plan = query
        .bind(100_i64)
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .join("\n");
    assert!(plan.contains("idx_jobs_status_next"), "EXPLAIN:\n{plan}");
    conn.close().await.unwrap();
    assert_eq!(
        store
            .jobs_find_due(DispatchScope::All { fence: 1 }, T0, 100, &[])
            .await
            .unwrap()
            .len(),
        3
    );
    store.close().await;
}

async fn mark_dispatched_reports_attempts_cancelled_since_the_claim(store: SqlStore) {
    let kept = create(&store, one_shot("mc", T0)).await;
    let dropped = create(&store, one_shot("mc", T0)).await;
    let kept_work = claim(&store, &kept, None).await;
    let dropped_work = claim(&store, &dropped, None).await;
    store.job_cancel("mc", &dropped.id, T0 + 1).await.unwrap();
    let sent: Vec<DispatchedTo> = [&kept_work, &dropped_work]
        .iter()
        .map(|w| DispatchedTo {
            execution_id: w.execution_id.clone(),
            attempt: 1,
            worker_id: "w1".into(),
        })
        .collect();
    let marked = store
        .executions_mark_dispatched(&sent, T0 + 2)
        .await
        .unwrap();
    assert_eq!(marked.dispatched, 1);
    assert_eq!(marked.cancelled, [(dropped_work.execution_id.clone(), 1)]);
    let e = store
        .execution_get("mc", &dropped_work.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        e.status,
        ExecStatus::Cancelled,
        "a confirm does not revive it"
    );
}

async fn a_rerouted_dispatch_names_its_new_worker(store: SqlStore) {
    let job = create(&store, one_shot("rr", T0)).await;
    let work = claim(&store, &job, None).await;
    let to = |worker: &str, attempt: u32| DispatchedTo {
        execution_id: work.execution_id.clone(),
        attempt,
        worker_id: worker.into(),
    };
    assert!(
        !store
            .execution_mark_rerouted(&to("w2", 1), "rerouted", T0 + 1)
            .await
            .unwrap(),
        "not dispatched yet"
    );
    store
        .executions_mark_dispatched(&[to("w1", 1)], T0 + 2)
        .await
        .unwrap();
    assert!(
        !store
            .execution_mark_rerouted(&to("w2", 2), "rerouted", T0 + 3)
            .await
            .unwrap(),
        "another attempt"
    );
    assert!(
        store
            .execution_mark_rerouted(&to("w2", 1), "rerouted: worker w1 was full", T0 + 3)
            .await
            .unwrap()
    );
    let e = store
        .execution_get("rr", &work.execution_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (e.status, e.worker_id.as_deref()),
        (ExecStatus::Dispatched, Some("w2"))
    );
    assert_eq!(
        store.executions_in_flight_on("w2").await.unwrap().len(),
        1,
        "the reaper finds it on its new worker"
    );
    assert!(
        store
            .executions_in_flight_on("w1")
            .await
            .unwrap()
            .is_empty()
    );
    let events = store
        .execution_events("rr", &work.execution_id)
        .await
        .unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.worker_id.as_deref(), last.error.as_deref()),
        (Some("w2"), Some("rerouted: worker w1 was full"))
    );
}

/// Claims and results are written in chunks of padded multi-row updates
/// (64 rows of `CASE` arms on MySQL, 256 joined `VALUES` rows elsewhere):
/// a batch of an odd size spanning several of them must still give every
/// row its own values, and no row another's.
async fn a_batch_of_several_statements_gives_each_row_its_own_values(store: SqlStore) {
    use kairos_core::protocol::ResultKind;
    let n = 300;
    let mut jobs = Vec::with_capacity(n);
    for _ in 0..n {
        jobs.push(create(&store, support::cron("big", T0)).await);
    }
    // Each job gets a next trigger of its own.
    let claims: Vec<Claim> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| claim_of(j, Some(T0 + 1_000 + i as i64)))
        .collect();
    let work = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0)
        .await
        .unwrap()
        .work;
    assert_eq!(work.len(), n, "every claim wins");
    for (i, job) in jobs.iter().enumerate() {
        let after = job_now(&store, job).await;
        assert_eq!(after.next_trigger_at, Some(T0 + 1_000 + i as i64));
        assert_eq!(after.version, job.version + 1);
    }
    let sent: Vec<DispatchedTo> = work
        .iter()
        .enumerate()
        .map(|(i, w)| DispatchedTo {
            execution_id: w.execution_id.clone(),
            attempt: 1,
            worker_id: format!("w{}", i % 7),
        })
        .collect();
    store
        .executions_mark_dispatched(&sent, T0 + 1)
        .await
        .unwrap();
    // Every other one fails, so the rows written together differ.
    let results: Vec<_> = work
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let kind = if i % 2 == 0 {
                ResultKind::Succeeded
            } else {
                ResultKind::Failed
            };
            let mut r = support::result(w, 1, kind, T0 + 10 + i as i64);
            r.worker_id = format!("w{}", i % 7);
            r
        })
        .collect();
    let applied = store.results_apply(&results, T0 + 500).await.unwrap();
    assert_eq!(applied.len(), n);
    for (i, w) in work.iter().enumerate() {
        let exec = store
            .execution_get("big", &w.execution_id)
            .await
            .unwrap()
            .unwrap();
        let want = if i % 2 == 0 {
            ExecStatus::Succeeded
        } else {
            ExecStatus::Failed
        };
        assert_eq!(exec.status, want, "execution {i}");
        assert_eq!(exec.finished_at, Some(T0 + 10 + i as i64), "execution {i}");
        assert_eq!(exec.worker_id, Some(format!("w{}", i % 7)), "execution {i}");
        assert_eq!(exec.dispatched_at, Some(T0 + 1));
    }
}

/// The workers' stop-request poll reads the requests through their own
/// index on SQLite too, which keeps no statistics: through the status index
/// it would read every execution a worker holds, at every poll.
#[tokio::test]
async fn sqlite_stop_poll_reads_only_the_requests() {
    use sqlx::{Connection, Row};
    let url = kairos_testkit::sqlite_temp_url();
    let store = SqlStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let sql = format!(
        "EXPLAIN QUERY PLAN {}",
        kairos_store_sql::stop_requests_sql(kairos_store_sql::Dialect::Sqlite)
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(T0)
        .bind("dispatched")
        .bind("running")
        .bind(100_i64)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = rows.iter().map(|r| r.get::<String, _>("detail")).collect();
    assert!(
        plan.iter()
            .any(|d| d.contains("idx_executions_stop_requested")),
        "plan: {plan:?}"
    );
    assert!(
        !plan.iter().any(|d| d.contains("idx_executions_status")),
        "plan: {plan:?}"
    );
    conn.close().await.unwrap();
    store.close().await;
}

/// The immediate lane's scan reads the lane's partial index on SQLite: only
/// lane-1 jobs with a next trigger are in it, so a scheduled job's claims
/// and results, and a finished job's moves, never write it (issue #43). The
/// scan must name the lane as a literal for SQLite to match the index.
#[tokio::test]
async fn sqlite_lane_scan_reads_the_partial_lane_index() {
    use sqlx::{Connection, Row};
    let url = kairos_testkit::sqlite_temp_url();
    let store = SqlStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let index: String =
        sqlx::query_scalar("SELECT sql FROM sqlite_master WHERE name = 'idx_jobs_lane_due'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(index.contains("WHERE"), "not a partial index: {index}");
    let sql = format!(
        "EXPLAIN QUERY PLAN {}",
        kairos_store_sql::lane_scan_sql(kairos_store_sql::Dialect::Sqlite)
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for s in kairos_core::job::JobTransition::Claim.from_states() {
        query = query.bind(s.as_str());
    }
    let rows = query
        .bind(T0)
        .bind(100_i64)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = rows.iter().map(|r| r.get::<String, _>("detail")).collect();
    assert!(
        plan.iter().any(|d| d.contains("idx_jobs_lane_due")),
        "plan: {plan:?}"
    );
    conn.close().await.unwrap();
    store.close().await;
}
