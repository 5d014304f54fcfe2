//! Workflows end to end (issue 34). On the services stack (MariaDB or
//! PostgreSQL, Redis, RabbitMQ, one process per role: `mariadb::` and
//! `postgres::`) with Rust worker services whose handler
//! answers with what `ctx.parent_outputs()` told it: a three-level DAG
//! (1 → 3 in parallel → 1) created through the API runs to `succeeded`,
//! each node once, and the fan-in node sees all three outputs; a failing
//! middle node fails the run (the fan-in is skipped); an `onFailure` branch
//! runs when its parent fails. Then the same DAGs under `kairos dev`
//! (SQLite, in-process broker, its stock worker's `noop` and `fail`), and
//! a scheduled workflow (`everyMs`) starting runs by itself, and a child
//! job triggered by its parent's failure.

#[macro_use]
extern crate kairos_testkit;

use kairos_testkit::cluster as support;

use kairos_core::protocol::Names;
use kairos_testkit as testkit;
use kairos_worker::{HandlerOutcome, JobContext, Worker};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use support::{Cluster, Stack};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LONG: Duration = Duration::from_secs(60);

/// Answers with its node (from params) and its parents' outputs; fails
/// (for good) when the params say so.
async fn node(ctx: JobContext) -> HandlerOutcome {
    if ctx.params["fail"] == json!(true) {
        return HandlerOutcome::PermanentFailure("failed on purpose".into());
    }
    HandlerOutcome::Success(json!({
        "node": ctx.params["node"],
        "parents": ctx.parent_outputs(),
    }))
}

/// A worker service serving `wf`, against the cluster's broker.
async fn start_worker(
    cluster: &Cluster,
    id: &'static str,
    stop: &CancellationToken,
) -> JoinHandle<Result<(), kairos_worker::WorkerError>> {
    let names = Names::new(cluster.namespace());
    let broker = kairos::connect::rabbitmq(&cluster.env["KAIROS_AMQP_URL"], names.clone(), None)
        .await
        .expect("connect RabbitMQ");
    let coord = kairos::connect::redis(&cluster.env["KAIROS_REDIS_URL"], names.clone())
        .await
        .expect("connect Redis");
    let worker = Worker::builder()
        .id(id)
        .handler("wf", node)
        .broker(Arc::new(broker))
        .coordination(Arc::new(coord))
        .names(names)
        .heartbeat_every(Duration::from_millis(500))
        .build()
        .expect("build the worker");
    tokio::spawn(worker.run(stop.clone()))
}

/// 1 → 3 in parallel → 1, every node running `handler`; `failing` names a
/// node whose params make it fail (the `wf` handler), or that runs `fail`
/// (with `fail_handler`).
fn diamond(handler: &str, failing: Option<&str>, fail_handler: Option<&str>) -> Value {
    let nodes: Vec<Value> = ["a", "b1", "b2", "b3", "c"]
        .iter()
        .map(|id| {
            let fails = failing == Some(*id);
            let h = match (fails, fail_handler) {
                (true, Some(f)) => f,
                _ => handler,
            };
            json!({"id": id, "handler": h, "params": {"node": id, "fail": fails}})
        })
        .collect();
    json!({
        "name": "diamond",
        "nodes": nodes,
        "edges": [
            {"from": "a", "to": "b1"}, {"from": "a", "to": "b2"}, {"from": "a", "to": "b3"},
            {"from": "b1", "to": "c"}, {"from": "b2", "to": "c"}, {"from": "b3", "to": "c"}
        ]
    })
}

/// `a` fails; `ok` follows it on success, `fix` on failure.
fn repair(handler: &str, fail_handler: &str) -> Value {
    json!({
        "name": "repair",
        "nodes": [
            {"id": "a", "handler": fail_handler, "params": {"node": "a", "fail": true}},
            {"id": "ok", "handler": handler, "params": {"node": "ok"}},
            {"id": "fix", "handler": handler, "params": {"node": "fix"}}
        ],
        "edges": [
            {"from": "a", "to": "ok"},
            {"from": "a", "to": "fix", "condition": "onFailure"}
        ]
    })
}

/// Creates `body` (running at once) and waits for its run to end; the run.
async fn run_to_end(cluster: &Cluster, body: &Value) -> Value {
    let (status, created) = cluster.post("/openapi/workflows", body).await;
    assert_eq!(status, 201, "{created}");
    let wf = created["workflow"]["id"].as_str().unwrap().to_string();
    let run = created["run"]["id"].as_str().unwrap().to_string();
    let path = format!("/openapi/workflows/{wf}/runs/{run}");
    testkit::wait_for(&format!("run {run} to end"), LONG, || async {
        let d = cluster.get(&path).await;
        (d["status"].as_str() != Some("running")).then_some(d)
    })
    .await
}

