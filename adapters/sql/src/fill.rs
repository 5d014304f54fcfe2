//! A synthetic history for benchmarks and plan tests: a tenant's recurring
//! jobs, each with its share of finished executions, written by the
//! database itself (one `INSERT … SELECT` per table over a generated series
//! of numbers), so a million executions take seconds rather than a million
//! round trips.
//!
//! Ids are UUID-shaped and cannot meet real ones (UUIDv7 carries the time
//! of its making in its first digits; these are zeros), so a filled
//! database still takes ordinary jobs.

use crate::sql::Sql;
use crate::store::SqlStore;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;

/// Executions per filled job.
pub const EXECUTIONS_PER_JOB: u64 = 20;
/// Time between two filled executions (of any job), in ms.
const SPACING_MS: i64 = 1_000;
/// Most rows one fill makes in a table (10^7: seven digit columns).
const MAX_ROWS: u64 = 10_000_000;

/// What [`SqlStore::fill_history`] stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Filled {
    pub jobs: u64,
    pub executions: u64,
    /// The first filled job's id ([`filled_job_id`] gives the others).
    pub first_job: String,
    /// When the newest filled execution was due.
    pub newest: Millis,
}

/// The id of filled job number `k` (from 0).
pub fn filled_job_id(k: u64) -> String {
    format!("00000000-0000-7000-8000-{k:012}")
}

/// The id of filled execution number `n` (from 0), the newest last;
/// execution `n` belongs to job `n % jobs` (see [`Filled`]).
pub fn filled_execution_id(n: u64) -> String {
    format!("00000000-0000-7000-9000-{n:012}")
}

/// `d0.d + 10 * d1.d + …` names for up to seven digits.
const DIGIT_TERMS: [&str; 7] = [
    "d0.d",
    " + 10 * d1.d",
    " + 100 * d2.d",
    " + 1000 * d3.d",
    " + 10000 * d4.d",
    " + 100000 * d5.d",
    " + 1000000 * d6.d",
];
const DIGIT_ALIASES: [&str; 7] = [" d0", " d1", " d2", " d3", " d4", " d5", " d6"];
const DIGITS: &str = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL \
     SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL \
     SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)";

/// `(SELECT <n> AS n FROM digits d0 CROSS JOIN … WHERE <n> < count) g`: the
/// numbers 0..count, as many digit columns as `count` needs.
fn series(sql: &mut Sql, count: u64) {
    let digits = (1..=7).find(|&d| 10_u64.pow(d) >= count).unwrap_or(7) as usize;
    let number = |sql: &mut Sql| {
        for term in &DIGIT_TERMS[..digits] {
            sql.push(term);
        }
    };
    sql.push("(SELECT ");
    number(sql);
    sql.push(" AS n FROM ");
    for (i, alias) in DIGIT_ALIASES[..digits].iter().enumerate() {
        if i > 0 {
            sql.push(" CROSS JOIN ");
        }
        sql.push(DIGITS).push(alias);
    }
    sql.push(" WHERE ");
    number(sql);
    sql.push(" < ")
        .bind(i64::try_from(count).unwrap_or(i64::MAX));
    sql.push(") g");
}

/// A time column's value from integer milliseconds `expr`.
fn time_of(sql: &mut Sql, expr: &'static str) {
    sql.dialect(
        "TIMESTAMPADD(MICROSECOND, 1000 * (",
        "(TIMESTAMPTZ '1970-01-01 00:00:00+00' + INTERVAL '1 millisecond' * (",
        "((",
    )
    .push(expr)
    .dialect("), TIMESTAMP '1970-01-01 00:00:00')", "))", "))");
}

/// `<prefix><n as 12 digits>` as SQL text.
fn padded_id(sql: &mut Sql, prefix: &'static str, expr: &'static str) {
    sql.dialect("CONCAT(", "(", "(")
        .push(prefix)
        .dialect(", LPAD(", " || lpad((", " || substr('000000000000' || (")
        .push(expr)
        .dialect(", 12, '0'))", ")::text, 12, '0'))", "), -12, 12))");
}

