//! Publisher confirms (`pending → dispatched`) and the requeue of attempts
//! that never started (`dispatched → pending`): batched moves of named
//! attempts, one locking read, one update per group and one event insert.

use super::SqlStore;
use super::error::{db_err, retrying};
use super::inserts::{self, EventRow};
use super::rows::R;
use super::stmt::{CHUNK, Q, bind_names, fetch_by_ids, marks, q};
use kairos_core::execution::{ExecStatus, ExecTransition};
use kairos_core::store::{DispatchedTo, Marked, StoreResult};
use kairos_core::time::Millis;
use sqlx::AnyConnection;
use std::collections::{BTreeMap, HashMap, HashSet};

impl SqlStore {
    /// Locks the named executions and returns their `(attempt, status, worker)`.
    async fn lock_states(
        &self,
        conn: &mut AnyConnection,
        ids: impl Iterator<Item = &str>,
    ) -> StoreResult<HashMap<String, (u32, ExecStatus, Option<String>)>> {
        let mut seen = HashSet::new();
        let ids: Vec<&str> = ids.filter(|id| seen.insert(*id)).collect();
        let mut state = HashMap::with_capacity(ids.len());
        let lock = self.dialect().for_update();
        let rows = fetch_by_ids(conn, &ids, |n| {
            format!(
                "SELECT id, attempt, status, worker_id FROM executions WHERE id IN ({}){lock}",
                marks(n)
            )
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
    /// attempt = ? AND status IN (<t's from states>)`, chunked; rows changed.
    async fn move_group(
        &self,
        conn: &mut AnyConnection,
        t: ExecTransition,
        sets: &str,
        set_binds: &(dyn Fn(Q<'static>) -> Q<'static> + Sync),
        ids: &[&str],
        attempt: u32,
    ) -> StoreResult<u64> {
        let from = t.from_states();
        let mut changed = 0;
        for chunk in ids.chunks(CHUNK) {
            let sql = format!(
                "UPDATE executions SET status = ?, {sets} WHERE id IN ({}) AND attempt = ? \
                 AND status IN ({})",
                marks(chunk.len()),
                marks(from.len())
            );
            let mut query = set_binds(q(self.dialect(), sql).bind(t.to_state().as_str()));
            for id in chunk {
                query = query.bind(*id);
            }
            let query = bind_names(
                query.bind(i64::from(attempt)),
                from.iter().map(|s| s.as_str()),
            );
            changed += query
                .execute(&mut *conn)
                .await
                .map_err(db_err)?
                .rows_affected();
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
            let worker = worker.to_string();
            let binds = move |q: Q<'static>| q.bind(worker.clone()).bind(now).bind(now);
            changed += self
                .move_group(
                    &mut tx,
                    t,
                    "worker_id = ?, dispatched_at = ?, updated_at = ?",
                    &binds,
                    ids,
                    *attempt,
                )
                .await?;
        }
        inserts::events(&mut tx, &events).await?;
        tx.commit().await.map_err(db_err)?;
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
            let worker = sent.worker_id.clone();
            let binds = move |q: Q<'static>| q.bind(worker.clone()).bind(now);
            let changed = self
                .move_group(
                    &mut tx,
                    ExecTransition::Reroute,
                    "worker_id = ?, updated_at = ?",
                    &binds,
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
            tx.commit().await.map_err(db_err)?;
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
            let binds = move |q: Q<'static>| q.bind(now).bind(now);
            changed += self
                .move_group(
                    &mut tx,
                    t,
                    "not_before = ?, worker_id = NULL, dispatched_at = NULL, updated_at = ?",
                    &binds,
                    ids,
                    *attempt,
                )
                .await?;
        }
        inserts::events(&mut tx, &events).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(changed)
    }
}
