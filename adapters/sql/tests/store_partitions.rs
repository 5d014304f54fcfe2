//! Store suite, partitioned dispatch: the due scans restricted to the
//! partitions a dispatcher owns, and the partitioned claim, fenced per
//! partition (a stale owner is refused, a newer one takes over) with the
//! concurrency gate still counting across owners — on every database.

#[macro_use]
mod store_support;
use store_support as support;

use kairos_core::concurrency::{Limit, Scope};
use kairos_core::job::Job;
use kairos_core::partition::{self, Fenced, Owned};
use kairos_core::store::{Claim, Dispatch, DispatchScope, LimitStore};
use kairos_store_sql::SqlStore;
use support::{T0, create, id, one_shot};

store_cases!(
    the_partition_count_is_recorded,
    due_scans_see_only_the_partitions_asked_for,
    a_stale_owner_is_refused_and_the_new_one_claims,
    claims_outside_the_owned_partitions_are_dropped,
    the_gate_counts_across_owners,
);

const N: u32 = partition::DEFAULT_PARTITIONS;

fn claim_of(job: &Job, worker: Option<&str>) -> Claim {
    Claim {
        job: std::sync::Arc::new(job.clone()),
        scheduled_at: job.next_trigger_at.unwrap(),
        next_trigger_at: None,
        execution_id: id(),
        worker_id: worker.map(str::to_string),
        shard: kairos_core::shard::Shard::SINGLE,
    }
}

/// `n` one-shot jobs of `tenant` (handler `handler`), due at `T0`.
async fn jobs(store: &SqlStore, tenant: &str, handler: &str, n: usize) -> Vec<Job> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut new = one_shot(tenant, T0);
        new.handler = handler.to_string();
        out.push(create(store, new).await);
    }
    out
}

fn part(job: &Job) -> u32 {
    partition::of(&job.id, N)
}

fn owned(parts: &[(u32, u64)]) -> Owned {
    parts.iter().copied().collect()
}

/// `parts` held, each with fence 1: what a scan of them reads.
fn held(parts: &[u32]) -> Owned {
    parts.iter().map(|&p| (p, 1)).collect()
}

async fn the_partition_count_is_recorded(store: SqlStore) {
    assert_eq!(store.partitions_count().await.unwrap(), 256);
}

async fn due_scans_see_only_the_partitions_asked_for(store: SqlStore) {
    let jobs = jobs(&store, "ps", "noop", 12).await;
    let first = part(&jobs[0]);
    let wanted: Vec<u32> = vec![first, (first + 1) % N];
    let expect: Vec<&str> = jobs
        .iter()
        .filter(|j| wanted.contains(&part(j)))
        .map(|j| j.id.as_str())
        .collect();
    let mut found: Vec<String> = store
        .jobs_find_due(DispatchScope::Partitions(&held(&wanted)), T0, 100, &[])
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    found.sort();
    let mut expect_sorted: Vec<String> = expect.iter().map(|s| s.to_string()).collect();
    expect_sorted.sort();
    assert_eq!(found, expect_sorted);
    let ranked = store
        .jobs_find_due_ranked(
            DispatchScope::Partitions(&held(&wanted)),
            T0,
            T0 - 60_000,
            100,
            &[],
        )
        .await
        .unwrap();
    assert_eq!(ranked.len(), expect.len());
    assert!(ranked.iter().all(|j| wanted.contains(&part(j))));
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::Partitions(&held(&wanted)), T0, 100)
            .await
            .unwrap() as usize,
        expect.len()
    );
    let all: Vec<u32> = (0..N).collect();
    assert_eq!(
        store
            .jobs_find_due(DispatchScope::Partitions(&held(&all)), T0, 100, &[])
            .await
            .unwrap()
            .len(),
        12,
        "every partition: every job"
    );
    assert!(
        store
            .jobs_find_due_immediate(DispatchScope::Partitions(&held(&all)), T0, 100)
            .await
            .unwrap()
            .iter()
            .all(|j| all.contains(&part(j)))
    );
    // No partition held: nothing is read, nothing is claimed.
    let none = Owned::new();
    assert!(
        store
            .jobs_find_due(DispatchScope::Partitions(&none), T0, 100, &[])
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .jobs_count_due(DispatchScope::Partitions(&none), T0, 100)
            .await
            .unwrap(),
        0
    );
    let claims: Vec<Claim> = jobs.iter().map(|j| claim_of(j, None)).collect();
    let nothing = store
        .triggers_claim(DispatchScope::Partitions(&none), &claims, T0)
        .await
        .unwrap();
    assert!(nothing.work.is_empty() && nothing.fenced.is_empty());
}

