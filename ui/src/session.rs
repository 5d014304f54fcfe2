//! The dashboard's sessions, the cookie that names one, the CSRF token
//! every change must carry, and where a browser without a session goes.
//!
//! Sessions are rows of the database ([`kairos_core::store::SessionStore`]):
//! every API instance serves every session (no sticky sessions needed) and a
//! restart of `kairos api` logs nobody out. The browser holds a random
//! 256-bit id (`HttpOnly`, `SameSite=Strict`, path `/ui`, `Secure` as
//! configured); the database keeps only the id's SHA-256 and the prefix of
//! the key the session acts as, never the key. On every request the key is
//! read again, so a revoked or expired key ends its sessions at once, not
//! when the cookie expires. The CSRF token is derived from the id (a hash
//! with its own label), so it needs no storage and no other instance can
//! disagree about it. So is the session's signing key (another label),
//! which never leaves the server: what the dashboard hands the browser to
//! hand back unchanged (an error to show, a bulk action's snapshot) is
//! signed with it, so no other session and no link can forge it.
//!
//! A page asked for without a session sends the browser to the login page
//! with the page in `next`, and the login sends it back there
//! (`safe_next` accepts only this dashboard's own paths).

use crate::UiState;
use crate::view;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use hmac::{Hmac, Mac};
use kairos_core::store::StoreError;
use kairos_core::tenant::{Role, UiSession};
use kairos_core::time::{Millis, now_ms};
use maud::html;
use sha2::{Digest, Sha256};

/// Name of the session cookie.
pub const COOKIE: &str = "kairos_session";
/// How long a session lasts after login.
pub(crate) const SESSION_MS: Millis = 12 * 3_600_000;
/// Length in hex digits of a session id (256 random bits).
const ID_HEX: usize = 64;
/// Longest `next` kept across a login.
const MAX_NEXT: usize = 2048;

/// One logged-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The prefix of the API key the session acts as: what the audit trail
    /// names, and what the dashboard's in-process API calls act as.
    pub(crate) prefix: String,
    /// Tenant every read and change is scoped to.
    pub(crate) tenant: String,
    /// What the key may do.
    pub(crate) role: Role,
    /// Token every change must echo.
    pub(crate) csrf: String,
    /// Key of what this session signs ([`Ctx::sign`]); never sent out.
    pub(crate) signing: String,
}

pub(crate) fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

fn sha256_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    hex::encode(h.finalize())
}

/// What the database keeps of a session id.
fn id_hash(id: &str) -> String {
    sha256_hex(&[b"kairos-ui-session\0", id.as_bytes()])
}

/// The CSRF token of the session `id`.
fn csrf_of(id: &str) -> String {
    sha256_hex(&[b"kairos-ui-csrf\0", id.as_bytes()])
}

/// The signing key of the session `id`.
fn signing_of(id: &str) -> String {
    sha256_hex(&[b"kairos-ui-sign\0", id.as_bytes()])
}

/// Stores a new session acting as the key `prefix`; its id, for the cookie.
pub(crate) async fn open(state: &UiState, prefix: &str, now: Millis) -> Result<String, StoreError> {
    // Expired sessions go here, when someone logs in, rather than in a
    // background task every instance would have to run.
    if let Err(e) = state.store.ui_sessions_purge(now).await {
        tracing::warn!(error = %e, "dashboard: cannot purge expired sessions");
    }
    let id = random_hex(ID_HEX / 2);
    state
        .store
        .ui_session_create(&UiSession {
            id_hash: id_hash(&id),
            key_prefix: prefix.to_string(),
            created_at: now,
            expires_at: now + SESSION_MS,
        })
        .await?;
    Ok(id)
}

