//! `CreateWorkflowRequest` → [`NewWorkflow`]: each node checked like a
//! job's fields (the same limits), then the graph as a DAG
//! ([`Workflow::validate`]), whose errors become `422 invalid_workflow`
//! naming the offending node.

use super::schedule::{Edit, Fields, build, merge, schedule_error, time_field, timing};
use super::{callback_url, check_params, group, retry_policy, text, timeout};
use crate::config::ApiConfig;
use crate::dto::{CreateWorkflowRequest, PatchWorkflowRequest, WorkflowEdge, WorkflowNode};
use crate::error::ApiError;
use kairos_core::job::RetryPolicy;
use kairos_core::schedule::{Schedule, ScheduleError};
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

/// The schedule fields of a create: `None` when none is given, else the
/// schedule (checked as a job's) with its first trigger from `now`.
fn schedule(
    req: &CreateWorkflowRequest,
    now: Millis,
) -> Result<Option<(Schedule, Millis)>, ApiError> {
    let fields = Fields {
        cron_expr: req.cron_expr.as_deref(),
        cron_dialect: req.cron_dialect.as_deref(),
        timezone: req.timezone.as_deref(),
        trigger_at: time_field("triggerAt", req.trigger_at.as_deref())?,
        every_ms: req.every_ms,
        delay_ms: req.delay_ms,
        start_at: time_field("startAt", req.start_at.as_deref())?,
        end_at: time_field("endAt", req.end_at.as_deref())?,
        misfire: req.misfire_policy.as_deref(),
        overlap: req.overlap_policy.as_deref(),
    };
    if !fields.is_recurring() && fields.trigger_at.is_none() {
        for (field, set) in [
            ("timezone", fields.timezone.is_some()),
            ("cronDialect", fields.cron_dialect.is_some()),
        ] {
            if set {
                return Err(ApiError::invalid(
                    field,
                    format!("{field} applies to cronExpr; set cronExpr too"),
                ));
            }
        }
        // No schedule: a window or a policy is refused as for a one-shot job.
        if fields.start_at.is_none()
            && fields.end_at.is_none()
            && fields.misfire.is_none()
            && fields.overlap.is_none()
        {
            return Ok(None);
        }
    }
    let schedule = build(&fields, now)?;
    let first = schedule.first_trigger(now).map_err(schedule_error)?;
    Ok(Some((schedule, first)))
}

/// [`WorkflowUpdate::schedule`]: unchanged, removed, or a schedule with its next trigger.
type ScheduleChange = Option<Option<(Schedule, Option<Millis>)>>;

