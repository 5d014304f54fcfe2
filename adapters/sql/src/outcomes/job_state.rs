//! The job side of applying results: what a job does once an execution
//! ends ([`Continuation`]) and how many of its executions are still live.

use crate::db::Tx;
use crate::rows::R;
use crate::sql::{Sql, fetch_chunked};
use kairos_core::execution::ExecStatus;
use kairos_core::job::{JobStatus, RetryPolicy};
use kairos_core::outcome::Continuation;
use kairos_core::store::StoreResult;
use std::collections::{HashMap, HashSet};

/// The job of one or more executions in the batch, as it is now.
pub(super) struct JobState {
    pub(super) status: JobStatus,
    /// Its handler: a limit's scope.
    pub(super) handler: String,
    pub(super) continuation: Continuation,
    pub(super) retry: RetryPolicy,
    pub(super) timeout_ms: Option<u64>,
    pub(super) callback_url: Option<String>,
    /// Live executions of the job (counted only when it may end with them).
    pub(super) live: u64,
    /// Its failures in a row, as the batch has moved them so far.
    pub(super) fail_streak: u32,
    /// Whether it backs a workflow node (its ended executions move a run).
    /// Such a job has no trigger of its own: results neither move it nor
    /// record anything on it, so its row is not locked (every run's
    /// execution of the node shares it; see `load`).
    pub(super) workflow: bool,
    /// Whether it names follow-up jobs (its ended executions trigger them).
    pub(super) followups: bool,
}

/// What the job does after an execution ends, from its stored columns.
pub(super) fn continuation(r: &R<'_>) -> StoreResult<Continuation> {
    if r.opt_time("next_trigger_at")?.is_some() {
        return Ok(Continuation::Scheduled);
    }
    Ok(match r.string("schedule_kind")?.as_str() {
        "once" => Continuation::OneShot,
        "delay" => Continuation::Delay {
            delay_ms: r.opt_u64("delay_ms")?.unwrap_or_default(),
            end_at: r.opt_time("end_at")?,
        },
        _ => Continuation::Ended,
    })
}

/// Counts the live executions of the jobs among `finishing` (those with
/// a final outcome in the batch) that end with their executions
/// (one-shots, and recurring jobs with no trigger left; not a workflow
/// node's job, which never ends with them): one statement per batch, so a
/// job waits for its last live execution to end.
pub(super) async fn count_live(
    tx: &mut Tx,
    jobs: &mut HashMap<String, JobState>,
    finishing: &HashSet<&str>,
) -> StoreResult<()> {
    let ending: Vec<String> = jobs
        .iter()
        .filter(|(id, j)| {
            finishing.contains(id.as_str())
                && !j.workflow
                && matches!(j.continuation, Continuation::OneShot | Continuation::Ended)
        })
        .map(|(id, _)| id.clone())
        .collect();
    let counts = fetch_chunked(&mut *tx, &ending, |chunk| {
        let mut s = Sql::new("SELECT job_id, COUNT(*) AS n FROM executions WHERE job_id IN ");
        s.list(chunk)
            .push(" AND status IN ")
            .list(ExecStatus::LIVE.iter().map(|st| st.as_str()))
            .push(" GROUP BY job_id");
        s
    })
    .await?;
    for row in &counts {
        let r = R::new(row, "executions");
        if let Some(job) = jobs.get_mut(&r.string("job_id")?) {
            job.live = u64::try_from(r.i64("n")?).unwrap_or_default();
        }
    }
    Ok(())
}
