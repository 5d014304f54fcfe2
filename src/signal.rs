//! Turns SIGINT/SIGTERM into a cancellation token, so every service drains
//! the same way whether it runs alone or inside `kairos dev`.

use tokio_util::sync::CancellationToken;
use tracing::info;

/// A token cancelled on the first SIGINT or SIGTERM.
pub fn shutdown_token() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    kairos_core::supervise::spawn_critical("signal watch", async move {
        wait_for_signal().await;
        info!("shutting down (signal received)");
        t.cancel();
    });
    token
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}
