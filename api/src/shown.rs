//! What a caller is shown of a job's sensitive params (see
//! [`kairos_core::sensitive`]). Read keys get them masked in the job and
//! redacted from its executions' outputs, errors and log lines; write,
//! admin and operator keys get the stored values, since they edit and copy
//! jobs through the API and must be able to send the values back. Workers
//! read params from the store, never through here.

use crate::AppState;
use crate::auth::Caller;
use crate::dto::{ExecEventView, ExecutionView, JobView, LogLineView};
use kairos_core::job::Job;
use kairos_core::sensitive::{Redactor, Rules};
use kairos_core::tenant::Role;

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

/// What hides `job`'s sensitive values from `caller`'s view of its
/// executions; `None` when the caller sees them.
pub(crate) fn redactor(state: &AppState, caller: &Caller, job: &Job) -> Option<Redactor> {
    (!reveals(caller))
        .then(|| Rules::new(&state.sensitive, &job.sensitive_params).redactor(&job.params))
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
