//! The address blocks the guard refuses: IANA's special-purpose address
//! registries for IPv4 and IPv6, plus the IPv4 multicast block and the parts
//! of the IPv6 address space IANA keeps outside global unicast.
//!
//! Sources, as last checked (registry update dates in brackets):
//! - IANA IPv4 Special-Purpose Address Registry (RFC 6890, RFC 8190) (2024):
//!   <https://www.iana.org/assignments/iana-ipv4-special-registry>
//! - IANA IPv6 Special-Purpose Address Registry (RFC 6890, RFC 8190) (2025):
//!   <https://www.iana.org/assignments/iana-ipv6-special-registry>
//! - IANA IPv4 Multicast Address Space (224.0.0.0/4, RFC 5771).
//! - IANA IPv6 Address Space: everything outside 2000::/3 is reserved by the
//!   IETF, unique-local, link-local or multicast.
//! - Two IPv6 forms that embed IPv4 but are in no registry of their own:
//!   IPv4-compatible `::a.b.c.d` (deprecated by RFC 4291) and IPv4-translated
//!   `::ffff:0:a.b.c.d` (RFC 2765).
//!
//! Every block here is refused, including the few the registry marks
//! "globally reachable" (anycast for PCP, TURN and DNS-SD SRP, AS112 DNS
//! sinks, AMT relays, ORCHIDv2 and drone identifiers): none of them runs an
//! HTTP service a callback or job should reach, and refusing them costs
//! nothing. The exceptions are the blocks that embed an IPv4 address
//! ([`Embedding`]): those are judged by the IPv4 address inside.
//!
//! When the registries change, add the row here: the table-driven test in
//! `tests/special.rs` then checks its first, middle and last addresses.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// How an IPv6 block carries an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embedding {
    /// The last 32 bits (IPv4-mapped, IPv4-compatible, IPv4-translated and
    /// the NAT64 well-known prefix 64:ff9b::/96, RFC 6052).
    Last32,
    /// Bits 16–47 (6to4, RFC 3056: `2002:AABB:CCDD::/48`).
    SixToFour,
    /// Teredo (RFC 4380): the server's IPv4 in bits 32–63 and the client's,
    /// inverted, in the last 32 bits; both are judged.
    Teredo,
}

impl Embedding {
    /// The IPv4 addresses `ip` carries (it must be in a block with this
    /// embedding).
    pub fn ipv4s(self, ip: Ipv6Addr) -> Vec<Ipv4Addr> {
        let bits = u128::from(ip);
        let word = |shift: u32| Ipv4Addr::from((bits >> shift) as u32);
        match self {
            Embedding::Last32 => vec![word(0)],
            Embedding::SixToFour => vec![word(80)],
            Embedding::Teredo => vec![word(64), Ipv4Addr::from(!(bits as u32))],
        }
    }
}

/// One refused block: a row of the registries.
#[derive(Debug, PartialEq, Eq)]
pub struct Special {
    /// The block.
    pub net: IpNet,
    /// Its name in the registry.
    pub name: &'static str,
    /// The RFC that defines it.
    pub rfc: &'static str,
    /// Set when the block carries an IPv4 address that decides instead.
    pub embeds: Option<Embedding>,
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({})", self.net, self.name, self.rfc)
    }
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, name: &'static str, rfc: &'static str) -> Special {
    Special {
        net: IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)),
        name,
        rfc,
        embeds: None,
    }
}

const fn v6(seg: [u16; 8], len: u8, name: &'static str, rfc: &'static str) -> Special {
    let [a, b, c, d, e, f, g, h] = seg;
    Special {
        net: IpNet::V6(Ipv6Net::new_assert(
            Ipv6Addr::new(a, b, c, d, e, f, g, h),
            len,
        )),
        name,
        rfc,
        embeds: None,
    }
}

const fn embeds(row: Special, how: Embedding) -> Special {
    Special {
        embeds: Some(how),
        ..row
    }
}

/// The refused IPv4 blocks.
#[rustfmt::skip]
pub static IPV4: &[Special] = &[
    v4(0, 0, 0, 0, 8, "this network", "RFC 791"),
    v4(0, 0, 0, 0, 32, "this host on this network", "RFC 1122"),
    v4(10, 0, 0, 0, 8, "private use", "RFC 1918"),
    v4(100, 64, 0, 0, 10, "shared address space (carrier-grade NAT)", "RFC 6598"),
    v4(127, 0, 0, 0, 8, "loopback", "RFC 1122"),
    v4(169, 254, 0, 0, 16, "link-local", "RFC 3927"),
    v4(172, 16, 0, 0, 12, "private use", "RFC 1918"),
    v4(192, 0, 0, 0, 24, "IETF protocol assignments", "RFC 6890"),
    v4(192, 0, 0, 0, 29, "IPv4 service continuity prefix", "RFC 7335"),
    v4(192, 0, 0, 8, 32, "IPv4 dummy address", "RFC 7600"),
    v4(192, 0, 0, 9, 32, "port control protocol anycast", "RFC 7723"),
    v4(192, 0, 0, 10, 32, "traversal using relays around NAT anycast", "RFC 8155"),
    v4(192, 0, 0, 170, 32, "NAT64/DNS64 discovery", "RFC 8880"),
    v4(192, 0, 0, 171, 32, "NAT64/DNS64 discovery", "RFC 8880"),
    v4(192, 0, 2, 0, 24, "documentation (TEST-NET-1)", "RFC 5737"),
    v4(192, 31, 196, 0, 24, "AS112-v4", "RFC 7535"),
    v4(192, 52, 193, 0, 24, "AMT", "RFC 7450"),
    v4(192, 88, 99, 0, 24, "deprecated 6to4 relay anycast", "RFC 7526"),
    v4(192, 88, 99, 2, 32, "6a44 relay anycast", "RFC 6751"),
    v4(192, 168, 0, 0, 16, "private use", "RFC 1918"),
    v4(192, 175, 48, 0, 24, "direct delegation AS112 service", "RFC 7534"),
    v4(198, 18, 0, 0, 15, "benchmarking", "RFC 2544"),
    v4(198, 51, 100, 0, 24, "documentation (TEST-NET-2)", "RFC 5737"),
    v4(203, 0, 113, 0, 24, "documentation (TEST-NET-3)", "RFC 5737"),
    v4(224, 0, 0, 0, 4, "multicast", "RFC 5771"),
    v4(240, 0, 0, 0, 4, "reserved", "RFC 1112"),
    v4(255, 255, 255, 255, 32, "limited broadcast", "RFC 919"),
];

