//! Store suite, scheduled workflows (issue 34): a workflow's schedule fires
//! with a job's misfire policy (`fireOnce`, `skip`, `fireAll`), window
//! (`startAt`, `endAt`) and overlap policy (`allow`; `forbid` starts no run
//! while one is running; `replace` cancels the running runs and starts the
//! new one, in the same transaction), and a fixed delay counted from the
//! end of each run — on SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::protocol::ResultKind::Succeeded;
use kairos_core::schedule::{
    CronDialect, MisfirePolicy, OverlapPolicy, Recurrence, Rule, Schedule,
};
use kairos_core::store::{Dispatch, History};
use kairos_core::time::Millis;
use kairos_core::worker::Routable;
use kairos_core::workflow::{
    NewWorkflow, RunStatus, Workflow, WorkflowRun, WorkflowScheduler, WorkflowStore,
    WorkflowUpdate, WorkflowUpdated,
};
use kairos_store_sql::SqlStore;
use serde_json::json;
use support::{T0, id, result};

store_cases!(
    misfired_triggers_follow_the_misfire_policy,
    no_trigger_falls_outside_the_window,
    forbid_starts_no_run_while_one_is_running,
    replace_cancels_the_running_run_and_starts_the_new_one,
    a_fixed_delay_is_counted_from_the_end_of_the_run,
    a_patch_to_a_fixed_delay_waits_for_the_running_run,
    the_cron_dialect_round_trips,
);

const EVERY: u64 = 10_000;

fn every(misfire: MisfirePolicy, overlap: OverlapPolicy) -> Recurrence {
    Recurrence {
        misfire,
        overlap,
        ..Recurrence::new(Rule::Every { every_ms: EVERY })
    }
}

/// A one-node workflow of `tenant` on `rec`, created at `T0`, its first
/// trigger as the API computes it; its id.
async fn scheduled(store: &SqlStore, tenant: &str, rec: Recurrence) -> String {
    let schedule = Schedule::Recurring(rec);
    let first = schedule.first_trigger(T0).unwrap();
    let def: Workflow =
        serde_json::from_value(json!({"nodes": [{"id": "a", "handler": "h"}]})).unwrap();
    let wf = NewWorkflow {
        id: id(),
        tenant: tenant.into(),
        name: "wf".into(),
        definition: def,
        client_request_id: None,
        request_hash: None,
        run_now: None,
        schedule: Some(schedule),
        next_trigger_at: Some(first),
        callback_url: None,
        created_at: T0,
    };
    store.workflow_create(wf.clone()).await.unwrap();
    wf.id
}

async fn fire(store: &SqlStore, now: Millis) -> Vec<WorkflowRun> {
    store.workflows_fire_due(now, 10).await.unwrap()
}

fn times_of(runs: &[WorkflowRun], wf: &str) -> Vec<Millis> {
    let mut t: Vec<Millis> = runs
        .iter()
        .filter(|r| r.workflow_id == wf)
        .map(|r| r.scheduled_at - T0)
        .collect();
    t.sort_unstable();
    t
}

async fn next_of(store: &SqlStore, tenant: &str, wf: &str) -> Option<Millis> {
    let wf = store.workflow_get(tenant, wf).await.unwrap().unwrap();
    wf.next_trigger_at.map(|t| t - T0)
}

async fn status_of(store: &SqlStore, run: &WorkflowRun) -> RunStatus {
    store
        .workflow_run_get(&run.tenant, &run.workflow_id, &run.id)
        .await
        .unwrap()
        .expect("run")
        .run
        .status
}

async fn misfired_triggers_follow_the_misfire_policy(store: SqlStore) {
    use MisfirePolicy::*;
    let once = scheduled(&store, "ws1", every(FireOnce, OverlapPolicy::Allow)).await;
    let skip = scheduled(&store, "ws1", every(Skip, OverlapPolicy::Allow)).await;
    let all = scheduled(&store, "ws1", every(FireAll, OverlapPolicy::Allow)).await;
    // Triggers at +0 s (creation), +10 s, +20 s and +30 s missed: +35 s
    // is past the misfire threshold for each.
    let runs = fire(&store, T0 + 35_000).await;
    assert_eq!(times_of(&runs, &once), [0], "fireOnce: one late run");
    assert_eq!(times_of(&runs, &skip), Vec::<Millis>::new(), "skip: none");
    assert_eq!(
        times_of(&runs, &all),
        [0, 10_000, 20_000, 30_000],
        "fireAll: one per missed trigger"
    );
    for wf in [&once, &skip, &all] {
        assert_eq!(next_of(&store, "ws1", wf).await, Some(40_000));
    }
    // A trigger only late (within the threshold) fires under every policy.
    let runs = fire(&store, T0 + 41_000).await;
    for wf in [&once, &skip, &all] {
        assert_eq!(times_of(&runs, wf), [40_000]);
    }
}

