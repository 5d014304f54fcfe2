//! A cron expression in words ("every 5 minutes", "at 09:30, Monday
//! through Friday"), for the common forms only. No maintained describer
//! crate is among the project's dependencies, and the dashboard needs few
//! forms: whatever this does not recognise (`L`, `W`, `#`, steps from an
//! offset, a day of the month and of the week together) gets no words, and
//! the page shows the expression alone.

/// One field of the expression, as far as words can say it.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    /// `*` or `?`.
    Any,
    /// `*/n` (or `0/n`).
    Every(u32),
    /// A list of values and ranges, in the order written.
    Values(Vec<Part>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    One(u32),
    Range(u32, u32),
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];

/// A value: a number in `lo..=hi`, or a name's three-letter prefix (`names`
/// numbered from `first`).
fn value(s: &str, lo: u32, hi: u32, names: &[&str], first: u32) -> Option<u32> {
    if let Ok(n) = s.parse::<u32>() {
        return (lo..=hi).contains(&n).then_some(n);
    }
    let up = s.to_ascii_uppercase();
    names
        .iter()
        .position(|n| n[..3].eq_ignore_ascii_case(&up))
        .and_then(|i| u32::try_from(i).ok())
        .map(|i| i + first)
}

fn field(s: &str, lo: u32, hi: u32, names: &[&str], first: u32) -> Option<Field> {
    if s == "*" || s == "?" {
        return Some(Field::Any);
    }
    if let Some(step) = s.strip_prefix("*/").or_else(|| s.strip_prefix("0/")) {
        let n: u32 = step.parse().ok()?;
        return (1..=hi).contains(&n).then_some(Field::Every(n));
    }
    let mut parts = Vec::new();
    for item in s.split(',') {
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (
                    value(a, lo, hi, names, first)?,
                    value(b, lo, hi, names, first)?,
                );
                if a > b {
                    return None;
                }
                parts.push(Part::Range(a, b));
            }
            None => parts.push(Part::One(value(item, lo, hi, names, first)?)),
        }
    }
    Some(Field::Values(parts))
}

