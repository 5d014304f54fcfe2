//! What a caller is shown of a job's or a workflow node's sensitive params
//! (see [`kairos_core::sensitive`]). Read keys get them masked in the job,
//! in the workflow's nodes, and redacted from executions' outputs, errors,
//! events, log lines and callback errors, in every route that shows them; write,
//! admin and operator keys get the stored values, since they edit and copy
//! jobs through the API and must be able to send the values back. Workers
//! read params from the store, never through here.

use crate::AppState;
use crate::auth::Caller;
use crate::dto::{
    CallbackView, ExecEventView, ExecutionView, JobView, LogLineView, WorkflowPage, WorkflowView,
};
use crate::error::ApiError;
use kairos_core::job::Job;
use kairos_core::sensitive::{Redactor, Rules};
use kairos_core::store::Page;
use kairos_core::tenant::Role;
use kairos_core::workflow::StoredWorkflow;

/// Whether `caller` is shown the stored values.
pub(crate) fn reveals(caller: &Caller) -> bool {
    caller.role.allows(Role::Write)
}

/// `job` as `caller` may see it.
pub(crate) fn job(state: &AppState, caller: &Caller, job: Job) -> JobView {
    let mut view = JobView::from(job);
    if !reveals(caller) {
        view.params = Rules::new(&state.sensitive, &view.sensitive_params).mask(&view.params);
    }
    view
}

/// `wf` as `caller` may see it: each node's params masked as a job's are
/// (nodes have no `sensitiveParams`; the configured names apply).
pub(crate) fn workflow(state: &AppState, caller: &Caller, wf: &StoredWorkflow) -> WorkflowView {
    let mut view = WorkflowView::from(wf);
    if !reveals(caller) {
        let rules = Rules::new(&state.sensitive, &[]);
        // One node's secret pasted into another is hidden there too.
        let all = serde_json::Value::Array(view.nodes.iter().map(|n| n.params.clone()).collect());
        let copies = rules.redactor(&all);
        for node in &mut view.nodes {
            node.params = rules.mask_with(&node.params, &copies);
        }
    }
    view
}

/// A page of workflows as `caller` may see them.
pub(crate) fn workflow_page(
    state: &AppState,
    caller: &Caller,
    page: Page<StoredWorkflow>,
) -> WorkflowPage {
    WorkflowPage {
        items: page
            .items
            .iter()
            .map(|wf| workflow(state, caller, wf))
            .collect(),
        next_cursor: page.next_cursor,
    }
}

/// What hides `job`'s sensitive values from `caller`'s view of its
/// executions; `None` when the caller sees them.
pub(crate) fn redactor(state: &AppState, caller: &Caller, job: &Job) -> Option<Redactor> {
    (!reveals(caller))
        .then(|| Rules::new(&state.sensitive, &job.sensitive_params).redactor(&job.params))
}

/// The redactor of the job `job_id` of the caller's tenant, looked up only
/// when the caller does not see the values (routes that start from an
/// execution or a callback).
pub(crate) async fn redactor_of(
    state: &AppState,
    caller: &Caller,
    job_id: &str,
) -> Result<Option<Redactor>, ApiError> {
    if reveals(caller) {
        return Ok(None);
    }
    Ok(state
        .store
        .job_get(&caller.tenant, job_id)
        .await?
        .and_then(|job| redactor(state, caller, &job)))
}

/// An execution's output and error with `redactor` applied.
pub(crate) fn execution(redactor: Option<&Redactor>, mut view: ExecutionView) -> ExecutionView {
    if let Some(r) = redactor {
        view.output = view.output.map(|o| r.json(&o));
        view.error = r.opt_text(view.error);
    }
    view
}

/// An execution event's error with `redactor` applied.
pub(crate) fn event(redactor: Option<&Redactor>, mut view: ExecEventView) -> ExecEventView {
    if let Some(r) = redactor {
        view.error = r.opt_text(view.error);
    }
    view
}

/// A log line with `redactor` applied.
pub(crate) fn log_line(redactor: Option<&Redactor>, mut view: LogLineView) -> LogLineView {
    if let Some(r) = redactor {
        view.message = r.text(&view.message);
    }
    view
}

/// A callback delivery's errors (the last one and each attempt's) with
/// `redactor` applied: a receiver may answer with the body it was sent.
pub(crate) fn callback(redactor: Option<&Redactor>, mut view: CallbackView) -> CallbackView {
    if let Some(r) = redactor {
        view.last_error = r.opt_text(view.last_error);
        for a in &mut view.attempts_log {
            a.error = r.opt_text(a.error.take());
        }
    }
    view
}
