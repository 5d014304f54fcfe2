//! Store suite, the dashboard's reads: jobs filtered by handler and name,
//! executions across jobs by state with keyset paging, and a tenant's
//! overview figures — each scoped to its tenant — on SQLite and on MySQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, JobStatus, NewJob};
use kairos_core::overview::{ExecFilter, MinuteCounts};
use kairos_core::protocol::ResultKind::{Failed, Succeeded};
use kairos_core::store::{Dispatch, DispatchedTo, History, JobFilter, JobStore};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, one_shot, result};

store_cases!(
    jobs_filter_by_handler_and_name,
    executions_across_jobs_and_overview
);

fn named(tenant: &str, name: &str, handler: &str) -> NewJob {
    NewJob {
        name: name.into(),
        handler: handler.into(),
        ..one_shot(tenant, T0)
    }
}

async fn names(store: &SqlStore, tenant: &str, filter: JobFilter) -> Vec<String> {
    let mut out: Vec<String> = store
        .job_list(tenant, &filter)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|j| j.name)
        .collect();
    out.sort();
    out
}

async fn jobs_filter_by_handler_and_name(store: SqlStore) {
    for (name, handler) in [
        ("Alpha report", "noop"),
        ("beta_report", "noop"),
        ("betaXreport", "noop"),
        ("gamma", "sleep"),
    ] {
        create(&store, named("ov", name, handler)).await;
    }
    create(&store, named("other", "alpha report", "sleep")).await;

    let by_handler = JobFilter {
        handler: Some("sleep".into()),
        ..JobFilter::default()
    };
    assert_eq!(names(&store, "ov", by_handler).await, ["gamma"]);
    let by_name = JobFilter {
        name_contains: Some("REPORT".into()),
        ..JobFilter::default()
    };
    assert_eq!(
        names(&store, "ov", by_name).await,
        ["Alpha report", "betaXreport", "beta_report"],
        "case-insensitive, this tenant only"
    );
    // `_` and `%` match themselves, not any character.
    let literal = JobFilter {
        name_contains: Some("a_r".into()),
        ..JobFilter::default()
    };
    assert_eq!(names(&store, "ov", literal).await, ["beta_report"]);
    let none = JobFilter {
        name_contains: Some("%".into()),
        ..JobFilter::default()
    };
    assert!(names(&store, "ov", none).await.is_empty());
    let both = JobFilter {
        handler: Some("noop".into()),
        name_contains: Some("alpha".into()),
        status: Some(JobStatus::Scheduled),
        ..JobFilter::default()
    };
    assert_eq!(names(&store, "ov", both).await, ["Alpha report"]);
}

/// Claims, dispatches `late` ms after its due time and finishes `job`.
async fn run(store: &SqlStore, job: &Job, late: i64, ok: bool, at: i64) -> String {
    let w = claim(store, job, None).await;
    let sent = DispatchedTo {
        execution_id: w.execution_id.clone(),
        attempt: 1,
        worker_id: "w1".into(),
    };
    store
        .executions_mark_dispatched(&[sent], T0 + late)
        .await
        .unwrap();
    let kind = if ok { Succeeded } else { Failed };
    store
        .results_apply(&[result(&w, 1, kind, at)], at)
        .await
        .unwrap();
    w.execution_id
}

async fn executions_across_jobs_and_overview(store: SqlStore) {
    let a = create(&store, named("ov", "a", "noop")).await;
    let b = create(&store, named("ov", "b", "noop")).await;
    let c = create(&store, named("ov", "c", "noop")).await;
    let rival = create(&store, named("other", "r", "noop")).await;
    let ok = run(&store, &a, 10, true, T0 + 1_000).await;
    let bad = run(&store, &b, 30, false, T0 + 61_000).await;
    claim(&store, &c, None).await; // pending, never dispatched
    run(&store, &rival, 5, false, T0 + 1_000).await;

    let failed = ExecFilter {
        statuses: vec![ExecStatus::Failed, ExecStatus::TimedOut, ExecStatus::Lost],
        ..ExecFilter::default()
    };
    let page = store.executions_list("ov", &failed).await.unwrap();
    assert_eq!(
        page.items.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        [bad.as_str()],
        "this tenant's failures only"
    );
    // Every state, one per page: all three of the tenant, then the end.
    let mut filter = ExecFilter {
        limit: 1,
        ..ExecFilter::default()
    };
    let mut seen = Vec::new();
    loop {
        let page = store.executions_list("ov", &filter).await.unwrap();
        seen.extend(page.items.into_iter().map(|e| e.job_id));
        match page.next_cursor {
            Some(c) => filter.cursor = Some(c),
            None => break,
        }
        assert!(seen.len() <= 3, "paging must end");
    }
    seen.sort();
    let mut expected = vec![a.id.clone(), b.id.clone(), c.id.clone()];
    expected.sort();
    assert_eq!(seen, expected);
    assert!(!ok.is_empty());

    let o = store.tenant_overview("ov", T0 - 3_600_000).await.unwrap();
    assert_eq!(
        o.jobs,
        [
            (JobStatus::Running, 1),
            (JobStatus::Succeeded, 1),
            (JobStatus::Failed, 1)
        ]
    );
    assert_eq!(
        o.executions,
        [
            (ExecStatus::Pending, 1),
            (ExecStatus::Succeeded, 1),
            (ExecStatus::Failed, 1)
        ]
    );
    assert_eq!(
        o.per_minute,
        [
            MinuteCounts {
                minute: T0,
                succeeded: 1,
                failed: 0
            },
            MinuteCounts {
                minute: T0 + 60_000,
                succeeded: 0,
                failed: 1
            }
        ]
    );
    assert_eq!(o.lateness_ms, [10, 30], "dispatched − due, ascending");
    assert_eq!((o.callbacks_retrying, o.callbacks_dead), (0, 0));
    let later = store.tenant_overview("ov", T0 + 3_600_000).await.unwrap();
    assert!(later.executions.is_empty() && later.per_minute.is_empty());
    assert_eq!(later.jobs.len(), 3, "jobs are counted whatever their age");
}
