//! The dispatcher's hot path reads: the due scan, its count, and the scan
//! for unpublished work (claims are in `claim`).

use crate::db::Row;
use crate::dialect::Dialect;
use crate::rows::{JOB_COLS, R};
use crate::sql::{Sql, time};
use kairos_core::execution::ExecTransition;
use kairos_core::job::JobTransition;
use kairos_core::priority::{Lane, Priority};
use kairos_core::store::{DispatchWork, StoreResult};
use kairos_core::time::Millis;
use kairos_core::worker::{Routable, Serves};

/// The due-trigger scan as `dialect` runs it. Binds, in order: for each
/// name of `JobTransition::Claim.from_states()`, that name, `now` (a time:
/// `DATETIME(3)` on MySQL, `TIMESTAMPTZ` on PostgreSQL, integer
/// milliseconds on SQLite) and the limit; then the limit again. Public so
/// that operators and tests can `EXPLAIN` exactly what runs: each state's
/// part must read through the `(status, next_trigger_at)` index
/// `idx_jobs_status_next` in due order, without sorting.
pub fn due_scan_sql(dialect: Dialect) -> String {
    due_scan(0, 0, &[], None).text(dialect)
}

/// The immediate lane's scan as `dialect` runs it (see `due_immediate`).
/// Binds, in order: each name of `JobTransition::Claim.from_states()`, the
/// due bound (a time, as for [`due_scan_sql`]) and the limit. Public so
/// that tests can `EXPLAIN` it: it must read the partial index
/// `idx_jobs_lane_due`.
pub fn lane_scan_sql(dialect: Dialect) -> String {
    due_immediate(0, 0, None).text(dialect)
}

/// The due-trigger scan, leaving out the jobs in `except`. The dispatcher
/// names a full batch there (the one its claim holds), so the list's length,
/// and with it the statement, stays the same from round to round.
pub(super) fn due_scan(now: Millis, limit: u32, except: &[&str], parts: Parts<'_>) -> Sql {
    let scan = Scan {
        limit,
        except,
        parts,
    };
    let mut s = union_of_parts([(Part::Due, now)], &scan);
    s.push(" ORDER BY u.next_trigger_at LIMIT ").bind(limit);
    s
}

/// The states a claim starts from, one index range each. A scan reads each
/// range in due order up to its limit and merges them, because `status IN
/// (…)` over a `(status, …, next_trigger_at)` index is several ranges that
/// no database here reads in due order: it would read and sort every due
/// row to return the first few hundred (in the 100,000-schedule flood,
/// 71,000 rows a scan and a fifth of MariaDB's time; see
/// docs/performance.md, "A scan that sorted the whole flood").
fn claim_states() -> impl Iterator<Item = &'static str> {
    JobTransition::Claim
        .from_states()
        .iter()
        .map(|s| s.as_str())
}

/// Names the index a part reads on MySQL/MariaDB, whose optimizer, seeing
/// few rows in one state, may read another index of `jobs` and sort what
/// it finds; the point of a part is to read its range in due order and stop
/// at its limit. PostgreSQL and SQLite choose the index themselves.
fn in_due_order(s: &mut Sql, hint: &'static str) {
    s.dialect(hint, "", "");
}

/// [`in_due_order`]'s hint for `(status, next_trigger_at)`.
const BY_STATUS: &str = " FORCE INDEX (idx_jobs_status_next)";

/// [`in_due_order`]'s hint for `(status, priority, next_trigger_at)`.
const BY_PRIORITY: &str = " FORCE INDEX (idx_jobs_priority_due)";

/// The partitions a partitioned dispatcher scans (`None`: every job, the
/// single leader's scans).
pub(super) type Parts<'a> = Option<&'a [u32]>;

/// ` AND j.partition_no IN (…)` for a partitioned scan, read through
/// `idx_jobs_partition_next`.
fn in_partitions(s: &mut Sql, parts: Parts<'_>) {
    if let Some(parts) = parts {
        s.push(" AND j.partition_no IN ")
            .list(parts.iter().map(|&p| i64::from(p)));
    }
}

/// `claim_rank` of each part of the ranked scan: the starving part above
/// every priority, then each priority as itself.
const RANK_AS: [&str; 11] = [
    ", 0 AS claim_rank",
    ", 1 AS claim_rank",
    ", 2 AS claim_rank",
    ", 3 AS claim_rank",
    ", 4 AS claim_rank",
    ", 5 AS claim_rank",
    ", 6 AS claim_rank",
    ", 7 AS claim_rank",
    ", 8 AS claim_rank",
    ", 9 AS claim_rank",
    ", 10 AS claim_rank",
];

/// What a part of a scan reads, besides its state.
#[derive(Clone, Copy)]
enum Part {
    /// The due scan's: due by its bound.
    Due,
    /// The ranked scan's starving triggers: due strictly before its bound,
    /// whatever their priority, ranked above every priority.
    Starving,
    /// The ranked scan's triggers of one priority, due by its bound.
    Priority(Priority),
}

