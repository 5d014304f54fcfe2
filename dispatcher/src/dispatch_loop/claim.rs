//! Claiming due triggers: each due job's claims (one per trigger, fanned
//! out per shard of a broadcast or sharded job), a worker picked for each
//! so the claim records its dispatch too, the claim itself through the
//! loop's [`ClaimScope`], and the picks of the claims that won nothing
//! given back. The main loop and the immediate lane both claim here.

use super::scope::ClaimScope;
use crate::balancer::{Balancer, Want};
use kairos_core::job::Job;
use kairos_core::store::{Claim, Dispatch, DispatchWork, StoreError};
use kairos_core::time::Millis;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

/// What one claim of due triggers produced.
pub(crate) struct Claimed {
    /// The work the claim won, recorded as dispatched where a worker was
    /// chosen already.
    pub(crate) work: Vec<DispatchWork>,
    /// How many claims were tried (one per execution after fan-out).
    pub(crate) tried: usize,
    /// Part of a fan-out was left for the next round (over
    /// [`kairos_core::shard::FAN_OUT_PER_ROUND`]).
    pub(crate) more: bool,
}

/// Claims due triggers for one dispatch loop.
pub(crate) struct Claimer {
    store: Arc<dyn Dispatch>,
    balancer: Arc<Mutex<Balancer>>,
    scope: Arc<ClaimScope>,
}

/// What a trigger of `job` needs from its worker.
fn job_want(job: &Job) -> Want<'_> {
    Want {
        handler: &job.handler,
        group: job.worker_group.as_deref(),
    }
}

impl Claimer {
    /// A claimer picking workers from `balancer`, claiming in `scope`.
    pub(crate) fn new(
        store: Arc<dyn Dispatch>,
        balancer: Arc<Mutex<Balancer>>,
        scope: Arc<ClaimScope>,
    ) -> Self {
        Self {
            store,
            balancer,
            scope,
        }
    }

    fn balancer(&self) -> MutexGuard<'_, Balancer> {
        self.balancer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the triggers of `due` under the term with `fence`: fans
    /// broadcast and sharded jobs out (a huge fan-out over several rounds
    /// rather than in one transaction), picks a worker for each claim, and
    /// gives back the picks of the claims that won nothing.
    pub(crate) async fn claim_due(
        &self,
        due: Vec<Job>,
        fence: u64,
        now: Millis,
    ) -> Result<Claimed, StoreError> {
        let fanned = self.fan_out(kairos_core::trigger::claims_for(due, now), now);
        let (mut claims, later) =
            kairos_core::shard::within_budget(fanned, kairos_core::shard::FAN_OUT_PER_ROUND);
        self.unassign_unclaimed(&later, &[]);
        self.assign(&mut claims, now);
        let claimed = self
            .scope
            .claim(self.store.as_ref(), fence, &claims, now)
            .await;
        let work = match claimed {
            Ok(work) => work,
            Err(e) => {
                self.unassign_unclaimed(&claims, &[]);
                return Err(e);
            }
        };
        self.unassign_unclaimed(&claims, &work);
        crate::metrics::claimed(work.len(), claims.len().saturating_sub(work.len()));
        Ok(Claimed {
            work,
            tried: claims.len(),
            more: !later.is_empty(),
        })
    }

    /// One claim per shard of each broadcast or sharded trigger (see
    /// [`kairos_core::shard::fan_out`]): a broadcast goes to every live
    /// worker serving its job now, each shard of a sharded trigger is
    /// placed by [`Claimer::assign`] like a single trigger.
    fn fan_out(&self, claims: Vec<Claim>, now: Millis) -> Vec<Claim> {
        let mut balancer = self.balancer();
        kairos_core::shard::fan_out(claims, |job| balancer.broadcast(now, job_want(job)))
    }

    /// Chooses a worker for every claim some live worker can take, so that
    /// the claim records the dispatch itself. A claim left without one is
    /// created `pending` and routed when it is published.
    fn assign(&self, claims: &mut [Claim], now: Millis) {
        let mut balancer = self.balancer();
        for c in claims.iter_mut().filter(|c| c.worker_id.is_none()) {
            c.worker_id = balancer.pick(now, job_want(&c.job), None);
        }
    }

    /// Gives back the choices of the claims that produced no work (their
    /// version check lost, the trigger was skipped or dropped, or a rate
    /// left it for a later round).
    fn unassign_unclaimed(&self, claims: &[Claim], work: &[DispatchWork]) {
        // Each piece of work is one claim's execution: all of them won.
        if work.len() == claims.len() {
            return;
        }
        let claimed: HashSet<&str> = work.iter().map(|w| w.execution_id.as_str()).collect();
        let mut balancer = self.balancer();
        for c in claims {
            if let Some(worker) = &c.worker_id
                && !claimed.contains(c.execution_id.as_str())
            {
                balancer.unpick(worker);
            }
        }
    }
}
