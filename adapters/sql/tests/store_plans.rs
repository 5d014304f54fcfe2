//! Every statement shape the API, the dashboard, the dispatcher, the reaper
//! and the bench run, EXPLAINed on SQLite, MariaDB/MySQL and PostgreSQL with
//! a million finished executions stored (issue 43: a read costs what it
//! returns, not the history): no statement reads a filled table whole, walks
//! a tenant's whole history through a tenant-ordered index (only the
//! tenant's listings may, in the listing's order, stopping at the page), or
//! sorts what it read, unless its entry below says why it may.
//!
//! How it works: each database is filled once per run (set-based, by the
//! store's own fill) and its statistics refreshed as the server would
//! (SQLite keeps none: `kairos` never runs `ANALYZE` there); then every
//! entry of [`shapes`] runs its store calls while the store records its
//! statements (with their values), and each statement recorded is
//! EXPLAINed. A new statement shape is covered by calling it from an entry
//! (a new entry, or an existing one, if the rules it is held to fit).

mod store_support;
use store_support as support;

use futures::future::BoxFuture;
use kairos_core::execution::ExecStatus;
use kairos_core::job::{Job, JobHealth, JobStatus};
use kairos_core::overview::ExecFilter;
use kairos_core::protocol::ResultKind;
use kairos_core::store::{
    CallbackStore, Dispatch, DispatchedTo, History, JobFilter, JobStore, LogStore, Maintenance,
    TenantStore, WorkerStore,
};
use kairos_core::store::{DispatchScope, LimitStore, SessionStore};
use kairos_core::worker::Routable;
use kairos_core::workflow::WorkflowStore;
use kairos_store_sql::plans::{self, Plan, Step};
use kairos_store_sql::{SqlStore, filled_execution_id, filled_job_id};
use support::{T0, create, id, one_shot, result};

/// Executions stored before the plans are read (the issue's floor).
const FILL: u64 = 1_000_000;
/// The filled tenant (the bench's too).
const TENANT: &str = "default";
/// The tables the fill makes large.
const FILLED: [&str; 2] = ["executions", "jobs"];
/// Indexes ordered by tenant first: reading one walks the tenant's history
/// unless the statement stops at a page in the index's order.
const TENANT_ORDERED: [&str; 3] = [
    "idx_executions_tenant_scheduled",
    "idx_jobs_tenant_created",
    "idx_jobs_tenant_status",
];

/// What a shape may do that the rules otherwise refuse, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Allow {
    /// Reads a tenant-ordered index in its order and stops at the page (a
    /// listing of the tenant's jobs or executions, newest first), or reads
    /// the range of it a time window holds (the dashboard's figures).
    TenantListing,
    /// The statement whose SQL contains `of` sorts what it read, which is
    /// bounded for the reason `why`.
    Sort { of: &'static str, why: &'static str },
    /// The statement whose SQL contains `of` may read a filled table whole
    /// (its tenant's part of it), for the reason `why`: what it answers is
    /// about all of it, or no index can answer it.
    Scan { of: &'static str, why: &'static str },
}

/// Shorthand for [`Allow::Scan`].
const fn scan(of: &'static str, why: &'static str) -> Allow {
    Allow::Scan { of, why }
}

/// Shorthand for [`Allow::Sort`].
const fn sort(of: &'static str, why: &'static str) -> Allow {
    Allow::Sort { of, why }
}

/// The fixture every shape runs against: the filled history plus a few live
/// jobs of the tenant's, made by [`Ctx::live`].
struct Ctx {
    store: SqlStore,
    /// A filled job in the middle of the fill, and one of its executions.
    job: String,
    execution: String,
}

type Run = for<'a> fn(&'a Ctx) -> BoxFuture<'a, ()>;

/// One entry: a name, what it may do, and the store calls it makes.
struct Shape {
    name: &'static str,
    allow: &'static [Allow],
    run: Run,
}

