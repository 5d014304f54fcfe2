//! [`LogStore`]: the lines handlers write, bounded per execution (oldest
//! dropped first), paged by their position, and purged after the retention.

use crate::db::{Row, Tx};
use crate::rows::R;
use crate::sql::{CHUNK, Fields, Sql, fetch_chunked, time};
use crate::store::SqlStore;
use async_trait::async_trait;
use kairos_core::protocol::{LogLevel, LogMsg};
use kairos_core::store::{LogLimits, LogStore, Page, StoreResult, StoredLogLine};
use kairos_core::time::Millis;
use std::collections::{BTreeMap, HashMap, HashSet};

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

fn line(row: &Row) -> StoreResult<StoredLogLine> {
    let r = R::new(row, "execution_logs");
    Ok(StoredLogLine {
        seq: r.i64("id")?,
        attempt: r.u32("attempt")?,
        worker_id: r.string("worker_id")?,
        at: r.time("at")?,
        level: r.parsed("level", LogLevel::parse)?,
        message: r.string("message")?,
    })
}

/// Drops the oldest lines of `execution_id` beyond `limits`.
async fn trim(tx: &mut Tx, execution_id: &str, limits: &LogLimits) -> StoreResult<()> {
    let row = Sql::new("SELECT COUNT(*) AS n, CAST(COALESCE(SUM(bytes), 0) AS ")
        .int_type()
        .push(") AS b FROM execution_logs WHERE execution_id = ")
        .bind(execution_id)
        .fetch_one(&mut *tx)
        .await?;
    let r = R::new(&row, "execution_logs");
    let (mut lines, mut bytes) = (r.i64("n")?, r.i64("b")?);
    let max_bytes = i64::try_from(limits.max_bytes).unwrap_or(i64::MAX);
    let max_lines = i64::from(limits.max_lines);
    if lines <= max_lines && bytes <= max_bytes {
        return Ok(());
    }
    // Oldest first, until what is left fits both limits.
    let oldest = Sql::new("SELECT id, bytes FROM execution_logs WHERE execution_id = ")
        .bind(execution_id)
        .push(" ORDER BY id LIMIT ")
        .bind(lines)
        .fetch_all(&mut *tx)
        .await?;
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
        Sql::new("DELETE FROM execution_logs WHERE execution_id = ")
            .bind(execution_id)
            .push(" AND id <= ")
            .bind(cutoff)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
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
        let found = fetch_chunked(&mut tx, &ids, |chunk| {
            let mut s = Sql::new("SELECT id, attempt FROM executions WHERE id IN ");
            s.list(chunk.iter().copied());
            s
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
            let rows: Vec<Fields> = chunk
                .iter()
                .map(|(b, l)| {
                    let message = cut(&l.message, limits.max_line_bytes);
                    Fields::new()
                        .with("execution_id", &b.execution_id)
                        .with("attempt", b.attempt)
                        .with("worker_id", &b.worker_id)
                        .with("at", time(l.at))
                        .with("level", l.level.as_str())
                        .with("message", message)
                        .with("bytes", message.len() as i64)
                        .with("created_at", time(now))
                })
                .collect();
            Sql::new("INSERT INTO execution_logs")
                .rows(&rows)
                .execute(&mut tx)
                .await?;
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
            Sql::new("UPDATE executions SET progress = ")
                .bind(p)
                .push(" WHERE id = ")
                .bind(id)
                .execute(&mut tx)
                .await?;
        }
        let touched: HashSet<&str> = lines.iter().map(|(b, _)| b.execution_id.as_str()).collect();
        for id in touched {
            trim(&mut tx, id, limits).await?;
        }
        tx.commit().await
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
                    return Ok(Page::forward(Vec::new(), None));
                }
            },
        };
        let found = Sql::new(
            "SELECT id, attempt, worker_id, at, level, message FROM execution_logs \
             WHERE execution_id = ",
        )
        .bind(execution_id)
        .push(" AND id > ")
        .bind(after)
        .push(" ORDER BY id LIMIT ")
        .bind(i64::from(limit) + 1)
        .fetch_all(self.read())
        .await?;
        let mut items = found.iter().map(line).collect::<StoreResult<Vec<_>>>()?;
        let next_cursor = if items.len() > limit as usize {
            items.truncate(limit as usize);
            items.last().map(|l| l.seq.to_string())
        } else {
            None
        };
        Ok(Page::forward(items, next_cursor))
    }

    async fn logs_purge(&self, before: Millis, limit: u32) -> StoreResult<u64> {
        let found = Sql::new("SELECT id FROM execution_logs WHERE created_at < ")
            .bind(time(before))
            .push(" ORDER BY created_at LIMIT ")
            .bind(i64::from(limit))
            .fetch_all(self.read())
            .await?;
        let ids = found
            .iter()
            .map(|row| R::new(row, "execution_logs").i64("id"))
            .collect::<StoreResult<Vec<i64>>>()?;
        let mut purged = 0;
        for chunk in ids.chunks(CHUNK) {
            purged += Sql::new("DELETE FROM execution_logs WHERE id IN ")
                .list(chunk.iter().copied())
                .execute(self.write())
                .await?;
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
