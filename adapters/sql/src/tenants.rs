//! [`TenantStore`]: tenants and their callback secrets, API keys, the audit
//! trail, and the count behind the live-jobs cap.

use super::SqlStore;
use super::error::{db_err, is_unique_violation};
use super::rows::R;
use super::stmt::{bind_names, marks, q};
use async_trait::async_trait;
use kairos_core::job::JobStatus;
use kairos_core::store::{Page, StoreResult, TenantStore};
use kairos_core::tenant::{ApiKey, AuditEntry, Role, Tenant, TenantLimits};
use kairos_core::time::Millis;
use sqlx::any::AnyRow;

const TENANT_COLS: &str = "id, callback_secret, previous_secret, previous_valid_until, \
     create_rate_per_sec, create_burst, max_live_jobs, created_at";
const KEY_COLS: &str =
    "prefix, tenant, role, secret_hash, name, expires_at, revoked_at, created_at";

/// Largest audit page served.
const MAX_AUDIT_PAGE: u32 = 500;

fn tenant(row: &AnyRow) -> StoreResult<Tenant> {
    let r = R::new(row, "tenants");
    Ok(Tenant {
        id: r.string("id")?,
        callback_secret: r.opt_string("callback_secret")?,
        previous_secret: r.opt_string("previous_secret")?,
        previous_valid_until: r.opt_i64("previous_valid_until")?,
        limits: TenantLimits {
            create_rate_per_sec: r.opt_f64("create_rate_per_sec")?,
            create_burst: r
                .opt_u64("create_burst")?
                .map(|b| b.min(u64::from(u32::MAX)) as u32),
            max_live_jobs: r.opt_u64("max_live_jobs")?,
        },
        created_at: r.i64("created_at")?,
    })
}

fn api_key(row: &AnyRow) -> StoreResult<ApiKey> {
    let r = R::new(row, "api_keys");
    let role = r.string("role")?;
    Ok(ApiKey {
        prefix: r.string("prefix")?,
        tenant: r.string("tenant")?,
        role: Role::parse(&role)
            .ok_or_else(|| super::error::corrupt("api_keys", format!("unknown role {role:?}")))?,
        secret_hash: r.string("secret_hash")?,
        name: r.opt_string("name")?,
        expires_at: r.opt_i64("expires_at")?,
        revoked_at: r.opt_i64("revoked_at")?,
        created_at: r.i64("created_at")?,
    })
}

fn audit(row: &AnyRow) -> StoreResult<AuditEntry> {
    let r = R::new(row, "audit_log");
    Ok(AuditEntry {
        id: r.i64("id")?,
        tenant: r.string("tenant")?,
        actor: r.string("actor")?,
        action: r.string("action")?,
        target: r.string("target")?,
        at: r.i64("at")?,
    })
}