/// `a`, `a and b`, `a, b and c`.
fn joined(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn named(parts: &[Part], name: impl Fn(u32) -> String) -> String {
    let items: Vec<String> = parts
        .iter()
        .map(|p| match *p {
            Part::One(v) => name(v),
            Part::Range(a, b) => format!("{} through {}", name(a), name(b)),
        })
        .collect();
    joined(&items)
}

fn single(f: &Field) -> Option<u32> {
    match f {
        Field::Values(p) => match p.as_slice() {
            [Part::One(v)] => Some(*v),
            _ => None,
        },
        _ => None,
    }
}

fn plural(n: u32, unit: &str) -> String {
    if n == 1 {
        format!("every {unit}")
    } else {
        format!("every {n} {unit}s")
    }
}

/// The times of day, and whether they name a clock time (so the zone
/// matters to the reader).
fn times(sec: &Field, min: &Field, hour: &Field, has_seconds: bool) -> Option<(String, bool)> {
    use Field::{Any, Every};
    let s0 = matches!(single(sec), Some(0));
    let clock = |h: u32, m: u32| match single(sec) {
        Some(s) if s != 0 => format!("{h:02}:{m:02}:{s:02}"),
        _ => format!("{h:02}:{m:02}"),
    };
    Some(match (sec, min, hour) {
        (Any, Any, Any) => ("every second".into(), false),
        (Every(n), Any, Any) => (plural(*n, "second"), false),
        (_, Any, Any) if s0 => ("every minute".into(), false),
        (_, Any, Any) => (format!("every minute at second {}", single(sec)?), false),
        (_, Every(n), Any) if s0 => (plural(*n, "minute"), false),
        (_, _, Any) if s0 => (format!("every hour at minute {}", single(min)?), false),
        (_, _, Every(n)) if s0 => {
            let m = single(min)?;
            (format!("{}, at minute {m}", plural(*n, "hour")), false)
        }
        (_, Every(n), Field::Values(hours)) if s0 => match hours.as_slice() {
            [Part::Range(a, b)] => (
                format!("{} from {a:02}:00 to {b:02}:59", plural(*n, "minute")),
                true,
            ),
            _ => return None,
        },
        (_, _, Field::Values(hours)) => {
            let m = single(min)?;
            if !s0 && !has_seconds {
                return None;
            }
            match hours.as_slice() {
                [Part::Range(a, b)] if s0 => (
                    format!("every hour at minute {m}, from {a:02}:{m:02} to {b:02}:{m:02}"),
                    true,
                ),
                parts if parts.iter().all(|p| matches!(p, Part::One(_))) && parts.len() <= 6 => {
                    let at: Vec<String> = parts
                        .iter()
                        .map(|p| match p {
                            Part::One(h) => clock(*h, m),
                            Part::Range(..) => String::new(),
                        })
                        .collect();
                    (format!("at {}", joined(&at)), true)
                }
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// The days: of the month, of the week, and the months.
fn days(dom: &Field, month: &Field, dow: &Field) -> Option<String> {
    let mut out = Vec::new();
    match (dom, dow) {
        (Field::Any, Field::Any) => {}
        (Field::Values(p), Field::Any) => {
            let label = if matches!(p.as_slice(), [Part::One(_)]) {
                "day"
            } else {
                "days"
            };
            out.push(format!(
                "on {label} {} of the month",
                named(p, |d| d.to_string())
            ));
        }
        (Field::Any, Field::Values(p)) => {
            let day = |d: u32| DAYS[(d % 7) as usize].to_string();
            out.push(named(p, day));
        }
        _ => return None,
    }
    match month {
        Field::Any => {}
        Field::Values(p) => out.push(format!(
            "in {}",
            named(p, |m| MONTHS[(m - 1) as usize].to_string())
        )),
        Field::Every(_) => return None,
    }
    Some(out.join(", "))
}

/// `expr` in words, in `tz` when it names clock times; `None` when it is
/// not one of the forms this knows.
pub(crate) fn describe(expr: &str, tz: &str) -> Option<String> {
    let alias = match expr.trim().to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => Some("0 0 0 1 1 *"),
        "@monthly" => Some("0 0 0 1 * *"),
        "@weekly" => Some("0 0 0 * * 0"),
        "@daily" | "@midnight" => Some("0 0 0 * * *"),
        "@hourly" => Some("0 0 * * * *"),
        _ => None,
    };
    let expr = alias.unwrap_or(expr);
    let raw: Vec<&str> = expr.split_whitespace().collect();
    let (has_seconds, f) = match raw.len() {
        5 => (false, [&["0"][..], &raw[..]].concat()),
        6 => (true, raw.clone()),
        _ => return None,
    };
    let sec = field(f[0], 0, 59, &[], 0)?;
    let min = field(f[1], 0, 59, &[], 0)?;
    let hour = field(f[2], 0, 23, &[], 0)?;
    let dom = field(f[3], 1, 31, &[], 0)?;
    let month = field(f[4], 1, 12, &MONTHS, 1)?;
    let dow = field(f[5], 0, 7, &DAYS, 0)?;
    let (when, clock) = times(&sec, &min, &hour, has_seconds)?;
    let on = days(&dom, &month, &dow)?;
    let mut text = if on.is_empty() && clock {
        format!("every day {when}")
    } else if on.is_empty() {
        when
    } else {
        format!("{when}, {on}")
    };
    if clock {
        text.push_str(&format!(" ({tz} time)"));
    }
    Some(capitalised(&text))
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    fn d(expr: &str) -> Option<String> {
        describe(expr, "Europe/Berlin")
    }

    #[test]
    fn frequent_schedules() {
        assert_eq!(d("* * * * * *").as_deref(), Some("Every second"));
        assert_eq!(d("*/10 * * * * *").as_deref(), Some("Every 10 seconds"));
        assert_eq!(d("* * * * *").as_deref(), Some("Every minute"));
        assert_eq!(d("0 * * * * *").as_deref(), Some("Every minute"));
        assert_eq!(
            d("30 * * * * *").as_deref(),
            Some("Every minute at second 30")
        );
        assert_eq!(d("*/5 * * * *").as_deref(), Some("Every 5 minutes"));
        assert_eq!(d("0 */1 * * * *").as_deref(), Some("Every minute"));
        assert_eq!(d("15 * * * *").as_deref(), Some("Every hour at minute 15"));
        assert_eq!(d("@hourly").as_deref(), Some("Every hour at minute 0"));
        assert_eq!(
            d("0 */2 * * *").as_deref(),
            Some("Every 2 hours, at minute 0")
        );
    }

    #[test]
    fn times_of_day_name_the_zone() {
        assert_eq!(
            d("30 9 * * *").as_deref(),
            Some("Every day at 09:30 (Europe/Berlin time)")
        );
        assert_eq!(
            d("0 30 9 * * MON-FRI").as_deref(),
            Some("At 09:30, Monday through Friday (Europe/Berlin time)")
        );
        assert_eq!(
            d("0 0 8,12,18 * * *").as_deref(),
            Some("Every day at 08:00, 12:00 and 18:00 (Europe/Berlin time)")
        );
        assert_eq!(
            d("15 30 2 * * *").as_deref(),
            Some("Every day at 02:30:15 (Europe/Berlin time)")
        );
        assert_eq!(
            d("0 0 1 1 *").as_deref(),
            Some("At 00:00, on day 1 of the month, in January (Europe/Berlin time)")
        );
        assert_eq!(
            d("0 6 1,15 * *").as_deref(),
            Some("At 06:00, on days 1 and 15 of the month (Europe/Berlin time)")
        );
        assert_eq!(
            d("0 9 * * 1,3,5").as_deref(),
            Some("At 09:00, Monday, Wednesday and Friday (Europe/Berlin time)")
        );
        assert_eq!(
            d("0 0 * * 7").as_deref(),
            Some("At 00:00, Sunday (Europe/Berlin time)")
        );
        assert_eq!(
            d("*/15 9-17 * * 1-5").as_deref(),
            Some(
                "Every 15 minutes from 09:00 to 17:59, Monday through Friday (Europe/Berlin time)"
            )
        );
        assert_eq!(
            d("@daily").as_deref(),
            Some("Every day at 00:00 (Europe/Berlin time)")
        );
    }

    #[test]
    fn what_it_does_not_know_gets_no_words() {
        for expr in [
            "0 0 L * *",
            "0 0 * * 5#3",
            "0 0 15W * *",
            "5/10 * * * *",
            "0 0 1 * 1",
            "0 0 * */2 *",
            "61 * * * *",
            "* * *",
            "0 5-3 * * *",
            "nonsense",
        ] {
            assert_eq!(d(expr), None, "{expr}");
        }
    }
}