async fn no_trigger_falls_outside_the_window(store: SqlStore) {
    let rec = Recurrence {
        start_at: Some(T0 + 25_000),
        end_at: Some(T0 + 44_999),
        ..every(MisfirePolicy::FireOnce, OverlapPolicy::Allow)
    };
    let wf = scheduled(&store, "ws2", rec).await;
    assert_eq!(
        next_of(&store, "ws2", &wf).await,
        Some(25_000),
        "from startAt"
    );
    assert!(fire(&store, T0 + 24_999).await.is_empty());
    assert_eq!(times_of(&fire(&store, T0 + 25_000).await, &wf), [25_000]);
    assert_eq!(next_of(&store, "ws2", &wf).await, Some(35_000));
    assert_eq!(times_of(&fire(&store, T0 + 35_000).await, &wf), [35_000]);
    assert_eq!(
        next_of(&store, "ws2", &wf).await,
        None,
        "+45 s is after endAt"
    );
    assert!(fire(&store, T0 + 100_000).await.is_empty());
    let shown = store.workflow_get("ws2", &wf).await.unwrap().unwrap();
    assert_eq!(shown.status.as_str(), "active", "manual triggers still run");
}

async fn forbid_starts_no_run_while_one_is_running(store: SqlStore) {
    let wf = scheduled(
        &store,
        "ws3",
        every(MisfirePolicy::FireOnce, OverlapPolicy::Forbid),
    )
    .await;
    let allow = scheduled(
        &store,
        "ws3",
        every(MisfirePolicy::FireOnce, OverlapPolicy::Allow),
    )
    .await;
    let first = fire(&store, T0).await;
    assert_eq!(times_of(&first, &wf), [0]);
    let run = first.iter().find(|r| r.workflow_id == wf).unwrap().clone();
    // Still running at +10 s: no run, on to the following trigger.
    let second = fire(&store, T0 + 10_000).await;
    assert_eq!(times_of(&second, &wf), Vec::<Millis>::new());
    assert_eq!(times_of(&second, &allow), [10_000], "allow runs beside");
    assert_eq!(next_of(&store, "ws3", &wf).await, Some(20_000));
    assert_eq!(
        status_of(&store, &run).await,
        RunStatus::Running,
        "untouched"
    );
    // Once it ended, the next trigger starts a run.
    store
        .workflow_run_cancel("ws3", &wf, &run.id, T0 + 15_000)
        .await
        .unwrap();
    assert_eq!(times_of(&fire(&store, T0 + 20_000).await, &wf), [20_000]);
    // fireAll catch-up under forbid: the first missed trigger runs, the
    // rest are skipped while it runs.
    let rec = every(MisfirePolicy::FireAll, OverlapPolicy::Forbid);
    let caught = scheduled(&store, "ws3b", rec).await;
    let runs = fire(&store, T0 + 35_000).await;
    assert_eq!(times_of(&runs, &caught), [0]);
    assert_eq!(next_of(&store, "ws3b", &caught).await, Some(40_000));
}

async fn replace_cancels_the_running_run_and_starts_the_new_one(store: SqlStore) {
    let wf = scheduled(
        &store,
        "ws4",
        every(MisfirePolicy::FireOnce, OverlapPolicy::Replace),
    )
    .await;
    let first = fire(&store, T0).await;
    let old = first.iter().find(|r| r.workflow_id == wf).unwrap().clone();
    let old_exec = store
        .workflow_run_get("ws4", &wf, &old.id)
        .await
        .unwrap()
        .unwrap()
        .nodes[0]
        .execution_id
        .clone()
        .expect("root due");
    let second = fire(&store, T0 + 10_000).await;
    assert_eq!(times_of(&second, &wf), [10_000]);
    assert_eq!(status_of(&store, &old).await, RunStatus::Cancelled);
    let e = store
        .execution_get("ws4", &old_exec)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.status, ExecStatus::Cancelled, "its pending node stopped");
    let new = second.iter().find(|r| r.workflow_id == wf).unwrap();
    assert_eq!(status_of(&store, new).await, RunStatus::Running);
    assert_eq!(next_of(&store, "ws4", &wf).await, Some(20_000));
}

