//! Editing a job: a form at the version read, sent as a `PATCH` with only
//! the fields the operator changed. A version conflict (someone changed the
//! job meanwhile) keeps the operator's edits on screen beside the job as it
//! is now, to be applied again on top of it or dropped.

use super::job_form::input;
use super::new_job::FieldError;
use crate::UiState;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use kairos_core::job::Job;
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::time::to_rfc3339;
use maud::html;
use serde_json::{Map, Value, json};

/// Editable fields: (form and API name, label, input type).
const FIELDS: [(&str, &str, &str); 11] = [
    ("cronExpr", "Cron expression", "text"),
    ("timezone", "Time zone", "text"),
    ("everyMs", "Every (ms)", "number"),
    ("delayMs", "Delay (ms)", "number"),
    ("triggerAt", "Run at (RFC 3339)", "text"),
    ("maxAttempts", "Attempts in all", "number"),
    ("retryBackoffMs", "Retry backoff (ms)", "number"),
    ("timeoutMs", "Timeout (ms, empty: none)", "number"),
    ("callbackUrl", "Callback URL (empty: none)", "url"),
    ("workerGroup", "Worker group (empty: any)", "text"),
    (
        "sensitiveParams",
        "Also masked: params paths (comma-separated)",
        "text",
    ),
];

/// Fields that `null` clears.
const CLEARABLE: [&str; 3] = ["timeoutMs", "callbackUrl", "workerGroup"];
/// Fields sent as numbers.
const NUMBERS: [&str; 5] = [
    "everyMs",
    "delayMs",
    "maxAttempts",
    "retryBackoffMs",
    "timeoutMs",
];

/// The job's current values as form fields.
fn values(job: &Job) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    match &job.schedule {
        Schedule::Once { at } => v.push(("triggerAt", to_rfc3339(*at))),
        Schedule::Recurring(r) => match &r.rule {
            Rule::Cron { expr, tz } => {
                v.push(("cronExpr", expr.clone()));
                v.push(("timezone", tz.clone()));
            }
            Rule::Every { every_ms } => v.push(("everyMs", every_ms.to_string())),
            Rule::Delay { delay_ms } => v.push(("delayMs", delay_ms.to_string())),
        },
    }
    v.push(("maxAttempts", job.retry.max_attempts.to_string()));
    v.push(("retryBackoffMs", job.retry.backoff_ms.to_string()));
    v.push((
        "timeoutMs",
        job.timeout_ms.map(|t| t.to_string()).unwrap_or_default(),
    ));
    v.push(("callbackUrl", job.callback_url.clone().unwrap_or_default()));
    v.push(("workerGroup", job.worker_group.clone().unwrap_or_default()));
    v.push(("sensitiveParams", job.sensitive_params.join(", ")));
    v.push((
        "params",
        serde_json::to_string_pretty(&job.params).unwrap_or_default(),
    ));
    v
}

/// The form for `job`: the operator's `edits` (or the job's values) over
/// the job's version and values as `orig_*`.
fn form_fields(job: &Job, edits: Option<&Fields>) -> Fields {
    let mut f = Fields::default();
    for (k, v) in values(job) {
        // Only what the operator changed is carried over; everything else
        // shows the job as it is now, so saving again changes nothing else.
        let shown = match edits {
            Some(e) if e.get(k) != e.get(&format!("orig_{k}")) => e.get(k).to_string(),
            _ => v.clone(),
        };
        f.0.push((k.to_string(), shown));
        f.0.push((format!("orig_{k}"), v));
    }
    f.0.push(("version".into(), job.version.to_string()));
    f
}

fn render(
    ctx: &Ctx,
    job: &Job,
    form: &Fields,
    error: Option<FieldError>,
    conflict: bool,
) -> Response {
    let present: Vec<&str> = values(job).iter().map(|(k, _)| *k).collect();
    let status = if error.is_some() {
        StatusCode::CONFLICT
    } else {
        StatusCode::OK
    };
    let status = if error.is_some() && !conflict {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        status
    };
    let body = html! {
        @if conflict {
            div.error-box role="alert" id="conflict" {
                p { strong { "This job was changed by someone else while you edited it." } " Nothing of yours was saved." }
                p { "Your edits are kept in the form below; the job as it is now (version " (job.version) ") is shown beside them. Save again to apply your edits on top of it, or go back to drop them." }
            }
        } @else if let Some(e) = &error {
            p.error-box role="alert" { (e.message) }
        }
        div.edit-grid {
            form.job-form method="post" action={ "/ui/jobs/" (job.id) "/edit" } id="edit-job" {
                (view::csrf(ctx))
                @for (k, v) in &form.0 {
                    @if k.starts_with("orig_") || k == "version" { input type="hidden" name=(k) value=(v); }
                }
                fieldset {
                    legend { "Definition at version " (form.get("version")) }
                    @for (name, label, kind) in FIELDS {
                        @if present.contains(&name) { (input(form, error.as_ref(), name, label, kind, None)) }
                    }
                    div.field {
                        label for="params" { "Params (JSON)" }
                        textarea id="params" name="params" rows="6" spellcheck="false" data-json="" { (form.get("params")) }
                    }
                }
                div.toolbar {
                    button.primary type="submit" { "Save changes" }
                    a href={ "/ui/jobs/" (job.id) } { "Back to the job" }
                }
            }
            @if conflict {
                section.card aria-labelledby="now-h" id="current" {
                    h2 id="now-h" { "The job now (version " (job.version) ")" }
                    dl.props {
                        @for (k, v) in values(job) { dt { (k) } dd { code { (v) } } }
                    }
                }
            }
        }
    };
    (
        status,
        view::page(ctx, &format!("Edit {}", job.name), Nav::Jobs, body),
    )
        .into_response()
}

