//! `CreateWorkflowRequest` → [`NewWorkflow`]: each node checked like a
//! job's fields (the same limits), then the graph as a DAG
//! ([`Workflow::validate`]), whose errors become `422 invalid_workflow`
//! naming the offending node.

use super::{callback_url, check_params, group, retry_policy, text, timeout};
use crate::config::ApiConfig;
use crate::dto::{CreateWorkflowRequest, PatchWorkflowRequest, WorkflowEdge, WorkflowNode};
use crate::error::ApiError;
use kairos_core::job::RetryPolicy;
use kairos_core::schedule::Schedule;
use kairos_core::time::Millis;
use kairos_core::workflow::{
    DagError, Edge, EdgeCondition, NewWorkflow, NodeSpec, StoredWorkflow, Workflow, WorkflowUpdate,
};
use serde_json::json;

/// A workflow's graph error as the API answers it.
pub(crate) fn dag_error(e: DagError) -> ApiError {
    ApiError::InvalidWorkflow {
        node: e.node().map(str::to_string),
        reason: e.code(),
        message: e.to_string(),
    }
}

fn condition(raw: Option<&str>) -> Result<EdgeCondition, ApiError> {
    match raw {
        None | Some("onSuccess") => Ok(EdgeCondition::OnSuccess),
        Some("onFailure") => Ok(EdgeCondition::OnFailure),
        Some("always") => Ok(EdgeCondition::Always),
        Some(other) => Err(ApiError::invalid(
            "edges.condition",
            format!("condition {other:?} is not one of onSuccess, onFailure, always"),
        )),
    }
}

