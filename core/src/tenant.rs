//! Tenants, their API keys and the audit trail: who may call the API, as
//! whom, with which role, and what they did. Key material (random secrets,
//! hashing) is produced by the API crate; core only names the shapes.

use crate::time::Millis;
use serde::{Deserialize, Serialize};

/// Name of the tenant every database starts with (migration 0005); jobs
/// created before tenants existed belong to it.
pub const DEFAULT_TENANT: &str = "default";

/// What a key may do. Each role includes the ones below it:
/// `operator` ⊇ `admin` ⊇ `write` ⊇ `read`.
///
/// Every key, an operator's too, belongs to one tenant: its jobs are the
/// ones the key reads and changes. Only the admin routes look past it, and
/// only for operators: an `admin` manages its own tenant's keys, callback
/// secret and audit trail; an `operator` manages every tenant, and the
/// tenants and workers themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// GET only, on its tenant's jobs, executions and callbacks.
    Read,
    /// Read, plus create, control and edit its tenant's jobs.
    Write,
    /// Write, plus its own tenant's keys, callback secret and audit trail.
    Admin,
    /// Admin of every tenant, plus creating and listing tenants and the workers.
    Operator,
}

impl Role {
    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
            Role::Operator => "operator",
        }
    }

    /// Parses a stored or typed name.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "read" => Some(Role::Read),
            "write" => Some(Role::Write),
            "admin" => Some(Role::Admin),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }

    /// Whether a key of this role may do what `needed` requires.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }

    /// Every role, weakest first.
    pub const ALL: [Role; 4] = [Role::Read, Role::Write, Role::Admin, Role::Operator];
}

/// Per-tenant overrides of the API's limits; `None` takes the server default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantLimits {
    /// Job creates per second per key (token bucket refill rate).
    pub create_rate_per_sec: Option<f64>,
    /// Token bucket size: creates a key may burst before the rate applies.
    pub create_burst: Option<u32>,
    /// Most non-terminal jobs (`scheduled`, `running`, `paused`) the tenant may hold.
    pub max_live_jobs: Option<u64>,
    /// Actions that make executions or deliveries (trigger, resume,
    /// redeliver) per second per key (token bucket refill rate).
    pub action_rate_per_sec: Option<f64>,
    /// Token bucket size of those actions: how many a key may burst.
    pub action_burst: Option<u32>,
}

/// A tenant: owner of jobs, keys and a callback signing secret.
#[derive(Debug, Clone, PartialEq)]
pub struct Tenant {
    /// Stable name, e.g. `default`, `acme` (1–64 of `[a-z0-9_-]`).
    pub id: String,
    /// Current callback signing secret; `None` means the relay's configured
    /// secret (`KAIROS_CALLBACK_SECRET`), which is how the `default` tenant starts.
    pub callback_secret: Option<String>,
    /// The secret before the last rotation (`None`: the configured secret),
    /// still signed with until `previous_valid_until`.
    pub previous_secret: Option<String>,
    /// End of the rotation grace period; `None` when no rotation is in grace.
    pub previous_valid_until: Option<Millis>,
    /// Limit overrides.
    pub limits: TenantLimits,
    /// Creation time.
    pub created_at: Millis,
}

/// The secrets a callback of a tenant is signed with at a given time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningSecrets {
    /// Signs first (`v1=<new>`).
    pub current: Vec<u8>,
    /// Also signs during a rotation's grace period (`v1=<old>`).
    pub previous: Option<Vec<u8>>,
}

impl Tenant {
    /// The secrets to sign with at `now`, with `fallback` standing for the
    /// configured secret wherever the tenant stores none.
    pub fn signing_secrets(&self, fallback: &[u8], now: Millis) -> SigningSecrets {
        let pick = |s: &Option<String>| {
            s.as_ref()
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_else(|| fallback.to_vec())
        };
        let current = pick(&self.callback_secret);
        let previous = match self.previous_valid_until {
            Some(until) if until > now => Some(pick(&self.previous_secret)),
            _ => None,
        }
        .filter(|p| *p != current);
        SigningSecrets { current, previous }
    }
}

