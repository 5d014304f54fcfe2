//! Scheduled workflows: the leading dispatcher's call that starts the runs
//! of the workflows whose next trigger is due, and moves each to its
//! following trigger, in one transaction — with a job's misfire and overlap
//! policies and window, decided by the same pure functions
//! ([`kairos_core::trigger::due_triggers`] and [`kairos_core::trigger::resolve`]).

use super::{runs, workflow_row, workflow_select};
use crate::db::Tx;
use crate::sql::{Fields, Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::schedule::{OverlapPolicy, Schedule};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::trigger::{self, FIRE_ALL_PER_ROUND, Fate};
use kairos_core::workflow::budget::RunLimits;
use kairos_core::workflow::{WorkflowRun, WorkflowScheduler, WorkflowStatus};

async fn fire_due(
    mut tx: Tx,
    now: Millis,
    limit: u32,
    limits: RunLimits,
) -> StoreResult<Vec<WorkflowRun>> {
    let mut s = workflow_select();
    s.push(" WHERE w.status = ")
        .bind(WorkflowStatus::Active.as_str())
        .push(" AND w.next_trigger_at <= ")
        .bind(time(now))
        .push(" ORDER BY w.next_trigger_at LIMIT ")
        .bind(i64::from(limit))
        .for_update();
    let due = s
        .fetch_all(&mut tx)
        .await?
        .iter()
        .map(workflow_row)
        .collect::<StoreResult<Vec<_>>>()?;
    let mut started = Vec::with_capacity(due.len());
    let mut budget = FIRE_ALL_PER_ROUND;
    for wf in &due {
        let Some(at) = wf.next_trigger_at else {
            continue;
        };
        // A trigger without a schedule fires once.
        let once = Schedule::Once { at };
        let schedule = wf.schedule.as_ref().unwrap_or(&once);
        // The job's own decisions: the misfire policy picks the triggers
        // (and the next one), the overlap policy what each becomes.
        let triggers = trigger::due_triggers(schedule, at, now, &mut budget);
        let dues: Vec<Millis> = triggers.iter().map(|t| t.0).collect();
        let next = triggers.last().and_then(|t| t.1);
        let overlap = schedule
            .recurrence()
            .map_or(OverlapPolicy::Allow, |r| r.overlap);
        let live = if overlap == OverlapPolicy::Allow {
            Vec::new()
        } else {
            runs::running_of(&mut tx, &wf.id).await?
        };
        let resolution = trigger::resolve(schedule, &dues, !live.is_empty(), next.is_some(), now);
        if resolution.stop_live {
            // `replace`: the running runs end cancelled (stops requested
            // for their running executions) before the new one starts.
            for run in &live {
                runs::cancel(&mut tx, run, Some(wf), now).await?;
            }
        }
        // A trigger `forbid` skips, or a misfire `skip` drops, starts no
        // run: workflows keep no record of skipped triggers.
        for (due_at, fate) in dues.iter().zip(&resolution.fates) {
            if *fate == Fate::Dispatch {
                let run_id = uuid::Uuid::now_v7().to_string();
                started.push(runs::start(&mut tx, wf, &run_id, *due_at, now, limits).await?);
            }
        }
        Sql::new("UPDATE workflows SET ")
            .set(
                &Fields::new()
                    .with("next_trigger_at", time(next))
                    .with("updated_at", time(now)),
            )
            .push(" WHERE id = ")
            .bind(wf.id.as_str())
            .execute(&mut tx)
            .await?;
    }
    tx.commit().await?;
    Ok(started)
}

#[async_trait]
impl WorkflowScheduler for SqlStore {
    async fn workflows_fire_due(&self, now: Millis, limit: u32) -> StoreResult<Vec<WorkflowRun>> {
        // A read first, on the read pool: most rounds find nothing due, and
        // then cost no write transaction (SQLite has a single writer).
        let any = Sql::new("SELECT w.id AS id FROM workflows w WHERE w.status = ")
            .bind(WorkflowStatus::Active.as_str())
            .push(" AND w.next_trigger_at <= ")
            .bind(time(now))
            .push(" LIMIT 1")
            .fetch_optional(self.read())
            .await?;
        if any.is_none() {
            return Ok(Vec::new());
        }
        self.transaction(|tx| fire_due(tx, now, limit, self.run_limits()))
            .await
    }
}