fn opt_count(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

#[async_trait]
impl TenantStore for SqlStore {
    async fn tenant_create(&self, t: &Tenant) -> StoreResult<bool> {
        let res = q(
            self.dialect(),
            "INSERT INTO tenants (id, callback_secret, previous_secret, previous_valid_until, \
             create_rate_per_sec, create_burst, max_live_jobs, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(t.id.as_str())
        .bind(t.callback_secret.as_deref())
        .bind(t.previous_secret.as_deref())
        .bind(t.previous_valid_until)
        .bind(t.limits.create_rate_per_sec)
        .bind(t.limits.create_burst.map(i64::from))
        .bind(opt_count(t.limits.max_live_jobs))
        .bind(t.created_at)
        .bind(t.created_at)
        .execute(self.write())
        .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_unique_violation(&e) => Ok(false),
            Err(e) => Err(db_err(e)),
        }
    }

    async fn tenant_get(&self, id: &str) -> StoreResult<Option<Tenant>> {
        let sql = format!("SELECT {TENANT_COLS} FROM tenants WHERE id = ?");
        let row = q(self.dialect(), sql)
            .bind(id)
            .fetch_optional(self.read())
            .await
            .map_err(db_err)?;
        row.as_ref().map(tenant).transpose()
    }

    async fn tenants_list(&self) -> StoreResult<Vec<Tenant>> {
        let sql = format!("SELECT {TENANT_COLS} FROM tenants ORDER BY id");
        let rows = q(self.dialect(), sql)
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        rows.iter().map(tenant).collect()
    }

    async fn tenant_set_limits(
        &self,
        id: &str,
        limits: &TenantLimits,
        now: Millis,
    ) -> StoreResult<bool> {
        let res = q(
            self.dialect(),
            "UPDATE tenants SET create_rate_per_sec = ?, create_burst = ?, max_live_jobs = ?, \
             updated_at = ? WHERE id = ?",
        )
        .bind(limits.create_rate_per_sec)
        .bind(limits.create_burst.map(i64::from))
        .bind(opt_count(limits.max_live_jobs))
        .bind(now)
        .bind(id)
        .execute(self.write())
        .await
        .map_err(db_err)?;
        Ok(res.rows_affected() > 0)
    }

    async fn tenant_rotate_secret(
        &self,
        id: &str,
        new_secret: &str,
        grace_until: Millis,
        now: Millis,
    ) -> StoreResult<Option<Tenant>> {
        // One statement: the old secret moves aside as the new one lands, so
        // two rotations racing never lose the secret receivers hold.
        q(
            self.dialect(),
            "UPDATE tenants SET previous_secret = callback_secret, callback_secret = ?, \
             previous_valid_until = ?, updated_at = ? WHERE id = ?",
        )
        .bind(new_secret)
        .bind(grace_until)
        .bind(now)
        .bind(id)
        .execute(self.write())
        .await
        .map_err(db_err)?;
        let sql = format!("SELECT {TENANT_COLS} FROM tenants WHERE id = ?");
        let row = q(self.dialect(), sql)
            .bind(id)
            .fetch_optional(self.write())
            .await
            .map_err(db_err)?;
        row.as_ref().map(tenant).transpose()
    }

    async fn api_key_create(&self, key: &ApiKey) -> StoreResult<bool> {
        if self.tenant_get(&key.tenant).await?.is_none() {
            return Ok(false);
        }
        let res = q(
            self.dialect(),
            "INSERT INTO api_keys (prefix, tenant, role, secret_hash, name, expires_at, \
             revoked_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(key.prefix.as_str())
        .bind(key.tenant.as_str())
        .bind(key.role.as_str())
        .bind(key.secret_hash.as_str())
        .bind(key.name.as_deref())
        .bind(key.expires_at)
        .bind(key.revoked_at)
        .bind(key.created_at)
        .execute(self.write())
        .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_unique_violation(&e) => Ok(false),
            Err(e) => Err(db_err(e)),
        }
    }

    async fn api_key_get(&self, prefix: &str) -> StoreResult<Option<ApiKey>> {
        let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE prefix = ?");
        let row = q(self.dialect(), sql)
            .bind(prefix)
            .fetch_optional(self.read())
            .await
            .map_err(db_err)?;
        row.as_ref().map(api_key).transpose()
    }

    async fn api_keys_list(&self, tenant: Option<&str>) -> StoreResult<Vec<ApiKey>> {
        let filter = if tenant.is_some() {
            " WHERE tenant = ?"
        } else {
            ""
        };
        let sql =
            format!("SELECT {KEY_COLS} FROM api_keys{filter} ORDER BY created_at DESC, prefix");
        let mut query = q(self.dialect(), sql);
        if let Some(t) = tenant {
            query = query.bind(t);
        }
        let rows = query.fetch_all(self.read()).await.map_err(db_err)?;
        rows.iter().map(api_key).collect()
    }

    async fn api_key_revoke(
        &self,
        prefix: &str,
        tenant: Option<&str>,
        now: Millis,
    ) -> StoreResult<Option<ApiKey>> {
        let scope = if tenant.is_some() {
            " AND tenant = ?"
        } else {
            ""
        };
        let sql = format!(
            "UPDATE api_keys SET revoked_at = ? WHERE prefix = ? AND revoked_at IS NULL{scope}"
        );
        let mut query = q(self.dialect(), sql).bind(now).bind(prefix);
        if let Some(t) = tenant {
            query = query.bind(t);
        }
        query.execute(self.write()).await.map_err(db_err)?;
        let sql = format!("SELECT {KEY_COLS} FROM api_keys WHERE prefix = ?{scope}");
        let mut query = q(self.dialect(), sql).bind(prefix);
        if let Some(t) = tenant {
            query = query.bind(t);
        }
        let row = query.fetch_optional(self.write()).await.map_err(db_err)?;
        row.as_ref().map(api_key).transpose()
    }

    async fn audit_append(&self, e: &AuditEntry) -> StoreResult<()> {
        q(
            self.dialect(),
            "INSERT INTO audit_log (tenant, actor, action, target, at) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(e.tenant.as_str())
        .bind(e.actor.as_str())
        .bind(e.action.as_str())
        .bind(e.target.as_str())
        .bind(e.at)
        .execute(self.write())
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn audit_list(
        &self,
        tenant: Option<&str>,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<AuditEntry>> {
        let limit = match limit {
            0 => 50,
            n => n.min(MAX_AUDIT_PAGE),
        };
        let before = match cursor {
            None => None,
            Some(c) => match c.parse::<i64>() {
                Ok(id) => Some(id),
                // A cursor this store did not make names no page.
                Err(_) => {
                    return Ok(Page {
                        items: Vec::new(),
                        next_cursor: None,
                    });
                }
            },
        };
        let mut sql =
            "SELECT id, tenant, actor, action, target, at FROM audit_log WHERE 1 = 1".to_string();
        if tenant.is_some() {
            sql.push_str(" AND tenant = ?");
        }
        if before.is_some() {
            sql.push_str(" AND id < ?");
        }
        sql.push_str(" ORDER BY id DESC LIMIT ?");
        let mut query = q(self.dialect(), sql);
        if let Some(t) = tenant {
            query = query.bind(t);
        }
        if let Some(b) = before {
            query = query.bind(b);
        }
        let rows = query
            .bind(i64::from(limit) + 1)
            .fetch_all(self.read())
            .await
            .map_err(db_err)?;
        let mut items = rows.iter().map(audit).collect::<StoreResult<Vec<_>>>()?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|e| e.id.to_string())
        } else {
            None
        };
        Ok(Page { items, next_cursor })
    }

    async fn jobs_count_live(&self, tenant: &str) -> StoreResult<u64> {
        let live: Vec<&'static str> = JobStatus::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .map(JobStatus::as_str)
            .collect();
        let sql = format!(
            "SELECT COUNT(*) AS n FROM jobs WHERE tenant = ? AND status IN ({})",
            marks(live.len())
        );
        let row = bind_names(q(self.dialect(), sql).bind(tenant), live)
            .fetch_one(self.read())
            .await
            .map_err(db_err)?;
        let n = R::new(&row, "jobs").i64("n")?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