/// The refused IPv6 blocks (and those judged by the IPv4 inside).
#[rustfmt::skip]
pub static IPV6: &[Special] = &[
    // IPv6 Special-Purpose Address Registry.
    v6([0; 8], 128, "unspecified address", "RFC 4291"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback address", "RFC 4291"),
    embeds(v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "IPv4-mapped", "RFC 4291"), Embedding::Last32),
    embeds(v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, "IPv4/IPv6 translation", "RFC 6052"), Embedding::Last32),
    // Local-use NAT64: the operator picks where the IPv4 address sits
    // (RFC 6052 §2.2), so it cannot be read reliably; refused whole.
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "local-use IPv4/IPv6 translation", "RFC 8215"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only address block", "RFC 6666"),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, "dummy IPv6 prefix", "RFC 9780"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, "IETF protocol assignments", "RFC 2928"),
    embeds(v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo", "RFC 4380"), Embedding::Teredo),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128, "port control protocol anycast", "RFC 7723"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, "traversal using relays around NAT anycast", "RFC 8155"),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128, "DNS-SD service registration protocol anycast", "RFC 9665"),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, "benchmarking", "RFC 5180"),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, "AMT", "RFC 7450"),
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, "AS112-v6", "RFC 7535"),
    v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28, "deprecated ORCHID", "RFC 4843"),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, "ORCHIDv2", "RFC 7343"),
    v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28, "drone remote ID protocol entity tags", "RFC 9374"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation", "RFC 3849"),
    embeds(v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4", "RFC 3056"), Embedding::SixToFour),
    v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48, "direct delegation AS112 service", "RFC 7534"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation", "RFC 9637"),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "segment routing (SRv6) SIDs", "RFC 9602"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local", "RFC 4193"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local unicast", "RFC 4291"),
    // IPv4 inside, outside any registry.
    embeds(v6([0; 8], 96, "IPv4-compatible (deprecated)", "RFC 4291"), Embedding::Last32),
    embeds(v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, "IPv4-translated", "RFC 2765"), Embedding::Last32),
    // IPv6 Address Space: all but 2000::/3 (global unicast) and the unique-
    // and link-local blocks above.
    v6([0; 8], 8, "reserved by IETF", "RFC 4291"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 8, "reserved by IETF", "RFC 4291"),
    v6([0x200, 0, 0, 0, 0, 0, 0, 0], 7, "reserved by IETF", "RFC 4048"),
    v6([0x400, 0, 0, 0, 0, 0, 0, 0], 6, "reserved by IETF", "RFC 4291"),
    v6([0x800, 0, 0, 0, 0, 0, 0, 0], 5, "reserved by IETF", "RFC 4291"),
    v6([0x1000, 0, 0, 0, 0, 0, 0, 0], 4, "reserved by IETF", "RFC 4291"),
    v6([0x4000, 0, 0, 0, 0, 0, 0, 0], 3, "reserved by IETF", "RFC 4291"),
    v6([0x6000, 0, 0, 0, 0, 0, 0, 0], 3, "reserved by IETF", "RFC 4291"),
    v6([0x8000, 0, 0, 0, 0, 0, 0, 0], 3, "reserved by IETF", "RFC 4291"),
    v6([0xa000, 0, 0, 0, 0, 0, 0, 0], 3, "reserved by IETF", "RFC 4291"),
    v6([0xc000, 0, 0, 0, 0, 0, 0, 0], 3, "reserved by IETF", "RFC 4291"),
    v6([0xe000, 0, 0, 0, 0, 0, 0, 0], 4, "reserved by IETF", "RFC 4291"),
    v6([0xf000, 0, 0, 0, 0, 0, 0, 0], 5, "reserved by IETF", "RFC 4291"),
    v6([0xf800, 0, 0, 0, 0, 0, 0, 0], 6, "reserved by IETF", "RFC 4291"),
    v6([0xfe00, 0, 0, 0, 0, 0, 0, 0], 9, "reserved by IETF", "RFC 4291"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "deprecated site-local", "RFC 3879"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast", "RFC 4291"),
];

/// The most specific block holding `ip`, if any: the one whose name a
/// refusal quotes (and whose embedding, if any, decides).
pub fn most_specific(table: &'static [Special], ip: std::net::IpAddr) -> Option<&'static Special> {
    table
        .iter()
        .filter(|row| row.net.contains(&ip))
        .max_by_key(|row| row.net.prefix_len())
}
