//! Partitioned dispatch: every job belongs to one of a fixed number of
//! partitions (a stable hash of its id), and each partition is dispatched by
//! the one dispatcher holding its lease. The count is recorded in the
//! database at migration time and never changes, so a job's partition never
//! moves; what moves between dispatchers is partition *ownership*, decided by
//! rendezvous hashing over the live members (see [`owner`]).

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

/// The member that should own `partition`: the one with the highest weight
/// (rendezvous hashing). When a member joins or leaves, only the partitions
/// it wins or held move; every member computes the same answer from the
/// same list, whatever its order. `None` when there is no member.
pub fn owner<'a>(partition: u32, members: &'a [String]) -> Option<&'a str> {
    members
        .iter()
        .max_by_key(|m| (weight(m, partition), m.as_str()))
        .map(String::as_str)
}

/// The partitions among `0..count` that `me` should own given the live
/// `members` (which should include `me`).
pub fn fair_share(me: &str, members: &[String], count: u32) -> Vec<u32> {
    (0..count)
        .filter(|&p| owner(p, members) == Some(me))
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
    fn every_partition_has_exactly_one_owner() {
        let m = members(3);
        let shares: Vec<Vec<u32>> = m.iter().map(|me| fair_share(me, &m, 256)).collect();
        let mut all: Vec<u32> = shares.concat();
        all.sort_unstable();
        assert_eq!(all, (0..256).collect::<Vec<_>>());
        for s in &shares {
            assert!((50..=120).contains(&s.len()), "{}", s.len());
        }
    }

    #[test]
    fn a_member_leaving_moves_only_its_partitions() {
        let four = members(4);
        let three: Vec<String> = four[..3].to_vec();
        for p in 0..256 {
            let before = owner(p, &four).unwrap();
            let after = owner(p, &three).unwrap();
            if before != "dispatcher-3" {
                assert_eq!(before, after, "partition {p} moved");
            }
        }
    }

    #[test]
    fn the_owner_does_not_depend_on_list_order() {
        let mut m = members(5);
        let a: Vec<Option<String>> = (0..64).map(|p| owner(p, &m).map(str::to_string)).collect();
        m.reverse();
        let b: Vec<Option<String>> = (0..64).map(|p| owner(p, &m).map(str::to_string)).collect();
        assert_eq!(a, b);
        assert_eq!(owner(1, &[]), None);
    }
}
