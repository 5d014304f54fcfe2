//! Keyset pages of the listings that show newest first (jobs by creation,
//! executions by due time), in both directions: a cursor names the item a
//! page starts after, or — for "previous page" links — the item it ends
//! before. Reading a page costs the same at any depth, either way.
//!
//! Cursors are opaque to callers: hex of `<time>:<id>` for a page after that
//! key, and `p` (not a hex digit) followed by the same for a page before it.

use crate::db::{Pool, Row};
use crate::sql::{Sql, time};
use kairos_core::store::{Page, StoreResult};
use kairos_core::time::Millis;

/// Page size when the caller asks for none.
const DEFAULT_PAGE: u32 = 50;
/// Largest page served.
const MAX_PAGE: u32 = 1_000;
/// Marks a cursor naming the page before a key.
const BEFORE: char = 'p';

/// The page size served for a caller's `limit` (0: the default).
pub(crate) fn page_size(limit: u32) -> u32 {
    if limit == 0 {
        DEFAULT_PAGE
    } else {
        limit.min(MAX_PAGE)
    }
}

/// Where a page starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Start {
    /// The newest items.
    First,
    /// The items just older than this key.
    After(Millis, String),
    /// The items just newer than this key.
    Before(Millis, String),
}

impl Start {
    /// The start a cursor names; `None` for a cursor this store did not make
    /// (it names no page: callers answer with an empty one).
    pub(crate) fn parse(cursor: Option<&str>) -> Option<Start> {
        match cursor {
            None => Some(Start::First),
            Some(c) => match c.strip_prefix(BEFORE) {
                Some(rest) => decode_cursor(rest).map(|(at, id)| Start::Before(at, id)),
                None => decode_cursor(c).map(|(at, id)| Start::After(at, id)),
            },
        }
    }
}

/// Reads one page: `base` selects from the listing's table with its own
/// conditions after a `WHERE`; the keyset condition on `(time_col, id_col)`,
/// the order and the limit are added here. `decode` makes an item of a row,
/// `key` gives an item's `(time, id)`.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fetch<T>(
    pool: &Pool,
    base: &Sql,
    cursor: Option<&str>,
    limit: u32,
    (time_col, id_col): (&'static str, &'static str),
    decode: impl Fn(&Row) -> StoreResult<T>,
    key: impl Fn(&T) -> (i64, &str),
) -> StoreResult<Page<T>> {
    let limit = page_size(limit);
    let Some(start) = Start::parse(cursor) else {
        return Ok(Page::forward(Vec::new(), None));
    };
    let decode = &decode;
    let run = |start: Start| {
        let mut sql = base.clone();
        let descending = !matches!(start, Start::Before(..));
        match &start {
            Start::First => {}
            Start::After(at, id) | Start::Before(at, id) => {
                let (cmp, bound) = if descending {
                    (" < ", " <= ")
                } else {
                    (" > ", " >= ")
                };
                // The plain range first: it lets the index seek to the key
                // from either end (the OR alone makes some planners scan
                // from the wrong end).
                sql.push(" AND ")
                    .push(time_col)
                    .push(bound)
                    .bind(time(*at))
                    .push(" AND (")
                    .push(time_col)
                    .push(cmp)
                    .bind(time(*at))
                    .push(" OR (")
                    .push(time_col)
                    .push(" = ")
                    .bind(time(*at))
                    .push(" AND ")
                    .push(id_col)
                    .push(cmp)
                    .bind(id.clone())
                    .push("))");
            }
        }
        let order = if descending { " DESC" } else { " ASC" };
        sql.push(" ORDER BY ")
            .push(time_col)
            .push(order)
            .push(", ")
            .push(id_col)
            .push(order)
            .push(" LIMIT ")
            .bind(i64::from(limit) + 1);
        async move {
            let found = sql.fetch_all(pool).await?;
            let items = found.iter().map(decode).collect::<StoreResult<Vec<T>>>()?;
            Ok::<_, kairos_core::store::StoreError>((start, items))
        }
    };
    let (start, items) = run(start).await?;
    match assemble(items, limit, &start, &key) {
        Some(page) => Ok(page),
        // Fewer items before the key than a page holds: the page before is
        // the first one, read as such so it is full.
        None => {
            let (start, items) = run(Start::First).await?;
            Ok(assemble(items, limit, &start, &key)
                .unwrap_or_else(|| Page::forward(Vec::new(), None)))
        }
    }
}

