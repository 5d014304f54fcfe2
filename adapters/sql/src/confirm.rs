//! Publisher confirms (`pending → dispatched`) and the requeue of attempts
//! that never started (`dispatched → pending`): batched moves of named
//! attempts, one locking read, one update per group and one event insert.

use super::SqlStore;
use super::db::Tx;
use super::error::retrying;
use super::inserts::{self, EventRow};
use super::rows::R;
use super::sql::{self, CHUNK, Fields, Sql, time};
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::store::{DispatchedTo, Marked, StoreResult};
use kairos_core::time::Millis;
use std::collections::{BTreeMap, HashMap, HashSet};

impl SqlStore {
    /// Locks the named executions and returns their `(attempt, status, worker)`.
    async fn lock_states(
        &self,
        tx: &mut Tx,
        ids: impl Iterator<Item = &str>,
    ) -> StoreResult<HashMap<String, (u32, ExecStatus, Option<String>)>> {
        let mut seen = HashSet::new();
        let ids: Vec<&str> = ids.filter(|id| seen.insert(*id)).collect();
        let mut state = HashMap::with_capacity(ids.len());
        let rows = sql::fetch_chunked(&mut *tx, &ids, |chunk| {
            let mut s =
                Sql::new("SELECT id, attempt, status, worker_id FROM executions WHERE id IN ");
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
    async fn move_group(
        &self,
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

    pub(crate) async fn mark_dispatched(
        &self,
        sent: &[DispatchedTo],
        now: Millis,
    ) -> StoreResult<Marked> {
        if sent.is_empty() {
            return Ok(Marked::default());
        }
        retrying(|| self.try_mark_dispatched(sent, now)).await
    }

    async fn try_mark_dispatched(&self, sent: &[DispatchedTo], now: Millis) -> StoreResult<Marked> {
        let mut tx = self.begin().await?;
        let mut state = self
            .lock_states(&mut tx, sent.iter().map(|s| s.execution_id.as_str()))
            .await?;
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
            changed += self.move_group(&mut tx, t, &sets, ids, *attempt).await?;
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

    pub(crate) async fn mark_rerouted(
        &self,
        sent: &DispatchedTo,
        reason: &str,
        now: Millis,
    ) -> StoreResult<bool> {
        retrying(|| async {
            let mut tx = self.begin().await?;
            let sets = Fields::new()
                .with("worker_id", &sent.worker_id)
                .with("updated_at", time(now));
            let changed = self
                .move_group(
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
        })
        .await
    }

    pub(crate) async fn requeue_unstarted(
        &self,
        targets: &[(String, u32)],
        reason: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        if targets.is_empty() {
            return Ok(0);
        }
        retrying(|| self.try_requeue(targets, reason, now)).await
    }

    async fn try_requeue(
        &self,
        targets: &[(String, u32)],
        reason: &str,
        now: Millis,
    ) -> StoreResult<u64> {
        let mut tx = self.begin().await?;
        let mut state = self
            .lock_states(&mut tx, targets.iter().map(|(id, _)| id.as_str()))
            .await?;
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
            changed += self.move_group(&mut tx, t, &sets, ids, *attempt).await?;
        }
        inserts::events(&mut tx, &events).await?;
        tx.commit().await?;
        Ok(changed)
    }
}
