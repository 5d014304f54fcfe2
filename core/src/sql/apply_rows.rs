//! The execution side of applying results: after every result of a batch has
//! been decided in memory (on rows the transaction has locked), each changed
//! execution's final row is written in one multi-row `UPDATE … CASE id …`
//! per chunk, instead of one statement per result.

use super::SqlStore;
use super::error::db_err;
use super::stmt::{Q, marks, q};
use crate::execution::Execution;
use crate::store::StoreResult;
use crate::time::Millis;
use sqlx::AnyConnection;
use std::collections::{HashMap, HashSet};

/// Executions per statement: each costs about two dozen placeholders.
const ROWS: usize = 200;

/// Executions changed by a batch, in the order first changed.
#[derive(Default)]
pub(super) struct Touched {
    order: Vec<String>,
    seen: HashSet<String>,
    /// New `deadline_at` of the executions whose deadline changed.
    deadlines: HashMap<String, Option<Millis>>,
}

impl Touched {
    /// Marks `id` changed; `deadline` is `Some` when its deadline changed too.
    pub(super) fn touch(&mut self, id: &str, deadline: Option<Option<Millis>>) {
        if self.seen.insert(id.to_string()) {
            self.order.push(id.to_string());
        }
        if let Some(d) = deadline {
            self.deadlines.insert(id.to_string(), d);
        }
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
        touched: &Touched,
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
            let sql = format!(
                "UPDATE executions SET {}, updated_at = ? WHERE id IN ({})",
                sets.join(", "),
                marks(n)
            );
            let mut query = q(sql);
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
            query = query.bind(now);
            for e in chunk {
                query = query.bind(e.id.clone());
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
    fn touching_twice_keeps_the_first_place_and_the_last_deadline() {
        let mut t = Touched::default();
        t.touch("e1", Some(Some(5)));
        t.touch("e2", None);
        t.touch("e1", Some(None));
        assert_eq!(t.order, ["e1", "e2"]);
        assert_eq!(t.deadlines.get("e1"), Some(&None));
        assert!(!t.deadlines.contains_key("e2"));
    }
}
