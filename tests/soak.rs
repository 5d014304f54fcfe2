//! The chaos soak: a few thousand jobs of mixed kinds (noop, sleep, fail,
//! all with callbacks) on the services stack — three workers, two
//! dispatchers, the API and a relay — while a seeded schedule of faults
//! runs: workers SIGKILLed and restarted under the same id or a new one,
//! dispatchers killed, the leader frozen past its lease, relay and API
//! killed, Redis restarted, RabbitMQ and MariaDB cut. Beside the jobs,
//! under the same faults, it creates workflows (a 1 → 3 → 1 DAG, some with
//! a failing middle node, handled by an `onFailure` branch or not), runs
//! some again by hand, and lets one cron workflow fire a bounded set of
//! times (`soak/workflows.rs`).
//!
//! Then: every job was created exactly once (creates are retried with the
//! same `clientRequestId`), every job and execution is terminal in the
//! state its kind implies, one execution per trigger, and one accepted
//! callback (one delivery id) per terminal execution. Every workflow was
//! created once, has the runs its triggers account for, and every run
//! ended in the state its shape implies with each node executed once (one
//! execution per node of a run, none outside a run), its fan-in node
//! dispatched with all its parents' outputs.
//!
//! The `sleep` handler runs under a limit of 10: no more may run at once,
//! leaving out attempts that started after their dispatch was handed back
//! (docs/api.md's window; how many ran beside is printed).
//!
//! Gated, since it takes minutes and owns its services: it runs only with
//! `KAIROS_SOAK=1` (`.ci/run` runs it in two steps after the main suite:
//! one leader dispatching, then `KAIROS_SOAK_PARTITIONED=1`, both
//! dispatchers claiming their partitions).
//! `KAIROS_SOAK_JOBS` (default 2000) sets the size,
//! `KAIROS_SOAK_WORKFLOWS` (default 24, plus the cron one) the number of
//! workflows, `KAIROS_SOAK_SEED`
//! replays a run (the seed is printed first). Redis is a private
//! `redis-server` the soak really restarts; RabbitMQ and MariaDB are the
//! shared ones behind switchable proxies (a cut is, to the clients, a
//! restart), so tests running beside it are not disturbed.

// Beside the soak, not a test target of its own.
#[path = "soak/workflows.rs"]
mod workflows;

use kairos_testkit::cluster as support;

use kairos_testkit::cluster::check;
#[allow(dead_code)]
use kairos_testkit::proxy;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use kairos_testkit as testkit;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{Cluster, Stack};

/// A small seeded generator (SplitMix64): the same seed, the same run.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

/// The kinds of job the soak creates, and what each must end as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Noop,
    Sleep,
    Fail,
}

impl Kind {
    fn job_status(self) -> &'static str {
        match self {
            Kind::Noop | Kind::Sleep => "succeeded",
            Kind::Fail => "failed",
        }
    }

    /// Execution states it may end in: a failing job's last attempt may
    /// also be one lost with its worker.
    fn execution_statuses(self) -> &'static [&'static str] {
        match self {
            Kind::Noop | Kind::Sleep => &["succeeded"],
            Kind::Fail => &["failed", "lost"],
        }
    }
}

/// Callback deliveries seen: execution id → delivery ids (a retried
/// delivery repeats its id; the receiver deduplicates on it).
#[derive(Clone, Default)]
struct Receiver {
    deliveries: Arc<Mutex<HashMap<String, HashSet<String>>>>,
}

