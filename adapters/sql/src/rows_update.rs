//! One `UPDATE` that gives each of many rows its own values, in the form
//! each database runs fastest.
//!
//! On SQLite and PostgreSQL the rows travel as a `VALUES` list joined to
//! the table (`WITH v(…) AS (VALUES …) UPDATE t SET c = v.c … FROM v WHERE
//! t.key = v.key`): each row is found once by its key, so the cost grows
//! with the rows. MySQL/MariaDB has no `UPDATE … FROM`; there every column
//! is a `CASE key WHEN … THEN … END`, which every row walks arm by arm, so
//! [`rows_per_statement`] keeps MySQL statements to 64 rows.
//!
//! Either way the rows are padded to the same few counts as `IN` lists, by
//! repeating the last row: a repeated row names the same key with the same
//! values, so it changes nothing, and each shape is prepared once.

use super::Dialect;
use super::sql::{Sql, Value, padded};

/// What one of a row's values does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Col {
    /// `col = value`.
    Set(&'static str),
    /// `col = value` for the rows that have one (`Some`); the others keep
    /// theirs.
    SetSome(&'static str),
    /// `col = col + value`.
    Add(&'static str),
    /// The row is updated only if its `col` equals the value.
    Check(&'static str),
}

impl Col {
    fn name(self) -> &'static str {
        match self {
            Col::Set(c) | Col::SetSome(c) | Col::Add(c) | Col::Check(c) => c,
        }
    }
}

/// Names of the joined values' columns (`v.c0`, `v.c1`, …) and of the
/// "has a value" flags of [`Col::SetSome`] columns.
const VALUE_NAMES: [&str; 16] = [
    "c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "c10", "c11", "c12", "c13", "c14",
    "c15",
];
const FLAG_NAMES: [&str; 16] = [
    "f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9", "f10", "f11", "f12", "f13", "f14",
    "f15",
];

/// A multi-row `UPDATE` under construction.
pub(crate) struct RowsUpdate {
    table: &'static str,
    key: &'static str,
    cols: Vec<Col>,
    /// Each row's key and its value for every column (`None`: keep, only
    /// for [`Col::SetSome`]).
    rows: Vec<(Value, Vec<Option<Value>>)>,
    /// Columns every row gets the same value in.
    same: Vec<(&'static str, Value)>,
    /// Columns every row adds one to.
    increments: Vec<&'static str>,
}

impl RowsUpdate {
    /// An update of `table`'s rows by `key`, with `cols` from each row
    /// (at most 16).
    pub(crate) fn new(table: &'static str, key: &'static str, cols: &[Col]) -> RowsUpdate {
        debug_assert!(cols.len() <= VALUE_NAMES.len());
        RowsUpdate {
            table,
            key,
            cols: cols.to_vec(),
            rows: Vec::new(),
            same: Vec::new(),
            increments: Vec::new(),
        }
    }

    /// A row: its key, and its value for each column in order.
    pub(crate) fn row(&mut self, key: impl Into<Value>, values: Vec<Option<Value>>) -> &mut Self {
        debug_assert_eq!(values.len(), self.cols.len());
        self.rows.push((key.into(), values));
        self
    }

    /// `col = value` on every row.
    pub(crate) fn same(&mut self, col: &'static str, value: impl Into<Value>) -> &mut Self {
        self.same.push((col, value.into()));
        self
    }

    /// `col = col + 1` on every row.
    pub(crate) fn increment(&mut self, col: &'static str) -> &mut Self {
        self.increments.push(col);
        self
    }

    /// The statement for `dialect`; `None` without rows.
    pub(crate) fn sql(self, dialect: Dialect) -> Option<Sql> {
        if self.rows.is_empty() {
            return None;
        }
        Some(match dialect {
            Dialect::MySql => self.cases(),
            Dialect::Postgres | Dialect::Sqlite => self.joined(),
        })
    }

    /// Which columns to write: a [`Col::SetSome`] no row has a value for
    /// is left out, so the statement does not mention it.
    fn used(&self) -> Vec<(usize, Col)> {
        self.cols
            .iter()
            .copied()
            .enumerate()
            .filter(|&(i, col)| {
                !matches!(col, Col::SetSome(_)) || self.rows.iter().any(|(_, v)| v[i].is_some())
            })
            .collect()
    }

    /// `WITH v(k, c0, f1, c1, …) AS (VALUES (…), …) UPDATE t SET … FROM v
    /// WHERE t.key = v.k [AND t.col = v.cN …]`.
    fn joined(self) -> Sql {
        let used = self.used();
        let mut s = Sql::new("WITH v(k");
        for &(i, col) in &used {
            if matches!(col, Col::SetSome(_)) {
                s.push(", ").push(FLAG_NAMES[i]);
            }
            s.push(", ").push(VALUE_NAMES[i]);
        }
        s.push(") AS (VALUES ");
        // What a `SetSome` row without a value binds (its flag says to
        // ignore it): another row's value, so PostgreSQL sees one type.
        let filler: Vec<Option<Value>> = (0..self.cols.len())
            .map(|i| self.rows.iter().find_map(|(_, v)| v[i].clone()))
            .collect();
        for (n, (key, values)) in padded(self.rows).into_iter().enumerate() {
            s.push(if n == 0 { "(" } else { ", (" }).bind(key);
            for &(i, col) in &used {
                if matches!(col, Col::SetSome(_)) {
                    s.push(", ").bind(i64::from(values[i].is_some()));
                }
                if let Some(v) = values[i].clone().or_else(|| filler[i].clone()) {
                    s.push(", ").bind(v);
                }
            }
            s.push(")");
        }
        s.push(") UPDATE ").push(self.table).push(" SET ");
        let mut first = true;
        let mut comma = |s: &mut Sql| {
            if !std::mem::replace(&mut first, false) {
                s.push(", ");
            }
        };
        for &(i, col) in &used {
            let (name, value) = (col.name(), VALUE_NAMES[i]);
            match col {
                Col::Set(_) => {
                    comma(&mut s);
                    s.push(name).push(" = v.").push(value);
                }
                Col::SetSome(_) => {
                    comma(&mut s);
                    s.push(name)
                        .push(" = CASE WHEN v.")
                        .push(FLAG_NAMES[i])
                        .push(" = 1 THEN v.")
                        .push(value)
                        .push(" ELSE ");
                    qualified(&mut s, self.table, name).push(" END");
                }
                Col::Add(_) => {
                    comma(&mut s);
                    s.push(name).push(" = ");
                    qualified(&mut s, self.table, name)
                        .push(" + v.")
                        .push(value);
                }
                Col::Check(_) => {}
            }
        }
        for name in self.increments {
            comma(&mut s);
            s.push(name).push(" = ");
            qualified(&mut s, self.table, name).push(" + 1");
        }
        for (name, value) in self.same {
            comma(&mut s);
            s.push(name).push(" = ").bind(value);
        }
        s.push(" FROM v WHERE ");
        qualified(&mut s, self.table, self.key).push(" = v.k");
        for &(i, col) in &used {
            if let Col::Check(name) = col {
                s.push(" AND ");
                qualified(&mut s, self.table, name)
                    .push(" = v.")
                    .push(VALUE_NAMES[i]);
            }
        }
        s
    }

    /// `UPDATE t SET col = CASE key WHEN ? THEN ? … ELSE col END, … WHERE
    /// key IN (…) [AND col = CASE key … END …]`.
    fn cases(self) -> Sql {
        let used = self.used();
        let arms = |i: usize| {
            self.rows
                .iter()
                .filter_map(move |(k, v)| v[i].clone().map(|v| (k.clone(), v)))
        };
        let mut s = Sql::new("UPDATE ");
        s.push(self.table).push(" SET ");
        let mut first = true;
        let mut comma = |s: &mut Sql| {
            if !std::mem::replace(&mut first, false) {
                s.push(", ");
            }
        };
        for &(i, col) in &used {
            let name = col.name();
            match col {
                Col::Set(_) | Col::SetSome(_) => {
                    comma(&mut s);
                    s.push(name).push(" = ").case(self.key, name, arms(i));
                }
                Col::Add(_) => {
                    comma(&mut s);
                    s.push(name)
                        .push(" = ")
                        .push(name)
                        .push(" + ")
                        .case(self.key, "0", arms(i));
                }
                Col::Check(_) => {}
            }
        }
        for name in &self.increments {
            comma(&mut s);
            s.push(name).push(" = ").push(name).push(" + 1");
        }
        for (name, value) in &self.same {
            comma(&mut s);
            s.push(name).push(" = ").bind(value.clone());
        }
        s.push(" WHERE ")
            .push(self.key)
            .push(" IN ")
            .list(self.rows.iter().map(|(k, _)| k.clone()));
        for &(i, col) in &used {
            if let Col::Check(name) = col {
                s.push(" AND ")
                    .push(name)
                    .push(" = ")
                    .case(self.key, name, arms(i));
            }
        }
        s
    }
}

/// `table.col`: the updated table's own column, which the joined values
/// would otherwise shadow.
fn qualified<'s>(s: &'s mut Sql, table: &'static str, col: &'static str) -> &'s mut Sql {
    s.push(table).push(".").push(col)
}

/// Rows per multi-row update. A MySQL `CASE` is walked arm by arm for every
/// row, so its cost grows with the square of the rows: statements of 64 are
/// much cheaper than one of 200. The joined `VALUES` of SQLite and
/// PostgreSQL cost in proportion to their rows.
pub(crate) fn rows_per_statement(dialect: Dialect) -> usize {
    match dialect {
        Dialect::MySql => 64,
        Dialect::Postgres | Dialect::Sqlite => 256,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RowsUpdate {
        let mut u = RowsUpdate::new(
            "jobs",
            "id",
            &[
                Col::Set("status"),
                Col::SetSome("next_at"),
                Col::Add("version"),
                Col::Check("seen"),
            ],
        );
        u.row(
            "a",
            vec![
                Some("x".into()),
                Some(5i64.into()),
                Some(1i64.into()),
                Some(7i64.into()),
            ],
        )
        .row(
            "b",
            vec![Some("y".into()), None, Some(2i64.into()), Some(8i64.into())],
        )
        .row(
            "c",
            vec![Some("z".into()), None, Some(1i64.into()), Some(9i64.into())],
        )
        .same("updated_at", 10i64);
        u
    }

    #[test]
    fn sqlite_and_postgres_join_padded_values() {
        let sql = sample()
            .sql(Dialect::Sqlite)
            .map(|s| s.text(Dialect::Sqlite));
        assert_eq!(
            sql.as_deref(),
            Some(
                "WITH v(k, c0, f1, c1, c2, c3) AS (VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?), \
                 (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)) UPDATE jobs SET status = v.c0, \
                 next_at = CASE WHEN v.f1 = 1 THEN v.c1 ELSE jobs.next_at END, \
                 version = jobs.version + v.c2, updated_at = ? \
                 FROM v WHERE jobs.id = v.k AND jobs.seen = v.c3"
            )
        );
        let pg = sample()
            .sql(Dialect::Postgres)
            .map(|s| s.text(Dialect::Postgres));
        assert!(
            pg.is_some_and(|s| s.starts_with("WITH v(k, c0, f1, c1, c2, c3) AS (VALUES ($1, $2,"))
        );
    }

    #[test]
    fn mysql_gets_one_case_per_column() {
        let sql = sample().sql(Dialect::MySql).map(|s| s.text(Dialect::MySql));
        assert_eq!(
            sql.as_deref(),
            Some(
                "UPDATE jobs SET status = CASE id WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? \
                 WHEN ? THEN ? ELSE status END, \
                 next_at = CASE id WHEN ? THEN ? ELSE next_at END, \
                 version = version + CASE id WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? \
                 WHEN ? THEN ? ELSE 0 END, updated_at = ? \
                 WHERE id IN (?, ?, ?, ?) \
                 AND seen = CASE id WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? WHEN ? THEN ? \
                 ELSE seen END"
            )
        );
    }

    #[test]
    fn a_column_no_row_sets_is_left_out() {
        let mut u = RowsUpdate::new("t", "id", &[Col::Set("a"), Col::SetSome("b")]);
        u.row("x", vec![Some(1i64.into()), None]);
        assert_eq!(
            u.sql(Dialect::Sqlite)
                .map(|s| s.text(Dialect::Sqlite))
                .as_deref(),
            Some("WITH v(k, c0) AS (VALUES (?, ?)) UPDATE t SET a = v.c0 FROM v WHERE t.id = v.k")
        );
        let empty = RowsUpdate::new("t", "id", &[Col::Set("a")]);
        assert!(empty.sql(Dialect::MySql).is_none());
    }
}
