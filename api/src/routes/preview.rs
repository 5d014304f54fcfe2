//! `POST /openapi/schedules/preview`: the next trigger times of a schedule,
//! checked exactly as a create checks it (same errors, same fields), and a
//! cron expression in words as its dialect reads it, so a form can show
//! them before the job exists.

use crate::dto::{PreviewTrigger, SchedulePreview, SchedulePreviewRequest};
use crate::error::{ApiError, ErrorBody};
use crate::extract::ApiJson;
use crate::validate::schedule::{self, Fields};
use axum::Json;
use chrono::TimeZone;
use kairos_core::schedule::{Rule, Schedule};
use kairos_core::time::{Millis, now_ms, to_rfc3339};

/// Most trigger times one preview computes.
const MAX_COUNT: i64 = 50;

/// Preview a schedule's next trigger times.
///
/// Takes the schedule fields of a create (`cronExpr`, `cronDialect`,
/// `timezone`, `triggerAt`, `everyMs`, `delayMs`, `startAt`, `endAt`) and
/// answers the next `count` trigger times from now, in UTC and in the time
/// zone, and for a cron expression its dialect and its reading in words. A
/// fixed delay is shown as if each execution ended at once. A Quartz-looking
/// expression without `cronDialect` that the two dialects read differently
/// is refused (422, field `cronDialect`) naming both readings, as on create.
#[utoipa::path(
    post, path = "/openapi/schedules/preview", tag = "jobs",
    request_body(content = SchedulePreviewRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The next trigger times", body = SchedulePreview),
        (status = 400, description = "Malformed JSON", body = ErrorBody),
        (status = 415, description = "Content-Type is not application/json", body = ErrorBody),
        (status = 422, description = "The schedule is refused, as a create would refuse it", body = ErrorBody),
    )
)]
pub(crate) async fn preview_schedule(
    ApiJson(req): ApiJson<SchedulePreviewRequest>,
) -> Result<Json<SchedulePreview>, ApiError> {
    preview(&req, now_ms()).map(Json)
}

