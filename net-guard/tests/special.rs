//! Every row of the guard's tables, checked at its first, middle and last
//! address; the IPv6 forms that carry IPv4 judged by the IPv4 inside; the
//! addresses the probe of issue #32 got through; and public addresses that
//! must pass.

use ipnet::IpNet;
use kairos_netguard::special::{self, Embedding, IPV4, IPV6, Special};
use kairos_netguard::{Reason, Rule, special_rule};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// First, middle and last address of a block.
fn samples(net: &IpNet) -> [IpAddr; 3] {
    match net {
        IpNet::V4(n) => {
            let (first, last) = (u32::from(n.network()), u32::from(n.broadcast()));
            [first, first + (last - first) / 2, last].map(|a| IpAddr::V4(Ipv4Addr::from(a)))
        }
        IpNet::V6(n) => {
            let (first, last) = (u128::from(n.network()), u128::from(n.broadcast()));
            [first, first + (last - first) / 2, last].map(|a| IpAddr::V6(Ipv6Addr::from(a)))
        }
    }
}

fn table(ip: IpAddr) -> &'static [Special] {
    if ip.is_ipv4() { IPV4 } else { IPV6 }
}

fn v4_refused(ip: Ipv4Addr) -> bool {
    special::most_specific(IPV4, IpAddr::V4(ip)).is_some()
}

#[test]
fn every_row_is_a_canonical_block() {
    for row in IPV4.iter().chain(IPV6) {
        assert_eq!(row.net, row.net.trunc(), "{row}: host bits set");
        assert!(row.rfc.starts_with("RFC "), "{row}");
        assert!(!row.name.is_empty(), "{row}");
    }
    for row in IPV4 {
        assert!(row.embeds.is_none(), "{row}: IPv4 embeds nothing");
    }
}

