//! Authentication and authorization of `/openapi/*`: the bearer key is looked
//! up by its public prefix, its secret's hash compared in constant time, and
//! its role checked against the route. The caller (tenant, role, key prefix)
//! is then an extension every handler reads through [`Caller`].
//!
//! Verified keys are cached for [`crate::ApiConfig::key_cache_ttl`] (0.5 s by
//! default), so a key costs one lookup per half second per instance rather
//! than one per request, and a revocation is seen by every other instance
//! within that time (the revoking one forgets the key at once). Unknown
//! prefixes are remembered apart (`cache`), and a client address that keeps
//! failing is refused for a while (`client`).

mod cache;
mod client;
pub mod keys;
pub(crate) mod limits;
mod scope;

use crate::AppState;
use crate::error::ApiError;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use kairos_core::store::StoreError;
use kairos_core::tenant::{AuditEntry, Role, Tenant};
use kairos_core::time::now_ms;
use std::time::Instant;

/// Who is calling: the verified key's tenant, role and prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// Tenant every read and write of the request is scoped to.
    pub tenant: String,
    /// What the key may do.
    pub role: Role,
    /// The key's public prefix (recorded in the audit trail).
    pub prefix: String,
    /// The tenant's limit overrides, as cached with the key.
    pub(crate) tenant_row: Tenant,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        // Set by `authenticate` on every /openapi/* route; its absence is a bug.
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            tracing::error!("a handler ran without an authenticated caller");
            ApiError::Internal
        })
    }
}

/// The key a request acts as when the caller authenticated it already: the
/// dashboard's in-process calls, made for a session that names its key by
/// prefix (the key itself is never kept). Only code in this process can put
/// a request extension on a request; nothing received from the network
/// carries one. The key is still read, checked for revocation, expiry and
/// role, exactly as a bearer key is, minus the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionKey {
    /// The key's public prefix.
    pub prefix: String,
}

/// Paths only operator keys may use (whatever the method): they span tenants.
const OPERATOR_PATHS: [&str; 3] = ["/openapi/workers", "/openapi/tenants", "/openapi/limits"];
/// Paths admin keys may use, each handler scoping them to the key's own
/// tenant unless the key is an operator's ([`Caller::manages`]).
const ADMIN_PATHS: [&str; 2] = ["/openapi/keys", "/openapi/audit"];

/// Whether `path` is `base` or below it.
fn under(path: &str, base: &str) -> bool {
    path == base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
}

/// The role a request needs; `None` for public paths.
pub(crate) fn required_role(method: &Method, path: &str) -> Option<Role> {
    if !path.starts_with("/openapi/") {
        return None;
    }
    // A tenant's callback secret is its admin's to rotate.
    let tenant_secret = path.starts_with("/openapi/tenants/") && path.ends_with("/callback-secret");
    Some(
        if tenant_secret || ADMIN_PATHS.iter().any(|p| under(path, p)) {
            Role::Admin
        } else if OPERATOR_PATHS.iter().any(|p| under(path, p)) {
            Role::Operator
        } else if method == Method::GET || method == Method::HEAD {
            Role::Read
        } else {
            Role::Write
        },
    )
}

async fn lookup(state: &AppState, prefix: &str) -> Result<cache::Found, StoreError> {
    state
        .auth
        .keys
        .lookup(prefix, || async {
            Ok(match state.store.api_key_get(prefix).await? {
                Some(key) => state
                    .store
                    .tenant_get(&key.tenant)
                    .await?
                    .map(|tenant| (key, tenant)),
                None => None,
            })
        })
        .await
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::Unauthorized(msg.to_string())
}

/// Middleware: public paths pass; `/openapi/*` needs a usable key of a role
/// that allows the request (401 otherwise, 403 for a role too weak, 429 for
/// a client address that failed too often).
pub(crate) async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(needed) = required_role(req.method(), req.uri().path()) else {
        return Ok(next.run(req).await);
    };
    let limit = state.config.api_auth_fail_limit;
    let client = client::client_of(&req, &state.config.api_trusted_proxies);
    if let Some(ip) = client
        && let Some(secs) = state.auth.failures.refused(ip, limit, Instant::now())
    {
        return Err(ApiError::RateLimited {
            retry_after_secs: secs,
            message: format!(
                "too many failed authentications from {ip} (at most {limit} a minute); \
                 retry in {secs} s"
            ),
        });
    }
    let session = req.extensions().get::<SessionKey>().cloned();
    let verified = match (session, bearer_token(&req)) {
        (Some(session), _) => verify_prefix(&state, &session.prefix, None, needed).await,
        (None, Ok(token)) => verify(&state, &token, needed).await,
        (None, Err(e)) => Err(e),
    };
    match verified {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            Ok(next.run(req).await)
        }
        Err(e) => {
            if let (ApiError::Unauthorized(_), Some(ip)) = (&e, client) {
                state.auth.failures.failed(ip, limit, Instant::now());
            }
            Err(e)
        }
    }
}

