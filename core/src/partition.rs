//! Partitioned dispatch: every job belongs to one of a fixed number of
//! partitions (a stable hash of its id), and each partition is dispatched by
//! the one dispatcher holding its lease. The count is recorded in the
//! database at migration time and never changes, so a job's partition never
//! moves; what moves between dispatchers is partition *ownership*, decided by
//! rendezvous hashing with bounded loads over the live members (see
//! [`owners`]).

use std::collections::BTreeMap;

/// Partitions a fresh schema records (`dispatch_partitions.partitions`).
pub const DEFAULT_PARTITIONS: u32 = 256;

/// The partition of job `id` among `count`: FNV-1a (32 bits) of the id's
/// bytes, modulo `count`. Stable across releases, platforms and processes:
/// it is stored with each job (`jobs.partition_no`) and recomputed by the
/// claim, so it must never change.
pub fn of(id: &str, count: u32) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % count.max(1)
}

/// A 64-bit mix of `member` and `partition` (FNV-1a, then a final avalanche),
/// the weight of rendezvous hashing.
fn weight(member: &str, partition: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in member.bytes().chain(partition.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64's finalizer: FNV alone leaves the last bytes' influence
    // in the low bits, which would bias the comparison.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The owner of every partition among `0..count`, by index into `members`
/// (`None` only when there is no member): rendezvous hashing with bounded
/// loads. Each partition goes to the member with the highest weight for it
/// that still has room, every member taking at most ⌈count ÷ members⌉
/// (plain rendezvous hashing leaves some members a fifth more than the
/// average, and the busiest one bounds what the group dispatches). Every member computes the same owners from the
/// same list, whatever its order; when a member joins or leaves, its
/// partitions move, and a few others whose preferred member had been full.
pub fn owners(members: &[String], count: u32) -> Vec<Option<usize>> {
    let mut sorted: Vec<usize> = (0..members.len()).collect();
    sorted.sort_by(|&a, &b| members[a].cmp(&members[b]));
    sorted.dedup_by(|a, b| members[*a] == members[*b]);
    if sorted.is_empty() {
        return vec![None; count as usize];
    }
    let cap = count.div_ceil(sorted.len() as u32);
    let mut load = vec![0u32; members.len()];
    (0..count)
        .map(|p| {
            let mut ranked: Vec<(u64, usize)> = sorted
                .iter()
                .map(|&m| (weight(&members[m], p), m))
                .collect();
            // Highest weight first; ties (never in practice) by name order.
            ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let m = ranked.iter().map(|&(_, m)| m).find(|&m| load[m] < cap)?;
            load[m] += 1;
            Some(m)
        })
        .collect()
}

/// The partitions among `0..count` that `me` should own given the live
/// `members` (which should include `me`): see [`owners`].
pub fn fair_share(me: &str, members: &[String], count: u32) -> Vec<u32> {
    owners(members, count)
        .into_iter()
        .zip(0..)
        .filter(|(m, _)| m.is_some_and(|m| members[m] == me))
        .map(|(_, p)| p)
        .collect()
}

/// The partitions a dispatcher holds, each with its lease's fencing token:
/// what a partitioned claim passes to storage, which refuses a partition
/// whose stored fence is newer.
pub type Owned = BTreeMap<u32, u64>;

/// A partition storage refused because a newer owner has claimed in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced {
    /// The partition.
    pub partition: u32,
    /// The fence the caller held.
    pub ours: u64,
    /// The newer fence storage holds.
    pub current: u64,
}

/// Name of the lease (and of its stored fence) of `partition`, under the
/// dispatcher lease's name `base`.
pub fn lease_name(base: &str, partition: u32) -> String {
    format!("{base}/p{partition}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_partition_is_stable() {
        // Pinned: stored partitions must match what later releases compute.
        assert_eq!(of("", 256), 0x811c_9dc5 % 256);
        assert_eq!(of("a", 256), 0xe40c_292c % 256);
        assert_eq!(
            of("0190f5c2-7a1e-7000-8000-000000000000", 256),
            of("0190f5c2-7a1e-7000-8000-000000000000", 256)
        );
        assert!(of("x", 1) == 0 && of("x", 0) == 0);
    }

    #[test]
    fn job_ids_spread_over_the_partitions() {
        let mut counts = vec![0u32; 256];
        for _ in 0..25_600 {
            counts[of(&uuid::Uuid::now_v7().to_string(), 256) as usize] += 1;
        }
        // 100 expected per partition.
        assert!(
            counts.iter().all(|&c| (40..=180).contains(&c)),
            "{counts:?}"
        );
    }

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("dispatcher-{i}")).collect()
    }

    #[test]
    fn every_partition_has_one_owner_and_none_more_than_its_fair_share() {
        for n in 1..=9 {
            let m = members(n);
            let shares: Vec<Vec<u32>> = m.iter().map(|me| fair_share(me, &m, 256)).collect();
            let mut all: Vec<u32> = shares.concat();
            all.sort_unstable();
            assert_eq!(all, (0..256).collect::<Vec<_>>());
            let sizes: Vec<u32> = shares.iter().map(|s| s.len() as u32).collect();
            let cap = 256u32.div_ceil(n as u32);
            assert!(sizes.iter().all(|&s| s <= cap), "{n} members: {sizes:?}");
        }
    }

    /// Who owns each partition, by name.
    fn named(m: &[String]) -> Vec<String> {
        owners(m, 256)
            .into_iter()
            .map(|o| m[o.unwrap()].clone())
            .collect()
    }

    #[test]
    fn a_member_leaving_moves_its_partitions_and_few_others() {
        let four = members(4);
        let three: Vec<String> = four[..3].to_vec();
        let (before, after) = (named(&four), named(&three));
        let moved_others = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| *b != "dispatcher-3" && b != a)
            .count();
        // Its 64 move; of the other 192, a few whose first choice was full.
        assert!(moved_others < 64, "{moved_others} other partitions moved");
    }

    #[test]
    fn the_owners_do_not_depend_on_list_order() {
        let mut m = members(5);
        let a = named(&m);
        m.reverse();
        assert_eq!(a, named(&m));
        assert_eq!(owners(&[], 3), [None, None, None]);
        assert!(fair_share("x", &[], 3).is_empty());
    }
}