async fn a_fixed_delay_is_counted_from_the_end_of_the_run(store: SqlStore) {
    let rec = Recurrence {
        end_at: Some(T0 + 30_000),
        ..Recurrence::new(Rule::Delay { delay_ms: 5_000 })
    };
    let wf = scheduled(&store, "ws5", rec).await;
    assert_eq!(next_of(&store, "ws5", &wf).await, Some(0), "first: now");
    let first = fire(&store, T0).await;
    assert_eq!(times_of(&first, &wf), [0]);
    assert_eq!(
        next_of(&store, "ws5", &wf).await,
        None,
        "written at its end"
    );
    assert!(fire(&store, T0 + 20_000).await.is_empty());
    // The run's last node succeeds at +7 s: the next trigger is +12 s, in
    // the transaction that ends the run.
    let work = store
        .executions_find_unpublished(T0 + 7_000, 100, &Routable::Any)
        .await
        .unwrap();
    let mut done = result(&work[0], 1, Succeeded, T0 + 7_000);
    done.output = Some(json!(null));
    store.results_apply(&[done], T0 + 7_000).await.unwrap();
    assert_eq!(status_of(&store, &first[0]).await, RunStatus::Succeeded);
    assert_eq!(next_of(&store, "ws5", &wf).await, Some(12_000));
    let second = fire(&store, T0 + 12_000).await;
    assert_eq!(times_of(&second, &wf), [12_000]);
    // A cancelled run counts too; past endAt none is left.
    store
        .workflow_run_cancel("ws5", &wf, &second[0].id, T0 + 20_000)
        .await
        .unwrap();
    assert_eq!(next_of(&store, "ws5", &wf).await, Some(25_000));
    let third = fire(&store, T0 + 25_000).await;
    store
        .workflow_run_cancel("ws5", &wf, &third[0].id, T0 + 26_000)
        .await
        .unwrap();
    assert_eq!(
        next_of(&store, "ws5", &wf).await,
        None,
        "+31 s is after endAt"
    );
}

async fn a_patch_to_a_fixed_delay_waits_for_the_running_run(store: SqlStore) {
    let wf = scheduled(
        &store,
        "ws6",
        every(MisfirePolicy::FireOnce, OverlapPolicy::Allow),
    )
    .await;
    let run = fire(&store, T0).await[0].clone();
    let delay = Schedule::delay(5_000);
    let patch = |version| {
        let first = delay.first_trigger(T0 + 1_000).unwrap();
        let update = WorkflowUpdate {
            schedule: Some(Some((delay.clone(), Some(first)))),
            ..WorkflowUpdate::default()
        };
        let store = store.clone();
        let wf = wf.clone();
        async move {
            store
                .workflow_update("ws6", &wf, version, &update, T0 + 1_000)
                .await
                .unwrap()
        }
    };
    assert!(matches!(patch(1).await, WorkflowUpdated::Done(_)));
    assert_eq!(next_of(&store, "ws6", &wf).await, None, "a run is running");
    store
        .workflow_run_cancel("ws6", &wf, &run.id, T0 + 2_000)
        .await
        .unwrap();
    assert_eq!(
        next_of(&store, "ws6", &wf).await,
        Some(7_000),
        "its end wrote it"
    );
    // With no run running, the new rule's first trigger stands.
    assert!(matches!(patch(2).await, WorkflowUpdated::Done(_)));
    assert_eq!(next_of(&store, "ws6", &wf).await, Some(1_000));
}

async fn the_cron_dialect_round_trips(store: SqlStore) {
    let cron = |dialect| {
        Recurrence::new(Rule::Cron {
            expr: "0 0 2 ? * 2".into(),
            tz: "UTC".into(),
            dialect,
        })
    };
    let wf = scheduled(&store, "ws7", cron(CronDialect::Quartz)).await;
    let schedule_of = |store: SqlStore, wf: String| async move {
        store
            .workflow_get("ws7", &wf)
            .await
            .unwrap()
            .unwrap()
            .schedule
    };
    assert_eq!(
        schedule_of(store.clone(), wf.clone()).await,
        Some(Schedule::Recurring(cron(CronDialect::Quartz)))
    );
    for (version, dialect) in [(1, CronDialect::Standard), (2, CronDialect::Quartz)] {
        let s = Schedule::Recurring(cron(dialect));
        let update = WorkflowUpdate {
            schedule: Some(Some((s.clone(), Some(s.first_trigger(T0).unwrap())))),
            ..WorkflowUpdate::default()
        };
        let out = store
            .workflow_update("ws7", &wf, version, &update, T0 + 1)
            .await
            .unwrap();
        assert!(matches!(out, WorkflowUpdated::Done(_)), "{out:?}");
        assert_eq!(schedule_of(store.clone(), wf.clone()).await, Some(s));
    }
}