/// The page from up to `limit + 1` items read from `start` (newest first,
/// or oldest first for [`Start::Before`]); `None` when a page before a key
/// holds fewer than `limit + 1` items, i.e. it reaches the first page.
fn assemble<T>(
    mut items: Vec<T>,
    limit: u32,
    start: &Start,
    key: impl Fn(&T) -> (i64, &str),
) -> Option<Page<T>> {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let after = |item: Option<&T>| {
        item.map(|item| {
            let (at, id) = key(item);
            encode_cursor(at, id)
        })
    };
    let before = |item: Option<&T>| after(item).map(|c| format!("{BEFORE}{c}"));
    match start {
        Start::First => {
            let next_cursor = if more { after(items.last()) } else { None };
            Some(Page::forward(items, next_cursor))
        }
        Start::After(..) => Some(Page {
            next_cursor: if more { after(items.last()) } else { None },
            prev_cursor: before(items.first()),
            items,
        }),
        Start::Before(..) => {
            if !more {
                return None;
            }
            items.reverse();
            Some(Page {
                // The key the cursor named comes next.
                next_cursor: after(items.last()),
                prev_cursor: before(items.first()),
                items,
            })
        }
    }
}

/// Page cursor: hex of `<time>:<id>` of the last item shown.
pub(crate) fn encode_cursor(at: i64, id: &str) -> String {
    format!("{at}:{id}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The `(time, id)` inside a cursor, `None` if it was not made by [`encode_cursor`].
pub(crate) fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    if !cursor.len().is_multiple_of(2) || !cursor.is_ascii() {
        return None;
    }
    let bytes = (0..cursor.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cursor[i..i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let text = String::from_utf8(bytes).ok()?;
    let (at, id) = text.split_once(':')?;
    Some((at.parse().ok()?, id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_garbage_is_refused() {
        let c = encode_cursor(-5, "0190-ab:cd");
        assert_eq!(decode_cursor(&c), Some((-5, "0190-ab:cd".to_string())));
        assert_eq!(decode_cursor("zz"), None);
        assert_eq!(decode_cursor("abc"), None);
        assert_eq!(decode_cursor("é1"), None);
    }

    #[test]
    fn a_cursor_names_a_page_after_or_before_a_key() {
        let c = encode_cursor(7, "x");
        assert_eq!(Start::parse(None), Some(Start::First));
        assert_eq!(Start::parse(Some(&c)), Some(Start::After(7, "x".into())));
        assert_eq!(
            Start::parse(Some(&format!("p{c}"))),
            Some(Start::Before(7, "x".into()))
        );
        assert_eq!(Start::parse(Some("pzz")), None);
    }

    fn key(item: &(i64, String)) -> (i64, &str) {
        (item.0, item.1.as_str())
    }

    fn items(times: &[i64]) -> Vec<(i64, String)> {
        times.iter().map(|t| (*t, format!("id{t}"))).collect()
    }

    #[test]
    fn pages_link_both_ways() {
        // First page of 2 from [9, 8, 7]: a next page, no previous one.
        let p = assemble(items(&[9, 8, 7]), 2, &Start::First, key).unwrap();
        assert_eq!(p.items, items(&[9, 8]));
        assert_eq!(p.next_cursor, Some(encode_cursor(8, "id8")));
        assert_eq!(p.prev_cursor, None);
        // After 8: the last page, whose previous page ends before 7.
        let p = assemble(items(&[7]), 2, &Start::After(8, "id8".into()), key).unwrap();
        assert_eq!(p.next_cursor, None);
        assert_eq!(p.prev_cursor, Some(format!("p{}", encode_cursor(7, "id7"))));
        // Before 5, read oldest first [6, 7, 8]: shown newest first [7, 6].
        let p = assemble(items(&[6, 7, 8]), 2, &Start::Before(5, "id5".into()), key).unwrap();
        assert_eq!(p.items, items(&[7, 6]));
        assert_eq!(p.next_cursor, Some(encode_cursor(6, "id6")));
        assert_eq!(p.prev_cursor, Some(format!("p{}", encode_cursor(7, "id7"))));
        // Before 8 with only [9] newer: that is the first page.
        assert!(assemble(items(&[9]), 2, &Start::Before(8, "id8".into()), key).is_none());
    }
}
