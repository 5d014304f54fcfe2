//! Store suite, broadcast and sharded jobs: a trigger makes one execution
//! per shard, each exactly once; the job moves, records its last result and
//! gets its one callback only when the trigger's last shard ends, with the
//! aggregate outcome — on SQLite, MySQL and PostgreSQL.

#[macro_use]
mod store_support;
use kairos_core::store::DispatchScope;
use store_support as support;

use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, JobStatus, RetryPolicy};
use kairos_core::protocol::ResultKind::{Failed, Succeeded};
use kairos_core::protocol::{HeartbeatMsg, PROTOCOL_VERSION};
use kairos_core::shard::{ExecutionMode, Shard, fan_out};
use kairos_core::store::{
    CallbackStore, ControlOutcome, Dispatch, DispatchWork, JobStore, WorkerStore,
};
use kairos_core::time::Millis;
use kairos_core::worker::WorkerState;
use kairos_store_sql::SqlStore;
use support::{T0, create, executions, job_now, one_shot, result};

store_cases!(
    a_sharded_trigger_makes_each_shard_once,
    a_broadcast_trigger_sends_a_shard_to_each_worker,
    the_job_ends_and_calls_back_only_with_its_last_shard,
    one_shard_failing_after_its_retries_fails_the_trigger,
    a_recurring_job_waits_for_its_trigger_last_shard,
    the_last_two_shards_ending_at_once_end_the_trigger_once,
    a_manual_trigger_fans_out_too,
);

const URL: &str = "http://example.test/cb";

/// A one-shot job of `tenant` in `mode`, with a callback URL.
async fn fanned(store: &SqlStore, tenant: &str, mode: ExecutionMode) -> Job {
    let mut new = one_shot(tenant, T0);
    new.execution_mode = mode;
    new.callback_url = Some(URL.into());
    create(store, new).await
}

/// Claims the job's due trigger as the dispatcher does, `workers` being the
/// eligible workers a broadcast goes to; the work, by shard index.
async fn claim_shards(store: &SqlStore, job: &Job, workers: &[&str]) -> Vec<DispatchWork> {
    let job = job_now(store, job).await;
    let claims = fan_out(kairos_core::trigger::claims_for([job], T0), |_| {
        workers.iter().map(|w| w.to_string()).collect()
    });
    let mut work = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, T0)
        .await
        .expect("claim")
        .work;
    work.sort_by_key(|w| w.shard.index);
    work
}

/// Every callback of the job's executions.
async fn callbacks(store: &SqlStore, job: &Job) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for e in executions(store, job).await {
        for (c, _) in store
            .callbacks_for_execution(&job.tenant, &e.id)
            .await
            .unwrap()
        {
            out.push(serde_json::from_str(&c.payload).unwrap());
        }
    }
    out
}

async fn apply(store: &SqlStore, results: &[kairos_core::protocol::ResultMsg], at: Millis) {
    store.results_apply(results, at).await.expect("apply");
}

async fn a_sharded_trigger_makes_each_shard_once(store: SqlStore) {
    let job = fanned(&store, "sh1", ExecutionMode::Sharded { count: 5 }).await;
    let work = claim_shards(&store, &job, &[]).await;
    let shards: Vec<Shard> = work.iter().map(|w| w.shard).collect();
    assert_eq!(shards, (0..5).map(|i| Shard::new(i, 5)).collect::<Vec<_>>());
    assert!(work.iter().all(|w| w.to_message().shard.is_some()));
    // The same trigger claimed again (a second dispatcher, a replay) adds
    // no execution: each shard is unique per trigger.
    assert!(claim_shards(&store, &job, &[]).await.is_empty());
    let stored = executions(&store, &job).await;
    let mut indices: Vec<u32> = stored.iter().map(|e| e.shard.index).collect();
    indices.sort();
    assert_eq!(indices, [0, 1, 2, 3, 4]);
    assert!(
        stored
            .iter()
            .all(|e| e.shard.count == 5 && e.scheduled_at == T0)
    );
    let read = job_now(&store, &job).await;
    assert_eq!(read.execution_mode, ExecutionMode::Sharded { count: 5 });
}

