//! The coordination ports' contract, one suite run against the in-process
//! adapter (under paused time) and against Redis (short real TTLs), plus
//! Redis-only tests: a connection killed by the server, a db number in the URL,
//! and connect errors.

use kairos_coord_redis::RedisCoord;
use kairos_core::coord::{Coordination, Lease, LeaseStore, OnceGuard};
use kairos_core::protocol::Names;
use kairos_inproc::MemoryCoord;
use kairos_testkit::{self as testkit, wait_for};
use std::time::Duration;

/// Short enough to expire during a test; expiry is awaited, never timed.
const TTL: Duration = Duration::from_millis(200);
/// Long enough never to expire during a test.
const LONG: Duration = Duration::from_secs(60);
const DEADLINE: Duration = Duration::from_secs(10);

trait Coord: Coordination {}
impl<T: Coordination> Coord for T {}

/// The same lease as seen by someone who does not hold it.
fn stale(lease: &Lease) -> Lease {
    Lease {
        token: "not-the-holder".into(),
        ..lease.clone()
    }
}

async fn take<C: Coord>(c: &C, name: &str, ttl: Duration) -> Option<Lease> {
    c.lease_try_acquire(name, ttl).await.expect("acquire")
}

async fn exclusive_acquire<C: Coord>(a: &C, b: &C, _ns: &str) {
    let held = take(a, "leader", LONG)
        .await
        .expect("a free lease is taken");
    assert_eq!((held.name.as_str(), held.ttl), ("leader", LONG));
    assert!(held.fence >= 1);
    assert!(take(b, "leader", LONG).await.is_none());
    assert!(take(a, "leader", LONG).await.is_none(), "not re-entrant");
    assert!(
        take(b, "other", LONG).await.is_some(),
        "names are independent"
    );
}

async fn concurrent_acquire_has_one_winner<C: Coord>(a: &C, b: &C, _ns: &str) {
    let tries = (0..10).map(|i| take(if i % 2 == 0 { a } else { b }, "leader", LONG));
    let won = futures::future::join_all(tries).await;
    assert_eq!(won.iter().filter(|l| l.is_some()).count(), 1, "{won:?}");
}

async fn renew_only_by_holder<C: Coord>(a: &C, b: &C, _ns: &str) {
    let held = take(a, "leader", LONG).await.expect("taken");
    assert!(a.lease_renew(&held).await.unwrap());
    assert!(!b.lease_renew(&stale(&held)).await.unwrap());
    assert!(
        a.lease_renew(&held).await.unwrap(),
        "a stale renew changes nothing"
    );
    assert!(take(b, "leader", LONG).await.is_none());
}

async fn expiry_lets_another_acquire_with_larger_fence<C: Coord>(a: &C, b: &C, _ns: &str) {
    let first = take(a, "leader", TTL).await.expect("taken");
    let second = wait_for("the lease to expire", DEADLINE, || async move {
        take(b, "leader", LONG).await
    })
    .await;
    assert!(second.fence > first.fence, "{first:?} then {second:?}");
    assert_ne!(second.token, first.token);
    assert!(!a.lease_renew(&first).await.unwrap(), "the old holder lost");
    a.lease_release(&first).await.unwrap();
    assert!(
        b.lease_renew(&second).await.unwrap(),
        "an old release is a no-op"
    );
}

async fn release_by_non_holder_does_nothing<C: Coord>(a: &C, b: &C, _ns: &str) {
    let held = take(a, "leader", LONG).await.expect("taken");
    b.lease_release(&stale(&held)).await.unwrap();
    assert!(take(b, "leader", LONG).await.is_none());
    assert!(a.lease_renew(&held).await.unwrap());
}

async fn release_by_holder_frees_at_once<C: Coord>(a: &C, b: &C, _ns: &str) {
    let held = take(a, "leader", LONG).await.expect("taken");
    a.lease_release(&held).await.unwrap();
    let next = take(b, "leader", LONG).await.expect("free at once");
    assert!(next.fence > held.fence);
    assert!(!a.lease_renew(&held).await.unwrap());
}

async fn fences_strictly_increase<C: Coord>(a: &C, b: &C, _ns: &str) {
    let mut last = 0;
    for i in 0..6 {
        let c = if i % 2 == 0 { a } else { b };
        let lease = take(c, "leader", LONG).await.expect("taken");
        assert!(lease.fence > last, "fence {} after {last}", lease.fence);
        last = lease.fence;
        c.lease_release(&lease).await.unwrap();
    }
}

