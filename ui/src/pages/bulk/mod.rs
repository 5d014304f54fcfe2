//! Bulk pause, resume and cancel of the jobs the operator ticked. The
//! confirmation lists each ticked job by name with whether the action
//! applies to it (resume only to paused jobs, pause only to scheduled and
//! running ones, cancel to unfinished ones), and carries what it showed as
//! a signed [`snapshot`]. Confirming acts on exactly the jobs the
//! confirmation said it would act on, and only on those still in the
//! status it showed (checked again at that moment): a job it said it would
//! skip stays skipped, whatever happened to it since, and one that changed
//! is skipped and said so. The result names each job and says what
//! happened.

mod snapshot;

use crate::UiState;
use crate::forms::Fields;
use crate::session::Ctx;
use crate::view::{self, Nav};
use axum::extract::State;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use kairos_core::job::{Job, JobStatus, JobTransition};
use maud::{Markup, html};
use snapshot::Snapshot;

/// Most jobs one bulk action takes (two pages' worth).
const MAX_BULK: usize = 100;

/// A bulk action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Pause,
    Resume,
    Cancel,
}

impl Action {
    fn parse(s: &str) -> Option<Action> {
        match s {
            "pause" => Some(Action::Pause),
            "resume" => Some(Action::Resume),
            "cancel" => Some(Action::Cancel),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Cancel => "cancel",
        }
    }

    fn transition(self) -> JobTransition {
        match self {
            Action::Pause => JobTransition::Pause,
            Action::Resume => JobTransition::Resume,
            Action::Cancel => JobTransition::Cancel,
        }
    }

    /// Which jobs it applies to, in words.
    fn rule(self) -> &'static str {
        match self {
            Action::Pause => "pause applies to scheduled and running jobs",
            Action::Resume => "resume applies to paused jobs only",
            Action::Cancel => "cancel applies to jobs that have not finished",
        }
    }

    /// Why it does not apply to a job in `status`, or `None` if it does.
    fn skip_reason(self, status: JobStatus) -> Option<String> {
        if self.transition().allowed_from(status) {
            return None;
        }
        Some(match (self, status) {
            (_, s) if s.is_terminal() => format!("already finished ({})", s.as_str()),
            (Action::Pause, JobStatus::Paused) => "already paused".to_string(),
            (_, s) => format!("not paused ({})", s.as_str()),
        })
    }

    fn request(self, id: &str) -> (Method, String) {
        let id = crate::api::segment(id);
        match self {
            Action::Pause => (Method::POST, format!("/openapi/jobs/{id}/pause")),
            Action::Resume => (Method::POST, format!("/openapi/jobs/{id}/resume")),
            Action::Cancel => (Method::DELETE, format!("/openapi/jobs/{id}")),
        }
    }
}

/// `1 job`, `7 jobs`.
pub(crate) fn jobs(n: usize) -> String {
    if n == 1 {
        "1 job".to_string()
    } else {
        format!("{n} jobs")
    }
}

/// `this job`, `these 7 jobs`.
fn these(n: usize) -> String {
    if n == 1 {
        "this job".to_string()
    } else {
        format!("these {n} jobs")
    }
}

/// One ticked job as found now: `None` when there is no such job.
type Ticked = (String, Option<Job>);

/// The ticked jobs as they are now, in the order ticked.
async fn lookup(state: &UiState, ctx: &Ctx, ids: &[&str]) -> Result<Vec<Ticked>, Response> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let job = state
            .store
            .job_get(ctx.tenant(), id)
            .await
            .map_err(view::store_error)?;
        out.push((id.to_string(), job));
    }
    Ok(out)
}

fn refused(ctx: &Ctx, message: Markup) -> Response {
    view::page(
        ctx,
        "Bulk action",
        Nav::Jobs,
        html! {
            p.error-box role="alert" { (message) }
            p { a href="/ui/jobs" { "Back to the jobs" } }
        },
    )
    .into_response()
}

