//! `GET /ui/executions/export?format=csv|json&…filters`: the filtered
//! executions, newest trigger first, streamed page by page as they are read
//! (memory stays flat whatever the size), and bounded at
//! [`MAX_EXPORT_ROWS`]. When the filter matches more, the answer says so
//! before the first row: an `X-Kairos-Export-Truncated` header, `-first-N`
//! in the file name, and `"truncated": true` in JSON; the executions page
//! says it beside the export links too. Each job's sensitive values are
//! redacted from its executions' outputs and errors, as on the pages.

use super::filter::ListFilter;
use crate::UiState;
use crate::session::Ctx;
use crate::view;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kairos_core::execution::Execution;
use kairos_core::sensitive::{Redactor, SensitiveKeys};
use kairos_core::store::ApiStore;
use kairos_core::time::{now_ms, to_rfc3339};
use maud::html;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// Most executions one export holds.
pub(crate) const MAX_EXPORT_ROWS: u64 = 10_000;
/// Executions read per store call while streaming.
const CHUNK: u32 = 500;

/// The CSV columns, in order.
const COLUMNS: [&str; 14] = [
    "executionId",
    "jobId",
    "jobName",
    "handler",
    "status",
    "attempt",
    "workerId",
    "scheduledAt",
    "dispatchedAt",
    "startedAt",
    "finishedAt",
    "durationMs",
    "error",
    "output",
];

/// First characters that make a spreadsheet read a cell as a formula (or,
/// tab and carriage return, hide what follows), as OWASP lists them, with
/// their full-width forms, which some spreadsheets read the same way.
const FORMULA_LEADS: [char; 10] = [
    '=', '+', '-', '@', '\t', '\r', '\u{ff1d}', '\u{ff0b}', '\u{ff0d}', '\u{ff20}',
];

/// Characters that end a cell in some spreadsheet's reading of a CSV: the
/// comma, the semicolon (the separator where the comma is the decimal
/// mark) and the tab, the quote and line breaks.
const CELL_BREAKS: [char; 6] = [',', ';', '\t', '"', '\r', '\n'];

/// One CSV field (RFC 4180, OWASP's advice on CSV injection). Text that
/// would start a formula gets a leading `'` (shown by the spreadsheet as
/// text, never run) and is quoted; so is any text holding a separator
/// (`,`, `;`, tab), a quote or a line break, its quotes doubled, so no
/// separator inside it can start a new cell, whichever one the spreadsheet
/// splits on.
pub(crate) fn csv_field(text: &str) -> String {
    let formula = text.starts_with(FORMULA_LEADS);
    if !formula && !text.contains(CELL_BREAKS) {
        return text.to_string();
    }
    let lead = if formula { "'" } else { "" };
    format!("\"{lead}{}\"", text.replace('"', "\"\""))
}

/// What is known of an execution's job.
#[derive(Clone, Default)]
struct JobInfo {
    name: String,
    handler: String,
    /// Hides the job's sensitive values.
    redactor: Redactor,
}

/// One execution as a JSON object (the API's field names).
fn record(e: &Execution, job: &JobInfo) -> Value {
    let t = |ms: Option<i64>| ms.map(to_rfc3339);
    json!({
        "executionId": e.id,
        "jobId": e.job_id,
        "jobName": job.name,
        "handler": job.handler,
        "status": e.status.as_str(),
        "attempt": e.attempt,
        "workerId": e.worker_id,
        "scheduledAt": to_rfc3339(e.scheduled_at),
        "dispatchedAt": t(e.dispatched_at),
        "startedAt": t(e.started_at),
        "finishedAt": t(e.finished_at),
        "durationMs": e.started_at.zip(e.finished_at).map(|(s, f)| f - s),
        "error": e.error,
        "output": e.output,
    })
}

/// One CSV line of `record`'s object.
fn csv_line(rec: &Value) -> String {
    let fields: Vec<String> = COLUMNS
        .iter()
        .map(|c| match &rec[*c] {
            Value::Null => String::new(),
            Value::String(s) => csv_field(s),
            // Numbers are never formulas; objects (output) are JSON text.
            Value::Number(n) => n.to_string(),
            other => csv_field(&other.to_string()),
        })
        .collect();
    format!("{}\r\n", fields.join(","))
}

/// CSV or JSON.
#[derive(Clone, Copy, PartialEq)]
enum Format {
    Csv,
    Json,
}

