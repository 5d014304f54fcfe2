//! [`CallbackStore`]: the outbox the relay drains. Rows are leased with a
//! conditional update and a token unique to each claim, so two relays never
//! hold the same row at once.

use crate::db::{On, Tx};
use crate::dialect::Dialect;
use crate::inserts;
use crate::rows::{self, CALLBACK_COLS, R};
use crate::sql::{Fields, Sql, fetch_chunked, from_u64, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState};
use kairos_core::store::{CallbackBacklog, CallbackNext, CallbackStore, StoreResult};
use kairos_core::tenant::Tenant;
use kairos_core::time::Millis;
use std::collections::HashMap;

/// Callback rows with their job's trace context (a purged job's callback
/// reads as untraced: the outer join keeps it).
fn callback_select() -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("c", &CALLBACK_COLS).push(
        ", j.trace_context AS trace_context FROM callbacks c \
         LEFT JOIN jobs j ON j.id = c.job_id",
    );
    s
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
    /// says whether the read locks them for the claim ([`Sql::for_claim`]).
    async fn candidates<'c>(&self, on: impl Into<On<'c>>, lock: bool) -> StoreResult<Vec<String>> {
        let mut s = Sql::new("SELECT id FROM callbacks WHERE state = ");
        s.bind(CallbackState::Pending.as_str())
            .push(" AND next_attempt_at <= ")
            .bind(time(self.now))
            .push(" AND (lease_until IS NULL OR lease_until < ")
            .bind(time(self.now))
            .push(") ORDER BY next_attempt_at LIMIT ")
            .bind(self.limit);
        if lock {
            s.for_claim();
        }
        s.fetch_all(on)
            .await?
            .iter()
            .map(|row| R::new(row, "callbacks").string("id"))
            .collect()
    }

    /// Leases those of `ids` still pending and free; rows leased.
    async fn take<'c>(&self, on: impl Into<On<'c>>, ids: &[String]) -> StoreResult<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let lease = Fields::new()
            .with("lease_owner", self.owner)
            .with("lease_token", self.token)
            .with("lease_until", time(self.until));
        Sql::new("UPDATE callbacks SET ")
            .set(&lease)
            .push(" WHERE id IN ")
            .list(ids.iter().map(String::as_str))
            .push(" AND state = ")
            .bind(CallbackState::Pending.as_str())
            .push(" AND (lease_until IS NULL OR lease_until < ")
            .bind(time(self.now))
            .push(")")
            .execute(on)
            .await
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
                let ids = lease.candidates(&mut tx, true).await?;
                let leased = lease.take(&mut tx, &ids).await?;
                tx.commit().await?;
                (ids, leased)
            }
            // Another relay may pick the same candidates; the condition is
            // re-checked under the row lock by the update, and the token
            // tells our rows apart.
            Dialect::MySql | Dialect::Sqlite => {
                let mut read = self.read().acquire().await?;
                let ids = lease.candidates(&mut read, false).await?;
                drop(read);
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut write = self.write().acquire().await?;
                let leased = lease.take(&mut write, &ids).await?;
                (ids, leased)
            }
        };
        if leased == 0 {
            return Ok(Vec::new());
        }
        let found = callback_select()
            .push(" WHERE c.id IN ")
            .list(candidates.iter().map(String::as_str))
            .push(" AND c.lease_token = ")
            .bind(token.as_str())
            .push(" ORDER BY c.next_attempt_at, c.id")
            .fetch_all(self.read())
            .await?;
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
        self.transaction(|tx| record_attempt(tx, id, owner, attempt, next, now))
            .await
    }

    async fn callbacks_next_due(&self) -> StoreResult<Option<Millis>> {
        // A leased row is not claimable before its lease runs out, i.e. one
        // millisecond after `lease_until`. The two kinds of row are read
        // separately and the millisecond added here: no arithmetic on a
        // time column in SQL.
        let row = Sql::new(
            "SELECT MIN(CASE WHEN lease_until IS NOT NULL AND lease_until >= next_attempt_at \
             THEN lease_until END) AS leased_until, \
             MIN(CASE WHEN lease_until IS NOT NULL AND lease_until >= next_attempt_at \
             THEN NULL ELSE next_attempt_at END) AS due_at FROM callbacks WHERE state = ",
        )
        .bind(CallbackState::Pending.as_str())
        .fetch_one(self.read())
        .await?;
        let r = R::new(&row, "callbacks");
        let free = r.opt_time("leased_until")?.map(|t| t.saturating_add(1));
        let due = r.opt_time("due_at")?;
        Ok(match (free, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    async fn callbacks_backlog(&self) -> StoreResult<CallbackBacklog> {
        // Each query reads one range of the (state, next_attempt_at) index;
        // delivered rows, the bulk of the table, are never touched.
        let pending = CallbackState::Pending.as_str();
        let retrying: i64 = Sql::new("SELECT COUNT(*) AS n FROM callbacks WHERE state = ")
            .bind(pending)
            .push(" AND attempts > 0")
            .scalar(self.read(), "n")
            .await?;
        let dead: i64 = Sql::new("SELECT COUNT(*) AS n FROM callbacks WHERE state = ")
            .bind(CallbackState::Dead.as_str())
            .scalar(self.read(), "n")
            .await?;
        let row = Sql::new("SELECT MIN(created_at) AS oldest FROM callbacks WHERE state = ")
            .bind(pending)
            .fetch_one(self.read())
            .await?;
        let oldest_pending_at = R::new(&row, "callbacks").opt_time("oldest")?;
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
        let found = callback_select()
            .push(" WHERE c.tenant = ")
            .bind(tenant)
            .push(" AND c.execution_id = ")
            .bind(execution_id)
            .push(" ORDER BY c.created_at, c.id")
            .fetch_all(self.read())
            .await?;
        let callbacks = found
            .iter()
            .map(rows::callback)
            .collect::<StoreResult<Vec<_>>>()?;
        let mut attempts: HashMap<String, Vec<CallbackAttempt>> = HashMap::new();
        let ids: Vec<&str> = callbacks.iter().map(|c| c.id.as_str()).collect();
        let found = fetch_chunked(self.read(), &ids, |chunk| {
            let mut s = Sql::new(
                "SELECT callback_id, attempt, attempted_at, status_code, latency_ms, error \
                 FROM callback_attempts WHERE callback_id IN ",
            );
            s.list(chunk.iter().copied()).push(" ORDER BY id");
            s
        })
        .await?;
        for row in &found {
            let owner = R::new(row, "callback_attempts").string("callback_id")?;
            attempts
                .entry(owner)
                .or_default()
                .push(rows::callback_attempt(row)?);
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
        self.transaction(|tx| redeliver(tx, tenant, execution_id, new_id, now))
            .await
    }
}

/// `callback_record_attempt`'s transaction.
async fn record_attempt(
    mut tx: Tx,
    id: &str,
    owner: &str,
    attempt: &CallbackAttempt,
    next: CallbackNext,
    now: Millis,
) -> StoreResult<bool> {
    let row = Fields::new()
        .with("callback_id", id)
        .with("attempt", attempt.attempt)
        .with("attempted_at", time(attempt.at))
        .with("status_code", attempt.status_code.map(i64::from))
        .with("latency_ms", from_u64(attempt.latency_ms))
        .with("error", attempt.error.as_deref());
    Sql::new("INSERT INTO callback_attempts")
        .rows([&row])
        .execute(&mut tx)
        .await?;
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
    let set = Fields::new()
        .with("state", state.as_str())
        .with("updated_at", time(now));
    // A `NULL` next time or error keeps the stored one.
    let changed = Sql::new(
        "UPDATE callbacks SET attempts = attempts + 1, lease_owner = NULL, \
         lease_token = NULL, lease_until = NULL, next_attempt_at = COALESCE(",
    )
    .bind(time(next_at))
    .push(", next_attempt_at), last_error = COALESCE(")
    .bind(error)
    .push(", last_error), ")
    .set(&set)
    .push(" WHERE id = ")
    .bind(id)
    .push(" AND lease_owner = ")
    .bind(owner)
    .execute(&mut tx)
    .await?;
    tx.commit().await?;
    Ok(changed == 1)
}

/// `callback_redeliver`'s transaction.
async fn redeliver(
    mut tx: Tx,
    tenant: &str,
    execution_id: &str,
    new_id: &str,
    now: Millis,
) -> StoreResult<Option<Callback>> {
    // Locking the execution serialises redeliveries of one execution, so
    // two concurrent requests cannot both queue a new delivery.
    let exists = Sql::new("SELECT id FROM executions WHERE tenant = ")
        .bind(tenant)
        .push(" AND id = ")
        .bind(execution_id)
        .for_update()
        .fetch_optional(&mut tx)
        .await?;
    if exists.is_none() {
        return tx.unchanged(None).await;
    }
    let latest = callback_select()
        .push(" WHERE c.tenant = ")
        .bind(tenant)
        .push(" AND c.execution_id = ")
        .bind(execution_id)
        .push(" ORDER BY c.created_at DESC, c.id DESC LIMIT 1")
        .fetch_optional(&mut tx)
        .await?;
    let Some(latest) = latest.as_ref().map(rows::callback).transpose()? else {
        return tx.unchanged(None).await;
    };
    if latest.state == CallbackState::Pending {
        return tx.unchanged(None).await;
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
    inserts::callbacks(&mut tx, std::slice::from_ref(&fresh)).await?;
    tx.commit().await?;
    Ok(Some(fresh))
}