fn preview(req: &SchedulePreviewRequest, now: Millis) -> Result<SchedulePreview, ApiError> {
    let count = req.count.unwrap_or(5);
    if !(1..=MAX_COUNT).contains(&count) {
        return Err(ApiError::invalid(
            "count",
            format!("count must be between 1 and {MAX_COUNT}, got {count}"),
        ));
    }
    let tz_name = req.timezone.clone().unwrap_or_else(|| "UTC".to_string());
    let fields = Fields {
        cron_expr: req.cron_expr.as_deref(),
        cron_dialect: req.cron_dialect.as_deref(),
        timezone: Some(&tz_name),
        trigger_at: schedule::time_field("triggerAt", req.trigger_at.as_deref())?,
        every_ms: req.every_ms,
        delay_ms: req.delay_ms,
        start_at: schedule::time_field("startAt", req.start_at.as_deref())?,
        end_at: schedule::time_field("endAt", req.end_at.as_deref())?,
        misfire: None,
        overlap: None,
    };
    let sched = schedule::build(&fields, now)?;
    let first = sched.first_trigger(now).map_err(schedule::schedule_error)?;
    let mut times = vec![first];
    let mut reading = None;
    let kind = match &sched {
        Schedule::Once { .. } => "once",
        Schedule::Recurring(r) => {
            let timeline = r.timeline().map_err(schedule::schedule_error)?;
            let mut last = first;
            while times.len() < count as usize {
                let next = if timeline.is_delay() {
                    timeline.after_finish(last)
                } else {
                    timeline.after(last)
                };
                match next {
                    Some(t) => {
                        times.push(t);
                        last = t;
                    }
                    None => break,
                }
            }
            match &r.rule {
                Rule::Cron { expr, dialect, .. } => {
                    let words = dialect.describe(expr).map_err(schedule::schedule_error)?;
                    reading = Some((dialect.as_str().to_string(), words));
                    "cron"
                }
                Rule::Every { .. } => "every",
                Rule::Delay { .. } => "delay",
            }
        }
    };
    // `build` already refused an unknown zone.
    let tz: chrono_tz::Tz = tz_name.parse().unwrap_or(chrono_tz::UTC);
    let next_triggers = times
        .into_iter()
        .map(|t| PreviewTrigger {
            at: to_rfc3339(t),
            local: tz
                .timestamp_millis_opt(t)
                .single()
                .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, false))
                .unwrap_or_else(|| to_rfc3339(t)),
        })
        .collect();
    let (cron_dialect, description) = reading.unzip();
    Ok(SchedulePreview {
        timezone: tz_name,
        kind: kind.to_string(),
        cron_dialect,
        description,
        next_triggers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_767_225_600_000; // 2026-01-01T00:00:00Z

    fn req() -> SchedulePreviewRequest {
        SchedulePreviewRequest::default()
    }

    #[test]
    fn cron_in_a_zone_shows_local_times() {
        let p = preview(
            &SchedulePreviewRequest {
                cron_expr: Some("0 30 2 * * *".into()),
                timezone: Some("Europe/Berlin".into()),
                count: Some(3),
                ..req()
            },
            NOW,
        )
        .unwrap();
        assert_eq!(p.kind, "cron");
        let local: Vec<&str> = p.next_triggers.iter().map(|t| t.local.as_str()).collect();
        assert_eq!(
            local,
            [
                "2026-01-01T02:30:00.000+01:00",
                "2026-01-02T02:30:00.000+01:00",
                "2026-01-03T02:30:00.000+01:00"
            ]
        );
        assert_eq!(p.next_triggers[0].at, "2026-01-01T01:30:00.000Z");
    }

    #[test]
    fn every_second_gives_five_by_default_and_one_shot_one() {
        let p = preview(
            &SchedulePreviewRequest {
                cron_expr: Some("* * * * * *".into()),
                ..req()
            },
            NOW,
        )
        .unwrap();
        assert_eq!(p.next_triggers.len(), 5);
        assert_eq!(p.next_triggers[4].at, "2026-01-01T00:00:04.000Z");
        let once = preview(&req(), NOW).unwrap();
        assert_eq!((once.kind.as_str(), once.next_triggers.len()), ("once", 1));
    }

    #[test]
    fn refusals_name_the_field_as_create_does() {
        let bad = |r: SchedulePreviewRequest| preview(&r, NOW).unwrap_err();
        let e = bad(SchedulePreviewRequest {
            cron_expr: Some("every day".into()),
            ..req()
        });
        assert_eq!(e.code(), "invalid_cron");
        let e = bad(SchedulePreviewRequest {
            timezone: Some("Mars/Base".into()),
            ..req()
        });
        assert_eq!(e.code(), "unknown_timezone");
        let e = bad(SchedulePreviewRequest {
            every_ms: Some(5),
            ..req()
        });
        assert_eq!(e.field(), Some("everyMs"));
        let e = bad(SchedulePreviewRequest {
            count: Some(0),
            ..req()
        });
        assert_eq!(e.field(), Some("count"));
    }

    #[test]
    fn quartz_previews_mondays_and_says_so() {
        let p = preview(
            &SchedulePreviewRequest {
                cron_expr: Some("0 0 2 ? * 2 *".into()),
                cron_dialect: Some("quartz".into()),
                count: Some(2),
                ..req()
            },
            NOW,
        )
        .unwrap();
        assert_eq!(p.cron_dialect.as_deref(), Some("quartz"));
        assert_eq!(p.description.as_deref(), Some("at 02:00, on Monday"));
        let at: Vec<&str> = p.next_triggers.iter().map(|t| t.at.as_str()).collect();
        assert_eq!(at, ["2026-01-05T02:00:00.000Z", "2026-01-12T02:00:00.000Z"]);
    }

    #[test]
    fn an_ambiguous_expression_without_a_dialect_names_both_readings() {
        let e = preview(
            &SchedulePreviewRequest {
                cron_expr: Some("0 0 2 ? * 2".into()),
                ..req()
            },
            NOW,
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("cronDialect"));
        let text = e.to_string();
        assert!(
            text.contains("as standard cron: at 02:00, on Tuesday"),
            "{text}"
        );
        assert!(text.contains("as Quartz: at 02:00, on Monday"), "{text}");
        let standard = preview(
            &SchedulePreviewRequest {
                cron_expr: Some("0 0 2 ? * 2".into()),
                cron_dialect: Some("standard".into()),
                ..req()
            },
            NOW,
        )
        .unwrap();
        assert_eq!(
            standard.description.as_deref(),
            Some("at 02:00, on Tuesday")
        );
        let e = preview(
            &SchedulePreviewRequest {
                every_ms: Some(1_000),
                cron_dialect: Some("quartz".into()),
                ..req()
            },
            NOW,
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("cronDialect"));
    }
}
