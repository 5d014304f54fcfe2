//! The work a dispatcher does while it leads, for one term of the lease (see
//! [`crate::lease`]): the dispatch loop ([`crate::scan`]), the reroute
//! consumer, the stop relay, the due-signal listener and the triggers of
//! scheduled workflows ([`crate::workflows`]). Everything here
//! ends with the term; the next term starts it afresh.

use crate::attempts::Attempts;
use crate::balancer::Balancer;
use crate::lane::LaneSignal;
use crate::lease::Term;
use crate::publish::Publisher;
use crate::scan::{DispatchLoop, ScanConfig};
use crate::{DispatcherConfig, reroute, stops};
use kairos_core::broker::Broker;
use kairos_core::due::DueSignal;
use kairos_core::store::DispatcherStore;
use kairos_core::supervise::{self, spawn_critical};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Runs the leader-only work of one term until it ends.
pub(crate) async fn run_term(
    store: Arc<dyn DispatcherStore>,
    broker: Arc<dyn Broker>,
    attempts: Attempts,
    due: Option<Arc<dyn DueSignal>>,
    slots_freed: Arc<tokio::sync::Notify>,
    cfg: DispatcherConfig,
    term: Term,
) {
    let stale_ms = cfg.worker_stale_after.as_millis() as i64;
    let balancer = Arc::new(Mutex::new(Balancer::new(cfg.balancer, stale_ms)));
    let reroute = spawn_critical(
        "reroute",
        reroute::run_reroute(
            broker.clone(),
            store.clone(),
            balancer.clone(),
            term.token.clone(),
        ),
    );
    let stop_relay = spawn_critical(
        "stop relay",
        stops::run(
            store.clone(),
            attempts.clone(),
            cfg.stop_relay_every,
            term.token.clone(),
        ),
    );
    // Issue 34: the runs of scheduled workflows.
    let workflows = spawn_critical(
        "workflow triggers",
        crate::workflows::run(
            store.clone(),
            cfg.scan_interval.max(Duration::from_millis(250)),
            term.token.clone(),
        ),
    );
    let (due_tx, due_rx) = mpsc::channel(1024);
    let lane = Arc::new(LaneSignal::default());
    let listener = due.map(|d| {
        spawn_critical(
            "due signal listener",
            listen_for_due(d, due_tx, lane.clone(), term.token.clone()),
        )
    });
    let dispatch = DispatchLoop {
        store: store.clone(),
        publisher: Arc::new(Publisher::new(
            store,
            broker,
            balancer.clone(),
            cfg.max_in_flight,
        )),
        balancer,
        due: due_rx,
        lane,
        slots_freed,
        cfg: ScanConfig {
            interval: cfg.scan_interval,
            lookahead: cfg.lookahead,
            claim_ahead: cfg.claim_ahead,
            batch: cfg.batch,
            sweep_every: Duration::from_secs(1),
            workers_every: Duration::from_millis(500),
            publishers: 16,
            starvation: Duration::from_millis(cfg.dispatch_starvation_ms),
        },
    };
    dispatch.run(term.clone()).await;
    term.token.cancel();
    let _ = reroute.await;
    let _ = stop_relay.await;
    let _ = workflows.await;
    if let Some(l) = listener {
        let _ = l.await;
    }
}

/// Forwards due signals to the dispatch loop for the length of a term,
/// subscribing again whenever the subscription drops. Signals only save
/// latency (the scan is the safety net), so an outage is logged at debug.
async fn listen_for_due(
    due: Arc<dyn DueSignal>,
    tx: mpsc::Sender<kairos_core::time::Millis>,
    lane: Arc<LaneSignal>,
    token: CancellationToken,
) {
    let backoff = supervise::Backoff {
        min: Duration::from_millis(500),
        max: Duration::from_secs(5),
    };
    supervise::consume(
        "due signals",
        DueListener { due, tx, lane },
        backoff,
        &token,
    )
    .await
}

/// The due-signal subscription and where its signals go.
struct DueListener {
    due: Arc<dyn DueSignal>,
    tx: mpsc::Sender<kairos_core::time::Millis>,
    /// Woken for jobs due now while a backlog lasts.
    lane: Arc<LaneSignal>,
}

impl supervise::Subscription for DueListener {
    type Item = kairos_core::time::Millis;
    type Stream = futures::stream::BoxStream<'static, kairos_core::time::Millis>;
    type Error = kairos_core::coord::CoordError;

    async fn open(&mut self) -> Result<Self::Stream, Self::Error> {
        self.due.subscribe().await
    }

    async fn handle(&mut self, at: kairos_core::time::Millis) {
        self.lane.due(at);
        // A full channel means the loop is busy scanning anyway.
        let _ = self.tx.try_send(at);
    }
}
