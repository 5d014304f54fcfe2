//! Shared helpers of the store suites: fresh stores on SQLite, MySQL and
//! PostgreSQL, job and result builders, and the macro that runs each case on
//! every database.
#![allow(dead_code)]

#[macro_use]
pub mod raw;

use kairos_core::execution::Execution;
use kairos_core::job::{Job, NewJob, RetryPolicy};
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::schedule::{Recurrence, Schedule};
use kairos_core::store::DispatchScope;
use kairos_core::store::{Claim, CreateOutcome, Dispatch, DispatchWork, History, JobStore};
use kairos_core::time::Millis;
use kairos_store_sql::SqlStore;
use kairos_testkit as testkit;

/// A fixed "now" so cases read as arithmetic on it.
pub const T0: Millis = 1_767_225_600_000;

/// A migrated store on a new SQLite file.
pub async fn sqlite_store() -> SqlStore {
    let store = SqlStore::connect(&testkit::sqlite_temp_url())
        .await
        .expect("open SQLite");
    store.migrate().await.expect("migrate SQLite");
    store
}

/// A migrated store on a fresh MySQL database, or `None` (skip policy).
pub async fn mysql_store() -> Option<SqlStore> {
    let url = testkit::mysql_fresh_database().await?;
    let store = SqlStore::connect(&url).await.expect("connect MySQL");
    store.migrate().await.expect("migrate MySQL");
    Some(store)
}

/// A migrated store on a fresh PostgreSQL database (dropped with the
/// returned guard), or `None` (skip policy).
pub async fn postgres_store() -> Option<(SqlStore, testkit::PgDatabase)> {
    let db = testkit::postgres_fresh_database().await?;
    let store = SqlStore::connect(db.url())
        .await
        .expect("connect PostgreSQL");
    store.migrate().await.expect("migrate PostgreSQL");
    Some((store, db))
}

/// Runs every named `async fn name(store: SqlStore)` once on SQLite
/// (`sqlite::name`), once on MySQL (`mysql::name`) and once on PostgreSQL
/// (`postgres::name`).
#[allow(unused_macros)]
macro_rules! store_cases {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::sqlite_store().await).await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(store) = $crate::support::mysql_store().await {
                        super::$name(store).await;
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some((store, _db)) = $crate::support::postgres_store().await {
                        super::$name(store).await;
                    }
                }
            )*
        }
    };
}

/// A fresh UUIDv7 id.
pub fn id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A one-shot `noop` job of `tenant` due at `at`.
pub fn one_shot(tenant: &str, at: Millis) -> NewJob {
    NewJob {
        execution_mode: Default::default(),
        trace: None,
        id: id(),
        tenant: tenant.to_string(),
        name: "job".to_string(),
        handler: "noop".to_string(),
        params: serde_json::json!({"n": 1, "s": "é"}),
        sensitive_params: Vec::new(),
        schedule: Schedule::Once { at },
        next_trigger_at: at,
        callback_url: None,
        client_request_id: None,
        request_hash: None,
        retry: RetryPolicy::default(),
        timeout_ms: None,
        created_at: T0,
        created_by: None,
        worker_group: None,
        priority: Default::default(),
        max_concurrency: None,
    }
}

/// A cron job (every second) of `tenant`, first due at `at`.
pub fn cron(tenant: &str, at: Millis) -> NewJob {
    NewJob {
        trace: None,
        schedule: Schedule::cron("* * * * * *", "UTC"),
        ..one_shot(tenant, at)
    }
}

/// A `noop` job of `tenant` on `schedule`, first due at `at`.
pub fn recurring(tenant: &str, schedule: Schedule, at: Millis) -> NewJob {
    NewJob {
        trace: None,
        schedule,
        ..one_shot(tenant, at)
    }
}

/// `schedule` with its recurrence changed by `f`.
pub fn tweak(schedule: Schedule, f: impl FnOnce(&mut Recurrence)) -> Schedule {
    let Schedule::Recurring(mut r) = schedule else {
        panic!("a recurring schedule is expected");
    };
    f(&mut r);
    Schedule::Recurring(r)
}

/// Claims what is due of `job` at `now` the way the dispatcher does
/// (`trigger::claims_for`, fence 1) and returns the work to publish.
pub async fn claim_due(store: &SqlStore, job: &Job, now: Millis) -> Vec<DispatchWork> {
    let job = job_now(store, job).await;
    let claims = kairos_core::trigger::claims_for([job.clone()], now);
    store
        .triggers_claim(DispatchScope::All { fence: 1 }, &claims, now)
        .await
        .expect("claim")
        .work
}

/// Every execution of `job`, oldest trigger first.
pub async fn executions(store: &SqlStore, job: &Job) -> Vec<Execution> {
    let mut page = store
        .executions_list_for_job(&job.tenant, &job.id, 1_000, None)
        .await
        .expect("list executions")
        .items;
    page.reverse();
    page
}

/// Stores `job`, which must be new.
pub async fn create(store: &SqlStore, job: NewJob) -> Job {
    match store.job_create(job).await.expect("create") {
        CreateOutcome::Created(j) => j,
        CreateOutcome::Existing(j) => panic!("expected a new job, got existing {}", j.id),
    }
}

/// Claims the job's current trigger (fence 1) and returns the work.
pub async fn claim(store: &SqlStore, job: &Job, next: Option<Millis>) -> DispatchWork {
    let due = job.next_trigger_at.expect("job has a trigger");
    let c = Claim {
        shard: Default::default(),
        job: std::sync::Arc::new(job.clone()),
        scheduled_at: due,
        next_trigger_at: next,
        execution_id: id(),
        worker_id: None,
    };
    let mut won = store
        .triggers_claim(DispatchScope::All { fence: 1 }, &[c], due)
        .await
        .expect("claim")
        .work;
    assert_eq!(won.len(), 1, "claim of {} must win", job.id);
    won.remove(0)
}

/// A worker result for `work`'s current attempt.
pub fn result(work: &DispatchWork, attempt: u32, kind: ResultKind, at: Millis) -> ResultMsg {
    ResultMsg {
        started_at: None,
        traceparent: None,
        v: PROTOCOL_VERSION,
        execution_id: work.execution_id.clone(),
        attempt,
        worker_id: "w1".to_string(),
        kind,
        output: (kind == ResultKind::Succeeded).then(|| serde_json::json!({"ok": true})),
        error: matches!(kind, ResultKind::Failed | ResultKind::TimedOut)
            .then(|| "boom".to_string()),
        at,
        retryable: None,
        incarnation: None,
    }
}

/// The job as stored now.
pub async fn job_now(store: &SqlStore, job: &Job) -> Job {
    store
        .job_get(&job.tenant, &job.id)
        .await
        .expect("get")
        .expect("job exists")
}

/// Makes `n` terminal executions whose job has a callback URL; their ids.
pub async fn terminal_with_callbacks(store: &SqlStore, tenant: &str, n: usize) -> Vec<String> {
    let mut results = Vec::new();
    for _ in 0..n {
        let mut new = one_shot(tenant, T0);
        new.callback_url = Some("http://example.test/cb".into());
        let job = create(store, new).await;
        let w = claim(store, &job, None).await;
        results.push(result(&w, 1, ResultKind::Succeeded, T0 + 1));
    }
    kairos_core::store::Dispatch::results_apply(store, &results, T0 + 1)
        .await
        .unwrap();
    results.into_iter().map(|r| r.execution_id).collect()
}
