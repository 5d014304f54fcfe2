//! Writing back what a batch of results decided: after every result has
//! been decided in memory (on rows the transaction has locked), each changed
//! execution's final row, and each changed job's status, next trigger and
//! version, are written in one multi-row update per chunk (see
//! `rows_update`), instead of one statement per result.

use crate::db::Tx;
use crate::rows_update::{Col, RowsUpdate, rows_per_statement};
use crate::sql::{Value, json, time};
use kairos_core::execution::{ExecStatus, Execution};
use kairos_core::job::JobStatus;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use std::collections::{HashMap, HashSet};

/// How one always-written execution column gets its value.
type ExecSet = (&'static str, fn(&Execution) -> Value);

/// The execution columns every write-back sets, each with its value in the
/// decided row.
const EXEC_SETS: [ExecSet; 9] = [
    ("status", |e| e.status.as_str().into()),
    ("attempt", |e| e.attempt.into()),
    ("worker_id", |e| e.worker_id.as_deref().into()),
    ("output", |e| json(e.output.as_ref().map(|v| v.to_string()))),
    ("error", |e| e.error.as_deref().into()),
    ("not_before", |e| time(e.not_before)),
    ("dispatched_at", |e| time(e.dispatched_at)),
    ("started_at", |e| time(e.started_at)),
    ("finished_at", |e| time(e.finished_at)),
];

/// Executions changed by a batch, in the order first changed.
#[derive(Default)]
pub(super) struct TouchedExecutions {
    order: Vec<String>,
    seen: HashSet<String>,
    /// New `deadline_at` of the executions whose deadline changed.
    deadlines: HashMap<String, Option<Millis>>,
    /// New `incarnation` of the executions started or retried.
    incarnations: HashMap<String, Option<String>>,
    /// New `handbacks` of the executions retried for free.
    handbacks: HashMap<String, u32>,
}

impl TouchedExecutions {
    /// Marks `id` changed; `deadline` is `Some` when its deadline changed too.
    pub(super) fn touch(&mut self, id: &str, deadline: Option<Option<Millis>>) {
        if self.seen.insert(id.to_string()) {
            self.order.push(id.to_string());
        }
        if let Some(d) = deadline {
            self.deadlines.insert(id.to_string(), d);
        }
    }

    /// Records which worker process holds `id`'s current attempt (`None`
    /// after a retry: nobody yet).
    pub(super) fn held_by(&mut self, id: &str, incarnation: Option<String>) {
        self.incarnations.insert(id.to_string(), incarnation);
    }

    /// Records `id`'s count of free retries after hand-backs.
    pub(super) fn handed_back(&mut self, id: &str, handbacks: u32) {
        self.handbacks.insert(id.to_string(), handbacks);
    }
}

/// What a batch changed on one job.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct JobChange {
    status: Option<JobStatus>,
    next_trigger_at: Option<Millis>,
    /// Version bumps: one per change, as separate updates would have made.
    bumps: i64,
    /// The latest execution that finished, and when.
    last_result: Option<(ExecStatus, Millis)>,
    /// The failures in a row after it (`None`: unchanged).
    fail_streak: Option<u32>,
}

/// Jobs changed by a batch, in the order first changed.
#[derive(Default)]
pub(super) struct TouchedJobs {
    order: Vec<String>,
    changes: HashMap<String, JobChange>,
}

impl TouchedJobs {
    fn change(&mut self, job_id: &str) -> &mut JobChange {
        let change = self.entry(job_id);
        change.bumps += 1;
        change
    }

    fn entry(&mut self, job_id: &str) -> &mut JobChange {
        if !self.changes.contains_key(job_id) {
            self.order.push(job_id.to_string());
        }
        self.changes.entry(job_id.to_string()).or_default()
    }

    /// An execution of the job finished as `status` at `at`, leaving
    /// `streak` failures in a row (`None`: unchanged). Not a version bump:
    /// claims do not read these columns, so a claim in flight still runs
    /// the job as it is.
    pub(super) fn finished(
        &mut self,
        job_id: &str,
        status: ExecStatus,
        at: Millis,
        streak: Option<u32>,
    ) {
        let change = self.entry(job_id);
        change.last_result = Some((status, at));
        if streak.is_some() {
            change.fail_streak = streak;
        }
    }

    /// The job moved to `status`, with its next trigger if one is given.
    pub(super) fn moved(&mut self, job_id: &str, status: JobStatus, next: Option<Millis>) {
        let change = self.change(job_id);
        change.status = Some(status);
        if next.is_some() {
            change.next_trigger_at = next;
        }
    }

    /// The job keeps its status and gets `next` as its next trigger.
    pub(super) fn rescheduled(&mut self, job_id: &str, next: Millis) {
        self.change(job_id).next_trigger_at = Some(next);
    }
}

/// Writes the final state of every touched execution.
pub(super) async fn write_executions(
    tx: &mut Tx,
    execs: &HashMap<String, Execution>,
    touched: &TouchedExecutions,
    now: Millis,
) -> StoreResult<()> {
    let rows: Vec<&Execution> = touched
        .order
        .iter()
        .filter_map(|id| execs.get(id))
        .collect();
    let dialect = tx.dialect();
    for chunk in rows.chunks(rows_per_statement(dialect)) {
        if let Some(sql) = executions_update(chunk, touched, now).sql(dialect) {
            sql.execute(&mut *tx).await?;
        }
    }
    Ok(())
}

