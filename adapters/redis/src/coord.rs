//! Redis coordination: the dispatcher's leader lease (`SET NX PX` plus a
//! fencing counter, renewed and released only by compare-and-set in Lua), the
//! worker's once-per-attempt guard (value `<token> <owner>`, released only by
//! its owner, in Lua) and the stop board (plain keys with a TTL), over one
//! auto-reconnecting connection.
//!
//! # Failures
//!
//! [`ConnectionManager`] reconnects in the background when it finds its
//! connection dropped, but fails the command that found it. So:
//!
//! - renew, release, reads and `PING` change nothing when repeated, and are
//!   retried once after a dropped connection;
//! - acquire and `once` are set-if-absent, so a failed one is ambiguous: it may
//!   have landed with its reply lost. Each writes a fresh random token and, on a
//!   transport error, reads the key back: our token means it landed, another
//!   value means someone else holds it, no value means it did not land and is
//!   tried once more. Only when that still leaves it unknown is the error
//!   returned.
//!
//! After the server kills the connection (`CLIENT KILL`, a restart), the next
//! operation therefore normally succeeds on the new connection; it fails only
//! if the reconnect itself fails, and later ones succeed once Redis is back.

use async_trait::async_trait;
use kairos_core::coord::{
    CoordError, CoordResult, Lease, LeaseStore, Membership, OnceGuard, StopBoard,
};
use kairos_core::protocol::Names;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, AsyncConnectionConfig, RedisError, RedisResult, Script};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// Bound on `connect`: a config error must surface as an error, not a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Per command. Above the driver's 500 ms default so a busy 2-core box does
/// not fail healthy commands; well below any sensible lease TTL.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// `is_healthy` answers `/readyz`, which must answer quickly.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);
/// Cap on the manager's backoff between reconnect attempts, so service
/// resumes within about a second of Redis coming back.
const RECONNECT_MAX_DELAY: Duration = Duration::from_secs(1);
/// Tries of a set-if-absent write whose first try provably did not land.
const WRITE_TRIES: u32 = 2;

/// Takes the lease if free and bumps its fence, atomically. Returns the new
/// fence, or 0 when the lease is held (fences start at 1).
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return 0",
    )
});

/// Raises the fence counter to at least ARGV[1]; never lowers it.
static RAISE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
    redis.call('SET', KEYS[1], ARGV[1])
end
return 0",
    )
});

/// Extends the lease only if this token holds it.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0",
    )
});

/// Deletes the lease only if this token holds it.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0",
    )
});

/// Deletes a once-key only if `owner` holds it. The value is `<token> <owner>`
/// and tokens have no spaces, so the owner is everything after the first one.
static RELEASE_ONCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local v = redis.call('GET', KEYS[1])
if v then
    local at = string.find(v, ' ', 1, true)
    if at and string.sub(v, at + 1) == ARGV[1] then
        return redis.call('DEL', KEYS[1])
    end
end
return 0",
    )
});

/// Announces ARGV[1] in the member set KEYS[1] until the server's clock
/// passes ARGV[2] ms from now, dropping expired members on the way. The
/// server's clock alone decides expiry, so members' clocks may drift.
static ANNOUNCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 10)
return 0",
    )
});

/// The members of KEYS[1] whose announcement has not expired.
static MEMBERS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')",
    )
});

/// Leases and once-guards in Redis. Clones share one connection.
#[derive(Clone)]
pub struct RedisCoord {
    conn: ConnectionManager,
    names: Names,
    /// The URL with any password masked, for error messages.
    shown_url: Arc<str>,
}

impl fmt::Debug for RedisCoord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not derived: the client's own Debug would print the password.
        f.debug_struct("RedisCoord")
            .field("url", &self.shown_url)
            .field("names", &self.names)
            .finish()
    }
}

/// Who holds a set-if-absent key, read back after an ambiguous write.
enum Owner {
    Us,
    Other,
    Nobody,
}

