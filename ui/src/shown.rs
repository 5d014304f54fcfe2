//! What the dashboard shows of a job's sensitive params: masked for every
//! role (see [`kairos_core::sensitive`]), and redacted from its executions'
//! outputs, errors, events, log lines and callback errors, wherever a page,
//! a live region, the log tail or an export shows them. A write key that
//! needs the stored values reads them through the API; an edit made on the
//! masked params keeps every value left masked (the API puts the stored one
//! back).

use crate::UiState;
use kairos_core::callback::{Callback, CallbackAttempt};
use kairos_core::execution::{ExecEvent, Execution};
use kairos_core::job::Job;
use kairos_core::sensitive::{Redactor, Rules, SensitiveKeys};
use kairos_core::store::StoredLogLine;
use serde_json::Value;
use std::collections::HashMap;

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
    redactor_for(&state.sensitive, Some(job))
}

/// What hides the sensitive values of `job` (with the configured `keys`),
/// for code that holds the keys rather than the state (the export's
/// stream). Without the job (not found) there are no values to look for,
/// but values under sensitive key names in JSON outputs are still masked.
pub(crate) fn redactor_for(keys: &SensitiveKeys, job: Option<&Job>) -> Redactor {
    match job {
        Some(j) => Rules::new(keys, &j.sensitive_params).redactor(&j.params),
        None => Redactor::new(Vec::new(), keys.clone()),
    }
}

/// An execution with its output and error redacted.
pub(crate) fn execution(r: &Redactor, mut e: Execution) -> Execution {
    e.output = e.output.map(|o| r.json(&o));
    e.error = r.opt_text(e.error);
    e
}

/// Executions of any jobs, each redacted with its own job's values
/// (`jobs` by id; one redactor per job).
pub(crate) fn executions(
    state: &UiState,
    jobs: &HashMap<String, Job>,
    items: Vec<Execution>,
) -> Vec<Execution> {
    let mut redactors: HashMap<String, Redactor> = HashMap::new();
    items
        .into_iter()
        .map(|e| {
            let r = redactors
                .entry(e.job_id.clone())
                .or_insert_with(|| redactor_for(&state.sensitive, jobs.get(&e.job_id)));
            execution(r, e)
        })
        .collect()
}

/// A recorded transition with its error redacted.
pub(crate) fn event(r: &Redactor, mut ev: ExecEvent) -> ExecEvent {
    ev.error = r.opt_text(ev.error);
    ev
}

/// A log line with its message redacted.
pub(crate) fn log_line(r: &Redactor, mut l: StoredLogLine) -> StoredLogLine {
    l.message = r.text(&l.message);
    l
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
