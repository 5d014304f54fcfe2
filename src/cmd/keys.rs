//! `kairos keys create|list|revoke`: API keys straight on the database (the
//! same operations as the admin API), recorded in the audit trail.

use super::tenants::{audit, parse_duration, store};
use crate::cli::KeysCommand;
use crate::config::Given;
use anyhow::{Result, bail};
use kairos_core::store::TenantStore;
use kairos_core::tenant::Role;
use kairos_core::time::{now_ms, parse_rfc3339, to_rfc3339};
use std::path::Path;

pub async fn run(cmd: KeysCommand, file: Option<&Path>, given: &Given) -> Result<()> {
    match cmd {
        KeysCommand::Create {
            tenant,
            role,
            expires,
            name,
            db,
        } => {
            let Some(role) = Role::parse(&role) else {
                bail!("--role must be operator, admin, write or read, not {role:?}");
            };
            let now = now_ms();
            let expires_at = match expires.as_deref() {
                None => None,
                Some(s) => Some(match parse_rfc3339(s) {
                    Ok(at) => at,
                    Err(_) => now + parse_duration(s)?,
                }),
            };
            let store = store(db, file, given).await?;
            let issued = kairos_api::auth::keys::issue(&tenant, role, name, expires_at, now);
            if !store.api_key_create(&issued.key).await? {
                bail!(
                    "no tenant with id {tenant:?} (create it with `kairos tenants create {tenant}`)"
                );
            }
            audit(&store, &tenant, "key.create", &issued.key.prefix).await;
            eprintln!(
                "{} key {} for tenant {tenant} created; it is shown only now:",
                role.as_str(),
                issued.key.prefix
            );
            println!("{}", issued.token);
        }
        KeysCommand::List { tenant, db } => {
            let store = store(db, file, given).await?;
            println!(
                "{:<14} {:<20} {:<8} {:<26} {:<26} name",
                "prefix", "tenant", "role", "expires", "revoked"
            );
            for k in store.api_keys_list(tenant.as_deref()).await? {
                println!(
                    "{:<14} {:<20} {:<8} {:<26} {:<26} {}",
                    k.prefix,
                    k.tenant,
                    k.role.as_str(),
                    k.expires_at
                        .map(to_rfc3339)
                        .unwrap_or_else(|| "never".into()),
                    k.revoked_at.map(to_rfc3339).unwrap_or_else(|| "-".into()),
                    k.name.unwrap_or_default()
                );
            }
        }
        KeysCommand::Revoke { prefix, db } => {
            // The whole key is accepted too: its prefix is what names it.
            let prefix = kairos_api::auth::keys::parse(&prefix)
                .map(|(p, _)| p.to_string())
                .unwrap_or(prefix);
            let store = store(db, file, given).await?;
            let Some(key) = store.api_key_revoke(&prefix, None, now_ms()).await? else {
                bail!("no API key with prefix {prefix:?}");
            };
            audit(&store, &key.tenant, "key.revoke", &key.prefix).await;
            println!("key {prefix} of tenant {} revoked", key.tenant);
        }
    }
    Ok(())
}
