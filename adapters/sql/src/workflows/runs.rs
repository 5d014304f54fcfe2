//! Runs: creating one with its root nodes' executions (a
//! [`kairos_core::workflow::Step`] applied by `step`), ending one, cancelling, and the reads the API serves.

use crate::db::{On, Row, Tx};
use crate::inserts::{self, EventRow};
use crate::keyset;
use crate::rows::R;
use crate::sql::{CHUNK, Fields, Sql, fetch_chunked, time};
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::store::{Page, StoreResult};
use kairos_core::time::Millis;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::{
    NodeStatus, NodeTransition, RunControl, RunDetail, RunNode, RunStatus, RunTransition,
    StoredWorkflow, WorkflowRun, advance,
};
use std::collections::{BTreeMap, HashMap};

const RUN_COLS: [&str; 9] = [
    "id",
    "workflow_id",
    "tenant",
    "status",
    "scheduled_at",
    "created_at",
    "finished_at",
    "updated_at",
    "definition_version",
];

pub(super) fn run_row(row: &Row) -> StoreResult<WorkflowRun> {
    let r = R::new(row, "workflow_runs");
    Ok(WorkflowRun {
        id: r.string("id")?,
        workflow_id: r.string("workflow_id")?,
        tenant: r.string("tenant")?,
        status: r.parsed("status", RunStatus::parse)?,
        scheduled_at: r.time("scheduled_at")?,
        created_at: r.time("created_at")?,
        finished_at: r.opt_time("finished_at")?,
        definition_version: r.i64("definition_version")?,
    })
}

pub(super) fn run_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("r", &RUN_COLS).push(" FROM workflow_runs r");
    s
}

/// The first trigger time at or after `now` no run of the workflow has.
async fn free_slot(tx: &mut Tx, workflow_id: &str, now: Millis) -> StoreResult<Millis> {
    let found = Sql::new("SELECT scheduled_at FROM workflow_runs WHERE workflow_id = ")
        .bind(workflow_id)
        .push(" AND scheduled_at >= ")
        .bind(time(now))
        .push(" ORDER BY scheduled_at LIMIT 1000")
        .fetch_all(tx)
        .await?;
    let mut slot = now;
    for row in &found {
        if R::new(row, "workflow_runs").time("scheduled_at")? != slot {
            break;
        }
        slot += 1;
    }
    Ok(slot)
}

/// Creates a run of `wf` (locked by the caller) at the first free trigger
/// time from `at`, with a node row per node and its roots' executions.
pub(super) async fn start(
    tx: &mut Tx,
    wf: &StoredWorkflow,
    run_id: &str,
    at: Millis,
    now: Millis,
    limits: RunLimits,
) -> StoreResult<WorkflowRun> {
    let run = WorkflowRun {
        id: run_id.to_string(),
        workflow_id: wf.id.clone(),
        tenant: wf.tenant.clone(),
        status: RunStatus::Running,
        scheduled_at: free_slot(tx, &wf.id, at).await?,
        created_at: now,
        finished_at: None,
        definition_version: wf.definition_version,
    };
    let row = Fields::new()
        .with("id", run.id.as_str())
        .with("workflow_id", run.workflow_id.as_str())
        .with("tenant", run.tenant.as_str())
        .with("status", run.status.as_str())
        .with("scheduled_at", time(run.scheduled_at))
        .with("created_at", time(now))
        .with("finished_at", time(None::<Millis>))
        .with("updated_at", time(now))
        .with("definition_version", run.definition_version);
    Sql::new("INSERT INTO workflow_runs")
        .rows([&row])
        .execute(&mut *tx)
        .await?;
    let nodes: Vec<Fields> = wf
        .definition
        .nodes
        .iter()
        .zip(0_i64..)
        .map(|(n, position)| {
            Fields::new()
                .with("run_id", run.id.as_str())
                .with("node_id", n.id.as_str())
                .with("position", position)
                .with("status", NodeStatus::Waiting.as_str())
                .with("execution_id", None::<&str>)
                .with("decided_at", time(None::<Millis>))
                .with("updated_at", time(now))
        })
        .collect();
    for chunk in nodes.chunks(CHUNK) {
        Sql::new("INSERT INTO workflow_run_nodes")
            .rows(chunk)
            .execute(&mut *tx)
            .await?;
    }
    let step = advance(&wf.definition, &HashMap::new());
    // A new run's roots are due: it cannot end here.
    super::step::apply_step(tx, &run, wf, &HashMap::new(), &step, now, limits).await?;
    Ok(run)
}

