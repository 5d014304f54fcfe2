//! The work a dispatcher does while it leads, for one term of the lease (see
//! [`crate::lease`]): the dispatch loop ([`crate::scan`]), the reroute
//! consumer, the stop relay, the due-signal listener and the triggers of
//! scheduled workflows ([`crate::workflows`]). Everything here ends with
//! the term; the next term starts it afresh. In partitioned mode the
//! leader's loop only sweeps, and every instance also runs a claim loop
//! over its partitions ([`spawn_partitioned`]), for as long as it runs.

use crate::attempts::Attempts;
use crate::balancer::Balancer;
use crate::lane::LaneSignal;
use crate::lease::Term;
use crate::partitions::{self, OwnedSet, PartitionConfig};
use crate::publish::Publisher;
use crate::rate::RateLimit;
use crate::scan::{DispatchLoop, Duty, ScanConfig};
use crate::scoped::ScopedStore;
use crate::{DispatcherConfig, reroute, stops};
use kairos_core::broker::Broker;
use kairos_core::coord::{LeaseStore, Membership};
use kairos_core::due::{Due, DueSignal};
use kairos_core::store::DispatcherStore;
use kairos_core::supervise::{self, spawn_critical};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Runs the leader-only work of one term until it ends. In partitioned
/// mode the term's dispatch loop only sweeps: the claims are every
/// instance's, in [`spawn_partitioned`].
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
            due.clone(),
            cfg.scan_interval.max(Duration::from_millis(250)),
            term.token.clone(),
        ),
    );
    let (duty, store) = match (
        cfg.dispatch_partitioned,
        RateLimit::new(cfg.dispatch_max_rate),
    ) {
        (true, _) => (Duty::Sweeps, store),
        (false, None) => (Duty::All, store),
        (false, Some(rate)) => (
            Duty::All,
            Arc::new(ScopedStore::rate_limited(store, rate)) as Arc<dyn DispatcherStore>,
        ),
    };
    let shared = Shared {
        store,
        broker,
        due,
        slots_freed,
        cfg,
    };
    let (dispatch, listener) = dispatch_loop(&shared, balancer, duty, &term.token);
    dispatch.run(term.clone()).await;
    term.token.cancel();
    let _ = reroute.await;
    let _ = stop_relay.await;
    let _ = workflows.await;
    if let Some(l) = listener {
        let _ = l.await;
    }
}

/// What every dispatch loop is built from.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn DispatcherStore>,
    pub(crate) broker: Arc<dyn Broker>,
    pub(crate) due: Option<Arc<dyn DueSignal>>,
    pub(crate) slots_freed: Arc<tokio::sync::Notify>,
    pub(crate) cfg: DispatcherConfig,
}

/// A dispatch loop doing `duty` over `shared.store`, and its due-signal
/// listener (ending with `token`).
fn dispatch_loop(
    shared: &Shared,
    balancer: Arc<Mutex<Balancer>>,
    duty: Duty,
    token: &CancellationToken,
) -> (DispatchLoop, Option<tokio::task::JoinHandle<()>>) {
    let cfg = &shared.cfg;
    let (due_tx, due_rx) = mpsc::channel(1024);
    let lane = Arc::new(LaneSignal::default());
    let listener = shared.due.clone().map(|d| {
        spawn_critical(
            "due signal listener",
            listen_for_due(d, due_tx, lane.clone(), token.clone()),
        )
    });
    let dispatch = DispatchLoop {
        store: shared.store.clone(),
        publisher: Arc::new(Publisher::new(
            shared.store.clone(),
            shared.broker.clone(),
            balancer.clone(),
            cfg.max_in_flight,
        )),
        balancer,
        due: due_rx,
        lane,
        slots_freed: shared.slots_freed.clone(),
        cfg: ScanConfig {
            interval: cfg.scan_interval,
            lookahead: cfg.lookahead,
            claim_ahead: cfg.claim_ahead,
            batch: cfg.batch,
            sweep_every: Duration::from_secs(1),
            workers_every: Duration::from_millis(500),
            publishers: 16,
            starvation: Duration::from_millis(cfg.dispatch_starvation_ms),
            duty,
        },
    };
    (dispatch, listener)
}

