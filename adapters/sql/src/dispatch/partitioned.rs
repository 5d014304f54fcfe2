//! The partitioned claim (`Dispatch::triggers_claim` in `DispatchScope::Partitions`): the
//! fences of the partitions its claims fall in are checked (rows
//! `dispatcher/p<n>` of `leader_fences`, beside the leader's `dispatcher`
//! row), the claims of partitions the caller does not hold are dropped,
//! and the rest is the ordinary claim (whose concurrency gate takes its
//! own lock, only when a limit applies).

use super::claim;
use super::fence;
use crate::db::Tx;
use crate::rows::R;
use crate::sql::{Sql, from_u64};
use kairos_core::partition::{self, Fenced, Owned};
use kairos_core::store::{Claim, ClaimOutcome, StoreResult};
use kairos_core::time::Millis;
use std::collections::{BTreeSet, HashMap};

/// The base of the partition fences' names: the leader fence's own name,
/// whatever the lease is called (one set of fences per database).
const FENCE_BASE: &str = "dispatcher";

/// The partitioned claim's transaction; `count` partitions.
pub(super) async fn claim(
    mut tx: Tx,
    owned: &Owned,
    count: u32,
    claims: &[Claim],
    now: Millis,
) -> StoreResult<ClaimOutcome> {
    let of = |c: &Claim| partition::of(&c.job.id, count);
    let used: BTreeSet<u32> = claims
        .iter()
        .map(of)
        .filter(|p| owned.contains_key(p))
        .collect();
    let fenced = check_fences(&mut tx, owned, &used).await?;
    let refused: BTreeSet<u32> = fenced.iter().map(|f| f.partition).collect();
    let mine: Vec<Claim> = claims
        .iter()
        .filter(|c| {
            let p = of(c);
            owned.contains_key(&p) && !refused.contains(&p)
        })
        .cloned()
        .collect();
    if mine.is_empty() {
        // The raised fences are kept: they refuse the previous owners.
        tx.commit().await?;
        return Ok(ClaimOutcome {
            work: Vec::new(),
            fenced,
        });
    }
    let work = claim::claim_checked(tx, &mine, now).await?;
    Ok(ClaimOutcome { work, fenced })
}

/// Checks the fence of each partition in `used` against `owned`: a stored
/// fence equal to ours passes (one read under a shared lock for all of
/// them, the usual case within a lease), an older or missing one is raised
/// to ours, a newer one is reported. The rows stay locked to the commit, so
/// a new owner's raise (a write) waits for the old owner's claims in
/// flight, and the old owner's next claim sees the new fence; the claims of
/// one owner (its main loop and its lane) share the rows (see
/// `super::fence`).
async fn check_fences(
    tx: &mut Tx,
    owned: &Owned,
    used: &BTreeSet<u32>,
) -> StoreResult<Vec<Fenced>> {
    if used.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = used
        .iter()
        .map(|&p| partition::lease_name(FENCE_BASE, p))
        .collect();
    // In name order: concurrent claims lock shared rows in one order.
    let mut read = Sql::new("SELECT name, fence FROM leader_fences WHERE name IN ");
    read.list(names.iter().map(String::as_str))
        .push(" ORDER BY name")
        .for_share();
    let mut stored = HashMap::with_capacity(names.len());
    for row in read.fetch_all(&mut *tx).await? {
        let r = R::new(&row, "leader_fences");
        stored.insert(r.string("name")?, r.i64("fence")?);
    }
    let mut fenced = Vec::new();
    for (&p, name) in used.iter().zip(&names) {
        let Some(&ours) = owned.get(&p) else {
            continue;
        };
        let ours_stored = from_u64(ours);
        let current = match stored.get(name) {
            Some(&current) if current >= ours_stored => current,
            // First claim of this lease in the partition: raise the fence
            // (the share becomes an exclusive lock; see `super::fence`).
            _ => fence::raise(tx, name, ours_stored).await?,
        };
        if current > ours_stored {
            fenced.push(Fenced {
                partition: p,
                ours,
                current: u64::try_from(current).unwrap_or_default(),
            });
        }
    }
    Ok(fenced)
}
