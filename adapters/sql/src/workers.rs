//! [`WorkerStore`]: the latest heartbeat figures of each worker, its
//! incarnations (which process of a worker id is the current one, which were
//! replaced) and the attempts it last said it holds.

use crate::db::Tx;
use crate::rows::{self, R};
use crate::sql::{CHUNK, Fields, Sql, fetch_chunked, json, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::protocol::{HeartbeatMsg, HeldRef, incarnation_id};
use kairos_core::store::{Reincarnation, StoreResult, WorkerLedger, WorkerStore};
use kairos_core::time::Millis;
use kairos_core::worker::{WorkerInfo, WorkerState};
use std::collections::{HashMap, HashSet};

/// Columns a heartbeat overwrites; `registered_at` keeps the first insert's value.
const BEAT_COLS: [&str; 14] = [
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
    "dispatch_batch",
    "immediate_queue",
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
        self.transaction(|tx| record_beats(tx, &rows, now)).await
    }

    async fn worker_ledger(&self, id: &str) -> StoreResult<Option<WorkerLedger>> {
        let row = Sql::new(
            "SELECT w.incarnation AS incarnation, w.held AS held, \
             w.last_heartbeat_at AS last_heartbeat_at, w.state AS state, i.seen_at AS seen_at \
             FROM workers w LEFT JOIN worker_incarnations i \
             ON i.worker_id = w.id AND i.incarnation = w.incarnation WHERE w.id = ",
        )
        .bind(id)
        .fetch_optional(self.read())
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let r = R::new(&row, "workers");
        let held = match r.opt_json_text("held")? {
            Some(text) => Some(
                serde_json::from_str::<Vec<HeldRef>>(&text)
                    .map_err(|e| crate::error::corrupt("workers", format!("held of {id}: {e}")))?,
            ),
            None => None,
        };
        let retired = Sql::new("SELECT incarnation FROM worker_incarnations WHERE worker_id = ")
            .bind(id)
            .push(" AND retired_at IS NOT NULL ORDER BY retired_at DESC, seen_at DESC LIMIT ")
            .bind(i64::from(RETIRED_LISTED))
            .fetch_all(self.read())
            .await?
            .iter()
            .map(|row| R::new(row, "worker_incarnations").string("incarnation"))
            .collect::<StoreResult<Vec<String>>>()?;
        Ok(Some(WorkerLedger {
            worker_id: id.to_string(),
            current: r.opt_string("incarnation")?,
            current_since: r.opt_time("seen_at")?,
            retired,
            held,
            beat_at: r.time("last_heartbeat_at")?,
            state: r.parsed("state", WorkerState::parse)?,
        }))
    }

    async fn workers_list(&self) -> StoreResult<Vec<WorkerInfo>> {
        let found = Sql::new(
            "SELECT id, queue, capacity, active, avg_cost_ms, cpu_idle, state, \
             last_heartbeat_at, registered_at, handlers, worker_group, dispatch_batch, immediate_queue \
             FROM workers ORDER BY id",
        )
        .fetch_all(self.read())
        .await?;
        found.iter().map(rows::worker).collect()
    }

    async fn worker_set_state(&self, id: &str, state: WorkerState, now: Millis) -> StoreResult<()> {
        let f = Fields::new()
            .with("state", state.as_str())
            .with("updated_at", time(now));
        Sql::new("UPDATE workers SET ")
            .set(&f)
            .push(" WHERE id = ")
            .bind(id)
            .execute(self.write())
            .await?;
        Ok(())
    }

    async fn worker_forget(&self, id: &str, silent_before: Millis) -> StoreResult<bool> {
        self.transaction(|tx| forget(tx, id, silent_before)).await
    }
}

/// `worker_forget`'s transaction: the row goes only while it still says
/// `offline` and silent, and the record of its processes with it.
async fn forget(mut tx: Tx, id: &str, silent_before: Millis) -> StoreResult<bool> {
    let deleted = Sql::new("DELETE FROM workers WHERE id = ")
        .bind(id)
        .push(" AND state = ")
        .bind(WorkerState::Offline.as_str())
        .push(" AND last_heartbeat_at < ")
        .bind(time(silent_before))
        .execute(&mut tx)
        .await?;
    if deleted > 0 {
        Sql::new("DELETE FROM worker_incarnations WHERE worker_id = ")
            .bind(id)
            .execute(&mut tx)
            .await?;
    }
    tx.commit().await?;
    Ok(deleted > 0)
}