async fn a_broadcast_trigger_sends_a_shard_to_each_worker(store: SqlStore) {
    let job = fanned(&store, "sh2", ExecutionMode::Broadcast).await;
    let work = claim_shards(&store, &job, &["w-a", "w-b", "w-c"]).await;
    let placed: Vec<(u32, u32, Option<&str>)> = work
        .iter()
        .map(|w| (w.shard.index, w.shard.count, w.worker_id.as_deref()))
        .collect();
    assert_eq!(
        placed,
        [
            (0, 3, Some("w-a")),
            (1, 3, Some("w-b")),
            (2, 3, Some("w-c"))
        ]
    );
    for e in executions(&store, &job).await {
        assert_eq!(e.status, ExecStatus::Dispatched, "claimed to its worker");
    }
}

async fn the_job_ends_and_calls_back_only_with_its_last_shard(store: SqlStore) {
    let job = fanned(&store, "sh3", ExecutionMode::Sharded { count: 3 }).await;
    let work = claim_shards(&store, &job, &[]).await;
    let applied = store
        .results_apply(
            &[
                result(&work[2], 1, Succeeded, T0 + 1),
                result(&work[0], 1, Succeeded, T0 + 2),
            ],
            T0 + 2,
        )
        .await
        .unwrap();
    assert!(applied.iter().all(|a| !a.callback_queued));
    let mid = job_now(&store, &job).await;
    assert_eq!(mid.status, JobStatus::Running, "one shard is still live");
    assert_eq!(mid.last_result, None);
    assert!(callbacks(&store, &job).await.is_empty());

    let last = store
        .results_apply(&[result(&work[1], 1, Succeeded, T0 + 3)], T0 + 3)
        .await
        .unwrap();
    assert!(last[0].callback_queued);
    let done = job_now(&store, &job).await;
    assert_eq!(done.status, JobStatus::Succeeded);
    assert_eq!(done.last_result, Some(ExecStatus::Succeeded));
    let cbs = callbacks(&store, &job).await;
    assert_eq!(cbs.len(), 1, "one callback per trigger: {cbs:?}");
    let cb = &cbs[0];
    assert_eq!(cb["status"], "succeeded");
    assert_eq!(cb["shardCount"], 3);
    let shards = cb["shards"].as_array().unwrap();
    let indices: Vec<u64> = shards
        .iter()
        .map(|s| s["shardIndex"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1, 2]);
    for (s, w) in shards.iter().zip(&work) {
        assert_eq!(s["executionId"], w.execution_id.as_str());
        assert_eq!(s["status"], "succeeded");
        assert_eq!(s["output"], serde_json::json!({"ok": true}));
    }
}

async fn one_shard_failing_after_its_retries_fails_the_trigger(store: SqlStore) {
    let mut new = one_shot("sh4", T0);
    new.execution_mode = ExecutionMode::Sharded { count: 2 };
    new.callback_url = Some(URL.into());
    new.retry = RetryPolicy {
        max_attempts: 2,
        backoff_ms: 10,
    };
    let job = create(&store, new).await;
    let work = claim_shards(&store, &job, &[]).await;
    // Shard 1's first attempt fails: it is retried on its own.
    apply(&store, &[result(&work[1], 1, Failed, T0 + 1)], T0 + 1).await;
    let retried = executions(&store, &job).await;
    let one = retried.iter().find(|e| e.shard.index == 1).unwrap();
    assert_eq!((one.status, one.attempt), (ExecStatus::Pending, 2));
    // Shard 0 succeeds and shard 1's last attempt fails, in one batch.
    apply(
        &store,
        &[
            result(&work[0], 1, Succeeded, T0 + 20),
            result(&work[1], 2, Failed, T0 + 21),
        ],
        T0 + 21,
    )
    .await;
    let done = job_now(&store, &job).await;
    assert_eq!(done.status, JobStatus::Failed);
    assert_eq!(done.last_result, Some(ExecStatus::Failed));
    let cbs = callbacks(&store, &job).await;
    assert_eq!(cbs.len(), 1, "{cbs:?}");
    assert_eq!(cbs[0]["status"], "failed");
    let statuses: Vec<&str> = cbs[0]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["succeeded", "failed"]);
    assert_eq!(cbs[0]["shards"][1]["attempt"], 2);
}