impl RedisCoord {
    /// Connects to `url` (`redis://[:password@]host[:port][/db]`; the db number
    /// is honoured, also on reconnect). Lease keys come from `names`. Fails
    /// with [`CoordError::Unavailable`] naming the URL, password masked, when
    /// Redis does not answer within a few seconds.
    pub async fn connect(url: &str, names: Names) -> CoordResult<Self> {
        let shown_url: Arc<str> = kairos_core::redact::redact_url(url).into();
        let fail = |why: String| CoordError::Unavailable(format!("Redis at {shown_url}: {why}"));
        let client = redis::Client::open(url).map_err(|e| fail(e.to_string()))?;
        let connect = async {
            // One plain connection first: the manager retries a refused
            // connect for seconds and the timeout below would hide why.
            let probe = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(CONNECT_TIMEOUT))
                .set_response_timeout(Some(RESPONSE_TIMEOUT));
            let mut c = client
                .get_multiplexed_async_connection_with_config(&probe)
                .await?;
            redis::cmd("PING").query_async::<()>(&mut c).await?;
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(CONNECT_TIMEOUT))
                .set_response_timeout(Some(RESPONSE_TIMEOUT))
                .set_max_delay(RECONNECT_MAX_DELAY);
            ConnectionManager::new_with_config(client.clone(), config).await
        };
        let conn = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(fail(e.to_string())),
            Err(_) => return Err(fail(format!("no answer within {CONNECT_TIMEOUT:?}"))),
        };
        Ok(Self {
            conn,
            names,
            shown_url,
        })
    }

    /// The names lease keys are built from.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The managed connection, for other Redis commands (and for tests that
    /// need its `CLIENT ID`).
    pub fn connection(&self) -> ConnectionManager {
        self.conn.clone()
    }

    fn error(&self, e: RedisError) -> CoordError {
        CoordError::Unavailable(format!("Redis at {}: {e}", self.shown_url))
    }

    /// Runs a command that may safely run twice, again once if the first try
    /// found the connection dropped (the manager is reconnecting by then).
    async fn idempotent<T, F, Fut>(&self, op: F) -> RedisResult<T>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        match op(self.conn.clone()).await {
            Err(e) if e.is_unrecoverable_error() => {
                tracing::warn!(url = %self.shown_url, error = %e, "Redis connection lost; retrying on a new one");
                op(self.conn.clone()).await
            }
            done => done,
        }
    }

    fn log_ambiguous(&self, key: &str, e: &RedisError) {
        tracing::warn!(url = %self.shown_url, key, error = %e, "Redis write may have landed; reading it back");
    }

    async fn get(&self, key: &str) -> CoordResult<Option<String>> {
        self.idempotent(|mut c| async move { c.get::<_, Option<String>>(key).await })
            .await
            .map_err(|e| self.error(e))
    }

    async fn owner(&self, key: &str, token: &str) -> CoordResult<Owner> {
        Ok(match self.get(key).await? {
            Some(v) if v == token => Owner::Us,
            Some(_) => Owner::Other,
            None => Owner::Nobody,
        })
    }
}

/// An error after which the command may or may not have run.
fn is_ambiguous(e: &RedisError) -> bool {
    e.is_io_error() || e.is_unrecoverable_error()
}

