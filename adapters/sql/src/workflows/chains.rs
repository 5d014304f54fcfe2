//! Firing follow-ups as chains (issue 44). What one trigger's follow-ups set
//! off is a **chain**, named by the execution that started it (one of a job
//! with follow-ups that was not itself a follow-up). A chain behaves like a
//! workflow run:
//!
//! - each job runs at most once in it (`followup_chain_jobs`, keyed
//!   `(chain_id, job_id)`): a job following four parents that all end runs
//!   once, not four times, so a layered graph cannot multiply;
//! - it has a budget of executions (`RunLimits::max_executions`, its first
//!   execution included, counted in `followup_chains.executions`). Once it
//!   is spent, a follow-up due is recorded as a `skipped` execution of the
//!   child with the reason as its error (what `GET …/executions` shows),
//!   and the chain is marked stopped (`stopped_at`).
//!
//! The chain rows are locked (`FOR UPDATE`, in id order; SQLite's single
//! writer serializes anyway) before the chain's jobs are read, under READ
//! COMMITTED: two dispatchers ending two parents of one child in the same
//! chain take turns, and the second sees the child already run.

use super::followups::free_slot;
use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::rows::{self, R};
use crate::sql::{CHUNK, Fields, Sql, fetch_chunked, from_u64, time};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::{Job, JobStatus};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::followup::FollowUpOn;
use std::collections::{BTreeMap, HashMap, HashSet};

/// One chain this transaction fires follow-ups in, as its row is now.
struct Chain {
    /// Executions it has made.
    made: u64,
    /// Whether its budget stopped it before this transaction.
    stopped: bool,
    /// Whether this transaction changed it.
    changed: bool,
    /// Jobs it ran (or refused), each once.
    jobs: HashSet<String>,
}

