//! What the dashboard shows of a job's sensitive params: masked for every
//! role (see [`kairos_core::sensitive`]), and redacted from its executions'
//! outputs, errors and callback errors. A write key that needs the stored
//! values reads them through the API; an edit made on the masked params
//! keeps every value left masked (the API puts the stored one back).

use crate::UiState;
use kairos_core::callback::{Callback, CallbackAttempt};
use kairos_core::execution::Execution;
use kairos_core::job::Job;
use kairos_core::sensitive::{Redactor, Rules};
use serde_json::Value;

/// `job`'s params as shown.
pub(crate) fn params(state: &UiState, job: &Job) -> Value {
    Rules::new(&state.sensitive, &job.sensitive_params).mask(&job.params)
}

/// `job` with its params as shown (for forms that echo them).
pub(crate) fn masked(state: &UiState, mut job: Job) -> Job {
    job.params = params(state, &job);
    job
}

/// What hides `job`'s sensitive values in text shown with it.
pub(crate) fn redactor(state: &UiState, job: &Job) -> Redactor {
    Rules::new(&state.sensitive, &job.sensitive_params).redactor(&job.params)
}

/// An execution with its output and error redacted.
pub(crate) fn execution(r: &Redactor, mut e: Execution) -> Execution {
    e.output = e.output.map(|o| r.json(&o));
    e.error = r.opt_text(e.error);
    e
}

/// A callback delivery and its attempts with their errors redacted.
pub(crate) fn callback(
    r: &Redactor,
    (mut cb, attempts): (Callback, Vec<CallbackAttempt>),
) -> (Callback, Vec<CallbackAttempt>) {
    cb.last_error = r.opt_text(cb.last_error);
    let attempts = attempts
        .into_iter()
        .map(|mut a| {
            a.error = r.opt_text(a.error);
            a
        })
        .collect();
    (cb, attempts)
}