macro_rules! shape {
    ($name:literal, [$($allow:expr),*], |$ctx:ident| $body:block) => {
        Shape {
            name: $name,
            allow: {
                const ALLOW: &[Allow] = &[$($allow),*];
                ALLOW
            },
            run: |$ctx| Box::pin(async move { $body }),
        }
    };
}

fn page(limit: u32) -> ExecFilter {
    ExecFilter {
        limit,
        ..ExecFilter::default()
    }
}

fn jobs_page(limit: u32) -> JobFilter {
    JobFilter {
        limit,
        ..JobFilter::default()
    }
}

/// A one-shot job of the tenant due at T0, stored.
async fn live(ctx: &Ctx) -> Job {
    create(&ctx.store, one_shot(TENANT, T0)).await
}

/// Every statement shape, by who runs it.
fn shapes() -> Vec<Shape> {
    vec![
        // The API and the dashboard: one job, its executions, the listings.
        shape!("job by id", [], |c| {
            c.store.job_get(TENANT, &c.job).await.unwrap().unwrap();
        }),
        shape!(
            "a job's newest execution (GET /openapi/jobs/{id})",
            [],
            |c| {
                let page = c
                    .store
                    .executions_list_for_job(TENANT, &c.job, 1, None)
                    .await
                    .unwrap();
                assert_eq!(page.items.len(), 1);
            }
        ),
        shape!("a job's executions, pages both ways", [], |c| {
            let first = c
                .store
                .executions_list_for_job(TENANT, &c.job, 5, None)
                .await
                .unwrap();
            let next = first.next_cursor.clone().unwrap();
            let second = c
                .store
                .executions_list_for_job(TENANT, &c.job, 5, Some(&next))
                .await
                .unwrap();
            let back = second.prev_cursor.clone().unwrap();
            c.store
                .executions_list_for_job(TENANT, &c.job, 5, Some(&back))
                .await
                .unwrap();
        }),
        shape!(
            "one execution and its events",
            [sort(
                "FROM callbacks c",
                "an execution's callbacks: one per end, and redeliveries"
            )],
            |c| {
                c.store
                    .execution_get(TENANT, &c.execution)
                    .await
                    .unwrap()
                    .unwrap();
                c.store
                    .execution_events(TENANT, &c.execution)
                    .await
                    .unwrap();
                c.store.logs_page(&c.execution, None, 50).await.unwrap();
                c.store
                    .callbacks_for_execution(TENANT, &c.execution)
                    .await
                    .unwrap();
            }
        ),
        shape!(
            "the tenant's executions, newest first, pages both ways",
            [Allow::TenantListing],
            |c| {
                let first = c.store.executions_list(TENANT, &page(50)).await.unwrap();
                let filter = ExecFilter {
                    cursor: first.next_cursor.clone(),
                    ..page(50)
                };
                let second = c.store.executions_list(TENANT, &filter).await.unwrap();
                let filter = ExecFilter {
                    cursor: second.prev_cursor.clone(),
                    ..page(50)
                };
                c.store.executions_list(TENANT, &filter).await.unwrap();
            }
        ),
        shape!(
            "a page's jobs, as the executions list shows them",
            [],
            |c| {
                let ids: Vec<String> = (100..150).map(filled_job_id).collect();
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                let jobs = c.store.jobs_get_many(TENANT, &ids).await.unwrap();
                assert_eq!(jobs.len(), ids.len(), "50 filled jobs");
            }
        ),
        shape!(
            "the tenant's executions in a time range",
            [Allow::TenantListing],
            |c| {
                let newest = c.store.executions_list(TENANT, &page(1)).await.unwrap();
                let at = newest.items[0].scheduled_at;
                let filter = ExecFilter {
                    from: Some(at - 3_600_000),
                    to: Some(at),
                    ..page(50)
                };
                c.store.executions_list(TENANT, &filter).await.unwrap();
                c.store
                    .executions_count(TENANT, &filter, 1_000)
                    .await
                    .unwrap();
            }
        ),
        shape!(
            "the tenant's executions of one job",
            [sort(
                "AND e.job_id = ",
                "PostgreSQL sorts a job's few executions rather than read them in order"
            )],
            |c| {
                let filter = ExecFilter {
                    job_id: Some(c.job.clone()),
                    ..page(50)
                };
                c.store.executions_list(TENANT, &filter).await.unwrap();
                c.store
                    .executions_count(TENANT, &filter, 1_000)
                    .await
                    .unwrap();
            }
        ),
        shape!(
            "the tenant's executions in a state",
            [Allow::TenantListing],
            |c| {
                let filter = ExecFilter {
                    statuses: vec![ExecStatus::Failed],
                    ..page(50)
                };
                c.store.executions_list(TENANT, &filter).await.unwrap();
            }
        ),
        shape!(
            "the tenant's executions of a handler",
            [Allow::TenantListing],
            |c| {
                let filter = ExecFilter {
                    handler: Some("fill-3".into()),
                    ..page(50)
                };
                c.store.executions_list(TENANT, &filter).await.unwrap();
            }
        ),
        shape!(
            "the tenant's executions on a worker",
            [Allow::TenantListing],
            |c| {
                let filter = ExecFilter {
                    worker_id: Some("fill-worker-3".into()),
                    ..page(50)
                };
                c.store.executions_list(TENANT, &filter).await.unwrap();
            }
        ),
        shape!(
            "the tenant's jobs, newest first, filtered",
            [
                Allow::TenantListing,
                scan(
                    "LOWER(j.name) LIKE",
                    "a name search: no index finds a substring in names"
                ),
                sort("LOWER(j.name) LIKE", "the few jobs a name search finds"),
                scan(
                    "j.fail_streak >= ",
                    "failing jobs: a streak no index orders (the dashboard's health filter)"
                ),
                sort("j.fail_streak >= ", "the few failing jobs"),
                scan(
                    ") capped",
                    "a count capped at 1,000 rows: it stops at the cap"
                ),
                scan(
                    "COUNT(*) AS n FROM jobs WHERE tenant",
                    "the tenant's live jobs, counted against its cap on them"
                )
            ],
            |c| {
                let first = c.store.job_list(TENANT, &jobs_page(50)).await.unwrap();
                let filter = JobFilter {
                    cursor: first.next_cursor.clone(),
                    ..jobs_page(50)
                };
                c.store.job_list(TENANT, &filter).await.unwrap();
                for filter in [
                    JobFilter {
                        status: Some(JobStatus::Paused),
                        ..jobs_page(50)
                    },
                    JobFilter {
                        handler: Some("fill-3".into()),
                        ..jobs_page(50)
                    },
                    JobFilter {
                        name_contains: Some("job-12".into()),
                        ..jobs_page(50)
                    },
                    JobFilter {
                        health: Some(JobHealth::Failing),
                        ..jobs_page(50)
                    },
                ] {
                    c.store.job_list(TENANT, &filter).await.unwrap();
                }
                c.store
                    .job_count(TENANT, &jobs_page(50), 1_000)
                    .await
                    .unwrap();
                c.store.jobs_count_live(TENANT).await.unwrap();
            }
        ),
        shape!(
            "the dashboard's overview and trigger timing",
            [
                Allow::TenantListing,
                scan(
                    "FROM jobs WHERE",
                    "the overview's totals of the tenant's jobs by state"
                ),
                sort(
                    "GROUP BY",
                    "counts the window's executions by state and minute"
                ),
                sort(
                    "ORDER BY finished_at DESC",
                    "the window's latest runs, for the timing"
                )
            ],
            |c| {
                c.store
                    .tenant_overview(TENANT, T0 - 3_600_000)
                    .await
                    .unwrap();
                c.store
                    .trigger_timing(TENANT, T0 - 3_600_000, T0)
                    .await
                    .unwrap();
            }
        ),
        shape!(
            "tenants, keys, audit trail, workers",
            [
                sort("FROM tenants", "every tenant: an operator's list"),
                sort("FROM api_keys", "a tenant's keys"),
                sort("FROM workers", "every worker: an operator's list")
            ],
            |c| {
                c.store.tenant_get(TENANT).await.unwrap();
                c.store.tenants_list().await.unwrap();
                c.store.api_keys_list(Some(TENANT)).await.unwrap();
                c.store.audit_list(Some(TENANT), 50, None).await.unwrap();
                c.store.workers_list().await.unwrap();
            }
        ),
        shape!(
            "workflows, keys, sessions and limits",
            [
                sort(
                    "FROM workflow_runs r",
                    "NOT BOUNDED YET: a workflow's runs are read through the trigger key \
                     (workflow_id, scheduled_at) and sorted for the id tie-break"
                ),
                sort("FROM concurrency_limits", "every limit: an operator's list"),
                sort("GROUP BY s.scope_key", "the slots of live executions")
            ],
            |c| {
                c.store.workflows_list(TENANT, 50, None).await.unwrap();
                c.store
                    .workflow_runs_list(TENANT, &id(), 50, None)
                    .await
                    .unwrap();
                c.store.api_key_get("0123456789ab").await.unwrap();
                c.store.ui_session_get("nothing").await.unwrap();
                c.store.limits_list().await.unwrap();
            }
        ),
        // Housekeeping the dispatcher and the API run on a timer.
        shape!(
            "purges",
            [sort(
                "FROM execution_logs",
                "empty here: PostgreSQL sorts it rather than read idx_execution_logs_created"
            )],
            |c| {
                c.store.logs_purge(T0 - 86_400_000, 1_000).await.unwrap();
                c.store.ui_sessions_purge(T0).await.unwrap();
                c.store.concurrency_slots_purge(1, 1_000).await.unwrap();
                c.store.partitions_count().await.unwrap();
            }
        ),
        // Callers' changes to a filled job: they read its live executions.
        shape!("pause, resume, trigger and cancel a filled job", [], |c| {
            let k = filled_job_id(1_002);
            c.store.job_pause(TENANT, &k, None, T0).await.unwrap();
            c.store.job_resume(TENANT, &k, T0).await.unwrap();
            c.store
                .job_trigger_now(TENANT, &k, &id(), T0)
                .await
                .unwrap();
            c.store.job_cancel(TENANT, &k, T0).await.unwrap();
        }),
        // The bench (and every client): creates, one and a batch.
        shape!("create jobs", [], |c| {
            live(c).await;
            let batch = (0..3).map(|_| one_shot(TENANT, T0)).collect();
            c.store.jobs_create_many(batch).await.unwrap();
        }),
        // The dispatcher: due scans, claims, publishing, results.
        shape!(
            "due scans",
            [sort(
                "ORDER BY",
                "merges the per-state index ranges, each cut at `limit` due rows"
            )],
            |c| {
                let owned: kairos_core::partition::Owned = (0..4).map(|p| (p, 1)).collect();
                for scope in [
                    DispatchScope::All { fence: 1 },
                    DispatchScope::Partitions(&owned),
                ] {
                    c.store.jobs_find_due(scope, T0, 100, &[]).await.unwrap();
                    c.store
                        .jobs_find_due_ranked(scope, T0, T0 - 10_000, 100, &[])
                        .await
                        .unwrap();
                    c.store
                        .jobs_find_due_immediate(scope, T0, 100)
                        .await
                        .unwrap();
                    c.store.jobs_count_due(scope, T0, 1_000).await.unwrap();
                }
            }
        ),
        shape!(
            "claim, publish, run and finish",
            [
                sort(
                    "WHERE worker_id = ",
                    "the attempts one worker holds: its capacity"
                ),
                sort("stop_requested_at >= ", "stop requests of live executions"),
                sort("GROUP BY job_id", "the live executions of the jobs claimed")
            ],
            |c| {
                let job = live(c).await;
                let work = support::claim(&c.store, &job, None).await;
                c.store
                    .executions_find_unpublished(T0, 100, &Routable::Any)
                    .await
                    .unwrap();
                let sent = DispatchedTo {
                    execution_id: work.execution_id.clone(),
                    attempt: 1,
                    worker_id: "w1".into(),
                };
                c.store
                    .executions_mark_dispatched(&[sent], T0 + 1)
                    .await
                    .unwrap();
                c.store.executions_in_flight_on("w1").await.unwrap();
                let started = result(&work, 1, ResultKind::Started, T0 + 2);
                c.store.results_apply(&[started], T0 + 2).await.unwrap();
                c.store.executions_stop_requested(T0, 100).await.unwrap();
                let done = result(&work, 1, ResultKind::Succeeded, T0 + 3);
                c.store.results_apply(&[done], T0 + 3).await.unwrap();
                c.store
                    .executions_find_waiting(T0, 100, &Routable::Any)
                    .await
                    .unwrap();
                c.store.executions_count_waiting(1_000).await.unwrap();
            }
        ),
        // The reaper.
        shape!(
            "overdue, unbounded and lost attempts",
            [
                sort("deadline_at <", "running executions: what the workers hold"),
                sort(
                    "deadline_at IS NULL",
                    "live executions: what the workers hold"
                )
            ],
            |c| {
                let job = live(c).await;
                let work = support::claim(&c.store, &job, None).await;
                c.store
                    .executions_find_overdue(T0 + 600_000, 1_000, 100)
                    .await
                    .unwrap();
                c.store
                    .executions_find_unbounded(T0 + 600_000, 60_000, 100)
                    .await
                    .unwrap();
                let target = vec![(work.execution_id.clone(), 1)];
                c.store
                    .executions_requeue_unstarted(&target, "test", T0 + 1)
                    .await
                    .unwrap();
            }
        ),
        // The callback relay.
        shape!("callbacks due", [], |c| {
            c.store
                .callbacks_claim_due("relay", T0, 30_000, 100)
                .await
                .unwrap();
            c.store.callbacks_next_due().await.unwrap();
            c.store.callbacks_backlog().await.unwrap();
        }),
    ]
}