async fn a_recurring_job_waits_for_its_trigger_last_shard(store: SqlStore) {
    let mut new = support::cron("sh5", T0);
    new.execution_mode = ExecutionMode::Sharded { count: 2 };
    let job = create(&store, new).await;
    let work = claim_shards(&store, &job, &[]).await;
    assert_eq!(work.len(), 2);
    apply(&store, &[result(&work[0], 1, Failed, T0 + 1)], T0 + 1).await;
    let mid = job_now(&store, &job).await;
    assert_eq!(mid.status, JobStatus::Running);
    assert_eq!((mid.last_result, mid.fail_streak), (None, 0));
    apply(&store, &[result(&work[1], 1, Succeeded, T0 + 2)], T0 + 2).await;
    let after = job_now(&store, &job).await;
    assert_eq!(after.status, JobStatus::Scheduled);
    assert_eq!(
        (after.last_result, after.fail_streak),
        (Some(ExecStatus::Failed), 1),
        "the trigger failed as a whole, once"
    );
}

async fn the_last_two_shards_ending_at_once_end_the_trigger_once(store: SqlStore) {
    for round in 0..4 {
        let tenant = format!("sh6-{round}");
        let job = fanned(&store, &tenant, ExecutionMode::Sharded { count: 2 }).await;
        let work = claim_shards(&store, &job, &[]).await;
        let (a, b) = (work[0].clone(), work[1].clone());
        let (s1, s2) = (store.clone(), store.clone());
        let t1 = tokio::spawn(async move {
            s1.results_apply(&[result(&a, 1, Succeeded, T0 + 1)], T0 + 1)
                .await
        });
        let t2 = tokio::spawn(async move {
            s2.results_apply(&[result(&b, 1, Succeeded, T0 + 1)], T0 + 1)
                .await
        });
        t1.await.unwrap().expect("apply shard 0");
        t2.await.unwrap().expect("apply shard 1");
        let done = job_now(&store, &job).await;
        assert_eq!(done.status, JobStatus::Succeeded, "round {round}");
        assert_eq!(callbacks(&store, &job).await.len(), 1, "round {round}");
    }
}

fn beat(id: &str, handlers: Option<&[&str]>) -> HeartbeatMsg {
    HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: id.to_string(),
        queue: format!("kairos.worker.{id}"),
        capacity: 8,
        active: 0,
        avg_cost_ms: 1.0,
        cpu_idle: 90.0,
        state: WorkerState::Online,
        at: T0,
        handlers: handlers.map(|h| h.iter().map(|s| s.to_string()).collect()),
        group: None,
        incarnation: None,
        held: None,
        dispatch_batch: None,
        immediate_queue: false,
    }
}

async fn a_manual_trigger_fans_out_too(store: SqlStore) {
    let later = T0 + 3_600_000;
    let mut new = one_shot("sh7", later);
    new.execution_mode = ExecutionMode::Sharded { count: 3 };
    let sharded = create(&store, new).await;
    let ControlOutcome::Done(_) = store
        .job_trigger_now("sh7", &sharded.id, &support::id(), T0)
        .await
        .unwrap()
    else {
        panic!("the trigger applies");
    };
    let execs = executions(&store, &sharded).await;
    let mut shards: Vec<(u32, u32)> = execs
        .iter()
        .map(|e| (e.shard.index, e.shard.count))
        .collect();
    shards.sort();
    assert_eq!(shards, [(0, 3), (1, 3), (2, 3)]);
    assert!(
        execs
            .iter()
            .all(|e| e.scheduled_at == T0 && e.status == ExecStatus::Pending)
    );

    // A broadcast goes to the live workers serving the handler: a legacy
    // worker serves every handler; another handler's or a silent one's not.
    store
        .workers_record_heartbeats(
            &[
                beat("bw1", Some(&["noop"])),
                beat("bw2", None),
                beat("bw3", Some(&["other"])),
            ],
            T0,
        )
        .await
        .unwrap();
    store
        .workers_record_heartbeats(
            &[HeartbeatMsg {
                at: T0 - 60_000,
                ..beat("bw4", None)
            }],
            T0 - 60_000,
        )
        .await
        .unwrap();
    let mut new = one_shot("sh7", later);
    new.execution_mode = ExecutionMode::Broadcast;
    let broadcast = create(&store, new).await;
    store
        .job_trigger_now("sh7", &broadcast.id, &support::id(), T0 + 1)
        .await
        .unwrap();
    let execs = executions(&store, &broadcast).await;
    let mut shards: Vec<(u32, u32)> = execs
        .iter()
        .map(|e| (e.shard.index, e.shard.count))
        .collect();
    shards.sort();
    assert_eq!(shards, [(0, 2), (1, 2)]);
}
