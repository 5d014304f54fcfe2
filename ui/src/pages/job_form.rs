//! The fields of the job forms, New job's and Edit's alike: every field
//! with its label, hint and, when the API refused it, its error beside it;
//! the schedule kinds; and the live preview of the next fire times.

use super::new_job::FieldError;
use crate::forms::Fields;
use maud::{Markup, html};

/// Schedule kinds a new job may have, with their labels.
pub(crate) const NEW_KINDS: [(&str, &str); 5] = [
    ("now", "Now (once)"),
    ("at", "At a time (once)"),
    ("cron", "Cron"),
    ("every", "Every (fixed rate)"),
    ("delay", "Delay after each run"),
];

/// Schedule kinds an edit may set: "now" is a create's (an edit can move a
/// one-shot's time, or trigger it from the job page).
pub(crate) const EDIT_KINDS: [(&str, &str); 4] = [
    ("at", "At a time (once)"),
    ("cron", "Cron"),
    ("every", "Every (fixed rate)"),
    ("delay", "Delay after each run"),
];

/// An input with its label and, when the API refused it, its error.
pub(crate) fn input(
    form: &Fields,
    error: Option<&FieldError>,
    name: &str,
    label: &str,
    kind: &str,
    hint: Option<&str>,
) -> Markup {
    let bad = error.and_then(|e| e.field.as_deref()) == Some(name);
    let described = match (bad, hint.is_some()) {
        (true, _) => Some(format!("{name}-error")),
        (false, true) => Some(format!("{name}-hint")),
        _ => None,
    };
    html! {
        div.field {
            label for=(name) { (label) }
            input id=(name) name=(name) type=(kind) value=(form.get(name))
                aria-invalid=[bad.then_some("true")] aria-describedby=[described];
            @if bad { p.field-error id={ (name) "-error" } { (error.map(|e| e.message.as_str()).unwrap_or("")) } }
            @else if let Some(h) = hint { p.hint id={ (name) "-hint" } { (h) } }
        }
    }
}

pub(crate) fn select(form: &Fields, name: &str, label: &str, options: &[(&str, &str)]) -> Markup {
    html! {
        div.field {
            label for=(name) { (label) }
            select id=(name) name=(name) {
                @for (v, l) in options { option value=(v) selected[form.get(name) == *v] { (l) } }
            }
        }
    }
}

/// The params textarea, checked as JSON while typing.
pub(crate) fn params_field(form: &Fields, error: Option<&FieldError>, rows: u32) -> Markup {
    let bad = error.and_then(|e| e.field.as_deref()) == Some("params");
    html! {
        div.field {
            label for="params" { "Params (JSON)" }
            textarea id="params" name="params" rows=(rows) spellcheck="false" data-json=""
                aria-invalid=[bad.then_some("true")] aria-describedby="params-error" { (form.get("params")) }
            p.field-error id="params-error" aria-live="polite" {
                @if bad { (error.map(|e| e.message.as_str()).unwrap_or("")) }
            }
        }
    }
}

/// The extra params paths the job marks sensitive (masked like the keys
/// the server masks by name).
pub(crate) fn sensitive_field(form: &Fields, error: Option<&FieldError>) -> Markup {
    input(
        form,
        error,
        "sensitiveParams",
        "Also masked (params paths)",
        "text",
        Some(
            "Optional, comma-separated, e.g. headers.X-Custom, accounts.*.pin. Keys the server masks by name (by default authorization, password, secret, token, api_key, cookie) are masked anyway. Workers get the real values.",
        ),
    )
}

/// New job's fields: name, handler (suggesting the handlers the workers
/// announce), params, then the schedule and delivery fields.
pub(crate) fn job_fields(form: &Fields, error: Option<&FieldError>, handlers: &[String]) -> Markup {
    let bad = |n: &str| error.and_then(|e| e.field.as_deref()) == Some(n);
    html! {
        fieldset {
            legend { "Job" }
            (input(form, error, "jobName", "Name", "text", None))
            div.field {
                label for="jobHandler" { "Handler" }
                input id="jobHandler" name="jobHandler" type="text" list="handlers" value=(form.get("jobHandler"))
                    aria-invalid=[bad("jobHandler").then_some("true")] aria-describedby="jobHandler-hint";
                datalist id="handlers" { @for h in handlers { option value=(h) {} } }
                @if bad("jobHandler") { p.field-error { (error.map(|e| e.message.as_str()).unwrap_or("")) } }
                p.hint id="jobHandler-hint" { "Handlers the workers announce: " (if handlers.is_empty() { "none yet".to_string() } else { handlers.join(", ") }) }
            }
            (params_field(form, error, 4))
            (sensitive_field(form, error))
        }
        (schedule_fields(form, error, &NEW_KINDS))
        (delivery_fields(form, error))
        (execution_fields(form, error))
    }
}

