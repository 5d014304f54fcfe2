//! Handing back attempts that never started (`dispatched → pending`, same
//! attempt): one locking read, one update per attempt number and one event
//! insert.

use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::moves::{lock_states, move_group};
use crate::sql::{Fields, time};
use kairos_core::execution::ExecTransition;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use std::collections::BTreeMap;

/// `executions_requeue_unstarted`'s transaction.
pub(super) async fn requeue_unstarted(
    mut tx: Tx,
    targets: &[(String, u32)],
    reason: &str,
    now: Millis,
) -> StoreResult<u64> {
    let mut state = lock_states(&mut tx, targets.iter().map(|(id, _)| id.as_str())).await?;
    let t = ExecTransition::Requeue;
    let mut groups: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    let mut events = Vec::new();
    for (id, want) in targets {
        let Some((attempt, status, worker)) = state.get_mut(id) else {
            continue;
        };
        if attempt != want || !t.allowed_from(*status) {
            continue;
        }
        *status = t.to_state();
        groups.entry(*want).or_default().push(id);
        events.push(EventRow {
            worker_id: worker.take(),
            error: Some(reason.to_string()),
            ..EventRow::plain(id, *want, t.to_state(), now)
        });
    }
    let mut changed = 0;
    for (attempt, ids) in &groups {
        // `not_before` stays: publishable at once if its due time has
        // passed, and not before it if it was claimed ahead of it.
        let sets = Fields::new()
            .with("worker_id", None::<String>)
            .with("dispatched_at", time(None))
            .with("updated_at", time(now));
        changed += move_group(&mut tx, t, &sets, ids, *attempt).await?;
    }
    inserts::events(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(changed)
}
