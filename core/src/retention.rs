//! Retention of history (issue 45): how long each kind of finished history
//! is kept before the dispatcher's purge deletes it, the per-tenant
//! overrides of those periods, durations written like `30d`, and the storage
//! port the purge runs on.

use crate::store::StoreResult;
use crate::time::Millis;
use async_trait::async_trait;
use std::fmt;

/// A kind of history with a retention period of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum History {
    /// Finished executions with their events, log lines and callback
    /// deliveries (shards are executions too).
    Executions,
    /// Finished one-shot jobs with no execution left.
    Jobs,
    /// Ended workflow runs with their node rows and run callbacks.
    WorkflowRuns,
    /// Audit trail entries.
    Audit,
    /// Dashboard sessions, counted from their expiry.
    Sessions,
}

impl History {
    /// Every kind, in the order a purge pass handles them: executions before
    /// the jobs they belong to.
    pub const ALL: [History; 5] = [
        History::Executions,
        History::Jobs,
        History::WorkflowRuns,
        History::Audit,
        History::Sessions,
    ];

    /// The name in metrics labels and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            History::Executions => "executions",
            History::Jobs => "jobs",
            History::WorkflowRuns => "workflow_runs",
            History::Audit => "audit",
            History::Sessions => "sessions",
        }
    }

    /// Whether a tenant may keep this kind for a period of its own. A
    /// session row names a key prefix, not a tenant, and an expired session
    /// holds nothing a tenant would keep: sessions follow the deployment.
    pub fn per_tenant(self) -> bool {
        !matches!(self, History::Sessions)
    }
}

/// A tenant's retention overrides; `None` takes the deployment's period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantRetention {
    /// Finished executions (with events, logs and deliveries).
    pub executions_ms: Option<Millis>,
    /// Finished one-shot jobs.
    pub jobs_ms: Option<Millis>,
    /// Ended workflow runs (with node rows and run callbacks).
    pub workflow_runs_ms: Option<Millis>,
    /// Audit entries.
    pub audit_ms: Option<Millis>,
}

impl TenantRetention {
    /// The override for `kind`, if the tenant has one.
    pub fn get(&self, kind: History) -> Option<Millis> {
        match kind {
            History::Executions => self.executions_ms,
            History::Jobs => self.jobs_ms,
            History::WorkflowRuns => self.workflow_runs_ms,
            History::Audit => self.audit_ms,
            History::Sessions => None,
        }
    }
}

/// The shortest retention period accepted anywhere: one minute, so a typo
/// like `0d` cannot delete history as it finishes.
pub const MIN_RETENTION_MS: Millis = 60_000;

/// The longest: 100 years, so the cutoff arithmetic never overflows.
pub const MAX_RETENTION_MS: Millis = 100 * 365 * 86_400_000;

/// A duration that is not `<digits><unit>` with unit `s`, `m`, `h` or `d`,
/// or is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(pub String);

/// `30s`, `90m`, `12h`, `30d` as milliseconds: `s` seconds, `m` minutes,
/// `h` hours, `d` days (no months, no weeks: `m` is always minutes).
pub fn parse_duration(s: &str) -> Result<Millis, DurationError> {
    let bad = || DurationError(format!("{s:?} is not a duration like 90m, 12h or 30d"));
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: i64 = num.parse().map_err(|_| bad())?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(bad()),
    };
    Ok(n.saturating_mul(unit_ms))
}

/// A retention period parsed and checked against [`MIN_RETENTION_MS`] and
/// [`MAX_RETENTION_MS`].
pub fn parse_retention(s: &str) -> Result<Millis, DurationError> {
    let ms = parse_duration(s)?;
    if !(MIN_RETENTION_MS..=MAX_RETENTION_MS).contains(&ms) {
        return Err(DurationError(format!(
            "retention {s:?} must be between 1m and 36500d"
        )));
    }
    Ok(ms)
}

