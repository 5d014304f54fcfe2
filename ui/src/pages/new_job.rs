//! The new-job form: every create field, a live preview of the next fire
//! times (the API's `POST /openapi/schedules/preview`), and on submit the
//! API's own create with its validation messages shown beside the field.

use super::job_form::{job_fields, preview_pane};
use crate::UiState;
use crate::api::ApiFailure;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::State;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{NaiveDateTime, TimeZone};
use maud::html;
use serde_json::{Map, Value, json};

/// A refused field: its API name and the message.
#[derive(Debug, Clone)]
pub(crate) struct FieldError {
    pub(crate) field: Option<String>,
    pub(crate) message: String,
}

impl From<ApiFailure> for FieldError {
    fn from(e: ApiFailure) -> Self {
        FieldError {
            field: e.field,
            message: e.message,
        }
    }
}

fn field_err(field: &str, message: String) -> FieldError {
    FieldError {
        field: Some(field.to_string()),
        message,
    }
}

/// A `datetime-local` value read in `tz`, as RFC 3339 UTC.
fn local_time(field: &str, raw: &str, tz: &str) -> Result<String, FieldError> {
    let zone: chrono_tz::Tz = tz.parse().map_err(|_| {
        field_err(
            "timezone",
            format!("unknown time zone {tz:?} (expected an IANA name such as \"Europe/Berlin\")"),
        )
    })?;
    let naive = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S")
        .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M"))
        .map_err(|_| {
            field_err(
                field,
                format!("{field}: expected a date and time such as 2026-03-01T10:00"),
            )
        })?;
    let at = zone.from_local_datetime(&naive).earliest().ok_or_else(|| {
        field_err(
            field,
            format!("{field}: {raw} does not exist in {tz} (a daylight saving gap)"),
        )
    })?;
    Ok(at
        .with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

fn int(form: &Fields, field: &str) -> Result<Option<i64>, FieldError> {
    form.opt(field)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| field_err(field, format!("{field} must be a whole number, got {v:?}")))
        })
        .transpose()
}

/// The schedule fields of the form as API JSON (create and preview share them).
pub(crate) fn schedule_json(form: &Fields, out: &mut Map<String, Value>) -> Result<(), FieldError> {
    let tz = form.opt("timezone").unwrap_or("UTC");
    out.insert("timezone".into(), json!(tz));
    match form.get("kind") {
        "at" => {
            let raw = form.opt("triggerAt").ok_or_else(|| {
                field_err(
                    "triggerAt",
                    "triggerAt: pick the date and time to run at".into(),
                )
            })?;
            out.insert("triggerAt".into(), json!(local_time("triggerAt", raw, tz)?));
        }
        "cron" => {
            out.insert("cronExpr".into(), json!(form.get("cronExpr")));
        }
        "every" => {
            out.insert("everyMs".into(), json!(int(form, "everyMs")?.unwrap_or(0)));
        }
        "delay" => {
            out.insert("delayMs".into(), json!(int(form, "delayMs")?.unwrap_or(0)));
        }
        _ => {}
    }
    if matches!(form.get("kind"), "cron" | "every" | "delay") {
        for f in ["startAt", "endAt"] {
            if let Some(raw) = form.opt(f) {
                out.insert(f.into(), json!(local_time(f, raw, tz)?));
            }
        }
    }
    Ok(())
}

