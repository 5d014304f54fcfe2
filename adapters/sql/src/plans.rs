//! Statement plans, so tests can hold every statement the store runs to the
//! rule of issue 43 (a read costs what it returns, not the history stored):
//! [`record`] keeps each statement as it runs, with its values, and
//! [`SqlStore::explain`] asks the database how it would run one, as
//! [`Step`]s that name the table, the index, and whether it scans the whole
//! table or sorts what it read.
//!
//! Recording costs one relaxed atomic load per statement while it is off,
//! which is always outside tests.

use crate::dialect::Dialect;
use crate::sql::Sql;
use crate::store::SqlStore;
use kairos_core::store::StoreResult;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many [`Recording`]s are alive.
static RECORDING: AtomicUsize = AtomicUsize::new(0);
/// What they recorded, in the order the statements ran.
static RECORDED: Mutex<Vec<(Dialect, Sql)>> = Mutex::new(Vec::new());

/// Called for every statement the store runs.
pub(crate) fn observe(dialect: Dialect, sql: &Sql) {
    if RECORDING.load(Ordering::Relaxed) == 0 {
        return;
    }
    if let Ok(mut seen) = RECORDED.lock() {
        seen.push((dialect, sql.clone()));
    }
}

/// Keeps every statement any store of this process runs while it lives.
pub struct Recording(());

/// Starts recording statements (see [`Recording::take`]).
pub fn record() -> Recording {
    RECORDING.fetch_add(1, Ordering::SeqCst);
    Recording(())
}

impl Recording {
    /// The statements run on `dialect` since the last take, one per shape
    /// (the first one run, with its values), in the order they first ran.
    pub fn take(&self, dialect: Dialect) -> Vec<Statement> {
        let mut seen = RECORDED.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept = Vec::new();
        let mut shapes = std::collections::HashSet::new();
        seen.retain(|(d, sql)| {
            if *d != dialect {
                return true;
            }
            let text = sql.text(dialect);
            // `explain` runs statements too: they are not the store's.
            if !text.starts_with("EXPLAIN ") && shapes.insert(text.clone()) {
                kept.push(Statement {
                    sql: sql.clone(),
                    text,
                });
            }
            false
        });
        kept
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        RECORDING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One recorded statement.
#[derive(Debug, Clone)]
pub struct Statement {
    sql: Sql,
    /// Its SQL, as its database runs it.
    pub text: String,
}

/// How a database would run a statement.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The database's own words, one line per row of its `EXPLAIN`.
    pub lines: Vec<String>,
    pub steps: Vec<Step>,
}

/// One step of a [`Plan`]: a read of a table (or of an index alone), or a
/// sort.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The table read, when the step reads one (aliases resolved).
    pub table: Option<String>,
    /// The index it reads through.
    pub index: Option<String>,
    /// It reads the whole table or the whole index.
    pub full_scan: bool,
    /// It sorts (a filesort, a temporary B-tree, a `Sort` node).
    pub sorts: bool,
}

impl SqlStore {
    /// How this store's database would run `statement` (`EXPLAIN`; nothing
    /// is executed).
    pub async fn explain(&self, statement: &Statement) -> StoreResult<Plan> {
        let dialect = self.dialect();
        let prefix = match dialect {
            Dialect::Sqlite => "EXPLAIN QUERY PLAN ",
            Dialect::MySql | Dialect::Postgres => "EXPLAIN ",
        };
        let rows = statement
            .sql
            .prefixed(prefix)
            .fetch_all(self.write())
            .await?;
        let cells: Vec<Vec<(String, Option<String>)>> = rows.iter().map(|r| r.cells()).collect();
        let tables = aliases(&statement.text);
        Ok(match dialect {
            Dialect::Sqlite => sqlite_plan(&cells, &tables),
            Dialect::MySql => mysql_plan(&cells, &tables),
            Dialect::Postgres => postgres_plan(&cells),
        })
    }
}

