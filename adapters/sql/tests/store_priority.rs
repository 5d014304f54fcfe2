//! Store suite, priorities and lanes: the backlog's ranked scan (starving
//! first, then by priority, oldest due first), the immediate lane's scan,
//! and priority kept through create, update and dispatch — on every database.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::job::Job;
use kairos_core::priority::{Lane, Priority};
use kairos_core::store::{Dispatch, JobStore, JobUpdate, UpdateOutcome};
use kairos_core::time::Millis;
use kairos_store_sql::SqlStore;
use support::{T0, create, one_shot};

store_cases!(
    a_backlog_is_ranked_by_priority_then_due_time,
    starving_triggers_go_before_every_priority,
    the_immediate_lane_is_its_own_scan,
    priority_survives_create_update_and_claim,
);

/// A one-shot of the main lane (created before it is due) at `priority`.
async fn scheduled(store: &SqlStore, at: Millis, priority: u8) -> Job {
    let mut job = one_shot("acme", at);
    job.priority = Priority::new(priority).unwrap();
    let job = create(store, job).await;
    assert_eq!(job.lane, Lane::Scheduled);
    job
}

/// A one-shot due when it was created: the immediate lane.
async fn immediate(store: &SqlStore, priority: u8) -> Job {
    let mut job = one_shot("acme", T0);
    job.priority = Priority::new(priority).unwrap();
    let job = create(store, job).await;
    assert_eq!(job.lane, Lane::Immediate);
    job
}

fn ids(jobs: &[Job]) -> Vec<&str> {
    jobs.iter().map(|j| j.id.as_str()).collect()
}

async fn a_backlog_is_ranked_by_priority_then_due_time(store: SqlStore) {
    let low_old = scheduled(&store, T0 + 1_000, 0).await;
    let low_new = scheduled(&store, T0 + 1_500, 0).await;
    let mid = scheduled(&store, T0 + 2_000, 5).await;
    let high = scheduled(&store, T0 + 3_000, 9).await;
    let _later = scheduled(&store, T0 + 60_000, 9).await;
    let lane = immediate(&store, 7).await;

    let ranked = store
        .jobs_find_due_ranked(DispatchScope::All { fence: 1 }, T0 + 5_000, T0, 10, &[])
        .await
        .unwrap();
    assert_eq!(
        ids(&ranked),
        [&high.id, &lane.id, &mid.id, &low_old.id, &low_new.id],
        "highest priority first (either lane), oldest due first within one; \
         not yet due left out"
    );

    let two = store
        .jobs_find_due_ranked(DispatchScope::All { fence: 1 }, T0 + 5_000, T0, 2, &[])
        .await
        .unwrap();
    assert_eq!(ids(&two), [&high.id, &lane.id]);

    let except = store
        .jobs_find_due_ranked(
            DispatchScope::All { fence: 1 },
            T0 + 5_000,
            T0,
            10,
            &[high.id.as_str(), low_old.id.as_str(), lane.id.as_str()],
        )
        .await
        .unwrap();
    assert_eq!(ids(&except), [&mid.id, &low_new.id]);
}

async fn starving_triggers_go_before_every_priority(store: SqlStore) {
    let starving = scheduled(&store, T0 + 1_000, 0).await;
    let low = scheduled(&store, T0 + 1_500, 0).await;
    let high = scheduled(&store, T0 + 3_000, 9).await;
    // An immediate-lane job its own loop did not serve in time starves too.
    let forgotten = immediate(&store, 1).await;

    let ranked = store
        .jobs_find_due_ranked(
            DispatchScope::All { fence: 1 },
            T0 + 5_000,
            T0 + 1_200,
            10,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        ids(&ranked),
        [&forgotten.id, &starving.id, &high.id, &low.id],
        "due before the bound: oldest first, whatever the priority; each job once"
    );
}

async fn the_immediate_lane_is_its_own_scan(store: SqlStore) {
    let _scheduled = scheduled(&store, T0 + 1_000, 9).await;
    let low = immediate(&store, 1).await;
    let high = immediate(&store, 8).await;
    let mut later = one_shot("acme", T0 + 10);
    later.created_at = T0 + 10;
    later.priority = Priority::new(1).unwrap();
    let later = create(&store, later).await;
    assert_eq!(later.lane, Lane::Immediate);

    let lane = store
        .jobs_find_due_immediate(DispatchScope::All { fence: 1 }, T0 + 5_000, 10)
        .await
        .unwrap();
    assert_eq!(
        ids(&lane),
        [&high.id, &later.id, &low.id],
        "highest priority first, newest first within one"
    );
    assert!(
        store
            .jobs_find_due_immediate(DispatchScope::All { fence: 1 }, T0 - 1, 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing of the lane is due before its time"
    );

    // Claimed, it leaves the lane's scan.
    let work = support::claim(&store, &high, None).await;
    assert_eq!(work.priority.get(), 8);
    let lane = store
        .jobs_find_due_immediate(DispatchScope::All { fence: 1 }, T0 + 5_000, 10)
        .await
        .unwrap();
    assert_eq!(ids(&lane), [&later.id, &low.id]);
}

async fn priority_survives_create_update_and_claim(store: SqlStore) {
    let job = scheduled(&store, T0 + 1_000, 7).await;
    let read = store.job_get("acme", &job.id).await.unwrap().unwrap();
    assert_eq!(read.priority.get(), 7);
    assert_eq!(read.lane, Lane::Scheduled);

    let u = JobUpdate {
        schedule: read.schedule.clone(),
        reschedule: false,
        params: read.params.clone(),
        sensitive_params: read.sensitive_params.clone(),
        callback_url: read.callback_url.clone(),
        retry: read.retry,
        timeout_ms: read.timeout_ms,
        worker_group: read.worker_group.clone(),
        priority: Priority::new(2).unwrap(),
        max_concurrency: read.max_concurrency,
    };
    let UpdateOutcome::Done(changed) = store
        .job_update("acme", &job.id, read.revision, &u, T0 + 1)
        .await
        .unwrap()
    else {
        panic!("the update applies");
    };
    assert_eq!(changed.priority.get(), 2);
    let ranked = store
        .jobs_find_due_ranked(DispatchScope::All { fence: 1 }, T0 + 5_000, T0, 10, &[])
        .await
        .unwrap();
    assert_eq!(ranked[0].priority.get(), 2);
    let work = support::claim(&store, &ranked[0], None).await;
    assert_eq!(work.priority.get(), 2, "the dispatch carries the priority");
}
