//! The login page and its POST, guarded against login CSRF: a cross-site
//! page must not be able to log a victim's browser into the attacker's
//! tenant (whose pages the victim would then fill with their own data).
//!
//! Two independent checks, both needed to log in:
//! - **Origin.** `Sec-Fetch-Site` must say `same-origin` (or `none`, a
//!   typed navigation); a browser without it must send an `Origin` naming
//!   this server. A request with neither (not a browser) passes to the next
//!   check.
//! - **Token.** The login page sets a random token in an `HttpOnly`,
//!   `SameSite=Strict` cookie and in the form (double submit); the POST must
//!   carry both, equal. A cross-site form has no way to read the cookie, and
//!   the browser does not send it with a cross-site POST.
//!
//! The session and login cookies get `Secure` as
//! [`kairos_api::ApiConfig::ui_cookie_secure`] says.

use crate::UiState;
use crate::session::{COOKIE, SESSION_MS, constant_eq, cookie_value, random_hex, safe_next};
use crate::view;
use axum::extract::{Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use kairos_api::CookieSecure;
use kairos_api::auth::keys;
use kairos_core::time::now_ms;
use maud::html;

/// Name of the login CSRF cookie (scoped to the login page's path).
pub const LOGIN_COOKIE: &str = "kairos_login_csrf";
/// Length in hex digits of a login token.
const TOKEN_HEX: usize = 64;

/// Whether the request came over HTTPS, as far as this process can tell:
/// it terminates no TLS itself, so a proxy must say so.
pub(crate) fn came_over_https(headers: &HeaderMap) -> bool {
    let proto = |v: &HeaderValue| v.to_str().ok().map(str::to_ascii_lowercase);
    let forwarded_proto = headers
        .get("x-forwarded-proto")
        .and_then(proto)
        .and_then(|v| v.split(',').next().map(|p| p.trim() == "https"));
    let forwarded = headers.get(header::FORWARDED).and_then(proto).map(|v| {
        v.split([';', ',']).any(|p| {
            p.trim()
                .strip_prefix("proto=")
                .is_some_and(|s| s.trim_matches('"') == "https")
        })
    });
    forwarded_proto.or(forwarded).unwrap_or(false)
}

/// `name=value` with the dashboard's attributes (`Secure` as `secure` says).
pub(crate) fn cookie(
    name: &str,
    value: &str,
    path: &str,
    max_age_secs: Option<i64>,
    secure: bool,
) -> Option<HeaderValue> {
    let mut c = format!("{name}={value}; Path={path}; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age_secs {
        c.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        c.push_str("; Secure");
    }
    HeaderValue::from_str(&c).ok()
}

/// Whether cookies set in answer to `headers` get `Secure`.
pub(crate) fn secure(setting: CookieSecure, headers: &HeaderMap) -> bool {
    match setting {
        CookieSecure::Always => true,
        CookieSecure::Never => false,
        CookieSecure::Auto => came_over_https(headers),
    }
}

/// `Ok` unless the browser says the POST came from another origin.
fn same_origin(parts: &Parts) -> Result<(), &'static str> {
    let h = &parts.headers;
    if let Some(site) = h.get("sec-fetch-site") {
        return match site.to_str() {
            Ok("same-origin" | "none") => Ok(()),
            _ => Err("it was sent from another site"),
        };
    }
    let Some(origin) = h.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin
        .to_str()
        .ok()
        .and_then(|o| url::Url::parse(o).ok())
        .ok_or("its origin is hidden or unreadable")?;
    let authority = match (origin.host_str(), origin.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        _ => return Err("its origin is hidden or unreadable"),
    };
    // What the browser asked for: the Host header (HTTP/1), the URI's
    // authority (HTTP/2), or what a proxy says the public host was.
    let ours = [
        h.get(header::HOST).and_then(|v| v.to_str().ok()),
        parts.uri.authority().map(|a| a.as_str()),
        h.get("x-forwarded-host").and_then(|v| v.to_str().ok()),
    ];
    if !ours
        .into_iter()
        .flatten()
        .any(|a| a.trim().eq_ignore_ascii_case(&authority))
    {
        return Err("it was sent from another site");
    }
    // The scheme is known only when a proxy says it.
    if h.contains_key("x-forwarded-proto") && came_over_https(h) != (origin.scheme() == "https") {
        return Err("it was sent from another site");
    }
    Ok(())
}

