//! End-to-end harness (feature `cluster`): starts real `kairos` processes
//! (the binary cargo built for this test run, see [`binary`]) on either stack
//! and talks to them over HTTP.
//!
//! - [`Stack::Services`]: `kairos migrate`, `api`, N `dispatcher`s and N
//!   `worker`s on MySQL, Redis and RabbitMQ, in a fresh database and a unique
//!   namespace (so tests run in parallel).
//! - [`Stack::ServicesPg`]: the same processes on PostgreSQL instead of MySQL
//!   (a fresh database dropped with the cluster).
//! - [`Stack::Embedded`]: one `kairos dev` process on a fresh SQLite file.
//!
//! Every child is killed when the [`Cluster`] is dropped. Each child's stderr
//! goes to the terminal as before and also to `<log_dir>/<name>.log`, so a
//! test can read what a process logged ([`Cluster::log`]).
pub mod check;
mod logs;
pub mod prom;
pub mod receiver;

use crate as testkit;
use kairos_broker_rabbitmq::AmqpBroker;
use kairos_core::broker::Broker;
use logs::{strip_ansi, tee};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Which stack a cluster runs on.
/// One test per case and stack: `services::<case>` and `embedded::<case>`,
/// each calling `<case>(stack)` from the including file.
#[macro_export]
macro_rules! on_both_stacks {
    ($($case:ident),* $(,)?) => {
        mod services {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $case() {
                    super::$case($crate::cluster::Stack::Services).await;
                }
            )*
        }
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $case() {
                    super::$case($crate::cluster::Stack::Embedded).await;
                }
            )*
        }
    };
}

/// Like [`on_both_stacks`], plus the services stack on PostgreSQL
/// (`postgres::<case>`).
#[macro_export]
macro_rules! on_all_stacks {
    ($($case:ident),* $(,)?) => {
        $crate::on_both_stacks!($($case),*);
        $crate::on_server_stacks!(@postgres $($case),*);
    };
}

/// One test per case on each database server: `mariadb::<case>` (the
/// services stack on MySQL/MariaDB) and `postgres::<case>`.
#[macro_export]
macro_rules! on_server_stacks {
    (@postgres $($case:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $case() {
                    super::$case($crate::cluster::Stack::ServicesPg).await;
                }
            )*
        }
    };
    ($($case:ident),* $(,)?) => {
        mod mariadb {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $case() {
                    super::$case($crate::cluster::Stack::Services).await;
                }
            )*
        }
        $crate::on_server_stacks!(@postgres $($case),*);
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stack {
    /// MySQL + Redis + RabbitMQ, one process per role.
    Services,
    /// PostgreSQL + Redis + RabbitMQ, one process per role.
    ServicesPg,
    /// `kairos dev`: SQLite + in-process broker and lease.
    Embedded,
}

impl Stack {
    /// Whether the stack runs one process per role on the services.
    pub fn is_services(self) -> bool {
        matches!(self, Stack::Services | Stack::ServicesPg)
    }
}

/// A fresh database for one test on a services stack's server, or `None`
/// (after the skip-or-fail policy). Keep it as long as the processes use it:
/// a PostgreSQL database is dropped with it.
pub struct TestDb {
    pub url: String,
    _pg: Option<testkit::PgDatabase>,
}

impl TestDb {
    pub async fn fresh(stack: Stack) -> Option<TestDb> {
        match stack {
            Stack::ServicesPg => {
                let db = testkit::postgres_fresh_database().await?;
                Some(TestDb {
                    url: db.url().to_string(),
                    _pg: Some(db),
                })
            }
            Stack::Services | Stack::Embedded => Some(TestDb {
                url: testkit::mysql_fresh_database().await?,
                _pg: None,
            }),
        }
    }
}

