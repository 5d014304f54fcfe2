//! [`CallbackStore`]: the outbox the relay drains. Rows are leased with a
//! conditional update and a token unique to each claim, so two relays never
//! hold the same row at once.

use super::error::{db_err, retrying};
use super::rows::{self, CALLBACK_COLS, select_list};
use super::stmt::{CHUNK, marks, q, scalar};
use super::{Dialect, SqlStore};
use async_trait::async_trait;
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState};
use kairos_core::store::{CallbackBacklog, CallbackNext, CallbackStore, StoreResult};
use kairos_core::tenant::Tenant;
use kairos_core::time::Millis;
use sqlx::AnyConnection;
use std::collections::HashMap;

/// Callback rows with their job's trace context (a purged job's callback
/// reads as untraced: the outer join keeps it).
fn callback_select() -> String {
    format!(
        "SELECT {}, j.trace_context AS trace_context FROM callbacks c \
         LEFT JOIN jobs j ON j.id = c.job_id",
        select_list("c", &CALLBACK_COLS)
    )
}

/// One claim of due callbacks: which rows it may take and the lease it gives them.
struct Lease<'a> {
    owner: &'a str,
    token: &'a str,
    now: Millis,
    until: Millis,
    limit: u32,
}

impl Lease<'_> {
    /// Ids of pending rows due now and not leased, oldest due first; `lock`
    /// is the dialect's locking clause, if the read locks.
    async fn candidates(&self, conn: &mut AnyConnection, lock: &str) -> StoreResult<Vec<String>> {
        let sql = format!(
            "SELECT id FROM callbacks WHERE state = ? AND next_attempt_at <= ? \
             AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_attempt_at LIMIT ?{lock}"
        );
        scalar(Dialect::of(conn), sql)
            .bind(CallbackState::Pending.as_str())
            .bind(self.now)
            .bind(self.now)
            .bind(i64::from(self.limit))
            .fetch_all(&mut *conn)
            .await
            .map_err(db_err)
    }

    /// Leases those of `ids` still pending and free; rows leased.
    async fn take(&self, conn: &mut AnyConnection, ids: &[String]) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let sql = format!(
            "UPDATE callbacks SET lease_owner = ?, lease_token = ?, lease_until = ? \
             WHERE id IN ({}) AND state = ? AND (lease_until IS NULL OR lease_until < ?)",
            marks(ids.len())
        );
        let mut query = q(Dialect::of(conn), sql)
            .bind(self.owner)
            .bind(self.token)
            .bind(self.until);
        for id in ids {
            query = query.bind(id.as_str());
        }
        Ok(query
            .bind(CallbackState::Pending.as_str())
            .bind(self.now)
            .execute(&mut *conn)
            .await
            .map_err(db_err)?
            .rows_affected())
    }
}

#[async_trait]
impl CallbackStore for SqlStore {
    async fn callback_tenant(&self, tenant: &str) -> StoreResult<Option<Tenant>> {
        kairos_core::store::TenantStore::tenant_get(self, tenant).await
    }

    async fn callbacks_claim_due(
        &self,
        owner: &str,
        now: Millis,
        lease_ms: i64,
        limit: u32,
    ) -> StoreResult<Vec<Callback>> {
        let token = uuid::Uuid::now_v7().to_string();
        let lease = Lease {
            owner,
            token: &token,
            now,
            until: now.saturating_add(lease_ms),
            limit,
        };
        let (candidates, leased) = match self.dialect() {
            // Due rows are read and locked in one go, passing over rows
            // another relay is leasing right now: relays take disjoint rows
            // instead of racing for the same ones.
            Dialect::Postgres => {
                let mut tx = self.begin().await?;
                let ids = lease
                    .candidates(&mut tx, Dialect::Postgres.for_claim())
                    .await?;
                let leased = lease.take(&mut tx, &ids).await?;
                tx.commit().await.map_err(db_err)?;
                (ids, leased)
            }
            // Another relay may pick the same candidates; the condition is
            // re-checked under the row lock by the update, and the token
            // tells our rows apart.
            Dialect::MySql | Dialect::Sqlite => {
                let mut read = self.read().acquire().await.map_err(db_err)?;
                let ids = lease.candidates(&mut read, "").await?;
                drop(read);
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut write = self.write().acquire().await.map_err(db_err)?;
                let leased = lease.take(&mut write, &ids).await?;
                (ids, leased)
            }
        };
        if leased == 0 {
            return Ok(Vec::new());
        }
        let sql = format!(
            "{} WHERE c.id IN ({}) AND c.lease_token = ? ORDER BY c.next_attempt_at, c.id",
            callback_select(),
            marks(candidates.len())
        );
        let mut query = q(self.dialect(), sql);
        for id in &candidates {
            query = query.bind(id.as_str());
        }
        let found = query
            .bind(token.as_str())
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        found.iter().map(rows::callback).collect()
    }