async fn receive(
    State(rx): State<Receiver>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let delivery = headers
        .get("kairos-delivery-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let execution = body["executionId"].as_str().unwrap_or_default().to_string();
    rx.deliveries
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(execution)
        .or_default()
        .insert(delivery);
    StatusCode::OK
}

/// A private Redis the soak may really restart (its data is lost then, as
/// with the shipped non-persistent configuration).
struct PrivateRedis {
    port: u16,
    child: Option<Child>,
}

impl PrivateRedis {
    fn start() -> Option<PrivateRedis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .ok()?
            .port();
        let mut r = PrivateRedis { port, child: None };
        r.launch().then_some(r)
    }

    fn launch(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match child {
            Ok(c) => {
                self.child = Some(c);
                true
            }
            Err(_) => false,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    async fn restart(&mut self, down_for: Duration) {
        self.kill();
        tokio::time::sleep(down_for).await;
        assert!(self.launch(), "restart the private redis-server");
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// `url` with its port replaced by `port`.
fn with_port(url: &str, port: u16) -> String {
    let mut u = reqwest::Url::parse(url).expect("service URL");
    u.set_port(Some(port)).expect("set the port");
    u.to_string()
}

fn target_of(url: &str, default_port: u16) -> String {
    let u = reqwest::Url::parse(url).expect("service URL");
    format!(
        "{}:{}",
        u.host_str().unwrap_or("127.0.0.1"),
        u.port().unwrap_or(default_port)
    )
}

/// Creates one job, retrying with the same `clientRequestId` until the API
/// answers with its id (the API may be down, or its database cut).
async fn create(http: &reqwest::Client, cluster_base: &str, body: &Value) -> String {
    let reply = post_until_created(http, &format!("{cluster_base}/openapi/jobs"), body).await;
    reply["jobId"].as_str().expect("jobId").to_string()
}

/// POSTs `body` to `url` until it is answered 200 or 201 (the API may be
/// down or its database cut; the body's `clientRequestId` makes the retries
/// one create); the answer. Any other 4xx than 429 fails the soak.
async fn post_until_created(http: &reqwest::Client, url: &str, body: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let sent = http
            .post(url)
            .json(body)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        if let Ok(r) = sent {
            let status = r.status().as_u16();
            let reply: Value = r.json().await.unwrap_or(Value::Null);
            if status == 200 || status == 201 {
                return reply;
            }
            assert!(
                status >= 500 || status == 429,
                "POST {url} refused with {status}: {reply} for {body}"
            );
        }
        assert!(Instant::now() < deadline, "could not create {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every fault the soak injects.
#[derive(Debug, Clone, Copy)]
enum Fault {
    WorkerSameId,
    WorkerNewId,
    Dispatcher,
    FreezeLeader,
    Relay,
    Api,
    Redis,
    RabbitMq,
    MariaDb,
}

const FAULTS: [Fault; 9] = [
    Fault::WorkerSameId,
    Fault::WorkerNewId,
    Fault::Dispatcher,
    Fault::FreezeLeader,
    Fault::Relay,
    Fault::Api,
    Fault::Redis,
    Fault::RabbitMq,
    Fault::MariaDb,
];

/// What the chaos task touches.
struct Chaos {
    cluster: Arc<tokio::sync::Mutex<Cluster>>,
    redis: PrivateRedis,
    amqp: proxy::Proxy,
    db: proxy::Proxy,
    workers: Vec<String>,
    next_worker: usize,
    rng: Rng,
}

const LEASE_MS: u64 = 4000;

impl Chaos {
    async fn inject(&mut self, fault: Fault) {
        let pause = Duration::from_millis(self.rng.range(0, 1500));
        match fault {
            Fault::WorkerSameId => {
                let i = self.rng.range(0, self.workers.len() as u64) as usize;
                let name = self.workers[i].clone();
                self.cluster.lock().await.signal(&name, "KILL");
                tokio::time::sleep(pause).await;
                self.cluster.lock().await.spawn_worker(&name);
            }
            Fault::WorkerNewId => {
                let i = self.rng.range(0, self.workers.len() as u64) as usize;
                let name = self.workers[i].clone();
                self.cluster.lock().await.signal(&name, "KILL");
                let fresh = format!("worker-g{}", self.next_worker);
                self.next_worker += 1;
                tokio::time::sleep(pause).await;
                self.cluster.lock().await.spawn_worker(&fresh);
                self.workers[i] = fresh;
            }
            Fault::Dispatcher => {
                let name = format!("dispatcher-{}", self.rng.range(0, 2));
                self.cluster.lock().await.signal(&name, "KILL");
                tokio::time::sleep(pause).await;
                self.cluster.lock().await.spawn(&name, &["dispatcher"]);
            }
            Fault::FreezeLeader => {
                let leader = check::leader(&*self.cluster.lock().await);
                if let Some((name, _)) = leader {
                    self.cluster.lock().await.signal(&name, "STOP");
                    tokio::time::sleep(Duration::from_millis(LEASE_MS + 1500)).await;
                    self.cluster.lock().await.signal(&name, "CONT");
                }
            }
            Fault::Relay => {
                self.cluster.lock().await.signal("relay", "KILL");
                tokio::time::sleep(pause).await;
                self.cluster
                    .lock()
                    .await
                    .spawn("relay", &["callback-relay"]);
            }
            Fault::Api => {
                self.cluster.lock().await.signal("api", "KILL");
                tokio::time::sleep(pause).await;
                self.cluster.lock().await.spawn("api", &["api"]);
            }
            Fault::Redis => self.redis.restart(pause).await,
            Fault::RabbitMq => {
                self.amqp.down();
                tokio::time::sleep(pause + Duration::from_millis(500)).await;
                self.amqp.up();
            }
            Fault::MariaDb => {
                self.db.down();
                tokio::time::sleep(pause + Duration::from_millis(500)).await;
                self.db.up();
            }
        }
    }
}

/// The soak's concurrency limit on the `sleep` handler.
const SLEEP_LIMIT: i32 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_soak() {
    if std::env::var("KAIROS_SOAK").as_deref() != Ok("1") {
        println!("chaos soak not requested (set KAIROS_SOAK=1 to run it)");
        return;
    }
    let seed = env_u64("KAIROS_SOAK_SEED").unwrap_or_else(|| kairos_core::time::now_ms() as u64);
    let jobs = env_u64("KAIROS_SOAK_JOBS").unwrap_or(2000) as usize;
    let flows = env_u64("KAIROS_SOAK_WORKFLOWS").unwrap_or(24) as usize;
    println!(
        "chaos soak: seed {seed} (replay with KAIROS_SOAK_SEED={seed}), {jobs} jobs, {} workflows",
        flows + 1
    );
    let mut rng = Rng(seed);

    let Some(redis) = PrivateRedis::start() else {
        panic!("the soak needs redis-server on the PATH for its private Redis");
    };
    let Some(db_url) = testkit::mysql_fresh_database().await else {
        return;
    };
    let Some(amqp_url) = testkit::amqp_available().await else {
        return;
    };
    let db = proxy::Proxy::start(target_of(&db_url, 3306)).await;
    let amqp = proxy::Proxy::start(target_of(&amqp_url, 5672)).await;
    // Let the private Redis come up before the processes need it.
    testkit::wait_for("the private Redis", Duration::from_secs(10), || async {
        let client = redis::Client::open(redis.url()).ok()?;
        let mut c = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING").query_async::<String>(&mut c).await.ok()
    })
    .await;

    let receiver = Receiver::default();
    let app = Router::new()
        .route("/cb", post(receive))
        .with_state(receiver.clone());
    let callback_url = support::receiver::serve(app, "/cb").await;

    let db_via_proxy = with_port(&db_url, db.port);
    let amqp_via_proxy = with_port(&amqp_url, amqp.port);
    let redis_url = redis.url();
    let mut env: Vec<(&str, &str)> = check::FAST.to_vec();
    env.extend([
        ("KAIROS_DATABASE_URL", db_via_proxy.as_str()),
        ("KAIROS_AMQP_URL", amqp_via_proxy.as_str()),
        ("KAIROS_REDIS_URL", redis_url.as_str()),
        ("KAIROS_WORKER_CAPACITY", "8"),
        ("KAIROS_RECONCILE_GRACE_MS", "3000"),
    ]);
    // The same faults with both dispatchers claiming their partitions
    // (the leader then only sweeps).
    let partitioned = std::env::var("KAIROS_SOAK_PARTITIONED").is_ok_and(|v| v == "1");
    if partitioned {
        env.push(("KAIROS_DISPATCH_PARTITIONED", "true"));
    }
    println!(
        "dispatch: {}",
        if partitioned {
            "partitioned"
        } else {
            "one leader"
        }
    );
    let Some(cluster) = Cluster::start_with(Stack::Services, 2, 3, &env).await else {
        return;
    };
    cluster.wait_workers(3).await;
    let base = cluster.base.clone();
    let key = cluster.key.clone();
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));

    // The chaos runs while jobs are created and a while after.
    let creating = Arc::new(AtomicBool::new(true));
    let mut chaos = Chaos {
        cluster: cluster.clone(),
        redis,
        amqp,
        db,
        workers: (0..3).map(|i| format!("worker-{i}")).collect(),
        next_worker: 0,
        rng: Rng(rng.next()),
    };
    let chaos_done = creating.clone();
    let chaos_task = tokio::spawn(async move {
        let mut injected = Vec::new();
        let mut after = None;
        loop {
            if !chaos_done.load(Ordering::SeqCst) {
                let end = *after.get_or_insert_with(|| Instant::now() + Duration::from_secs(15));
                if Instant::now() > end {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(chaos.rng.range(1000, 2500))).await;
            // Every kind at least once, in a seeded order, then at random.
            let fault = if injected.len() < FAULTS.len() {
                FAULTS[(injected.len() + (seed as usize)) % FAULTS.len()]
            } else {
                FAULTS[chaos.rng.range(0, FAULTS.len() as u64) as usize]
            };
            println!("chaos: {fault:?}");
            chaos.inject(fault).await;
            injected.push(fault);
        }
        (chaos, injected)
    });

    // Creation, paced so the faults land on it: about a minute in CI mode.
    let mut auth = reqwest::header::HeaderMap::new();
    auth.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {key}").parse().expect("a header value"),
    );
    let http = reqwest::Client::builder()
        .default_headers(auth)
        .build()
        .expect("HTTP client");
    // The sleep handler runs under a concurrency limit through the chaos:
    // it must hold, and no slot may outlive its execution.
    let limit = http
        .put(format!("{base}/openapi/limits/handler/sleep"))
        .json(&json!({"maxRunning": SLEEP_LIMIT}))
        .send()
        .await
        .expect("set the sleep handler's limit");
    assert_eq!(limit.status().as_u16(), 200, "the limit is set");
    let mut specs = Vec::with_capacity(jobs);
    for i in 0..jobs {
        let kind = match rng.range(0, 100) {
            0..40 => Kind::Noop,
            40..75 => Kind::Sleep,
            _ => Kind::Fail,
        };
        let (handler, params, attempts) = match kind {
            Kind::Noop => ("noop", json!({"i": i}), 10),
            Kind::Sleep => ("sleep", json!({"ms": rng.range(100, 2000)}), 10),
            Kind::Fail => ("fail", json!({"message": "soak failure"}), 1),
        };
        let body = json!({
            "jobName": format!("soak-{i}"),
            "jobHandler": handler,
            "params": params,
            "maxAttempts": attempts,
            "retryBackoffMs": 100,
            "callbackUrl": callback_url,
            "clientRequestId": format!("soak-{seed}-{i}"),
        });
        specs.push((kind, body));
    }
    // The workflows are created and triggered beside the jobs, under the
    // same faults.
    let flows_task = tokio::spawn(workflows::drive(
        http.clone(),
        base.clone(),
        seed,
        Rng(rng.next()),
        flows,
    ));
    let per_second = (jobs / 60).max(20);
    let mut ids: Vec<String> = Vec::with_capacity(jobs);
    for chunk in specs.chunks(per_second) {
        let tick = Instant::now();
        let made =
            futures::future::join_all(chunk.iter().map(|(_, body)| create(&http, &base, body)))
                .await;
        ids.extend(made);
        if let Some(rest) = Duration::from_secs(1).checked_sub(tick.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    let made = flows_task.await.expect("the workflow task");
    creating.store(false, Ordering::SeqCst);
    let (chaos, injected) = chaos_task.await.expect("the chaos task");
    println!("chaos: {} faults injected: {injected:?}", injected.len());

    // Everything back up before the drain.
    {
        let mut c = cluster.lock().await;
        for name in ["api", "relay", "dispatcher-0", "dispatcher-1"] {
            if !c.has(name) {
                let args: &[&str] = match name {
                    "api" => &["api"],
                    "relay" => &["callback-relay"],
                    _ => &["dispatcher"],
                };
                c.spawn(name, args);
            }
        }
    }
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), jobs, "one job per clientRequestId");

    // Drain: every job terminal, every callback delivered.
    let pool = sqlx::MySqlPool::connect(&db_url)
        .await
        .expect("connect to the soak database");
    let kinds: HashMap<String, Kind> = ids
        .iter()
        .cloned()
        .zip(specs.iter().map(|(k, _)| *k))
        .collect();
    let drain = Instant::now();
    // (Node jobs, `workflow_id` set, are templates: they never end.)
    testkit::wait_for("every job to end", Duration::from_secs(300), || async {
        let open: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM jobs WHERE workflow_id IS NULL \
             AND status NOT IN ('succeeded','failed','cancelled')",
        )
        .fetch_one(&pool)
        .await
        .ok()?;
        (open == 0).then_some(())
    })
    .await;
    println!(
        "drain: every job terminal {:?} after the faults ended",
        drain.elapsed()
    );
    testkit::wait_for(
        "every workflow run to end",
        Duration::from_secs(120),
        || workflows::settled(&pool, &made),
    )
    .await;
    println!(
        "drain: every workflow run terminal {:?} after the faults ended",
        drain.elapsed()
    );

    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE workflow_id IS NULL")
        .fetch_one(&pool)
        .await
        .expect("count jobs");
    assert_eq!(count as usize, jobs, "every job created exactly once");
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT id, status FROM jobs WHERE workflow_id IS NULL")
            .fetch_all(&pool)
            .await
            .expect("jobs");
    let mut wrong = Vec::new();
    for (id, status) in &rows {
        let kind = kinds
            .get(id)
            .copied()
            .unwrap_or_else(|| panic!("unknown job {id}"));
        if status != kind.job_status() {
            wrong.push(format!("job {id} ({kind:?}) is {status}"));
        }
    }
    // The jobs' executions; the workflows' nodes are checked apart.
    let execs: Vec<(String, String, String, i64)> = sqlx::query_as(
        "SELECT e.id, e.job_id, e.status, e.attempt FROM executions e \
         JOIN jobs j ON j.id = e.job_id WHERE j.workflow_id IS NULL",
    )
    .fetch_all(&pool)
    .await
    .expect("executions");
    let mut per_job: HashMap<&str, usize> = HashMap::new();
    for (id, job, status, _) in &execs {
        *per_job.entry(job.as_str()).or_default() += 1;
        let kind = kinds[job];
        if !kind.execution_statuses().contains(&status.as_str()) {
            wrong.push(format!(
                "execution {id} of job {job} ({kind:?}) is {status}"
            ));
        }
    }
    for id in &ids {
        let n = per_job.get(id.as_str()).copied().unwrap_or(0);
        if n != 1 {
            wrong.push(format!("job {id} has {n} executions"));
        }
    }
    let (flows_wrong, flows_done) = workflows::check(&pool, &made).await;
    wrong.extend(flows_wrong);
    assert!(
        wrong.is_empty(),
        "seed {seed}: {} wrong:\n{}",
        wrong.len(),
        wrong[..wrong.len().min(30)].join("\n")
    );
    println!(
        "workflows: {} workflows, {} runs, {} node executions ({} attempts, {} lost), each node once; {}",
        made.len(),
        flows_done.runs,
        flows_done.node_executions,
        flows_done.node_attempts,
        flows_done.nodes_lost,
        flows_done.cron
    );

    // The limit held (each execution's last attempt ran inside the slot it
    // was admitted with), and every slot went with its execution. An
    // attempt that started while its row was `pending` (handed back after
    // its dispatch was recorded: a publish confirm lost, or its worker
    // replaced, yet the message reached a worker) ran without a slot until
    // its start was recorded: docs/api.md's window. The gate counts it from
    // its start, so the rest never passes the limit: that is the check, and
    // how many such attempts ran beside them is printed.
    let in_slots: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM concurrency_slots s JOIN executions e ON e.id = s.execution_id \
         WHERE e.status IN ('dispatched','running')",
    )
    .fetch_one(&pool)
    .await
    .expect("count slots");
    assert_eq!(in_slots, 0, "seed {seed}: slots held after the drain");
    let ran: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT e.id, CAST(UNIX_TIMESTAMP(e.started_at) * 1000 AS SIGNED), \
         CAST(UNIX_TIMESTAMP(e.finished_at) * 1000 AS SIGNED) \
         FROM executions e JOIN jobs j ON j.id = e.job_id \
         WHERE j.handler = 'sleep' AND e.started_at IS NOT NULL AND e.finished_at IS NOT NULL",
    )
    .fetch_all(&pool)
    .await
    .expect("sleep executions");
    let histories: Vec<(String, i64, String)> = sqlx::query_as(
        "SELECT ev.execution_id, ev.attempt, ev.status FROM execution_events ev \
         JOIN executions e ON e.id = ev.execution_id JOIN jobs j ON j.id = e.job_id \
         WHERE j.handler = 'sleep' ORDER BY ev.id",
    )
    .fetch_all(&pool)
    .await
    .expect("sleep histories");
    // Those whose last attempt started (or, unreported, ended) while its
    // row was `pending`: the event before its `running` one, or before its
    // end if it has none, is `pending`.
    let ghosts: HashSet<&str> = {
        let mut last: HashMap<&str, (i64, Vec<&str>)> = HashMap::new();
        for (id, attempt, status) in &histories {
            let (seen, events) = last.entry(id.as_str()).or_insert((*attempt, Vec::new()));
            if *attempt > *seen {
                (*seen, *events) = (*attempt, Vec::new());
            }
            if *attempt == *seen {
                events.push(status.as_str());
            }
        }
        last.into_iter()
            .filter(|(_, (_, events))| {
                let at = events
                    .iter()
                    .position(|s| *s == "running")
                    .unwrap_or(events.len().saturating_sub(1));
                at > 0 && events[at - 1] == "pending"
            })
            .map(|(id, _)| id)
            .collect()
    };
    let most_at_once = |counted: &dyn Fn(&str) -> bool| {
        let mut edges: Vec<(i64, i32)> = ran
            .iter()
            .filter(|(id, ..)| counted(id))
            .flat_map(|(_, s, f)| [(*s, 1), (*f, -1)])
            .collect();
        edges.sort();
        let (mut now, mut most, mut most_at) = (0, 0, 0);
        for (at, d) in edges {
            now += d;
            if now > most {
                (most, most_at) = (now, at);
            }
        }
        (most, most_at)
    };
    let (most, most_at) = most_at_once(&|id| !ghosts.contains(id));
    let (with_ghosts, _) = most_at_once(&|_| true);
    println!(
        "concurrency: at most {most} sleep executions at once (limit {SLEEP_LIMIT}); \
         {with_ghosts} with the {} attempts that started after a hand-back",
        ghosts.len()
    );
    if most > SLEEP_LIMIT {
        // Say which executions overlapped, with their histories, so a
        // failure can be diagnosed from the log alone.
        for (id, started, finished) in ran.iter().filter(|(_, s, f)| *s <= most_at && most_at < *f)
        {
            let events: Vec<(i64, String, Option<String>, i64)> = sqlx::query_as(
                "SELECT attempt, status, worker_id, \
                 CAST(UNIX_TIMESTAMP(occurred_at) * 1000 AS SIGNED) FROM execution_events \
                 WHERE execution_id = ? ORDER BY id",
            )
            .bind(id)
            .fetch_all(&pool)
            .await
            .expect("execution events");
            println!(
                "at {most_at}: {id} ran {started}..{finished} ({} ms), events {events:?}",
                finished - started
            );
        }
    }
    assert!(
        most <= SLEEP_LIMIT,
        "seed {seed}: {most} sleep executions ran at once under a limit of {SLEEP_LIMIT}"
    );

    // One callback row per terminal execution, each delivered under one id.
    let outbox: Vec<(String, String)> = sqlx::query_as("SELECT id, execution_id FROM callbacks")
        .fetch_all(&pool)
        .await
        .expect("callbacks");
    let mut rows_per_exec: HashMap<&str, usize> = HashMap::new();
    for (_, exec) in &outbox {
        *rows_per_exec.entry(exec.as_str()).or_default() += 1;
    }
    for (id, ..) in &execs {
        assert_eq!(
            rows_per_exec.get(id.as_str()).copied().unwrap_or(0),
            1,
            "seed {seed}: execution {id} must owe exactly one callback"
        );
    }
    testkit::wait_for(
        "every callback to arrive",
        Duration::from_secs(240),
        || async {
            let seen = receiver
                .deliveries
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            execs
                .iter()
                .all(|(id, ..)| seen.contains_key(id))
                .then_some(())
        },
    )
    .await;
    let seen = receiver
        .deliveries
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for (id, ..) in &execs {
        assert_eq!(
            seen[id].len(),
            1,
            "seed {seed}: execution {id} accepted under {:?}",
            seen[id]
        );
    }
    let attempts: i64 = execs.iter().map(|e| e.3).sum();
    println!(
        "chaos soak passed: seed {seed}, {jobs} jobs, {} executions ({} attempts), {} callbacks, {} faults",
        execs.len(),
        attempts,
        seen.len(),
        injected.len()
    );
    drop(chaos);
    cluster.lock().await.stop_all();
}