/// What is wrong with `plan` for a shape allowed `allow`; empty when
/// nothing is.
fn faults(sql: &str, plan: &Plan, allow: &[Allow]) -> Vec<String> {
    let sorts_allowed = allow.iter().any(|a| match a {
        Allow::Sort { of, why } => sql.contains(of) && !why.is_empty(),
        _ => false,
    });
    let scans_allowed = allow.iter().any(|a| match a {
        Allow::Scan { of, why } => sql.contains(of) && !why.is_empty(),
        _ => false,
    });
    let filled = |s: &Step| s.table.as_deref().is_some_and(|t| FILLED.contains(&t));
    let mut found = Vec::new();
    for step in &plan.steps {
        if step.full_scan && filled(step) && !scans_allowed {
            found.push(format!("reads all of {:?}", step.table));
        }
        if step.sorts && !sorts_allowed {
            found.push("sorts what it read".to_string());
        }
        if let Some(index) = step.index.as_deref()
            && TENANT_ORDERED.contains(&index)
            && !allow.contains(&Allow::TenantListing)
        {
            found.push(format!("walks the tenant's history through {index}"));
        }
    }
    found
}

/// Fills the database, then runs and EXPLAINs every shape; panics with
/// every fault found.
async fn check_every_shape(store: SqlStore) {
    let started = std::time::Instant::now();
    // KAIROS_PLANS_FILL overrides the size, for a quicker look while
    // working on a statement; the rules hold at the default.
    let fill = std::env::var("KAIROS_PLANS_FILL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(FILL);
    let filled = store
        .fill_history(TENANT, fill, T0 - 3_600_000)
        .await
        .expect("fill");
    store.analyse().await.expect("analyse");
    eprintln!(
        "{:?}: {} executions filled and analysed in {:.1} s",
        store.dialect(),
        filled.executions,
        started.elapsed().as_secs_f64()
    );
    let middle = filled.jobs / 2;
    let ctx = Ctx {
        job: filled_job_id(middle),
        execution: filled_execution_id(middle + 3 * filled.jobs),
        store,
    };
    let recording = plans::record();
    let dialect = ctx.store.dialect();
    recording.take(dialect);
    let mut report = Vec::new();
    let mut shapes_seen = 0;
    for shape in shapes() {
        (shape.run)(&ctx).await;
        let statements = recording.take(dialect);
        assert!(
            !statements.is_empty(),
            "{}: ran no statement on {dialect:?}",
            shape.name
        );
        for statement in statements {
            shapes_seen += 1;
            let plan = ctx.store.explain(&statement).await.unwrap_or_else(|e| {
                panic!("EXPLAIN failed on {dialect:?}: {e}\n{}", statement.text)
            });
            let faults = faults(&statement.text, &plan, shape.allow);
            if !faults.is_empty() {
                report.push(format!(
                    "[{}] {}\n  SQL: {}\n  plan:\n    {}",
                    shape.name,
                    faults.join("; "),
                    statement.text,
                    plan.lines.join("\n    ")
                ));
            }
        }
    }
    eprintln!("{dialect:?}: {shapes_seen} statement shapes EXPLAINed");
    assert!(
        report.is_empty(),
        "{} of {shapes_seen} statements on {dialect:?} read more than they return:\n\n{}",
        report.len(),
        report.join("\n\n")
    );
    ctx.store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_statements_read_what_they_return() {
    let url = kairos_testkit::sqlite_temp_url();
    let store = SqlStore::connect(&url).await.expect("open SQLite");
    store.migrate().await.expect("migrate SQLite");
    check_every_shape(store).await;
    // Half a gigabyte: removed once the rules hold.
    let path = url.trim_start_matches("sqlite://");
    let path = path.split('?').next().unwrap_or(path);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_statements_read_what_they_return() {
    use sqlx::Connection;
    let Some(url) = kairos_testkit::mysql_fresh_database().await else {
        return;
    };
    let store = SqlStore::connect(&url).await.expect("connect MySQL");
    store.migrate().await.expect("migrate MySQL");
    check_every_shape(store).await;
    // A gigabyte: dropped once the rules hold (kept for a look when not),
    // rather than left with the other suites' databases.
    let (server, name) = url.rsplit_once('/').expect("a database in the URL");
    let mut conn = sqlx::MySqlConnection::connect(server).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP DATABASE `{name}`")))
        .execute(&mut conn)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_statements_read_what_they_return() {
    let Some((store, _db)) = support::postgres_store().await else {
        return;
    };
    check_every_shape(store).await;
}

#[test]
fn the_rules_catch_each_fault() {
    let step = |table: &str, index: Option<&str>, full_scan, sorts| Step {
        table: Some(table.to_string()),
        index: index.map(str::to_string),
        full_scan,
        sorts,
    };
    let plan = |steps| Plan {
        lines: Vec::new(),
        steps,
    };
    let walk = plan(vec![step(
        "executions",
        Some("idx_executions_tenant_scheduled"),
        false,
        false,
    )]);
    assert_eq!(faults("", &walk, &[]).len(), 1);
    assert!(faults("", &walk, &[Allow::TenantListing]).is_empty());
    let scan = plan(vec![step("jobs", None, true, false)]);
    assert_eq!(faults("", &scan, &[Allow::TenantListing]).len(), 1);
    let small = plan(vec![step("workers", None, true, false)]);
    assert!(faults("", &small, &[]).is_empty());
    let sorted = plan(vec![step(
        "jobs",
        Some("idx_jobs_status_next"),
        false,
        true,
    )]);
    assert_eq!(faults("FROM jobs", &sorted, &[]).len(), 1);
    assert!(faults("FROM jobs", &sorted, &[sort("FROM jobs", "bounded")]).is_empty());
    assert_eq!(
        faults("FROM jobs", &sorted, &[sort("FROM workers", "bounded")]).len(),
        1,
        "a sort is allowed only in the statement named"
    );
}