    async fn callback_record_attempt(
        &self,
        id: &str,
        owner: &str,
        attempt: &CallbackAttempt,
        next: CallbackNext,
        now: Millis,
    ) -> StoreResult<bool> {
        retrying(|| self.try_record_attempt(id, owner, attempt, next, now)).await
    }

    async fn callbacks_next_due(&self) -> StoreResult<Option<Millis>> {
        // A leased row is not claimable before its lease runs out.
        scalar(
            self.dialect(),
            "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until >= next_attempt_at \
             THEN lease_until + 1 ELSE next_attempt_at END) FROM callbacks WHERE state = ?",
        )
        .bind(CallbackState::Pending.as_str())
        .fetch_one(self.read())
        .await
        .map_err(db_err)
    }

    async fn callbacks_backlog(&self) -> StoreResult<CallbackBacklog> {
        // Each query reads one range of the (state, next_attempt_at) index;
        // delivered rows, the bulk of the table, are never touched.
        let pending = CallbackState::Pending.as_str();
        let retrying: i64 = scalar(
            self.dialect(),
            "SELECT COUNT(*) FROM callbacks WHERE state = ? AND attempts > 0",
        )
        .bind(pending)
        .fetch_one(self.read())
        .await
        .map_err(db_err)?;
        let dead: i64 = scalar(
            self.dialect(),
            "SELECT COUNT(*) FROM callbacks WHERE state = ?",
        )
        .bind(CallbackState::Dead.as_str())
        .fetch_one(self.read())
        .await
        .map_err(db_err)?;
        let oldest_pending_at: Option<Millis> = scalar(
            self.dialect(),
            "SELECT MIN(created_at) FROM callbacks WHERE state = ?",
        )
        .bind(pending)
        .fetch_one(self.read())
        .await
        .map_err(db_err)?;
        Ok(CallbackBacklog {
            retrying: u64::try_from(retrying).unwrap_or(0),
            dead: u64::try_from(dead).unwrap_or(0),
            oldest_pending_at,
        })
    }

    async fn callbacks_for_execution(
        &self,
        tenant: &str,
        execution_id: &str,
    ) -> StoreResult<Vec<(Callback, Vec<CallbackAttempt>)>> {
        let sql = format!(
            "{} WHERE c.tenant = ? AND c.execution_id = ? ORDER BY c.created_at, c.id",
            callback_select()
        );
        let found = q(self.dialect(), sql)
            .bind(tenant)
            .bind(execution_id)
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        let callbacks = found
            .iter()
            .map(rows::callback)
            .collect::<StoreResult<Vec<_>>>()?;
        let mut attempts: HashMap<String, Vec<CallbackAttempt>> = HashMap::new();
        let ids: Vec<&str> = callbacks.iter().map(|c| c.id.as_str()).collect();
        for chunk in ids.chunks(CHUNK) {
            let sql = format!(
                "SELECT callback_id, attempt, attempted_at, status_code, latency_ms, error \
                 FROM callback_attempts WHERE callback_id IN ({}) ORDER BY id",
                marks(chunk.len())
            );
            let mut query = q(self.dialect(), sql);
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(self.read()).await.map_err(db_err)? {
                let owner = rows::R::new(&row, "callback_attempts").string("callback_id")?;
                attempts
                    .entry(owner)
                    .or_default()
                    .push(rows::callback_attempt(&row)?);
            }
        }
        Ok(callbacks
            .into_iter()
            .map(|c| {
                let a = attempts.remove(&c.id).unwrap_or_default();
                (c, a)
            })
            .collect())
    }