/// A list of params paths as typed: separated by commas or new lines.
pub(crate) fn path_list(raw: &str) -> Vec<String> {
    raw.split([',', '\n'])
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// The create request the form describes.
fn create_json(form: &Fields) -> Result<Value, FieldError> {
    let mut out = Map::new();
    out.insert("jobName".into(), json!(form.get("jobName")));
    out.insert("jobHandler".into(), json!(form.get("jobHandler")));
    if let Some(raw) = form.opt("params") {
        let params: Value = serde_json::from_str(raw)
            .map_err(|e| field_err("params", format!("params is not valid JSON: {e}")))?;
        out.insert("params".into(), params);
    }
    if let Some(raw) = form.opt("sensitiveParams") {
        out.insert("sensitiveParams".into(), json!(path_list(raw)));
    }
    schedule_json(form, &mut out)?;
    if matches!(form.get("kind"), "cron" | "every" | "delay") {
        for f in ["misfirePolicy", "overlapPolicy"] {
            if let Some(v) = form.opt(f) {
                out.insert(f.into(), json!(v));
            }
        }
    }
    if let Some(mode) = form.opt("executionMode").filter(|m| *m != "single") {
        out.insert("executionMode".into(), json!(mode));
    }
    for f in ["callbackUrl", "workerGroup"] {
        if let Some(v) = form.opt(f) {
            out.insert(f.into(), json!(v));
        }
    }
    for f in [
        "maxAttempts",
        "retryBackoffMs",
        "timeoutMs",
        "priority",
        "maxConcurrency",
        "shardCount",
    ] {
        if let Some(v) = int(form, f)? {
            out.insert(f.into(), json!(v));
        }
    }
    Ok(Value::Object(out))
}

/// `GET /ui/jobs/new`.
pub(crate) async fn page(State(state): State<UiState>, ctx: Ctx) -> Response {
    if let Err(r) = ctx.require_write() {
        return *r;
    }
    let mut defaults = Fields::default();
    defaults.0.push(("kind".into(), "cron".into()));
    defaults.0.push(("timezone".into(), "UTC".into()));
    defaults.0.push(("maxAttempts".into(), "1".into()));
    form_page(&state, &ctx, &defaults, None, StatusCode::OK).await
}

async fn handlers(state: &UiState) -> Vec<String> {
    let mut names: Vec<String> = state
        .store
        .workers_list()
        .await
        .unwrap_or_default()
        .into_iter()
        .flat_map(|w| w.serves.handlers.unwrap_or_default())
        .collect();
    names.sort();
    names.dedup();
    names
}

async fn form_page(
    state: &UiState,
    ctx: &Ctx,
    form: &Fields,
    error: Option<FieldError>,
    status: StatusCode,
) -> Response {
    let handlers = handlers(state).await;
    let body = html! {
        @if let Some(e) = &error {
            p.error-box role="alert" id="form-error" { (e.message) }
        }
        div.form-grid {
            form.job-form method="post" action="/ui/jobs/new" id="new-job" novalidate {
                (view::csrf(ctx))
                (job_fields(form, error.as_ref(), &handlers))
                div.toolbar { button.primary type="submit" { "Create job" } a href="/ui/jobs" { "Cancel" } }
            }
            (preview_pane("new-job"))
        }
    };
    (status, view::page(ctx, "New job", Nav::NewJob, body)).into_response()
}

/// `2026-03-01T10:00:00.000+01:00` as `2026-03-01 10:00:00 +01:00`.
fn readable(rfc3339: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S %:z").to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// What to type before the chosen schedule kind has anything to preview.
fn untyped(form: &Fields) -> Option<&'static str> {
    let (field, hint) = match form.get("kind") {
        "cron" => (
            "cronExpr",
            "Type a cron expression to see its next fire times.",
        ),
        "every" => ("everyMs", "Type a period to see the next fire times."),
        "delay" => ("delayMs", "Type a delay to see the next fire times."),
        "at" => ("triggerAt", "Pick a date and time to see when it fires."),
        _ => return None,
    };
    form.opt(field).is_none().then_some(hint)
}

/// `POST /ui/jobs/preview`: the preview fragment for the form's schedule.
/// It changes nothing, but is a POST of the job forms, which only write
/// sessions are shown: like every POST it needs the form's CSRF token and
/// the role of the forms it serves.
pub(crate) async fn preview(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    // Nothing typed yet is not a mistake: say what to type, not an error.
    if let Some(field) = untyped(&form) {
        return html! { p.muted data-preview-empty="" { (field) } }.into_response();
    }
    let mut body = Map::new();
    let result = match schedule_json(&form, &mut body) {
        Ok(()) => state
            .api
            .call(
                ctx.key(),
                Method::POST,
                "/openapi/schedules/preview",
                Some(&Value::Object(body)),
            )
            .await
            .map_err(FieldError::from),
        Err(e) => Err(e),
    };
    let kind = form.get("kind");
    let words = (kind == "cron")
        .then(|| {
            crate::cron_words::describe(form.get("cronExpr"), form.opt("timezone").unwrap_or("UTC"))
        })
        .flatten();
    match result {
        Ok(p) => {
            let times = p["nextTriggers"].as_array().cloned().unwrap_or_default();
            html! {
                @if let Some(w) = &words { p.cron-words data-cron-words="" { (w) } }
                @if kind == "now" || kind.is_empty() { p.muted { "Fires once, as soon as it is created." } }
                @if kind == "delay" { p.muted { "Assuming each execution ends at once." } }
                ol.fires data-preview="" {
                    @for t in &times {
                        li { time datetime=(t["at"].as_str().unwrap_or("")) { (readable(t["local"].as_str().unwrap_or(""))) } }
                    }
                }
                @if times.is_empty() { p.muted { "No trigger." } }
            }
            .into_response()
        }
        Err(e) => html! {
            p.field-error role="alert" data-preview-error="" { (e.message) }
        }
        .into_response(),
    }
}

/// `POST /ui/jobs/new`: creates through the API; on refusal, the form again
/// with the API's message beside its field.
pub(crate) async fn create(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let result = match create_json(&form) {
        Ok(body) => state
            .api
            .call(ctx.key(), Method::POST, "/openapi/jobs", Some(&body))
            .await
            .map_err(FieldError::from),
        Err(e) => Err(e),
    };
    match result {
        Ok(created) => {
            let id = created["jobId"].as_str().unwrap_or_default();
            Redirect::to(&format!(
                "/ui/jobs/{id}?{}",
                super::query(&[crate::flash::Notice::Created.pair()])
            ))
            .into_response()
        }
        Err(e) => {
            form_page(
                &state,
                &ctx,
                &form,
                Some(e),
                StatusCode::UNPROCESSABLE_ENTITY,
            )
            .await
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

    #[test]
    fn an_empty_schedule_previews_as_a_hint_not_an_error() {
        assert!(untyped(&form(&[("kind", "cron"), ("cronExpr", " ")])).is_some());
        assert!(untyped(&form(&[("kind", "every")])).is_some());
        assert_eq!(
            untyped(&form(&[("kind", "cron"), ("cronExpr", "nope")])),
            None
        );
        assert_eq!(untyped(&form(&[("kind", "now")])), None);
    }

    #[test]
    fn local_times_are_read_in_the_zone() {
        assert_eq!(
            local_time("triggerAt", "2026-07-01T10:00", "Europe/Berlin").unwrap(),
            "2026-07-01T08:00:00.000Z"
        );
        let e = local_time("triggerAt", "tomorrow", "UTC").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("triggerAt"));
    }

    #[test]
    fn the_form_becomes_the_api_request() {
        let body = create_json(&form(&[
            ("jobName", "n"),
            ("jobHandler", "noop"),
            ("params", r#"{"a":1}"#),
            ("kind", "cron"),
            ("cronExpr", "* * * * * *"),
            ("timezone", "UTC"),
            ("maxAttempts", "3"),
            ("overlapPolicy", "forbid"),
            ("callbackUrl", ""),
            ("sensitiveParams", "a, b.*.c\n"),
        ]))
        .unwrap();
        assert_eq!(
            body,
            json!({"jobName": "n", "jobHandler": "noop", "params": {"a": 1},
                   "sensitiveParams": ["a", "b.*.c"],
                   "timezone": "UTC", "cronExpr": "* * * * * *", "maxAttempts": 3,
                   "overlapPolicy": "forbid"})
        );
        let e = create_json(&form(&[("params", "{nope")])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("params"));
        assert!(e.message.starts_with("params is not valid JSON"));
    }

    #[test]
    fn a_sharded_job_sends_its_mode_and_a_single_one_sends_none() {
        let base = [("jobName", "n"), ("jobHandler", "noop"), ("kind", "now")];
        let sharded = create_json(&form(
            &[
                &base[..],
                &[("executionMode", "sharded"), ("shardCount", "8")],
            ]
            .concat(),
        ))
        .unwrap();
        assert_eq!(sharded["executionMode"], "sharded");
        assert_eq!(sharded["shardCount"], 8);
        let single = create_json(&form(
            &[
                &base[..],
                &[("executionMode", "single"), ("shardCount", "")],
            ]
            .concat(),
        ))
        .unwrap();
        assert!(single.get("executionMode").is_none(), "{single}");
        assert!(single.get("shardCount").is_none(), "{single}");
    }
}