#[test]
fn first_middle_and_last_address_of_every_row_are_refused() {
    let mut checked = 0;
    for row in IPV4.iter().chain(IPV6) {
        for ip in samples(&row.net) {
            let named = special::most_specific(table(ip), ip).expect("in the table");
            assert!(
                row.net.contains(&named.net),
                "{ip} in {row} is named by {named}, which is not inside it"
            );
            let got = special_rule(ip);
            match (named.embeds, ip) {
                (None, _) => assert_eq!(
                    got,
                    Some(Rule {
                        via: None,
                        reason: Reason::Special(named)
                    }),
                    "{ip} in {row}"
                ),
                (Some(how), IpAddr::V6(v6)) => {
                    let refused = how.ipv4s(v6).into_iter().any(v4_refused);
                    assert_eq!(got.is_some(), refused, "{ip} in {row}: {got:?}");
                    if let Some(rule) = got {
                        assert_eq!(rule.via, Some(named), "{ip}");
                    }
                }
                (Some(_), IpAddr::V4(_)) => unreachable!("checked above"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 3 * (IPV4.len() + IPV6.len()));
}

#[test]
fn ipv4_is_read_where_each_form_carries_it() {
    let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    assert_eq!(
        Embedding::Last32.ipv4s(v6("::ffff:10.1.2.3")),
        [v4("10.1.2.3")]
    );
    assert_eq!(
        Embedding::Last32.ipv4s(v6("64:ff9b::c0a8:101")),
        [v4("192.168.1.1")]
    );
    assert_eq!(
        Embedding::SixToFour.ipv4s(v6("2002:c0a8:101:5::9")),
        [v4("192.168.1.1")]
    );
    assert_eq!(
        Embedding::Teredo.ipv4s(v6("2001:0:4136:e378:8000:63bf:3f57:fefe")),
        [v4("65.54.227.120"), v4("192.168.1.1")]
    );
}

fn rule(ip: &str) -> Option<String> {
    special_rule(ip.parse().unwrap()).map(|r| r.to_string())
}

#[test]
fn embedded_forms_are_judged_by_the_ipv4_inside() {
    for (ip, want) in [
        (
            "::ffff:127.0.0.1",
            "::ffff:0.0.0.0/96 IPv4-mapped (RFC 4291) carrying 127.0.0.0/8 loopback",
        ),
        (
            "::10.0.0.1",
            "::/96 IPv4-compatible (deprecated) (RFC 4291) carrying 10.0.0.0/8",
        ),
        (
            "::ffff:0:a00:1",
            "::ffff:0:0:0/96 IPv4-translated (RFC 2765) carrying 10.0.0.0/8",
        ),
        (
            "::ffff:0:c612:1",
            "IPv4-translated (RFC 2765) carrying 198.18.0.0/15 benchmarking",
        ),
        (
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::/96 IPv4/IPv6 translation (RFC 6052) carrying 169.254.0.0/16",
        ),
        (
            "2002:7f00:1::",
            "2002::/16 6to4 (RFC 3056) carrying 127.0.0.0/8 loopback",
        ),
        (
            "2002:a00:1:1::1",
            "2002::/16 6to4 (RFC 3056) carrying 10.0.0.0/8",
        ),
        (
            "2002:c000:c8::",
            "6to4 (RFC 3056) carrying 192.0.0.0/24 IETF protocol assignments",
        ),
        (
            "2001:0:4136:e378:8000:63bf:3f57:fefe",
            "Teredo (RFC 4380) carrying 192.168.0.0/16",
        ),
        (
            "2001:0:a00:1::f7f7:f7f7",
            "Teredo (RFC 4380) carrying 10.0.0.0/8",
        ),
    ] {
        let got = rule(ip).unwrap_or_else(|| panic!("{ip} must be refused"));
        assert!(got.contains(want), "{ip}: {got}");
    }
}

#[test]
fn what_the_probe_got_through_is_refused() {
    for (ip, want) in [
        ("198.18.0.1", "198.18.0.0/15 benchmarking (RFC 2544)"),
        ("198.19.255.254", "198.18.0.0/15 benchmarking (RFC 2544)"),
        (
            "192.0.0.1",
            "192.0.0.0/29 IPv4 service continuity prefix (RFC 7335)",
        ),
        (
            "192.0.0.200",
            "192.0.0.0/24 IETF protocol assignments (RFC 6890)",
        ),
        (
            "192.0.2.1",
            "192.0.2.0/24 documentation (TEST-NET-1) (RFC 5737)",
        ),
        (
            "64:ff9b:1::a00:1",
            "64:ff9b:1::/48 local-use IPv4/IPv6 translation (RFC 8215)",
        ),
        // Local-use NAT64 is refused even around a public IPv4 address.
        (
            "64:ff9b:1::808:808",
            "64:ff9b:1::/48 local-use IPv4/IPv6 translation (RFC 8215)",
        ),
        ("2001:db8::1", "2001:db8::/32 documentation (RFC 3849)"),
        ("3fff::1", "3fff::/20 documentation (RFC 9637)"),
        ("fec0::1", "fec0::/10 deprecated site-local (RFC 3879)"),
        ("4000::1", "4000::/3 reserved by IETF (RFC 4291)"),
    ] {
        assert_eq!(rule(ip).as_deref(), Some(want), "{ip}");
    }
}

#[test]
fn public_addresses_pass() {
    for ip in [
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.255",
        "192.0.3.0",
        "192.167.255.255",
        "192.169.0.0",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2000::1",
        "2001:200::1",
        "2606:4700:4700::1111",
        "2a00:1450:4001::200e",
        "3ffe::1",
        // IPv6 forms around a public IPv4 address are as public as it is: the
        // packet goes to that address (mapped, NAT64 and 6to4 included; NAT64
        // is how an IPv6-only network reaches public IPv4 receivers).
        "::ffff:8.8.8.8",
        "::ffff:0:808:808",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "2001:0:4136:e378::f7f7:f7f7",
    ] {
        assert_eq!(rule(ip), None, "{ip} must pass");
    }
}