/// Where the stream is.
struct Reader {
    store: Arc<dyn ApiStore>,
    /// The configured sensitive key names.
    keys: Arc<SensitiveKeys>,
    tenant: String,
    filter: ListFilter,
    format: Format,
    cursor: Option<String>,
    written: u64,
    /// Rows to write at most.
    max: u64,
    jobs: HashMap<String, JobInfo>,
    started: bool,
    done: bool,
}

impl Reader {
    /// The next chunk of the body, `None` once it is complete.
    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        if self.done {
            return None;
        }
        let mut out = String::new();
        if !self.started {
            self.started = true;
            if self.format == Format::Csv {
                out.push_str(&COLUMNS.join(","));
                out.push_str("\r\n");
            }
        }
        let room = self.max.saturating_sub(self.written);
        let limit = u32::try_from(room).unwrap_or(CHUNK).min(CHUNK);
        let filter = self.filter.exec_filter(limit, self.cursor.clone());
        let page = match self.store.executions_list(&self.tenant, &filter).await {
            Ok(p) => p,
            Err(e) => {
                // The head is sent: ending the body early is the only way to
                // say the export failed; the client sees a cut download.
                tracing::warn!(error = %e, "dashboard: export stopped, the store failed");
                self.done = true;
                return Some(Err(std::io::Error::other(e.to_string())));
            }
        };
        for e in page.items {
            if !self.jobs.contains_key(&e.job_id) {
                let info = match self.store.job_get(&self.tenant, &e.job_id).await {
                    Ok(job) => JobInfo {
                        redactor: crate::shown::redactor_for(&self.keys, job.as_ref()),
                        name: job.as_ref().map(|j| j.name.clone()).unwrap_or_default(),
                        handler: job.map(|j| j.handler).unwrap_or_default(),
                    },
                    Err(err) => {
                        tracing::warn!(error = %err, "dashboard: export stopped, the store failed");
                        self.done = true;
                        return Some(Err(std::io::Error::other(err.to_string())));
                    }
                };
                self.jobs.insert(e.job_id.clone(), info);
            }
            let job = &self.jobs[&e.job_id];
            let rec = record(&crate::shown::execution(&job.redactor, e), job);
            match self.format {
                Format::Csv => out.push_str(&csv_line(&rec)),
                Format::Json => {
                    if self.written > 0 {
                        out.push(',');
                    }
                    out.push_str(&rec.to_string());
                    out.push('\n');
                }
            }
            self.written += 1;
        }
        self.cursor = page.next_cursor;
        if self.cursor.is_none() || self.written >= self.max {
            self.done = true;
            if self.format == Format::Json {
                out.push_str("]}\n");
            }
        }
        Some(Ok(Bytes::from(out)))
    }
}

/// The export's body: the JSON head (or nothing for CSV), then the rows as
/// they are read, at most `max`.
fn body(
    store: Arc<dyn ApiStore>,
    keys: Arc<SensitiveKeys>,
    tenant: &str,
    filter: ListFilter,
    format: Format,
    max: u64,
    truncated: bool,
) -> Body {
    let head = match format {
        Format::Json => {
            let note = if truncated {
                format!(
                    "\"note\":\"The filter matches more than {max} executions; this export holds the newest {max}. Narrow the filter (e.g. a time range) for the rest.\","
                )
            } else {
                String::new()
            };
            format!(
                "{{\"exportedAt\":\"{}\",\"maxRows\":{max},\"truncated\":{truncated},{note}\"items\":[\n",
                to_rfc3339(now_ms()),
            )
        }
        Format::Csv => String::new(),
    };
    let reader = Reader {
        store,
        keys,
        tenant: tenant.to_string(),
        filter,
        format,
        cursor: None,
        written: 0,
        max,
        jobs: HashMap::new(),
        started: false,
        done: false,
    };
    let first = futures::stream::once(async move { Ok::<_, std::io::Error>(Bytes::from(head)) });
    let rows = futures::stream::unfold(
        reader,
        |mut r| async move { r.next().await.map(|c| (c, r)) },
    );
    Body::from_stream(futures::StreamExt::chain(first, rows))
}

