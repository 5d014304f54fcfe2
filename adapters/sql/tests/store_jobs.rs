//! Store suite, jobs: idempotent create, tenant isolation, listing, the due
//! scan and the caller's control operations — on SQLite and on MySQL.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, JobStatus};
use kairos_core::store::{
    CallbackStore, ControlOutcome, CreateOutcome, Dispatch, History, JobFilter, JobStore,
};
use kairos_core::time::Millis;
use kairos_store_sql::SqlStore;
use std::collections::HashSet;
use support::{T0, claim, create, id, job_now, one_shot};

/// What a due scan at `at` finds (up to 10 jobs, none left out).
async fn due_at(store: &SqlStore, at: Millis) -> Vec<Job> {
    store
        .jobs_find_due(DispatchScope::All { fence: 1 }, at, 10, &[])
        .await
        .unwrap()
}

store_cases!(
    create_and_idempotent_replay,
    tenant_isolation,
    listing_pages_newest_first,
    find_due_returns_only_due_claimable_jobs,
    pause_resume_cancel,
    trigger_now_adds_executions_and_cancel_cancels_them,
);

async fn create_and_idempotent_replay(store: SqlStore) {
    let mut first = one_shot("acme", T0);
    first.client_request_id = Some("req-1".into());
    first.request_hash = Some("h1".into());
    first.callback_url = Some("http://example.test/cb".into());
    first.timeout_ms = Some(5_000);
    let created = support::create(&store, first.clone()).await;
    assert_eq!(created.status, JobStatus::Scheduled);
    assert_eq!(
        store.job_get("acme", &created.id).await.unwrap(),
        Some(created.clone())
    );

    let replay = kairos_core::job::NewJob {
        trace: None,
        id: id(),
        request_hash: Some("h2".into()),
        ..first
    };
    match store.job_create(replay).await.unwrap() {
        CreateOutcome::Existing(j) => {
            assert_eq!(j.id, created.id);
            assert_eq!(j.request_hash.as_deref(), Some("h1"));
        }
        other => panic!("expected Existing, got {other:?}"),
    }
    // Without a key every create is a new job.
    let a = create(&store, one_shot("acme", T0)).await;
    let b = create(&store, one_shot("acme", T0)).await;
    assert_ne!(a.id, b.id);
}