impl SqlStore {
    /// Stores `executions` finished executions (rounded up to whole jobs of
    /// [`EXECUTIONS_PER_JOB`]) for `tenant`: recurring jobs of ten handlers
    /// (`fill-0` … `fill-9`), half of them scheduled far in the future and
    /// half paused, whose executions ran one a second (taking turns) up to
    /// `newest`, on eight workers (`fill-worker-0` …), one in ten failed. Meant for an
    /// empty database: the ids are fixed, so a second fill collides.
    pub async fn fill_history(
        &self,
        tenant: &str,
        executions: u64,
        newest: Millis,
    ) -> StoreResult<Filled> {
        let per = EXECUTIONS_PER_JOB;
        let jobs = executions.div_ceil(per).clamp(1, MAX_ROWS / per);
        let executions = jobs * per;
        let last = i64::try_from(executions - 1).unwrap_or(i64::MAX);
        let jobs_i = i64::try_from(jobs).unwrap_or(1);
        // Execution n, due at `newest - (last - n)` seconds, is a run of job
        // n % jobs: every job runs all along the history, once every `jobs`
        // seconds, and a window of an hour holds 3,600 executions.
        let first = newest - last * SPACING_MS;
        let far = newest + 10 * 365 * 24 * 3_600_000;

        let mut sql = Sql::new(
            "INSERT INTO jobs (id, tenant, name, handler, params, schedule_kind, every_ms, \
             next_trigger_at, status, version, revision, max_attempts, retry_backoff_ms, \
             created_at, updated_at) SELECT ",
        );
        padded_id(&mut sql, "'00000000-0000-7000-8000-'", "n");
        sql.push(", ")
            .bind(tenant)
            .push(", ")
            .dialect(
                "CONCAT('fill-job-', n)",
                "'fill-job-' || n",
                "'fill-job-' || n",
            )
            .push(", ")
            .dialect(
                "CONCAT('fill-', n % 10)",
                "'fill-' || (n % 10)",
                "'fill-' || (n % 10)",
            )
            .push(", ")
            .dialect("'null'", "'null'::jsonb", "'null'")
            .push(", 'every', ")
            .bind(jobs_i * SPACING_MS)
            .push(", CASE WHEN n % 2 = 0 THEN ");
        time_of(&mut sql, "far");
        sql.push(" ELSE NULL END, CASE WHEN n % 2 = 0 THEN 'scheduled' ELSE 'paused' END, ")
            .push("1, 1, 1, 1000, ");
        time_of(&mut sql, "t0");
        sql.push(", ");
        time_of(&mut sql, "t0");
        sql.push(" FROM (SELECT n, ")
            .bind(far)
            .push(" AS far, ")
            .bind(first - 1_000)
            .push(" AS t0 FROM ");
        series(&mut sql, jobs);
        sql.push(") s");
        let mut tx = self.write().begin().await?;
        // SQLite's default page cache (2 MB) spills the indexes of a large
        // insert to disk page by page; a larger one for the fill's
        // transaction keeps them in memory (reset below).
        Sql::new("")
            .dialect("DO 0", "SELECT 0", "PRAGMA cache_size = -262144")
            .execute(&mut tx)
            .await?;
        sql.execute(&mut tx).await?;

        let mut sql = Sql::new(
            "INSERT INTO executions (id, job_id, tenant, scheduled_at, attempt, status, \
             worker_id, not_before, dispatched_at, started_at, finished_at, created_at, \
             updated_at) SELECT ",
        );
        padded_id(&mut sql, "'00000000-0000-7000-9000-'", "n");
        sql.push(", ");
        padded_id(&mut sql, "'00000000-0000-7000-8000-'", "k");
        sql.push(", ").bind(tenant).push(", ");
        time_of(&mut sql, "t");
        sql.push(", 1, CASE WHEN n % 10 = 9 THEN 'failed' ELSE 'succeeded' END, ")
            .dialect(
                "CONCAT('fill-worker-', n % 8)",
                "'fill-worker-' || (n % 8)",
                "'fill-worker-' || (n % 8)",
            )
            .push(", ");
        for (i, expr) in ["t", "t + 2", "t + 5", "t + 25", "t", "t + 25"]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                sql.push(", ");
            }
            time_of(&mut sql, expr);
        }
        sql.push(" FROM (SELECT n, n % ")
            .bind(jobs_i)
            .push(" AS k, ")
            .bind(first)
            .push(" + n * ")
            .bind(SPACING_MS)
            .push(" AS t FROM ");
        series(&mut sql, executions);
        sql.push(") s");
        sql.execute(&mut tx).await?;
        Sql::new("")
            .dialect("DO 0", "SELECT 0", "PRAGMA cache_size = -2000")
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        crate::partitions::fill_in(self.write()).await?;
        Ok(Filled {
            jobs,
            executions,
            first_job: filled_job_id(0),
            newest,
        })
    }
}

impl SqlStore {
    /// Refreshes the planner's statistics of the filled tables, as
    /// PostgreSQL's autovacuum and InnoDB's automatic statistics do some
    /// time after a large change; SQLite keeps none unless asked, and
    /// `kairos` never asks, so it is left alone there.
    pub async fn analyse(&self) -> StoreResult<()> {
        if self.dialect() == crate::dialect::Dialect::Sqlite {
            return Ok(());
        }
        Sql::new("")
            .dialect(
                "ANALYZE TABLE jobs, executions",
                "ANALYZE jobs, executions",
                "",
            )
            .execute(self.write())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_ids_are_uuid_shaped() {
        assert_eq!(filled_job_id(7), "00000000-0000-7000-8000-000000000007");
        assert_eq!(
            filled_execution_id(1_000_000),
            "00000000-0000-7000-9000-000001000000"
        );
        assert!(uuid::Uuid::parse_str(&filled_job_id(123)).is_ok());
    }

    #[test]
    fn the_series_has_as_many_digits_as_the_count_needs() {
        let mut sql = Sql::new("");
        series(&mut sql, 1_000);
        let text = sql.text(crate::dialect::Dialect::Sqlite);
        assert!(text.contains(" d2"), "{text}");
        assert!(!text.contains(" d3"), "{text}");
    }
}