/// Writes every touched job's new status, next trigger and version.
pub(super) async fn write_jobs(tx: &mut Tx, touched: &TouchedJobs, now: Millis) -> StoreResult<()> {
    let dialect = tx.dialect();
    for chunk in touched.order.chunks(rows_per_statement(dialect)) {
        if let Some(sql) = jobs_update(touched, chunk, now).sql(dialect) {
            sql.execute(&mut *tx).await?;
        }
    }
    Ok(())
}

/// The update of the executions in `chunk`: every column of
/// [`EXEC_SETS`] for each of them, `deadline_at`, `incarnation` and
/// `handbacks` only for those whose deadline, holder or count changed (the
/// others keep theirs).
fn executions_update(chunk: &[&Execution], touched: &TouchedExecutions, now: Millis) -> RowsUpdate {
    let mut cols: Vec<Col> = EXEC_SETS.iter().map(|(c, _)| Col::Set(c)).collect();
    cols.extend([
        Col::SetSome("deadline_at"),
        Col::SetSome("incarnation"),
        Col::SetSome("handbacks"),
    ]);
    let mut u = RowsUpdate::new("executions", "id", &cols);
    for e in chunk {
        let mut values: Vec<Option<Value>> =
            EXEC_SETS.iter().map(|(_, value)| Some(value(e))).collect();
        values.push(touched.deadlines.get(&e.id).map(|d| time(*d)));
        values.push(
            touched
                .incarnations
                .get(&e.id)
                .map(|i| Value::from(i.as_deref())),
        );
        values.push(touched.handbacks.get(&e.id).map(|&n| Value::from(n)));
        u.row(e.id.as_str(), values);
    }
    u.same("updated_at", time(now));
    u
}

/// The update of the jobs in `chunk`: the new status, next trigger, last
/// result and failures in a row of those that have one (the others keep
/// theirs), and every one's version bumps.
fn jobs_update(touched: &TouchedJobs, chunk: &[String], now: Millis) -> RowsUpdate {
    let mut u = RowsUpdate::new(
        "jobs",
        "id",
        &[
            Col::SetSome("status"),
            Col::SetSome("next_trigger_at"),
            Col::Add("version"),
            Col::SetSome("last_result"),
            Col::SetSome("last_result_at"),
            Col::SetSome("fail_streak"),
        ],
    );
    for id in chunk {
        if let Some(c) = touched.changes.get(id) {
            u.row(
                id.as_str(),
                vec![
                    c.status.map(|st| st.as_str().into()),
                    c.next_trigger_at.map(time),
                    Some(c.bumps.into()),
                    c.last_result.map(|(st, _)| st.as_str().into()),
                    c.last_result.map(|(_, at)| time(at)),
                    c.fail_streak.map(|n| i64::from(n).into()),
                ],
            );
        }
    }
    u.same("updated_at", time(now));
    u
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

    #[test]
    fn jobs_are_written_back_with_joined_values() {
        let mut t = TouchedJobs::default();
        t.rescheduled("j1", 10);
        t.moved("j2", JobStatus::Succeeded, None);
        assert_eq!(
            jobs_update(&t, &t.order, 20)
                .sql(Dialect::MySql)
                .map(|s| s.text(Dialect::MySql))
                .as_deref(),
            Some(
                "UPDATE jobs JOIN (SELECT ? AS k, ? AS f0, ? AS c0, ? AS f1, ? AS c1, ? AS c2 \
                 UNION ALL SELECT ?, ?, ?, ?, ?, ?) AS v ON jobs.id = v.k \
                 SET jobs.status = CASE WHEN v.f0 = 1 THEN v.c0 ELSE jobs.status END, \
                 jobs.next_trigger_at = CASE WHEN v.f1 = 1 THEN v.c1 ELSE jobs.next_trigger_at END, \
                 jobs.version = jobs.version + v.c2, jobs.updated_at = ?"
            )
        );
        assert_eq!(
            jobs_update(&t, &t.order, 20)
                .sql(Dialect::Sqlite)
                .map(|s| s.text(Dialect::Sqlite))
                .as_deref(),
            Some(
                "WITH v(k, f0, c0, f1, c1, c2) AS (VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)) \
                 UPDATE jobs SET status = CASE WHEN v.f0 = 1 THEN v.c0 ELSE jobs.status END, \
                 next_trigger_at = CASE WHEN v.f1 = 1 THEN v.c1 ELSE jobs.next_trigger_at END, \
                 version = jobs.version + v.c2, updated_at = ? FROM v WHERE jobs.id = v.k"
            )
        );
    }

    #[test]
    fn job_changes_add_up() {
        let mut t = TouchedJobs::default();
        t.rescheduled("j1", 10);
        t.moved("j2", JobStatus::Succeeded, None);
        t.moved("j1", JobStatus::Running, None);
        assert_eq!(t.order, ["j1", "j2"]);
        let j1 = &t.changes["j1"];
        assert_eq!(
            (j1.status, j1.next_trigger_at, j1.bumps),
            (Some(JobStatus::Running), Some(10), 2)
        );
        assert_eq!(t.changes["j2"].next_trigger_at, None);
    }

    #[test]
    fn touching_twice_keeps_the_first_place_and_the_last_deadline() {
        let mut t = TouchedExecutions::default();
        t.touch("e1", Some(Some(5)));
        t.touch("e2", None);
        t.touch("e1", Some(None));
        assert_eq!(t.order, ["e1", "e2"]);
        assert_eq!(t.deadlines.get("e1"), Some(&None));
        assert!(!t.deadlines.contains_key("e2"));
    }
}
