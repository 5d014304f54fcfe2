//! The executions list's filters as they travel in the URL: states, job,
//! handler, worker and a due-time range, read from the query string and
//! written back into links, so a view can be bookmarked, shared, paged and
//! exported.

use chrono::{NaiveDateTime, TimeZone};
use kairos_core::execution::ExecStatus;
use kairos_core::overview::{ExecFilter, FAILED_STATES};
use kairos_core::time::Millis;

/// The filters of one request, as typed and as parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ListFilter {
    /// States asked for (the failure states when the query names none and
    /// was not submitted from the form).
    pub(crate) statuses: Vec<ExecStatus>,
    /// Job id.
    pub(crate) job: String,
    /// Handler name.
    pub(crate) handler: String,
    /// Worker id.
    pub(crate) worker: String,
    /// Due at or after, as typed.
    pub(crate) from: String,
    /// Due before, as typed.
    pub(crate) to: String,
    /// `from`, parsed.
    pub(crate) from_ms: Option<Millis>,
    /// `to`, parsed.
    pub(crate) to_ms: Option<Millis>,
    /// What could not be read, for the page to say.
    pub(crate) errors: Vec<String>,
}

/// Formats a time for a `datetime-local` input (UTC, to the second).
pub(crate) fn local_input(ms: Millis) -> String {
    chrono::Utc
        .timestamp_millis_opt(ms)
        .single()
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S").to_string())
        .unwrap_or_default()
}

/// A time typed in a `datetime-local` input (`2026-03-01T10:00`, seconds
/// optional; read as UTC) or an RFC 3339 timestamp.
pub(crate) fn parse_time(raw: &str) -> Option<Millis> {
    if let Ok(ms) = kairos_core::time::parse_rfc3339(raw) {
        return Some(ms);
    }
    [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())
    .map(|t| t.and_utc().timestamp_millis())
}

impl ListFilter {
    /// Reads the filters from a query string's pairs.
    pub(crate) fn parse(pairs: &[(String, String)]) -> Self {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| n == k)
                .map_or(String::new(), |(_, v)| v.trim().to_string())
        };
        let mut f = ListFilter {
            statuses: pairs
                .iter()
                .filter(|(k, _)| k == "status")
                .flat_map(|(_, v)| v.split(','))
                .filter_map(|v| ExecStatus::parse(v.trim()))
                .collect(),
            job: get("job"),
            handler: get("handler"),
            worker: get("worker"),
            from: get("from"),
            to: get("to"),
            ..ListFilter::default()
        };
        f.statuses.dedup();
        if f.statuses.is_empty() && !pairs.iter().any(|(k, _)| k == "filtered") {
            f.statuses = FAILED_STATES.to_vec();
        }
        for (name, raw, out) in [
            ("From", &f.from, &mut f.from_ms),
            ("To", &f.to, &mut f.to_ms),
        ] {
            if raw.is_empty() {
                continue;
            }
            match parse_time(raw) {
                Some(ms) => *out = Some(ms),
                None => f.errors.push(format!(
                    "{name} “{raw}” is not a date and time; use 2026-03-01T10:00 (UTC) or an RFC 3339 timestamp."
                )),
            }
        }
        if let (Some(a), Some(b)) = (f.from_ms, f.to_ms)
            && a >= b
        {
            f.errors.push("From must be earlier than To.".to_string());
        }
        f
    }

    /// The store's filter for a page from `cursor`.
    pub(crate) fn exec_filter(&self, limit: u32, cursor: Option<String>) -> ExecFilter {
        let opt = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
        ExecFilter {
            statuses: self.statuses.clone(),
            job_id: opt(&self.job),
            handler: opt(&self.handler),
            worker_id: opt(&self.worker),
            from: self.from_ms,
            to: self.to_ms,
            limit,
            cursor,
        }
    }

    /// The query pairs that give this filter back (empty values left out by
    /// [`crate::pages::query`]).
    pub(crate) fn pairs(&self) -> Vec<(&str, &str)> {
        let mut q: Vec<(&str, &str)> = self
            .statuses
            .iter()
            .map(|s| ("status", s.as_str()))
            .collect();
        q.push(("filtered", "1"));
        q.extend([
            ("job", self.job.as_str()),
            ("handler", self.handler.as_str()),
            ("worker", self.worker.as_str()),
            ("from", self.from.as_str()),
            ("to", self.to.as_str()),
        ]);
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &str) -> Vec<(String, String)> {
        url::form_urlencoded::parse(q.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect()
    }

    #[test]
    fn no_query_means_the_failures() {
        let f = ListFilter::parse(&[]);
        assert_eq!(f.statuses, FAILED_STATES);
        let f = ListFilter::parse(&pairs("filtered=1"));
        assert!(f.statuses.is_empty(), "every state");
    }

    #[test]
    fn filters_round_trip_through_the_query() {
        let q = "status=failed&status=lost&filtered=1&job=j1&handler=report&worker=w-2\
                 &from=2026-03-01T10%3A00&to=2026-03-01T11%3A30%3A15";
        let f = ListFilter::parse(&pairs(q));
        assert_eq!(f.statuses, [ExecStatus::Failed, ExecStatus::Lost]);
        assert_eq!(
            (f.job.as_str(), f.handler.as_str(), f.worker.as_str()),
            ("j1", "report", "w-2")
        );
        assert_eq!(f.from_ms, Some(1_772_359_200_000));
        assert_eq!(f.to_ms, Some(1_772_364_615_000));
        assert!(f.errors.is_empty());
        let again = ListFilter::parse(&pairs(&crate::pages::query(&f.pairs())));
        assert_eq!(again, f);
        let store = f.exec_filter(50, Some("c".into()));
        assert_eq!(store.handler.as_deref(), Some("report"));
        assert_eq!((store.from, store.to), (f.from_ms, f.to_ms));
    }

    #[test]
    fn times_are_utc_inputs_or_rfc_3339_and_bad_ones_are_named() {
        assert_eq!(parse_time("2026-03-01T10:00:00Z"), Some(1_772_359_200_000));
        assert_eq!(
            parse_time("2026-03-01T11:00:00+01:00"),
            Some(1_772_359_200_000)
        );
        assert_eq!(parse_time("2026-03-01 10:00"), Some(1_772_359_200_000));
        assert_eq!(local_input(1_772_359_200_000), "2026-03-01T10:00:00");
        assert_eq!(
            parse_time(&local_input(1_772_359_201_000)),
            Some(1_772_359_201_000)
        );
        let f = ListFilter::parse(&pairs("from=yesterday&to=2026-03-01T10:00"));
        assert_eq!(f.from_ms, None);
        assert!(f.errors[0].contains("From “yesterday”"), "{:?}", f.errors);
        let f = ListFilter::parse(&pairs("from=2026-03-01T10:00&to=2026-03-01T10:00"));
        assert_eq!(f.errors, ["From must be earlier than To."]);
    }
}