/// `GET /ui/jobs/{id}/edit`.
pub(crate) async fn page(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = ctx.require_write() {
        return *r;
    }
    match state.store.job_get(ctx.tenant(), &id).await {
        Ok(Some(job)) => {
            // Params are edited as shown, masked; the API keeps every value
            // sent back masked.
            let job = crate::shown::masked(&state, job);
            render(&ctx, &job, &form_fields(&job, None), None, false)
        }
        Ok(None) => view::not_found(&ctx, "job"),
        Err(e) => view::store_error(e),
    }
}

/// The `PATCH` body: the version read and every field changed from it.
fn patch_json(form: &Fields) -> Result<Value, FieldError> {
    let version: i64 = form.get("version").parse().map_err(|_| FieldError {
        field: None,
        message: "the form lost its version; reload the page".into(),
    })?;
    let mut out = Map::new();
    out.insert("version".into(), json!(version));
    let names = FIELDS.iter().map(|(n, _, _)| *n).chain(["params"]);
    for name in names {
        let (now, orig) = (form.get(name), form.get(&format!("orig_{name}")));
        if form.all(name).is_empty() || now == orig {
            continue;
        }
        let value = if name == "sensitiveParams" {
            json!(super::new_job::path_list(now))
        } else if name == "params" {
            serde_json::from_str(now).map_err(|e| FieldError {
                field: Some("params".into()),
                message: format!("params is not valid JSON: {e}"),
            })?
        } else if now.is_empty() && CLEARABLE.contains(&name) {
            Value::Null
        } else if NUMBERS.contains(&name) {
            json!(now.parse::<i64>().map_err(|_| FieldError {
                field: Some(name.into()),
                message: format!("{name} must be a whole number, got {now:?}"),
            })?)
        } else {
            json!(now)
        };
        out.insert(name.into(), value);
    }
    Ok(Value::Object(out))
}

/// `POST /ui/jobs/{id}/edit`.
pub(crate) async fn save(
    State(state): State<UiState>,
    ctx: Ctx,
    Path(id): Path<String>,
    form: Fields,
) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let result = match patch_json(&form) {
        Ok(body) => state
            .api
            .call(
                ctx.key(),
                Method::PATCH,
                &format!("/openapi/jobs/{id}"),
                Some(&body),
            )
            .await
            .map_err(|e| (e.code.clone(), FieldError::from(e))),
        Err(e) => Err((String::new(), e)),
    };
    let current = match state.store.job_get(ctx.tenant(), &id).await {
        Ok(Some(job)) => crate::shown::masked(&state, job),
        Ok(None) => return view::not_found(&ctx, "job"),
        Err(e) => return view::store_error(e),
    };
    match result {
        Ok(_) => Redirect::to(&format!("/ui/jobs/{id}?notice=Saved.")).into_response(),
        Err((code, e)) if code == "version_conflict" => {
            // The operator's edits over the job as it is now.
            render(
                &ctx,
                &current,
                &form_fields(&current, Some(&form)),
                Some(e),
                true,
            )
        }
        Err((_, e)) => {
            let mut kept = form.clone();
            kept.0.retain(|(k, _)| k != "csrf");
            render(&ctx, &current, &kept, Some(e), false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_fields_are_sent() {
        let form = Fields(
            [
                ("version", "3"),
                ("cronExpr", "*/5 * * * * *"),
                ("orig_cronExpr", "* * * * * *"),
                ("timezone", "UTC"),
                ("orig_timezone", "UTC"),
                ("timeoutMs", ""),
                ("orig_timeoutMs", "5000"),
                ("params", "{\"a\": 2}"),
                ("orig_params", "{\"a\": 1}"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        assert_eq!(
            patch_json(&form).unwrap(),
            json!({"version": 3, "cronExpr": "*/5 * * * * *", "timeoutMs": null, "params": {"a": 2}})
        );
    }
}