/// Milliseconds written in the largest unit that divides them exactly
/// (`2592000000` → `30d`), as [`parse_duration`] reads them back.
pub fn format_duration(ms: Millis) -> String {
    for (unit, size) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)] {
        if ms != 0 && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    if ms % 1_000 == 0 {
        return format!("{}s", ms / 1_000);
    }
    format!("{ms}ms")
}

/// A retention period as a setting holds it: read from `30d`-like text
/// (checked by [`parse_retention`]), shown and serialized the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Period(pub Millis);

impl Period {
    /// `n` days.
    pub const fn days(n: i64) -> Period {
        Period(n * 86_400_000)
    }

    /// The period in milliseconds.
    pub fn ms(self) -> Millis {
        self.0
    }
}

impl fmt::Display for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl std::str::FromStr for Period {
    type Err = DurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_retention(s).map(Period)
    }
}

impl TryFrom<String> for Period {
    type Error = DurationError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Period> for String {
    fn from(p: Period) -> String {
        p.to_string()
    }
}

/// Retention's storage: the per-tenant overrides and the purge statements.
///
/// Every purge deletes at most `limit` rows of history older than `before`,
/// picked through an index on their finished (or expiry, or entry) time,
/// oldest first, and returns how many went. Nothing unfinished is ever
/// picked: an execution must be in a terminal state (and not a node of a
/// run that has not ended, nor waiting for a callback delivery), a job must
/// be a terminal one-shot job with no execution left and no part in a
/// workflow or another job's follow-ups, and a run must have ended.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Every tenant's overrides, by tenant id.
    async fn tenants_retention(&self) -> StoreResult<Vec<(String, TenantRetention)>>;
    /// One tenant's overrides; `None` if there is no such tenant.
    async fn tenant_retention(&self, id: &str) -> StoreResult<Option<TenantRetention>>;
    /// Replaces a tenant's overrides; `false` if there is no such tenant.
    async fn tenant_set_retention(
        &self,
        id: &str,
        retention: &TenantRetention,
        now: Millis,
    ) -> StoreResult<bool>;
    /// Deletes up to `limit` rows of `kind` of `tenant` (every tenant's for
    /// `None`; sessions ignore it) older than `before`.
    async fn history_purge(
        &self,
        kind: History,
        tenant: Option<&str>,
        before: Millis,
        limit: u32,
    ) -> StoreResult<u64>;
    /// How many rows [`RetentionStore::history_purge`] would delete with no
    /// limit, counted up to `cap` (the backlog a metric shows).
    async fn history_backlog(
        &self,
        kind: History,
        tenant: Option<&str>,
        before: Millis,
        cap: u32,
    ) -> StoreResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds_minutes_hours_and_days() {
        assert_eq!(parse_duration("30s"), Ok(30_000));
        assert_eq!(parse_duration("1m"), Ok(60_000));
        assert_eq!(parse_duration("12h"), Ok(43_200_000));
        assert_eq!(parse_duration("30d"), Ok(2_592_000_000));
        for bad in ["", "d", "5", "5w", "1mo", "-1d", "1.5h", "1 d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn retention_periods_are_at_least_a_minute() {
        assert!(parse_retention("59s").is_err());
        assert!(parse_retention("0d").is_err());
        assert_eq!(parse_retention("60s"), Ok(60_000));
        assert!(parse_retention("36501d").is_err());
    }

    #[test]
    fn durations_format_in_the_largest_exact_unit() {
        for s in ["30d", "12h", "90m", "1m", "45s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        assert_eq!(format_duration(36 * 3_600_000), "36h");
        assert_eq!(format_duration(1_500), "1500ms");
    }

    #[test]
    fn periods_serialize_as_their_text() {
        let p: Period = serde_json::from_str("\"30d\"").unwrap();
        assert_eq!(p, Period::days(30));
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"30d\"");
        assert!(serde_json::from_str::<Period>("\"30\"").is_err());
        assert!(serde_json::from_str::<Period>("\"10s\"").is_err());
    }
}
