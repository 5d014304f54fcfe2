//! Store suite, child jobs (issue 34, part 3): a job's follow-ups are
//! triggered by the transaction that ends its execution — `onSuccess` on
//! success, `onFailure` after the last retry — and never form a cycle; on
//! SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::protocol::ResultKind::{Failed, Succeeded};
use kairos_core::store::{Dispatch, JobStore};
use kairos_core::workflow::followup::{FollowUpStore, FollowUps, SetFollowUps};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, cron, executions, one_shot, result};

store_cases!(
    follow_ups_fire_on_their_outcome,
    follow_ups_are_checked_and_never_cycle,
);

async fn follow_ups_fire_on_their_outcome(store: SqlStore) {
    let parent = create(&store, one_shot("fu1", T0)).await;
    let parent2 = create(&store, one_shot("fu1", T0)).await;
    let ok = create(&store, cron("fu1", T0 + 60_000)).await;
    let bad = create(&store, cron("fu1", T0 + 60_000)).await;
    let f = FollowUps {
        on_success: vec![ok.id.clone()],
        on_failure: vec![bad.id.clone()],
    };
    for p in [&parent, &parent2] {
        let set = store.job_followups_set("fu1", &p.id, &f, T0).await.unwrap();
        assert_eq!(set, SetFollowUps::Done(f.clone()));
    }
    let w = claim(&store, &parent, None).await;
    let applied = store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 5)], T0 + 5)
        .await
        .unwrap();
    assert!(applied[0].next_work, "the dispatcher is told to sweep");
    let ran = executions(&store, &ok).await;
    assert_eq!(ran.len(), 1, "onSuccess child triggered");
    assert_eq!(ran[0].scheduled_at, T0 + 5);
    assert!(executions(&store, &bad).await.is_empty());

    let w2 = claim(&store, &parent2, None).await;
    store
        .results_apply(&[result(&w2, 1, Failed, T0 + 6)], T0 + 6)
        .await
        .unwrap();
    assert_eq!(
        executions(&store, &bad).await.len(),
        1,
        "onFailure child triggered"
    );
    assert_eq!(executions(&store, &ok).await.len(), 1);
    // A replayed result triggers nothing again.
    let replayed = store
        .results_apply(&[result(&w2, 1, Failed, T0 + 6)], T0 + 7)
        .await
        .unwrap();
    assert!(!replayed[0].next_work, "a replay asks for no sweep");
    assert_eq!(executions(&store, &bad).await.len(), 1);
    assert_eq!(
        store.job_followups_get("fu1", &parent.id).await.unwrap(),
        Some(f)
    );
    assert_eq!(
        store.job_followups_get("other", &parent.id).await.unwrap(),
        None
    );
    let jobs = store.job_get("fu1", &ok.id).await.unwrap().unwrap();
    assert_eq!(jobs.status, kairos_core::job::JobStatus::Scheduled);
}

async fn follow_ups_are_checked_and_never_cycle(store: SqlStore) {
    let a = create(&store, cron("fu2", T0 + 60_000)).await;
    let b = create(&store, cron("fu2", T0 + 60_000)).await;
    let c = create(&store, cron("fu2", T0 + 60_000)).await;
    let to = |ids: &[&str]| FollowUps {
        on_success: ids.iter().map(|s| s.to_string()).collect(),
        on_failure: Vec::new(),
    };
    assert!(matches!(
        store
            .job_followups_set("fu2", &a.id, &to(&[&b.id]), T0)
            .await
            .unwrap(),
        SetFollowUps::Done(_)
    ));
    assert!(matches!(
        store
            .job_followups_set("fu2", &b.id, &to(&[&c.id]), T0)
            .await
            .unwrap(),
        SetFollowUps::Done(_)
    ));
    assert_eq!(
        store
            .job_followups_set("fu2", &c.id, &to(&[&a.id]), T0)
            .await
            .unwrap(),
        SetFollowUps::Cycle(c.id.clone())
    );
    assert_eq!(
        store
            .job_followups_set("fu2", &c.id, &to(&[&c.id]), T0)
            .await
            .unwrap(),
        SetFollowUps::Cycle(c.id.clone())
    );
    assert_eq!(
        store
            .job_followups_set("fu2", &c.id, &to(&["nope"]), T0)
            .await
            .unwrap(),
        SetFollowUps::UnknownChild("nope".into())
    );
    assert_eq!(
        store
            .job_followups_set("other", &c.id, &to(&[]), T0)
            .await
            .unwrap(),
        SetFollowUps::NotFound
    );
    // Cleared: a job without follow-ups.
    assert_eq!(
        store
            .job_followups_set("fu2", &a.id, &to(&[]), T0)
            .await
            .unwrap(),
        SetFollowUps::Done(FollowUps::default())
    );
}