/// The login token in the request's cookies, if well formed.
fn login_token(headers: &HeaderMap) -> Option<String> {
    cookie_value(headers, LOGIN_COOKIE)
        .filter(|t| t.len() == TOKEN_HEX && t.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The login page's query: the page to return to.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct LoginQuery {
    #[serde(default)]
    next: String,
}

/// `GET /ui/login`: the form, with the login token in it and in a cookie
/// (the token already set is kept, so two open login tabs both work), and
/// the page to return to if it is one of ours.
pub(crate) async fn login_page(
    State(state): State<UiState>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> Response {
    let token = login_token(&headers).unwrap_or_else(|| random_hex(TOKEN_HEX / 2));
    with_login_cookie(
        login_form(&token, safe_next(&q.next), None, StatusCode::OK),
        &state,
        &headers,
        &token,
    )
}

fn with_login_cookie(
    mut res: Response,
    state: &UiState,
    headers: &HeaderMap,
    token: &str,
) -> Response {
    let secure = secure(state.cookie_secure, headers);
    if let Some(v) = cookie(LOGIN_COOKIE, token, "/ui/login", None, secure) {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res
}

fn login_form(
    token: &str,
    next: Option<&str>,
    error: Option<&str>,
    status: StatusCode,
) -> Response {
    let body = html! {
        div.login {
            h1 { (view::brand_mark()) " Kairos" }
            p { "Log in with an API key. The key is checked on the server; your browser keeps only a session cookie." }
            form method="post" action="/ui/login" {
                input type="hidden" name="csrf" value=(token);
                @if let Some(n) = next { input type="hidden" name="next" value=(n); }
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

/// The 403 of a login that did not come from this dashboard's own form.
fn refused(why: &str) -> Response {
    (
        StatusCode::FORBIDDEN,
        view::bare_page(
            "Login refused",
            html! {
                h1 { "Login refused" }
                p { "This login did not come from this dashboard's own login form: " (why) "." }
                p { "If you meant to log in, open " a href="/ui/login" { "the login page" } " and log in there." }
            },
        ),
    )
        .into_response()
}

/// `POST /ui/login`: checks where the form came from, then the key as the
/// API does, opens a session and goes to the page asked for before login
/// (`next`, when it is one of ours), else the overview.
pub(crate) async fn login(
    State(state): State<UiState>,
    parts: Parts,
    form: crate::forms::Fields,
) -> Response {
    if let Err(why) = same_origin(&parts) {
        return refused(why);
    }
    let headers = &parts.headers;
    let Some(token) =
        login_token(headers).filter(|t| constant_eq(t.as_bytes(), form.get("csrf").as_bytes()))
    else {
        return refused("its form token is missing or stale (reload the login page)");
    };
    let next = safe_next(form.get("next"));
    let retry = |msg: &str| {
        with_login_cookie(
            login_form(&token, next, Some(msg), StatusCode::UNAUTHORIZED),
            &state,
            headers,
            &token,
        )
    };
    let now = now_ms();
    let Some((prefix, secret)) = keys::parse(form.get("key")) else {
        return retry("That is not an API key: expected kai_<prefix>_<secret>.");
    };
    let key = match state.store.api_key_get(prefix).await {
        Ok(key) => key.filter(|k| keys::secret_matches(secret, &k.secret_hash)),
        Err(e) => return view::store_error(e),
    };
    let key = match key {
        None => return retry("Unknown API key."),
        Some(k) if k.revoked_at.is_some() => return retry("This API key was revoked."),
        Some(k) if !k.usable_at(now) => return retry("This API key has expired."),
        Some(k) => k,
    };
    let id = match crate::session::open(&state, &key.prefix, now).await {
        Ok(id) => id,
        Err(e) => return view::store_error(e),
    };
    let secure = secure(state.cookie_secure, headers);
    let mut res = Redirect::to(next.unwrap_or("/ui/overview")).into_response();
    let h = res.headers_mut();
    if let Some(v) = cookie(COOKIE, &id, "/ui", Some(SESSION_MS / 1000), secure) {
        h.append(header::SET_COOKIE, v);
    }
    // The token did its work; the next login page makes a new one.
    if let Some(v) = cookie(LOGIN_COOKIE, "", "/ui/login", Some(0), secure) {
        h.append(header::SET_COOKIE, v);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;

    fn parts(headers: &[(&str, &str)]) -> Parts {
        let mut req = Request::post("/ui/login");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.body(()).unwrap().into_parts().0
    }

    #[test]
    fn only_this_origin_may_post_the_login() {
        let host = ("host", "kairos.example:8080");
        assert!(same_origin(&parts(&[host])).is_ok(), "no browser headers");
        assert!(same_origin(&parts(&[host, ("sec-fetch-site", "same-origin")])).is_ok());
        for site in ["cross-site", "same-site"] {
            assert!(same_origin(&parts(&[host, ("sec-fetch-site", site)])).is_err());
        }
        assert!(same_origin(&parts(&[host, ("origin", "http://kairos.example:8080")])).is_ok());
        for o in ["http://evil.example", "http://kairos.example", "null"] {
            assert!(same_origin(&parts(&[host, ("origin", o)])).is_err(), "{o}");
        }
        // Behind a TLS proxy: the scheme must be the public one.
        let proxied = [("host", "kairos.example"), ("x-forwarded-proto", "https")];
        let with = |o: &'static str| {
            let mut h = proxied.to_vec();
            h.push(("origin", o));
            same_origin(&parts(&h))
        };
        assert!(with("https://kairos.example").is_ok());
        assert!(with("http://kairos.example").is_err());
    }

    #[test]
    fn cookies_are_secure_as_configured() {
        let plain = HeaderMap::new();
        let mut tls = HeaderMap::new();
        tls.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let mut fwd = HeaderMap::new();
        fwd.insert(
            header::FORWARDED,
            HeaderValue::from_static("for=1.2.3.4;proto=https"),
        );
        assert!(!secure(CookieSecure::Auto, &plain));
        assert!(secure(CookieSecure::Auto, &tls) && secure(CookieSecure::Auto, &fwd));
        assert!(secure(CookieSecure::Always, &plain));
        assert!(!secure(CookieSecure::Never, &tls));
        let c = cookie("a", "b", "/ui", Some(5), true).unwrap();
        assert_eq!(
            c.to_str().unwrap(),
            "a=b; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=5; Secure"
        );
    }
}