/// The schedule of a `PATCH` of `wf`: `None` when unchanged, else the new
/// schedule (`None`: removed) with its next trigger. A schedule merges the
/// request as a job's does; its next trigger is recomputed from `now` only
/// when the timing changed (rule, due time or window; not the policies), and
/// is `None` when the window has none left.
fn patched_schedule(
    req: &PatchWorkflowRequest,
    wf: &StoredWorkflow,
    now: Millis,
) -> Result<ScheduleChange, ApiError> {
    let edit = Edit {
        cron_expr: req.cron_expr.as_deref(),
        cron_dialect: req.cron_dialect.as_deref(),
        timezone: req.timezone.as_deref(),
        trigger_at: req.trigger_at.as_deref(),
        every_ms: req.every_ms,
        delay_ms: req.delay_ms,
        start_at: req.start_at.as_ref().map(Option::as_deref),
        end_at: req.end_at.as_ref().map(Option::as_deref),
        misfire: req.misfire_policy.as_deref(),
        overlap: req.overlap_policy.as_deref(),
    };
    let kind_given = edit.cron_expr.is_some()
        || edit.every_ms.is_some()
        || edit.delay_ms.is_some()
        || edit.trigger_at.is_some();
    let named = [
        ("cronExpr", edit.cron_expr.is_some()),
        ("cronDialect", edit.cron_dialect.is_some()),
        ("everyMs", edit.every_ms.is_some()),
        ("delayMs", edit.delay_ms.is_some()),
        ("triggerAt", edit.trigger_at.is_some()),
        ("timezone", edit.timezone.is_some()),
        ("startAt", edit.start_at.is_some()),
        ("endAt", edit.end_at.is_some()),
        ("misfirePolicy", edit.misfire.is_some()),
        ("overlapPolicy", edit.overlap.is_some()),
    ];
    let first_named = named.iter().find(|n| n.1).map(|n| n.0);
    if req.unscheduled == Some(true) {
        if let Some(field) = first_named {
            return Err(ApiError::invalid(
                "unscheduled",
                format!("unscheduled removes the schedule; send it without {field}"),
            ));
        }
        return Ok(Some(None));
    }
    let Some(field) = first_named else {
        return Ok(None);
    };
    let schedule = match &wf.schedule {
        Some(current) => merge(current, &edit, now)?,
        None if !kind_given => {
            return Err(match field {
                "timezone" | "cronDialect" => ApiError::invalid(
                    field,
                    format!("{field} applies to cronExpr; set cronExpr too"),
                ),
                _ => ApiError::invalid(
                    field,
                    format!("{field} applies to recurring jobs; set cronExpr, everyMs or delayMs"),
                ),
            });
        }
        None => merge(&Schedule::Once { at: now }, &edit, now)?,
    };
    let unchanged = wf
        .schedule
        .as_ref()
        .is_some_and(|current| timing(current) == timing(&schedule));
    let next = if unchanged {
        wf.next_trigger_at
    } else {
        match schedule.first_trigger(now) {
            Ok(at) => Some(at),
            Err(ScheduleError::Ended) => None,
            Err(e) => return Err(schedule_error(e)),
        }
    };
    Ok(Some(Some((schedule, next))))
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
    let scheduled = schedule(&req, now)?;
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
    let schedule = patched_schedule(req, wf, now)?;
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

    fn field_of(err: ApiError) -> String {
        match err {
            ApiError::InvalidField { field, .. } => field.to_string(),
            other => panic!("{other:?}"),
        }
    }

    const NODES: &str = r#"[{"id": "a", "handler": "h"}]"#;

    fn with(extra: serde_json::Value) -> serde_json::Value {
        let mut body = json!({"name": "n", "nodes": serde_json::from_str::<serde_json::Value>(NODES).unwrap()});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    }

    #[test]
    fn a_schedule_takes_the_window_and_policies_of_a_job() {
        let wf = check(with(json!({
            "everyMs": 1000, "startAt": "1970-01-01T00:00:05Z", "endAt": "1970-01-01T01:00:00Z",
            "misfirePolicy": "fireAll", "overlapPolicy": "replace"
        })))
        .unwrap();
        let r = wf.schedule.as_ref().and_then(|s| s.recurrence()).unwrap();
        assert_eq!((r.start_at, r.end_at), (Some(5_000), Some(3_600_000)));
        assert_eq!(
            (r.misfire.as_str(), r.overlap.as_str()),
            ("fireAll", "replace")
        );
        assert_eq!(wf.next_trigger_at, Some(5_000), "not before startAt");
        // Refused as for a job, naming the field.
        for (body, field) in [
            (json!({"misfirePolicy": "skip"}), "misfirePolicy"),
            (json!({"startAt": "1970-01-01T00:00:05Z"}), "startAt"),
            (
                json!({"triggerAt": "1970-01-01T00:00:05Z", "overlapPolicy": "forbid"}),
                "overlapPolicy",
            ),
            (
                json!({"everyMs": 1000, "misfirePolicy": "fire_once"}),
                "misfirePolicy",
            ),
            (
                json!({"everyMs": 1000, "overlapPolicy": "Allow"}),
                "overlapPolicy",
            ),
            (json!({"everyMs": 1000, "endAt": "soon"}), "endAt"),
            (
                json!({"everyMs": 1000, "startAt": "1970-01-01T01:00:00Z", "endAt": "1970-01-01T00:00:01Z"}),
                "endAt",
            ),
            (json!({"delayMs": 99}), "delayMs"),
            (json!({"delayMs": 1000, "everyMs": 1000}), "delayMs"),
        ] {
            let got = match serde_json::from_value::<CreateWorkflowRequest>(with(body.clone())) {
                Ok(r) => field_of(
                    new_workflow(r, &ApiConfig::default(), "t", "w".into(), 0).unwrap_err(),
                ),
                Err(_) => "unknown".to_string(),
            };
            assert_eq!(got, field, "{body}");
        }
    }

    fn stored(schedule: Option<Schedule>, next: Option<Millis>) -> StoredWorkflow {
        let new = check(with(json!({}))).unwrap();
        StoredWorkflow {
            id: "w".into(),
            tenant: "t".into(),
            name: "n".into(),
            definition: new.definition,
            node_jobs: Default::default(),
            status: kairos_core::workflow::WorkflowStatus::Active,
            callback_url: None,
            version: 1,
            definition_version: 1,
            schedule,
            next_trigger_at: next,
            client_request_id: None,
            request_hash: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn patch(wf: &StoredWorkflow, body: serde_json::Value) -> Result<WorkflowUpdate, ApiError> {
        let mut body = body;
        body["version"] = json!(1);
        let req: PatchWorkflowRequest = serde_json::from_value(body).unwrap();
        update(&req, wf, &ApiConfig::default(), 10_000)
    }

    #[test]
    fn a_patch_merges_the_schedule_as_a_job_patch_does() {
        let every = Schedule::every(1000);
        let wf = stored(Some(every.clone()), Some(3_000));
        // A policy alone keeps the rule and the pending trigger.
        let up = patch(
            &wf,
            json!({"overlapPolicy": "forbid", "misfirePolicy": "skip"}),
        )
        .unwrap();
        let (s, next) = up.schedule.unwrap().unwrap();
        let r = s.recurrence().unwrap();
        assert_eq!(
            (r.misfire.as_str(), r.overlap.as_str(), next),
            ("skip", "forbid", Some(3_000))
        );
        // A window moves the next trigger; policies are kept with a new rule.
        let mut forbid = wf.clone();
        forbid.schedule = Some(s);
        let up = patch(&forbid, json!({"startAt": "1970-01-01T00:01:00Z"})).unwrap();
        assert_eq!(
            up.schedule.as_ref().unwrap().as_ref().unwrap().1,
            Some(60_000)
        );
        let up = patch(&forbid, json!({"cronExpr": "0 * * * * *"})).unwrap();
        let (s, next) = up.schedule.unwrap().unwrap();
        assert_eq!(s.recurrence().unwrap().overlap.as_str(), "forbid");
        assert_eq!(next, Some(60_000));
        // A window with no trigger left is accepted: no next trigger.
        let up = patch(&forbid, json!({"endAt": "1970-01-01T00:00:01Z"})).unwrap();
        assert_eq!(up.schedule.unwrap().unwrap().1, None);
        // `null` removes the window.
        let up = patch(&forbid, json!({"startAt": null})).unwrap();
        assert_eq!(
            up.schedule
                .unwrap()
                .unwrap()
                .0
                .recurrence()
                .unwrap()
                .start_at,
            None
        );
        // Nothing named: unchanged.
        assert_eq!(patch(&forbid, json!({"name": "x"})).unwrap().schedule, None);
        // Refusals, naming the field.
        let none = stored(None, None);
        for (wf, body, field) in [
            (&none, json!({"misfirePolicy": "skip"}), "misfirePolicy"),
            (&none, json!({"endAt": null}), "endAt"),
            (&none, json!({"timezone": "UTC"}), "timezone"),
            (
                &forbid,
                json!({"overlapPolicy": "sometimes"}),
                "overlapPolicy",
            ),
            (
                &forbid,
                json!({"overlapPolicy": "allow", "unscheduled": true}),
                "unscheduled",
            ),
            (
                &forbid,
                json!({"triggerAt": "1970-01-01T00:01:00Z", "misfirePolicy": "skip"}),
                "misfirePolicy",
            ),
        ] {
            assert_eq!(
                field_of(patch(wf, body.clone()).unwrap_err()),
                field,
                "{body}"
            );
        }
        // A fixed delay replaces the rule and keeps the policies; its first
        // trigger is now.
        let up = patch(&forbid, json!({"delayMs": 500})).unwrap();
        let (s, next) = up.schedule.unwrap().unwrap();
        assert_eq!(
            s.recurrence().map(|r| (r.rule.clone(), r.overlap.as_str())),
            Some((
                kairos_core::schedule::Rule::Delay { delay_ms: 500 },
                "forbid"
            ))
        );
        assert_eq!(next, Some(10_000));
        // An unscheduled workflow takes a whole schedule.
        let up = patch(&none, json!({"everyMs": 1000, "overlapPolicy": "replace"})).unwrap();
        let (s, next) = up.schedule.unwrap().unwrap();
        assert_eq!(
            (s.recurrence().unwrap().overlap.as_str(), next),
            ("replace", Some(10_000))
        );
    }
}
