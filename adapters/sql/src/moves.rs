//! Batched moves of named attempts, shared by the publisher's confirms and
//! reroutes and the requeue of attempts that never started: one locking read
//! of the executions, then one conditional update per group.

use crate::db::Tx;
use crate::rows::R;
use crate::sql::{self, CHUNK, Fields, Sql};
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::store::StoreResult;
use std::collections::{HashMap, HashSet};

/// An execution's current attempt, state and worker, as locked.
pub(crate) type Locked = HashMap<String, (u32, ExecStatus, Option<String>)>;

/// Locks the named executions and returns their `(attempt, status, worker)`.
pub(crate) async fn lock_states(
    tx: &mut Tx,
    ids: impl Iterator<Item = &str>,
) -> StoreResult<Locked> {
    let mut seen = HashSet::new();
    let ids: Vec<&str> = ids.filter(|id| seen.insert(*id)).collect();
    let mut state = HashMap::with_capacity(ids.len());
    let rows = sql::fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new("SELECT id, attempt, status, worker_id FROM executions WHERE id IN ");
        s.list(chunk.iter().copied()).for_update();
        s
    })
    .await?;
    for row in &rows {
        let r = R::new(row, "executions");
        state.insert(
            r.string("id")?,
            (
                r.u32("attempt")?,
                r.exec_status("status")?,
                r.opt_string("worker_id")?,
            ),
        );
    }
    Ok(state)
}

/// `UPDATE executions SET status = <t's state>, <sets> WHERE id IN (ids) AND
/// attempt = <attempt> AND status IN (<t's from states>)`, chunked; rows changed.
pub(crate) async fn move_group(
    tx: &mut Tx,
    t: ExecTransition,
    sets: &Fields,
    ids: &[&str],
    attempt: u32,
) -> StoreResult<u64> {
    let from = t.from_states();
    let mut changed = 0;
    for chunk in ids.chunks(CHUNK) {
        changed += Sql::new("UPDATE executions SET status = ")
            .bind(t.to_state().as_str())
            .push(", ")
            .set(sets)
            .push(" WHERE id IN ")
            .list(chunk.iter().copied())
            .push(" AND attempt = ")
            .bind(attempt)
            .push(" AND status IN ")
            .list(from.iter().map(|s| s.as_str()))
            .execute(&mut *tx)
            .await?;
    }
    Ok(changed)
}
