//! The dashboard's reads: executions across a tenant's jobs, and a tenant's
//! figures (counts by state, outcomes per minute, lateness, callback
//! backlog). Every query names the tenant in its `WHERE` clause.

use super::SqlStore;
use super::error::db_err;
use super::jobs::page_size;
use super::rows::{self, EXEC_COLS, R, select_list};
use super::stmt::{bind_names, marks, q};
use kairos_core::callback::CallbackState;
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::JobStatus;
use kairos_core::overview::{ExecFilter, FAILED_STATES, MinuteCounts, Overview};
use kairos_core::store::{Page, StoreResult};
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

impl SqlStore {
    pub(crate) async fn list_executions(
        &self,
        tenant: &str,
        filter: &ExecFilter,
    ) -> StoreResult<Page<Execution>> {
        let limit = page_size(filter.limit);
        let after = match rows::page_start(filter.cursor.as_deref()) {
            Ok(after) => after,
            Err(empty) => return Ok(empty),
        };
        let mut sql = format!(
            "SELECT {} FROM executions e WHERE e.tenant = ?",
            select_list("e", &EXEC_COLS)
        );
        if !filter.statuses.is_empty() {
            sql.push_str(&format!(
                " AND e.status IN ({})",
                marks(filter.statuses.len())
            ));
        }
        let statuses = &filter.statuses;
        self.executions_page(
            sql,
            |query| bind_names(query.bind(tenant), statuses.iter().map(|s| s.as_str())),
            after,
            limit,
        )
        .await
    }

    pub(crate) async fn overview(&self, tenant: &str, since: Millis) -> StoreResult<Overview> {
        let mut out = Overview::default();
        let found = q(
            self.dialect(),
            "SELECT status, COUNT(*) AS n FROM jobs WHERE tenant = ? GROUP BY status",
        )
        .bind(tenant)
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        for row in &found {
            let r = R::new(row, "jobs");
            out.jobs.push((r.job_status("status")?, count(&r)?));
        }
        out.jobs
            .sort_by_key(|(s, _)| JobStatus::ALL.iter().position(|x| x == s));

        let found = q(
            self.dialect(),
            "SELECT status, COUNT(*) AS n FROM executions \
             WHERE tenant = ? AND scheduled_at >= ? GROUP BY status",
        )
        .bind(tenant)
        .bind(since)
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        for row in &found {
            let r = R::new(row, "executions");
            out.executions.push((r.exec_status("status")?, count(&r)?));
        }
        out.executions
            .sort_by_key(|(s, _)| ExecStatus::ALL.iter().position(|x| x == s));

        out.per_minute = self.per_minute(tenant, since).await?;

        let found = q(
            self.dialect(),
            "SELECT dispatched_at - scheduled_at AS late FROM executions \
             WHERE tenant = ? AND scheduled_at >= ? AND attempt = 1 \
             AND dispatched_at IS NOT NULL ORDER BY scheduled_at DESC LIMIT ?",
        )
        .bind(tenant)
        .bind(since)
        .bind(LATENESS_SAMPLES)
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        out.lateness_ms = found
            .iter()
            .map(|row| R::new(row, "executions").i64("late"))
            .collect::<StoreResult<Vec<_>>>()?;
        out.lateness_ms.sort_unstable();

        for (state, retrying) in [(CallbackState::Pending, true), (CallbackState::Dead, false)] {
            let sql = if retrying {
                "SELECT COUNT(*) AS n FROM callbacks WHERE tenant = ? AND state = ? AND attempts > 0"
            } else {
                "SELECT COUNT(*) AS n FROM callbacks WHERE tenant = ? AND state = ?"
            };
            let row = q(self.dialect(), sql)
                .bind(tenant)
                .bind(state.as_str())
                .fetch_one(self.read())
                .await
                .map_err(db_err)?;
            let n = count(&R::new(&row, "callbacks"))?;
            if retrying {
                out.callbacks_retrying = n;
            } else {
                out.callbacks_dead = n;
            }
        }
        Ok(out)
    }

    async fn per_minute(&self, tenant: &str, since: Millis) -> StoreResult<Vec<MinuteCounts>> {
        let states = [ExecStatus::Succeeded]
            .into_iter()
            .chain(FAILED_STATES)
            .collect::<Vec<_>>();
        let sql = format!(
            "SELECT finished_at - (finished_at % 60000) AS minute, status, COUNT(*) AS n \
             FROM executions WHERE tenant = ? AND scheduled_at >= ? AND finished_at >= ? \
             AND status IN ({}) GROUP BY finished_at - (finished_at % 60000), status",
            marks(states.len())
        );
        let found = bind_names(
            q(self.dialect(), sql)
                .bind(tenant.to_string())
                .bind(since.saturating_sub(LONGEST_RUN_MS))
                .bind(since),
            states.iter().map(|s| s.as_str()),
        )
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
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
}
