//! [`RetentionStore`]: the tenants' retention overrides (columns of
//! `tenants`) and the purge of finished history (`purge`), a bounded batch
//! of rows at a time.

mod purge;

use crate::rows::R;
use crate::sql::{Fields, Sql, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::retention::{History, RetentionStore, TenantRetention};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;

/// The override columns, in [`TenantRetention`]'s order.
const COLS: [&str; 5] = [
    "id",
    "retain_executions_ms",
    "retain_jobs_ms",
    "retain_workflow_runs_ms",
    "retain_audit_ms",
];

fn overrides(row: &crate::db::Row) -> StoreResult<(String, TenantRetention)> {
    let r = R::new(row, "tenants");
    Ok((
        r.string("id")?,
        TenantRetention {
            executions_ms: r.opt_i64("retain_executions_ms")?,
            jobs_ms: r.opt_i64("retain_jobs_ms")?,
            workflow_runs_ms: r.opt_i64("retain_workflow_runs_ms")?,
            audit_ms: r.opt_i64("retain_audit_ms")?,
        },
    ))
}

#[async_trait]
impl RetentionStore for SqlStore {
    async fn tenants_retention(&self) -> StoreResult<Vec<(String, TenantRetention)>> {
        let mut s = Sql::new("SELECT ");
        s.names(&COLS).push(" FROM tenants ORDER BY id");
        s.fetch_all(self.read())
            .await?
            .iter()
            .map(overrides)
            .collect()
    }

    async fn tenant_retention(&self, id: &str) -> StoreResult<Option<TenantRetention>> {
        let mut s = Sql::new("SELECT ");
        s.names(&COLS).push(" FROM tenants WHERE id = ").bind(id);
        let row = s.fetch_optional(self.write()).await?;
        Ok(row.as_ref().map(overrides).transpose()?.map(|(_, r)| r))
    }

    async fn tenant_set_retention(
        &self,
        id: &str,
        retention: &TenantRetention,
        now: Millis,
    ) -> StoreResult<bool> {
        let f = Fields::new()
            .with("retain_executions_ms", retention.executions_ms)
            .with("retain_jobs_ms", retention.jobs_ms)
            .with("retain_workflow_runs_ms", retention.workflow_runs_ms)
            .with("retain_audit_ms", retention.audit_ms)
            .with("updated_at", time(now));
        let n = Sql::new("UPDATE tenants SET ")
            .set(&f)
            .push(" WHERE id = ")
            .bind(id)
            .execute(self.write())
            .await?;
        Ok(n > 0)
    }

    async fn history_purge(
        &self,
        kind: History,
        tenant: Option<&str>,
        before: Millis,
        limit: u32,
    ) -> StoreResult<u64> {
        if limit == 0 {
            return Ok(0);
        }
        purge::purge(self, kind, tenant, before, limit).await
    }

    async fn history_backlog(
        &self,
        kind: History,
        tenant: Option<&str>,
        before: Millis,
        cap: u32,
    ) -> StoreResult<u64> {
        let mut s = Sql::new("SELECT COUNT(*) AS n FROM (");
        purge::candidates(&mut s, kind, tenant, before, cap);
        s.push(") t");
        let row = s.fetch_one(self.read()).await?;
        Ok(R::new(&row, "backlog").i64("n")?.max(0) as u64)
    }
}