/// Fires the follow-ups of `ended` (executions of jobs with follow-ups
/// that reached a final state in this transaction). A broadcast or sharded
/// trigger's shards fire none (one trigger, many ends). Children that are
/// paused or cancelled are not triggered.
pub(crate) async fn fire(
    tx: &mut Tx,
    ended: &[&Execution],
    now: Millis,
    limits: RunLimits,
) -> StoreResult<()> {
    let ended: Vec<&Execution> = ended
        .iter()
        .copied()
        .filter(|e| !e.shard.is_fanned_out())
        .collect();
    let due = due_children(tx, &ended).await?;
    if due.is_empty() {
        return Ok(());
    }
    let parents: Vec<&Execution> = ended
        .iter()
        .copied()
        .filter(|e| due.contains_key(e.id.as_str()))
        .collect();
    let chain_of = chains_of(tx, &parents, now).await?;
    let mut chains = lock_chains(tx, &chain_of).await?;
    // Each chain's candidates, in chain order then parent order: a child
    // already in its chain (run by another parent) is left out.
    let mut wanted: Vec<(String, String, &str)> = Vec::new();
    for e in &parents {
        let Some(chain_id) = chain_of.get(e.id.as_str()) else {
            continue;
        };
        let Some(chain) = chains.get_mut(chain_id) else {
            continue;
        };
        for child in due.get(e.id.as_str()).into_iter().flatten() {
            if chain.jobs.insert(child.clone()) {
                wanted.push((chain_id.clone(), child.clone(), e.tenant.as_str()));
            }
        }
    }
    let jobs = lock_jobs(tx, &wanted).await?;
    let mut members = Vec::new();
    let mut events = Vec::new();
    for (chain_id, child, _) in &wanted {
        let Some(job) = jobs.get(child) else {
            continue;
        };
        let Some(chain) = chains.get_mut(chain_id) else {
            continue;
        };
        if matches!(job.status, JobStatus::Paused | JobStatus::Cancelled) {
            // Not triggered, and not a member: a later parent's end in the
            // chain may trigger it once it is resumed.
            continue;
        }
        let (status, error) = if limits.chain_may_run(chain.made) {
            chain.made += 1;
            (ExecStatus::Pending, None)
        } else {
            chain.stopped = true;
            (
                ExecStatus::Skipped,
                Some(limits.chain_spent_message(chain_id)),
            )
        };
        chain.changed = true;
        let id = insert_execution(tx, job, status, error.as_deref(), now).await?;
        events.push(EventRow {
            error,
            ..EventRow::plain(&id, 1, status, now)
        });
        members.push(member(chain_id, child, &id));
    }
    inserts::events(tx, &events).await?;
    for chunk in members.chunks(CHUNK) {
        Sql::new("INSERT INTO followup_chain_jobs")
            .rows(chunk)
            .execute(&mut *tx)
            .await?;
    }
    for (id, chain) in chains.iter().filter(|(_, c)| c.changed) {
        let mut f = Fields::new().with("executions", from_u64(chain.made));
        if chain.stopped {
            f.set("stopped_at", time(now));
        }
        Sql::new("UPDATE followup_chains SET ")
            .set(&f)
            .push(" WHERE chain_id = ")
            .bind(id.as_str())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// The follow-up jobs each of `ended` triggers, by execution id (each child
/// once per parent, in the order they were set).
async fn due_children(
    tx: &mut Tx,
    ended: &[&Execution],
) -> StoreResult<HashMap<String, Vec<String>>> {
    let parents: Vec<&str> = {
        let set: HashSet<&str> = ended.iter().map(|e| e.job_id.as_str()).collect();
        set.into_iter().collect()
    };
    let found = fetch_chunked(&mut *tx, &parents, |chunk| {
        let mut s =
            Sql::new("SELECT job_id, outcome, child_id FROM job_followups WHERE job_id IN ");
        s.list(chunk.iter().copied())
            .push(" ORDER BY created_at, child_id");
        s
    })
    .await?;
    let mut children: HashMap<(String, FollowUpOn), Vec<String>> = HashMap::new();
    for row in &found {
        let r = R::new(row, "job_followups");
        children
            .entry((r.string("job_id")?, r.parsed("outcome", FollowUpOn::parse)?))
            .or_default()
            .push(r.string("child_id")?);
    }
    let mut due = HashMap::new();
    for e in ended {
        if let Some(on) = FollowUpOn::of(e.status)
            && let Some(list) = children.get(&(e.job_id.clone(), on))
        {
            let mut seen = HashSet::new();
            let list: Vec<String> = list.iter().filter(|c| seen.insert(*c)).cloned().collect();
            due.insert(e.id.clone(), list);
        }
    }
    Ok(due)
}

/// The chain of each parent, by execution id: the one its execution was
/// fired in, or a new one it starts (named by its execution, with it as
/// its first execution and its job as its first member).
async fn chains_of(
    tx: &mut Tx,
    parents: &[&Execution],
    now: Millis,
) -> StoreResult<HashMap<String, String>> {
    let ids: Vec<&str> = parents.iter().map(|e| e.id.as_str()).collect();
    let found = fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new(
            "SELECT chain_id, execution_id FROM followup_chain_jobs WHERE execution_id IN ",
        );
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut chain_of = HashMap::with_capacity(parents.len());
    for row in &found {
        let r = R::new(row, "followup_chain_jobs");
        chain_of.insert(r.string("execution_id")?, r.string("chain_id")?);
    }
    let roots: Vec<&&Execution> = parents
        .iter()
        .filter(|e| !chain_of.contains_key(e.id.as_str()))
        .collect();
    let chains: Vec<Fields> = roots
        .iter()
        .map(|e| {
            Fields::new()
                .with("chain_id", e.id.as_str())
                .with("tenant", e.tenant.as_str())
                .with("executions", 1_i64)
                .with("stopped_at", time(None::<Millis>))
                .with("created_at", time(now))
        })
        .collect();
    let firsts: Vec<Fields> = roots
        .iter()
        .map(|e| member(&e.id, &e.job_id, &e.id))
        .collect();
    for (table, rows) in [
        ("followup_chains", &chains),
        ("followup_chain_jobs", &firsts),
    ] {
        for chunk in rows.chunks(CHUNK) {
            let mut s = Sql::new("INSERT INTO ");
            s.push(table).rows(chunk);
            s.execute(&mut *tx).await?;
        }
    }
    for e in roots {
        chain_of.insert(e.id.clone(), e.id.clone());
    }
    Ok(chain_of)
}

/// Locks the chains (in id order) and reads each with its members.
async fn lock_chains(
    tx: &mut Tx,
    chain_of: &HashMap<String, String>,
) -> StoreResult<BTreeMap<String, Chain>> {
    let ids: Vec<&str> = {
        let set: HashSet<&str> = chain_of.values().map(String::as_str).collect();
        let mut v: Vec<&str> = set.into_iter().collect();
        v.sort_unstable();
        v
    };
    let found = fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new(
            "SELECT chain_id, executions, stopped_at FROM followup_chains WHERE chain_id IN ",
        );
        s.list(chunk.iter().copied())
            .push(" ORDER BY chain_id")
            .for_update();
        s
    })
    .await?;
    let mut chains = BTreeMap::new();
    for row in &found {
        let r = R::new(row, "followup_chains");
        chains.insert(
            r.string("chain_id")?,
            Chain {
                made: r.opt_u64("executions")?.unwrap_or_default(),
                stopped: r.opt_time("stopped_at")?.is_some(),
                changed: false,
                jobs: HashSet::new(),
            },
        );
    }
    let members = fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new("SELECT chain_id, job_id FROM followup_chain_jobs WHERE chain_id IN ");
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    for row in &members {
        let r = R::new(row, "followup_chain_jobs");
        if let Some(c) = chains.get_mut(&r.string("chain_id")?) {
            c.jobs.insert(r.string("job_id")?);
        }
    }
    Ok(chains)
}