fn ttl_ms(ttl: Duration) -> u64 {
    // Redis refuses PX 0; a zero TTL means "expire at once" anyway.
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

fn new_token() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[async_trait]
impl LeaseStore for RedisCoord {
    async fn lease_try_acquire(&self, name: &str, ttl: Duration) -> CoordResult<Option<Lease>> {
        let key = self.names.lease_key(name);
        let fence_key = self.names.fence_key(name);
        let token = new_token();
        let lease = |fence: u64| Lease {
            name: name.to_string(),
            token: token.clone(),
            fence,
            ttl,
        };
        let mut tries = 0;
        loop {
            tries += 1;
            let reply: RedisResult<u64> = ACQUIRE
                .key(&key)
                .key(&fence_key)
                .arg(&token)
                .arg(ttl_ms(ttl))
                .invoke_async(&mut self.conn.clone())
                .await;
            let e = match reply {
                Ok(0) => return Ok(None),
                Ok(fence) => return Ok(Some(lease(fence))),
                Err(e) if is_ambiguous(&e) => e,
                Err(e) => return Err(self.error(e)),
            };
            self.log_ambiguous(&key, &e);
            match self.owner(&key, &token).await? {
                Owner::Us => {
                    // The script bumped the fence with the SET, and nobody
                    // else can bump it while we hold the key.
                    let fence = self.get(&fence_key).await?;
                    return match fence.and_then(|f| f.parse::<u64>().ok()) {
                        Some(fence) => Ok(Some(lease(fence))),
                        None => Err(self.error(e)),
                    };
                }
                Owner::Other => return Ok(None),
                Owner::Nobody if tries < WRITE_TRIES => continue,
                Owner::Nobody => return Err(self.error(e)),
            }
        }
    }

    async fn lease_renew(&self, lease: &Lease) -> CoordResult<bool> {
        let key = self.names.lease_key(&lease.name);
        let ms = ttl_ms(lease.ttl);
        let renewed: u64 = self
            .idempotent(|mut c| {
                let mut call = RENEW.key(&key);
                call.arg(&lease.token).arg(ms);
                async move { call.invoke_async(&mut c).await }
            })
            .await
            .map_err(|e| self.error(e))?;
        Ok(renewed == 1)
    }

    async fn lease_release(&self, lease: &Lease) -> CoordResult<()> {
        let key = self.names.lease_key(&lease.name);
        self.idempotent(|mut c| {
            let mut call = RELEASE.key(&key);
            call.arg(&lease.token);
            async move { call.invoke_async::<u64>(&mut c).await }
        })
        .await
        .map_err(|e| self.error(e))?;
        Ok(())
    }

    async fn lease_raise_fence(&self, name: &str, seen: u64) -> CoordResult<()> {
        let fence_key = self.names.fence_key(name);
        self.idempotent(|mut c| {
            let mut call = RAISE.key(&fence_key);
            call.arg(seen);
            async move { call.invoke_async::<u64>(&mut c).await }
        })
        .await
        .map_err(|e| self.error(e))?;
        Ok(())
    }
}

#[async_trait]
impl OnceGuard for RedisCoord {
    /// `key` is used as given; callers build it with [`Names::attempt_key`].
    ///
    /// When the outcome stays unknown this returns `Err`, and the worker then
    /// neither runs the handler nor settles the message, which comes back
    /// later: `true` on a guess could run the attempt twice, `false` would
    /// drop it for good.
    async fn once(&self, key: &str, owner: &str, ttl: Duration) -> CoordResult<bool> {
        // The token tells this call's write from an earlier one by the same
        // owner when a reply is lost.
        let value = format!("{} {owner}", new_token());
        let mut tries = 0;
        loop {
            tries += 1;
            let reply: RedisResult<Option<String>> = redis::cmd("SET")
                .arg(key)
                .arg(&value)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms(ttl))
                .query_async(&mut self.conn.clone())
                .await;
            let e = match reply {
                Ok(set) => return Ok(set.is_some()),
                Err(e) if is_ambiguous(&e) => e,
                Err(e) => return Err(self.error(e)),
            };
            self.log_ambiguous(key, &e);
            match self.owner(key, &value).await? {
                Owner::Us => return Ok(true),
                Owner::Other => return Ok(false),
                Owner::Nobody if tries < WRITE_TRIES => continue,
                Owner::Nobody => return Err(self.error(e)),
            }
        }
    }

    async fn release(&self, key: &str, owner: &str) -> CoordResult<bool> {
        let deleted: u64 = self
            .idempotent(|mut c| {
                let mut call = RELEASE_ONCE.key(key);
                call.arg(owner);
                async move { call.invoke_async(&mut c).await }
            })
            .await
            .map_err(|e| self.error(e))?;
        Ok(deleted == 1)
    }

    async fn holder(&self, key: &str) -> CoordResult<Option<String>> {
        // The value is `<token> <owner>`, as `RELEASE_ONCE` reads it.
        Ok(self
            .get(key)
            .await?
            .and_then(|v| v.split_once(' ').map(|(_, owner)| owner.to_string())))
    }

    async fn is_healthy(&self) -> bool {
        let ping = self
            .idempotent(|mut c| async move { redis::cmd("PING").query_async::<()>(&mut c).await });
        matches!(tokio::time::timeout(HEALTH_TIMEOUT, ping).await, Ok(Ok(())))
    }
}

