//! Scheduled workflows (issue 34): while this dispatcher leads, starts a
//! run of each workflow whose next trigger is due (the store moves it to
//! its following trigger in the same transaction). The runs' root nodes
//! are pending executions, published by the dispatch loop's sweep, which a
//! due signal asks for at once.

use kairos_core::due::{Due, DueSignal};
use kairos_core::time::now_ms;
use kairos_core::workflow::WorkflowScheduler;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Workflows started per store call; a full batch is followed at once by
/// the next.
const BATCH: u32 = 100;

/// Looks for due workflow triggers every `every` until `token` is cancelled.
pub(crate) async fn run(
    store: Arc<dyn WorkflowScheduler>,
    due: Option<Arc<dyn DueSignal>>,
    every: Duration,
    token: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = token.cancelled() => return,
            _ = tick.tick() => {}
        }
        loop {
            match store.workflows_fire_due(now_ms(), BATCH).await {
                Ok(runs) => {
                    if !runs.is_empty() {
                        tracing::info!(runs = runs.len(), "started scheduled workflow runs");
                        if let Some(due) = &due {
                            due.announce(Due::Pending).await;
                        }
                    }
                    if runs.len() < BATCH as usize || token.is_cancelled() {
                        break;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot start scheduled workflow runs");
                    break;
                }
            }
        }
    }
}