async fn tenant_isolation(store: SqlStore) {
    let mut mine = one_shot("t-a", T0);
    mine.client_request_id = Some("same-key".into());
    let mut theirs = one_shot("t-b", T0);
    theirs.client_request_id = Some("same-key".into());
    let mine = create(&store, mine).await;
    let theirs = create(&store, theirs).await;
    assert_ne!(mine.id, theirs.id, "keys are unique per tenant only");

    assert_eq!(store.job_get("t-b", &mine.id).await.unwrap(), None);
    let listed = store.job_list("t-b", &JobFilter::default()).await.unwrap();
    assert_eq!(
        listed.items.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [&theirs.id]
    );
    assert_eq!(
        store.job_pause("t-b", &mine.id, None, T0).await.unwrap(),
        ControlOutcome::NotFound
    );
    assert_eq!(
        store.job_cancel("t-b", &mine.id, T0).await.unwrap(),
        ControlOutcome::NotFound
    );
    assert_eq!(
        store
            .job_trigger_now("t-b", &mine.id, &id(), T0)
            .await
            .unwrap(),
        ControlOutcome::NotFound
    );

    let work = claim(&store, &mine, None).await;
    assert!(
        store
            .execution_get("t-b", &work.execution_id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .execution_get("t-a", &work.execution_id)
            .await
            .unwrap()
            .is_some()
    );
    let page = store
        .executions_list_for_job("t-b", &mine.id, 10, None)
        .await
        .unwrap();
    assert!(page.items.is_empty());
    assert!(
        store
            .execution_events("t-b", &work.execution_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .callbacks_for_execution("t-b", &work.execution_id)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn listing_pages_newest_first(store: SqlStore) {
    let mut ids = Vec::new();
    for i in 0..7 {
        let mut j = one_shot("lister", T0);
        // Two jobs share a creation time: the id breaks the tie.
        j.created_at = T0 + [0, 1, 2, 2, 3, 4, 5][i];
        ids.push((j.created_at, create(&store, j).await.id));
    }
    create(&store, one_shot("other", T0)).await;
    ids.sort_by(|a, b| b.cmp(a));
    let expected: Vec<String> = ids.into_iter().map(|(_, id)| id).collect();

    let mut seen = Vec::new();
    let mut filter = JobFilter {
        limit: 3,
        ..JobFilter::default()
    };
    for page_no in 0.. {
        let page = store.job_list("lister", &filter).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|j| j.id));
        match page.next_cursor {
            Some(c) => filter.cursor = Some(c),
            None => break,
        }
        assert!(page_no < 5, "paging must end");
    }
    assert_eq!(seen, expected);

    let first = &expected[0];
    store.job_pause("lister", first, None, T0).await.unwrap();
    let paused = JobFilter {
        status: Some(JobStatus::Paused),
        ..JobFilter::default()
    };
    let page = store.job_list("lister", &paused).await.unwrap();
    assert_eq!(
        page.items.iter().map(|j| &j.id).collect::<Vec<_>>(),
        [first]
    );
    assert_eq!(page.next_cursor, None);

    let garbage = JobFilter {
        cursor: Some("not-a-cursor".into()),
        ..JobFilter::default()
    };
    assert!(
        store
            .job_list("lister", &garbage)
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

async fn find_due_returns_only_due_claimable_jobs(store: SqlStore) {
    let late = create(&store, one_shot("d", T0 - 50)).await;
    let due = create(&store, one_shot("d", T0)).await;
    let future = create(&store, one_shot("d", T0 + 1)).await;
    let paused = create(&store, one_shot("d", T0 - 10)).await;
    let cancelled = create(&store, one_shot("d", T0 - 10)).await;
    store.job_pause("d", &paused.id, None, T0).await.unwrap();
    store.job_cancel("d", &cancelled.id, T0).await.unwrap();
    // A running cron job whose next trigger is due is claimable again.
    let running = create(&store, support::cron("d", T0 - 100)).await;
    claim(&store, &running, Some(T0 - 20)).await;

    let found = store
        .jobs_find_due(DispatchScope::All { fence: 1 }, T0, 100, &[])
        .await
        .unwrap();
    let ids: Vec<&str> = found.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(
        ids,
        [late.id.as_str(), running.id.as_str(), due.id.as_str()]
    );
    assert!(!ids.contains(&future.id.as_str()));
    assert_eq!(
        store
            .jobs_find_due(DispatchScope::All { fence: 1 }, T0, 2, &[])
            .await
            .unwrap()
            .len(),
        2
    );
    // The jobs a claim in flight holds are left out, and the limit counts
    // only the others.
    let rest = store
        .jobs_find_due(
            DispatchScope::All { fence: 1 },
            T0,
            1,
            &[late.id.as_str(), due.id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [running.id.as_str()]
    );
    assert!(due_at(&store, T0 - 1_000).await.is_empty());
}

async fn pause_resume_cancel(store: SqlStore) {
    let job = create(&store, one_shot("c", T0)).await;
    let ControlOutcome::Done(p) = store
        .job_pause("c", &job.id, Some("deploy in progress"), T0 + 1)
        .await
        .unwrap()
    else {
        panic!("pause must apply");
    };
    assert_eq!(p.status, JobStatus::Paused);
    assert_eq!(p.pause_reason.as_deref(), Some("deploy in progress"));
    assert!(p.version > job.version);
    assert!(matches!(
        store.job_pause("c", &job.id, None, T0).await.unwrap(),
        ControlOutcome::Conflict(_)
    ));
    assert!(due_at(&store, T0 + 10).await.is_empty());

    let ControlOutcome::Done(r) = store.job_resume("c", &job.id, T0 + 2).await.unwrap() else {
        panic!("resume must apply");
    };
    assert_eq!(r.status, JobStatus::Scheduled);
    assert_eq!(r.pause_reason, None, "resume clears the reason");
    assert_eq!(r.next_trigger_at, Some(T0), "the missed trigger fires once");
    assert_eq!(due_at(&store, T0 + 10).await.len(), 1);
    assert!(matches!(
        store.job_resume("c", &job.id, T0).await.unwrap(),
        ControlOutcome::Conflict(_)
    ));

    let ControlOutcome::Done(c) = store.job_cancel("c", &job.id, T0 + 3).await.unwrap() else {
        panic!("cancel must apply");
    };
    assert_eq!(c.status, JobStatus::Cancelled);
    assert_eq!(c.next_trigger_at, None);
    for outcome in [
        store.job_cancel("c", &job.id, T0).await.unwrap(),
        store.job_resume("c", &job.id, T0).await.unwrap(),
        store.job_pause("c", &job.id, None, T0).await.unwrap(),
        store
            .job_trigger_now("c", &job.id, &id(), T0)
            .await
            .unwrap(),
    ] {
        assert!(
            matches!(outcome, ControlOutcome::Conflict(ref j) if j.status == JobStatus::Cancelled)
        );
    }
    assert_eq!(
        store.job_pause("c", "no-such-job", None, T0).await.unwrap(),
        ControlOutcome::NotFound
    );
    assert!(due_at(&store, T0 + 10).await.is_empty());
}

async fn trigger_now_adds_executions_and_cancel_cancels_them(store: SqlStore) {
    let mut new = one_shot("m", T0 + 60_000);
    new.callback_url = Some("http://example.test/cb".into());
    let job = create(&store, new).await;
    let (e1, e2) = (id(), id());
    let ControlOutcome::Done(j) = store.job_trigger_now("m", &job.id, &e1, T0).await.unwrap()
    else {
        panic!("trigger must apply");
    };
    assert_eq!(
        j.status,
        JobStatus::Scheduled,
        "a manual trigger leaves the schedule alone"
    );
    store.job_trigger_now("m", &job.id, &e2, T0).await.unwrap();
    let x1 = store.execution_get("m", &e1).await.unwrap().unwrap();
    let x2 = store.execution_get("m", &e2).await.unwrap().unwrap();
    assert_eq!(
        (x1.status, x1.attempt, x1.scheduled_at),
        (ExecStatus::Pending, 1, T0)
    );
    assert_eq!(
        x2.scheduled_at,
        T0 + 1,
        "same instant: the next free millisecond"
    );
    let unpublished = store
        .executions_find_unpublished(T0 + 1, 10, &kairos_core::worker::Routable::Any)
        .await
        .unwrap();
    assert_eq!(unpublished.len(), 2);
    assert_eq!(unpublished[0].handler, "noop");
    assert_eq!(unpublished[0].params, job.params);

    store.job_pause("m", &job.id, None, T0).await.unwrap();
    assert!(matches!(
        store
            .job_trigger_now("m", &job.id, &id(), T0)
            .await
            .unwrap(),
        ControlOutcome::Conflict(_)
    ));
    store.job_cancel("m", &job.id, T0 + 5).await.unwrap();
    for e in [&e1, &e2] {
        let x = store.execution_get("m", e).await.unwrap().unwrap();
        assert_eq!(x.status, ExecStatus::Cancelled);
        assert_eq!(x.finished_at, Some(T0 + 5));
        let events = store.execution_events("m", e).await.unwrap();
        let states: Vec<ExecStatus> = events.iter().map(|ev| ev.status).collect();
        assert_eq!(states, [ExecStatus::Pending, ExecStatus::Cancelled]);
        let cbs = store.callbacks_for_execution("m", e).await.unwrap();
        assert_eq!(
            cbs.len(),
            1,
            "a terminal execution of a job with a URL owes a callback"
        );
        let body: serde_json::Value = serde_json::from_str(&cbs[0].0.payload).unwrap();
        assert_eq!(body["status"], "cancelled");
    }
    assert!(
        store
            .executions_find_unpublished(T0 + 10, 10, &kairos_core::worker::Routable::Any)
            .await
            .unwrap()
            .is_empty()
    );
    let ids: HashSet<String> = store
        .executions_list_for_job("m", &job.id, 10, None)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, HashSet::from([e1, e2]));
    assert_eq!(job_now(&store, &job).await.status, JobStatus::Cancelled);
}