/// `GET /ui/executions/export`.
pub(crate) async fn export(
    State(state): State<UiState>,
    ctx: Ctx,
    RawQuery(raw): RawQuery,
) -> Response {
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    let format = match pairs
        .iter()
        .find(|(k, _)| k == "format")
        .map(|(_, v)| v.as_str())
    {
        Some("json") => Format::Json,
        Some("csv") | None => Format::Csv,
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                view::page(&ctx, "Export", view::Nav::Executions, html! {
                    p.error-box role="alert" { "Unknown export format “" (other) "”: use csv or json." }
                }),
            )
                .into_response();
        }
    };
    let filter = ListFilter::parse(&pairs);
    if !filter.errors.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            view::page(
                &ctx,
                "Export",
                view::Nav::Executions,
                html! {
                    @for e in &filter.errors { p.error-box role="alert" { (e) } }
                },
            ),
        )
            .into_response();
    }
    // Counted before the first byte, so the head can say it is cut.
    let matching = match state
        .store
        .executions_count(
            ctx.tenant(),
            &filter.exec_filter(0, None),
            MAX_EXPORT_ROWS + 1,
        )
        .await
    {
        Ok(n) => n,
        Err(e) => return view::store_error(e),
    };
    let truncated = matching > MAX_EXPORT_ROWS;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let (kind, ext) = match format {
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
        Format::Json => ("application/json", "json"),
    };
    let name = if truncated {
        format!("kairos-executions-{stamp}-first-{MAX_EXPORT_ROWS}.{ext}")
    } else {
        format!("kairos-executions-{stamp}.{ext}")
    };
    let body = body(
        state.store.clone(),
        state.sensitive.clone(),
        ctx.tenant(),
        filter,
        format,
        MAX_EXPORT_ROWS,
        truncated,
    );
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        "x-kairos-export-truncated",
        HeaderValue::from_static(if truncated { "true" } else { "false" }),
    );
    h.insert(
        "x-kairos-export-max-rows",
        HeaderValue::from(MAX_EXPORT_ROWS),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::execution::ExecStatus;
    use kairos_core::store::DispatchScope;

    use kairos_core::job::{NewJob, RetryPolicy};
    use kairos_core::schedule::Schedule;
    use kairos_core::store::{Claim, CreateOutcome, Dispatch, JobStore};
    use kairos_store_sql::SqlStore;

    /// A store whose tenant `t` has `n` pending executions, due a second
    /// apart, of jobs named `job,<i>` (a comma, to be quoted in CSV).
    async fn store_with(n: i64) -> Arc<dyn ApiStore> {
        let store = SqlStore::connect(&kairos_testkit::sqlite_temp_url())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let t0 = 1_772_359_200_000;
        for i in 0..n {
            let at = t0 + i * 1_000;
            let new = NewJob {
                execution_mode: Default::default(),
                id: uuid_like(i),
                tenant: "t".into(),
                name: format!("job,{i}"),
                handler: "noop".into(),
                params: Value::Null,
                schedule: Schedule::Once { at },
                next_trigger_at: at,
                callback_url: None,
                client_request_id: None,
                request_hash: None,
                retry: RetryPolicy::default(),
                timeout_ms: None,
                worker_group: None,
                priority: Default::default(),
                max_concurrency: None,
                trace: None,
                created_at: t0,
                created_by: None,
                sensitive_params: Vec::new(),
            };
            let CreateOutcome::Created(job) = store.job_create(new).await.unwrap() else {
                panic!("a new job");
            };
            let claim = Claim {
                shard: Default::default(),
                job: Arc::new(job),
                scheduled_at: at,
                next_trigger_at: None,
                execution_id: format!("e{i:03}"),
                worker_id: None,
            };
            store
                .triggers_claim(DispatchScope::All { fence: 1 }, &[claim], at)
                .await
                .unwrap();
        }
        Arc::new(store)
    }

    fn uuid_like(i: i64) -> String {
        format!("00000000-0000-7000-8000-{i:012}")
    }

    async fn text(body: Body) -> String {
        let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn every_state() -> ListFilter {
        ListFilter::parse(&[("filtered".into(), "1".into())])
    }

    #[tokio::test]
    async fn exports_stream_newest_first_up_to_the_bound() {
        let store = store_with(7).await;
        // CSV over several reads (3 rows a read would be too many calls to
        // notice; the bound cuts the last one short).
        let csv = text(body(
            store.clone(),
            Arc::default(),
            "t",
            every_state(),
            Format::Csv,
            5,
            true,
        ))
        .await;
        let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines[0], COLUMNS.join(","));
        assert_eq!(lines.len(), 1 + 5, "{csv}");
        assert!(
            lines[1]
                .starts_with("e006,00000000-0000-7000-8000-000000000006,\"job,6\",noop,pending,1,"),
            "{csv}"
        );
        assert!(lines[5].starts_with("e002,"), "{csv}");
        // JSON: the head says whether it is cut; every item is there.
        let json: Value = serde_json::from_str(
            &text(body(
                store.clone(),
                Arc::default(),
                "t",
                every_state(),
                Format::Json,
                5,
                true,
            ))
            .await,
        )
        .unwrap();
        assert_eq!(
            (json["truncated"].as_bool(), json["maxRows"].as_u64()),
            (Some(true), Some(5))
        );
        assert!(json["note"].as_str().unwrap().contains("newest 5"));
        assert_eq!(json["items"].as_array().unwrap().len(), 5);
        assert_eq!(json["items"][0]["jobName"], "job,6");
        let all: Value = serde_json::from_str(
            &text(body(
                store.clone(),
                Arc::default(),
                "t",
                every_state(),
                Format::Json,
                100,
                false,
            ))
            .await,
        )
        .unwrap();
        assert_eq!(
            (
                all["truncated"].as_bool(),
                all["items"].as_array().unwrap().len()
            ),
            (Some(false), 7)
        );
        assert!(all.get("note").is_none());
        // Filters apply; another tenant gets nothing.
        let mut due = every_state();
        due.to_ms = Some(1_772_359_202_000);
        let json: Value = serde_json::from_str(
            &text(body(
                store.clone(),
                Arc::default(),
                "t",
                due,
                Format::Json,
                100,
                false,
            ))
            .await,
        )
        .unwrap();
        assert_eq!(json["items"].as_array().unwrap().len(), 2);
        let none = text(body(
            store,
            Arc::default(),
            "other",
            every_state(),
            Format::Json,
            100,
            false,
        ))
        .await;
        assert!(none.ends_with("\"items\":[\n]}\n"), "{none}");
    }

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field(""), "");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("-1+2"), "\"'-1+2\"");
        assert_eq!(csv_field("@SUM(A1)"), "\"'@SUM(A1)\"");
        assert_eq!(csv_field("+1"), "\"'+1\"");
        assert_eq!(csv_field("\u{ff1d}1+1"), "\"'\u{ff1d}1+1\"");
        assert_eq!(csv_field("é, ü"), "\"é, ü\"");
        assert_eq!(
            csv_field("a-b=c"),
            "a-b=c",
            "only a leading sign is a formula"
        );
    }

    /// Issue 44: a `;` or a tab in a field is a separator to some
    /// spreadsheets; unquoted, the text after it became a cell of its own,
    /// and one starting with `=` a formula.
    #[test]
    fn every_separator_is_quoted_so_no_cell_can_start_inside_a_field() {
        assert_eq!(
            csv_field("ok;=cmd|' /C calc'!A0"),
            "\"ok;=cmd|' /C calc'!A0\""
        );
        assert_eq!(csv_field("ok\t=1+1"), "\"ok\t=1+1\"");
        assert_eq!(csv_field("\tx"), "\"'\tx\"");
        assert_eq!(csv_field("\rx"), "\"'\rx\"");
        // Whatever a spreadsheet splits on, no cell of the line starts
        // outside the quotes.
        for sep in [',', ';', '\t'] {
            let line = csv_field(&format!("x{sep}=1+1"));
            assert!(line.starts_with('"') && line.ends_with('"'), "{line}");
        }
    }

    #[test]
    fn a_row_has_every_column_in_order() {
        let e = Execution {
            shard: Default::default(),
            id: "e1".into(),
            job_id: "j1".into(),
            tenant: "t".into(),
            scheduled_at: 1_772_359_200_000,
            attempt: 2,
            status: ExecStatus::Failed,
            worker_id: Some("w1".into()),
            output: Some(json!({"a": [1, 2]})),
            error: Some("bad, \"very\"".into()),
            not_before: 0,
            dispatched_at: None,
            started_at: Some(1_772_359_200_500),
            finished_at: Some(1_772_359_201_750),
            stop_requested_at: None,
            progress: None,
            waiting_for: None,
            created_at: 0,
        };
        let job = JobInfo {
            name: "report".into(),
            handler: "fail".into(),
            ..JobInfo::default()
        };
        let rec = record(&e, &job);
        assert_eq!(rec["durationMs"], 1_250);
        assert_eq!(
            csv_line(&rec),
            "e1,j1,report,fail,failed,2,w1,2026-03-01T10:00:00.000Z,,2026-03-01T10:00:00.500Z,\
             2026-03-01T10:00:01.750Z,1250,\"bad, \"\"very\"\"\",\"{\"\"a\"\":[1,2]}\"\r\n"
        );
        assert_eq!(COLUMNS.len(), rec.as_object().unwrap().len());
    }
}
