//! Following a redirect of the `http` handler as browsers and curl do: the
//! method a 303 (or a 301/302 after a POST) asks for, and credentials and
//! `Referer` sent only to the origin of the job's URL.

use super::Body;
use kairos_core::sensitive::SensitiveKeys;
use reqwest::Method;
use reqwest::Url;
use reqwest::header::{HeaderName, HeaderValue};
use std::sync::LazyLock;

/// Scheme, host and port: what must stay the same for credentials to follow.
pub(super) type Origin = (String, Option<String>, Option<u16>);

pub(super) fn origin(url: &Url) -> Origin {
    (
        url.scheme().to_string(),
        url.host_str().map(str::to_ascii_lowercase),
        url.port_or_known_default(),
    )
}

/// What one request of a redirect chain sends.
#[derive(Debug)]
pub(super) struct Hop {
    pub(super) url: Url,
    pub(super) method: Method,
    pub(super) headers: Vec<(HeaderName, HeaderValue)>,
    pub(super) body: Body,
}

/// Whether `name` carries a credential: one of the HTTP ones, or a name
/// sensitive by the rule params are masked by (`X-Api-Key`, `X-Auth-Token`).
/// The default names are used (the worker does not read the API's
/// `KAIROS_API_SENSITIVE_PARAMS`).
fn is_credential(name: &HeaderName) -> bool {
    static NAMES: LazyLock<SensitiveKeys> = LazyLock::new(SensitiveKeys::default);
    name == reqwest::header::AUTHORIZATION
        || name == reqwest::header::COOKIE
        || name == reqwest::header::PROXY_AUTHORIZATION
        || NAMES.matches(name.as_str())
}

impl Hop {
    /// The request a redirect with `status` to `next` asks for. As browsers
    /// and curl do: 303 (and 301/302 after a POST) becomes a GET without
    /// body; credentials and `Referer` go only to the job's own `origin`,
    /// so a redirect elsewhere cannot collect them.
    pub(super) fn redirected(
        mut self,
        status: reqwest::StatusCode,
        next: Url,
        origin: &Origin,
    ) -> Self {
        let to_get = (status == reqwest::StatusCode::SEE_OTHER && self.method != Method::HEAD)
            || (matches!(status.as_u16(), 301 | 302) && self.method == Method::POST);
        if to_get {
            self.method = Method::GET;
            self.body = Body::None;
            self.headers
                .retain(|(k, _)| !k.as_str().starts_with("content-"));
        }
        if self::origin(&next) != *origin {
            self.headers
                .retain(|(k, _)| k != reqwest::header::REFERER && !is_credential(k));
        }
        self.url = next;
        self
    }
}

/// Where a redirect answer sends the request next: `None` when `resp` is no
/// redirect to follow, an error naming the location when it cannot be used.
pub(super) fn redirect_target(resp: &reqwest::Response) -> Option<Result<Url, String>> {
    if !matches!(resp.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = resp.headers().get(reqwest::header::LOCATION)?;
    let shown = String::from_utf8_lossy(location.as_bytes()).into_owned();
    Some(
        location
            .to_str()
            .ok()
            .and_then(|l| resp.url().join(l).ok())
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| format!("{shown:?}, which is no http or https URL")),
    )
}
