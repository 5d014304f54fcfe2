//! Failed authentications per client address: after
//! [`crate::ApiConfig::api_auth_fail_limit`] failures in a minute, an
//! address is answered 429 on every authenticated route until its bucket
//! refills, so guessing keys (or flooding random ones at the database) costs
//! the guesser, not the store.
//!
//! The client is the TCP peer ([`axum::extract::ConnectInfo`], which
//! [`crate::serve`] provides). Only when the peer is one of
//! [`crate::ApiConfig::api_trusted_proxies`] is `X-Forwarded-For` read: the
//! client is then its right-most address that is not a trusted proxy
//! (addresses to its left are the client's own claim). IPv6 clients count
//! by /64, the block one host usually holds. A request with no peer address
//! (the router driven in process) is not limited.

use super::limits::{Bucket, retry_secs};
use axum::extract::ConnectInfo;
use axum::http::Request;
use hashlink::LruCache;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses whose failures are remembered; the least recently failing go
/// first, so memory stays bounded whatever the number of addresses.
const ADDRESSES_KEPT: usize = 100_000;

/// The window the failure limit is counted over.
const WINDOW: Duration = Duration::from_secs(60);

/// The address to count `req`'s failures against, if it has one.
pub(crate) fn client_of<B>(req: &Request<B>, trusted: &[IpAddr]) -> Option<IpAddr> {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>()?.0.ip();
    let peer = canonical(peer);
    if !trusted.contains(&peer) {
        return Some(peer);
    }
    let forwarded = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    let mut client = peer;
    for hop in forwarded.iter().rev() {
        match hop.parse::<IpAddr>() {
            Ok(ip) if trusted.contains(&canonical(ip)) => client = canonical(ip),
            Ok(ip) => return Some(canonical(ip)),
            // A garbled hop: the last trusted address is what is known.
            Err(_) => break,
        }
    }
    Some(client)
}

/// IPv4-mapped IPv6 as IPv4, so one client is one address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// What failures are counted under: the address, or its /64 for IPv6.
fn bucket_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// Failure buckets by client address: `limit` tokens, refilled over a minute.
pub(crate) struct FailedAuths {
    map: Mutex<LruCache<IpAddr, Bucket>>,
}

impl Default for FailedAuths {
    fn default() -> Self {
        FailedAuths {
            map: Mutex::new(LruCache::new(ADDRESSES_KEPT)),
        }
    }
}

impl FailedAuths {
    fn rate(limit: u32) -> f64 {
        f64::from(limit) / WINDOW.as_secs_f64()
    }

    /// Whole seconds until `ip` may try again, if it has used up its
    /// failures (`None`: let it through). A `limit` of 0 never refuses.
    pub(crate) fn refused(&self, ip: IpAddr, limit: u32, now: Instant) -> Option<u64> {
        if limit == 0 {
            return None;
        }
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = map.get_mut(&bucket_key(ip))?;
        // Taking nothing only refills; a bucket under one token refuses.
        let mut probe = *bucket;
        let burst = f64::from(limit);
        probe
            .take(1.0, Self::rate(limit), burst, now)
            .err()
            .map(retry_secs)
    }

    /// Counts one failed authentication of `ip`.
    pub(crate) fn failed(&self, ip: IpAddr, limit: u32, now: Instant) {
        if limit == 0 {
            return;
        }
        let burst = f64::from(limit);
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let key = bucket_key(ip);
        if map.get(&key).is_none() {
            map.insert(key, Bucket::full(burst, now));
        }
        if let Some(bucket) = map.get_mut(&key) {
            // An empty bucket stays empty: the address is refused meanwhile.
            let _ = bucket.take(1.0, Self::rate(limit), burst, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(peer: &str, forwarded: &[&str]) -> Request<()> {
        let mut b = Request::builder();
        for f in forwarded {
            b = b.header("x-forwarded-for", *f);
        }
        let mut r = b.body(()).unwrap();
        r.extensions_mut()
            .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        r
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_peer_is_the_client_unless_it_is_a_trusted_proxy() {
        let proxy = [ip("10.0.0.1"), ip("10.0.0.2")];
        let no_info = Request::builder().body(()).unwrap();
        assert_eq!(client_of(&no_info, &proxy), None);
        let direct = req("192.0.2.7:1234", &["203.0.113.9"]);
        assert_eq!(
            client_of(&direct, &proxy),
            Some(ip("192.0.2.7")),
            "untrusted peer"
        );
        let proxied = req("10.0.0.1:1", &["198.51.100.1, 203.0.113.9", "10.0.0.2"]);
        assert_eq!(
            client_of(&proxied, &proxy),
            Some(ip("203.0.113.9")),
            "right-most untrusted hop; the left one is the client's claim"
        );
        let garbled = req("10.0.0.1:1", &["203.0.113.9, junk"]);
        assert_eq!(client_of(&garbled, &proxy), Some(ip("10.0.0.1")));
        let mapped = req("[::ffff:192.0.2.7]:1", &[]);
        assert_eq!(client_of(&mapped, &proxy), Some(ip("192.0.2.7")));
    }

    #[test]
    fn an_address_is_refused_after_its_failures_then_recovers() {
        let f = FailedAuths::default();
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..3 {
            assert_eq!(f.refused(a, 3, t0), None);
            f.failed(a, 3, t0);
        }
        assert_eq!(f.refused(a, 3, t0), Some(20), "one failure back per 20 s");
        assert_eq!(f.refused(ip("192.0.2.2"), 3, t0), None, "per address");
        assert_eq!(f.refused(a, 3, t0 + Duration::from_secs(20)), None);
        assert_eq!(f.refused(a, 0, t0), None, "0 turns the limit off");
        // One IPv6 host's /64 is one client.
        for _ in 0..3 {
            f.failed(ip("2001:db8:1:2::1"), 3, t0);
        }
        assert!(f.refused(ip("2001:db8:1:2::ffff"), 3, t0).is_some());
        assert_eq!(f.refused(ip("2001:db8:1:3::1"), 3, t0), None);
    }
}