/// Whether `id` is an acceptable tenant name.
pub fn valid_tenant_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// A stored API key. The secret itself is never stored, only its hash.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    /// Public lookup prefix (the `<prefix>` of `kai_<prefix>_<secret>`).
    pub prefix: String,
    /// Tenant the key acts for.
    pub tenant: String,
    /// What it may do.
    pub role: Role,
    /// Lowercase hex SHA-256 of the secret part.
    pub secret_hash: String,
    /// Free text for humans ("ci", "alice's laptop").
    pub name: Option<String>,
    /// After this time the key is refused.
    pub expires_at: Option<Millis>,
    /// Set when revoked; refused from then on.
    pub revoked_at: Option<Millis>,
    /// Creation time.
    pub created_at: Millis,
}

impl ApiKey {
    /// Whether the key may be used at `now` (not revoked, not expired).
    pub fn usable_at(&self, now: Millis) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| e > now)
    }
}

/// A dashboard session, shared by every API instance through the database
/// (no sticky sessions, and a restart logs nobody out). The browser holds a
/// random id; only its hash is stored, with the key it acts as, so neither a
/// database read nor a backup gives a usable cookie or key.
#[derive(Debug, Clone, PartialEq)]
pub struct UiSession {
    /// Lowercase hex SHA-256 of the id the cookie holds.
    pub id_hash: String,
    /// Prefix of the API key the session acts as (read again on every
    /// request, so a revoked or expired key ends its sessions).
    pub key_prefix: String,
    /// Login time.
    pub created_at: Millis,
    /// After this time the session is refused (and later purged).
    pub expires_at: Millis,
}

/// One recorded control action.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Increasing id (the page cursor); 0 before insert.
    pub id: i64,
    /// Tenant acted on (for tenant and key operations, the tenant concerned).
    pub tenant: String,
    /// Prefix of the key that acted, or `cli` for the command line.
    pub actor: String,
    /// What was done, e.g. `job.create`, `job.cancel`, `key.revoke`.
    pub action: String,
    /// What it was done to (job id, execution id, key prefix, tenant).
    pub target: String,
    /// When.
    pub at: Millis,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(secret: Option<&str>, previous: Option<&str>, until: Option<Millis>) -> Tenant {
        Tenant {
            id: "t".into(),
            callback_secret: secret.map(Into::into),
            previous_secret: previous.map(Into::into),
            previous_valid_until: until,
            limits: TenantLimits::default(),
            created_at: 0,
        }
    }

    #[test]
    fn signing_secrets_follow_the_rotation() {
        let s = tenant(None, None, None).signing_secrets(b"env", 10);
        assert_eq!((s.current, s.previous), (b"env".to_vec(), None));
        // The default tenant's first rotation: the configured secret is the old one.
        let s = tenant(Some("new"), None, Some(20)).signing_secrets(b"env", 10);
        assert_eq!(
            (s.current, s.previous),
            (b"new".to_vec(), Some(b"env".to_vec()))
        );
        let s = tenant(Some("new"), Some("old"), Some(20)).signing_secrets(b"env", 10);
        assert_eq!(s.previous, Some(b"old".to_vec()));
        let s = tenant(Some("new"), Some("old"), Some(20)).signing_secrets(b"env", 20);
        assert_eq!(s.previous, None, "the grace period is over");
    }

    #[test]
    fn roles_include_the_weaker_ones() {
        assert!(Role::Admin.allows(Role::Write) && Role::Write.allows(Role::Read));
        assert!(!Role::Read.allows(Role::Write) && !Role::Write.allows(Role::Admin));
        assert!(Role::Operator.allows(Role::Admin) && !Role::Admin.allows(Role::Operator));
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
        assert!(valid_tenant_id("acme-1_x") && !valid_tenant_id("Acme") && !valid_tenant_id(""));
    }
}
