//! Server-side request forgery guard, the one both outgoing HTTP paths use:
//! callback URLs (the callback relay) and `http` job URLs (the worker's
//! built-in handler) come from API callers, so neither may be turned into a
//! client for the internal network.
//!
//! What is refused ([`rule_for`]): every block of IANA's special-purpose
//! address registries and the rest of the non-global space ([`special`]:
//! loopback, private, link-local, CGNAT, benchmarking, documentation,
//! multicast, reserved…); IPv6 forms that carry an IPv4 address (mapped,
//! compatible, translated, NAT64, 6to4, Teredo) when the IPv4 inside is
//! refused; and the addresses of this host's own interfaces, public or not.
//! A refusal names the rule ([`Rule`]), never the address a name resolved to.
//!
//! Checks, all skipped when [`Guard::allow_private`]:
//! - [`check_target`] before a request, without a lookup: the scheme is
//!   http(s) and an IP-literal host is not refused. The HTTP client never
//!   resolves a literal, so this is the only check a literal gets.
//!   [`check_url`] does the same and also resolves a host name
//!   (`lookup_host`), for callers without the client.
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

mod host;
mod rule;
pub mod special;

pub use host::REFRESH as HOST_ADDRESSES_REFRESH;
pub use rule::{Reason, Rule, special_rule};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
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
    /// The host is, or resolves to, a forbidden address. The message names
    /// the rule, never the address a host name resolved to: that would hand
    /// the internal DNS's answers to whoever chose the URL.
    #[error(
        "refused: {rule}, for host {host}; requests to non-public addresses \
         need {setting}=true (a configuration problem, not retried)"
    )]
    Forbidden {
        /// Host as written in the URL.
        host: String,
        /// The rule that refuses it.
        rule: Rule,
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
    /// This host's own addresses could not be listed, so no address can be
    /// judged (retried: listing interfaces fails only when the process is
    /// short of resources).
    #[error("refused for now: {reason}")]
    HostAddresses {
        /// Why the listing failed.
        reason: String,
    },
}

impl GuardError {
    /// Whether retrying cannot help: the callback should go dead at once.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            GuardError::BadUrl { .. } | GuardError::Forbidden { .. }
        )
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

/// The rule refusing `ip` — a special-purpose block (IPv4 inside IPv6 forms
/// included) or an address of this host — or `None` if it may be reached.
pub fn rule_for(ip: IpAddr) -> Result<Option<Rule>, GuardError> {
    let own = host::addresses().map_err(|reason| GuardError::HostAddresses { reason })?;
    Ok(rule::judge(ip, &own))
}

/// This host's interface addresses as the guard sees them (listed at most
/// [`HOST_ADDRESSES_REFRESH`] ago).
pub fn host_addresses() -> Result<Vec<IpAddr>, GuardError> {
    host::addresses()
        .map(|a| a.to_vec())
        .map_err(|reason| GuardError::HostAddresses { reason })
}

fn check_addrs(host: &str, addrs: &[SocketAddr], guard: Guard) -> Result<(), GuardError> {
    let own = host::addresses().map_err(|reason| GuardError::HostAddresses { reason })?;
    // One forbidden record refuses the host: connecting would pick any of them.
    for a in addrs {
        if let Some(rule) = rule::judge(a.ip(), &own) {
            return Err(GuardError::Forbidden {
                host: host.to_string(),
                rule,
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
        Some(host) => check_literal(&host, port, guard),
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
fn check_literal(host: &Host<&str>, port: u16, guard: Guard) -> Result<(), GuardError> {
    match host {
        Host::Ipv4(ip) => check_addrs(
            &host.to_string(),
            &[SocketAddr::new((*ip).into(), port)],
            guard,
        ),
        Host::Ipv6(ip) => check_addrs(
            &host.to_string(),
            &[SocketAddr::new((*ip).into(), port)],
            guard,
        ),
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
                && let Err(refusal) = check_literal(&host, port, guard)
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

    #[tokio::test]
    async fn urls_are_checked_before_an_attempt() {
        let err = check_url("http://127.0.0.1:9/cb", STRICT)
            .await
            .unwrap_err();
        assert!(err.is_permanent());
        assert_eq!(
            err.to_string(),
            "refused: 127.0.0.0/8 loopback (RFC 1122), for host 127.0.0.1; requests to \
             non-public addresses need KAIROS_TEST_ALLOW_PRIVATE=true (a configuration \
             problem, not retried)"
        );
        let err = check_url("http://localhost:9/cb", STRICT)
            .await
            .unwrap_err();
        assert!(matches!(err, GuardError::Forbidden { .. }), "{err}");
        let err = check_url("http://[::ffff:192.168.0.1]/", STRICT)
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("IPv4-mapped (RFC 4291) carrying 192.168.0.0/16 private use"),
            "{err}"
        );
        let err = check_url("ftp://example.com/", OPEN).await.unwrap_err();
        assert!(matches!(err, GuardError::BadUrl { .. }));
        assert!(check_url("not a url", OPEN).await.is_err());
        check_url("http://127.0.0.1:9/cb", OPEN).await.unwrap();
    }

    #[tokio::test]
    async fn a_refused_name_does_not_reveal_what_it_resolved_to() {
        let err = check_url("http://localhost:9/cb", STRICT)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("for host localhost"), "{text}");
        assert!(!text.contains("127.0.0.1"), "{text} reveals the answer");
    }

    #[tokio::test]
    async fn the_client_resolver_refuses_and_the_refusal_is_recognised() {
        let client = client_builder(STRICT).build().unwrap();
        let err = client.get("http://localhost:9/").send().await.unwrap_err();
        let refusal = refusal_in(&err).expect("the guard's error in the chain");
        assert!(matches!(refusal, GuardError::Forbidden { .. }));
    }
}