async fn once_first_caller_wins<C: Coord>(a: &C, b: &C, ns: &str) {
    let key = format!("{ns}:attempt:e1:1");
    assert!(a.once(&key, "w1", LONG).await.unwrap());
    assert!(
        !a.once(&key, "w1", LONG).await.unwrap(),
        "the owner itself is refused too"
    );
    assert!(!b.once(&key, "w2", LONG).await.unwrap());
    let retry = format!("{ns}:attempt:e1:2");
    assert!(
        b.once(&retry, "w2", LONG).await.unwrap(),
        "a new attempt is a new key"
    );
    assert!(a.is_healthy().await && b.is_healthy().await);
}

async fn once_expires<C: Coord>(a: &C, b: &C, ns: &str) {
    let key = format!("{ns}:attempt:e2:1");
    let key = key.as_str();
    assert!(a.once(key, "w1", TTL).await.unwrap());
    wait_for("the once-key to expire", DEADLINE, || async move {
        b.once(key, "w2", LONG).await.unwrap().then_some(())
    })
    .await;
    assert!(!a.once(key, "w1", LONG).await.unwrap());
}

async fn once_released_only_by_its_owner<C: Coord>(a: &C, b: &C, ns: &str) {
    let key = format!("{ns}:attempt:e3:1");
    assert!(a.once(&key, "w-1", LONG).await.unwrap());
    assert!(!b.release(&key, "w-2").await.unwrap(), "not the owner");
    assert!(
        !b.release(&key, "w").await.unwrap(),
        "a prefix is not the owner"
    );
    assert!(!b.once(&key, "w-2", LONG).await.unwrap(), "still held");
    assert!(
        b.release(&key, "w-1").await.unwrap(),
        "anyone may release for the owner"
    );
    assert!(!a.release(&key, "w-1").await.unwrap(), "already gone");
    assert!(b.once(&key, "w-2", LONG).await.unwrap(), "free again");
    assert!(
        !a.release(&format!("{ns}:attempt:none:1"), "w-1")
            .await
            .unwrap()
    );
}

async fn stop_requests_are_seen_by_everyone<C: Coord>(a: &C, b: &C, ns: &str) {
    let keys: Vec<String> = (1..=3).map(|i| format!("{ns}:stop:e:{i}")).collect();
    assert_eq!(b.stops_posted(&keys).await.unwrap(), [false; 3]);
    a.stops_post(&keys[1..2], LONG).await.unwrap();
    a.stops_post(&keys[1..2], LONG).await.unwrap();
    assert_eq!(b.stops_posted(&keys).await.unwrap(), [false, true, false]);
    a.stops_post(&[keys[2].clone()], TTL).await.unwrap();
    assert_eq!(b.stops_posted(&keys).await.unwrap(), [false, true, true]);
    let keys = &keys;
    wait_for("the short stop request to expire", DEADLINE, || async move {
        (b.stops_posted(keys).await.unwrap() == [false, true, false]).then_some(())
    })
    .await;
    assert!(b.stops_posted(&[]).await.unwrap().is_empty());
    a.stops_post(&[], LONG).await.unwrap();
}

/// A worker starts a batch of attempts at once: every attempt key and stop
/// key asked for concurrently (on Redis, many in flight on one connection)
/// gets its own answer, one winner per key, whoever asks.
async fn a_batch_of_guards_answers_each_caller<C: Coord>(a: &C, b: &C, ns: &str) {
    let key = |i: usize| format!("{ns}:attempt:batch{i}:1");
    // The first 30 keys are taken beforehand, so answers within a pipeline differ.
    for i in 0..30 {
        assert!(a.once(&key(i), "w0", LONG).await.unwrap());
    }
    let tries = (0..200).map(|n| {
        let (c, owner) = if n % 2 == 0 { (a, "w1") } else { (b, "w2") };
        let k = key(n / 2);
        async move { (n / 2, c.once(&k, owner, LONG).await.unwrap()) }
    });
    let mut won = vec![0; 100];
    for (i, taken) in futures::future::join_all(tries).await {
        won[i] += usize::from(taken);
    }
    let expected: Vec<usize> = (0..100).map(|i| usize::from(i >= 30)).collect();
    assert_eq!(
        won, expected,
        "one winner per free key, none for a taken one"
    );
    let stops: Vec<String> = (0..50).map(|i| format!("{ns}:stop:batch:{i}")).collect();
    let posted: Vec<String> = stops.iter().step_by(3).cloned().collect();
    a.stops_post(&posted, LONG).await.unwrap();
    let asked = stops.iter().enumerate().map(|(i, k)| async move {
        let c = if i % 2 == 0 { a } else { b };
        (i, c.stops_posted(std::slice::from_ref(k)).await.unwrap())
    });
    for (i, seen) in futures::future::join_all(asked).await {
        assert_eq!(seen, [i % 3 == 0], "stop key {i}");
    }
}

