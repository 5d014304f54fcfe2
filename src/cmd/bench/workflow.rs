//! The `workflow` workload: N runs of one 1 → 3 → 1 workflow of noop nodes,
//! triggered from C connections, at `--rate` runs a second if given. The figures say how soon a node started
//! after its last parent finished (the hand-off a workflow adds to its
//! nodes' own work) and how long a whole run took, from the run and node
//! times the server recorded.

use super::api::Api;
use super::report::Report;
use super::workloads::{Pace, Sending};
use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use kairos_core::time::{Millis, parse_rfc3339};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The DAG: `extract` → `a`, `b`, `c` → `load`.
fn definition() -> Value {
    let node = |id: &str| json!({"id": id, "handler": "noop", "params": {}});
    json!({
        "name": format!("bench-{}", uuid::Uuid::now_v7()),
        "nodes": [node("extract"), node("a"), node("b"), node("c"), node("load")],
        "edges": [
            {"from": "extract", "to": "a"}, {"from": "extract", "to": "b"},
            {"from": "extract", "to": "c"}, {"from": "a", "to": "load"},
            {"from": "b", "to": "load"}, {"from": "c", "to": "load"},
        ],
    })
}

/// Parents of each node of [`definition`].
fn parents(node: &str) -> &'static [&'static str] {
    match node {
        "a" | "b" | "c" => &["extract"],
        "load" => &["a", "b", "c"],
        _ => &[],
    }
}

/// Runs the workload: `n` runs, then waits for each to end.
pub(super) async fn run(
    api: &Api,
    n: usize,
    how: Sending,
    deadline: Duration,
    report: &mut Report,
) -> Result<()> {
    let created = api.post_json("/openapi/workflows", &definition()).await?;
    let id = created["workflow"]["id"]
        .as_str()
        .context("the create answer has no workflow id")?
        .to_string();
    let trigger = format!("/openapi/workflows/{id}/trigger");
    let started = Instant::now();
    let pace = Pace::new(how.rate);
    let runs: Vec<String> = futures::stream::iter(0..n)
        .map(|i| {
            let trigger = &trigger;
            async move {
                pace.slot(i).await;
                let run = api.post_json(trigger, &json!({})).await?;
                run["id"]
                    .as_str()
                    .map(str::to_string)
                    .context("the trigger answer has no run id")
            }
        })
        .buffer_unordered(how.connections.max(1))
        .try_collect()
        .await?;
    report.figure(
        "runs triggered/s",
        n as f64 / started.elapsed().as_secs_f64(),
        "runs/s",
    );
    let mut handoffs = Vec::new();
    let mut whole = Vec::new();
    let mut failed = 0;
    let mut first_failed = None;
    let end = Instant::now() + deadline;
    for run in &runs {
        let detail = loop {
            let detail = api
                .get_json(&format!("/openapi/workflows/{id}/runs/{run}"))
                .await?;
            if detail["status"] != "running" {
                break detail;
            }
            if Instant::now() > end {
                bail!("run {run} did not end within {deadline:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if detail["status"] != "succeeded" {
            failed += 1;
            first_failed.get_or_insert(detail);
            continue;
        }
        let time = |v: &Value| v.as_str().and_then(|s| parse_rfc3339(s).ok());
        let nodes: HashMap<&str, (Option<Millis>, Option<Millis>)> = detail["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|node| {
                let id = node["nodeId"].as_str()?;
                Some((id, (time(&node["startedAt"]), time(&node["finishedAt"]))))
            })
            .collect();
        for (node, (start, _)) in &nodes {
            let last_parent = parents(node)
                .iter()
                .filter_map(|p| nodes.get(p).and_then(|(_, end)| *end))
                .max();
            if let (Some(start), Some(parent_end)) = (start, last_parent) {
                handoffs.push((start - parent_end) as f64);
            }
        }
        if let (Some(from), Some(to)) = (time(&detail["createdAt"]), time(&detail["finishedAt"])) {
            whole.push((to - from) as f64);
        }
    }
    if let Some(run) = first_failed {
        report.note(format!(
            "{failed} runs did not succeed and are left out; the first: {run}"
        ));
    }
    report.latency("last parent finished → child started", handoffs);
    report.latency("run created → run ended", whole);
    Ok(())
}
