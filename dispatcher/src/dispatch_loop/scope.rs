//! What one dispatch loop claims, and the rules that go with it: every
//! job (the single leader) or the partitions this dispatcher holds leases
//! on (`KAIROS_DISPATCH_PARTITIONED`, fenced per partition), each held to
//! `KAIROS_DISPATCH_MAX_RATE` when it is set. The loop and its immediate
//! lane ask it for the store's [`DispatchScope`] of every scan, and claim through
//! it.
//!
//! A partitioned claim loop records dispatches only with its claims: work
//! left `pending` (no worker free at claim time, a failed publish) is the
//! leader's sweep's, so such a loop admits nothing ([`ClaimScope::admits`])
//! and that work simply stays pending for the leader.

use super::rate::RateLimit;
use crate::partitions::OwnedSet;
use kairos_core::partition::Owned;
use kairos_core::store::{Claim, Dispatch, DispatchScope, DispatchWork, StoreResult};
use kairos_core::time::Millis;
use std::sync::Arc;

/// A dispatch loop's reach: all jobs or its partitions, and its rate.
#[derive(Debug, Default)]
pub(crate) struct ClaimScope {
    /// The partitions held; `None` in single-leader mode (every job).
    partitions: Option<Arc<OwnedSet>>,
    /// The claim rate, if limited.
    rate: Option<RateLimit>,
}

/// The jobs a loop covers as of one scan.
#[derive(Debug, Clone)]
pub(crate) enum Held {
    /// Every job.
    All,
    /// The partitions held and still trusted, with their fences.
    Partitions(Owned),
}

impl Held {
    /// The store's scope, claiming under `fence` for [`Held::All`].
    pub(crate) fn scope(&self, fence: u64) -> DispatchScope<'_> {
        match self {
            Held::All => DispatchScope::All { fence },
            Held::Partitions(owned) => DispatchScope::Partitions(owned),
        }
    }
}

impl ClaimScope {
    /// The single leader's loop: every job, claimed at most at `rate`.
    pub(crate) fn leader(rate: Option<RateLimit>) -> Self {
        Self {
            partitions: None,
            rate,
        }
    }

    /// A partitioned dispatcher's loop: the partitions in `owned`, claimed
    /// at most at `rate`.
    pub(crate) fn partitions(owned: Arc<OwnedSet>, rate: Option<RateLimit>) -> Self {
        Self {
            partitions: Some(owned),
            rate,
        }
    }

    /// What the loop covers now.
    pub(crate) fn held(&self) -> Held {
        match &self.partitions {
            None => Held::All,
            Some(owned) => Held::Partitions(owned.snapshot()),
        }
    }

    /// Whether the loop records the dispatch of work left `pending`
    /// (`executions_admit`): the leader's does; a partitioned claim
    /// loop leaves that work to the leader's sweep.
    pub(crate) fn admits(&self) -> bool {
        self.partitions.is_none()
    }

    /// A scan's `limit`, no more than a limited rate can claim at once (a
    /// page of 500 read for ten claims costs the database more than the
    /// claims).
    pub(crate) fn page(&self, limit: u32) -> u32 {
        self.rate
            .as_ref()
            .map_or(limit, |r| limit.min(r.burst().max(1)))
    }

    /// Claims what the rate allows of `claims` (whole jobs, waiting for the
    /// first token; the rest stay due for a later round) in the partitions
    /// held now (the rate may have waited), or under the leader's `fence`.
    /// Partitions storage refused are given up at once.
    pub(crate) async fn claim(
        &self,
        store: &dyn Dispatch,
        fence: u64,
        claims: &[Claim],
        now: Millis,
    ) -> StoreResult<Vec<DispatchWork>> {
        let claims = self.within_rate(claims).await;
        let held = self.held();
        let done = store.triggers_claim(held.scope(fence), claims, now).await?;
        if let Some(owned) = &self.partitions {
            owned.refuse(&done.fenced);
        }
        Ok(done.work)
    }

    /// The claims of `claims` the rate allows now (whole jobs), waiting for
    /// the first token.
    async fn within_rate<'a>(&self, claims: &'a [Claim]) -> &'a [Claim] {
        let Some(rate) = &self.rate else {
            return claims;
        };
        let taken = rate.take(claims.len()).await;
        let cut = whole_jobs(claims, taken, |c| c.job.id.as_str());
        rate.settle(taken, cut);
        &claims[..cut]
    }
}

/// How many of `claims` (each of the job `job` names) to take for `taken`
/// tokens without splitting a job's claims (its shards win or lose
/// together): fewer when the cut falls inside a job, and the whole first
/// job when even that is more than `taken`.
fn whole_jobs<T>(claims: &[T], taken: usize, job: impl Fn(&T) -> &str) -> usize {
    let mut cut = taken.min(claims.len());
    while cut > 0 && cut < claims.len() && job(&claims[cut]) == job(&claims[cut - 1]) {
        cut -= 1;
    }
    if cut == 0 {
        cut = claims
            .iter()
            .position(|c| job(c) != job(&claims[0]))
            .unwrap_or(claims.len());
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_never_splits_a_jobs_claims() {
        let claims = ["a", "a", "b", "c", "c", "c"];
        let cut = |taken| whole_jobs(&claims, taken, |c| c);
        assert_eq!(cut(6), 6);
        assert_eq!(cut(4), 3, "c's shards stay together");
        assert_eq!(cut(2), 2);
        assert_eq!(cut(1), 2, "a's shards go together");
        assert_eq!(cut(0), 2);
    }

    #[test]
    fn only_the_leaders_loop_admits_and_a_rate_bounds_its_page() {
        assert!(ClaimScope::leader(None).admits());
        assert!(matches!(ClaimScope::leader(None).held(), Held::All));
        assert_eq!(ClaimScope::leader(None).page(500), 500);
        let owned = Arc::new(OwnedSet::default());
        let scope = ClaimScope::partitions(owned, RateLimit::new(50));
        assert!(!scope.admits());
        assert_eq!(scope.page(500), 10, "a fifth of a second's claims");
        assert!(matches!(scope.held(), Held::Partitions(p) if p.is_empty()));
    }
}