/// The member set of `group`: a sorted set scored by expiry (server ms).
fn members_key(names: &Names, group: &str) -> String {
    names.lease_key(&format!("{group}:members"))
}

#[async_trait]
impl Membership for RedisCoord {
    async fn member_announce(&self, group: &str, member: &str, ttl: Duration) -> CoordResult<()> {
        let key = members_key(&self.names, group);
        let ms = ttl_ms(ttl);
        self.idempotent(|mut c| {
            let mut call = ANNOUNCE.key(&key);
            call.arg(member).arg(ms);
            async move { call.invoke_async::<u64>(&mut c).await }
        })
        .await
        .map_err(|e| self.error(e))?;
        Ok(())
    }

    async fn members(&self, group: &str) -> CoordResult<Vec<String>> {
        let key = members_key(&self.names, group);
        let mut found: Vec<String> = self
            .idempotent(|mut c| {
                let call = MEMBERS.key(&key);
                async move { call.invoke_async(&mut c).await }
            })
            .await
            .map_err(|e| self.error(e))?;
        found.sort();
        Ok(found)
    }

    async fn member_leave(&self, group: &str, member: &str) -> CoordResult<()> {
        let key = members_key(&self.names, group);
        self.idempotent(|mut c| {
            let key = key.clone();
            async move { c.zrem::<_, _, u64>(key, member).await }
        })
        .await
        .map_err(|e| self.error(e))?;
        Ok(())
    }
}

#[async_trait]
impl StopBoard for RedisCoord {
    async fn stops_post(&self, keys: &[String], ttl: Duration) -> CoordResult<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let ms = ttl_ms(ttl);
        self.idempotent(|mut c| {
            let mut pipe = redis::pipe();
            for key in keys {
                pipe.cmd("SET").arg(key).arg(1).arg("PX").arg(ms).ignore();
            }
            async move { pipe.query_async::<()>(&mut c).await }
        })
        .await
        .map_err(|e| self.error(e))
    }

    async fn stops_posted(&self, keys: &[String]) -> CoordResult<Vec<bool>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<Option<String>> = self
            .idempotent(
                |mut c| async move { redis::cmd("MGET").arg(keys).query_async(&mut c).await },
            )
            .await
            .map_err(|e| self.error(e))?;
        Ok(found.iter().map(Option::is_some).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn redis_members_expire_by_the_servers_clock() {
        let Some(url) = kairos_testkit::redis_available().await else {
            return;
        };
        let names = Names::new(kairos_testkit::unique("members"));
        let c = RedisCoord::connect(&url, names).await.unwrap();
        c.member_announce("g", "b", Duration::from_millis(300))
            .await
            .unwrap();
        c.member_announce("g", "a", Duration::from_secs(60))
            .await
            .unwrap();
        assert!(c.members("g").await.unwrap().contains(&"a".to_string()));
        kairos_testkit::wait_for("b to expire", Duration::from_secs(10), || async {
            (c.members("g").await.unwrap() == ["a"]).then_some(())
        })
        .await;
        c.member_leave("g", "a").await.unwrap();
        assert!(c.members("g").await.unwrap().is_empty());
    }
}