/// Alias (or name) → table, for every `FROM`/`JOIN`/`UPDATE`/`INTO` of `sql`.
fn aliases(sql: &str) -> HashMap<String, String> {
    let words: Vec<&str> = sql
        .split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .filter(|w| !w.is_empty())
        .collect();
    let keyword = |w: &str| {
        matches!(
            w.to_ascii_uppercase().as_str(),
            "WHERE"
                | "JOIN"
                | "ON"
                | "SET"
                | "LEFT"
                | "INNER"
                | "CROSS"
                | "ORDER"
                | "GROUP"
                | "LIMIT"
                | "USING"
                | "VALUES"
                | "FOR"
                | "SELECT"
                | "UNION"
                | "AS"
                | "WITH"
                | "FORCE"
                | "USE"
                | "IGNORE"
        )
    };
    let ident = |w: &str| w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut map = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        let up = w.to_ascii_uppercase();
        if !matches!(up.as_str(), "FROM" | "JOIN" | "UPDATE" | "INTO") {
            continue;
        }
        let Some(table) = words.get(i + 1).filter(|t| ident(t) && !keyword(t)) else {
            continue;
        };
        map.insert(table.to_string(), table.to_string());
        let mut next = i + 2;
        if words
            .get(next)
            .is_some_and(|w| w.eq_ignore_ascii_case("AS"))
        {
            next += 1;
        }
        if let Some(alias) = words.get(next).filter(|a| ident(a) && !keyword(a)) {
            map.insert(alias.to_string(), table.to_string());
        }
    }
    map
}

fn cell<'a>(row: &'a [(String, Option<String>)], name: &str) -> Option<&'a str> {
    row.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_deref())
}

/// SQLite's `EXPLAIN QUERY PLAN`: `SCAN x [USING … INDEX i]`,
/// `SEARCH x USING … (a=?)`, `USE TEMP B-TREE FOR …`.
fn sqlite_plan(rows: &[Vec<(String, Option<String>)>], tables: &HashMap<String, String>) -> Plan {
    let mut plan = Plan {
        lines: Vec::new(),
        steps: Vec::new(),
    };
    for row in rows {
        let detail = cell(row, "detail").unwrap_or_default().to_string();
        let words: Vec<&str> = detail.split_whitespace().collect();
        let index = words
            .iter()
            .position(|w| *w == "INDEX")
            .and_then(|i| words.get(i + 1))
            .map(|s| s.to_string());
        match words.first().copied() {
            Some(kind @ ("SCAN" | "SEARCH")) => {
                if let Some(table) = words.get(1).and_then(|n| tables.get(*n)) {
                    plan.steps.push(Step {
                        table: Some(table.clone()),
                        index,
                        full_scan: kind == "SCAN",
                        sorts: false,
                    });
                }
            }
            Some("USE") if detail.contains("TEMP B-TREE") => plan.steps.push(Step {
                sorts: true,
                ..Step::default()
            }),
            _ => {}
        }
        plan.lines.push(detail);
    }
    plan
}

