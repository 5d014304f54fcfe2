//! Editing a job: New job's form (the same fields, schedule kinds, window,
//! policies and live preview of the next fire times), filled with the job
//! at the revision read, sent as a `PATCH` with only the fields the
//! operator changed. The revision moves only with callers' changes, so a
//! job that fires every second is saved at the first try. A conflict
//! (someone changed the job meanwhile) keeps the operator's edits on screen
//! beside the job as it is now, to be applied again on top of it or dropped.

use super::job::job_zone;
use super::job_form::{
    EDIT_KINDS, delivery_fields, params_field, preview_pane, schedule_fields, sensitive_field,
};
use super::new_job::{FieldError, schedule_json};
use crate::UiState;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::TimeZone;
use kairos_core::job::Job;
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::time::Millis;
use maud::html;
use serde_json::{Map, Value, json};

/// Fields that `null` clears.
const CLEARABLE: [&str; 4] = ["timeoutMs", "callbackUrl", "workerGroup", "maxConcurrency"];
/// Fields sent as numbers.
const NUMBERS: [&str; 5] = [
    "maxAttempts",
    "retryBackoffMs",
    "timeoutMs",
    "priority",
    "maxConcurrency",
];
/// Fields compared one by one (the schedule is compared as a whole).
const PLAIN: [&str; 9] = [
    "priority",
    "maxAttempts",
    "retryBackoffMs",
    "timeoutMs",
    "callbackUrl",
    "workerGroup",
    "maxConcurrency",
    "sensitiveParams",
    "params",
];
/// Recurring schedules' policies, with the value an emptied select means.
const POLICIES: [(&str, &str); 2] = [("misfirePolicy", "fireOnce"), ("overlapPolicy", "allow")];

/// A time as a `datetime-local` value in `zone`.
fn local(ms: Millis, zone: &chrono_tz::Tz) -> String {
    zone.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default()
}

/// The job's current values as the form's fields (every field, so that
/// switching the kind finds the others empty).
fn values(job: &Job) -> Vec<(&'static str, String)> {
    let zone = job_zone(job);
    let (mut kind, mut cron, mut every, mut delay, mut at) =
        ("at", "", String::new(), String::new(), String::new());
    let (mut start, mut end, mut misfire, mut overlap) = (String::new(), String::new(), "", "");
    match &job.schedule {
        Schedule::Once { at: t } => at = local(*t, &zone),
        Schedule::Recurring(r) => {
            match &r.rule {
                Rule::Cron { expr, .. } => {
                    kind = "cron";
                    cron = expr.as_str();
                }
                Rule::Every { every_ms } => {
                    kind = "every";
                    every = every_ms.to_string();
                }
                Rule::Delay { delay_ms } => {
                    kind = "delay";
                    delay = delay_ms.to_string();
                }
            }
            start = r.start_at.map(|t| local(t, &zone)).unwrap_or_default();
            end = r.end_at.map(|t| local(t, &zone)).unwrap_or_default();
            misfire = r.misfire.as_str();
            overlap = r.overlap.as_str();
        }
    }
    vec![
        ("kind", kind.to_string()),
        ("triggerAt", at),
        ("cronExpr", cron.to_string()),
        ("everyMs", every),
        ("delayMs", delay),
        ("timezone", zone.name().to_string()),
        ("startAt", start),
        ("endAt", end),
        ("misfirePolicy", misfire.to_string()),
        ("overlapPolicy", overlap.to_string()),
        ("maxAttempts", job.retry.max_attempts.to_string()),
        ("retryBackoffMs", job.retry.backoff_ms.to_string()),
        (
            "timeoutMs",
            job.timeout_ms.map(|t| t.to_string()).unwrap_or_default(),
        ),
        ("callbackUrl", job.callback_url.clone().unwrap_or_default()),
        ("workerGroup", job.worker_group.clone().unwrap_or_default()),
        ("priority", job.priority.get().to_string()),
        (
            "maxConcurrency",
            job.max_concurrency
                .map(|n| n.to_string())
                .unwrap_or_default(),
        ),
        ("sensitiveParams", job.sensitive_params.join(", ")),
        (
            "params",
            serde_json::to_string_pretty(&job.params).unwrap_or_default(),
        ),
    ]
}

