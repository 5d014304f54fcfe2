//! The worker's Prometheus figures, recorded through the `metrics` facade
//! (the binary installs the exporter; without one these calls do nothing).
//!
//! The handler label takes only the names this worker registered, anything
//! else is `other`, so a dispatch naming a made-up handler cannot grow the
//! label set. docs/operations.md lists every figure.
//!
//! Callers hand in the figures themselves, so this module depends on no
//! other part of the worker but the handler registry.

use crate::handler::Registry;
use std::time::Duration;

/// Registers every worker figure at zero with its help text, so dashboards
/// and alerts find them before the first event (the pool's gauges are set
/// by the pool itself).
pub(crate) fn register() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_gauge!(
        "kairos_worker_capacity",
        "Handlers this worker runs at once"
    );
    describe_gauge!("kairos_worker_running", "Handlers running now");
    describe_gauge!(
        "kairos_worker_buffered",
        "Accepted dispatches waiting for a handler slot"
    );
    describe_histogram!(
        "kairos_handler_duration_seconds",
        Unit::Seconds,
        "Handler run time by handler and outcome"
    );
    describe_counter!(
        "kairos_worker_rejects_total",
        "Dispatches refused because pool and buffer were full (rerouted)"
    );
    describe_counter!(
        "kairos_worker_stops_honoured_total",
        "Running attempts stopped at the scheduler's request"
    );
    describe_counter!(
        "kairos_worker_reconnects_total",
        "Times the dispatch consumer was started again"
    );
    describe_counter!(
        "kairos_worker_result_messages_total",
        "Confirmed-publish messages sent to the results queue (each carries one or more results)"
    );
    describe_counter!(
        "kairos_worker_results_total",
        "Results (started and final) published"
    );
    metrics::counter!("kairos_worker_result_messages_total").increment(0);
    metrics::counter!("kairos_worker_results_total").increment(0);
    metrics::counter!("kairos_worker_rejects_total").increment(0);
    metrics::counter!("kairos_worker_stops_honoured_total").increment(0);
    metrics::counter!("kairos_worker_reconnects_total").increment(0);
}

/// One results message published with `results` results in it.
pub(crate) fn results_published(results: usize) {
    metrics::counter!("kairos_worker_result_messages_total").increment(1);
    metrics::counter!("kairos_worker_results_total").increment(results as u64);
}

/// Capacity, running handlers and dispatches waiting for a slot (those
/// accepted, `in_flight`, less those running).
pub(crate) fn pool(capacity: u32, running: u32, in_flight: u32) {
    metrics::gauge!("kairos_worker_capacity").set(f64::from(capacity));
    metrics::gauge!("kairos_worker_running").set(f64::from(running));
    metrics::gauge!("kairos_worker_buffered").set(f64::from(in_flight.saturating_sub(running)));
}

/// One finished attempt: its handler's run time by handler and outcome
/// (`succeeded`, `failed`, `timed_out`, `stopped`: at the scheduler's request
/// or by shutdown).
pub(crate) fn handler_ran(
    registered: &Registry,
    handler: &str,
    outcome: &'static str,
    took: Duration,
) {
    let handler = if registered.get(handler).is_some() {
        handler.to_string()
    } else {
        "other".to_string()
    };
    metrics::histogram!(
        "kairos_handler_duration_seconds",
        "handler" => handler,
        "outcome" => outcome
    )
    .record(took.as_secs_f64());
}

/// A dispatch refused because pool and buffer were full (it is rerouted).
pub(crate) fn rejected() {
    metrics::counter!("kairos_worker_rejects_total").increment(1);
}

/// A running attempt stopped at the scheduler's request.
pub(crate) fn stop_honoured() {
    metrics::counter!("kairos_worker_stops_honoured_total").increment(1);
}

/// The dispatch consumer started again after it ended or failed.
pub(crate) fn reconnected() {
    metrics::counter!("kairos_worker_reconnects_total").increment(1);
}
