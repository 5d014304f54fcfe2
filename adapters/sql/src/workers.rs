//! [`WorkerStore`]: the latest heartbeat figures of each worker, its
//! incarnations (which process of a worker id is the current one, which were
//! replaced) and the attempts it last said it holds.

use super::SqlStore;
use super::error::{db_err, retrying};
use super::rows::{self, R};
use super::stmt::{CHUNK, fetch_by_ids, marks, q, row_marks};
use async_trait::async_trait;
use kairos_core::protocol::{HeartbeatMsg, HeldRef, incarnation_id};
use kairos_core::store::{Reincarnation, StoreResult, WorkerLedger, WorkerStore};
use kairos_core::time::Millis;
use kairos_core::worker::{WorkerInfo, WorkerState};
use sqlx::AnyConnection;
use std::collections::{HashMap, HashSet};

/// Columns a heartbeat overwrites; `registered_at` keeps the first insert's value.
const BEAT_COLS: [&str; 12] = [
    "queue",
    "capacity",
    "active",
    "avg_cost_ms",
    "cpu_idle",
    "state",
    "last_heartbeat_at",
    "incarnation",
    "held",
    "updated_at",
    "handlers",
    "worker_group",
];

/// Replaced incarnations a ledger lists: enough for any burst of restarts
/// whose work can still be in flight.
const RETIRED_LISTED: u32 = 16;

#[async_trait]
impl WorkerStore for SqlStore {
    async fn workers_record_heartbeats(
        &self,
        beats: &[HeartbeatMsg],
        now: Millis,
    ) -> StoreResult<Vec<Reincarnation>> {
        // One row per worker and statement: the newest beat of the batch.
        let mut latest: HashMap<&str, &HeartbeatMsg> = HashMap::with_capacity(beats.len());
        for b in beats {
            let slot = latest.entry(b.worker_id.as_str()).or_insert(b);
            if b.at >= slot.at {
                *slot = b;
            }
        }
        let mut rows: Vec<&HeartbeatMsg> = latest.into_values().collect();
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        rows.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
        retrying(|| self.try_record_beats(&rows, now)).await
    }

    async fn worker_ledger(&self, id: &str) -> StoreResult<Option<WorkerLedger>> {
        let row = q(
            self.dialect(),
            "SELECT w.incarnation AS incarnation, w.held AS held, \
             w.last_heartbeat_at AS last_heartbeat_at, i.seen_at AS seen_at \
             FROM workers w LEFT JOIN worker_incarnations i \
             ON i.worker_id = w.id AND i.incarnation = w.incarnation WHERE w.id = ?",
        )
        .bind(id)
        .fetch_optional(self.read())
        .await
        .map_err(db_err)?;
        let Some(row) = row else {
            return Ok(None);
        };
        let r = R::new(&row, "workers");
        let held = match r.opt_string("held")? {
            Some(text) => Some(
                serde_json::from_str::<Vec<HeldRef>>(&text)
                    .map_err(|e| super::error::corrupt("workers", format!("held of {id}: {e}")))?,
            ),
            None => None,
        };
        let retired = q(
            self.dialect(),
            "SELECT incarnation FROM worker_incarnations WHERE worker_id = ? \
             AND retired_at IS NOT NULL ORDER BY retired_at DESC, seen_at DESC LIMIT ?",
        )
        .bind(id)
        .bind(i64::from(RETIRED_LISTED))
        .fetch_all(self.read())
        .await
        .map_err(db_err)?
        .iter()
        .map(|row| R::new(row, "worker_incarnations").string("incarnation"))
        .collect::<StoreResult<Vec<String>>>()?;
        Ok(Some(WorkerLedger {
            worker_id: id.to_string(),
            current: r.opt_string("incarnation")?,
            current_since: r.opt_i64("seen_at")?,
            retired,
            held,
            beat_at: r.i64("last_heartbeat_at")?,
        }))
    }

    async fn workers_list(&self) -> StoreResult<Vec<WorkerInfo>> {
        let found = q(
            self.dialect(),
            "SELECT id, queue, capacity, active, avg_cost_ms, cpu_idle, state, \
             last_heartbeat_at, registered_at, handlers, worker_group FROM workers ORDER BY id",
        )
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        found.iter().map(rows::worker).collect()
    }

    async fn worker_set_state(&self, id: &str, state: WorkerState, now: Millis) -> StoreResult<()> {
        q(
            self.dialect(),
            "UPDATE workers SET state = ?, updated_at = ? WHERE id = ?",
        )
        .bind(state.as_str())
        .bind(now)
        .bind(id)
        .execute(self.write())
        .await
        .map_err(db_err)?;
        Ok(())
    }
}

