//! Operability on the services stack: every process's `/metrics` follows the
//! work that ran, every metric the deploy/ dashboard and alerts use is
//! exported, JSON logs carry the trace fields, callbacks carry the
//! execution's `traceparent`, `/readyz` follows each process's dependencies,
//! and the pipeline runs on quorum queues.

use kairos_testkit::cluster as support;

use kairos_testkit::proxy;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use kairos_testkit as testkit;
use proxy::Proxy;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cluster, Stack, prom};

const JOBS: usize = 200;

/// `traceparent` headers of the callbacks received, by execution id.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

async fn receive(
    State(seen): State<Seen>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let trace = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let execution = body["executionId"].as_str().unwrap_or_default().to_string();
    seen.lock().unwrap().push((execution, trace));
    StatusCode::OK
}

async fn start_receiver() -> (String, Seen) {
    let seen = Seen::default();
    let app = Router::new()
        .route("/hook", post(receive))
        .with_state(seen.clone());
    let url = support::receiver::serve(app, "/hook").await;
    (url, seen)
}

/// Sum of one figure over the named processes.
async fn total(cluster: &Cluster, names: &[String], metric: &str, labels: &[(&str, &str)]) -> f64 {
    let mut sum = 0.0;
    for n in names {
        sum += prom::sum(&cluster.metrics_text(n).await, metric, labels);
    }
    sum
}

/// Every `kairos_…` metric name the dashboard and the alerting rules use.
fn deploy_metric_names() -> BTreeSet<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut out = BTreeSet::new();
    for file in [
        root.join("grafana/dashboards/kairos.json"),
        root.join("prometheus/alerts.yml"),
    ] {
        let text = std::fs::read_to_string(&file).unwrap();
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find("kairos_") {
            let start = i + at;
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
                end += 1;
            }
            out.insert(text[start..end].to_string());
            i = end;
        }
    }
    assert!(out.len() > 20, "the dashboard uses the metrics: {out:?}");
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn services_metrics_logs_and_traces_follow_the_work() {
    let (hook, seen) = start_receiver().await;
    let env = [
        ("KAIROS_LOG_FORMAT", "json"),
        ("KAIROS_LOG", "warn,kairos=debug"),
    ];
    let Some(cluster) = Cluster::start_with(Stack::Services, 2, 2, &env).await else {
        return;
    };
    cluster.wait_workers(2).await;
    let mut ids = Vec::new();
    for i in 0..JOBS {
        ids.push(
            cluster
                .create_job(json!({"jobName": format!("obs-{i}"), "jobHandler": "noop", "callbackUrl": hook}))
                .await,
        );
    }
    cluster
        .wait_jobs(&ids, &["succeeded"], Duration::from_secs(60))
        .await;
    let mut executions = Vec::new();
    for id in &ids {
        let list = cluster.executions(id).await;
        assert_eq!(list.len(), 1, "one execution per job: {list:?}");
        executions.push(list[0]["executionId"].as_str().unwrap().to_string());
    }
    let n = executions.len() as f64;

    let dispatchers = cluster.names("dispatcher-");
    let workers = cluster.names("worker-");
    let relay = vec!["relay".to_string()];
    // Results and callbacks settle a moment after the jobs read succeeded.
    testkit::wait_for("the figures to match the work", Duration::from_secs(30), || async {
        let dispatched = total(&cluster, &dispatchers, "kairos_triggers_dispatched_total", &[]).await;
        let claimed = total(&cluster, &dispatchers, "kairos_triggers_claimed_total", &[]).await;
        let lateness = total(&cluster, &dispatchers, "kairos_trigger_lateness_seconds_count", &[]).await;
        let applied = total(&cluster, &dispatchers, "kairos_results_applied_total", &[("outcome", "succeeded")]).await;
        let ran = total(&cluster, &workers, "kairos_handler_duration_seconds_count", &[("handler", "noop"), ("outcome", "succeeded")]).await;
        let delivered = total(&cluster, &relay, "kairos_callback_deliveries_total", &[("outcome", "delivered")]).await;
        let leaders = total(&cluster, &dispatchers, "kairos_dispatcher_is_leader", &[]).await;
        let figures = [dispatched, claimed, lateness, applied, ran, delivered];
        eprintln!("dispatched, claimed, lateness count, applied, ran, delivered: {figures:?}; leaders {leaders}");
        // Dispatches count confirmed publishes: the sweep may publish an
        // attempt again when it races that attempt's first dispatch record
        // (the worker's attempt key drops the copy), so a loaded box can
        // show a few more publishes than executions, never fewer.
        let spare = (n * 0.02).ceil();
        let published = [dispatched, lateness]
            .iter()
            .all(|&f| f >= n && f <= n + spare);
        let exact = [claimed, applied, ran, delivered].iter().all(|&f| f == n);
        (published && exact && leaders == 1.0).then_some(())
    })
    .await;
    let capacity = total(&cluster, &workers, "kairos_worker_capacity", &[]).await;
    assert!(capacity > 0.0, "workers export their capacity");
    let online = total(
        &cluster,
        &dispatchers,
        "kairos_workers",
        &[("state", "online")],
    )
    .await;
    assert!(
        online >= 2.0,
        "the leader sees both workers online ({online})"
    );

    // Everything the dashboard and the alerts use is exported somewhere.
    let mut exported = prom::names(&cluster.metrics_text("api").await);
    for name in dispatchers.iter().chain(&workers).chain(&relay) {
        exported.extend(prom::names(&cluster.metrics_text(name).await));
    }
    let missing: Vec<String> = deploy_metric_names()
        .into_iter()
        .filter(|m| !exported.contains(m))
        .collect();
    assert!(
        missing.is_empty(),
        "used in deploy/ but not exported: {missing:?}"
    );

    // JSON logs: one object per line, spans carrying the trace fields.
    let exec = &executions[0];
    let trace_id = exec.replace('-', "");
    let mut worker_span = None;
    for name in &workers {
        for line in cluster.log(name).lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{name} logged a line that is not JSON ({e}): {line}"));
            if v["span"]["execution_id"] == exec.as_str() {
                worker_span = Some(v["span"].clone());
            }
        }
    }
    let span = worker_span.expect("a worker logged inside the execution's span");
    assert_eq!(span["trace_id"], trace_id.as_str(), "{span}");
    assert_eq!(span["attempt"], 1, "{span}");
    assert!(
        span["job_id"].is_string() && span["worker_id"].is_string(),
        "{span}"
    );
    // The dispatcher's span travelled in the AMQP header to the worker.
    let dispatch_span = dispatchers
        .iter()
        .flat_map(|d| cluster.log(d).lines().map(String::from).collect::<Vec<_>>())
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .map(|v| v["span"].clone())
        .find(|s| s["name"] == "dispatch" && s["execution_id"] == exec.as_str())
        .expect("a dispatcher logged the dispatch");
    assert_eq!(dispatch_span["trace_id"], trace_id.as_str());
    assert_eq!(
        span["parent"], dispatch_span["traceparent"],
        "worker span {span}"
    );

    // The callback request carries the execution's trace.
    let seen = seen.lock().unwrap().clone();
    let (_, header) = seen
        .iter()
        .find(|(e, _)| e == exec)
        .expect("the callback arrived");
    assert!(
        header.starts_with(&format!("00-{trace_id}-")),
        "callback traceparent {header:?} is not in trace {trace_id}"
    );
}

