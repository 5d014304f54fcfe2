//! Server-side request forgery guard, the one both outgoing HTTP paths use:
//! callback URLs (the callback relay) and `http` job URLs (the worker's
//! built-in handler) come from API callers, so neither may be turned into a
//! client for the internal network.
//!
//! Checks, all skipped when [`Guard::allow_private`]:
//! - [`check_target`] before a request, without a lookup: the scheme is
//!   http(s) and an IP-literal host is public (not loopback, private,
//!   link-local, unspecified, CGNAT, multicast or reserved, in IPv4 or any
//!   IPv6 form). The HTTP client never resolves a literal, so this is the
//!   only check a literal gets. [`check_url`] does the same and also
//!   resolves a host name (`lookup_host`), for callers without the client.
//! - [`GuardedResolver`], the HTTP client's DNS resolver, applies the same
//!   rule to the addresses the connection actually uses. The client connects
//!   only to addresses that passed the check in the same lookup, so a name
//!   that rebinds to a private address after [`check_url`] is still refused.
//! - [`redirect_policy`] re-checks every redirect target whose host is an IP
//!   literal (names are checked by the resolver when the client connects).
//!
//! [`client_builder`] sets all of this up, with no proxy (a proxy would
//! resolve the name itself, out of the guard's sight).
#![warn(missing_docs, unreachable_pub)]

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use url::{Host, Url};

/// Why an attempt was not made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GuardError {
    /// The URL cannot be requested at all.
    #[error("refused: URL {url:?} is unusable: {reason} (a configuration problem, not retried)")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The host is, or resolves to, a forbidden address.
    #[error(
        "refused: {host} resolves to {ip}, a {kind} address; requests to private networks \
         need {setting}=true (a configuration problem, not retried)"
    )]
    Forbidden {
        /// Host as written in the URL.
        host: String,
        /// The offending address.
        ip: IpAddr,
        /// Which forbidden range it is in.
        kind: &'static str,
        /// The setting that would allow it.
        setting: &'static str,
    },
    /// The name did not resolve (may be a transient DNS failure: retried).
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// Host.
        host: String,
        /// Resolver's explanation.
        reason: String,
    },
}

impl GuardError {
    /// Whether retrying cannot help: the callback should go dead at once.
    pub fn is_permanent(&self) -> bool {
        !matches!(self, GuardError::Resolve { .. })
    }
}

/// What the guard allows, and the setting an operator changes to allow more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// Allow loopback and private addresses (tests, `kairos dev`).
    pub allow_private: bool,
    /// Name of the setting that sets `allow_private`, quoted in refusals
    /// (e.g. `KAIROS_CALLBACK_ALLOW_PRIVATE`).
    pub setting: &'static str,
}

/// The forbidden range `ip` is in, if any.
pub fn forbidden_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        _ if ip.is_unspecified() || a == 0 => "unspecified",
        _ if a == 100 && (64..128).contains(&b) => "carrier-grade NAT (100.64/10)",
        _ if ip.is_multicast() => "multicast",
        _ if ip.is_broadcast() || a >= 240 => "broadcast or reserved",
        _ => return None,
    })
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let seg = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4).map(|_| "IPv4-mapped private");
    }
    Some(match () {
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_multicast() => "multicast",
        _ if (seg[0] & 0xfe00) == 0xfc00 => "unique local (fc00::/7)",
        _ if (seg[0] & 0xffc0) == 0xfe80 => "link-local",
        _ if (seg[0] & 0xffc0) == 0xfec0 => "site-local",
        // Deprecated IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96)
        // forms reach the embedded IPv4 address.
        _ if seg[..6] == [0; 6] || seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] => {
            let v4 = Ipv4Addr::new(
                (seg[6] >> 8) as u8,
                seg[6] as u8,
                (seg[7] >> 8) as u8,
                seg[7] as u8,
            );
            forbidden_v4(v4).map(|_| "IPv4-embedded private")?
        }
        _ => return None,
    })
}

fn check_addrs(host: &str, addrs: &[SocketAddr], guard: Guard) -> Result<(), GuardError> {
    // One forbidden record refuses the host: connecting would pick any of them.
    for a in addrs {
        if let Some(kind) = forbidden_kind(a.ip()) {
            return Err(GuardError::Forbidden {
                host: host.to_string(),
                ip: a.ip(),
                kind,
                setting: guard.setting,
            });
        }
    }
    Ok(())
}

/// Resolves `host` and refuses it if any address is forbidden (unless the
/// guard allows private addresses).
pub async fn resolve_checked(
    host: &str,
    port: u16,
    guard: Guard,
) -> Result<Vec<SocketAddr>, GuardError> {
    let resolve_err = |reason: String| GuardError::Resolve {
        host: host.to_string(),
        reason,
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| resolve_err(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(resolve_err("no addresses".into()));
    }
    if !guard.allow_private {
        check_addrs(host, &addrs, guard)?;
    }
    Ok(addrs)
}

/// The URL parsed, if it can be requested at all, with its port.
fn usable(url: &str) -> Result<(Url, u16), GuardError> {
    let bad = |reason: &str| GuardError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("only http and https are allowed"));
    }
    let port = parsed
        .port_or_known_default()
        .ok_or_else(|| bad("no port"))?;
    if parsed.host().is_none() {
        return Err(bad("no host"));
    }
    Ok((parsed, port))
}