/// Starts partitioned dispatch until `stop`: the partition leases
/// ([`crate::partitions`]) and a claim loop over the partitions held. The
/// returned task ends once both have, every lease released.
pub(crate) fn spawn_partitioned(
    shared: Shared,
    lock: Arc<dyn LeaseStore>,
    members: Arc<dyn Membership>,
    view: partitions::HeldView,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    spawn_critical("partitioned dispatch", async move {
        let count = match partition_count(&shared, &stop).await {
            Some(count) => count,
            None => return,
        };
        let owned = Arc::new(OwnedSet::new(RateLimit::new(shared.cfg.dispatch_max_rate)));
        let member = match shared.cfg.member_id.as_str() {
            "" => format!("dispatcher-{}", uuid_like()),
            id => id.to_string(),
        };
        let pcfg = PartitionConfig {
            base: shared.cfg.lease_name.clone(),
            member,
            ttl: shared.cfg.lease_ttl(),
            view,
        };
        // The claim loop stops first and the leases go after it, so no
        // claim runs with a lease already released.
        let claims_stop = CancellationToken::new();
        let leases_stop = CancellationToken::new();
        let leases = spawn_critical(
            "partition leases",
            partitions::run(
                lock,
                members,
                pcfg,
                count,
                owned.clone(),
                leases_stop.clone(),
            ),
        );
        let store: Arc<dyn DispatcherStore> =
            Arc::new(ScopedStore::partitioned(shared.store.clone(), owned));
        let stale_ms = shared.cfg.worker_stale_after.as_millis() as i64;
        let balancer = Arc::new(Mutex::new(Balancer::new(shared.cfg.balancer, stale_ms)));
        let scoped = Shared { store, ..shared };
        let (dispatch, listener) = dispatch_loop(&scoped, balancer, Duty::Claims, &claims_stop);
        let forward = {
            let claims_stop = claims_stop.clone();
            async move {
                stop.cancelled().await;
                claims_stop.cancel();
            }
        };
        let term = Term::unbounded(claims_stop.clone());
        tokio::join!(dispatch.run(term), forward);
        leases_stop.cancel();
        if let Some(l) = listener {
            let _ = l.await;
        }
        let _ = leases.await;
    })
}

/// The partition count from storage, retried until it answers or `stop`.
async fn partition_count(shared: &Shared, stop: &CancellationToken) -> Option<u32> {
    loop {
        match shared.store.partitions_count().await {
            Ok(count) => return Some(count),
            Err(e) => warn!(error = %e, "cannot read the partition count; retrying"),
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// A member id unique enough for one process: time and randomness.
fn uuid_like() -> String {
    format!(
        "{:x}-{:08x}",
        kairos_core::time::now_ms(),
        rand::random::<u32>()
    )
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
    /// Woken for jobs due now (the main loop for the rest).
    lane: Arc<LaneSignal>,
}

impl supervise::Subscription for DueListener {
    type Item = Due;
    type Stream = futures::stream::BoxStream<'static, Due>;
    type Error = kairos_core::coord::CoordError;

    async fn open(&mut self) -> Result<Self::Stream, Self::Error> {
        self.due.subscribe().await
    }

    async fn handle(&mut self, due: Due) {
        match due {
            // A job due now is the immediate lane's, which hands the
            // signal on when it finds nothing of its own for it.
            Due::At(at) => {
                if !self.lane.due(at) {
                    // A full channel means the loop is busy scanning anyway.
                    let _ = self.tx.try_send(at);
                }
            }
            Due::Pending => self.lane.ask_sweep(),
        }
    }
}
