//! How a tenant's triggers kept time: lateness and run-time samples (the
//! dashboard takes percentiles over time), and counts of misfired, skipped
//! and late triggers. Every query names the tenant in its `WHERE` clause and
//! reads the `(tenant, scheduled_at, id)` index.

use crate::db::Pool;
use crate::rows::R;
use crate::sql::{Sql, time};
use kairos_core::execution::ExecStatus;
use kairos_core::overview::{LATE_AFTER_MS, TIMING_SAMPLES, Timing};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use kairos_core::trigger::MISFIRE_THRESHOLD_MS;

/// How long before `since` an execution may have been due and still finish
/// after it (bounds the run-time scan on the index).
const LONGEST_RUN_MS: i64 = 24 * 3_600_000;

/// `later − earlier` of two time columns in whole milliseconds, as each
/// database computes it from its own time type (SQLite stores milliseconds).
fn gap(sql: &mut Sql, later: Gap) -> &mut Sql {
    match later {
        Gap::Claim => sql.dialect(
            "TIMESTAMPDIFF(MICROSECOND, scheduled_at, created_at) / 1000",
            "EXTRACT(EPOCH FROM (created_at - scheduled_at)) * 1000",
            "(created_at - scheduled_at)",
        ),
        Gap::Dispatch => sql.dialect(
            "TIMESTAMPDIFF(MICROSECOND, scheduled_at, dispatched_at) / 1000",
            "EXTRACT(EPOCH FROM (dispatched_at - scheduled_at)) * 1000",
            "(dispatched_at - scheduled_at)",
        ),
    }
}

/// Which gap after the due time [`gap`] measures.
#[derive(Clone, Copy)]
enum Gap {
    /// Until the scheduler claimed the trigger (`created_at`).
    Claim,
    /// Until the first attempt was dispatched.
    Dispatch,
}

/// `SELECT COUNT(*) … FROM executions WHERE tenant = ? AND scheduled_at >= ?`
/// and the caller's condition.
fn count_due_since(tenant: &str, since: Millis) -> Sql {
    let mut sql = Sql::new("SELECT COUNT(*) AS n FROM executions WHERE tenant = ");
    sql.bind(tenant)
        .push(" AND scheduled_at >= ")
        .bind(time(since));
    sql
}

async fn count(pool: &Pool, sql: &Sql) -> StoreResult<u64> {
    let n: i64 = sql.scalar(pool, "n").await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The tenant's [`Timing`] since `since`, as of `now`.
pub(super) async fn timing(
    pool: &Pool,
    tenant: &str,
    since: Millis,
    now: Millis,
) -> StoreResult<Timing> {
    let mut out = Timing::default();

    let found = Sql::new("SELECT scheduled_at, dispatched_at FROM executions WHERE tenant = ")
        .bind(tenant)
        .push(" AND scheduled_at >= ")
        .bind(time(since))
        .push(" AND attempt = 1 AND dispatched_at IS NOT NULL ORDER BY scheduled_at DESC LIMIT ")
        .bind(i64::from(TIMING_SAMPLES))
        .fetch_all(pool)
        .await?;
    for row in &found {
        let r = R::new(row, "executions");
        let due = r.time("scheduled_at")?;
        out.lateness.push((due, r.time("dispatched_at")? - due));
    }
    out.lateness.reverse();

    let found = Sql::new("SELECT started_at, finished_at FROM executions WHERE tenant = ")
        .bind(tenant)
        .push(" AND scheduled_at >= ")
        .bind(time(since.saturating_sub(LONGEST_RUN_MS)))
        .push(" AND finished_at >= ")
        .bind(time(since))
        .push(" AND started_at IS NOT NULL ORDER BY finished_at DESC LIMIT ")
        .bind(i64::from(TIMING_SAMPLES))
        .fetch_all(pool)
        .await?;
    for row in &found {
        let r = R::new(row, "executions");
        let end = r.time("finished_at")?;
        out.durations
            .push((end, (end - r.time("started_at")?).max(0)));
    }
    out.durations.reverse();

    let mut misfired = count_due_since(tenant, since);
    misfired.push(" AND ");
    gap(&mut misfired, Gap::Claim)
        .push(" > ")
        .bind(MISFIRE_THRESHOLD_MS);
    out.misfired = count(pool, &misfired).await?;

    let mut skipped = count_due_since(tenant, since);
    skipped
        .push(" AND status = ")
        .bind(ExecStatus::Skipped.as_str());
    out.skipped = count(pool, &skipped).await?;

    let mut late = count_due_since(tenant, since);
    late.push(" AND attempt = 1 AND ((dispatched_at IS NOT NULL AND ");
    gap(&mut late, Gap::Dispatch)
        .push(" > ")
        .bind(LATE_AFTER_MS)
        .push(") OR (dispatched_at IS NULL AND status = ")
        .bind(ExecStatus::Pending.as_str())
        .push(" AND scheduled_at < ")
        .bind(time(now - LATE_AFTER_MS))
        .push("))");
    out.late = count(pool, &late).await?;
    Ok(out)
}
