//! The server-side sessions a login ([`crate::login`]) creates, the cookie
//! that names one, and the CSRF token every change must carry.
//!
//! The browser only ever holds a random session id (`HttpOnly`,
//! `SameSite=Strict`, path `/ui`, `Secure` as configured); the key itself
//! stays in this process. On
//! every request the key is read again from the store, so a revoked or
//! expired key ends its sessions at once, not when the cookie expires.

use crate::UiState;
use crate::view;
use axum::Form;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use kairos_core::tenant::Role;
use kairos_core::time::{Millis, now_ms};
use maud::html;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// Name of the session cookie.
pub const COOKIE: &str = "kairos_session";
/// How long a session lasts after login.
pub(crate) const SESSION_MS: Millis = 12 * 3_600_000;
/// Most sessions kept; the oldest go first beyond it.
const MAX_SESSIONS: usize = 10_000;

/// One logged-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The API key, sent as the bearer of every API call.
    pub(crate) key: String,
    /// The key's prefix (what the audit trail names).
    pub(crate) prefix: String,
    /// Tenant every read and change is scoped to.
    pub(crate) tenant: String,
    /// What the key may do.
    pub(crate) role: Role,
    /// Token every change must echo.
    pub(crate) csrf: String,
    pub(crate) expires_at: Millis,
}

/// Sessions by id.
#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    fn get(&self, id: &str, now: Millis) -> Option<Session> {
        let map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        map.get(id).filter(|s| s.expires_at > now).cloned()
    }

    pub(crate) fn insert(&self, session: Session, now: Millis) -> String {
        let id = random_hex(32);
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| s.expires_at > now);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.expires_at)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(id.clone(), session);
        id
    }

    fn remove(&self, id: &str) {
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(id);
    }
}

pub(crate) fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
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

/// The session id in the request's cookies.
fn session_id(headers: &HeaderMap) -> Option<String> {
    cookie_value(headers, COOKIE)
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

    pub(crate) fn key(&self) -> &str {
        &self.session.key
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

/// Where an unauthenticated request goes: htmx requests are told to load
/// the login page, others are redirected to it.
fn to_login(parts: &Parts) -> Response {
    if parts.headers.contains_key("hx-request") {
        let mut res = StatusCode::UNAUTHORIZED.into_response();
        res.headers_mut()
            .insert("HX-Redirect", HeaderValue::from_static("/ui/login"));
        res
    } else {
        Redirect::to("/ui/login").into_response()
    }
}

impl FromRequestParts<UiState> for Ctx {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &UiState) -> Result<Self, Response> {
        let now = now_ms();
        let Some(session) = session_id(&parts.headers).and_then(|id| state.sessions.get(&id, now))
        else {
            return Err(to_login(parts));
        };
        // The key may have been revoked or expired since login.
        match state.store.api_key_get(&session.prefix).await {
            Ok(Some(key)) if key.usable_at(now) => Ok(Ctx { session }),
            Ok(_) => {
                if let Some(id) = session_id(&parts.headers) {
                    state.sessions.remove(&id);
                }
                Err(to_login(parts))
            }
            Err(e) => Err(view::store_error(e)),
        }
    }
}

/// The logout form's body.
#[derive(Deserialize)]
pub(crate) struct CsrfForm {
    csrf: String,
}

/// `POST /ui/logout`: ends the session and clears the cookie.
pub(crate) async fn logout(
    State(state): State<UiState>,
    ctx: Ctx,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refused) = ctx.check_csrf(&form.csrf) {
        return *refused;
    }
    if let Some(id) = session_id(&headers) {
        state.sessions.remove(&id);
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
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; kairos_session=abc; b=2"),
        );
        assert_eq!(session_id(&h).as_deref(), Some("abc"));
        assert_eq!(session_id(&HeaderMap::new()), None);
    }

    #[test]
    fn sessions_expire() {
        let s = Sessions::default();
        let id = s.insert(
            Session {
                key: "k".into(),
                prefix: "p".into(),
                tenant: "t".into(),
                role: Role::Read,
                csrf: "c".into(),
                expires_at: 100,
            },
            0,
        );
        assert!(s.get(&id, 99).is_some());
        assert!(s.get(&id, 100).is_none());
        assert!(constant_eq(b"abc", b"abc") && !constant_eq(b"abc", b"abd"));
    }
}