/// The value of cookie `name` in the request's cookies.
pub(crate) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The session id in the request's cookies, if well formed.
fn session_id(headers: &HeaderMap) -> Option<String> {
    cookie_value(headers, COOKIE)
        .filter(|id| id.len() == ID_HEX && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The logged-in caller of `headers`, if any: a session that exists, has
/// not expired, and whose key is still usable (a session of a revoked or
/// expired key is deleted).
pub(crate) async fn current(
    state: &UiState,
    headers: &HeaderMap,
) -> Result<Option<Ctx>, StoreError> {
    let Some(id) = session_id(headers) else {
        return Ok(None);
    };
    let hash = id_hash(&id);
    let now = now_ms();
    let Some(stored) = state.store.ui_session_get(&hash).await? else {
        return Ok(None);
    };
    if stored.expires_at <= now {
        return Ok(None);
    }
    match state.store.api_key_get(&stored.key_prefix).await? {
        Some(key) if key.usable_at(now) => Ok(Some(Ctx {
            session: Session {
                prefix: key.prefix,
                tenant: key.tenant,
                role: key.role,
                csrf: csrf_of(&id),
                signing: signing_of(&id),
            },
        })),
        _ => {
            state.store.ui_session_delete(&hash).await?;
            Ok(None)
        }
    }
}

/// `raw` if it is a page of this dashboard to return to after login: a
/// path under `/ui` (never the login or logout page), so a link cannot send
/// a browser elsewhere through the login (no open redirect).
pub(crate) fn safe_next(raw: &str) -> Option<&str> {
    let path = raw.split(['?', '#']).next().unwrap_or_default();
    let ours = path == "/ui" || path.starts_with("/ui/");
    let clean = raw.len() <= MAX_NEXT
        && raw.bytes().all(|b| b.is_ascii_graphic())
        && !raw.contains('\\')
        && !path.contains("//")
        && !path.split('/').any(|seg| seg == "..");
    let loops = ["/ui/login", "/ui/logout"].contains(&path);
    (ours && clean && !loops).then_some(raw)
}

/// The login page's address, with `next` when it is worth returning to.
pub(crate) fn login_url(next: Option<&str>) -> String {
    match next
        .and_then(safe_next)
        .filter(|n| !["/ui", "/ui/"].contains(n))
    {
        Some(n) => format!("/ui/login?{}", crate::pages::query(&[("next", n)])),
        None => "/ui/login".to_string(),
    }
}

/// A refused change: the page that says why (boxed, as responses are large).
pub(crate) type Refused = Box<Response>;

/// The logged-in caller of a page. Extracting it sends a browser without a
/// usable session to the login page.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub(crate) session: Session,
}

impl Ctx {
    pub(crate) fn tenant(&self) -> &str {
        &self.session.tenant
    }

    /// What the dashboard's API calls act as ([`crate::api::InProcess`]):
    /// the session key's prefix (the key itself is never kept).
    pub(crate) fn key(&self) -> &str {
        &self.session.prefix
    }

    /// Whether action buttons are shown (the API refuses read keys anyway).
    pub(crate) fn can_write(&self) -> bool {
        self.session.role.allows(Role::Write)
    }

    /// Whether the key manages its tenant's keys and audit trail.
    pub(crate) fn is_admin(&self) -> bool {
        self.session.role.allows(Role::Admin)
    }

    /// Whether the key may manage `tenant`'s keys and audit trail (the API
    /// decides the same way).
    pub(crate) fn manages(&self, tenant: &str) -> bool {
        self.is_operator() || (self.is_admin() && tenant == self.tenant())
    }

    /// Whether the key manages every tenant, and sees the workers.
    pub(crate) fn is_operator(&self) -> bool {
        self.session.role.allows(Role::Operator)
    }

    /// A session of its own (a random id) acting as a `role` key of
    /// tenant `t`, for unit tests of what depends on the session.
    #[cfg(test)]
    pub(crate) fn for_test(role: Role) -> Ctx {
        let id = random_hex(ID_HEX / 2);
        Ctx {
            session: Session {
                prefix: "testprefix01".into(),
                tenant: "t".into(),
                role,
                csrf: csrf_of(&id),
                signing: signing_of(&id),
            },
        }
    }

    /// An HMAC-SHA256 of `data` under this session's signing key, for the
    /// purpose `label` (hex): what the browser is to return unchanged.
    pub(crate) fn sign(&self, label: &str, data: &[u8]) -> String {
        hex::encode(self.mac(label, data).finalize().into_bytes())
    }

    /// Whether `sig` is this session's signature of `data` for `label`
    /// (compared in constant time).
    pub(crate) fn verify(&self, label: &str, data: &[u8], sig: &str) -> bool {
        hex::decode(sig).is_ok_and(|sig| self.mac(label, data).verify_slice(&sig).is_ok())
    }

    fn mac(&self, label: &str, data: &[u8]) -> Hmac<Sha256> {
        // HMAC takes a key of any length; this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(self.session.signing.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
        mac.update(label.as_bytes());
        mac.update(b"\0");
        mac.update(data);
        mac
    }

    /// Refuses a change whose CSRF token is not this session's.
    pub(crate) fn check_csrf(&self, sent: &str) -> Result<(), Refused> {
        if constant_eq(sent.as_bytes(), self.session.csrf.as_bytes()) {
            Ok(())
        } else {
            Err(Box::new((
                StatusCode::FORBIDDEN,
                view::bare_page(
                    "Refused",
                    html! { p { "This form has expired or did not come from this dashboard. Reload the page and try again." } },
                ),
            )
                .into_response()))
        }
    }

    /// Refuses a change a read key asked for (the API would refuse it too;
    /// this answers with a page instead of an error body).
    pub(crate) fn require_write(&self) -> Result<(), Refused> {
        if self.can_write() {
            Ok(())
        } else {
            Err(Box::new(forbidden("a write, admin or operator key")))
        }
    }

    pub(crate) fn require_admin(&self) -> Result<(), Refused> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(Box::new(forbidden("an admin or operator key")))
        }
    }

    pub(crate) fn require_operator(&self) -> Result<(), Refused> {
        if self.is_operator() {
            Ok(())
        } else {
            Err(Box::new(forbidden("an operator key")))
        }
    }
}