/// Running processes of one test.
pub struct Cluster {
    /// Base URL of the API.
    pub base: String,
    /// Environment shared by every process of the cluster.
    pub env: HashMap<String, String>,
    children: HashMap<String, Child>,
    http: reqwest::Client,
    /// For the embedded stack: the database file.
    pub sqlite_url: Option<String>,
    /// Where each child's stderr is copied, one `<name>.log` per process name.
    pub log_dir: PathBuf,
    /// Operations endpoint (`KAIROS_METRICS_ADDR`) of each dispatcher, worker
    /// and relay process, by process name.
    metrics_addrs: HashMap<String, String>,
    /// Admin key of the `default` tenant, sent with every request.
    pub key: String,
    /// The database this cluster created (dropped after its processes).
    db: Option<TestDb>,
    /// Ids of the workers started, whose queues go when the cluster does.
    worker_ids: Vec<String>,
}

/// The `kairos` binary to start: `KAIROS_BIN` when set, else the one cargo
/// built beside the running test (`target/<profile>/kairos`; cargo builds a
/// package's binaries before its integration tests and benchmarks).
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("KAIROS_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the test's own path");
    // target/<profile>/deps/<test>-<hash>: the binary is two levels up.
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from target/<profile>/deps");
    let bin = profile_dir.join(format!("kairos{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "no kairos binary at {} (build it, or set KAIROS_BIN)",
        bin.display()
    );
    bin
}

impl Cluster {
    /// Starts a cluster, or `None` when the services are missing (after the
    /// skip-or-fail policy).
    pub async fn start(stack: Stack, dispatchers: usize, workers: usize) -> Option<Cluster> {
        Self::start_with(stack, dispatchers, workers, &[]).await
    }

    /// Like [`Cluster::start`], with extra environment for every process
    /// (e.g. shorter lease and dead-worker thresholds).
    pub async fn start_with(
        stack: Stack,
        dispatchers: usize,
        workers: usize,
        extra_env: &[(&str, &str)],
    ) -> Option<Cluster> {
        let port = testkit::free_port();
        let mut env = HashMap::new();
        env.insert("KAIROS_HTTP_ADDR".to_string(), format!("127.0.0.1:{port}"));
        // KAIROS_TEST_LOG (e.g. `warn,kairos=debug`) overrides the processes'
        // log filter and keeps their logs after a passing run too.
        let log = std::env::var("KAIROS_TEST_LOG").unwrap_or_else(|_| "warn,kairos=info".into());
        env.insert("KAIROS_LOG".to_string(), log);
        env.insert(
            "KAIROS_CALLBACK_SECRET".to_string(),
            "e2e-secret".to_string(),
        );
        env.insert(
            "KAIROS_CALLBACK_ALLOW_PRIVATE".to_string(),
            "true".to_string(),
        );
        env.insert("KAIROS_HTTP_ALLOW_PRIVATE".to_string(), "true".to_string());
        // Plain text, so tests can grep the logs.
        env.insert("NO_COLOR".to_string(), "1".to_string());
        for (k, v) in extra_env {
            env.insert(k.to_string(), v.to_string());
        }
        let log_dir = std::env::temp_dir().join(testkit::unique("kairos_logs"));
        std::fs::create_dir_all(&log_dir).expect("create the log directory");
        let mut cluster = Cluster {
            base: format!("http://127.0.0.1:{port}"),
            env,
            children: HashMap::new(),
            http: reqwest::Client::new(),
            sqlite_url: None,
            log_dir,
            metrics_addrs: HashMap::new(),
            key: String::new(),
            db: None,
            worker_ids: Vec::new(),
        };
        match stack {
            Stack::Services | Stack::ServicesPg => {
                // A caller may bring its own database URL (e.g. through a proxy).
                if !cluster.env.contains_key("KAIROS_DATABASE_URL") {
                    let db = TestDb::fresh(stack).await?;
                    cluster
                        .env
                        .insert("KAIROS_DATABASE_URL".into(), db.url.clone());
                    cluster.db = Some(db);
                }
                // Checked even when the caller brings its own (a private
                // instance, a proxy): the skip-or-fail policy still applies.
                let redis = testkit::redis_available().await?;
                let amqp = testkit::amqp_available().await?;
                cluster
                    .env
                    .entry("KAIROS_REDIS_URL".into())
                    .or_insert(redis);
                cluster.env.entry("KAIROS_AMQP_URL".into()).or_insert(amqp);
                cluster
                    .env
                    .entry("KAIROS_NAMESPACE".into())
                    .or_insert_with(|| testkit::unique("e2e"));
                let status = cluster
                    .command(&["migrate"])
                    .status()
                    .expect("run kairos migrate");
                assert!(status.success(), "kairos migrate failed");
                cluster.key = cluster.admin_key_from_cli();
                cluster.spawn("api", &["api"]);
                for i in 0..dispatchers {
                    cluster.spawn(&format!("dispatcher-{i}"), &["dispatcher"]);
                }
                for i in 0..workers {
                    cluster.spawn_worker(&format!("worker-{i}"));
                }
                cluster.spawn("relay", &["callback-relay"]);
            }
            Stack::Embedded => {
                let url = testkit::sqlite_temp_url();
                cluster
                    .env
                    .insert("KAIROS_DATABASE_URL".into(), url.clone());
                cluster.sqlite_url = Some(url);
                cluster.spawn("dev", &["dev"]);
            }
        }
        cluster.wait_ready().await;
        if let Some(url) = &cluster.sqlite_url {
            // `kairos dev` keeps its admin key beside the database.
            let path = url.trim_start_matches("sqlite://");
            let path = format!("{}.key", path.split('?').next().unwrap_or(path));
            let key = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read the dev key at {path}: {e}"));
            cluster.key = key.trim().to_string();
        }
        Some(cluster)
    }

