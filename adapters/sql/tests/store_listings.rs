//! Store suite, the dashboard's listings and timing: executions filtered by
//! job, handler, worker and due time; bounded counts; keyset pages that link
//! both ways (jobs and executions); and how triggers kept time (lateness and
//! run-time samples, misfired, skipped and late counts) — on SQLite, MySQL
//! and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::job::NewJob;
use kairos_core::overview::ExecFilter;
use kairos_core::protocol::ResultKind::{Failed, Started, Succeeded};
use kairos_core::schedule::{OverlapPolicy, Schedule};
use kairos_core::store::{Dispatch, DispatchedTo, History, JobFilter, JobStore, Page};
use kairos_store_sql::SqlStore;
use support::{T0, claim, claim_due, create, one_shot, recurring, result, tweak};

store_cases!(
    executions_filter_by_job_handler_worker_and_time,
    jobs_and_executions_page_both_ways,
    trigger_timing_counts_missed_and_late,
);

fn job(tenant: &str, name: &str, handler: &str, at: i64) -> NewJob {
    NewJob {
        name: name.into(),
        handler: handler.into(),
        ..one_shot(tenant, at)
    }
}

/// Creates a job due at `at`, claims it and ends it on `worker`; the
/// execution id.
async fn ran(
    store: &SqlStore,
    tenant: &str,
    handler: &str,
    at: i64,
    worker: &str,
    ok: bool,
) -> String {
    let j = create(store, job(tenant, handler, handler, at)).await;
    let w = claim(store, &j, None).await;
    let mut r = result(&w, 1, if ok { Succeeded } else { Failed }, at + 5);
    r.worker_id = worker.into();
    store.results_apply(&[r], at + 5).await.unwrap();
    w.execution_id
}

async fn listed(store: &SqlStore, filter: ExecFilter) -> Vec<String> {
    let mut ids: Vec<String> = store
        .executions_list("ls", &filter)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| e.id)
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[&String]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

async fn executions_filter_by_job_handler_worker_and_time(store: SqlStore) {
    let a = ran(&store, "ls", "noop", T0, "w1", true).await;
    let b = ran(&store, "ls", "fail", T0 + 1_000, "w2", false).await;
    let c = ran(&store, "ls", "fail", T0 + 2_000, "w1", false).await;
    ran(&store, "other", "fail", T0, "w1", false).await;

    let all = ExecFilter::default();
    assert_eq!(listed(&store, all.clone()).await, sorted(&[&a, &b, &c]));
    let by = |f: fn(&mut ExecFilter)| {
        let mut filter = ExecFilter::default();
        f(&mut filter);
        filter
    };
    assert_eq!(
        listed(&store, by(|f| f.handler = Some("fail".into()))).await,
        sorted(&[&b, &c])
    );
    assert_eq!(
        listed(&store, by(|f| f.worker_id = Some("w1".into()))).await,
        sorted(&[&a, &c])
    );
    assert_eq!(
        listed(&store, by(|f| f.from = Some(T0 + 1_000))).await,
        sorted(&[&b, &c]),
        "from is inclusive"
    );
    assert_eq!(
        listed(&store, by(|f| f.to = Some(T0 + 1_000))).await,
        sorted(&[&a]),
        "to is exclusive"
    );
    let e = store.execution_get("ls", &b).await.unwrap().unwrap();
    let mut by_job = ExecFilter {
        job_id: Some(e.job_id.clone()),
        ..ExecFilter::default()
    };
    assert_eq!(
        listed(&store, by_job.clone()).await,
        std::slice::from_ref(&b)
    );
    by_job.worker_id = Some("w1".into());
    assert!(listed(&store, by_job).await.is_empty(), "filters combine");

    // Counts: exact up to the cap, the cap beyond it; the tenant's only.
    assert_eq!(store.executions_count("ls", &all, 100).await.unwrap(), 3);
    assert_eq!(store.executions_count("ls", &all, 2).await.unwrap(), 2);
    let fail = by(|f| f.handler = Some("fail".into()));
    assert_eq!(store.executions_count("ls", &fail, 100).await.unwrap(), 2);
    assert_eq!(
        store.executions_count("nobody", &all, 100).await.unwrap(),
        0
    );
    let fail_jobs = JobFilter {
        handler: Some("fail".into()),
        ..JobFilter::default()
    };
    assert_eq!(store.job_count("ls", &fail_jobs, 100).await.unwrap(), 2);
    assert_eq!(
        store
            .job_count("ls", &JobFilter::default(), 1)
            .await
            .unwrap(),
        1
    );
}

fn times<T>(page: &Page<T>, at: impl Fn(&T) -> i64) -> Vec<i64> {
    page.items.iter().map(|i| (at(i) - T0) / 1_000).collect()
}