/// MySQL's and MariaDB's `EXPLAIN`: one row per table read; `type` `ALL`
/// (every row) or `index` (every index entry) is a full scan.
fn mysql_plan(rows: &[Vec<(String, Option<String>)>], tables: &HashMap<String, String>) -> Plan {
    let mut plan = Plan {
        lines: Vec::new(),
        steps: Vec::new(),
    };
    for row in rows {
        let kind = cell(row, "type").unwrap_or_default();
        let extra = cell(row, "Extra").unwrap_or_default();
        let table = cell(row, "table").and_then(|t| tables.get(t)).cloned();
        // The row of an `INSERT` itself (type `ALL`, no rows) reads
        // nothing; an `INSERT … SELECT` has rows of its own for the read.
        let insert = cell(row, "select_type") == Some("INSERT");
        if table.is_some() && !insert {
            plan.steps.push(Step {
                table,
                index: cell(row, "key").map(str::to_string),
                full_scan: matches!(kind, "ALL" | "index"),
                sorts: extra.contains("filesort") || extra.contains("temporary"),
            });
        } else if extra.contains("filesort") || extra.contains("temporary") {
            plan.steps.push(Step {
                sorts: true,
                ..Step::default()
            });
        }
        plan.lines.push(
            row.iter()
                .map(|(n, v)| format!("{n}={}", v.as_deref().unwrap_or("NULL")))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    plan
}

/// PostgreSQL's `EXPLAIN`: one node a line (`Seq Scan on t x`,
/// `Index Scan using i on t x`, `Bitmap Index Scan on i`, `Sort`).
fn postgres_plan(rows: &[Vec<(String, Option<String>)>]) -> Plan {
    let mut plan = Plan {
        lines: Vec::new(),
        steps: Vec::new(),
    };
    for row in rows {
        let line = row.first().and_then(|(_, v)| v.clone()).unwrap_or_default();
        let node = line.trim_start().trim_start_matches("->").trim_start();
        let node = node.split("  (cost=").next().unwrap_or(node);
        let words: Vec<&str> = node.split_whitespace().collect();
        let after = |w: &str| {
            words
                .iter()
                .position(|x| *x == w)
                .and_then(|i| words.get(i + 1))
                .map(|s| s.to_string())
        };
        if node.starts_with("Seq Scan on ") {
            plan.steps.push(Step {
                table: after("on"),
                full_scan: true,
                ..Step::default()
            });
        } else if node.starts_with("Index Scan") || node.starts_with("Index Only Scan") {
            plan.steps.push(Step {
                table: after("on"),
                index: after("using"),
                ..Step::default()
            });
        } else if node.starts_with("Bitmap Index Scan on ") {
            plan.steps.push(Step {
                index: after("on"),
                ..Step::default()
            });
        } else if node.starts_with("Bitmap Heap Scan on ") {
            plan.steps.push(Step {
                table: after("on"),
                ..Step::default()
            });
        } else if node == "Sort" || node == "Incremental Sort" {
            plan.steps.push(Step {
                sorts: true,
                ..Step::default()
            });
        }
        plan.lines.push(line);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_name_their_tables() {
        let map = aliases(
            "SELECT e.id FROM executions e JOIN jobs AS j ON j.id = e.job_id \
             WHERE e.id IN (SELECT x FROM concurrency_slots WHERE y = ?)",
        );
        assert_eq!(map.get("e").map(String::as_str), Some("executions"));
        assert_eq!(map.get("j").map(String::as_str), Some("jobs"));
        assert_eq!(
            map.get("concurrency_slots").map(String::as_str),
            Some("concurrency_slots")
        );
        assert!(!map.contains_key("WHERE"));
    }

    fn rows(lines: &[&str]) -> Vec<Vec<(String, Option<String>)>> {
        lines
            .iter()
            .map(|l| vec![("detail".to_string(), Some(l.to_string()))])
            .collect()
    }

    #[test]
    fn sqlite_scans_searches_and_sorts_are_told_apart() {
        let tables = aliases("SELECT 1 FROM executions e JOIN jobs j ON 1 = 1");
        let plan = sqlite_plan(
            &rows(&[
                "SEARCH e USING INDEX idx_executions_job_scheduled (job_id=?)",
                "SCAN j",
                "SCAN capped",
                "USE TEMP B-TREE FOR ORDER BY",
            ]),
            &tables,
        );
        assert_eq!(plan.steps.len(), 3);
        assert_eq!(
            plan.steps[0].index.as_deref(),
            Some("idx_executions_job_scheduled")
        );
        assert!(!plan.steps[0].full_scan);
        assert_eq!(plan.steps[1].table.as_deref(), Some("jobs"));
        assert!(plan.steps[1].full_scan);
        assert!(plan.steps[2].sorts);
    }

    #[test]
    fn mysql_rows_tell_scans_from_inserts() {
        let row = |select_type: &str, table: &str, kind: &str, extra: &str| {
            [
                ("select_type", select_type),
                ("table", table),
                ("type", kind),
                ("key", "idx"),
                ("Extra", extra),
            ]
            .map(|(n, v)| (n.to_string(), Some(v.to_string())))
            .to_vec()
        };
        let tables = aliases("INSERT INTO jobs (a) SELECT a FROM executions e");
        let plan = mysql_plan(
            &[
                row("INSERT", "jobs", "ALL", ""),
                row("SIMPLE", "e", "ALL", "Using where; Using filesort"),
                row("SIMPLE", "<derived2>", "ALL", ""),
            ],
            &tables,
        );
        assert_eq!(plan.steps.len(), 1, "{plan:?}");
        assert_eq!(plan.steps[0].table.as_deref(), Some("executions"));
        assert!(plan.steps[0].full_scan && plan.steps[0].sorts);
    }

    #[test]
    fn postgres_nodes_are_read_from_their_lines() {
        let plan = postgres_plan(&rows(&[
            "Limit  (cost=0.42..8.45 rows=2 width=10)",
            "  ->  Index Scan Backward using idx_executions_job_scheduled on executions e  (cost=0.42..80.1 rows=20 width=10)",
            "        Index Cond: (job_id = $1)",
            "  ->  Seq Scan on jobs j  (cost=0.00..1.01 rows=1 width=4)",
            "  ->  Sort  (cost=1.02..1.03 rows=1 width=4)",
        ]));
        assert_eq!(plan.steps.len(), 3);
        assert_eq!(plan.steps[0].table.as_deref(), Some("executions"));
        assert_eq!(
            plan.steps[0].index.as_deref(),
            Some("idx_executions_job_scheduled")
        );
        assert!(plan.steps[1].full_scan);
        assert!(plan.steps[2].sorts);
    }
}
