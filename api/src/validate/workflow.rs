//! `CreateWorkflowRequest` → [`NewWorkflow`]: each node checked like a
//! job's fields (the same limits), then the graph as a DAG
//! ([`Workflow::validate`]), whose errors become `422 invalid_workflow`
//! naming the offending node.

use super::{check_params, group, retry_policy, text, timeout};
use crate::config::ApiConfig;
use crate::dto::CreateWorkflowRequest;
use crate::error::ApiError;
use kairos_core::job::RetryPolicy;
use kairos_core::time::Millis;
use kairos_core::workflow::{DagError, Edge, EdgeCondition, NewWorkflow, NodeSpec, Workflow};
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
    // The node count first: a huge request is refused before any node is read.
    let mut nodes = Vec::with_capacity(req.nodes.len().min(cfg.workflow_max_nodes));
    for n in req
        .nodes
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
    let edges = req
        .edges
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
    if req.nodes.len() > cfg.workflow_max_nodes {
        let node = req.nodes[cfg.workflow_max_nodes].id.clone();
        return Err(dag_error(DagError::TooManyNodes {
            node,
            count: req.nodes.len(),
            max: cfg.workflow_max_nodes,
        }));
    }
    definition
        .validate(cfg.workflow_max_nodes)
        .map_err(dag_error)?;
    let scheduled = req.cron_expr.is_some() || req.every_ms.is_some() || req.trigger_at.is_some();
    let (schedule, next_trigger_at) = if scheduled {
        let fields = super::schedule::Fields {
            cron_expr: req.cron_expr.as_deref(),
            timezone: req.timezone.as_deref(),
            trigger_at: super::schedule::time_field("triggerAt", req.trigger_at.as_deref())?,
            every_ms: req.every_ms,
            ..Default::default()
        };
        let schedule = super::schedule::build(&fields, now)?;
        let first = schedule
            .first_trigger(now)
            .map_err(super::schedule::schedule_error)?;
        (Some(schedule), Some(first))
    } else {
        if req.timezone.is_some() {
            return Err(ApiError::invalid(
                "timezone",
                "timezone applies to cronExpr; set cronExpr too",
            ));
        }
        (None, None)
    };
    let run_now = req.run_now.unwrap_or(!scheduled);
    let fingerprint = json!({
        "name": name,
        "definition": definition,
        "runNow": run_now,
        "schedule": schedule,
        "clientRequestId": req.client_request_id,
    });
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
        created_at: now,
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
        assert!(one.run_now.is_some(), "runs at once by default");
    }
}
