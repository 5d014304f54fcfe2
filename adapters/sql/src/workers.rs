//! [`WorkerStore`]: the latest heartbeat figures of each worker.

use super::SqlStore;
use super::error::db_err;
use super::rows;
use super::stmt::{CHUNK, q, row_marks};
use async_trait::async_trait;
use kairos_core::protocol::HeartbeatMsg;
use kairos_core::store::{StoreResult, WorkerStore};
use kairos_core::time::Millis;
use kairos_core::worker::{WorkerInfo, WorkerState};
use std::collections::HashMap;

/// Columns a heartbeat overwrites; `registered_at` keeps the first insert's value.
const BEAT_COLS: [&str; 10] = [
    "queue",
    "capacity",
    "active",
    "avg_cost_ms",
    "cpu_idle",
    "state",
    "last_heartbeat_at",
    "updated_at",
    "handlers",
    "worker_group",
];

#[async_trait]
impl WorkerStore for SqlStore {
    async fn workers_record_heartbeats(
        &self,
        beats: &[HeartbeatMsg],
        now: Millis,
    ) -> StoreResult<()> {
        // One row per worker and statement: the newest beat of the batch.
        let mut latest: HashMap<&str, &HeartbeatMsg> = HashMap::with_capacity(beats.len());
        for b in beats {
            let slot = latest.entry(b.worker_id.as_str()).or_insert(b);
            if b.at >= slot.at {
                *slot = b;
            }
        }
        let mut rows: Vec<&HeartbeatMsg> = latest.into_values().collect();
        rows.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
        for chunk in rows.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO workers (id, registered_at, {}) VALUES {}{}",
                BEAT_COLS.join(", "),
                row_marks(chunk.len(), 2 + BEAT_COLS.len()),
                self.dialect().upsert_tail("id", &BEAT_COLS)
            );
            let mut query = q(sql);
            for b in chunk {
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
                    .bind(now)
                    .bind(b.handlers.as_ref().map(|h| {
                        serde_json::Value::from(h.iter().map(String::as_str).collect::<Vec<_>>())
                            .to_string()
                    }))
                    .bind(b.group.as_deref());
            }
            query.execute(self.write()).await.map_err(db_err)?;
        }
        Ok(())
    }

    async fn workers_list(&self) -> StoreResult<Vec<WorkerInfo>> {
        let found = sqlx::query(
            "SELECT id, queue, capacity, active, avg_cost_ms, cpu_idle, state, \
             last_heartbeat_at, registered_at, handlers, worker_group FROM workers ORDER BY id",
        )
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        found.iter().map(rows::worker).collect()
    }

    async fn worker_set_state(&self, id: &str, state: WorkerState, now: Millis) -> StoreResult<()> {
        sqlx::query("UPDATE workers SET state = ?, updated_at = ? WHERE id = ?")
            .bind(state.as_str())
            .bind(now)
            .bind(id)
            .execute(self.write())
            .await
            .map_err(db_err)?;
        Ok(())
    }
}
