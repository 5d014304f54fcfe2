//! Scheduled workflows: the leading dispatcher's call that starts the runs
//! of the workflows whose next trigger is due, and moves each to its
//! following trigger, in one transaction.

use super::{runs, workflow_row, workflow_select};
use crate::db::Tx;
use crate::sql::{Fields, Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::workflow::{WorkflowRun, WorkflowScheduler, WorkflowStatus};

async fn fire_due(mut tx: Tx, now: Millis, limit: u32) -> StoreResult<Vec<WorkflowRun>> {
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
    for wf in &due {
        let Some(at) = wf.next_trigger_at else {
            continue;
        };
        let run_id = uuid::Uuid::now_v7().to_string();
        started.push(runs::start(&mut tx, wf, &run_id, at, now).await?);
        // A recurring schedule's next trigger at or after now (a miss fires
        // once); a one-shot has none left.
        let next = wf.schedule.as_ref().and_then(|s| s.next_trigger(at, now));
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
        self.transaction(|tx| fire_due(tx, now, limit)).await
    }
}