/// Waits until the named process's `/readyz` answers `want`.
async fn ready_becomes(cluster: &Cluster, name: &str, want: u16) {
    let what = format!("{name} /readyz to answer {want}");
    testkit::wait_for(&what, Duration::from_secs(30), || async {
        (cluster.readyz_status(name).await == want).then_some(())
    })
    .await;
}

/// `url` with its host and port replaced by the proxy's.
fn through(url: &str, proxy: &Proxy) -> String {
    let mut u = url::Url::parse(url).unwrap();
    u.set_host(Some("127.0.0.1")).unwrap();
    u.set_port(Some(proxy.port)).unwrap();
    u.to_string()
}

fn host_port(url: &str) -> String {
    let u = url::Url::parse(url).unwrap();
    format!(
        "{}:{}",
        u.host_str().unwrap(),
        u.port_or_known_default().unwrap()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn services_readyz_follows_each_process_dependencies() {
    let Some(mut cluster) = Cluster::start(Stack::Services, 0, 0).await else {
        return;
    };
    let db = cluster.env["KAIROS_DATABASE_URL"].clone();
    let redis = cluster.env["KAIROS_REDIS_URL"].clone();
    let amqp = cluster.env["KAIROS_AMQP_URL"].clone();
    let db_proxy = Proxy::start(host_port(&db)).await;
    let redis_proxy = Proxy::start(host_port(&redis)).await;
    let amqp_proxy = Proxy::start(host_port(&amqp)).await;
    let (db_p, redis_p, amqp_p) = (
        through(&db, &db_proxy),
        through(&redis, &redis_proxy),
        through(&amqp, &amqp_proxy),
    );
    let env = [
        ("KAIROS_DATABASE_URL", db_p.as_str()),
        ("KAIROS_REDIS_URL", redis_p.as_str()),
        ("KAIROS_AMQP_URL", amqp_p.as_str()),
    ];
    cluster.spawn_with("dispatcher-p", &["dispatcher"], &env);
    cluster.spawn_with("worker-p", &["worker"], &env);
    cluster.spawn_with("relay-p", &["callback-relay"], &env);
    for name in ["dispatcher-p", "worker-p", "relay-p"] {
        ready_becomes(&cluster, name, 200).await;
    }
    // The database: the dispatcher and the relay need it, the worker does not.
    db_proxy.down();
    ready_becomes(&cluster, "dispatcher-p", 503).await;
    ready_becomes(&cluster, "relay-p", 503).await;
    assert_eq!(cluster.readyz_status("worker-p").await, 200);
    db_proxy.up();
    ready_becomes(&cluster, "dispatcher-p", 200).await;
    ready_becomes(&cluster, "relay-p", 200).await;
    // RabbitMQ: the dispatcher and the worker.
    amqp_proxy.down();
    ready_becomes(&cluster, "dispatcher-p", 503).await;
    ready_becomes(&cluster, "worker-p", 503).await;
    assert_eq!(cluster.readyz_status("relay-p").await, 200);
    amqp_proxy.up();
    ready_becomes(&cluster, "dispatcher-p", 200).await;
    ready_becomes(&cluster, "worker-p", 200).await;
    // Redis: the dispatcher and the worker.
    redis_proxy.down();
    ready_becomes(&cluster, "dispatcher-p", 503).await;
    ready_becomes(&cluster, "worker-p", 503).await;
    redis_proxy.up();
    ready_becomes(&cluster, "dispatcher-p", 200).await;
    ready_becomes(&cluster, "worker-p", 200).await;
    // Liveness does not depend on anything.
    let healthz = reqwest::get(format!("{}/healthz", cluster.ops_url("worker-p")))
        .await
        .unwrap();
    assert_eq!(healthz.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn services_pipeline_runs_on_quorum_queues() {
    let env = [("KAIROS_AMQP_QUEUE_TYPE", "quorum")];
    let Some(cluster) = Cluster::start_with(Stack::Services, 2, 2, &env).await else {
        return;
    };
    cluster.wait_workers(2).await;
    let mut ids = Vec::new();
    for i in 0..20 {
        ids.push(
            cluster
                .create_one_shot(&format!("q-{i}"), "noop", json!({}))
                .await,
        );
    }
    cluster
        .wait_jobs(&ids, &["succeeded"], Duration::from_secs(60))
        .await;
    // RabbitMQ refuses to redeclare a queue with another type: a classic
    // declaration of each shared queue fails, a quorum one succeeds.
    let amqp = &cluster.env["KAIROS_AMQP_URL"];
    let ns = cluster.namespace();
    for queue in ["results", "reroute", "heartbeats"] {
        let name = format!("{ns}.{queue}");
        assert_eq!(queue_type(amqp, &name).await, "quorum", "{name}");
    }
}

/// The type a queue was declared with, found by redeclaring it.
async fn queue_type(url: &str, queue: &str) -> &'static str {
    use lapin::options::QueueDeclareOptions;
    use lapin::types::{AMQPValue, FieldTable};
    for kind in ["quorum", "classic"] {
        let conn = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let mut args = FieldTable::default();
        args.insert("x-queue-type".into(), AMQPValue::LongString(kind.into()));
        if queue.ends_with(".heartbeats") {
            // Every argument must match, not only the type.
            let ttl = i32::try_from(kairos_core::protocol::HEARTBEAT_TTL.as_millis()).unwrap();
            args.insert("x-message-ttl".into(), AMQPValue::LongInt(ttl));
        }
        let declared = ch
            .queue_declare(queue.into(), QueueDeclareOptions::durable(), args)
            .await;
        let _ = conn.close(200, "done".into()).await;
        match (kind, declared) {
            ("quorum", Ok(_)) => return "quorum",
            ("classic", Ok(_)) => return "classic",
            _ => {}
        }
    }
    "unknown"
}