/// Runs each case against a fresh in-process pair (paused clock) and a fresh
/// Redis pair (two connections under one unique namespace).
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod in_memory {
            $(
                #[tokio::test(start_paused = true)]
                async fn $case() {
                    let a = kairos_inproc::MemoryCoord::new();
                    super::$case(&a, &a.clone(), &kairos_testkit::unique("m")).await;
                }
            )*
        }
        mod on_redis {
            $(
                #[tokio::test]
                async fn $case() {
                    let Some((url, ns)) = super::redis_namespace().await else { return };
                    let a = super::redis_coord(&url, &ns).await;
                    let b = super::redis_coord(&url, &ns).await;
                    super::$case(&a, &b, &ns).await;
                    super::cleanup(&url, &ns).await;
                }
            )*
        }
    };
}
/// A fence the storage holds (after the lock service lost its counter) is
/// passed at the next acquire; a lower one never lowers the counter.
async fn a_raised_fence_is_passed_and_never_lowered<C: Coord>(a: &C, b: &C, _ns: &str) {
    let held = take(a, "leader", LONG).await.expect("taken");
    a.lease_release(&held).await.unwrap();
    let seen = held.fence + 40;
    b.lease_raise_fence("leader", seen).await.unwrap();
    let next = take(b, "leader", LONG).await.expect("free");
    assert!(next.fence > seen, "fence {} after {seen}", next.fence);
    b.lease_release(&next).await.unwrap();
    a.lease_raise_fence("leader", 1).await.unwrap();
    let after = take(a, "leader", LONG).await.expect("free");
    assert!(after.fence > next.fence, "{next:?} then {after:?}");
}

suite!(
    exclusive_acquire,
    concurrent_acquire_has_one_winner,
    renew_only_by_holder,
    expiry_lets_another_acquire_with_larger_fence,
    release_by_non_holder_does_nothing,
    release_by_holder_frees_at_once,
    fences_strictly_increase,
    a_raised_fence_is_passed_and_never_lowered,
    once_first_caller_wins,
    once_expires,
    once_released_only_by_its_owner,
    stop_requests_are_seen_by_everyone,
    a_batch_of_guards_answers_each_caller,
);

async fn redis_namespace() -> Option<(String, String)> {
    let url = testkit::redis_available().await?;
    Some((url, testkit::unique("t")))
}

async fn redis_coord(url: &str, ns: &str) -> RedisCoord {
    RedisCoord::connect(url, Names::new(ns))
        .await
        .expect("connect to Redis")
}

async fn plain(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).expect("Redis URL");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("plain Redis connection")
}

/// Drops the namespace's keys (fence counters never expire by design).
/// `SCAN`, not `KEYS`: a development Redis may hold millions of other keys
/// (a benchmark's attempt keys live 24 h), and `KEYS` would walk them all in
/// one command, past the connection's response timeout.
async fn cleanup(url: &str, ns: &str) {
    let mut c = plain(url).await;
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{ns}:*"))
            .arg("COUNT")
            .arg(100_000)
            .query_async(&mut c)
            .await
            .unwrap();
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(keys)
                .query_async::<()>(&mut c)
                .await
                .unwrap();
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

fn with_db(url: &str, db: u32) -> String {
    let mut u = url::Url::parse(url).expect("Redis URL");
    u.set_path(&format!("/{db}"));
    u.to_string()
}

#[tokio::test(start_paused = true)]
async fn memory_expiry_follows_the_paused_clock() {
    let c = MemoryCoord::new();
    let tick = Duration::from_millis(1);
    let held = take(&c, "leader", TTL).await.expect("taken");
    tokio::time::advance(TTL - tick).await;
    assert!(take(&c, "leader", TTL).await.is_none());
    assert!(c.lease_renew(&held).await.unwrap());
    tokio::time::advance(TTL - tick).await;
    assert!(take(&c, "leader", TTL).await.is_none(), "renew extended it");
    tokio::time::advance(tick).await;
    assert!(!c.lease_renew(&held).await.unwrap());
    assert!(take(&c, "leader", TTL).await.expect("expired").fence > held.fence);

    assert!(c.once("k", "w", TTL).await.unwrap());
    tokio::time::advance(TTL - tick).await;
    assert!(
        !c.once("k", "w", TTL).await.unwrap(),
        "a refused once keeps the expiry"
    );
    tokio::time::advance(tick).await;
    assert!(c.once("k", "w", TTL).await.unwrap());
}

/// `CLIENT KILL`s the coordinator's managed connection from another one.
/// Returns the killed connection's id.
async fn kill_connection(coord: &RedisCoord, admin: &mut redis::aio::MultiplexedConnection) -> i64 {
    let id: i64 = redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut coord.connection())
        .await
        .unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async(admin)
        .await
        .unwrap();
    assert_eq!(killed, 1, "connection {id} killed");
    id
}

