//! The relay's Prometheus figures, recorded through the `metrics` facade
//! (the binary installs the exporter; without one these calls do nothing).

use kairos_core::callback::CallbackAttempt;
use kairos_core::store::{CallbackNext, CallbackStore};
use kairos_core::time::now_ms;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the outbox backlog figures are read from the database.
pub(crate) const BACKLOG_EVERY: Duration = Duration::from_secs(5);

/// Registers every relay figure at zero with its help text, so dashboards
/// and alerts find them before the first event.
pub(crate) fn register() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "kairos_callback_deliveries_total",
        "Callback attempts by outcome (delivered, retry, dead)"
    );
    describe_histogram!(
        "kairos_callback_delivery_seconds",
        Unit::Seconds,
        "Callback request round trip"
    );
    describe_gauge!(
        "kairos_callbacks_retrying",
        "Pending callbacks with at least one failed attempt"
    );
    describe_gauge!("kairos_callbacks_dead", "Callbacks given up on");
    describe_gauge!(
        "kairos_callback_oldest_pending_seconds",
        "Age of the oldest pending callback"
    );
    for outcome in ["delivered", "retry", "dead"] {
        metrics::counter!("kairos_callback_deliveries_total", "outcome" => outcome).increment(0);
    }
    let _ = metrics::histogram!("kairos_callback_delivery_seconds");
}

/// One delivery attempt, by what follows it: `delivered`, `retry` or `dead`.
pub(crate) fn delivery(attempt: &CallbackAttempt, next: CallbackNext) {
    let outcome = match next {
        CallbackNext::Delivered => "delivered",
        CallbackNext::RetryAt(_) => "retry",
        CallbackNext::Dead => "dead",
    };
    metrics::counter!("kairos_callback_deliveries_total", "outcome" => outcome).increment(1);
    metrics::histogram!("kairos_callback_delivery_seconds")
        .record(attempt.latency_ms as f64 / 1000.0);
}

/// Reads the outbox figures every [`BACKLOG_EVERY`] until `shutdown`.
pub(crate) async fn watch_backlog(store: Arc<dyn CallbackStore>, shutdown: CancellationToken) {
    while !shutdown.is_cancelled() {
        match store.callbacks_backlog().await {
            Ok(b) => {
                metrics::gauge!("kairos_callbacks_retrying").set(b.retrying as f64);
                metrics::gauge!("kairos_callbacks_dead").set(b.dead as f64);
                let age = b
                    .oldest_pending_at
                    .map_or(0.0, |at| (now_ms() - at).max(0) as f64 / 1000.0);
                metrics::gauge!("kairos_callback_oldest_pending_seconds").set(age);
            }
            Err(e) => tracing::debug!(error = %e, "cannot read the callback backlog"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(BACKLOG_EVERY) => {}
        }
    }
}