impl SqlStore {
    /// One transaction: the workers' rows are locked while their incarnation
    /// is compared and replaced, so two dispatchers recording beats of one
    /// worker at once cannot both miss (or undo) a change.
    async fn try_record_beats(
        &self,
        beats: &[&HeartbeatMsg],
        now: Millis,
    ) -> StoreResult<Vec<Reincarnation>> {
        let mut tx = self.begin().await?;
        let ids: Vec<&str> = beats.iter().map(|b| b.worker_id.as_str()).collect();
        let lock = self.dialect().for_update();
        let stored: HashMap<String, Option<String>> = fetch_by_ids(&mut tx, &ids, |n| {
            format!(
                "SELECT id, incarnation FROM workers WHERE id IN ({}){lock}",
                marks(n)
            )
        })
        .await?
        .iter()
        .map(|row| {
            let r = R::new(row, "workers");
            Ok((r.string("id")?, r.opt_string("incarnation")?))
        })
        .collect::<StoreResult<_>>()?;
        let incs: Vec<&str> = beats
            .iter()
            .filter_map(|b| incarnation_id(&b.incarnation))
            .collect();
        let retired: HashSet<String> = fetch_by_ids(&mut tx, &incs, |n| {
            format!(
                "SELECT incarnation FROM worker_incarnations WHERE incarnation IN ({}) \
                 AND retired_at IS NOT NULL",
                marks(n)
            )
        })
        .await?
        .iter()
        .map(|row| R::new(row, "worker_incarnations").string("incarnation"))
        .collect::<StoreResult<_>>()?;
        let mut kept = Vec::with_capacity(beats.len());
        let mut changes = Vec::new();
        for b in beats {
            let inc = incarnation_id(&b.incarnation);
            if inc.is_some_and(|i| retired.contains(i)) {
                // A late beat of a process a later one replaced: recording it
                // would make the replaced process current again.
                continue;
            }
            kept.push(*b);
            let previous = stored.get(&b.worker_id).cloned().flatten();
            if previous.as_deref() == inc {
                continue;
            }
            self.succeed_incarnation(&mut tx, &b.worker_id, inc, now)
                .await?;
            if let (Some(previous), Some(current)) = (previous, inc) {
                changes.push(Reincarnation {
                    worker_id: b.worker_id.clone(),
                    previous,
                    current: current.to_string(),
                });
            }
        }
        self.upsert_beats(&mut tx, &kept, now).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(changes)
    }

    /// Makes `current` the worker's incarnation (`None`: a legacy process)
    /// and retires every other one.
    async fn succeed_incarnation(
        &self,
        conn: &mut AnyConnection,
        worker_id: &str,
        current: Option<&str>,
        now: Millis,
    ) -> StoreResult<()> {
        if let Some(inc) = current {
            q(
                self.dialect(),
                self.dialect().insert_ignore(
                    "worker_incarnations (worker_id, incarnation, seen_at, retired_at) \
                     VALUES (?, ?, ?, NULL)",
                ),
            )
            .bind(worker_id)
            .bind(inc)
            .bind(now)
            .execute(&mut *conn)
            .await
            .map_err(db_err)?;
        }
        q(
            self.dialect(),
            "UPDATE worker_incarnations SET retired_at = ? WHERE worker_id = ? \
             AND incarnation <> ? AND retired_at IS NULL",
        )
        .bind(now)
        .bind(worker_id)
        .bind(current.unwrap_or(""))
        .execute(&mut *conn)
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn upsert_beats(
        &self,
        conn: &mut AnyConnection,
        beats: &[&HeartbeatMsg],
        now: Millis,
    ) -> StoreResult<()> {
        for chunk in beats.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO workers (id, registered_at, {}) VALUES {}{}",
                BEAT_COLS.join(", "),
                row_marks(chunk.len(), 2 + BEAT_COLS.len()),
                self.dialect().upsert_tail("id", &BEAT_COLS)
            );
            let mut query = q(self.dialect(), sql);
            for b in chunk {
                let held = b.held.as_ref().and_then(|h| serde_json::to_string(h).ok());
                query = query
                    .bind(b.worker_id.as_str())
                    .bind(now)
                    .bind(b.queue.as_str())
                    .bind(i64::from(b.capacity))
                    .bind(i64::from(b.active))
                    .bind(b.avg_cost_ms)
                    .bind(b.cpu_idle)
                    .bind(b.state.as_str())
                    .bind(b.at)
                    .bind(incarnation_id(&b.incarnation).map(str::to_string))
                    .bind(held)
                    .bind(now)
                    .bind(b.handlers.as_ref().map(|h| {
                        serde_json::Value::from(h.iter().map(String::as_str).collect::<Vec<_>>())
                            .to_string()
                    }))
                    .bind(b.group.as_deref());
            }
            query.execute(&mut *conn).await.map_err(db_err)?;
        }
        Ok(())
    }
}
