//! Which tenants a caller may manage on the admin routes: an operator every
//! tenant, an admin only its own. The middleware has already checked the
//! route's role; these checks narrow it to a tenant, and answer for another
//! tenant exactly as for one that does not exist (404), so an admin learns
//! nothing of the others.

use super::Caller;
use crate::error::ApiError;
use kairos_core::tenant::Role;

/// The role's name with its article, for messages: "an admin", "a read".
pub(crate) fn a(role: Role) -> &'static str {
    match role {
        Role::Read => "a read",
        Role::Write => "a write",
        Role::Admin => "an admin",
        Role::Operator => "an operator",
    }
}

impl Caller {
    /// Whether this key may manage `tenant`'s keys, secret and audit trail.
    pub(crate) fn manages(&self, tenant: &str) -> bool {
        self.role == Role::Operator || (self.role.allows(Role::Admin) && self.tenant == tenant)
    }

    /// The tenant an admin route acts on: the one asked for (`None`: every
    /// tenant for an operator, the key's own for an admin), or `not_found`'s
    /// 404 if the caller may not manage it.
    pub(crate) fn managed_scope(
        &self,
        asked: Option<&str>,
        not_found: impl FnOnce(&str) -> ApiError,
    ) -> Result<Option<String>, ApiError> {
        match asked {
            Some(t) if self.manages(t) => Ok(Some(t.to_string())),
            Some(t) => Err(not_found(t)),
            None if self.role == Role::Operator => Ok(None),
            None => Ok(Some(self.tenant.clone())),
        }
    }

    /// Refuses a key `role` stronger than the caller's own: an admin may not
    /// mint or revoke an operator key.
    pub(crate) fn may_handle_role(&self, role: Role) -> Result<(), ApiError> {
        if self.role.allows(role) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "{} key may not manage {} keys",
                a(self.role),
                role.as_str()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::tenant::{Tenant, TenantLimits};

    fn caller(tenant: &str, role: Role) -> Caller {
        Caller {
            tenant: tenant.into(),
            role,
            prefix: "p".into(),
            tenant_row: Tenant {
                id: tenant.into(),
                callback_secret: None,
                previous_secret: None,
                previous_valid_until: None,
                limits: TenantLimits::default(),
                created_at: 0,
            },
        }
    }

    fn nf(t: &str) -> ApiError {
        ApiError::NotFound(t.to_string())
    }

    #[test]
    fn operators_manage_every_tenant_admins_their_own() {
        let op = caller("default", Role::Operator);
        let admin = caller("acme", Role::Admin);
        let writer = caller("acme", Role::Write);
        assert!(op.manages("acme") && op.manages("default"));
        assert!(admin.manages("acme") && !admin.manages("default"));
        assert!(!writer.manages("acme"));
        assert_eq!(op.managed_scope(None, nf).unwrap(), None);
        assert_eq!(
            admin.managed_scope(None, nf).unwrap().as_deref(),
            Some("acme")
        );
        assert!(matches!(
            admin.managed_scope(Some("default"), nf),
            Err(ApiError::NotFound(_))
        ));
        assert!(admin.may_handle_role(Role::Admin).is_ok());
        assert!(admin.may_handle_role(Role::Operator).is_err());
        assert!(op.may_handle_role(Role::Operator).is_ok());
    }
}
