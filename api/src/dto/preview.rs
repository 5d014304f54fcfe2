//! `POST /openapi/schedules/preview`: a schedule as a create would take it,
//! and the trigger times it would produce.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The schedule fields of a create request, and how many triggers to show.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SchedulePreviewRequest {
    /// Cron expression (as on create).
    #[schema(example = "0 */5 * * * *")]
    pub cron_expr: Option<String>,
    /// How `cronExpr` is read (as on create).
    #[schema(schema_with = super::cron_dialect_schema)]
    pub cron_dialect: Option<String>,
    /// IANA time zone (default `UTC`); the times are also shown in it.
    #[schema(example = "Europe/Berlin")]
    pub timezone: Option<String>,
    /// One-shot due time (absent: now).
    #[schema(format = DateTime)]
    pub trigger_at: Option<String>,
    /// Fixed rate in ms.
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub every_ms: Option<i64>,
    /// Fixed delay in ms (the preview assumes each execution ends at once).
    #[schema(minimum = 100, maximum = 31_622_400_000_i64)]
    pub delay_ms: Option<i64>,
    /// No trigger before this time.
    #[schema(format = DateTime)]
    pub start_at: Option<String>,
    /// No trigger after this time.
    #[schema(format = DateTime)]
    pub end_at: Option<String>,
    /// How many trigger times to compute, 1–50 (default 5).
    #[schema(minimum = 1, maximum = 50)]
    pub count: Option<i64>,
}

/// One trigger time.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreviewTrigger {
    /// In UTC.
    #[schema(format = DateTime)]
    pub at: String,
    /// The same instant in the schedule's time zone, with its offset.
    pub local: String,
}

/// The next trigger times from now, soonest first; fewer than asked when the
/// schedule ends (a one-shot has one).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulePreview {
    /// Zone of the `local` times.
    pub timezone: String,
    /// `once`, `cron`, `every` or `delay`.
    pub kind: String,
    /// For `cron`: the dialect the expression was read in.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = super::cron_dialect_schema)]
    pub cron_dialect: Option<String>,
    /// For `cron`: the expression in words as that dialect reads it, times
    /// in `timezone`, e.g. "at 02:00, on Monday".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Trigger times.
    pub next_triggers: Vec<PreviewTrigger>,
}