async fn jobs_and_executions_page_both_ways(store: SqlStore) {
    for i in 0..5 {
        let mut new = job("pg", "n", "noop", T0 + i * 1_000);
        new.created_at = T0 + i * 1_000;
        let j = create(&store, new).await;
        claim(&store, &j, None).await;
    }
    let execs = |cursor: Option<String>| {
        let store = store.clone();
        async move {
            let filter = ExecFilter {
                limit: 2,
                cursor,
                ..ExecFilter::default()
            };
            store.executions_list("pg", &filter).await.unwrap()
        }
    };
    let due = |e: &kairos_core::execution::Execution| e.scheduled_at;
    let p1 = execs(None).await;
    assert_eq!(
        (times(&p1, due), p1.prev_cursor.is_none()),
        (vec![4, 3], true)
    );
    let p2 = execs(p1.next_cursor.clone()).await;
    assert_eq!(times(&p2, due), [2, 1]);
    let p3 = execs(p2.next_cursor.clone()).await;
    assert_eq!((times(&p3, due), p3.next_cursor.is_none()), (vec![0], true));
    // Back from the last page: the same pages, linked the same way.
    let back2 = execs(p3.prev_cursor.clone()).await;
    assert_eq!(times(&back2, due), [2, 1]);
    assert_eq!(back2.next_cursor, p2.next_cursor);
    let back1 = execs(back2.prev_cursor.clone()).await;
    assert_eq!(times(&back1, due), [4, 3]);
    assert!(
        back1.prev_cursor.is_none(),
        "the first page has no previous one"
    );
    // A cursor this store did not make names no page.
    assert!(execs(Some("pnot-a-cursor".into())).await.items.is_empty());

    let jobs = |cursor: Option<String>| {
        let store = store.clone();
        async move {
            let filter = JobFilter {
                limit: 3,
                cursor,
                ..JobFilter::default()
            };
            store.job_list("pg", &filter).await.unwrap()
        }
    };
    let created = |j: &kairos_core::job::Job| j.created_at;
    let j1 = jobs(None).await;
    let j2 = jobs(j1.next_cursor.clone()).await;
    assert_eq!(
        (times(&j1, created), times(&j2, created)),
        (vec![4, 3, 2], vec![1, 0])
    );
    // The page before the last holds fewer than 3 newer jobs than its first:
    // it is the first page, whole.
    let back = jobs(j2.prev_cursor.clone()).await;
    assert_eq!(times(&back, created), [4, 3, 2]);
    assert!(back.prev_cursor.is_none());
}

async fn trigger_timing_counts_missed_and_late(store: SqlStore) {
    // On time: dispatched 10 ms after due, ran 500 ms.
    let on_time = create(&store, job("tt", "a", "noop", T0)).await;
    let w = claim(&store, &on_time, None).await;
    let sent = |id: &str| DispatchedTo {
        execution_id: id.into(),
        attempt: 1,
        worker_id: "w1".into(),
    };
    store
        .executions_mark_dispatched(&[sent(&w.execution_id)], T0 + 10)
        .await
        .unwrap();
    let mut start = result(&w, 1, Started, T0 + 20);
    start.started_at = Some(T0 + 20);
    store.results_apply(&[start], T0 + 20).await.unwrap();
    store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 520)], T0 + 520)
        .await
        .unwrap();
    // Misfired: claimed 6 s after it was due, dispatched then (late too).
    let missed = create(&store, job("tt", "b", "noop", T0 + 1_000)).await;
    let w = claim_due(&store, &missed, T0 + 7_000).await;
    store
        .executions_mark_dispatched(&[sent(&w[0].execution_id)], T0 + 7_000)
        .await
        .unwrap();
    // Still waiting for a worker, due at T0 + 2 s.
    let waiting = create(&store, job("tt", "c", "noop", T0 + 2_000)).await;
    claim(&store, &waiting, None).await;
    // Skipped by the overlap policy while its first execution runs.
    let forbid = tweak(Schedule::every(1_000), |r| {
        r.overlap = OverlapPolicy::Forbid
    });
    let every = create(&store, recurring("tt", forbid, T0 + 3_000)).await;
    assert_eq!(claim_due(&store, &every, T0 + 3_000).await.len(), 1);
    assert!(claim_due(&store, &every, T0 + 4_000).await.is_empty());

    let t = store
        .trigger_timing("tt", T0 - 1, T0 + 2_500)
        .await
        .unwrap();
    assert_eq!(t.misfired, 1);
    assert_eq!(t.skipped, 1);
    assert_eq!(t.missed(), 2);
    assert_eq!(
        t.late, 1,
        "the misfire; the waiting one is not yet 1 s late"
    );
    let t = store
        .trigger_timing("tt", T0 - 1, T0 + 3_500)
        .await
        .unwrap();
    assert_eq!(t.late, 2, "now the waiting one is late too");
    let late: Vec<(i64, i64)> = t.lateness.iter().map(|(at, l)| (at - T0, *l)).collect();
    assert!(late.starts_with(&[(0, 10), (1_000, 6_000)]), "{late:?}");
    assert!(t.durations.contains(&(T0 + 520, 500)), "{:?}", t.durations);
    let other = store
        .trigger_timing("nobody", T0 - 1, T0 + 3_500)
        .await
        .unwrap();
    assert_eq!(
        (other.late, other.missed(), other.lateness.len()),
        (0, 0, 0)
    );
    let later = store
        .trigger_timing("tt", T0 + 10_000, T0 + 20_000)
        .await
        .unwrap();
    assert_eq!((later.late, later.missed()), (0, 0));
}