fn forbidden(needs: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        view::bare_page(
            "Not allowed",
            html! { p { "This needs " (needs) ". Log in with one to do this." } },
        ),
    )
        .into_response()
}

pub(crate) fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where an unauthenticated request goes: the login page, with the page
/// asked for as `next` (a GET's own address; for htmx requests, the page
/// they were made from, which htmx is told to load instead).
fn to_login(parts: &Parts) -> Response {
    if parts.headers.contains_key("hx-request") {
        let page = parts
            .headers
            .get("hx-current-url")
            .and_then(|v| v.to_str().ok())
            .and_then(|u| url::Url::parse(u).ok())
            .map(|u| match u.query() {
                Some(q) => format!("{}?{q}", u.path()),
                None => u.path().to_string(),
            });
        let mut res = StatusCode::UNAUTHORIZED.into_response();
        if let Ok(v) = HeaderValue::from_str(&login_url(page.as_deref())) {
            res.headers_mut().insert("HX-Redirect", v);
        }
        res
    } else if parts.method == Method::GET {
        let asked = parts.uri.path_and_query().map(|p| p.as_str());
        Redirect::to(&login_url(asked)).into_response()
    } else {
        Redirect::to("/ui/login").into_response()
    }
}

impl FromRequestParts<UiState> for Ctx {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &UiState) -> Result<Self, Response> {
        match current(state, &parts.headers).await {
            Ok(Some(ctx)) => Ok(ctx),
            Ok(None) => Err(to_login(parts)),
            Err(e) => Err(view::store_error(e)),
        }
    }
}

/// `POST /ui/logout`: ends the session and clears the cookie.
pub(crate) async fn logout(
    State(state): State<UiState>,
    ctx: Ctx,
    headers: HeaderMap,
    form: crate::forms::Fields,
) -> Response {
    // A form without its token is refused like one with another's (a
    // typed form would answer its own plain-text 422 instead).
    if let Err(refused) = ctx.check_csrf(form.get("csrf")) {
        return *refused;
    }
    if let Some(id) = session_id(&headers)
        && let Err(e) = state.store.ui_session_delete(&id_hash(&id)).await
    {
        return view::store_error(e);
    }
    let mut res = Redirect::to("/ui/login").into_response();
    let secure = crate::login::secure(state.cookie_secure, &headers);
    if let Some(v) = crate::login::cookie(COOKIE, "", "/ui", Some(0), secure) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_session_cookie_among_others() {
        let id = "ab".repeat(32);
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=1; kairos_session={id}; b=2")).unwrap(),
        );
        assert_eq!(session_id(&h), Some(id));
        assert_eq!(session_id(&HeaderMap::new()), None);
        let mut bad = HeaderMap::new();
        bad.insert(
            header::COOKIE,
            HeaderValue::from_static("kairos_session=xyz"),
        );
        assert_eq!(session_id(&bad), None, "not an id this dashboard made");
    }

    #[test]
    fn the_stored_hash_and_the_csrf_token_reveal_nothing_of_each_other() {
        let id = random_hex(32);
        assert_eq!(id.len(), ID_HEX);
        let (stored, csrf) = (id_hash(&id), csrf_of(&id));
        assert_ne!(stored, csrf);
        assert!(signing_of(&id) != csrf && signing_of(&id) != stored);
        assert_ne!(stored, id);
        assert_eq!(csrf, csrf_of(&id), "every instance derives the same token");
        assert!(constant_eq(b"abc", b"abc") && !constant_eq(b"abc", b"abd"));
    }

    #[test]
    fn only_this_dashboards_pages_are_returned_to_after_login() {
        for ok in [
            "/ui/jobs",
            "/ui/jobs?status=paused&q=a%20b",
            "/ui/jobs/0193-ab",
            "/ui",
            "/ui/executions?filtered=1#top",
            "/ui/jobs?q=http://a",
        ] {
            assert_eq!(safe_next(ok), Some(ok), "{ok}");
        }
        for bad in [
            "https://evil.example/ui/jobs",
            "//evil.example/ui/",
            "/\\evil.example",
            "/uix",
            "/openapi/jobs",
            "ui/jobs",
            "/ui//evil.example",
            "/ui/../openapi/jobs",
            "/ui/login",
            "/ui/login?next=/ui/jobs",
            "/ui/logout",
            "/ui/jobs\r\nSet-Cookie:x=1",
            "/ui/jobs x",
            "",
        ] {
            assert_eq!(safe_next(bad), None, "{bad:?}");
        }
        assert_eq!(safe_next(&format!("/ui/{}", "a".repeat(MAX_NEXT))), None);
        assert_eq!(
            login_url(Some("/ui/jobs?q=a")),
            "/ui/login?next=%2Fui%2Fjobs%3Fq%3Da"
        );
        assert_eq!(login_url(Some("/ui/")), "/ui/login");
        assert_eq!(login_url(Some("https://evil.example")), "/ui/login");
        assert_eq!(login_url(None), "/ui/login");
    }
}
