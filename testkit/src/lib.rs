//! Test support for suites that run against the real services: a fresh MySQL
//! database per test (feature `mysql`), a fresh PostgreSQL database per test
//! (feature `postgres`), unique namespaces for RabbitMQ/Redis names, one
//! policy for a missing service, the one way tests wait ([`wait_for`]), a TCP
//! [`proxy`] a test can cut, and the end-to-end harness that runs `kairos`
//! processes (`cluster`, behind the feature of that name). A dev-dependency only.
//!
//! The policy: with `KAIROS_REQUIRE_SERVICES=1` (set by `.ci/run`) a missing
//! service fails the test; otherwise the test prints a notice and returns, so
//! the suite passes on a fresh machine with no services installed.
//!
//! Service URLs come from `KAIROS_TEST_MYSQL_URL`, `KAIROS_TEST_REDIS_URL` and
//! `KAIROS_TEST_AMQP_URL`, defaulting to the loopback services.
//! PostgreSQL has no default: its tests need `KAIROS_TEST_PG_URL` (`.ci/run`
//! sets it); unset, it counts as a missing service.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[cfg(feature = "cluster")]
pub mod cluster;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "mysql")]
pub use mysql::mysql_fresh_database;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::{PgDatabase, postgres_fresh_database};
pub mod proxy;

/// `url` naming database `db` instead of its own (query string kept).
#[cfg(any(feature = "mysql", feature = "postgres"))]
pub(crate) fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let authority_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let path_start = base[authority_end..]
        .find('/')
        .map(|i| i + authority_end)
        .unwrap_or(base.len());
    let mut out = format!("{}/{db}", &base[..path_start]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

fn env_or(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// Base MySQL URL (a server, any database).
pub fn mysql_url() -> String {
    env_or("KAIROS_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
}

/// Base PostgreSQL URL (a server, any database), if one is configured.
pub fn postgres_url() -> Option<String> {
    std::env::var("KAIROS_TEST_PG_URL")
        .ok()
        .filter(|v| !v.is_empty())
}

/// Redis URL.
pub fn redis_url() -> String {
    env_or("KAIROS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
}

/// AMQP URL.
pub fn amqp_url() -> String {
    env_or(
        "KAIROS_TEST_AMQP_URL",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    )
}

/// Whether a missing service must fail the test.
pub fn services_required() -> bool {
    std::env::var("KAIROS_REQUIRE_SERVICES").is_ok_and(|v| v == "1" || v == "true")
}

/// Applies the policy to an unreachable service: panics when services are
/// required, else prints a notice. Always returns `None` for `?`-style use.
pub fn service_missing<T>(service: &str, url: &str, why: &str) -> Option<T> {
    if services_required() {
        panic!(
            "{service} is required (KAIROS_REQUIRE_SERVICES=1) but not reachable at {url}: {why}"
        );
    }
    // Written to the stderr handle, not with eprintln!: the test harness
    // captures the print macros of passing tests, and this notice must show.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {service} not reachable at {url} ({why}); set KAIROS_REQUIRE_SERVICES=1 to fail instead"
    );
    None
}

/// A free port not handed out before in this test process: the kernel may
/// give a just-released port again, and two processes on one port means
/// one of them cannot start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("no free local port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A name unique to this process and call, safe for queues, keys and databases:
/// `<prefix>_<unix secs>_<pid>_<counter>`.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{secs}_{}_{n}", std::process::id())
}

/// The Redis URL if Redis answers, else `None` (after the policy).
pub async fn redis_available() -> Option<String> {
    let url = redis_url();
    let ping = async {
        let client = redis::Client::open(url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await
    };
    match tokio::time::timeout(Duration::from_secs(5), ping).await {
        Ok(Ok(_)) => Some(url),
        Ok(Err(e)) => service_missing("Redis", &url, &e.to_string()),
        Err(_) => service_missing("Redis", &url, "connect timed out"),
    }
}

/// The AMQP URL if RabbitMQ accepts a connection, else `None` (after the policy).
pub async fn amqp_available() -> Option<String> {
    let url = amqp_url();
    let connect = lapin::Connection::connect(&url, lapin::ConnectionProperties::default());
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(conn)) => {
            let _ = conn.close(200, "probe done".into()).await;
            Some(url)
        }
        Ok(Err(e)) => service_missing("RabbitMQ", &url, &e.to_string()),
        Err(_) => service_missing("RabbitMQ", &url, "connect timed out"),
    }
}

/// A `sqlite://` URL of a new file in the temp directory.
pub fn sqlite_temp_url() -> String {
    let path = std::env::temp_dir().join(format!("{}.db", unique("kairos_test")));
    format!("sqlite://{}?mode=rwc", path.display())
}

/// Polls `check` until it returns `Some`, or panics after `deadline` naming
/// `what`: the one way tests wait on a condition, never on fixed sleeps.
/// Polls every 20 ms at first, then less often (at most every 250 ms), so a
/// long wait on a check that costs many requests does not flood the system
/// under test.
pub async fn wait_for<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    const FIRST: Duration = Duration::from_millis(20);
    const MAX: Duration = Duration::from_millis(250);
    let start = tokio::time::Instant::now();
    let mut pause = FIRST;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if start.elapsed() > deadline {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(MAX);
    }
}

/// Runs the async `cleanup` to its end, or for at most `limit`, on a thread
/// and runtime of its own: for a `Drop` that must delete what a test made on
/// a service (it cannot await, may run inside a runtime, and may run while a
/// test panics). Best effort: a failure or timeout is ignored.
pub fn cleanup_blocking<F>(limit: Duration, cleanup: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()>,
{
    let _ = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            let _ = tokio::time::timeout(limit, cleanup()).await;
        });
    })
    .join();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(any(feature = "mysql", feature = "postgres"))]
    #[test]
    fn database_is_replaced_in_urls() {
        assert_eq!(
            with_database("mysql://root@h:3306/test", "x"),
            "mysql://root@h:3306/x"
        );
        assert_eq!(
            with_database("mysql://root@h:3306", "x"),
            "mysql://root@h:3306/x"
        );
        assert_eq!(
            with_database("mysql://u:p@h/test?ssl-mode=disabled", "x"),
            "mysql://u:p@h/x?ssl-mode=disabled"
        );
    }

    #[test]
    fn unique_names_differ() {
        assert_ne!(unique("a"), unique("a"));
    }
}
