//! Which rule refuses an address: a special-purpose block, an address of
//! this host, or either of those carried inside an IPv6 form that embeds
//! IPv4. A refusal quotes the rule, never the address, so that a refused
//! host name does not reveal what the internal DNS answered.

use crate::special::{self, Special};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// It is in a special-purpose block.
    Special(&'static Special),
    /// It is an address of one of this host's interfaces.
    ThisHost,
}

/// The rule that refuses an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The IPv6 form the refused IPv4 address was carried in, if it was.
    pub via: Option<&'static Special>,
    /// What refuses it.
    pub reason: Reason,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(form) = self.via {
            write!(f, "{form} carrying ")?;
        }
        match self.reason {
            Reason::Special(row) => write!(f, "{row}"),
            Reason::ThisHost if self.via.is_some() => f.write_str("an IPv4 address of this host"),
            Reason::ThisHost => f.write_str("an address of this host"),
        }
    }
}

/// The rule refusing `ip` by the registries alone, or `None` if `ip` is in
/// no refused block (an IPv6 form carrying a public IPv4 address included).
pub fn special_rule(ip: IpAddr) -> Option<Rule> {
    judge(ip, &[])
}

/// The rule refusing `ip` given the host's own addresses `host`.
pub(crate) fn judge(ip: IpAddr, host: &[IpAddr]) -> Option<Rule> {
    let direct = |reason| Some(Rule { via: None, reason });
    let row = match ip {
        IpAddr::V4(_) => special::most_specific(special::IPV4, ip),
        IpAddr::V6(_) => special::most_specific(special::IPV6, ip),
    };
    let (
        IpAddr::V6(v6),
        Some(
            form @ Special {
                embeds: Some(how), ..
            },
        ),
    ) = (ip, row)
    else {
        return match row {
            Some(row) => direct(Reason::Special(row)),
            None if host.contains(&ip) => direct(Reason::ThisHost),
            None => None,
        };
    };
    // Judged by the IPv4 inside: the first refused one names the rule.
    how.ipv4s(v6).into_iter().find_map(|inner| {
        judge_v4(inner, host).map(|reason| Rule {
            via: Some(form),
            reason,
        })
    })
}

fn judge_v4(ip: Ipv4Addr, host: &[IpAddr]) -> Option<Reason> {
    let ip = IpAddr::V4(ip);
    match special::most_specific(special::IPV4, ip) {
        Some(row) => Some(Reason::Special(row)),
        None if host.contains(&ip) => Some(Reason::ThisHost),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(ip: &str, host: &[IpAddr]) -> Option<String> {
        judge(ip.parse().unwrap(), host).map(|r| r.to_string())
    }

    #[test]
    fn rules_read_as_the_registry_names_them() {
        assert_eq!(
            rule("198.18.0.1", &[]).as_deref(),
            Some("198.18.0.0/15 benchmarking (RFC 2544)")
        );
        assert_eq!(
            rule("192.0.0.9", &[]).as_deref(),
            Some("192.0.0.9/32 port control protocol anycast (RFC 7723)"),
            "the most specific block is named"
        );
        assert_eq!(
            rule("2002:7f00:1::", &[]).as_deref(),
            Some("2002::/16 6to4 (RFC 3056) carrying 127.0.0.0/8 loopback (RFC 1122)")
        );
    }

    #[test]
    fn host_addresses_are_refused_directly_and_embedded() {
        let host: Vec<IpAddr> = vec!["8.8.4.4".parse().unwrap(), "2606:4700::1".parse().unwrap()];
        assert_eq!(
            rule("8.8.4.4", &host).as_deref(),
            Some("an address of this host")
        );
        assert_eq!(
            rule("2606:4700::1", &host).as_deref(),
            Some("an address of this host")
        );
        assert_eq!(
            rule("::ffff:8.8.4.4", &host).as_deref(),
            Some("::ffff:0.0.0.0/96 IPv4-mapped (RFC 4291) carrying an IPv4 address of this host")
        );
        assert_eq!(
            rule("2002:808:404::1", &host).as_deref(),
            Some("2002::/16 6to4 (RFC 3056) carrying an IPv4 address of this host")
        );
        assert_eq!(rule("8.8.8.8", &host), None);
    }

    #[test]
    fn teredo_is_judged_by_server_and_client() {
        // Server 65.54.227.120 (public); client 192.168.1.1 inverted.
        let client_private = "2001:0:4136:e378:8000:63bf:3f57:fefe";
        assert!(
            rule(client_private, &[])
                .unwrap()
                .contains("192.168.0.0/16")
        );
        // Server 10.0.0.1; client 8.8.8.8 inverted (f7f7:f7f7).
        assert!(
            rule("2001:0:a00:1::f7f7:f7f7", &[])
                .unwrap()
                .contains("10.0.0.0/8")
        );
        // Both public.
        assert_eq!(rule("2001:0:4136:e378::f7f7:f7f7", &[]), None);
    }
}