/// One node row of a run: its state and execution.
#[derive(Debug, Clone)]
pub(super) struct NodeRow {
    pub(super) status: NodeStatus,
    pub(super) execution_id: Option<String>,
}

/// The node rows of `runs`, by run and node id.
pub(super) async fn node_rows(
    tx: &mut Tx,
    runs: &[&str],
) -> StoreResult<HashMap<String, HashMap<String, NodeRow>>> {
    let found = fetch_chunked(&mut *tx, runs, |chunk| {
        let mut s = Sql::new(
            "SELECT run_id, node_id, status, execution_id FROM workflow_run_nodes WHERE run_id IN ",
        );
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut out: HashMap<String, HashMap<String, NodeRow>> = HashMap::new();
    for row in &found {
        let r = R::new(row, "workflow_run_nodes");
        out.entry(r.string("run_id")?).or_default().insert(
            r.string("node_id")?,
            NodeRow {
                status: r.parsed("status", NodeStatus::parse)?,
                execution_id: r.opt_string("execution_id")?,
            },
        );
    }
    Ok(out)
}

/// `running → end` for one run of `wf`; when it moved, a fixed-delay
/// schedule gets its next trigger ([`delay_after`]), and when the workflow
/// has a callback URL, its run-end event is queued in the outbox, in this
/// same transaction (so a run that ended has its callback, and only one).
/// `true` if a callback was queued.
pub(super) async fn end_run(
    tx: &mut Tx,
    run: &WorkflowRun,
    end: RunTransition,
    wf: Option<&StoredWorkflow>,
    now: Millis,
) -> StoreResult<bool> {
    let moved = Sql::new("UPDATE workflow_runs SET ")
        .set(
            &Fields::new()
                .with("status", end.to_state().as_str())
                .with("finished_at", time(now))
                .with("updated_at", time(now)),
        )
        .push(" WHERE id = ")
        .bind(run.id.as_str())
        .push(" AND status IN ")
        .list(end.from_states().iter().map(|s| s.as_str()))
        .execute(&mut *tx)
        .await?;
    if moved == 1
        && let Some(wf) = wf
    {
        delay_after(tx, wf, now).await?;
    }
    let callback_url = wf.and_then(|w| w.callback_url.as_deref());
    let Some(url) = callback_url.filter(|_| moved == 1) else {
        return Ok(false);
    };
    let ended = WorkflowRun {
        status: end.to_state(),
        finished_at: Some(now),
        ..run.clone()
    };
    let nodes = run_nodes(&mut *tx, &run.id).await?;
    let callback = inserts::new_run_callback(&ended, &nodes, url, now);
    inserts::callbacks(tx, std::slice::from_ref(&callback)).await?;
    Ok(true)
}

/// A fixed-delay workflow's next trigger, written when its last running run
/// has ended (`now`): `delayMs` after it, within the window
/// ([`kairos_core::schedule::Timeline::after_finish`], as for a job). Only
/// while no trigger is pending: a run ended by `replace`, or a manual run
/// beside a pending trigger, moves nothing; a deleted workflow gets none.
async fn delay_after(tx: &mut Tx, wf: &StoredWorkflow, now: Millis) -> StoreResult<()> {
    let Some(next) = wf
        .schedule
        .as_ref()
        .and_then(|s| s.recurrence())
        .and_then(|r| r.timeline().ok())
        .filter(|t| t.is_delay())
        .and_then(|t| t.after_finish(now))
    else {
        return Ok(());
    };
    let other = Sql::new("SELECT id FROM workflow_runs WHERE workflow_id = ")
        .bind(wf.id.as_str())
        .push(" AND status = ")
        .bind(RunStatus::Running.as_str())
        .push(" LIMIT 1")
        .fetch_optional(&mut *tx)
        .await?;
    if other.is_some() {
        return Ok(());
    }
    Sql::new("UPDATE workflows SET ")
        .set(
            &Fields::new()
                .with("next_trigger_at", time(Some(next)))
                .with("updated_at", time(now)),
        )
        .push(" WHERE id = ")
        .bind(wf.id.as_str())
        .push(" AND next_trigger_at IS NULL AND status <> ")
        .bind(kairos_core::workflow::WorkflowStatus::Deleted.as_str())
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// The running runs of a workflow, locked.
pub(super) async fn running_of(tx: &mut Tx, workflow_id: &str) -> StoreResult<Vec<WorkflowRun>> {
    let mut s = run_select();
    s.push(" WHERE r.workflow_id = ")
        .bind(workflow_id)
        .push(" AND r.status = ")
        .bind(RunStatus::Running.as_str())
        .for_update();
    s.fetch_all(tx).await?.iter().map(run_row).collect()
}

/// Ends a running run (locked by the caller) as cancelled: its unsettled
/// nodes are cancelled, their pending executions too, and a stop is
/// requested for the dispatched and running ones; with a callback URL, the
/// run-end event is queued.
pub(super) async fn cancel(
    tx: &mut Tx,
    run: &WorkflowRun,
    wf: Option<&StoredWorkflow>,
    now: Millis,
) -> StoreResult<()> {
    let found = Sql::new("SELECT execution_id FROM workflow_run_nodes WHERE run_id = ")
        .bind(run.id.as_str())
        .push(" AND status = ")
        .bind(NodeStatus::Active.as_str())
        .fetch_all(&mut *tx)
        .await?;
    let mut active = Vec::new();
    for row in &found {
        if let Some(id) = R::new(row, "workflow_run_nodes").opt_string("execution_id")? {
            active.push(id);
        }
    }
    let t = NodeTransition::Cancel;
    Sql::new("UPDATE workflow_run_nodes SET ")
        .set(
            &Fields::new()
                .with("status", t.to_state().as_str())
                .with("updated_at", time(now)),
        )
        .push(", decided_at = COALESCE(decided_at, ")
        .bind(time(now))
        .push(") WHERE run_id = ")
        .bind(run.id.as_str())
        .push(" AND status IN ")
        .list(t.from_states().iter().map(|s| s.as_str()))
        .execute(&mut *tx)
        .await?;
    let ids: Vec<&str> = active.iter().map(String::as_str).collect();
    cancel_pending(tx, &ids, now).await?;
    crate::stop::request_by_ids(tx, &ids, now).await?;
    end_run(tx, run, RunTransition::Cancel, wf, now).await?;
    Ok(())
}

/// Cancels those of `ids` still pending, with their events.
async fn cancel_pending(tx: &mut Tx, ids: &[&str], now: Millis) -> StoreResult<()> {
    let t = ExecTransition::Cancel;
    let from: Vec<&str> = t.from_states().iter().map(|s| s.as_str()).collect();
    let found = fetch_chunked(&mut *tx, ids, |chunk| {
        let mut s = Sql::new("SELECT id, attempt FROM executions WHERE id IN ");
        s.list(chunk.iter().copied())
            .push(" AND status IN ")
            .list(from.iter().copied())
            .for_update();
        s
    })
    .await?;
    let mut events = Vec::new();
    let mut cancelled = Vec::new();
    for row in &found {
        let r = R::new(row, "executions");
        let id = r.string("id")?;
        events.push(EventRow::plain(&id, r.u32("attempt")?, t.to_state(), now));
        cancelled.push(id);
    }
    let set = Fields::new()
        .with("status", t.to_state().as_str())
        .with("finished_at", time(now))
        .with("updated_at", time(now));
    for chunk in cancelled.chunks(CHUNK) {
        Sql::new("UPDATE executions SET ")
            .set(&set)
            .push(" WHERE id IN ")
            .list(chunk.iter().map(String::as_str))
            .push(" AND status IN ")
            .list(from.iter().copied())
            .execute(&mut *tx)
            .await?;
    }
    inserts::events(tx, &events).await
}

/// `workflow_run_cancel`'s transaction.
pub(super) async fn cancel_requested(
    mut tx: Tx,
    tenant: &str,
    workflow_id: &str,
    run_id: &str,
    now: Millis,
) -> StoreResult<RunControl> {
    let mut s = run_select();
    s.push(" WHERE r.tenant = ")
        .bind(tenant)
        .push(" AND r.workflow_id = ")
        .bind(workflow_id)
        .push(" AND r.id = ")
        .bind(run_id)
        .for_update();
    let Some(run) = s
        .fetch_optional(&mut tx)
        .await?
        .as_ref()
        .map(run_row)
        .transpose()?
    else {
        return tx.unchanged(RunControl::NotFound).await;
    };
    if !RunTransition::Cancel.allowed_from(run.status) {
        return tx.unchanged(RunControl::Conflict(run)).await;
    }
    let wf = super::get_workflow(&mut tx, tenant, workflow_id, false).await?;
    cancel(&mut tx, &run, wf.as_ref(), now).await?;
    tx.commit().await?;
    Ok(RunControl::Done(WorkflowRun {
        status: RunStatus::Cancelled,
        finished_at: Some(now),
        ..run
    }))
}

/// A workflow's runs, newest trigger first.
pub(super) async fn list(
    pool: &crate::db::Pool,
    tenant: &str,
    workflow_id: &str,
    limit: u32,
    cursor: Option<&str>,
) -> StoreResult<Page<WorkflowRun>> {
    let mut s = run_select();
    s.push(" WHERE r.tenant = ")
        .bind(tenant)
        .push(" AND r.workflow_id = ")
        .bind(workflow_id);
    keyset::fetch(
        pool,
        &s,
        cursor,
        limit,
        ("r.scheduled_at", "r.id"),
        run_row,
        |r| (r.scheduled_at, r.id.as_str()),
    )
    .await
}

/// One run with its nodes and their executions.
pub(super) async fn detail(
    pool: &crate::db::Pool,
    tenant: &str,
    workflow_id: &str,
    run_id: &str,
) -> StoreResult<Option<RunDetail>> {
    let mut s = run_select();
    s.push(" WHERE r.tenant = ")
        .bind(tenant)
        .push(" AND r.workflow_id = ")
        .bind(workflow_id)
        .push(" AND r.id = ")
        .bind(run_id);
    let Some(run) = s
        .fetch_optional(pool)
        .await?
        .as_ref()
        .map(run_row)
        .transpose()?
    else {
        return Ok(None);
    };
    let Some(wf) = super::get_workflow(pool, tenant, workflow_id, false).await? else {
        return Ok(None);
    };
    let definition = super::control::as_of_version(pool, &wf, run.definition_version)
        .await?
        .definition;
    let nodes = run_nodes(pool, &run.id).await?;
    Ok(Some(RunDetail {
        run,
        definition,
        nodes,
    }))
}

/// A run's nodes with their executions, in the workflow's node order.
async fn run_nodes(on: impl Into<On<'_>>, run_id: &str) -> StoreResult<Vec<RunNode>> {
    let found = Sql::new(
        "SELECT n.node_id AS node_id, n.status AS status, n.execution_id AS execution_id, \
         n.decided_at AS decided_at, e.status AS exec_status, e.attempt AS exec_attempt, \
         e.started_at AS started_at, e.finished_at AS finished_at \
         FROM workflow_run_nodes n LEFT JOIN executions e ON e.id = n.execution_id \
         WHERE n.run_id = ",
    )
    .bind(run_id)
    .push(" ORDER BY n.position")
    .fetch_all(on)
    .await?;
    let mut nodes = Vec::with_capacity(found.len());
    for row in &found {
        let r = R::new(row, "workflow_run_nodes");
        let exec_status = r.opt_string("exec_status")?;
        nodes.push(RunNode {
            node_id: r.string("node_id")?,
            status: r.parsed("status", NodeStatus::parse)?,
            execution_id: r.opt_string("execution_id")?,
            execution_status: exec_status.as_deref().and_then(ExecStatus::parse),
            attempt: r
                .opt_i64("exec_attempt")?
                .and_then(|a| u32::try_from(a).ok()),
            decided_at: r.opt_time("decided_at")?,
            started_at: r.opt_time("started_at")?,
            finished_at: r.opt_time("finished_at")?,
        });
    }
    Ok(nodes)
}

/// The runs named, locked, oldest id first (a fixed order, so two
/// transactions locking overlapping sets do not deadlock on each other).
pub(super) async fn lock_runs(tx: &mut Tx, ids: &[&str]) -> StoreResult<Vec<WorkflowRun>> {
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let found = fetch_chunked(&mut *tx, &sorted, |chunk| {
        let mut s = run_select();
        s.push(" WHERE r.id IN ")
            .list(chunk.iter().copied())
            .push(" ORDER BY r.id")
            .for_update();
        s
    })
    .await?;
    found.iter().map(run_row).collect()
}

/// Workflows by id.
pub(super) async fn workflows_by_id(
    tx: &mut Tx,
    ids: &[&str],
) -> StoreResult<BTreeMap<String, StoredWorkflow>> {
    let found = fetch_chunked(&mut *tx, ids, |chunk| {
        let mut s = super::workflow_select();
        s.push(" WHERE w.id IN ").list(chunk.iter().copied());
        s
    })
    .await?;
    found
        .iter()
        .map(|row| super::workflow_row(row).map(|w| (w.id.clone(), w)))
        .collect()
}
