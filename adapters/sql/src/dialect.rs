//! Which database a store talks to, named from its URL.

/// Which database a [`crate::SqlStore`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// MySQL or MariaDB (InnoDB).
    MySql,
    /// PostgreSQL.
    Postgres,
    /// SQLite (WAL mode).
    Sqlite,
}

impl Dialect {
    /// The dialect of a `mysql://`, `mariadb://`, `postgres://`,
    /// `postgresql://` or `sqlite:` URL.
    pub fn from_url(url: &str) -> Option<Self> {
        if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            Some(Dialect::MySql)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Dialect::Postgres)
        } else if url.starts_with("sqlite:") {
            Some(Dialect::Sqlite)
        } else {
            None
        }
    }

    /// The database's name, for messages.
    pub fn service(self) -> &'static str {
        match self {
            Dialect::MySql => "MySQL",
            Dialect::Postgres => "PostgreSQL",
            Dialect::Sqlite => "SQLite",
        }
    }
}