/// The form for `job`: the operator's `edits` (or the job's values) over
/// the job's revision and values as `orig_*`.
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
    f.0.push(("version".into(), job.revision.to_string()));
    f
}

/// The values the form was filled with (its `orig_*` fields).
fn originals(form: &Fields) -> Fields {
    Fields(
        form.0
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("orig_").map(|k| (k.to_string(), v.clone())))
            .collect(),
    )
}

fn render(
    ctx: &Ctx,
    job: &Job,
    form: &Fields,
    error: Option<FieldError>,
    conflict: bool,
) -> Response {
    let status = match (&error, conflict) {
        (None, _) => StatusCode::OK,
        (Some(_), true) => StatusCode::CONFLICT,
        (Some(_), false) => StatusCode::UNPROCESSABLE_ENTITY,
    };
    let body = html! {
        @if conflict {
            div.error-box role="alert" id="conflict" {
                p { strong { "This job was changed by someone else while you edited it." } " Nothing of yours was saved." }
                p { "Your edits are kept in the form below; the job as it is now (version " (job.revision) ") is shown beside them. Save again to apply your edits on top of it, or go back to drop them." }
            }
        } @else if let Some(e) = &error {
            p.error-box role="alert" { (e.message) }
        }
        div.form-grid {
            form.job-form method="post" action={ "/ui/jobs/" (job.id) "/edit" } id="edit-job" novalidate {
                (view::csrf(ctx))
                @for (k, v) in &form.0 {
                    @if k.starts_with("orig_") || k == "version" { input type="hidden" name=(k) value=(v); }
                }
                p.muted { "Definition at version " (form.get("version")) " · " (job.name) " · handler " code { (job.handler) } }
                fieldset {
                    legend { "Params" }
                    (params_field(form, error.as_ref(), 6))
                    (sensitive_field(form, error.as_ref()))
                }
                (schedule_fields(form, error.as_ref(), &EDIT_KINDS))
                (delivery_fields(form, error.as_ref()))
                div.toolbar {
                    button.primary type="submit" { "Save changes" }
                    a href={ "/ui/jobs/" (job.id) } { "Back to the job" }
                }
            }
            div {
                (preview_pane("edit-job"))
                @if conflict {
                    section.card aria-labelledby="now-h" id="current" {
                        h2 id="now-h" { "The job now (version " (job.revision) ")" }
                        dl.props {
                            @for (k, v) in values(job) { dt { (k) } dd { code { (v) } } }
                        }
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
/// The schedule is compared as the API would read it (kind, rule, zone,
/// window): when it changed, its kind's field goes with what changed.
fn patch_json(form: &Fields) -> Result<Value, FieldError> {
    let version: i64 = form.get("version").parse().map_err(|_| FieldError {
        field: None,
        message: "the form lost its version; reload the page".into(),
    })?;
    let orig = originals(form);
    let mut out = Map::new();
    out.insert("version".into(), json!(version));
    let recurring = matches!(form.get("kind"), "cron" | "every" | "delay");
    let mut now = Map::new();
    schedule_json(form, &mut now)?;
    let mut was = Map::new();
    // The job's own values always read; if they did not, the schedule
    // counts as changed.
    let _ = schedule_json(&orig, &mut was);
    if now != was || form.get("kind") != orig.get("kind") {
        if form.get("kind") != "cron" {
            // The API takes a zone for cron only; the other kinds' times
            // were read in it already.
            now.remove("timezone");
        }
        if recurring {
            for f in ["startAt", "endAt"] {
                if !now.contains_key(f) && was.contains_key(f) {
                    now.insert(f.into(), Value::Null);
                }
            }
        }
        out.extend(now);
    }
    if recurring {
        for (f, default) in POLICIES {
            if form.get(f) != orig.get(f) {
                out.insert(f.into(), json!(form.opt(f).unwrap_or(default)));
            }
        }
    }
    for name in PLAIN {
        let now = form.get(name);
        if form.all(name).is_empty() || now == orig.get(name) {
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
                &format!("/openapi/jobs/{}", crate::api::segment(&id)),
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
        Ok(_) => Redirect::to(&format!(
            "/ui/jobs/{id}?{}",
            super::query(&[crate::flash::Notice::Saved.pair()])
        ))
        .into_response(),
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

    fn form(pairs: &[(&str, &str)]) -> Fields {
        Fields(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// The form as filled for a cron job, with `changes` made by the operator.
    fn cron_form(changes: &[(&str, &str)]) -> Fields {
        let filled = [
            ("kind", "cron"),
            ("cronExpr", "* * * * * *"),
            ("timezone", "UTC"),
            ("triggerAt", ""),
            ("everyMs", ""),
            ("delayMs", ""),
            ("startAt", ""),
            ("endAt", "2030-01-01T00:00:00"),
            ("misfirePolicy", "fireOnce"),
            ("overlapPolicy", "allow"),
            ("maxAttempts", "1"),
            ("retryBackoffMs", "1000"),
            ("timeoutMs", "5000"),
            ("callbackUrl", ""),
            ("workerGroup", ""),
            ("maxConcurrency", ""),
            ("params", "{\"a\": 1}"),
        ];
        let mut pairs = vec![("version".to_string(), "3".to_string())];
        for (k, v) in filled {
            let shown = changes.iter().find(|(c, _)| *c == k).map_or(v, |(_, n)| *n);
            pairs.push((k.to_string(), shown.to_string()));
            pairs.push((format!("orig_{k}"), v.to_string()));
        }
        Fields(pairs)
    }

    #[test]
    fn an_untouched_form_sends_the_version_alone() {
        assert_eq!(patch_json(&cron_form(&[])).unwrap(), json!({"version": 3}));
    }

    #[test]
    fn max_concurrency_is_sent_as_a_number_and_cleared_as_null() {
        let body = patch_json(&cron_form(&[("maxConcurrency", "5")])).unwrap();
        assert_eq!(body, json!({"version": 3, "maxConcurrency": 5}));
        let mut form = cron_form(&[]);
        for (k, v) in form.0.iter_mut() {
            if k == "orig_maxConcurrency" {
                *v = "5".into();
            }
        }
        let body = patch_json(&form).unwrap();
        assert_eq!(body, json!({"version": 3, "maxConcurrency": null}));
    }

    #[test]
    fn only_changed_fields_are_sent() {
        let body = patch_json(&cron_form(&[
            ("cronExpr", "*/5 * * * * *"),
            ("timeoutMs", ""),
            ("params", "{\"a\": 2}"),
            ("overlapPolicy", "forbid"),
        ]))
        .unwrap();
        assert_eq!(
            body,
            json!({"version": 3, "cronExpr": "*/5 * * * * *", "timezone": "UTC",
                   "endAt": "2030-01-01T00:00:00.000Z", "overlapPolicy": "forbid",
                   "timeoutMs": null, "params": {"a": 2}})
        );
    }

    #[test]
    fn a_new_kind_sends_its_rule_and_clears_a_removed_window() {
        let body = patch_json(&cron_form(&[
            ("kind", "every"),
            ("everyMs", "2000"),
            ("endAt", ""),
        ]))
        .unwrap();
        assert_eq!(body, json!({"version": 3, "everyMs": 2000, "endAt": null}));
        let once = patch_json(&cron_form(&[
            ("kind", "at"),
            ("triggerAt", "2031-05-01T10:00"),
        ]))
        .unwrap();
        assert_eq!(
            once,
            json!({"version": 3, "triggerAt": "2031-05-01T10:00:00.000Z"})
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let e = patch_json(&cron_form(&[("maxAttempts", "many")])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("maxAttempts"));
        let e = patch_json(&form(&[("cronExpr", "x")])).unwrap_err();
        assert_eq!(e.message, "the form lost its version; reload the page");
    }
}