async fn a_stale_owner_is_refused_and_the_new_one_claims(store: SqlStore) {
    let j = create(&store, support::cron("pf", T0)).await;
    let k = loop {
        let k = create(&store, support::cron("pf", T0)).await;
        if part(&k) != part(&j) {
            break k;
        }
    };
    let (p, q) = (part(&j), part(&k));
    // Claims of each job's next trigger, as its owner reads it now.
    let claims = async |job: &Job| {
        let job = support::job_now(&store, job).await;
        let due = job.next_trigger_at.unwrap();
        kairos_core::trigger::claims_for([job], due)
    };
    // The first owner claims with fence 1.
    let first = store
        .triggers_claim(
            DispatchScope::Partitions(&owned(&[(p, 1)])),
            &claims(&j).await,
            T0,
        )
        .await
        .unwrap();
    assert_eq!((first.work.len(), first.fenced.len()), (1, 0));
    // A newer owner (fence 2) takes the partition over by claiming in it.
    let newer = store
        .triggers_claim(
            DispatchScope::Partitions(&owned(&[(p, 2)])),
            &claims(&j).await,
            T0,
        )
        .await
        .unwrap();
    assert_eq!((newer.work.len(), newer.fenced.len()), (1, 0));
    // The stale owner is refused there, and only there.
    let mut both = claims(&j).await;
    both.extend(claims(&k).await);
    let stale = store
        .triggers_claim(
            DispatchScope::Partitions(&owned(&[(p, 1), (q, 1)])),
            &both,
            T0,
        )
        .await
        .unwrap();
    assert_eq!(
        stale.fenced,
        [Fenced {
            partition: p,
            ours: 1,
            current: 2
        }]
    );
    assert_eq!(stale.work.len(), 1);
    assert_eq!(
        stale.work[0].job_id, k.id,
        "its other partition still claims"
    );
    // The new owner goes on.
    let again = store
        .triggers_claim(
            DispatchScope::Partitions(&owned(&[(p, 2)])),
            &claims(&j).await,
            T0,
        )
        .await
        .unwrap();
    assert_eq!((again.work.len(), again.fenced.len()), (1, 0));
}

async fn claims_outside_the_owned_partitions_are_dropped(store: SqlStore) {
    let jobs = jobs(&store, "po", "noop", 2).await;
    let p = part(&jobs[0]);
    let mut claims = vec![claim_of(&jobs[0], None)];
    if part(&jobs[1]) != p {
        claims.push(claim_of(&jobs[1], None));
    }
    let done = store
        .triggers_claim(DispatchScope::Partitions(&owned(&[(p, 7)])), &claims, T0)
        .await
        .unwrap();
    assert_eq!(done.work.len(), 1);
    assert_eq!(done.work[0].job_id, jobs[0].id);
    assert!(done.fenced.is_empty());
    // Not claimed: still due for its owner.
    if claims.len() == 2 {
        let left = store
            .jobs_find_due(
                DispatchScope::Partitions(&held(&[part(&jobs[1])])),
                T0,
                10,
                &[],
            )
            .await
            .unwrap();
        assert!(left.iter().any(|j| j.id == jobs[1].id));
    }
}

async fn the_gate_counts_across_owners(store: SqlStore) {
    let limit = Limit {
        scope: Scope::Handler,
        name: "one".into(),
        max_running: Some(1),
        rate_per_sec: None,
    };
    store.limit_set(&limit, T0).await.unwrap();
    // Two jobs of the limited handler in two different partitions, claimed
    // by two owners: only one of them runs.
    let mut picked: Vec<Job> = Vec::new();
    while picked.len() < 2 {
        let j = jobs(&store, "pg", "one", 1).await.remove(0);
        if picked.iter().all(|p| part(p) != part(&j)) {
            picked.push(j);
        }
    }
    let a = store
        .triggers_claim(
            DispatchScope::Partitions(&owned(&[(part(&picked[0]), 1)])),
            &[claim_of(&picked[0], Some("w1"))],
            T0,
        )
        .await
        .unwrap();
    let b = store
        .triggers_claim(
            DispatchScope::Partitions(&owned(&[(part(&picked[1]), 1)])),
            &[claim_of(&picked[1], Some("w2"))],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(a.work.len(), 1, "the first one is dispatched");
    assert!(b.work.is_empty(), "the second waits for the slot");
}