/// How many executions each trigger makes; fixed when the job is created.
fn execution_fields(form: &Fields, error: Option<&FieldError>) -> Markup {
    html! {
        fieldset {
            legend { "Executions per trigger" }
            (select(form, "executionMode", "Execution mode", &[("single", "single: one, on the least-loaded worker"), ("broadcast", "broadcast: one on every live worker"), ("sharded", "sharded: a shard count of executions")]))
            (input(form, error, "shardCount", "Shard count", "number", Some("For “sharded” only: 1–1024 executions, each told its index.")))
        }
    }
}

/// The schedule: its kind (one of `kinds`), the kind's own field, time
/// zone, window and policies (the page's script shows the fields of the
/// chosen kind).
pub(crate) fn schedule_fields(
    form: &Fields,
    error: Option<&FieldError>,
    kinds: &[(&str, &str)],
) -> Markup {
    let first = kinds.first().map_or("now", |(k, _)| *k);
    let kind = Some(form.get("kind"))
        .filter(|k| kinds.iter().any(|(v, _)| v == k))
        .unwrap_or(first);
    html! {
        fieldset.schedule {
            legend { "Schedule" }
            div.radios role="radiogroup" aria-label="Schedule kind" {
                @for (v, l) in kinds {
                    label.radio { input type="radio" name="kind" value=(v) checked[kind == *v]; " " (l) }
                }
            }
            div.kind-fields {
                (input(form, error, "triggerAt", "Run at (in the time zone below)", "datetime-local", Some("For “At a time”.")))
                (input(form, error, "cronExpr", "Cron expression", "text", Some("For “Cron”: 5 fields, or 6 with seconds first, e.g. */10 * * * * *")))
                (input(form, error, "everyMs", "Every (ms)", "number", Some("For “Every”: 100 ms to 366 days.")))
                (input(form, error, "delayMs", "Delay (ms)", "number", Some("For “Delay”: after each execution ends.")))
                (input(form, error, "timezone", "Time zone", "text", Some("IANA name, e.g. Europe/Berlin (default UTC).")))
                (input(form, error, "startAt", "Not before", "datetime-local", Some("Recurring only, optional.")))
                (input(form, error, "endAt", "Not after", "datetime-local", Some("Recurring only, optional.")))
                (select(form, "misfirePolicy", "Misfire policy (recurring)", &[("", "default (fireOnce)"), ("fireOnce", "fireOnce"), ("skip", "skip"), ("fireAll", "fireAll")]))
                (select(form, "overlapPolicy", "Overlap policy (recurring)", &[("", "default (allow)"), ("allow", "allow"), ("forbid", "forbid"), ("replace", "replace")]))
            }
        }
    }
}

/// Retries, time limit, callback, worker group and concurrency limit.
pub(crate) fn delivery_fields(form: &Fields, error: Option<&FieldError>) -> Markup {
    html! {
        fieldset {
            legend { "Delivery and retries" }
            (input(form, error, "maxAttempts", "Attempts in all", "number", Some("1–100, including the first.")))
            (input(form, error, "retryBackoffMs", "Retry backoff (ms)", "number", Some("Default 1000; doubles each retry.")))
            (input(form, error, "timeoutMs", "Timeout (ms)", "number", Some("Optional: the worker stops the handler after this long.")))
            (input(form, error, "callbackUrl", "Callback URL", "url", Some("Optional: receives each execution's outcome.")))
            (input(form, error, "workerGroup", "Worker group", "text", Some("Optional: only workers of this group run it.")))
            (input(form, error, "priority", "Priority", "number", Some("0–9, default 5: higher goes first when more is due than can start at once.")))
            (input(form, error, "maxConcurrency", "Max concurrency", "number", Some("Optional, 1–100000: at most this many of its executions at once; the rest wait.")))
        }
    }
}

/// The live preview of the next fire times of the form `form_id`, computed
/// by the API as the operator types (`POST /ui/jobs/preview`).
pub(crate) fn preview_pane(form_id: &str) -> Markup {
    html! {
        aside.card.preview-pane aria-labelledby="preview-h" {
            h2 id="preview-h" { "Next fire times" }
            p.hint { "Computed by the API from the schedule as you type; shown in the job's time zone." }
            div id="preview" aria-live="polite" hx-post="/ui/jobs/preview" hx-include={ "#" (form_id) }
                hx-trigger={ "load, input from:#" (form_id) " delay:300ms, change from:#" (form_id) } hx-swap="innerHTML" {
                p.muted { "Computing…" }
            }
        }
    }
}