    async fn callback_redeliver(
        &self,
        tenant: &str,
        execution_id: &str,
        new_id: &str,
        now: Millis,
    ) -> StoreResult<Option<Callback>> {
        retrying(|| self.try_redeliver(tenant, execution_id, new_id, now)).await
    }
}

impl SqlStore {
    async fn try_record_attempt(
        &self,
        id: &str,
        owner: &str,
        attempt: &CallbackAttempt,
        next: CallbackNext,
        now: Millis,
    ) -> StoreResult<bool> {
        let mut tx = self.begin().await?;
        q(
            self.dialect(),
            "INSERT INTO callback_attempts \
             (callback_id, attempt, attempted_at, status_code, latency_ms, error) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(i64::from(attempt.attempt))
        .bind(attempt.at)
        .bind(attempt.status_code.map(i64::from))
        .bind(super::stmt::from_u64(attempt.latency_ms))
        .bind(attempt.error.as_deref())
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        let (state, next_at) = match next {
            CallbackNext::Delivered => (CallbackState::Delivered, None),
            CallbackNext::RetryAt(at) => (CallbackState::Pending, Some(at)),
            CallbackNext::Dead => (CallbackState::Dead, None),
        };
        let error = match (&attempt.error, attempt.status_code) {
            (Some(e), _) => Some(e.clone()),
            (None, Some(code)) if !(200..300).contains(&code) => Some(format!("HTTP {code}")),
            _ => None,
        };
        let res = q(
            self.dialect(),
            "UPDATE callbacks SET state = ?, attempts = attempts + 1, \
             next_attempt_at = COALESCE(?, next_attempt_at), \
             last_error = COALESCE(?, last_error), lease_owner = NULL, lease_token = NULL, \
             lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?",
        )
        .bind(state.as_str())
        .bind(next_at)
        .bind(error)
        .bind(now)
        .bind(id)
        .bind(owner)
        .execute(&mut *tx)
        .await
        .map_err(db_err)?;
        tx.commit().await.map_err(db_err)?;
        Ok(res.rows_affected() == 1)
    }

    async fn try_redeliver(
        &self,
        tenant: &str,
        execution_id: &str,
        new_id: &str,
        now: Millis,
    ) -> StoreResult<Option<Callback>> {
        let mut tx = self.begin().await?;
        // Locking the execution serialises redeliveries of one execution, so
        // two concurrent requests cannot both queue a new delivery.
        let lock = format!(
            "SELECT id FROM executions WHERE tenant = ? AND id = ?{}",
            self.dialect().for_update()
        );
        let exists = q(self.dialect(), lock)
            .bind(tenant)
            .bind(execution_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        if exists.is_none() {
            return Ok(None);
        }
        let sql = format!(
            "{} WHERE c.tenant = ? AND c.execution_id = ? ORDER BY c.created_at DESC, c.id DESC LIMIT 1",
            callback_select()
        );
        let latest = q(self.dialect(), sql)
            .bind(tenant)
            .bind(execution_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_err)?;
        let Some(latest) = latest.as_ref().map(rows::callback).transpose()? else {
            return Ok(None);
        };
        if latest.state == CallbackState::Pending {
            return Ok(None);
        }
        let fresh = Callback {
            id: new_id.to_string(),
            state: CallbackState::Pending,
            attempts: 0,
            next_attempt_at: now,
            last_error: None,
            created_at: now,
            ..latest
        };
        super::inserts::callbacks(&mut tx, std::slice::from_ref(&fresh)).await?;
        tx.commit().await.map_err(db_err)?;
        Ok(Some(fresh))
    }
}
