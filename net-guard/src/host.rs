//! The addresses of this machine's own network interfaces, which the guard
//! refuses even when they are public: a service bound to the host's eth0
//! address (an admin port, a metrics endpoint, a database) is as internal as
//! one on loopback.
//!
//! Interfaces are listed with `getifaddrs` (crate `if-addrs`) and the list
//! is kept for [`REFRESH`]: a check costs a lookup in a short list, and at
//! most one listing per [`REFRESH`] per process, however many requests are
//! made. An address added to the host is refused within [`REFRESH`].

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a listing of the interfaces is trusted.
pub const REFRESH: Duration = Duration::from_secs(1);

struct Listing {
    at: Instant,
    addrs: Arc<[IpAddr]>,
}

static LISTING: Mutex<Option<Listing>> = Mutex::new(None);

/// The host's interface addresses, listed at most [`REFRESH`] ago.
///
/// A failed refresh keeps the previous listing (and is tried again after
/// [`REFRESH`]); only a process that never listed its interfaces gets the
/// error, which the guard turns into a retryable refusal.
pub(crate) fn addresses() -> Result<Arc<[IpAddr]>, String> {
    // A poisoned lock only means another check panicked mid-refresh; the
    // listing itself is always whole.
    let mut listing = LISTING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(l) = listing.as_ref()
        && l.at.elapsed() < REFRESH
    {
        return Ok(l.addrs.clone());
    }
    match if_addrs::get_if_addrs() {
        Ok(ifaces) => {
            let addrs: Arc<[IpAddr]> = ifaces.iter().map(|i| i.ip()).collect();
            *listing = Some(Listing {
                at: Instant::now(),
                addrs: addrs.clone(),
            });
            Ok(addrs)
        }
        Err(e) => match listing.as_mut() {
            Some(l) => {
                l.at = Instant::now();
                Ok(l.addrs.clone())
            }
            None => Err(format!("cannot list this host's addresses: {e}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_has_loopback() {
        let addrs = addresses().unwrap();
        assert!(addrs.iter().any(|a| a.is_loopback()), "{addrs:?}");
    }
}