/// After the server kills the connection, each kind of operation recovers.
/// The adapter retries or resolves the command that finds the connection
/// dead, so normally none fails; at most the first one after each kill may
/// (if the reconnect itself failed), never a later one.
#[tokio::test]
async fn redis_recovers_after_server_kills_connection() {
    let Some((url, ns)) = redis_namespace().await else {
        return;
    };
    let coord = redis_coord(&url, &ns).await;
    let mut admin = plain(&url).await;
    let held = take(&coord, "leader", LONG).await.expect("taken");
    let mut killed = Vec::new();
    for (round, first) in ["renew", "once", "acquire", "release", "health"]
        .into_iter()
        .enumerate()
    {
        let id = kill_connection(&coord, &mut admin).await;
        assert!(!killed.contains(&id), "each round runs on a new connection");
        killed.push(id);
        let mut errors = Vec::new();
        let ops = [first, "renew", "once", "acquire", "release", "health"];
        for (i, op) in ops.into_iter().enumerate() {
            let key = format!("{ns}:attempt:{round}:{i}");
            let outcome = match op {
                "renew" => coord.lease_renew(&held).await.map(|ok| assert!(ok)),
                "once" => coord.once(&key, "w", LONG).await.map(|ok| assert!(ok)),
                "acquire" => coord
                    .lease_try_acquire(&key, LONG)
                    .await
                    .map(|l| assert!(l.is_some())),
                "release" => coord.lease_release(&stale(&held)).await,
                _ => {
                    assert!(coord.is_healthy().await || errors.is_empty());
                    Ok(())
                }
            };
            if let Err(e) = outcome {
                eprintln!("after kill, {op} failed: {e}");
                errors.push(e);
            }
        }
        assert!(errors.len() <= 1, "round {round}: {errors:?}");
    }
    assert!(coord.lease_renew(&held).await.unwrap(), "still the holder");
    cleanup(&url, &ns).await;
}

#[tokio::test]
async fn redis_honours_the_db_number_in_the_url() {
    let Some((url, ns)) = redis_namespace().await else {
        return;
    };
    let names = Names::new(ns.as_str());
    let url5 = with_db(&url, 5);
    let coord = redis_coord(&url5, &ns).await;
    let held = take(&coord, "leader", LONG).await.expect("taken");
    let once_key = names.attempt_key("e1", 1);
    assert!(coord.once(&once_key, "w", LONG).await.unwrap());

    let mut db5 = plain(&url5).await;
    let in5: Option<String> = redis::cmd("GET")
        .arg(names.lease_key("leader"))
        .query_async(&mut db5)
        .await
        .unwrap();
    assert_eq!(in5.as_deref(), Some(held.token.as_str()));
    let fence: u64 = redis::cmd("GET")
        .arg(names.fence_key("leader"))
        .query_async(&mut db5)
        .await
        .unwrap();
    assert_eq!(fence, held.fence);

    let mut db0 = plain(&with_db(&url, 0)).await;
    let in0: u32 = redis::cmd("EXISTS")
        .arg(names.lease_key("leader"))
        .arg(names.fence_key("leader"))
        .arg(&once_key)
        .query_async(&mut db0)
        .await
        .unwrap();
    assert_eq!(in0, 0, "nothing written to db 0");
    cleanup(&url5, &ns).await;

    let err = RedisCoord::connect(&with_db(&url, 999), names)
        .await
        .expect_err("db 999 does not exist");
    assert!(err.to_string().contains("/999"), "{err}");
}

#[tokio::test]
async fn redis_connect_errors_name_the_url_without_its_password() {
    let err = RedisCoord::connect("redis://:hunter2@127.0.0.1:1/0", Names::default())
        .await
        .expect_err("nothing listens on port 1");
    let msg = err.to_string();
    assert!(msg.contains("127.0.0.1:1"), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");

    let err = RedisCoord::connect("not a url", Names::default())
        .await
        .expect_err("not a URL");
    assert!(err.to_string().contains("not a url"), "{err}");
}