impl Part {
    /// The `claim_rank` column of a ranked scan's part.
    fn rank_as(self) -> &'static str {
        match self {
            Part::Due => "",
            Part::Starving => RANK_AS[RANK_AS.len() - 1],
            Part::Priority(p) => RANK_AS[usize::from(p.get())],
        }
    }

    /// The index the part reads its range of (see [`in_due_order`]).
    fn index(self) -> &'static str {
        match self {
            Part::Priority(_) => BY_PRIORITY,
            Part::Due | Part::Starving => BY_STATUS,
        }
    }
}

/// What every part of a scan shares.
struct Scan<'a> {
    limit: u32,
    except: &'a [&'a str],
    parts: Parts<'a>,
}

/// `SELECT * FROM (…) u` over one part per claimable state (see
/// [`claim_states`]) for each of `parts`, each with its due bound; the
/// caller orders and limits `u`.
fn union_of_parts(parts: impl IntoIterator<Item = (Part, Millis)>, scan: &Scan<'_>) -> Sql {
    let mut s = Sql::new("SELECT * FROM (");
    let mut first = true;
    for (part, due_by) in parts {
        for status in claim_states() {
            if !std::mem::take(&mut first) {
                s.push(" UNION ALL ");
            }
            scan_part(&mut s, part, status, due_by, scan);
        }
    }
    s.push(") u");
    s
}

/// One part of a scan: the jobs in `status` that `part` reads, due by
/// `due_by`, oldest due first, `scan.limit` of them.
fn scan_part(s: &mut Sql, part: Part, status: &str, due_by: Millis, scan: &Scan<'_>) {
    s.push("SELECT * FROM (SELECT ");
    s.columns("j", &JOB_COLS)
        .push(part.rank_as())
        .push(" FROM jobs j");
    if scan.parts.is_none() {
        in_due_order(s, part.index());
    }
    s.push(" WHERE j.status = ").bind(status);
    if let Part::Priority(p) = part {
        s.push(" AND j.priority = ").bind(i64::from(p.get()));
    }
    s.push(match part {
        Part::Starving => " AND j.next_trigger_at < ",
        Part::Due | Part::Priority(_) => " AND j.next_trigger_at <= ",
    })
    .bind(time(due_by));
    in_partitions(s, scan.parts);
    if !scan.except.is_empty() {
        s.push(" AND j.id NOT IN ")
            .list(scan.except.iter().copied());
    }
    s.push(" ORDER BY j.next_trigger_at LIMIT ")
        .bind(scan.limit)
        .push(") r");
}

/// The ranked scan (see `Dispatch::jobs_find_due_ranked`): one part for the
/// starving triggers and one per priority, each of them one index range
/// read per claimable state with its own limit, in one statement; ordered
/// by rank, then due time. A starving job comes twice (callers keep the
/// first).
pub(super) fn due_ranked(
    due_by: Millis,
    starving_before: Millis,
    limit: u32,
    except: &[&str],
    parts: Parts<'_>,
) -> Sql {
    let scan = Scan {
        limit,
        except,
        parts,
    };
    let ranks = std::iter::once((Part::Starving, starving_before.min(due_by)))
        .chain(Priority::highest_first().map(|p| (Part::Priority(p), due_by)));
    let mut s = union_of_parts(ranks, &scan);
    s.push(" ORDER BY u.claim_rank DESC, u.next_trigger_at LIMIT ")
        .bind(limit);
    s
}

/// The immediate lane's due jobs, highest priority first, newest first
/// within one (see `Dispatch::jobs_find_due_immediate`). The lane is
/// written as a literal ([`IMMEDIATE_LANE`]): SQLite and PostgreSQL use the
/// partial index `idx_jobs_lane_due` (`WHERE lane = 1 …`, migration 0025)
/// only for a statement that names that value itself, not a parameter.
pub(super) fn due_immediate(due_by: Millis, limit: u32, parts: Parts<'_>) -> Sql {
    let mut s = Sql::new("SELECT ");
    s.columns("j", &JOB_COLS)
        .push(" FROM jobs j WHERE j.lane = ")
        .push(IMMEDIATE_LANE)
        .push(" AND j.status IN ")
        .list(
            JobTransition::Claim
                .from_states()
                .iter()
                .map(|s| s.as_str()),
        )
        .push(" AND j.next_trigger_at <= ")
        .bind(time(due_by));
    in_partitions(&mut s, parts);
    s.push(" ORDER BY j.priority DESC, j.next_trigger_at DESC LIMIT ")
        .bind(limit);
    s
}

/// `Lane::Immediate.code()` as SQL text (a unit test holds them equal).
const IMMEDIATE_LANE: &str = "1";