fn node_of<'a>(run: &'a Value, id: &str) -> &'a Value {
    run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["nodeId"] == id)
        .unwrap_or_else(|| panic!("node {id} in {run}"))
}

/// Each node that ran has exactly one execution (its internal job's only
/// one), in the state its node shows; returns the executions by node.
async fn one_execution_per_node(cluster: &Cluster, run: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for n in run["nodes"].as_array().unwrap() {
        let Some(exec) = n["executionId"].as_str() else {
            continue;
        };
        let e = cluster.get(&format!("/openapi/executions/{exec}")).await;
        let job = e["jobId"].as_str().unwrap();
        let all = cluster
            .get(&format!("/openapi/jobs/{job}/executions"))
            .await;
        assert_eq!(
            all["items"].as_array().map(Vec::len),
            Some(1),
            "node {} ran once: {all}",
            n["nodeId"]
        );
        out.push((n["nodeId"].as_str().unwrap().to_string(), e));
    }
    out
}

on_server_stacks!(a_dag_runs_on_the_services_stack_and_the_fan_in_sees_every_output);

async fn a_dag_runs_on_the_services_stack_and_the_fan_in_sees_every_output(stack: Stack) {
    let Some(mut cluster) = Cluster::start(stack, 1, 0).await else {
        return;
    };
    let stop = CancellationToken::new();
    let workers = vec![
        start_worker(&cluster, "wf-a", &stop).await,
        start_worker(&cluster, "wf-b", &stop).await,
    ];
    cluster.wait_workers(2).await;

    let run = run_to_end(&cluster, &diamond("wf", None, None)).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let execs = one_execution_per_node(&cluster, &run).await;
    assert_eq!(execs.len(), 5);
    let c = &execs.iter().find(|(n, _)| n == "c").unwrap().1;
    let parents = &c["output"]["parents"];
    for b in ["b1", "b2", "b3"] {
        assert_eq!(parents[b]["node"], b, "c sees {b}'s output: {parents}");
        assert_eq!(parents[b]["parents"]["a"]["node"], "a");
    }
    let a = node_of(&run, "a");
    let c_node = node_of(&run, "c");
    assert!(a["finishedAt"].as_str() <= c_node["startedAt"].as_str());

    let failed = run_to_end(&cluster, &diamond("wf", Some("b2"), None)).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(node_of(&failed, "b2")["state"], "failed");
    assert_eq!(node_of(&failed, "c")["state"], "skipped");
    assert!(node_of(&failed, "c")["executionId"].is_null());
    assert_eq!(one_execution_per_node(&cluster, &failed).await.len(), 4);

    let repaired = run_to_end(&cluster, &repair("wf", "wf")).await;
    assert_eq!(repaired["status"], "succeeded", "{repaired}");
    assert_eq!(node_of(&repaired, "a")["state"], "failed");
    assert_eq!(node_of(&repaired, "ok")["state"], "skipped");
    assert_eq!(node_of(&repaired, "fix")["state"], "succeeded");

    stop.cancel();
    for w in workers {
        w.await.unwrap().unwrap();
    }
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn kairos_dev_runs_a_dag() {
    let Some(mut cluster) = Cluster::start(Stack::Embedded, 0, 0).await else {
        return;
    };
    let run = run_to_end(&cluster, &diamond("noop", None, None)).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(one_execution_per_node(&cluster, &run).await.len(), 5);

    let failed = run_to_end(&cluster, &diamond("noop", Some("b3"), Some("fail"))).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(node_of(&failed, "c")["state"], "skipped");

    let repaired = run_to_end(&cluster, &repair("noop", "fail")).await;
    assert_eq!(repaired["status"], "succeeded", "{repaired}");
    assert_eq!(node_of(&repaired, "fix")["state"], "succeeded");

    // A scheduled workflow starts a run per trigger by itself.
    let mut every = diamond("noop", None, None);
    every["everyMs"] = json!(500);
    let (status, created) = cluster.post("/openapi/workflows", &every).await;
    assert_eq!(status, 201, "{created}");
    assert!(created["run"].is_null());
    let wf = created["workflow"]["id"].as_str().unwrap().to_string();
    testkit::wait_for("two scheduled runs to succeed", LONG, || async {
        let runs = cluster.get(&format!("/openapi/workflows/{wf}/runs")).await;
        let done = runs["items"]
            .as_array()?
            .iter()
            .filter(|r| r["status"] == "succeeded")
            .count();
        (done >= 2).then_some(())
    })
    .await;
    let (status, _) = cluster
        .send(
            reqwest::Method::DELETE,
            &format!("/openapi/workflows/{wf}"),
            None,
        )
        .await;
    assert_eq!(status, 204);

    // Child jobs: a job's end triggers its follow-up.
    let at = kairos_core::time::to_rfc3339(kairos_core::time::now_ms() + 1_500);
    let (_, parent) = cluster
        .post(
            "/openapi/jobs",
            &json!({"jobName": "parent", "jobHandler": "fail", "triggerAt": at}),
        )
        .await;
    let (_, child) = cluster
        .post(
            "/openapi/jobs",
            &json!({"jobName": "child", "jobHandler": "noop", "cronExpr": "0 0 1 1 *"}),
        )
        .await;
    let (parent, child) = (
        parent["jobId"].as_str().unwrap(),
        child["jobId"].as_str().unwrap(),
    );
    let (status, _) = cluster
        .send(
            reqwest::Method::PUT,
            &format!("/openapi/jobs/{parent}/followups"),
            Some(&json!({"onFailure": [child]})),
        )
        .await;
    assert_eq!(status, 200);
    testkit::wait_for("the follow-up to run", LONG, || async {
        let page = cluster
            .get(&format!("/openapi/jobs/{child}/executions"))
            .await;
        let items = page["items"].as_array()?;
        (items.len() == 1 && items[0]["status"] == "succeeded").then_some(())
    })
    .await;
    assert_eq!(
        cluster.get(&format!("/openapi/jobs/{parent}")).await["status"],
        "failed"
    );
    cluster.stop_all();
}

/// Issue 44, finding 2, end to end: 17 jobs in layers 1, 4, 4, 4, 4, each
/// following every job of the layer before. One trigger of the root used to
/// make 341 executions (each end fired its whole next layer again); a
/// chain runs each job exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn kairos_dev_runs_a_layered_follow_up_graph_once_per_trigger() {
    let Some(mut cluster) = Cluster::start(Stack::Embedded, 0, 0).await else {
        return;
    };
    let at = kairos_core::time::to_rfc3339(kairos_core::time::now_ms() + 3_000);
    let (status, root) = cluster
        .post(
            "/openapi/jobs",
            &json!({"jobName": "root", "jobHandler": "noop", "triggerAt": at}),
        )
        .await;
    assert_eq!(status, 201, "{root}");
    let mut layers = vec![vec![root["jobId"].as_str().unwrap().to_string()]];
    for depth in 1..=4 {
        let mut layer = Vec::new();
        for i in 0..4 {
            let (status, job) = cluster
                .post(
                    "/openapi/jobs",
                    &json!({"jobName": format!("l{depth}-{i}"), "jobHandler": "noop",
                            "cronExpr": "0 0 1 1 *"}),
                )
                .await;
            assert_eq!(status, 201, "{job}");
            layer.push(job["jobId"].as_str().unwrap().to_string());
        }
        for parent in layers.last().unwrap() {
            let (status, body) = cluster
                .send(
                    reqwest::Method::PUT,
                    &format!("/openapi/jobs/{parent}/followups"),
                    Some(&json!({"onSuccess": layer})),
                )
                .await;
            assert_eq!(status, 200, "{body}");
        }
        layers.push(layer);
    }
    let all: Vec<String> = layers.iter().flatten().cloned().collect();
    // Done when the last layer has run and nothing of any job is live.
    let counts = testkit::wait_for("the chain to end", LONG, || async {
        let mut counts = Vec::new();
        for job in &all {
            let page = cluster
                .get(&format!("/openapi/jobs/{job}/executions?limit=100"))
                .await;
            let items = page["items"].as_array()?.clone();
            let live = items.iter().any(|e| {
                matches!(
                    e["status"].as_str(),
                    Some("pending" | "dispatched" | "running")
                )
            });
            if live {
                return None;
            }
            counts.push(items.len());
        }
        counts[all.len() - 4..]
            .iter()
            .all(|n| *n >= 1)
            .then_some(counts)
    })
    .await;
    assert_eq!(counts, vec![1; 17], "each job once per trigger");
    cluster.stop_all();
}
