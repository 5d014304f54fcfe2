//! The `priority` workload: N priority-0 jobs due at one instant, then a
//! few priority-9 jobs due just after them, created behind them. In due
//! order the urgent ones would finish last; the figures say when each group
//! finished after the due time (server timestamps).

use super::api::{Api, Times};
use super::report::Report;
use super::workloads::{Sending, create_all, span_ms, wait_finished};
use anyhow::Result;
use kairos_core::time::{Millis, now_ms, to_rfc3339};
use serde_json::json;
use std::time::Duration;

/// Priority-9 jobs created behind the bulk.
const URGENT: usize = 100;

/// Runs the workload: `n` bulk jobs, then [`URGENT`] urgent ones.
pub(super) async fn run(
    api: &Api,
    n: usize,
    how: Sending,
    lead: Duration,
    deadline: Duration,
    report: &mut Report,
) -> Result<()> {
    let due = now_ms() + lead.as_millis() as Millis;
    let bulk_at = to_rfc3339(due);
    let urgent_at = to_rfc3339(due + 1);
    let bulk = |i: usize| {
        json!({"jobName": format!("bulk-{i}"), "jobHandler": "noop",
               "triggerAt": bulk_at, "priority": 0})
    };
    let urgent = |i: usize| {
        json!({"jobName": format!("urgent-{i}"), "jobHandler": "noop",
               "triggerAt": urgent_at, "priority": 9})
    };
    let (bulk_ids, _) = create_all(api, n, how, bulk, report).await?;
    let mut scratch = Report::scratch();
    let (urgent_ids, _) = create_all(api, URGENT, how, urgent, &mut scratch).await?;
    if now_ms() > due {
        report.note("jobs were stored after the due time; raise --lead-ms".into());
    }
    let wait = deadline + lead;
    let urgent_done = wait_finished(api, &urgent_ids, how.connections, wait, &mut scratch).await?;
    let bulk_done = wait_finished(api, &bulk_ids, how.connections, wait, report).await?;

    let last = |t: &[Times]| t.iter().filter_map(|t| t.finished).max();
    if let (Some(u), Some(b)) = (last(&urgent_done), last(&bulk_done)) {
        report.figure(
            "priority 9: last finished after the due time",
            (u - due) as f64,
            "ms",
        );
        report.figure(
            "priority 0: last finished after the due time",
            (b - due) as f64,
            "ms",
        );
        let before = bulk_done
            .iter()
            .filter(|t| t.finished.is_some_and(|f| f < u))
            .count();
        report.figure(
            "priority 0 jobs finished before the last priority 9 one",
            before as f64,
            "",
        );
    }
    let after_due = |t: &[Times]| t.iter().filter_map(|t| span_ms(due, t.finished)).collect();
    report.latency("priority 9: due → succeeded", after_due(&urgent_done));
    report.latency("priority 0: due → succeeded", after_due(&bulk_done));
    Ok(())
}
