//! Which secrets sign a tenant's callbacks: the tenant's own (and, during a
//! rotation's grace period, the previous one too), or the configured
//! `KAIROS_CALLBACK_SECRET` where the tenant has none stored — which is how
//! the `default` tenant starts. Tenants are read at most once per
//! [`TTL`] per relay, so a rotation is picked up within that time.

use crate::RelayConfig;
use kairos_core::store::{CallbackStore, StoreResult};
use kairos_core::tenant::{SigningSecrets, Tenant};
use kairos_core::time::now_ms;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a tenant's secrets are reused before they are read again.
pub const TTL: Duration = Duration::from_secs(1);

/// Tenants by id as last read, with when.
#[derive(Default)]
pub struct TenantSecrets {
    cache: Mutex<HashMap<String, (Instant, Option<Tenant>)>>,
}

impl TenantSecrets {
    /// The secrets `tenant`'s callbacks are signed with now.
    pub async fn of(
        &self,
        store: &dyn CallbackStore,
        cfg: &RelayConfig,
        tenant: &str,
    ) -> StoreResult<SigningSecrets> {
        let cached = {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache
                .get(tenant)
                .filter(|(at, _)| at.elapsed() < TTL)
                .map(|(_, t)| t.clone())
        };
        let row = match cached {
            Some(row) => row,
            None => {
                let row = store.callback_tenant(tenant).await?;
                let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
                cache.insert(tenant.to_string(), (Instant::now(), row.clone()));
                row
            }
        };
        Ok(match row {
            Some(t) => t.signing_secrets(cfg.secret(), now_ms()),
            None => SigningSecrets {
                current: cfg.secret().to_vec(),
                previous: None,
            },
        })
    }
}