/// Locks the children's job rows in id order (their trigger times are then
/// picked by one transaction at a time) and reads them.
async fn lock_jobs(
    tx: &mut Tx,
    wanted: &[(String, String, &str)],
) -> StoreResult<HashMap<String, Job>> {
    let mut ids: Vec<&str> = wanted.iter().map(|(_, c, _)| c.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let found = fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new("SELECT ");
        s.columns("j", &rows::JOB_COLS)
            .push(" FROM jobs j WHERE j.id IN ")
            .list(chunk.iter().copied())
            .push(" ORDER BY j.id")
            .for_update();
        s
    })
    .await?;
    let mut by_id = HashMap::with_capacity(found.len());
    for row in &found {
        let j = rows::job(row)?;
        by_id.insert(j.id.clone(), j);
    }
    Ok(by_id)
}

/// Inserts an execution of `job` at its first free trigger time from now:
/// `pending` and due now, or `skipped` with `error`. Its id.
async fn insert_execution(
    tx: &mut Tx,
    job: &Job,
    status: ExecStatus,
    error: Option<&str>,
    now: Millis,
) -> StoreResult<String> {
    let at = free_slot(tx, &job.id, now).await?;
    let id = uuid::Uuid::now_v7().to_string();
    let row = Fields::new()
        .with("id", id.as_str())
        .with("job_id", job.id.as_str())
        .with("tenant", job.tenant.as_str())
        .with("scheduled_at", time(at))
        .with("attempt", 1_i64)
        .with("status", status.as_str())
        .with("error", error)
        .with("not_before", time(now))
        .with("finished_at", time(status.is_terminal().then_some(now)))
        .with("created_at", time(now))
        .with("updated_at", time(now))
        .with("shard_index", 0_i64)
        .with("shard_count", 1_i64);
    Sql::new("INSERT INTO executions")
        .rows([&row])
        .execute(&mut *tx)
        .await?;
    Ok(id)
}

/// A `followup_chain_jobs` row.
fn member(chain_id: &str, job_id: &str, execution_id: &str) -> Fields {
    Fields::new()
        .with("chain_id", chain_id)
        .with("job_id", job_id)
        .with("execution_id", execution_id)
}
