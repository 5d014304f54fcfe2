//! Latency and throughput benchmark on real processes, both stacks.
//!
//! `cargo bench --bench latency` (add `-- embedded` or `-- services` for one
//! stack). Prints, per stack:
//! - immediate jobs created one after another: create → started (server
//!   clocks) and create → succeeded as seen by a client polling the status;
//! - cron (`* * * * * *`), fixed-rate (`everyMs`) and fixed-delay (`delayMs`)
//!   jobs: trigger lateness, scheduled → dispatched and scheduled → started;
//! - throughput: jobs created concurrently until all have succeeded.
//!
//! A benchmark, not a test: it asserts nothing and prints figures.

use kairos_testkit::cluster as support;

use futures::StreamExt;
use kairos_core::time::parse_rfc3339;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::{Cluster, Stack};

fn ms(v: &Value) -> Option<i64> {
    v.as_str().and_then(|s| parse_rfc3339(s).ok())
}

fn report(label: &str, mut xs: Vec<f64>) {
    if xs.is_empty() {
        println!("  {label:<44} (no samples)");
        return;
    }
    xs.sort_by(f64::total_cmp);
    let p = |q: f64| xs[((xs.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "  {label:<44} n={:<5} p50={:>7.1} p90={:>7.1} p99={:>7.1} max={:>7.1} ms",
        xs.len(),
        p(0.5),
        p(0.9),
        p(0.99),
        xs[xs.len() - 1]
    );
}

async fn immediate(cluster: &Cluster, n: usize) {
    let http = reqwest::Client::new();
    let (mut started, mut succeeded) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t0 = Instant::now();
        let id = cluster
            .create_one_shot(&format!("bench-{i}"), "noop", json!({}))
            .await;
        let job = loop {
            let job: Value = cluster
                .authorized(http.get(format!("{}/openapi/jobs/{id}", cluster.base)))
                .send()
                .await
                .expect("GET job")
                .json()
                .await
                .expect("job JSON");
            if job["status"] == "succeeded" || job["status"] == "failed" {
                break job;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        succeeded.push(t0.elapsed().as_secs_f64() * 1000.0);
        if let (Some(c), Some(s)) = (
            ms(&job["createdAt"]),
            ms(&job["lastExecution"]["startedAt"]),
        ) {
            started.push((s - c) as f64);
        }
    }
    report("immediate: create → started (server)", started);
    report("immediate: create → succeeded (client polling)", succeeded);
}

async fn recurring(cluster: &Cluster, label: &str, body: Value, jobs: usize, run_for: Duration) {
    let mut ids = Vec::new();
    for i in 0..jobs {
        let mut b = body.clone();
        b["jobName"] = json!(format!("{label}-{i}"));
        let (status, resp) = cluster.post("/openapi/jobs", &b).await;
        if status != 201 {
            println!(
                "  {label}: not supported by this build ({status} {})",
                resp["error"]["message"]
            );
            return;
        }
        ids.push(resp["jobId"].as_str().unwrap_or_default().to_string());
    }
    tokio::time::sleep(run_for).await;
    let (mut dispatched, mut started) = (Vec::new(), Vec::new());
    for id in &ids {
        let _ = cluster
            .post(&format!("/openapi/jobs/{id}/pause"), &json!({}))
            .await;
        for e in cluster.executions(id).await {
            let Some(s) = ms(&e["scheduledAt"]) else {
                continue;
            };
            if let Some(d) = ms(&e["dispatchedAt"]) {
                dispatched.push((d - s) as f64);
            }
            if let Some(st) = ms(&e["startedAt"]) {
                started.push((st - s) as f64);
            }
        }
    }
    report(&format!("{label}: scheduled → dispatched"), dispatched);
    report(&format!("{label}: scheduled → started"), started);
}

async fn throughput(cluster: &Cluster, n: usize) {
    let t0 = Instant::now();
    let ids: Vec<String> = futures::stream::iter(0..n)
        .map(|i| async move {
            cluster
                .create_one_shot(&format!("tp-{i}"), "noop", json!({}))
                .await
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let created = t0.elapsed();
    // Count through the list endpoint: polling each job would measure the
    // client, not the scheduler.
    let deadline = Instant::now() + Duration::from_secs(600);
    while count_succeeded(cluster).await < ids.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = t0.elapsed();
    println!(
        "  throughput: {n} jobs created in {:.2} s ({:.0}/s); all succeeded after {:.2} s ({:.0} jobs/s end to end)",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        done.as_secs_f64(),
        n as f64 / done.as_secs_f64()
    );
}

/// Jobs created by `throughput` that have succeeded.
async fn count_succeeded(cluster: &Cluster) -> usize {
    let mut n = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/openapi/jobs?status=succeeded&limit=500".to_string();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let page = cluster.get(&path).await;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        n += items
            .iter()
            .filter(|j| j["jobName"].as_str().is_some_and(|s| s.starts_with("tp-")))
            .count();
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return n,
        }
    }
}

async fn run(stack: Stack) {
    // The throughput burst creates faster than the default per-key rate.
    let limits = [("KAIROS_API_CREATE_BURST", "100000")];
    let Some(mut cluster) = Cluster::start_with(stack, 2, 2, &limits).await else {
        println!("{stack:?}: services not reachable, skipped");
        return;
    };
    cluster
        .wait_workers(if stack == Stack::Services { 2 } else { 1 })
        .await;
    println!("\n{stack:?} stack");
    immediate(&cluster, 100).await;
    let cron = json!({"jobHandler": "noop", "cronExpr": "* * * * * *"});
    recurring(
        &cluster,
        "cron every second (20 jobs, 10 s)",
        cron,
        20,
        Duration::from_secs(10),
    )
    .await;
    let rate = json!({"jobHandler": "noop", "everyMs": 500});
    recurring(
        &cluster,
        "fixed rate 500 ms (20 jobs, 10 s)",
        rate,
        20,
        Duration::from_secs(10),
    )
    .await;
    let delay = json!({"jobHandler": "noop", "delayMs": 300});
    recurring(
        &cluster,
        "fixed delay 300 ms (20 jobs, 10 s)",
        delay,
        20,
        Duration::from_secs(10),
    )
    .await;
    throughput(&cluster, 2000).await;
    cluster.stop_all();
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "Kairos latency benchmark — {cores} cores, all processes and services on this machine"
    );
    for stack in [Stack::Embedded, Stack::Services] {
        let name = format!("{stack:?}").to_lowercase();
        if only.as_deref().is_none_or(|o| name.starts_with(o)) {
            run(stack).await;
        }
    }
}
