//! `kairos tenants create|list|set-limits|set-retention|retention|rotate-secret`: tenant management
//! straight on the database (the same operations as the admin API), recorded
//! in the audit trail with actor `cli`.

use crate::cli::{TenantLimitArgs, TenantRetentionArgs, TenantsCommand};
use crate::config::Given;
use crate::config::conn::Database;
use anyhow::{Result, bail};
use kairos::connect;
use kairos_core::retention::{Period, RetentionStore, TenantRetention};
use kairos_core::store::{Store, TenantStore};
use kairos_core::tenant::{AuditEntry, Tenant, TenantLimits, valid_tenant_id};
use kairos_core::time::{Millis, now_ms, to_rfc3339};
use std::path::Path;

/// Default grace period of a secret rotation.
const DEFAULT_GRACE_MS: Millis = 86_400_000;

/// The database of a management command, migrated (so a fresh one works).
pub(super) async fn store(db: Database, file: Option<&Path>, given: &Given) -> Result<impl Store> {
    let url = super::database_url(&db, file, given)?;
    Ok(connect::database(&url, true).await?)
}

/// Records a command-line action in the audit trail.
pub(super) async fn audit(store: &dyn TenantStore, tenant: &str, action: &str, target: &str) {
    let entry = AuditEntry {
        id: 0,
        tenant: tenant.to_string(),
        actor: "cli".to_string(),
        action: action.to_string(),
        target: target.to_string(),
        at: now_ms(),
    };
    if let Err(e) = store.audit_append(&entry).await {
        tracing::warn!(error = %e, "cannot record the audit entry");
    }
}

fn limits(args: TenantLimitArgs) -> Result<TenantLimits> {
    for (flag, rate) in [
        ("--create-rate", args.create_rate),
        ("--action-rate", args.action_rate),
    ] {
        if rate.is_some_and(|r| !r.is_finite() || r <= 0.0) {
            bail!("{flag} must be a positive number");
        }
    }
    for (flag, burst) in [
        ("--create-burst", args.create_burst),
        ("--action-burst", args.action_burst),
    ] {
        if burst == Some(0) {
            bail!("{flag} must be at least 1");
        }
    }
    Ok(TenantLimits {
        create_rate_per_sec: args.create_rate,
        create_burst: args.create_burst,
        max_live_jobs: args.max_live_jobs,
        action_rate_per_sec: args.action_rate,
        action_burst: args.action_burst,
    })
}

/// `90m`, `12h`, `7d`, `30s` as milliseconds.
pub(super) fn parse_duration(s: &str) -> Result<Millis> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("{s:?} is not a duration like 90m, 12h or 30d"))?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => bail!("{s:?} is not a duration like 90m, 12h or 30d"),
    };
    Ok(n.saturating_mul(unit_ms))
}

fn retention(args: TenantRetentionArgs) -> TenantRetention {
    let ms = |p: Option<Period>| p.map(Period::ms);
    TenantRetention {
        executions_ms: ms(args.executions),
        jobs_ms: ms(args.jobs),
        workflow_runs_ms: ms(args.workflow_runs),
        audit_ms: ms(args.audit),
    }
}

/// Prints a tenant's overrides, one line per kind of history.
fn print_retention(id: &str, r: &TenantRetention) {
    println!("retention of tenant {id} (default: the deployment's KAIROS_RETAIN_*)");
    for (what, ms) in [
        ("executions", r.executions_ms),
        ("jobs", r.jobs_ms),
        ("workflow runs", r.workflow_runs_ms),
        ("audit", r.audit_ms),
    ] {
        println!("  {what:<14} {}", show(ms.map(Period)));
    }
}

fn show(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "default".to_string(), |v| v.to_string())
}

pub async fn run(cmd: TenantsCommand, file: Option<&Path>, given: &Given) -> Result<()> {
    match cmd {
        TenantsCommand::Create { id, limits: l, db } => {
            if !valid_tenant_id(&id) {
                bail!("tenant id {id:?} must be 1–64 characters of a-z, 0-9, '-' and '_'");
            }
            let store = store(db, file, given).await?;
            let secret = kairos_api::auth::keys::new_callback_secret();
            let tenant = Tenant {
                id: id.clone(),
                callback_secret: Some(secret.clone()),
                previous_secret: None,
                previous_valid_until: None,
                limits: limits(l)?,
                created_at: now_ms(),
            };
            if !store.tenant_create(&tenant).await? {
                bail!("a tenant with id {id:?} already exists");
            }
            audit(&store, &id, "tenant.create", &id).await;
            println!("tenant {id} created");
            println!("callback secret (shown once): {secret}");
        }
        TenantsCommand::List { db } => {
            let store = store(db, file, given).await?;
            println!(
                "{:<24} {:>12} {:>12} {:>14} {:>12} {:>12}  created",
                "tenant", "rate/s", "burst", "max live jobs", "actions/s", "act. burst"
            );
            for t in store.tenants_list().await? {
                println!(
                    "{:<24} {:>12} {:>12} {:>14} {:>12} {:>12}  {}",
                    t.id,
                    show(t.limits.create_rate_per_sec),
                    show(t.limits.create_burst),
                    show(t.limits.max_live_jobs),
                    show(t.limits.action_rate_per_sec),
                    show(t.limits.action_burst),
                    to_rfc3339(t.created_at)
                );
            }
        }
        TenantsCommand::SetLimits { id, limits: l, db } => {
            let store = store(db, file, given).await?;
            if !store.tenant_set_limits(&id, &limits(l)?, now_ms()).await? {
                bail!("no tenant with id {id:?}");
            }
            audit(&store, &id, "tenant.set_limits", &id).await;
            println!("limits of tenant {id} replaced (API instances apply them within a second)");
        }
        TenantsCommand::SetRetention {
            id,
            retention: r,
            db,
        } => {
            let store = store(db, file, given).await?;
            let r = retention(r);
            if !store.tenant_set_retention(&id, &r, now_ms()).await? {
                bail!("no tenant with id {id:?}");
            }
            audit(&store, &id, "tenant.set_retention", &id).await;
            print_retention(&id, &r);
            println!("the dispatcher applies it from its next purge pass");
        }
        TenantsCommand::Retention { id, db } => {
            let store = store(db, file, given).await?;
            match store.tenant_retention(&id).await? {
                Some(r) => print_retention(&id, &r),
                None => bail!("no tenant with id {id:?}"),
            }
        }
        TenantsCommand::RotateSecret { id, grace, db } => {
            let grace_ms = grace
                .as_deref()
                .map(parse_duration)
                .transpose()?
                .unwrap_or(DEFAULT_GRACE_MS);
            let store = store(db, file, given).await?;
            let secret = kairos_api::auth::keys::new_callback_secret();
            let until = now_ms() + grace_ms;
            if store
                .tenant_rotate_secret(&id, &secret, until, now_ms())
                .await?
                .is_none()
            {
                bail!("no tenant with id {id:?}");
            }
            audit(&store, &id, "tenant.rotate_secret", &id).await;
            println!("new callback secret of tenant {id} (shown once): {secret}");
            println!(
                "callbacks carry a second signature with the old secret until {}",
                to_rfc3339(until)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90m").unwrap(), 5_400_000);
        assert_eq!(parse_duration("30d").unwrap(), 2_592_000_000);
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5w").is_err());
    }
}
