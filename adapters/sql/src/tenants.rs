//! [`TenantStore`]: tenants and their callback secrets, API keys, the audit
//! trail, and the count behind the live-jobs cap.

use crate::db::Row;
use crate::error::is_unique_violation;
use crate::rows::R;
use crate::sql::{Fields, Sql, from_u64, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::job::JobStatus;
use kairos_core::store::{Page, StoreResult, TenantStore};
use kairos_core::tenant::{ApiKey, AuditEntry, Role, Tenant, TenantLimits};
use kairos_core::time::Millis;

const TENANT_COLS: [&str; 10] = [
    "id",
    "callback_secret",
    "previous_secret",
    "previous_valid_until",
    "create_rate_per_sec",
    "create_burst",
    "max_live_jobs",
    "action_rate_per_sec",
    "action_burst",
    "created_at",
];
const KEY_COLS: [&str; 8] = [
    "prefix",
    "tenant",
    "role",
    "secret_hash",
    "name",
    "expires_at",
    "revoked_at",
    "created_at",
];
const AUDIT_COLS: [&str; 6] = ["id", "tenant", "actor", "action", "target", "at"];

/// Largest audit page served.
const MAX_AUDIT_PAGE: u32 = 500;

fn tenant(row: &Row) -> StoreResult<Tenant> {
    let r = R::new(row, "tenants");
    Ok(Tenant {
        id: r.string("id")?,
        callback_secret: r.opt_string("callback_secret")?,
        previous_secret: r.opt_string("previous_secret")?,
        previous_valid_until: r.opt_time("previous_valid_until")?,
        limits: TenantLimits {
            create_rate_per_sec: r.opt_f64("create_rate_per_sec")?,
            create_burst: r
                .opt_u64("create_burst")?
                .map(|b| b.min(u64::from(u32::MAX)) as u32),
            max_live_jobs: r.opt_u64("max_live_jobs")?,
            action_rate_per_sec: r.opt_f64("action_rate_per_sec")?,
            action_burst: r
                .opt_u64("action_burst")?
                .map(|b| b.min(u64::from(u32::MAX)) as u32),
        },
        created_at: r.time("created_at")?,
    })
}

fn api_key(row: &Row) -> StoreResult<ApiKey> {
    let r = R::new(row, "api_keys");
    let role = r.string("role")?;
    Ok(ApiKey {
        prefix: r.string("prefix")?,
        tenant: r.string("tenant")?,
        role: Role::parse(&role)
            .ok_or_else(|| crate::error::corrupt("api_keys", format!("unknown role {role:?}")))?,
        secret_hash: r.string("secret_hash")?,
        name: r.opt_string("name")?,
        expires_at: r.opt_time("expires_at")?,
        revoked_at: r.opt_time("revoked_at")?,
        created_at: r.time("created_at")?,
    })
}

fn audit(row: &Row) -> StoreResult<AuditEntry> {
    let r = R::new(row, "audit_log");
    Ok(AuditEntry {
        id: r.i64("id")?,
        tenant: r.string("tenant")?,
        actor: r.string("actor")?,
        action: r.string("action")?,
        target: r.string("target")?,
        at: r.time("at")?,
    })
}

/// The limit columns of `tenants`.
fn limit_fields(f: &mut Fields, limits: &TenantLimits) {
    f.set("create_rate_per_sec", limits.create_rate_per_sec)
        .set("create_burst", limits.create_burst)
        .set("max_live_jobs", limits.max_live_jobs.map(from_u64))
        .set("action_rate_per_sec", limits.action_rate_per_sec)
        .set("action_burst", limits.action_burst);
}

/// `SELECT <tenant columns> FROM tenants WHERE id = <id>`.
fn select_tenant(id: &str) -> Sql {
    let mut s = Sql::new("SELECT ");
    s.names(&TENANT_COLS)
        .push(" FROM tenants WHERE id = ")
        .bind(id);
    s
}

#[async_trait]
impl TenantStore for SqlStore {
    async fn tenant_create(&self, t: &Tenant) -> StoreResult<bool> {
        let mut f = Fields::new()
            .with("id", &t.id)
            .with("callback_secret", t.callback_secret.as_ref())
            .with("previous_secret", t.previous_secret.as_ref())
            .with("previous_valid_until", time(t.previous_valid_until));
        limit_fields(&mut f, &t.limits);
        f.set("created_at", time(t.created_at))
            .set("updated_at", time(t.created_at));
        let res = Sql::new("INSERT INTO tenants")
            .rows([&f])
            .execute(self.write())
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_unique_violation(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn tenant_get(&self, id: &str) -> StoreResult<Option<Tenant>> {
        let row = select_tenant(id).fetch_optional(self.read()).await?;
        row.as_ref().map(tenant).transpose()
    }

    async fn tenants_list(&self) -> StoreResult<Vec<Tenant>> {
        let rows = Sql::new("SELECT ")
            .names(&TENANT_COLS)
            .push(" FROM tenants ORDER BY id")
            .fetch_all(self.read())
            .await?;
        rows.iter().map(tenant).collect()
    }

    async fn tenant_set_limits(
        &self,
        id: &str,
        limits: &TenantLimits,
        now: Millis,
    ) -> StoreResult<bool> {
        let mut f = Fields::new();
        limit_fields(&mut f, limits);
        f.set("updated_at", time(now));
        let n = Sql::new("UPDATE tenants SET ")
            .set(&f)
            .push(" WHERE id = ")
            .bind(id)
            .execute(self.write())
            .await?;
        Ok(n > 0)
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
        let f = Fields::new()
            .with("callback_secret", new_secret)
            .with("previous_valid_until", time(grace_until))
            .with("updated_at", time(now));
        Sql::new("UPDATE tenants SET previous_secret = callback_secret, ")
            .set(&f)
            .push(" WHERE id = ")
            .bind(id)
            .execute(self.write())
            .await?;
        let row = select_tenant(id).fetch_optional(self.write()).await?;
        row.as_ref().map(tenant).transpose()
    }

    async fn api_key_create(&self, key: &ApiKey) -> StoreResult<bool> {
        if self.tenant_get(&key.tenant).await?.is_none() {
            return Ok(false);
        }
        let f = Fields::new()
            .with("prefix", &key.prefix)
            .with("tenant", &key.tenant)
            .with("role", key.role.as_str())
            .with("secret_hash", &key.secret_hash)
            .with("name", key.name.as_ref())
            .with("expires_at", time(key.expires_at))
            .with("revoked_at", time(key.revoked_at))
            .with("created_at", time(key.created_at));
        let res = Sql::new("INSERT INTO api_keys")
            .rows([&f])
            .execute(self.write())
            .await;
        match res {
            Ok(_) => Ok(true),
            Err(e) if is_unique_violation(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn api_key_get(&self, prefix: &str) -> StoreResult<Option<ApiKey>> {
        let row = Sql::new("SELECT ")
            .names(&KEY_COLS)
            .push(" FROM api_keys WHERE prefix = ")
            .bind(prefix)
            .fetch_optional(self.read())
            .await?;
        row.as_ref().map(api_key).transpose()
    }

    async fn api_keys_list(&self, tenant: Option<&str>) -> StoreResult<Vec<ApiKey>> {
        let mut s = Sql::new("SELECT ");
        s.names(&KEY_COLS).push(" FROM api_keys");
        if let Some(t) = tenant {
            s.push(" WHERE tenant = ").bind(t);
        }
        s.push(" ORDER BY created_at DESC, prefix");
        let rows = s.fetch_all(self.read()).await?;
        rows.iter().map(api_key).collect()
    }

    async fn api_key_revoke(
        &self,
        prefix: &str,
        tenant: Option<&str>,
        now: Millis,
    ) -> StoreResult<Option<ApiKey>> {
        let mut s = Sql::new("UPDATE api_keys SET revoked_at = ");
        s.bind(time(now))
            .push(" WHERE prefix = ")
            .bind(prefix)
            .push(" AND revoked_at IS NULL");
        if let Some(t) = tenant {
            s.push(" AND tenant = ").bind(t);
        }
        s.execute(self.write()).await?;
        let mut s = Sql::new("SELECT ");
        s.names(&KEY_COLS)
            .push(" FROM api_keys WHERE prefix = ")
            .bind(prefix);
        if let Some(t) = tenant {
            s.push(" AND tenant = ").bind(t);
        }
        let row = s.fetch_optional(self.write()).await?;
        row.as_ref().map(api_key).transpose()
    }

    async fn audit_append(&self, e: &AuditEntry) -> StoreResult<()> {
        let f = Fields::new()
            .with("tenant", &e.tenant)
            .with("actor", &e.actor)
            .with("action", &e.action)
            .with("target", &e.target)
            .with("at", time(e.at));
        Sql::new("INSERT INTO audit_log")
            .rows([&f])
            .execute(self.write())
            .await?;
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
                    return Ok(Page::forward(Vec::new(), None));
                }
            },
        };
        let mut s = Sql::new("SELECT ");
        s.names(&AUDIT_COLS).push(" FROM audit_log WHERE 1 = 1");
        if let Some(t) = tenant {
            s.push(" AND tenant = ").bind(t);
        }
        if let Some(b) = before {
            s.push(" AND id < ").bind(b);
        }
        s.push(" ORDER BY id DESC LIMIT ")
            .bind(i64::from(limit) + 1);
        let rows = s.fetch_all(self.read()).await?;
        let mut items = rows.iter().map(audit).collect::<StoreResult<Vec<_>>>()?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|e| e.id.to_string())
        } else {
            None
        };
        Ok(Page::forward(items, next_cursor))
    }

    async fn jobs_count_live(&self, tenant: &str) -> StoreResult<u64> {
        let live = JobStatus::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .map(JobStatus::as_str);
        let n = Sql::new("SELECT COUNT(*) AS n FROM jobs WHERE tenant = ")
            .bind(tenant)
            .push(" AND status IN ")
            .list(live)
            .scalar::<i64>(self.read(), "n")
            .await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