/// `POST /ui/jobs/bulk`: without `confirm`, the confirmation; with it, the
/// action on the ticked jobs it applies to.
pub(crate) async fn bulk(State(state): State<UiState>, ctx: Ctx, form: Fields) -> Response {
    if let Err(r) = ctx.check_csrf(form.get("csrf")).and(ctx.require_write()) {
        return *r;
    }
    let Some(action) = Action::parse(form.get("action")) else {
        return refused(&ctx, html! { "Unknown action." });
    };
    if form.get("confirm") == "yes" {
        // The jobs are the confirmation's, as it showed them; the form's
        // own ids, if any, are not read.
        let Some(shown) =
            Snapshot::open(&ctx, action.name(), form.get("snapshot"), form.get("sig"))
        else {
            return refused(
                &ctx,
                html! { "This confirmation cannot be used: it was changed, or it comes from another session. Tick the jobs again." },
            );
        };
        let ids: Vec<&str> = shown.0.iter().map(|(id, _)| id.as_str()).collect();
        let ticked = match lookup(&state, &ctx, &ids).await {
            Ok(t) => t,
            Err(r) => return r,
        };
        return apply(&state, &ctx, action, &shown, ticked).await;
    }
    let mut ids: Vec<&str> = Vec::new();
    for id in form.all("ids") {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    if ids.is_empty() {
        return refused(&ctx, html! { "Tick at least one job first." });
    }
    if ids.len() > MAX_BULK {
        return refused(&ctx, html! { "At most " (MAX_BULK) " jobs at once." });
    }
    match lookup(&state, &ctx, &ids).await {
        Ok(ticked) => confirm(&ctx, action, &ticked),
        Err(r) => r,
    }
}

/// The job's name linked to its page, with its id for the record.
fn job_label(id: &str, job: Option<&Job>) -> Markup {
    html! {
        @match job {
            Some(j) => { a href={ "/ui/jobs/" (id) } { (j.name) } " " code.small { (id) } }
            None => { code { (id) } }
        }
    }
}

fn confirm(ctx: &Ctx, action: Action, ticked: &[Ticked]) -> Response {
    let verdicts: Vec<Option<String>> = ticked
        .iter()
        .map(|(_, j)| match j {
            Some(j) => action.skip_reason(j.status),
            None => Some("not found".to_string()),
        })
        .collect();
    let applies = verdicts.iter().filter(|v| v.is_none()).count();
    let skipped = ticked.len() - applies;
    let name = action.name();
    let (snapshot, sig) = Snapshot::of(ticked).seal(ctx, name);
    let body = html! {
        @if skipped == 0 {
            p { "You are about to " strong { (name) } " " (these(ticked.len())) ", and no others:" }
        } @else if applies == 0 {
            p.error-box role="alert" {
                "Nothing to " (name) ": " (action.rule()) ", and none of the "
                (jobs(ticked.len())) " you ticked is one."
            }
        } @else {
            p {
                strong { (name) } " applies to " (applies) " of the " (jobs(ticked.len()))
                " you ticked (" (action.rule()) "); the other " (skipped) " will be skipped:"
            }
        }
        table.data.bulk-confirm {
            caption.sr-only { "Each ticked job and whether the action applies to it" }
            thead { tr { th scope="col" { "Job" } th scope="col" { "Status now" } th scope="col" { (name) } } }
            tbody {
                @for ((id, job), verdict) in ticked.iter().zip(&verdicts) {
                    tr data-job=(id) data-applies=(if verdict.is_none() { "yes" } else { "no" }) {
                        th scope="row" { (job_label(id, job.as_ref())) }
                        td { @if let Some(j) = job { (view::job_badge(j.status)) } @else { span.muted { "—" } } }
                        td {
                            @match verdict {
                                None => { strong { "will " (name) } }
                                Some(why) => { span.muted { "skipped: " (why) } }
                            }
                        }
                    }
                }
            }
        }
        form method="post" action="/ui/jobs/bulk" {
            (view::csrf(ctx))
            input type="hidden" name="action" value=(name);
            input type="hidden" name="confirm" value="yes";
            input type="hidden" name="snapshot" value=(snapshot);
            input type="hidden" name="sig" value=(sig);
            div.toolbar {
                @if applies > 0 {
                    button.primary.danger[action == Action::Cancel] type="submit" {
                        "Yes, " (name) " " (jobs(applies))
                    }
                }
                a href="/ui/jobs" { "No, go back" }
            }
        }
    };
    view::page(ctx, "Confirm bulk action", Nav::Jobs, body).into_response()
}

/// What happened to one ticked job.
enum Outcome {
    /// Applied; the job's status now.
    Done(String),
    /// Not applied: the action does not apply to it (any more).
    Skipped(String),
    /// The API refused or failed.
    Failed(String),
}

/// Why a job the confirmation showed as `shown` and that is `now` is
/// skipped, or `None` to act on it: only a job the action was shown to
/// apply to and whose status has not moved since.
fn skip_now(action: Action, shown: Option<JobStatus>, now: Option<JobStatus>) -> Option<String> {
    let Some(shown) = shown else {
        return Some("not found".to_string());
    };
    if let Some(why) = action.skip_reason(shown) {
        return Some(why);
    }
    match now {
        None => Some("not found any more".to_string()),
        Some(now) if now != shown => Some(format!(
            "changed since the confirmation ({} then, {} now)",
            shown.as_str(),
            now.as_str()
        )),
        Some(_) => None,
    }
}

async fn apply(
    state: &UiState,
    ctx: &Ctx,
    action: Action,
    shown: &Snapshot,
    ticked: Vec<Ticked>,
) -> Response {
    let mut results = Vec::with_capacity(ticked.len());
    for ((id, job), (_, was)) in ticked.into_iter().zip(&shown.0) {
        let outcome = match skip_now(action, *was, job.as_ref().map(|j| j.status)) {
            Some(why) => Outcome::Skipped(why),
            None => {
                let (method, path) = action.request(&id);
                match state.api.call(ctx.key(), method, &path, None).await {
                    Ok(v) => Outcome::Done(v["status"].as_str().unwrap_or("done").to_string()),
                    Err(e) => Outcome::Failed(e.message),
                }
            }
        };
        results.push((id, job, outcome));
    }
    let done = results
        .iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Done(_)))
        .count();
    let skipped = results
        .iter()
        .filter(|(_, _, o)| matches!(o, Outcome::Skipped(_)))
        .count();
    let tried = results.len() - skipped;
    let name = action.name();
    let body = html! {
        p.notice role="status" {
            (name) ": " (done) " of " (jobs(tried)) " done."
            @if skipped > 0 { " " (jobs(skipped)) " skipped (" (action.rule()) ", and only to jobs unchanged since the confirmation)." }
        }
        table.data.bulk-results {
            caption.sr-only { "Result per job" }
            thead { tr { th scope="col" { "Job" } th scope="col" { "Result" } } }
            tbody {
                @for (id, job, outcome) in &results {
                    tr data-job=(id) {
                        th scope="row" { (job_label(id, job.as_ref())) }
                        td {
                            @match outcome {
                                Outcome::Done(status) => { (view::badge(status)) }
                                Outcome::Skipped(why) => { span.muted { "skipped: " (why) } }
                                Outcome::Failed(message) => { span.error-text { (message) } }
                            }
                        }
                    }
                }
            }
        }
        p { a href="/ui/jobs" { "Back to the jobs" } }
    };
    view::page(ctx, "Bulk action done", Nav::Jobs, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(jobs(0), "0 jobs");
        assert_eq!(jobs(1), "1 job");
        assert_eq!(jobs(7), "7 jobs");
        assert_eq!(these(1), "this job");
        assert_eq!(these(3), "these 3 jobs");
    }

    /// Issue 44: the confirmation said B would be skipped (scheduled); B
    /// was paused before the confirm, and the confirm resumed it.
    #[test]
    fn a_job_shown_as_skipped_stays_skipped_and_a_changed_one_is_skipped() {
        use JobStatus::*;
        assert_eq!(
            skip_now(Action::Resume, Some(Scheduled), Some(Paused)).as_deref(),
            Some("not paused (scheduled)"),
            "skipped as the confirmation said, though it is paused now"
        );
        assert_eq!(
            skip_now(Action::Pause, Some(Scheduled), Some(Running)).as_deref(),
            Some("changed since the confirmation (scheduled then, running now)")
        );
        assert_eq!(skip_now(Action::Resume, Some(Paused), Some(Paused)), None);
        assert_eq!(
            skip_now(Action::Cancel, Some(Paused), None).as_deref(),
            Some("not found any more")
        );
        assert_eq!(
            skip_now(Action::Cancel, None, Some(Paused)).as_deref(),
            Some("not found")
        );
    }

    #[test]
    fn each_action_says_where_it_applies() {
        use JobStatus::*;
        assert_eq!(Action::Resume.skip_reason(Paused), None);
        assert_eq!(
            Action::Resume.skip_reason(Scheduled).as_deref(),
            Some("not paused (scheduled)")
        );
        assert_eq!(
            Action::Resume.skip_reason(Cancelled).as_deref(),
            Some("already finished (cancelled)")
        );
        assert_eq!(Action::Pause.skip_reason(Running), None);
        assert_eq!(
            Action::Pause.skip_reason(Paused).as_deref(),
            Some("already paused")
        );
        assert_eq!(Action::Cancel.skip_reason(Paused), None);
        assert_eq!(
            Action::Cancel.skip_reason(Succeeded).as_deref(),
            Some("already finished (succeeded)")
        );
    }
}
