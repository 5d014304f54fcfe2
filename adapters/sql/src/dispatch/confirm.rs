//! Publisher confirms (`pending → dispatched`) and reroutes of refused
//! dispatches: batched moves of named attempts, one locking read, one update
//! per group and one event insert.

use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::moves::{lock_states, move_group};
use crate::sql::{Fields, time};
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::store::{DispatchedTo, Marked, StoreResult};
use kairos_core::time::Millis;
use std::collections::BTreeMap;

/// `executions_mark_dispatched`'s transaction.
pub(super) async fn mark_dispatched(
    mut tx: Tx,
    sent: &[DispatchedTo],
    now: Millis,
) -> StoreResult<Marked> {
    let mut state = lock_states(&mut tx, sent.iter().map(|s| s.execution_id.as_str())).await?;
    let t = ExecTransition::Dispatch;
    let mut groups: BTreeMap<(&str, u32), Vec<&str>> = BTreeMap::new();
    let mut events = Vec::new();
    let mut cancelled = Vec::new();
    for s in sent {
        let Some((attempt, status, _)) = state.get_mut(&s.execution_id) else {
            continue;
        };
        if *attempt == s.attempt && *status == ExecStatus::Cancelled {
            cancelled.push((s.execution_id.clone(), s.attempt));
        }
        if *attempt != s.attempt || !t.allowed_from(*status) {
            continue;
        }
        *status = t.to_state();
        groups
            .entry((s.worker_id.as_str(), s.attempt))
            .or_default()
            .push(&s.execution_id);
        events.push(EventRow {
            worker_id: Some(s.worker_id.clone()),
            ..EventRow::plain(&s.execution_id, s.attempt, t.to_state(), now)
        });
    }
    let mut changed = 0;
    for ((worker, attempt), ids) in &groups {
        let sets = Fields::new()
            .with("worker_id", *worker)
            .with("dispatched_at", time(now))
            .with("updated_at", time(now));
        changed += move_group(&mut tx, t, &sets, ids, *attempt).await?;
    }
    inserts::events(&mut tx, &events).await?;
    tx.commit().await?;
    cancelled.sort();
    cancelled.dedup();
    Ok(Marked {
        dispatched: changed,
        cancelled,
    })
}

/// `execution_mark_rerouted`'s transaction.
pub(super) async fn mark_rerouted(
    mut tx: Tx,
    sent: &DispatchedTo,
    reason: &str,
    now: Millis,
) -> StoreResult<bool> {
    let sets = Fields::new()
        .with("worker_id", &sent.worker_id)
        .with("updated_at", time(now));
    let changed = move_group(
        &mut tx,
        ExecTransition::Reroute,
        &sets,
        &[sent.execution_id.as_str()],
        sent.attempt,
    )
    .await?;
    if changed > 0 {
        let event = EventRow {
            worker_id: Some(sent.worker_id.clone()),
            error: Some(reason.to_string()),
            ..EventRow::plain(
                &sent.execution_id,
                sent.attempt,
                ExecStatus::Dispatched,
                now,
            )
        };
        inserts::events(&mut tx, &[event]).await?;
    }
    tx.commit().await?;
    Ok(changed > 0)
}