/// `workers_record_heartbeats`'s transaction: the workers' rows are locked while their incarnation
/// is compared and replaced, so two dispatchers recording beats of one
/// worker at once cannot both miss (or undo) a change.
async fn record_beats(
    mut tx: Tx,
    beats: &[&HeartbeatMsg],
    now: Millis,
) -> StoreResult<Vec<Reincarnation>> {
    let ids: Vec<&str> = beats.iter().map(|b| b.worker_id.as_str()).collect();
    let stored: HashMap<String, Option<String>> = fetch_chunked(&mut tx, &ids, |chunk| {
        let mut s = Sql::new("SELECT id, incarnation FROM workers WHERE id IN ");
        s.list(chunk.iter().copied()).for_update();
        s
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
    let retired: HashSet<String> = fetch_chunked(&mut tx, &incs, |chunk| {
        let mut s = Sql::new("SELECT incarnation FROM worker_incarnations WHERE incarnation IN ");
        s.list(chunk.iter().copied())
            .push(" AND retired_at IS NOT NULL");
        s
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
        succeed_incarnation(&mut tx, &b.worker_id, inc, now).await?;
        if let (Some(previous), Some(current)) = (previous, inc) {
            changes.push(Reincarnation {
                worker_id: b.worker_id.clone(),
                previous,
                current: current.to_string(),
            });
        }
    }
    upsert_beats(&mut tx, &kept, now).await?;
    tx.commit().await?;
    Ok(changes)
}

/// Makes `current` the worker's incarnation (`None`: a legacy process)
/// and retires every other one.
async fn succeed_incarnation(
    tx: &mut Tx,
    worker_id: &str,
    current: Option<&str>,
    now: Millis,
) -> StoreResult<()> {
    if let Some(inc) = current {
        let f = Fields::new()
            .with("worker_id", worker_id)
            .with("incarnation", inc)
            .with("seen_at", time(now))
            .with("retired_at", time(None));
        Sql::new("")
            .insert_ignore_into()
            .push("worker_incarnations")
            .rows([&f])
            .on_conflict_ignore()
            .execute(&mut *tx)
            .await?;
    }
    Sql::new("UPDATE worker_incarnations SET retired_at = ")
        .bind(time(now))
        .push(" WHERE worker_id = ")
        .bind(worker_id)
        .push(" AND incarnation <> ")
        .bind(current.unwrap_or(""))
        .push(" AND retired_at IS NULL")
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn upsert_beats(tx: &mut Tx, beats: &[&HeartbeatMsg], now: Millis) -> StoreResult<()> {
    for chunk in beats.chunks(CHUNK) {
        let rows: Vec<Fields> = chunk.iter().map(|b| beat_fields(b, now)).collect();
        Sql::new("INSERT INTO workers")
            .rows(&rows)
            .upsert("id", &BEAT_COLS)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// A heartbeat's `workers` row: `id`, `registered_at`, then [`BEAT_COLS`].
fn beat_fields(b: &HeartbeatMsg, now: Millis) -> Fields {
    let held = b.held.as_ref().and_then(|h| serde_json::to_string(h).ok());
    let handlers = b.handlers.as_ref().map(|h| {
        serde_json::Value::from(h.iter().map(String::as_str).collect::<Vec<_>>()).to_string()
    });
    Fields::new()
        .with("id", &b.worker_id)
        .with("registered_at", time(now))
        .with("queue", &b.queue)
        .with("capacity", b.capacity)
        .with("active", b.active)
        .with("avg_cost_ms", b.avg_cost_ms)
        .with("cpu_idle", b.cpu_idle)
        .with("state", b.state.as_str())
        .with("last_heartbeat_at", time(b.at))
        .with("incarnation", incarnation_id(&b.incarnation))
        .with("held", json(held))
        .with("updated_at", time(now))
        .with("handlers", json(handlers))
        .with("worker_group", b.group.as_ref())
        .with("dispatch_batch", b.dispatch_batch.filter(|&n| n > 1))
        .with("immediate_queue", i64::from(b.immediate_queue))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

    #[test]
    fn a_beat_row_names_every_column_the_upsert_overwrites() {
        let beat = HeartbeatMsg {
            v: 1,
            worker_id: "w".into(),
            queue: "q".into(),
            capacity: 1,
            active: 0,
            avg_cost_ms: 0.0,
            cpu_idle: 100.0,
            state: WorkerState::Online,
            at: 5,
            handlers: Some(vec!["h".into()]),
            group: None,
            incarnation: None,
            held: None,
            dispatch_batch: None,
            immediate_queue: false,
        };
        let mut s = Sql::new("INSERT INTO workers");
        s.rows([&beat_fields(&beat, 7)]);
        let text = s.text(Dialect::MySql);
        let cols = text
            .split_once(" (")
            .and_then(|(_, rest)| rest.split_once(") VALUES"))
            .map(|(cols, _)| cols.to_string())
            .expect("a column list");
        let mut expected = vec!["id", "registered_at"];
        expected.extend(BEAT_COLS);
        assert_eq!(cols, expected.join(", "));
    }
}