/// Checks a URL before a request sent with a [`client_builder`] client,
/// without a lookup: scheme, port, and an IP-literal host. A host name is
/// left to [`GuardedResolver`], which checks the addresses the connection
/// actually uses (one lookup, no gap between check and use).
pub fn check_target(url: &str, guard: Guard) -> Result<(), GuardError> {
    let (parsed, port) = usable(url)?;
    if guard.allow_private {
        return Ok(());
    }
    match parsed.host() {
        Some(host) => check_literal(url, &host, port, guard),
        None => Ok(()),
    }
}

/// Checks a URL, resolving a host name and refusing it if any address is
/// forbidden (see the module docs).
pub async fn check_url(url: &str, guard: Guard) -> Result<(), GuardError> {
    check_target(url, guard)?;
    if guard.allow_private {
        return Ok(());
    }
    let (parsed, port) = usable(url)?;
    match parsed.host() {
        Some(Host::Domain(name)) => resolve_checked(name, port, guard).await.map(drop),
        _ => Ok(()),
    }
}

/// Checks an IP-literal host (names pass: the resolver checks them).
fn check_literal(url: &str, host: &Host<&str>, port: u16, guard: Guard) -> Result<(), GuardError> {
    match host {
        Host::Ipv4(ip) => check_addrs(url, &[SocketAddr::new(IpAddr::V4(*ip), port)], guard),
        Host::Ipv6(ip) => check_addrs(url, &[SocketAddr::new(IpAddr::V6(*ip), port)], guard),
        Host::Domain(_) => Ok(()),
    }
}

/// A redirect policy that follows at most `max` redirects and refuses a
/// target whose host is a forbidden IP literal; targets named by host name
/// are checked by [`GuardedResolver`] when the client connects to them.
pub fn redirect_policy(guard: Guard, max: usize) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > max {
            return attempt.error(format!("more than {max} redirects"));
        }
        if !guard.allow_private {
            let url = attempt.url();
            let port = url.port_or_known_default().unwrap_or(0);
            if let Some(host) = url.host()
                && let Err(refusal) = check_literal(url.as_str(), &host, port, guard)
            {
                return attempt.error(refusal);
            }
        }
        attempt.follow()
    })
}

/// An HTTP client builder with the guard's resolver and no proxy; callers add
/// their redirect policy, timeouts and user agent.
pub fn client_builder(guard: Guard) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(GuardedResolver { guard })
}

/// The HTTP client's resolver: resolves with `lookup_host` and refuses
/// forbidden addresses, so connections go only to checked addresses.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    /// What it allows.
    pub guard: Guard,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.guard;
        let host = name.as_str().to_string();
        Box::pin(async move {
            // Port 0: reqwest substitutes the URL's port.
            let addrs = resolve_checked(&host, 0, guard).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The guard's refusal inside an HTTP client error, if that is what it was.
pub fn refusal_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a GuardError> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(g) = e.downcast_ref::<GuardError>() {
            return Some(g);
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: Guard = Guard {
        allow_private: false,
        setting: "KAIROS_TEST_ALLOW_PRIVATE",
    };
    const OPEN: Guard = Guard {
        allow_private: true,
        setting: "KAIROS_TEST_ALLOW_PRIVATE",
    };

    fn kind(s: &str) -> Option<&'static str> {
        forbidden_kind(s.parse().unwrap())
    }

    #[test]
    fn private_ranges_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(kind(ip).is_some(), "{ip} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(kind(ip), None, "{ip} must pass");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_before_an_attempt() {
        let err = check_url("http://127.0.0.1:9/cb", STRICT)
            .await
            .unwrap_err();
        assert!(err.is_permanent());
        assert!(err.to_string().contains("loopback"), "{err}");
        assert!(
            err.to_string().contains("KAIROS_TEST_ALLOW_PRIVATE=true"),
            "{err}"
        );
        let err = check_url("http://localhost:9/cb", STRICT)
            .await
            .unwrap_err();
        assert!(matches!(err, GuardError::Forbidden { .. }), "{err}");
        let err = check_url("http://[::ffff:192.168.0.1]/", STRICT)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("IPv4-mapped"), "{err}");
        let err = check_url("ftp://example.com/", OPEN).await.unwrap_err();
        assert!(matches!(err, GuardError::BadUrl { .. }));
        assert!(check_url("not a url", OPEN).await.is_err());
        check_url("http://127.0.0.1:9/cb", OPEN).await.unwrap();
    }

    #[tokio::test]
    async fn the_client_resolver_refuses_and_the_refusal_is_recognised() {
        let client = client_builder(STRICT).build().unwrap();
        let err = client.get("http://localhost:9/").send().await.unwrap_err();
        let refusal = refusal_in(&err).expect("the guard's error in the chain");
        assert!(matches!(refusal, GuardError::Forbidden { .. }));
    }
}
