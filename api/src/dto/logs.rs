//! Execution log responses: pages of the lines a handler wrote.

use super::time;
use kairos_core::store::{Page, StoredLogLine};
use serde::Serialize;
use utoipa::ToSchema;

/// One line a handler wrote.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogLineView {
    /// Position in the execution's log; increases with every line.
    pub seq: i64,
    /// Attempt that wrote it.
    pub attempt: u32,
    /// Worker that ran the attempt.
    pub worker_id: String,
    /// When the handler wrote it (worker clock).
    #[schema(format = DateTime)]
    pub at: String,
    /// `debug`, `info`, `warn` or `error`.
    pub level: String,
    /// The text (lines over 4 KiB are cut).
    pub message: String,
}

impl From<StoredLogLine> for LogLineView {
    fn from(l: StoredLogLine) -> Self {
        LogLineView {
            seq: l.seq,
            attempt: l.attempt,
            worker_id: l.worker_id,
            at: time(l.at),
            level: l.level.as_str().to_string(),
            message: l.message,
        }
    }
}

/// A page of an execution's log lines, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogPage {
    /// Lines on this page.
    pub items: Vec<LogLineView>,
    /// Cursor of the next page; `null` when no more lines are stored yet
    /// (a running handler may still add some: poll again with the last
    /// cursor you had, or with none).
    pub next_cursor: Option<String>,
}

impl From<Page<StoredLogLine>> for LogPage {
    fn from(page: Page<StoredLogLine>) -> Self {
        LogPage {
            items: page.items.into_iter().map(LogLineView::from).collect(),
            next_cursor: page.next_cursor,
        }
    }
}