/// The due triggers by `until`, at most `cap` of them, counted: the due
/// scan's predicate and index, with the limit inside so a million stored
/// jobs cost no more than `cap` index entries.
pub(super) fn due_count(until: Millis, cap: u32, parts: Parts<'_>) -> Sql {
    let mut s =
        Sql::new("SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM jobs j WHERE j.status IN ");
    s.list(
        JobTransition::Claim
            .from_states()
            .iter()
            .map(|s| s.as_str()),
    )
    .push(" AND j.next_trigger_at <= ")
    .bind(time(until));
    in_partitions(&mut s, parts);
    s.push(" LIMIT ").bind(cap).push(") due");
    s
}

/// `pending` executions waiting for a concurrency limit, at most `cap`.
pub(super) fn waiting_count(cap: u32) -> Sql {
    let mut s =
        Sql::new("SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM executions e WHERE e.status IN ");
    s.list(
        ExecTransition::Dispatch
            .from_states()
            .iter()
            .map(|s| s.as_str()),
    )
    .push(" AND e.waiting_for IS NOT NULL LIMIT ")
    .bind(cap)
    .push(") w");
    s
}

/// `DispatchWork` from a row carrying the execution and job columns it needs.
/// Someone waits for a retry as for an immediate-lane job: both are
/// delivered before scheduled work of their priority.
pub(super) fn work(row: &Row) -> StoreResult<DispatchWork> {
    let r = R::new(row, "executions");
    let attempt = r.u32("attempt")?;
    let lane = Lane::from_code(r.u32("lane")?.min(255) as u8);
    Ok(DispatchWork {
        execution_id: r.string("id")?,
        job_id: r.string("job_id")?,
        tenant: r.string("tenant")?,
        attempt,
        handler: r.string("handler")?,
        params: r.json("params")?,
        scheduled_at: r.time("scheduled_at")?,
        timeout_ms: r.opt_u64("timeout_ms")?,
        worker_group: r.opt_string("worker_group")?,
        priority: r.priority()?,
        trace: r.trace()?,
        worker_id: None,
        shard: r.shard()?,
        immediate: lane == Lane::Immediate || attempt > 1,
        parent_outputs: r.opt_json("parent_outputs")?,
    })
}

/// The announcements that restrict pending work to what some live worker
/// can run: `Some(empty)` for no restriction, `None` when nothing can run
/// (no query needed). An announcement of no handlers accepts nothing.
pub(super) fn routable_entries(routable: &Routable) -> Option<Vec<&Serves>> {
    let list = match routable {
        Routable::Any => return Some(Vec::new()),
        Routable::Only(list) => list,
    };
    let entries: Vec<&Serves> = list
        .iter()
        .filter(|s| s.handlers.as_ref().is_none_or(|h| !h.is_empty()))
        .collect();
    (!entries.is_empty()).then_some(entries)
}

/// ` AND (…)` for `entries` (nothing when empty): one disjunct per distinct
/// (handlers, group) announcement; the job's group must be absent or that
/// group, and its handler one of those handlers (any, for a legacy worker).
fn routable_filter(s: &mut Sql, entries: &[&Serves]) {
    for (i, e) in entries.iter().enumerate() {
        s.push(if i == 0 { " AND ((" } else { " OR (" });
        match &e.group {
            Some(g) => {
                s.push("(j.worker_group IS NULL OR j.worker_group = ")
                    .bind(g)
                    .push(")");
            }
            None => {
                s.push("j.worker_group IS NULL");
            }
        }
        if let Some(handlers) = &e.handlers {
            s.push(" AND j.handler IN ").list(handlers);
        }
        s.push(")");
    }
    if !entries.is_empty() {
        s.push(")");
    }
}

/// The scan for unpublished work that some announcement of `entries` can
/// run (see [`routable_entries`]), with what its dispatch message needs:
/// either the work a concurrency limit holds back (`waiting`) or the rest.
pub(super) fn unpublished(now: Millis, limit: u32, entries: &[&Serves], waiting: bool) -> Sql {
    let mut s = Sql::new(
        "SELECT e.id AS id, e.job_id AS job_id, e.tenant AS tenant, e.attempt AS attempt, \
         e.scheduled_at AS scheduled_at, j.handler AS handler, j.params AS params, \
         j.timeout_ms AS timeout_ms, j.worker_group AS worker_group, \
         j.priority AS priority, j.lane AS lane, \
         j.trace_context AS trace_context, e.shard_index AS shard_index, \
         e.shard_count AS shard_count, e.parent_outputs AS parent_outputs \
         FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.status IN ",
    );
    s.list(
        ExecTransition::Dispatch
            .from_states()
            .iter()
            .map(|s| s.as_str()),
    )
    .push(" AND e.not_before <= ")
    .bind(time(now))
    .push(if waiting {
        " AND e.waiting_for IS NOT NULL"
    } else {
        " AND e.waiting_for IS NULL"
    });
    routable_filter(&mut s, entries);
    s.push(" ORDER BY e.not_before LIMIT ").bind(limit);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_literal_is_the_immediate_lanes_code() {
        assert_eq!(IMMEDIATE_LANE, Lane::Immediate.code().to_string());
    }
}
