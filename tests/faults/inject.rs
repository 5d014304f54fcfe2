//! Fault injection against the shared services, aimed at one test's processes
//! only: RabbitMQ connections named after the test's namespace, Redis clients
//! whose sockets belong to the test's process ids, MariaDB connections to the
//! test's own database. The services themselves are never stopped.

use kairos_testkit as testkit;
use std::collections::HashSet;
use std::process::Command;

/// Closes every RabbitMQ connection named `namespace` (the AMQP adapter names
/// its connection after the namespace) and returns how many it closed.
pub fn rabbitmq_close_connections(namespace: &str) -> usize {
    // The table form: `<pid>\t[…{"connection_name","<namespace>"}…]`, one
    // connection a line; `close_connection` wants that Erlang pid as printed.
    let out = Command::new("rabbitmqctl")
        .args([
            "-q",
            "list_connections",
            "pid",
            "client_properties",
            "--no-table-headers",
        ])
        .output()
        .expect("run rabbitmqctl list_connections");
    assert!(
        out.status.success(),
        "rabbitmqctl list_connections failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let named = format!("{{\"connection_name\",\"{namespace}\"}}");
    let ours: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&named))
        .filter_map(|l| l.split('\t').next().map(str::to_string))
        .collect();
    // One rabbitmqctl per connection, run side by side: each takes about a
    // second to start, and the faults should land at about the same time.
    let closing: Vec<_> = ours
        .iter()
        .map(|pid| {
            Command::new("rabbitmqctl")
                .args(["-q", "close_connection", pid, "kairos fault injection"])
                .spawn()
                .expect("run rabbitmqctl close_connection")
        })
        .collect();
    for mut c in closing {
        let status = c.wait().expect("wait for rabbitmqctl");
        assert!(status.success(), "rabbitmqctl close_connection failed");
    }
    ours.len()
}

/// Local TCP ports of the sockets that the processes `pids` hold open to a
/// server port, read from `/proc`.
fn local_ports_to(pids: &[u32], server_port: u16) -> HashSet<u16> {
    let mut inodes = HashSet::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let target = target.to_string_lossy();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|t| t.strip_suffix(']'))
            {
                inodes.insert(inode.to_string());
            }
        }
    }
    let mut ports = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || !inodes.contains(cols[9]) {
                continue;
            }
            let port = |addr: &str| {
                addr.rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
            };
            if port(cols[2]) == Some(server_port)
                && let Some(local) = port(cols[1])
            {
                ports.insert(local);
            }
        }
    }
    ports
}

/// Kills (`CLIENT KILL ID`) every Redis client connection held by the
/// processes `pids`; returns how many.
pub async fn redis_kill_clients(pids: &[u32]) -> usize {
    let url = testkit::redis_url();
    let server_port = reqwest::Url::parse(&url)
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(6379);
    let ports = local_ports_to(pids, server_port);
    let client = redis::Client::open(url.as_str()).expect("Redis URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect to Redis");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .expect("CLIENT LIST");
    let mut killed = 0;
    for line in list.lines() {
        let field = |key: &str| {
            line.split(' ')
                .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        };
        let port = field("addr")
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse::<u16>().ok());
        let (Some(id), Some(port)) = (field("id"), port) else {
            continue;
        };
        if ports.contains(&port) {
            let n: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut conn)
                .await
                .expect("CLIENT KILL");
            killed += usize::try_from(n).unwrap_or(0);
        }
    }
    killed
}

/// Kills every connection using `db_url`'s database, on MariaDB or
/// PostgreSQL; returns how many.
pub async fn database_kill_connections(db_url: &str) -> usize {
    if db_url.starts_with("postgres") {
        postgres_kill_connections(db_url).await
    } else {
        mysql_kill_connections(db_url).await
    }
}

/// Terminates every PostgreSQL backend connected to `db_url`'s database
/// (from a connection of the server's base URL); returns how many.
async fn postgres_kill_connections(db_url: &str) -> usize {
    use sqlx::Connection;
    let db = reqwest::Url::parse(db_url)
        .expect("database URL")
        .path()
        .trim_start_matches('/')
        .to_string();
    let base = testkit::postgres_url().expect("KAIROS_TEST_PG_URL");
    let mut conn = sqlx::PgConnection::connect(&base)
        .await
        .expect("connect to PostgreSQL");
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&db)
    .fetch_all(&mut conn)
    .await
    .expect("terminate the database's connections");
    ended.into_iter().filter(|e| *e).count()
}

/// Kills every MariaDB connection using `db_url`'s database (not the one
/// this function opens: it uses the server's base URL); returns how many.
async fn mysql_kill_connections(db_url: &str) -> usize {
    use sqlx::Connection;
    let db = reqwest::Url::parse(db_url)
        .expect("database URL")
        .path()
        .trim_start_matches('/')
        .to_string();
    let mut conn = sqlx::MySqlConnection::connect(&testkit::mysql_url())
        .await
        .expect("connect to MySQL");
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM information_schema.processlist WHERE db = ?")
            .bind(&db)
            .fetch_all(&mut conn)
            .await
            .expect("read the process list");
    let mut killed = 0;
    for id in ids {
        // A connection may have closed on its own since the listing.
        if sqlx::raw_sql(sqlx::AssertSqlSafe(format!("KILL {id}")))
            .execute(&mut conn)
            .await
            .is_ok()
        {
            killed += 1;
        }
    }
    killed
}
