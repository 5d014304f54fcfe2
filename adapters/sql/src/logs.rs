//! [`LogStore`]: the lines handlers write, bounded per execution (oldest
//! dropped first), paged by their position, and purged after the retention.

use super::SqlStore;
use super::error::db_err;
use super::rows::R;
use super::stmt::{CHUNK, fetch_by_ids, marks, q, row_marks};
use async_trait::async_trait;
use kairos_core::protocol::{LogLevel, LogMsg};
use kairos_core::store::{LogLimits, LogStore, Page, StoreResult, StoredLogLine};
use kairos_core::time::Millis;
use sqlx::AnyConnection;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Columns written per line.
const LINE_COLS: usize = 8;

/// `message` cut to at most `max` bytes, on a character boundary.
fn cut(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

fn line(row: &sqlx::any::AnyRow) -> StoreResult<StoredLogLine> {
    let r = R::new(row, "execution_logs");
    Ok(StoredLogLine {
        seq: r.i64("id")?,
        attempt: r.u32("attempt")?,
        worker_id: r.string("worker_id")?,
        at: r.i64("at")?,
        level: r.parsed("level", LogLevel::parse)?,
        message: r.string("message")?,
    })
}

impl SqlStore {
    /// Drops the oldest lines of `execution_id` beyond `limits`.
    async fn trim(
        &self,
        conn: &mut AnyConnection,
        execution_id: &str,
        limits: &LogLimits,
    ) -> StoreResult<()> {
        let int = self.dialect().cast_int();
        let row = q(
            self.dialect(),
            format!(
                "SELECT COUNT(*) AS n, CAST(COALESCE(SUM(bytes), 0) AS {int}) AS b \
             FROM execution_logs WHERE execution_id = ?"
            ),
        )
        .bind(execution_id)
        .fetch_one(&mut *conn)
        .await
        .map_err(db_err)?;
        let r = R::new(&row, "execution_logs");
        let (mut lines, mut bytes) = (r.i64("n")?, r.i64("b")?);
        let max_bytes = i64::try_from(limits.max_bytes).unwrap_or(i64::MAX);
        let max_lines = i64::from(limits.max_lines);
        if lines <= max_lines && bytes <= max_bytes {
            return Ok(());
        }
        // Oldest first, until what is left fits both limits.
        let oldest = q(
            self.dialect(),
            "SELECT id, bytes FROM execution_logs WHERE execution_id = ? ORDER BY id LIMIT ?",
        )
        .bind(execution_id)
        .bind(lines)
        .fetch_all(&mut *conn)
        .await
        .map_err(db_err)?;
        let mut cutoff = None;
        for row in &oldest {
            if lines <= max_lines && bytes <= max_bytes {
                break;
            }
            let r = R::new(row, "execution_logs");
            cutoff = Some(r.i64("id")?);
            lines -= 1;
            bytes -= r.i64("bytes")?;
        }
        if let Some(cutoff) = cutoff {
            q(
                self.dialect(),
                "DELETE FROM execution_logs WHERE execution_id = ? AND id <= ?",
            )
            .bind(execution_id)
            .bind(cutoff)
            .execute(&mut *conn)
            .await
            .map_err(db_err)?;
        }
        Ok(())
    }
}

#[async_trait]
impl LogStore for SqlStore {
    async fn logs_append(
        &self,
        batches: &[LogMsg],
        limits: &LogLimits,
        now: Millis,
    ) -> StoreResult<()> {
        if batches.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        let ids: Vec<&str> = batches
            .iter()
            .map(|b| b.execution_id.as_str())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let found = fetch_by_ids(&mut tx, &ids, |n| {
            format!(
                "SELECT id, attempt FROM executions WHERE id IN ({})",
                marks(n)
            )
        })
        .await?;
        let mut current: HashMap<String, u32> = HashMap::with_capacity(found.len());
        for row in &found {
            let r = R::new(row, "executions");
            current.insert(r.string("id")?, r.u32("attempt")?);
        }
        let known: Vec<&LogMsg> = batches
            .iter()
            .filter(|b| current.contains_key(&b.execution_id))
            .collect();
        let lines: Vec<(&LogMsg, &kairos_core::protocol::LogLine)> = known
            .iter()
            .flat_map(|b| b.lines.iter().map(move |l| (*b, l)))
            .collect();
        for chunk in lines.chunks(CHUNK) {
            let sql = format!(
                "INSERT INTO execution_logs (execution_id, attempt, worker_id, at, level, \
                 message, bytes, created_at) VALUES {}",
                row_marks(chunk.len(), LINE_COLS)
            );
            let mut query = q(self.dialect(), sql);
            for (b, l) in chunk {
                let message = cut(&l.message, limits.max_line_bytes);
                query = query
                    .bind(b.execution_id.as_str())
                    .bind(i64::from(b.attempt))
                    .bind(b.worker_id.as_str())
                    .bind(l.at)
                    .bind(l.level.as_str())
                    .bind(message.to_string())
                    .bind(message.len() as i64)
                    .bind(now);
            }
            query.execute(&mut *tx).await.map_err(db_err)?;
        }
        // The latest progress per execution, from its current attempt only: a
        // figure from an earlier attempt would describe work that was redone.
        let mut progress: BTreeMap<&str, f64> = BTreeMap::new();
        for b in &known {
            if let Some(p) = b.progress
                && current.get(&b.execution_id) == Some(&b.attempt)
                && p.is_finite()
            {
                progress.insert(b.execution_id.as_str(), p.clamp(0.0, 100.0));
            }
        }
        for (id, p) in progress {
            q(
                self.dialect(),
                "UPDATE executions SET progress = ? WHERE id = ?",
            )
            .bind(p)
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_err)?;
        }
        let touched: HashSet<&str> = lines.iter().map(|(b, _)| b.execution_id.as_str()).collect();
        for id in touched {
            self.trim(&mut tx, id, limits).await?;
        }
        tx.commit().await.map_err(db_err)
    }

    async fn logs_page(
        &self,
        execution_id: &str,
        cursor: Option<&str>,
        limit: u32,
    ) -> StoreResult<Page<StoredLogLine>> {
        let after = match cursor {
            None => 0,
            Some(c) => match c.parse::<i64>() {
                Ok(seq) => seq,
                // Not a cursor this store made: it names no page.
                Err(_) => {
                    return Ok(Page {
                        items: Vec::new(),
                        next_cursor: None,
                    });
                }
            },
        };
        let found = q(
            self.dialect(),
            "SELECT id, attempt, worker_id, at, level, message FROM execution_logs \
             WHERE execution_id = ? AND id > ? ORDER BY id LIMIT ?",
        )
        .bind(execution_id)
        .bind(after)
        .bind(i64::from(limit) + 1)
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        let mut items = found.iter().map(line).collect::<StoreResult<Vec<_>>>()?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|l| l.seq.to_string())
        } else {
            None
        };
        Ok(Page { items, next_cursor })
    }

    async fn logs_purge(&self, before: Millis, limit: u32) -> StoreResult<u64> {
        let found = q(
            self.dialect(),
            "SELECT id FROM execution_logs WHERE created_at < ? ORDER BY created_at LIMIT ?",
        )
        .bind(before)
        .bind(i64::from(limit))
        .fetch_all(self.read())
        .await
        .map_err(db_err)?;
        let ids = found
            .iter()
            .map(|row| R::new(row, "execution_logs").i64("id"))
            .collect::<StoreResult<Vec<i64>>>()?;
        let mut purged = 0;
        for chunk in ids.chunks(CHUNK) {
            let mut query = q(
                self.dialect(),
                format!(
                    "DELETE FROM execution_logs WHERE id IN ({})",
                    marks(chunk.len())
                ),
            );
            for id in chunk {
                query = query.bind(*id);
            }
            purged += query
                .execute(self.write())
                .await
                .map_err(db_err)?
                .rows_affected();
        }
        Ok(purged)
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        assert_eq!(cut("hello", 10), "hello");
        assert_eq!(cut("hello", 3), "hel");
        assert_eq!(cut("ééé", 3), "é");
    }
}
