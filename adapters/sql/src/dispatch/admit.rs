//! Admission of `pending` work before it is published: the dispatch is
//! recorded first (`pending → dispatched` to the chosen worker), under the
//! concurrency gate, so nothing over a limit ever reaches a worker's queue.
//! Fenced like a claim (the leader's fence, share-locked); the gate takes
//! its own lock when a limit applies.

use super::fence::check_fence;
use crate::concurrency::{self, Candidate};
use crate::db::Tx;
use crate::inserts::{self, EventRow};
use crate::moves::{lock_states, move_group};
use crate::rows::R;
use crate::sql::{self, Fields, Sql, time};
use kairos_core::concurrency::Admission;
use kairos_core::execution::ExecTransition;
use kairos_core::store::{Admitted, DispatchedTo, StoreResult};
use kairos_core::time::Millis;
use std::collections::{BTreeMap, HashMap};

/// What the gate needs of an execution: its tenant, job, handler and the
/// job's own limit.
struct Owner {
    tenant: String,
    job_id: String,
    handler: String,
    max_concurrency: Option<u32>,
}

/// `executions_admit`'s transaction.
pub(super) async fn admit(
    mut tx: Tx,
    fence: u64,
    picks: &[DispatchedTo],
    now: Millis,
) -> StoreResult<Admitted> {
    check_fence(&mut tx, fence).await?;
    let state = lock_states(&mut tx, picks.iter().map(|p| p.execution_id.as_str())).await?;
    let t = ExecTransition::Dispatch;
    let movable: Vec<&DispatchedTo> = picks
        .iter()
        .filter(|p| {
            state
                .get(&p.execution_id)
                .is_some_and(|(attempt, status, _)| {
                    *attempt == p.attempt && t.allowed_from(*status)
                })
        })
        .collect();
    let owners = owners(&mut tx, &movable).await?;
    let movable: Vec<(&DispatchedTo, &Owner)> = movable
        .into_iter()
        .filter_map(|p| owners.get(&p.execution_id).map(|o| (p, o)))
        .collect();
    let candidates: Vec<Candidate<'_>> = movable
        .iter()
        .map(|(p, o)| Candidate {
            execution_id: &p.execution_id,
            handler: &o.handler,
            tenant: &o.tenant,
            job_id: &o.job_id,
            max_concurrency: o.max_concurrency,
        })
        .collect();
    let decisions = concurrency::gate(&mut tx, &candidates, now).await?;

    let mut out = Admitted::default();
    let mut groups: BTreeMap<(&str, u32), Vec<&str>> = BTreeMap::new();
    let mut waiting: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut events = Vec::new();
    for ((p, _), d) in movable.iter().zip(decisions) {
        let target = (p.execution_id.clone(), p.attempt);
        if let Admission::RateLimited(_, at) = &d {
            out.retry_at = Some(out.retry_at.map_or(*at, |t: Millis| t.min(*at)));
        }
        match d.waiting_for() {
            Some(key) => {
                waiting.entry(key).or_default().push(&p.execution_id);
                out.waiting.push(target);
            }
            None => {
                groups
                    .entry((p.worker_id.as_str(), p.attempt))
                    .or_default()
                    .push(&p.execution_id);
                events.push(EventRow {
                    worker_id: Some(p.worker_id.clone()),
                    ..EventRow::plain(&p.execution_id, p.attempt, t.to_state(), now)
                });
                out.dispatched.push(target);
            }
        }
    }
    for ((worker, attempt), ids) in &groups {
        let sets = Fields::new()
            .with("worker_id", *worker)
            .with("dispatched_at", time(now))
            .with("waiting_for", None::<&str>)
            .with("updated_at", time(now));
        move_group(&mut tx, t, &sets, ids, *attempt).await?;
    }
    for (key, ids) in &waiting {
        for chunk in ids.chunks(sql::CHUNK) {
            Sql::new("UPDATE executions SET waiting_for = ")
                .bind(key.as_str())
                .push(" WHERE id IN ")
                .list(chunk.iter().copied())
                .execute(&mut tx)
                .await?;
        }
    }
    inserts::events(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(out)
}

/// The owners of the named executions, by execution id.
async fn owners(tx: &mut Tx, picks: &[&DispatchedTo]) -> StoreResult<HashMap<String, Owner>> {
    let ids: Vec<&str> = picks.iter().map(|p| p.execution_id.as_str()).collect();
    let rows = sql::fetch_chunked(&mut *tx, &ids, |chunk| {
        let mut s = Sql::new(
            "SELECT e.id AS id, e.tenant AS tenant, e.job_id AS job_id, j.handler AS handler, \
             j.max_concurrency AS max_concurrency \
             FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.id IN ",
        );
        s.list(chunk.iter().copied());
        s
    })
    .await?;
    let mut owners = HashMap::with_capacity(rows.len());
    for row in &rows {
        let r = R::new(row, "executions");
        owners.insert(
            r.string("id")?,
            Owner {
                tenant: r.string("tenant")?,
                job_id: r.string("job_id")?,
                handler: r.string("handler")?,
                max_concurrency: r
                    .opt_u64("max_concurrency")?
                    .and_then(|v| u32::try_from(v).ok()),
            },
        );
    }
    Ok(owners)
}