    /// A new admin key of the `default` tenant made with `kairos keys create`.
    fn admin_key_from_cli(&self) -> String {
        let out = self
            .command(&[
                "keys", "create", "--tenant", "default", "--role", "operator",
            ])
            .output()
            .expect("run kairos keys create");
        assert!(out.status.success(), "kairos keys create failed: {out:?}");
        String::from_utf8(out.stdout)
            .expect("the key is text")
            .trim()
            .to_string()
    }

    /// `req` with the cluster's admin key.
    pub fn authorized(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req.bearer_auth(&self.key)
    }

    /// A `kairos` command with the cluster's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary());
        cmd.args(args).envs(&self.env).stdin(Stdio::null());
        cmd
    }

    /// Starts a named process.
    pub fn spawn(&mut self, name: &str, args: &[&str]) {
        self.spawn_with(name, args, &[]);
    }

    /// Starts a named process with extra environment. Dispatchers, workers
    /// and relays get their own operations endpoint on a free port.
    pub fn spawn_with(&mut self, name: &str, args: &[&str], extra_env: &[(&str, &str)]) {
        let mut cmd = self.command(args);
        let has_ops = matches!(
            args.first(),
            Some(&"dispatcher") | Some(&"worker") | Some(&"callback-relay")
        );
        if has_ops {
            let addr = format!("127.0.0.1:{}", testkit::free_port());
            cmd.env("KAIROS_METRICS_ADDR", &addr);
            self.metrics_addrs.insert(name.to_string(), addr);
        }
        if args.first() == Some(&"worker")
            && let Some((_, id)) = extra_env.iter().find(|(k, _)| *k == "KAIROS_WORKER_ID")
        {
            self.worker_ids.push(id.to_string());
        }
        cmd.envs(extra_env.iter().copied());
        self.launch(name, cmd);
    }

    /// Starts a worker whose id is the process name.
    pub fn spawn_worker(&mut self, name: &str) {
        self.spawn_worker_with(name, &[]);
    }

    /// Starts a worker whose id is the process name, with extra environment
    /// (e.g. `KAIROS_WORKER_CAPACITY`).
    pub fn spawn_worker_with(&mut self, name: &str, extra_env: &[(&str, &str)]) {
        let mut env = vec![("KAIROS_WORKER_ID", name)];
        env.extend_from_slice(extra_env);
        self.spawn_with(name, &["worker"], &env);
    }

    fn launch(&mut self, name: &str, mut cmd: Command) {
        cmd.stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        if let Some(stderr) = child.stderr.take() {
            tee(stderr, &self.log_path(name));
        }
        self.children.insert(name.to_string(), child);
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.log_dir.join(format!("{name}.log"))
    }

    /// What the named process has logged so far (every run of that name),
    /// without terminal colour codes.
    pub fn log(&self, name: &str) -> String {
        let raw = std::fs::read(self.log_path(name)).unwrap_or_default();
        strip_ansi(&String::from_utf8_lossy(&raw))
    }

    /// Base URL of a named process's operations endpoint (`/metrics`,
    /// `/healthz`, `/readyz`); the API's own port for `api` and `dev`.
    pub fn ops_url(&self, name: &str) -> String {
        match self.metrics_addrs.get(name) {
            Some(addr) => format!("http://{addr}"),
            None => self.base.clone(),
        }
    }

    /// The Prometheus text a named process serves now (empty while it does
    /// not answer).
    pub async fn metrics_text(&self, name: &str) -> String {
        let url = format!("{}/metrics", self.ops_url(name));
        match self.http.get(&url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The status of a named process's `GET /readyz` (0 while it does not answer).
    pub async fn readyz_status(&self, name: &str) -> u16 {
        let url = format!("{}/readyz", self.ops_url(name));
        match self.http.get(&url).send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// Operating-system id of a running named process.
    pub fn pid(&self, name: &str) -> u32 {
        self.children
            .get(name)
            .unwrap_or_else(|| panic!("no process {name}"))
            .id()
    }

    /// Names of the running processes whose name starts with `prefix`, sorted.
    pub fn names(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .children
            .keys()
            .filter(|n| n.starts_with(prefix))
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// The namespace of the services stack (queue, key and connection names).
    pub fn namespace(&self) -> &str {
        self.env
            .get("KAIROS_NAMESPACE")
            .map(String::as_str)
            .unwrap_or("kairos")
    }

    /// Sends a signal to a named process (`KILL`, `TERM`, `STOP`, `CONT`).
    pub fn signal(&mut self, name: &str, signal: &str) {
        let child = self
            .children
            .get(name)
            .unwrap_or_else(|| panic!("no process {name}"));
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "kill -{signal} {name} failed"
        );
    }

    /// Whether the cluster runs a process of this name.
    pub fn has(&self, name: &str) -> bool {
        self.children.contains_key(name)
    }

    /// Waits for a named process to exit and returns whether it succeeded.
    pub fn wait_exit(&mut self, name: &str) -> bool {
        let mut child = self
            .children
            .remove(name)
            .unwrap_or_else(|| panic!("no process {name}"));
        child.wait().is_ok_and(|s| s.success())
    }

    async fn wait_ready(&self) {
        let url = format!("{}/readyz", self.base);
        testkit::wait_for(
            "the API to become ready",
            Duration::from_secs(60),
            || async {
                match self.http.get(&url).send().await {
                    Ok(r) if r.status().is_success() => Some(()),
                    _ => None,
                }
            },
        )
        .await;
    }

    /// Waits until at least `n` workers report `online`.
    pub async fn wait_workers(&self, n: usize) {
        testkit::wait_for("workers to register", Duration::from_secs(60), || async {
            let body = self.get("/openapi/workers").await;
            let online = body["items"]
                .as_array()?
                .iter()
                .filter(|w| w["state"] == "online")
                .count();
            (online >= n).then_some(())
        })
        .await;
    }

    /// GET returning JSON (any status).
    pub async fn get(&self, path: &str) -> Value {
        self.get_status(path).await.1
    }

    /// GET returning the status code and JSON (`Null` if the body is not JSON).
    pub async fn get_status(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    /// GET returning JSON, or `None` while the server is unreachable.
    pub async fn try_get(&self, path: &str) -> Option<Value> {
        let r = self
            .authorized(self.http.get(format!("{}{path}", self.base)))
            .send()
            .await
            .ok()?;
        r.json().await.ok()
    }

    /// Sends `method` to `path` with an optional JSON body; returns status
    /// and JSON (`Null` if the body is not JSON).
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut req = self.authorized(
            self.http
                .request(method.clone(), format!("{}{path}", self.base)),
        );
        if let Some(body) = body {
            req = req.json(body);
        }
        let r = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// POST JSON, returning status and JSON.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }

    /// PATCH JSON, returning status and JSON.
    pub async fn patch(&self, path: &str, body: &Value) -> (u16, Value) {
        self.send(reqwest::Method::PATCH, path, Some(body)).await
    }

    /// DELETE, returning status and JSON.
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    /// Creates a job and returns its id.
    pub async fn create_job(&self, body: Value) -> String {
        let (status, resp) = self.post("/openapi/jobs", &body).await;
        assert_eq!(status, 201, "create failed: {resp}");
        resp["jobId"].as_str().expect("jobId").to_string()
    }

    /// Creates a one-shot job running `handler` with `params`.
    pub async fn create_one_shot(&self, name: &str, handler: &str, params: Value) -> String {
        self.create_job(json!({"jobName": name, "jobHandler": handler, "params": params}))
            .await
    }

    /// All executions of a job (first page of up to 500).
    pub async fn executions(&self, job_id: &str) -> Vec<Value> {
        let body = self
            .get(&format!("/openapi/jobs/{job_id}/executions?limit=500"))
            .await;
        body["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until every job in `ids` has one of `statuses`.
    pub async fn wait_jobs(&self, ids: &[String], statuses: &[&str], deadline: Duration) {
        let start = std::time::Instant::now();
        let mut pending: Vec<String> = ids.to_vec();
        while !pending.is_empty() {
            let mut still = Vec::new();
            for id in pending {
                let job = self.get(&format!("/openapi/jobs/{id}")).await;
                if !statuses.iter().any(|s| job["status"] == *s) {
                    still.push(id);
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            assert!(
                start.elapsed() < deadline,
                "{} of {} jobs did not reach {statuses:?} within {deadline:?}; first: {}",
                pending.len(),
                ids.len(),
                self.get(&format!("/openapi/jobs/{}", pending[0])).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops every process: SIGTERM, then SIGKILL after a grace period.
    pub fn stop_all(&mut self) {
        for child in self.children.values() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        for (_, mut child) in self.children.drain() {
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Cluster {
    /// Deletes the stack's queues and exchanges: they are durable, and every
    /// test run would otherwise leave its namespace's behind in the shared
    /// RabbitMQ. Bounded, since a test's end must not hang on a broker that
    /// went away.
    fn delete_broker_topology(&self) {
        let (Some(url), Some(ns)) = (
            self.env.get("KAIROS_AMQP_URL").cloned(),
            self.env.get("KAIROS_NAMESPACE").cloned(),
        ) else {
            return;
        };
        let workers = self.worker_ids.clone();
        testkit::cleanup_blocking(Duration::from_secs(5), move || async move {
            let names = kairos_core::protocol::Names::new(ns);
            let Ok(broker) = AmqpBroker::connect(&url, names).await else {
                return;
            };
            for id in &workers {
                let _ = broker.worker_queue_delete(id).await;
            }
            let _ = broker.topology_delete().await;
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, mut child) in self.children.drain() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.delete_broker_topology();
        if std::thread::panicking() || std::env::var_os("KAIROS_TEST_LOG").is_some() {
            eprintln!("process logs kept in {}", self.log_dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.log_dir);
        }
    }
}