/// Checks nodes and edges and builds the graph: each node like a job's
/// fields, then the whole as a DAG.
fn definition(
    req_nodes: &[WorkflowNode],
    req_edges: &[WorkflowEdge],
    cfg: &ApiConfig,
) -> Result<Workflow, ApiError> {
    // The node count first: a huge request is refused before any node is read.
    let mut nodes = Vec::with_capacity(req_nodes.len().min(cfg.workflow_max_nodes));
    for n in req_nodes
        .iter()
        .take(cfg.workflow_max_nodes.saturating_add(1))
    {
        text("nodes.handler", &n.handler, 255)?;
        check_params(&n.params, cfg)?;
        let retry = retry_policy(n.max_attempts, n.retry_backoff_ms, RetryPolicy::default())?;
        nodes.push(NodeSpec {
            id: n.id.clone(),
            handler: n.handler.clone(),
            params: n.params.clone(),
            timeout_ms: n.timeout_ms.map(timeout).transpose()?,
            max_attempts: retry.max_attempts,
            retry_backoff_ms: retry.backoff_ms,
            worker_group: n.worker_group.as_deref().map(group).transpose()?,
        });
    }
    let edges = req_edges
        .iter()
        .map(|e| {
            Ok(Edge {
                from: e.from.clone(),
                to: e.to.clone(),
                condition: condition(e.condition.as_deref())?,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let definition = Workflow { nodes, edges };
    if req_nodes.len() > cfg.workflow_max_nodes {
        let node = req_nodes[cfg.workflow_max_nodes].id.clone();
        return Err(dag_error(DagError::TooManyNodes {
            node,
            count: req_nodes.len(),
            max: cfg.workflow_max_nodes,
        }));
    }
    definition
        .validate(cfg.workflow_max_nodes)
        .map_err(dag_error)?;
    Ok(definition)
}

/// The schedule fields of a create or `PATCH`: `None` when none is given,
/// else the schedule with its first trigger from `now`.
fn schedule(
    cron_expr: Option<&str>,
    timezone: Option<&str>,
    every_ms: Option<i64>,
    trigger_at: Option<&str>,
    now: Millis,
) -> Result<Option<(Schedule, Millis)>, ApiError> {
    if cron_expr.is_none() && every_ms.is_none() && trigger_at.is_none() {
        if timezone.is_some() {
            return Err(ApiError::invalid(
                "timezone",
                "timezone applies to cronExpr; set cronExpr too",
            ));
        }
        return Ok(None);
    }
    let fields = super::schedule::Fields {
        cron_expr,
        timezone,
        trigger_at: super::schedule::time_field("triggerAt", trigger_at)?,
        every_ms,
        ..Default::default()
    };
    let schedule = super::schedule::build(&fields, now)?;
    let first = schedule
        .first_trigger(now)
        .map_err(super::schedule::schedule_error)?;
    Ok(Some((schedule, first)))
}

/// Checks a create request and builds the workflow to store.
pub(crate) fn new_workflow(
    req: CreateWorkflowRequest,
    cfg: &ApiConfig,
    tenant: &str,
    id: String,
    now: Millis,
) -> Result<NewWorkflow, ApiError> {
    let name = text("name", &req.name, 255)?.to_string();
    if let Some(key) = &req.client_request_id {
        text("clientRequestId", key, 128)?;
    }
    let definition = definition(&req.nodes, &req.edges, cfg)?;
    let scheduled = schedule(
        req.cron_expr.as_deref(),
        req.timezone.as_deref(),
        req.every_ms,
        req.trigger_at.as_deref(),
        now,
    )?;
    let callback_url = req.callback_url.as_deref().map(callback_url).transpose()?;
    let (schedule, next_trigger_at) = match scheduled {
        Some((s, first)) => (Some(s), Some(first)),
        None => (None, None),
    };
    let run_now = req.run_now.unwrap_or(schedule.is_none());
    let mut fingerprint = json!({
        "name": name,
        "definition": definition,
        "runNow": run_now,
        "schedule": schedule,
        "clientRequestId": req.client_request_id,
    });
    // Only when given: a create fingerprinted before callbacks existed
    // still matches its replay.
    if let Some(url) = &callback_url {
        fingerprint["callbackUrl"] = json!(url);
    }
    Ok(NewWorkflow {
        id,
        tenant: tenant.to_string(),
        name,
        request_hash: Some(super::request_hash(&fingerprint)),
        definition,
        client_request_id: req.client_request_id,
        run_now: run_now.then(|| uuid::Uuid::now_v7().to_string()),
        schedule,
        next_trigger_at,
        callback_url,
        created_at: now,
    })
}

/// Checks a `PATCH` of `wf` and builds the change: new nodes or edges are
/// checked together with the other half as it is (the new one, or the
/// current one), as a whole graph.
pub(crate) fn update(
    req: &PatchWorkflowRequest,
    wf: &StoredWorkflow,
    cfg: &ApiConfig,
    now: Millis,
) -> Result<WorkflowUpdate, ApiError> {
    let name = req
        .name
        .as_deref()
        .map(|n| text("name", n, 255).map(str::to_string))
        .transpose()?;
    let definition = if req.nodes.is_some() || req.edges.is_some() {
        let view = crate::dto::WorkflowView::from(wf);
        let nodes = req.nodes.as_ref().unwrap_or(&view.nodes);
        let edges = req.edges.as_ref().unwrap_or(&view.edges);
        Some(definition(nodes, edges, cfg)?)
    } else {
        None
    };
    let scheduled = schedule(
        req.cron_expr.as_deref(),
        req.timezone.as_deref(),
        req.every_ms,
        req.trigger_at.as_deref(),
        now,
    )?;
    let schedule = match (scheduled, req.unscheduled) {
        (Some(_), Some(true)) => {
            return Err(ApiError::invalid(
                "unscheduled",
                "unscheduled removes the schedule; send it without cronExpr, everyMs or triggerAt",
            ));
        }
        (Some(s), _) => Some(Some(s)),
        (None, Some(true)) => Some(None),
        (None, _) => None,
    };
    let callback_url = match &req.callback_url {
        Some(Some(raw)) => Some(Some(callback_url(raw)?)),
        Some(None) => Some(None),
        None => None,
    };
    Ok(WorkflowUpdate {
        name,
        definition,
        schedule,
        callback_url,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: serde_json::Value) -> CreateWorkflowRequest {
        serde_json::from_value(body).unwrap()
    }

    fn check(body: serde_json::Value) -> Result<NewWorkflow, ApiError> {
        new_workflow(req(body), &ApiConfig::default(), "t", "w".into(), 0)
    }

    #[test]
    fn a_cycle_is_refused_naming_a_node_on_it() {
        let err = check(json!({"name": "n", "nodes": [
            {"id": "a", "handler": "h"}, {"id": "b", "handler": "h"}],
            "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "a"}]}))
        .unwrap_err();
        match err {
            ApiError::InvalidWorkflow { node, reason, .. } => {
                assert_eq!(reason, "cycle");
                assert!(matches!(node.as_deref(), Some("a" | "b")));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn too_many_nodes_name_the_first_one_past_the_limit() {
        let cfg = ApiConfig {
            workflow_max_nodes: 2,
            ..ApiConfig::default()
        };
        let r = req(json!({"name": "n", "nodes": [
            {"id": "a", "handler": "h"}, {"id": "b", "handler": "h"}, {"id": "c", "handler": "h"}]}));
        let err = new_workflow(r, &cfg, "t", "w".into(), 0).unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidWorkflow { node: Some(ref n), reason: "too_many_nodes", .. } if n == "c")
        );
    }

    #[test]
    fn nodes_are_checked_like_jobs_and_the_hash_ignores_key_order() {
        assert!(
            check(json!({"name": "n", "nodes": [{"id": "a", "handler": "h", "maxAttempts": 0}]}))
                .is_err()
        );
        assert!(check(json!({"name": "n", "nodes": [{"id": "a", "handler": ""}]})).is_err());
        let bad = check(json!({"name": "n", "nodes": [{"id": "a", "handler": "h"}],
            "edges": [{"from": "a", "to": "a", "condition": "sometimes"}]}));
        assert!(matches!(bad, Err(ApiError::InvalidField { .. })));
        let one = check(json!({"name": "n", "nodes": [{"id": "a", "handler": "h", "params": {"x": 1, "y": 2}}]})).unwrap();
        let two = check(json!({"nodes": [{"params": {"y": 2, "x": 1}, "handler": "h", "id": "a"}], "name": "n"})).unwrap();
        assert_eq!(one.request_hash, two.request_hash);
        let hooked = check(
            json!({"name": "n", "nodes": [{"id": "a", "handler": "h", "params": {"x": 1, "y": 2}}],
            "callbackUrl": "https://example.com/runs"}),
        )
        .unwrap();
        assert_ne!(
            hooked.request_hash, one.request_hash,
            "the callback URL is part of the request"
        );
        assert!(one.run_now.is_some(), "runs at once by default");
    }
}