/// The caller `token` stands for, if its key is usable and strong enough.
async fn verify(state: &AppState, token: &str, needed: Role) -> Result<Caller, ApiError> {
    let (prefix, secret) = keys::parse(token)
        .ok_or_else(|| unauthorized("malformed API key: expected kai_<prefix>_<secret>"))?;
    verify_prefix(state, prefix, Some(secret), needed).await
}

/// The caller the key `prefix` stands for, if usable and strong enough;
/// `secret` must match unless the caller proved the key already
/// ([`SessionKey`]).
async fn verify_prefix(
    state: &AppState,
    prefix: &str,
    secret: Option<&str>,
    needed: Role,
) -> Result<Caller, ApiError> {
    let (key, tenant) = lookup(state, prefix)
        .await?
        .filter(|(key, _)| secret.is_none_or(|s| keys::secret_matches(s, &key.secret_hash)))
        .ok_or_else(|| unauthorized("unknown API key"))?;
    if key.revoked_at.is_some() {
        return Err(unauthorized("this API key was revoked"));
    }
    if !key.usable_at(now_ms()) {
        return Err(unauthorized("this API key has expired"));
    }
    if !key.role.allows(needed) {
        return Err(ApiError::Forbidden(format!(
            "{} key may not do this; it needs {} key",
            scope::a(key.role),
            scope::a(needed)
        )));
    }
    Ok(Caller {
        tenant: key.tenant.clone(),
        role: key.role,
        prefix: key.prefix.clone(),
        tenant_row: tenant,
    })
}

/// The bearer token of `req` (owned: the request is not held across awaits).
fn bearer_token(req: &Request) -> Result<String, ApiError> {
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .ok_or_else(|| unauthorized("missing `Authorization: Bearer <key>` header"))?;
    let value = header
        .to_str()
        .map_err(|_| unauthorized("the Authorization header is not text"))?;
    match value.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
            Ok(token.trim().to_string())
        }
        _ => Err(unauthorized(
            "the Authorization header must be `Bearer <key>`",
        )),
    }
}

impl AppState {
    /// Records a control action done by `caller`. Written after the action
    /// committed; a failure to record is logged, not reported to the caller
    /// (the action already happened).
    pub(crate) async fn audit(&self, caller: &Caller, tenant: &str, action: &str, target: &str) {
        let entry = AuditEntry {
            id: 0,
            tenant: tenant.to_string(),
            actor: caller.prefix.clone(),
            action: action.to_string(),
            target: target.to_string(),
            at: now_ms(),
        };
        if let Err(e) = self.store.audit_append(&entry).await {
            tracing::error!(error = %e, action, target, "cannot record the audit entry");
        }
    }
}

/// What authentication and limits keep between requests.
pub(crate) struct AuthState {
    pub(crate) keys: cache::KeyCache,
    pub(crate) failures: client::FailedAuths,
    /// Create buckets by key prefix.
    pub(crate) buckets: limits::Buckets,
    /// Trigger/resume/redeliver buckets by key prefix.
    pub(crate) actions: limits::Buckets,
    pub(crate) live: limits::LiveCounts,
}

impl AuthState {
    pub(crate) fn new(config: &crate::ApiConfig) -> Self {
        AuthState {
            keys: cache::KeyCache::new(
                config.api_key_cache_size,
                config.key_cache_ttl,
                config.key_negative_ttl(),
            ),
            failures: client::FailedAuths::default(),
            buckets: limits::Buckets::default(),
            actions: limits::Buckets::default(),
            live: limits::LiveCounts::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_per_route() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(required_role(&get, "/healthz"), None);
        assert_eq!(required_role(&get, "/openapi.json"), None);
        assert_eq!(required_role(&get, "/docs/"), None);
        assert_eq!(required_role(&get, "/openapi/jobs"), Some(Role::Read));
        assert_eq!(required_role(&post, "/openapi/jobs"), Some(Role::Write));
        assert_eq!(
            required_role(&Method::DELETE, "/openapi/jobs/x"),
            Some(Role::Write)
        );
        assert_eq!(
            required_role(&get, "/openapi/workers"),
            Some(Role::Operator)
        );
        assert_eq!(
            required_role(&get, "/openapi/tenants"),
            Some(Role::Operator)
        );
        assert_eq!(
            required_role(&post, "/openapi/tenants"),
            Some(Role::Operator)
        );
        assert_eq!(
            required_role(&Method::PATCH, "/openapi/tenants/a"),
            Some(Role::Operator)
        );
        assert_eq!(required_role(&post, "/openapi/keys"), Some(Role::Admin));
        assert_eq!(
            required_role(&Method::DELETE, "/openapi/keys/abc"),
            Some(Role::Admin)
        );
        assert_eq!(required_role(&get, "/openapi/keysx"), Some(Role::Read));
        assert_eq!(required_role(&get, "/openapi/audit"), Some(Role::Admin));
        assert_eq!(
            required_role(&post, "/openapi/tenants/a/callback-secret"),
            Some(Role::Admin)
        );
        assert_eq!(
            required_role(&post, "/openapi/tenants/a/callback-secretx"),
            Some(Role::Operator)
        );
    }
}
