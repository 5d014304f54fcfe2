//! Store suite, child jobs (issue 34, part 3): a job's follow-ups are
//! triggered by the transaction that ends its execution — `onSuccess` on
//! success, `onFailure` after the last retry — and never form a cycle; on
//! SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::Job;
use kairos_core::protocol::ResultKind::{Failed, Succeeded};
use kairos_core::retention::{History, RetentionStore};
use kairos_core::store::{Dispatch, JobStore};
use kairos_core::worker::Routable;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::followup::{FollowUpStore, FollowUps, SetFollowUps};
use kairos_store_sql::SqlStore;
use support::{T0, claim, create, cron, executions, one_shot, result};

store_cases!(
    follow_ups_fire_on_their_outcome,
    follow_ups_are_checked_and_never_cycle,
    concurrent_opposite_follow_ups_never_store_a_cycle,
    a_layered_graph_runs_each_job_once_per_trigger,
    a_chain_stops_at_its_budget_with_the_reason_shown,
    a_purged_chain_goes_with_its_executions,
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

/// Issue 44, finding 1: `PUT …/followups` A→B and B→A at once used to both
/// pass their cycle check (each read the graph before the other's edge was
/// committed) and store a cycle. Each round sets both at once; at most one
/// may be stored, and the stored graph has no cycle.
async fn concurrent_opposite_follow_ups_never_store_a_cycle(store: SqlStore) {
    let to = |id: &str| FollowUps {
        on_success: vec![id.to_string()],
        on_failure: Vec::new(),
    };
    for round in 0..20 {
        let a = create(&store, cron("fu3", T0 + 60_000)).await;
        let b = create(&store, cron("fu3", T0 + 60_000)).await;
        let gate = std::sync::Arc::new(tokio::sync::Barrier::new(2));
        let set = |from: String, child: String| {
            let (store, gate, f) = (store.clone(), gate.clone(), to(&child));
            tokio::spawn(async move {
                gate.wait().await;
                store.job_followups_set("fu3", &from, &f, T0).await.unwrap()
            })
        };
        let ab = set(a.id.clone(), b.id.clone());
        let ba = set(b.id.clone(), a.id.clone());
        let (ab, ba) = (ab.await.unwrap(), ba.await.unwrap());
        let done = |s: &SetFollowUps| matches!(s, SetFollowUps::Done(_));
        assert!(
            !(done(&ab) && done(&ba)),
            "round {round}: both stored, a cycle: {ab:?} {ba:?}"
        );
        assert!(
            done(&ab) || done(&ba),
            "round {round}: one of them is stored"
        );
        let stored_a = store
            .job_followups_get("fu3", &a.id)
            .await
            .unwrap()
            .unwrap();
        let stored_b = store
            .job_followups_get("fu3", &b.id)
            .await
            .unwrap()
            .unwrap();
        assert!(
            stored_a.on_success.is_empty() || stored_b.on_success.is_empty(),
            "round {round}: stored a cycle: {stored_a:?} {stored_b:?}"
        );
    }
}

/// 17 jobs in layers 1, 4, 4, 4, 4, each job following every job of the
/// layer before (on success); the layers, root first.
async fn layered(store: &SqlStore, tenant: &str) -> Vec<Vec<Job>> {
    let mut layers = vec![vec![create(store, one_shot(tenant, T0)).await]];
    for _ in 0..4 {
        let mut layer = Vec::new();
        for _ in 0..4 {
            layer.push(create(store, cron(tenant, T0 + 3_600_000)).await);
        }
        let f = FollowUps {
            on_success: layer.iter().map(|j| j.id.clone()).collect(),
            on_failure: Vec::new(),
        };
        for parent in layers.last().unwrap() {
            let set = store.job_followups_set(tenant, &parent.id, &f, T0).await;
            assert!(matches!(set, Ok(SetFollowUps::Done(_))), "{set:?}");
        }
        layers.push(layer);
    }
    layers
}

/// Triggers the root and lets every execution the chain makes succeed,
/// each round's results applied concurrently (one transaction each, as
/// dispatchers side by side would), until nothing is pending.
async fn run_chain(store: &SqlStore, root: &Job) {
    let w = claim(store, root, None).await;
    store
        .results_apply(&[result(&w, 1, Succeeded, T0 + 1)], T0 + 1)
        .await
        .unwrap();
    for round in 2..200 {
        let at = T0 + round;
        let due = store
            .executions_find_unpublished(at, 1_000, &Routable::Any)
            .await
            .unwrap();
        if due.is_empty() {
            return;
        }
        let tasks: Vec<_> = due
            .into_iter()
            .map(|w| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .results_apply(&[result(&w, 1, Succeeded, at)], at)
                        .await
                        .unwrap()
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    }
    panic!("the chain never ended");
}

/// Issue 44, finding 2: follow-ups used to fire per parent end, so each
/// layer multiplied the one before (1 + 4 + 16 + 64 + 256 = 341 executions
/// from one trigger). A chain runs each job once.
async fn a_layered_graph_runs_each_job_once_per_trigger(store: SqlStore) {
    let layers = layered(&store, "fu4").await;
    run_chain(&store, &layers[0][0]).await;
    for (depth, layer) in layers.iter().enumerate() {
        for job in layer {
            let ran = executions(&store, job).await;
            assert_eq!(
                ran.len(),
                1,
                "layer {depth}: job {} ran {}",
                job.id,
                ran.len()
            );
            assert_eq!(ran[0].status, ExecStatus::Succeeded);
        }
    }
    // A second trigger is a second chain: each job once more.
    let root = support::job_now(&store, &layers[0][0]).await;
    let fresh = create(&store, one_shot("fu4", T0 + 500)).await;
    let f = store
        .job_followups_get("fu4", &root.id)
        .await
        .unwrap()
        .unwrap();
    store
        .job_followups_set("fu4", &fresh.id, &f, T0)
        .await
        .unwrap();
    run_chain(&store, &fresh).await;
    for layer in &layers[1..] {
        for job in layer {
            assert_eq!(executions(&store, job).await.len(), 2);
        }
    }
}

/// Issue 44, finding 2: every chain has an execution budget. With a budget
/// of 5 the layered graph runs the root and the first layer; the second
/// layer's jobs each get one `skipped` execution saying why, and nothing
/// after runs.
async fn a_chain_stops_at_its_budget_with_the_reason_shown(store: SqlStore) {
    let store = store.with_run_limits(RunLimits {
        max_executions: 5,
        ..RunLimits::default()
    });
    let layers = layered(&store, "fu5").await;
    run_chain(&store, &layers[0][0]).await;
    for job in &layers[1] {
        let ran = executions(&store, job).await;
        assert_eq!(ran.len(), 1);
        assert_eq!(ran[0].status, ExecStatus::Succeeded);
    }
    for job in &layers[2] {
        let ran = executions(&store, job).await;
        assert_eq!(ran.len(), 1, "refused once, not once per parent");
        assert_eq!(ran[0].status, ExecStatus::Skipped);
        let error = ran[0].error.as_deref().unwrap_or_default();
        assert!(error.contains("budget of 5 executions"), "{error}");
        assert!(
            error.contains(&layers[0][0].id) || error.contains("execution"),
            "{error}"
        );
    }
    for layer in &layers[3..] {
        for job in layer {
            assert!(executions(&store, job).await.is_empty());
        }
    }
}

/// Retention purges a finished chain's executions together with the
/// chain's own rows (membership and budget), on every database; the jobs
/// then run as a fresh chain, each once again.
async fn a_purged_chain_goes_with_its_executions(store: SqlStore) {
    let layers = layered(&store, "fu6").await;
    run_chain(&store, &layers[0][0]).await;
    let purged = store
        .history_purge(History::Executions, Some("fu6"), T0 + 3_600_000, 500)
        .await
        .unwrap();
    assert_eq!(purged, 17, "every execution of the chain is purged");
    for layer in &layers {
        for job in layer {
            assert!(executions(&store, job).await.is_empty());
        }
    }
}
