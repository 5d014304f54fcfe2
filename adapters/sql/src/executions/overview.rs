//! The dashboard's figures of a tenant: counts by state, outcomes per
//! minute, lateness, callback backlog. Every query names the tenant in its
//! `WHERE` clause.

use crate::db::Pool;
use crate::rows::R;
use crate::sql::{Sql, time};
use kairos_core::callback::CallbackState;
use kairos_core::execution::ExecStatus;
use kairos_core::job::JobStatus;
use kairos_core::overview::{FAILED_STATES, MinuteCounts, Overview};
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use std::collections::BTreeMap;

/// Most lateness samples read for the percentiles (the newest ones).
const LATENESS_SAMPLES: i64 = 20_000;
/// How long before `since` an execution may have been due and still finish
/// inside the chart's window (bounds the per-minute scan on the index).
const LONGEST_RUN_MS: i64 = 24 * 3_600_000;

fn count(r: &R<'_>) -> StoreResult<u64> {
    Ok(u64::try_from(r.i64("n")?).unwrap_or(0))
}

/// A tenant's figures since `since`.
pub(super) async fn overview(pool: &Pool, tenant: &str, since: Millis) -> StoreResult<Overview> {
    let mut out = Overview::default();
    let found = Sql::new("SELECT status, COUNT(*) AS n FROM jobs WHERE tenant = ")
        .bind(tenant)
        // Workflow nodes' internal jobs are no jobs of the tenant's (issue 34).
        .push(" AND workflow_id IS NULL GROUP BY status")
        .fetch_all(pool)
        .await?;
    for row in &found {
        let r = R::new(row, "jobs");
        out.jobs.push((r.job_status("status")?, count(&r)?));
    }
    out.jobs
        .sort_by_key(|(s, _)| JobStatus::ALL.iter().position(|x| x == s));

    let found = Sql::new("SELECT status, COUNT(*) AS n FROM executions WHERE tenant = ")
        .bind(tenant)
        .push(" AND scheduled_at >= ")
        .bind(time(since))
        .push(" GROUP BY status")
        .fetch_all(pool)
        .await?;
    for row in &found {
        let r = R::new(row, "executions");
        out.executions.push((r.exec_status("status")?, count(&r)?));
    }
    out.executions
        .sort_by_key(|(s, _)| ExecStatus::ALL.iter().position(|x| x == s));

    out.per_minute = per_minute(pool, tenant, since).await?;

    // Lateness in whole milliseconds, computed by each database from its
    // own time type (SQLite stores milliseconds already).
    let found = Sql::new("SELECT ")
        .dialect(
            "CAST(TIMESTAMPDIFF(MICROSECOND, scheduled_at, dispatched_at) / 1000 AS SIGNED)",
            "CAST(EXTRACT(EPOCH FROM (dispatched_at - scheduled_at)) * 1000 AS BIGINT)",
            "dispatched_at - scheduled_at",
        )
        .push(" AS late FROM executions WHERE tenant = ")
        .bind(tenant)
        .push(" AND scheduled_at >= ")
        .bind(time(since))
        .push(" AND attempt = 1 AND dispatched_at IS NOT NULL ORDER BY scheduled_at DESC LIMIT ")
        .bind(LATENESS_SAMPLES)
        .fetch_all(pool)
        .await?;
    out.lateness_ms = found
        .iter()
        .map(|row| R::new(row, "executions").i64("late"))
        .collect::<StoreResult<Vec<_>>>()?;
    out.lateness_ms.sort_unstable();

    for (state, retrying) in [(CallbackState::Pending, true), (CallbackState::Dead, false)] {
        let mut sql = Sql::new("SELECT COUNT(*) AS n FROM callbacks WHERE tenant = ");
        sql.bind(tenant).push(" AND state = ").bind(state.as_str());
        if retrying {
            sql.push(" AND attempts > 0");
        }
        let row = sql.fetch_one(pool).await?;
        let n = count(&R::new(&row, "callbacks"))?;
        if retrying {
            out.callbacks_retrying = n;
        } else {
            out.callbacks_dead = n;
        }
    }
    Ok(out)
}

async fn per_minute(pool: &Pool, tenant: &str, since: Millis) -> StoreResult<Vec<MinuteCounts>> {
    let states = [ExecStatus::Succeeded]
        .into_iter()
        .chain(FAILED_STATES)
        .collect::<Vec<_>>();
    // The start of the minute `finished_at` falls in, in milliseconds
    // since the epoch, truncated toward zero like `t - t % 60000` on
    // integer milliseconds (which SQLite stores). MySQL counts whole
    // minutes from the epoch on the UTC wall-clock `DATETIME`, so the
    // session time zone plays no part; PostgreSQL's epoch of a
    // `TIMESTAMPTZ` is zone-free too.
    const MINUTE: [&str; 3] = [
        "CAST(TIMESTAMPDIFF(MINUTE, '1970-01-01 00:00:00', finished_at) * 60000 AS SIGNED)",
        "CAST(TRUNC(EXTRACT(EPOCH FROM finished_at) / 60) * 60000 AS BIGINT)",
        "finished_at - (finished_at % 60000)",
    ];
    let [my, pg, lite] = MINUTE;
    let found = Sql::new("SELECT ")
        .dialect(my, pg, lite)
        .push(" AS minute, status, COUNT(*) AS n FROM executions WHERE tenant = ")
        .bind(tenant)
        .push(" AND scheduled_at >= ")
        .bind(time(since.saturating_sub(LONGEST_RUN_MS)))
        .push(" AND finished_at >= ")
        .bind(time(since))
        .push(" AND status IN ")
        .list(states.iter().map(|s| s.as_str()))
        .push(" GROUP BY ")
        .dialect(my, pg, lite)
        .push(", status")
        .fetch_all(pool)
        .await?;
    let mut minutes: BTreeMap<Millis, MinuteCounts> = BTreeMap::new();
    for row in &found {
        let r = R::new(row, "executions");
        let minute = r.i64("minute")?;
        let slot = minutes.entry(minute).or_insert(MinuteCounts {
            minute,
            ..MinuteCounts::default()
        });
        if r.exec_status("status")? == ExecStatus::Succeeded {
            slot.succeeded += count(&r)?;
        } else {
            slot.failed += count(&r)?;
        }
    }
    Ok(minutes.into_values().collect())
}
