//! Writing back what a batch of results decided: after every result has
//! been decided in memory (on rows the transaction has locked), each changed
//! execution's final row, and each changed job's status, next trigger and
//! version, are written in one multi-row `UPDATE … CASE id …` per chunk,
//! instead of one statement per result.

use super::SqlStore;
use super::error::db_err;
use super::stmt::{Q, marks, q};
use kairos_core::execution::Execution;
use kairos_core::job::JobStatus;
use kairos_core::store::StoreResult;
use kairos_core::time::Millis;
use sqlx::AnyConnection;
use std::collections::{HashMap, HashSet};

/// Executions per statement: each costs about two dozen placeholders.
const ROWS: usize = 200;

/// Executions changed by a batch, in the order first changed.
#[derive(Default)]
pub(super) struct TouchedExecutions {
    order: Vec<String>,
    seen: HashSet<String>,
    /// New `deadline_at` of the executions whose deadline changed.
    deadlines: HashMap<String, Option<Millis>>,
    /// New `incarnation` of the executions started or retried.
    incarnations: HashMap<String, Option<String>>,
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
}

/// What a batch changed on one job.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct JobChange {
    status: Option<JobStatus>,
    next_trigger_at: Option<Millis>,
    /// Version bumps: one per change, as separate updates would have made.
    bumps: i64,
}

/// Jobs changed by a batch, in the order first changed.
#[derive(Default)]
pub(super) struct TouchedJobs {
    order: Vec<String>,
    changes: HashMap<String, JobChange>,
}

impl TouchedJobs {
    fn change(&mut self, job_id: &str) -> &mut JobChange {
        if !self.changes.contains_key(job_id) {
            self.order.push(job_id.to_string());
        }
        let change = self.changes.entry(job_id.to_string()).or_default();
        change.bumps += 1;
        change
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

/// One `col = CASE id WHEN ? THEN ? … END` for `n` rows (`ELSE col` keeps
/// rows without a value).
fn case(col: &str, n: usize, keep_others: bool) -> String {
    let mut s = format!("{col} = CASE id");
    for _ in 0..n {
        s.push_str(" WHEN ? THEN ?");
    }
    if keep_others {
        s.push_str(&format!(" ELSE {col}"));
    }
    s.push_str(" END");
    s
}

impl SqlStore {
    /// Writes the final state of every touched execution.
    pub(super) async fn write_executions(
        &self,
        conn: &mut AnyConnection,
        execs: &HashMap<String, Execution>,
        touched: &TouchedExecutions,
        now: Millis,
    ) -> StoreResult<()> {
        let rows: Vec<&Execution> = touched
            .order
            .iter()
            .filter_map(|id| execs.get(id))
            .collect();
        for chunk in rows.chunks(ROWS) {
            let with_deadline: Vec<(&str, Option<Millis>)> = chunk
                .iter()
                .filter_map(|e| touched.deadlines.get(&e.id).map(|d| (e.id.as_str(), *d)))
                .collect();
            let n = chunk.len();
            let mut sets: Vec<String> = [
                "status",
                "attempt",
                "worker_id",
                "output",
                "error",
                "not_before",
                "dispatched_at",
                "started_at",
                "finished_at",
            ]
            .iter()
            .map(|col| case(col, n, false))
            .collect();
            if !with_deadline.is_empty() {
                sets.push(case("deadline_at", with_deadline.len(), true));
            }
            let with_incarnation: Vec<(&str, Option<String>)> = chunk
                .iter()
                .filter_map(|e| {
                    touched
                        .incarnations
                        .get(&e.id)
                        .map(|i| (e.id.as_str(), i.clone()))
                })
                .collect();
            if !with_incarnation.is_empty() {
                sets.push(case("incarnation", with_incarnation.len(), true));
            }
            let sql = format!(
                "UPDATE executions SET {}, updated_at = ? WHERE id IN ({})",
                sets.join(", "),
                marks(n)
            );
            let mut query = q(self.dialect(), sql);
            query = each(query, chunk, |q, e| q.bind(e.status.as_str()));
            query = each(query, chunk, |q, e| q.bind(i64::from(e.attempt)));
            query = each(query, chunk, |q, e| q.bind(e.worker_id.clone()));
            query = each(query, chunk, |q, e| {
                q.bind(e.output.as_ref().map(|v| v.to_string()))
            });
            query = each(query, chunk, |q, e| q.bind(e.error.clone()));
            query = each(query, chunk, |q, e| q.bind(e.not_before));
            query = each(query, chunk, |q, e| q.bind(e.dispatched_at));
            query = each(query, chunk, |q, e| q.bind(e.started_at));
            query = each(query, chunk, |q, e| q.bind(e.finished_at));
            for (id, deadline) in &with_deadline {
                query = query.bind(id.to_string()).bind(*deadline);
            }
            for (id, incarnation) in with_incarnation {
                query = query.bind(id.to_string()).bind(incarnation);
            }
            query = query.bind(now);
            for e in chunk {
                query = query.bind(e.id.clone());
            }
            query.execute(&mut *conn).await.map_err(db_err)?;
        }
        Ok(())
    }
}

impl SqlStore {
    /// Writes every touched job's new status, next trigger and version.
    pub(super) async fn write_jobs(
        &self,
        conn: &mut AnyConnection,
        touched: &TouchedJobs,
        now: Millis,
    ) -> StoreResult<()> {
        for chunk in touched.order.chunks(ROWS) {
            let rows: Vec<(&str, &JobChange)> = chunk
                .iter()
                .filter_map(|id| touched.changes.get(id).map(|c| (id.as_str(), c)))
                .collect();
            let statuses: Vec<(&str, JobStatus)> = rows
                .iter()
                .filter_map(|(id, c)| c.status.map(|s| (*id, s)))
                .collect();
            let nexts: Vec<(&str, Millis)> = rows
                .iter()
                .filter_map(|(id, c)| c.next_trigger_at.map(|t| (*id, t)))
                .collect();
            let mut sets = Vec::new();
            if !statuses.is_empty() {
                sets.push(case("status", statuses.len(), true));
            }
            if !nexts.is_empty() {
                sets.push(case("next_trigger_at", nexts.len(), true));
            }
            let bump = case("version", rows.len(), false).replacen("version = ", "", 1);
            sets.push(format!("version = version + {bump}"));
            let sql = format!(
                "UPDATE jobs SET {}, updated_at = ? WHERE id IN ({})",
                sets.join(", "),
                marks(rows.len())
            );
            let mut query = q(self.dialect(), sql);
            for (id, status) in &statuses {
                query = query.bind(id.to_string()).bind(status.as_str());
            }
            for (id, next) in &nexts {
                query = query.bind(id.to_string()).bind(*next);
            }
            for (id, change) in &rows {
                query = query.bind(id.to_string()).bind(change.bumps);
            }
            query = query.bind(now);
            for (id, _) in &rows {
                query = query.bind(id.to_string());
            }
            query.execute(&mut *conn).await.map_err(db_err)?;
        }
        Ok(())
    }
}

/// Binds `WHEN id THEN value` for every row.
fn each<'q>(
    mut query: Q<'q>,
    rows: &[&Execution],
    value: impl Fn(Q<'q>, &Execution) -> Q<'q>,
) -> Q<'q> {
    for e in rows {
        query = value(query.bind(e.id.clone()), e);
    }
    query
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_lists_one_branch_per_row() {
        assert_eq!(
            case("a", 2, false),
            "a = CASE id WHEN ? THEN ? WHEN ? THEN ? END"
        );
        assert_eq!(case("d", 1, true), "d = CASE id WHEN ? THEN ? ELSE d END");
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
