//! Login with an API key, the server-side sessions it creates, the cookie
//! that names one, and the CSRF token every change must carry.
//!
//! The browser only ever holds a random session id (`HttpOnly`,
//! `SameSite=Strict`, path `/ui`); the key itself stays in this process. On
//! every request the key is read again from the store, so a revoked or
//! expired key ends its sessions at once, not when the cookie expires.

use crate::UiState;
use crate::view;
use axum::Form;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use kairos_api::auth::keys;
use kairos_core::tenant::Role;
use kairos_core::time::{Millis, now_ms};
use maud::html;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// Name of the session cookie.
pub const COOKIE: &str = "kairos_session";
/// How long a session lasts after login.
const SESSION_MS: Millis = 12 * 3_600_000;
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
    expires_at: Millis,
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

    fn insert(&self, session: Session, now: Millis) -> String {
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

fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// The session id in the request's cookies.
fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
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

    pub(crate) fn is_admin(&self) -> bool {
        self.session.role.allows(Role::Admin)
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
            Err(Box::new(forbidden("a write or admin key")))
        }
    }

    pub(crate) fn require_admin(&self) -> Result<(), Refused> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(Box::new(forbidden("an admin key")))
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

fn constant_eq(a: &[u8], b: &[u8]) -> bool {
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

/// `GET /ui/login`.
pub(crate) async fn login_page() -> Response {
    login_form(None, StatusCode::OK)
}

fn login_form(error: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        div.login {
            h1 { span.brand-mark aria-hidden="true" { "◷" } " Kairos" }
            p { "Log in with an API key. The key stays on the server; your browser keeps only a session cookie." }
            form method="post" action="/ui/login" {
                label for="key" { "API key" }
                input id="key" type="password" name="key" autocomplete="off" required
                    placeholder="kai_…" aria-describedby=[error.map(|_| "login-error")]
                    aria-invalid=[error.map(|_| "true")];
                @if let Some(e) = error {
                    p.field-error id="login-error" role="alert" { (e) }
                }
                button.primary type="submit" { "Log in" }
            }
        }
    };
    (status, view::bare_page("Log in", body)).into_response()
}

/// The login form's body.
#[derive(Deserialize)]
pub(crate) struct LoginForm {
    key: String,
}

/// `POST /ui/login`: checks the key as the API does and opens a session.
pub(crate) async fn login(State(state): State<UiState>, Form(form): Form<LoginForm>) -> Response {
    let token = form.key.trim();
    let now = now_ms();
    let Some((prefix, secret)) = keys::parse(token) else {
        return login_form(
            Some("That is not an API key: expected kai_<prefix>_<secret>."),
            StatusCode::UNAUTHORIZED,
        );
    };
    let key = match state.store.api_key_get(prefix).await {
        Ok(key) => key.filter(|k| keys::secret_matches(secret, &k.secret_hash)),
        Err(e) => return view::store_error(e),
    };
    let key = match key {
        None => return login_form(Some("Unknown API key."), StatusCode::UNAUTHORIZED),
        Some(k) if k.revoked_at.is_some() => {
            return login_form(Some("This API key was revoked."), StatusCode::UNAUTHORIZED);
        }
        Some(k) if !k.usable_at(now) => {
            return login_form(Some("This API key has expired."), StatusCode::UNAUTHORIZED);
        }
        Some(k) => k,
    };
    let id = state.sessions.insert(
        Session {
            key: token.to_string(),
            prefix: key.prefix,
            tenant: key.tenant,
            role: key.role,
            csrf: random_hex(32),
            expires_at: now + SESSION_MS,
        },
        now,
    );
    let cookie = format!(
        "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        SESSION_MS / 1000
    );
    let mut res = Redirect::to("/ui/overview").into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
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
    res.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("kairos_session=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
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
