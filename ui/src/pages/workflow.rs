//! Workflows (issue 34): a workflow with its runs, and a run drawn as a
//! graph — server-rendered SVG, no script: each node a box in its layer
//! (its longest path from a root), with its state as icon and text and a
//! link to its execution; edges as lines, labelled when their condition is
//! not `onSuccess`.

use crate::UiState;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use kairos_core::workflow::{EdgeCondition, NodeStatus, RunDetail, RunNode, Workflow};
use maud::{Markup, html};
use std::collections::HashMap;

/// Runs shown on a workflow's page.
const RUNS_SHOWN: u32 = 20;
/// Box size and gaps of the drawing, in SVG units (px at 100 %).
const NODE_W: i64 = 150;
const NODE_H: i64 = 46;
const GAP_X: i64 = 70;
const GAP_Y: i64 = 22;
const PAD: i64 = 12;

/// Where each node is drawn: its column (layer) and row within it.
pub(crate) fn layout(wf: &Workflow) -> HashMap<String, (usize, usize)> {
    // The longest path from a root; the graph is a DAG (validated at
    // create), and the loop is bounded by the node count in any case.
    let mut layer: HashMap<&str, usize> = wf.nodes.iter().map(|n| (n.id.as_str(), 0)).collect();
    for _ in 0..wf.nodes.len() {
        let mut changed = false;
        for e in &wf.edges {
            let from = layer.get(e.from.as_str()).copied().unwrap_or(0);
            let to = layer.entry(e.to.as_str()).or_insert(0);
            if *to < from + 1 {
                *to = from + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut rows: HashMap<usize, usize> = HashMap::new();
    let mut out = HashMap::new();
    for n in &wf.nodes {
        let col = layer.get(n.id.as_str()).copied().unwrap_or(0);
        let row = rows.entry(col).or_insert(0);
        out.insert(n.id.clone(), (col, *row));
        *row += 1;
    }
    out
}

fn origin((col, row): (usize, usize)) -> (i64, i64) {
    let col = i64::try_from(col).unwrap_or(0);
    let row = i64::try_from(row).unwrap_or(0);
    (PAD + col * (NODE_W + GAP_X), PAD + row * (NODE_H + GAP_Y))
}

/// The state a node shows (as the API's run view does).
fn node_state(n: Option<&RunNode>) -> &'static str {
    match n {
        Some(n) => match (n.status, n.execution_status) {
            (NodeStatus::Active, Some(kairos_core::execution::ExecStatus::Running)) => "running",
            (NodeStatus::Active, _) => "pending",
            (s, _) => s.as_str(),
        },
        None => "waiting",
    }
}

/// The run's graph as inline SVG.
pub(crate) fn graph(wf: &Workflow, run: &RunDetail) -> Markup {
    let at = layout(wf);
    let nodes: HashMap<&str, &RunNode> =
        run.nodes.iter().map(|n| (n.node_id.as_str(), n)).collect();
    let cols = at.values().map(|p| p.0).max().unwrap_or(0) + 1;
    let rows = at.values().map(|p| p.1).max().unwrap_or(0) + 1;
    let (w, _) = origin((cols, 0));
    let (_, h) = origin((0, rows));
    let (width, height) = (w - GAP_X + PAD, h - GAP_Y + PAD);
    html! {
        figure.workflow-graph {
            svg viewBox={ "0 0 " (width) " " (height) } width=(width) height=(height)
                role="img" aria-labelledby="wf-graph-title" {
                title id="wf-graph-title" { "Run " (run.run.id) ": " (run.run.status.as_str()) }
                @for e in &wf.edges {
                    @if let (Some(f), Some(t)) = (at.get(&e.from), at.get(&e.to)) {
                        @let (fx, fy) = origin(*f);
                        @let (tx, ty) = origin(*t);
                        @let (x1, y1, x2, y2) = (fx + NODE_W, fy + NODE_H / 2, tx, ty + NODE_H / 2);
                        line.edge x1=(x1) y1=(y1) x2=(x2) y2=(y2) stroke="currentColor" stroke-opacity="0.5" {}
                        @if e.condition != EdgeCondition::OnSuccess {
                            text.edge-label x=((x1 + x2) / 2) y=((y1 + y2) / 2 - 4) text-anchor="middle" font-size="11" fill="currentColor" {
                                (condition(e.condition))
                            }
                        }
                    }
                }
                @for n in &wf.nodes {
                    @let pos = origin(at.get(&n.id).copied().unwrap_or((0, 0)));
                    @let node = nodes.get(n.id.as_str()).copied();
                    @let state = node_state(node);
                    @let exec = node.and_then(|n| n.execution_id.as_deref());
                    g class={ "wf-node s-" (state) } data-node=(n.id) data-state=(state) {
                        @if let Some(exec) = exec {
                            a href={ "/ui/executions/" (exec) } {
                                (node_box(pos, &n.id, state))
                            }
                        } @else {
                            (node_box(pos, &n.id, state))
                        }
                    }
                }
            }
            figcaption.sr-only { "Each box is a node with its state; arrows run from parent to child." }
        }
    }
}

fn node_box((x, y): (i64, i64), id: &str, state: &str) -> Markup {
    html! {
        rect x=(x) y=(y) width=(NODE_W) height=(NODE_H) rx="6" fill="none" stroke="currentColor" stroke-width="1.5" {}
        svg x=(x + 8) y=(y + 6) width="14" height="14" { (view::icon(state)) }
        text x=(x + 28) y=(y + 18) font-size="13" font-weight="600" fill="currentColor" { (id) }
        text x=(x + 10) y=(y + 36) font-size="12" fill="currentColor" { (state) }
    }
}

/// The name of an edge condition.
pub(crate) fn condition(c: EdgeCondition) -> &'static str {
    match c {
        EdgeCondition::OnSuccess => "onSuccess",
        EdgeCondition::OnFailure => "onFailure",
        EdgeCondition::Always => "always",
    }
}

/// `GET /ui/workflows`: the tenant's workflows, newest first.
pub(crate) async fn list(State(state): State<UiState>, ctx: Ctx) -> Response {
    let page = match state.store.workflows_list(ctx.tenant(), 100, None).await {
        Ok(p) => p.items,
        Err(e) => return view::store_error(e),
    };
    view::page(
        &ctx,
        "Workflows",
        Nav::Workflows,
        html! {
            @if page.is_empty() {
                p.muted { "No workflow yet: create one with " code { "POST /openapi/workflows" } "." }
            } @else {
                table.data {
                    thead { tr { th scope="col" { "Workflow" } th scope="col" .num { "Nodes" } th scope="col" { "Next run" } th scope="col" { "Created" } } }
                    tbody {
                        @for w in &page {
                            tr {
                                th scope="row" { a href={ "/ui/workflows/" (w.id) } { (w.name) } }
                                td.num { (w.definition.nodes.len()) }
                                td { (view::time(w.next_trigger_at)) }
                                td { (view::time(Some(w.created_at))) }
                            }
                        }
                    }
                }
            }
        },
    )
    .into_response()
}

/// `GET /ui/workflows/{id}`: the workflow and its latest runs.
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Response {
    let wf = match state.store.workflow_get(ctx.tenant(), &id).await {
        Ok(Some(wf)) => wf,
        Ok(None) => return view::not_found(&ctx, "workflow"),
        Err(e) => return view::store_error(e),
    };
    let runs = match state
        .store
        .workflow_runs_list(ctx.tenant(), &id, RUNS_SHOWN, None)
        .await
    {
        Ok(p) => p.items,
        Err(e) => return view::store_error(e),
    };
    view::page(
        &ctx,
        &format!("Workflow {}", wf.name),
        Nav::Workflows,
        html! {
            p { "Status " (view::badge(wf.status.as_str())) " · " (wf.definition.nodes.len()) " nodes · created " (view::time(Some(wf.created_at))) }
            @if let Some(next) = wf.next_trigger_at {
                p { "Next run " (view::time(Some(next))) }
            }
            h2 { "Runs" }
            @if runs.is_empty() {
                p.muted { "No run yet." }
            } @else {
                table.data {
                    thead { tr { th scope="col" { "Run" } th scope="col" { "Status" } th scope="col" { "Started" } th scope="col" { "Ended" } } }
                    tbody {
                        @for r in &runs {
                            tr {
                                th scope="row" { a href={ "/ui/workflows/" (wf.id) "/runs/" (r.id) } { code { (r.id) } } }
                                td { (view::badge(r.status.as_str())) }
                                td { (view::time(Some(r.created_at))) }
                                td { (view::time(r.finished_at)) }
                            }
                        }
                    }
                }
            }
        },
    )
    .into_response()
}

/// `GET /ui/workflows/{id}/runs/{run}`: the run drawn as a graph, and its
/// nodes as a table.
pub(crate) async fn run_page(
    State(state): State<UiState>,
    ctx: Ctx,
    Path((id, run_id)): Path<(String, String)>,
) -> Response {
    let wf = match state.store.workflow_get(ctx.tenant(), &id).await {
        Ok(Some(wf)) => wf,
        Ok(None) => return view::not_found(&ctx, "workflow"),
        Err(e) => return view::store_error(e),
    };
    let run = match state
        .store
        .workflow_run_get(ctx.tenant(), &id, &run_id)
        .await
    {
        Ok(Some(r)) => r,
        Ok(None) => return view::not_found(&ctx, "run"),
        Err(e) => return view::store_error(e),
    };
    view::page(
        &ctx,
        &format!("Run of {}", wf.name),
        Nav::Workflows,
        html! {
            p {
                a href={ "/ui/workflows/" (wf.id) } { "Workflow " (wf.name) }
                " · run " code { (run.run.id) } " " (view::badge(run.run.status.as_str()))
            }
            // The graph the run follows: a PATCH since does not redraw it.
            (graph(&run.definition, &run))
            table.data {
                thead { tr {
                    th scope="col" { "Node" } th scope="col" { "State" } th scope="col" { "Execution" }
                    th scope="col" { "Started" } th scope="col" { "Ended" }
                } }
                tbody {
                    @for n in &run.nodes {
                        tr {
                            th scope="row" { (n.node_id) }
                            td { (view::badge(node_state(Some(n)))) }
                            td { @if let Some(e) = &n.execution_id { a href={ "/ui/executions/" (e) } { code { (e) } } } }
                            td { (view::time(n.started_at)) }
                            td { (view::time(n.finished_at)) }
                        }
                    }
                }
            }
        },
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::workflow::{RunStatus, WorkflowRun};

    fn diamond() -> Workflow {
        serde_json::from_value(serde_json::json!({
            "nodes": [{"id": "a", "handler": "h"}, {"id": "b1", "handler": "h"},
                      {"id": "b2", "handler": "h"}, {"id": "c", "handler": "h"}],
            "edges": [{"from": "a", "to": "b1"}, {"from": "a", "to": "b2"},
                      {"from": "b1", "to": "c"}, {"from": "b2", "to": "c", "condition": "always"}]
        }))
        .unwrap()
    }

    #[test]
    fn nodes_sit_in_the_layer_of_their_longest_path() {
        let at = layout(&diamond());
        assert_eq!(at["a"], (0, 0));
        assert_eq!((at["b1"], at["b2"]), ((1, 0), (1, 1)));
        assert_eq!(at["c"], (2, 0));
    }

    #[test]
    fn the_graph_shows_each_state_and_links_executions() {
        let run = RunDetail {
            run: WorkflowRun {
                id: "r".into(),
                workflow_id: "w".into(),
                tenant: "t".into(),
                status: RunStatus::Running,
                scheduled_at: 0,
                created_at: 0,
                finished_at: None,
                definition_version: 1,
            },
            definition: diamond(),
            nodes: vec![RunNode {
                node_id: "a".into(),
                status: NodeStatus::Succeeded,
                execution_id: Some("e-a".into()),
                execution_status: Some(kairos_core::execution::ExecStatus::Succeeded),
                attempt: Some(1),
                decided_at: Some(0),
                started_at: Some(0),
                finished_at: Some(1),
            }],
        };
        let svg = graph(&diamond(), &run).into_string();
        assert!(svg.contains(r#"href="/ui/executions/e-a""#), "{svg}");
        assert!(
            svg.contains(r#"data-node="a" data-state="succeeded""#),
            "{svg}"
        );
        assert!(
            svg.contains(r#"data-node="c" data-state="waiting""#),
            "{svg}"
        );
        assert!(
            svg.contains(">always<"),
            "non-default conditions are labelled"
        );
        assert_eq!(svg.matches("<line").count(), 4);
    }
}
