//! The work a dispatcher does while it leads, for one term of the lease (see
//! [`crate::lease`]): the dispatch loop ([`crate::dispatch_loop`]), the reroute
//! consumer, the stop relay, the due-signal listener and the triggers of
//! scheduled workflows ([`crate::workflows`]). Everything here ends with
//! the term; the next term starts it afresh. In partitioned mode the
//! leader's loop only sweeps, and every instance also runs a claim loop
//! over its partitions ([`spawn_partitioned`]), for as long as it runs.

use crate::attempts::Attempts;
use crate::balancer::Balancer;
use crate::dispatch_loop::{
    ClaimScope, Claimer, DispatchLoop, Duty, LaneSignal, LoopConfig, Publisher, PublisherParts,
    RateLimit,
};
use crate::lease::Term;
use crate::partitions::{self, OwnedSet, PartitionConfig};
use crate::{DispatcherConfig, reroute, stops};
use kairos_core::broker::Broker;
use kairos_core::coord::{LeaseStore, Membership};
use kairos_core::due::{Due, DueSignal};
use kairos_core::store::{Dispatch, DispatcherStore};
use kairos_core::supervise::{self, spawn_critical};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// What a dispatcher leads with: its adapters and settings, shared by the
/// leader's term ([`run_term`]) and the partitioned claim loop
/// ([`spawn_partitioned`]). Each task takes from it the store role it uses.
#[derive(Clone)]
pub(crate) struct Leading {
    pub(crate) store: Arc<dyn DispatcherStore>,
    pub(crate) broker: Arc<dyn Broker>,
    pub(crate) due: Option<Arc<dyn DueSignal>>,
    /// Notified when applied results gave concurrency slots back.
    pub(crate) slots_freed: Arc<tokio::sync::Notify>,
    pub(crate) cfg: DispatcherConfig,
}

/// Runs the leader-only work of one term until it ends. In partitioned
/// mode the term's dispatch loop only sweeps: the claims are every
/// instance's, in [`spawn_partitioned`].
pub(crate) async fn run_term(leading: Leading, attempts: Attempts, term: Term) {
    let Leading {
        store,
        broker,
        due,
        cfg,
        ..
    } = &leading;
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
    let duty = match cfg.dispatch_partitioned {
        true => Duty::Sweeps,
        false => Duty::All,
    };
    let scope = ClaimScope::leader(RateLimit::new(cfg.dispatch_max_rate));
    let (dispatch, listener) = dispatch_loop(&leading, scope, balancer, duty, &term.token);
    dispatch.run(term.clone()).await;
    term.token.cancel();
    let _ = reroute.await;
    let _ = stop_relay.await;
    let _ = workflows.await;
    if let Some(l) = listener {
        let _ = l.await;
    }
}

/// A dispatch loop doing `duty` in `scope`, and its due-signal listener
/// (ending with `token`).
fn dispatch_loop(
    leading: &Leading,
    scope: ClaimScope,
    balancer: Arc<Mutex<Balancer>>,
    duty: Duty,
    token: &CancellationToken,
) -> (DispatchLoop, Option<tokio::task::JoinHandle<()>>) {
    let cfg = &leading.cfg;
    let (due_tx, due_rx) = mpsc::channel(1024);
    let lane = Arc::new(LaneSignal::default());
    let listener = leading.due.clone().map(|d| {
        spawn_critical(
            "due signal listener",
            listen_for_due(d, due_tx, lane.clone(), token.clone()),
        )
    });
    let scope = Arc::new(scope);
    let publisher = Publisher::new(PublisherParts {
        dispatch: leading.store.clone(),
        maintenance: leading.store.clone(),
        broker: leading.broker.clone(),
        balancer: balancer.clone(),
        max_in_flight: cfg.max_in_flight,
        admits: scope.admits(),
    });
    let dispatch = DispatchLoop {
        dispatch: leading.store.clone(),
        workers: leading.store.clone(),
        claimer: Arc::new(Claimer::new(
            leading.store.clone(),
            balancer.clone(),
            scope.clone(),
        )),
        scope,
        publisher: Arc::new(publisher),
        balancer,
        due: due_rx,
        lane,
        slots_freed: leading.slots_freed.clone(),
        cfg: LoopConfig {
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
    leading: Leading,
    lock: Arc<dyn LeaseStore>,
    members: Arc<dyn Membership>,
    view: partitions::HeldView,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    spawn_critical("partitioned dispatch", async move {
        let count = match partition_count(leading.store.as_ref(), &stop).await {
            Some(count) => count,
            None => return,
        };
        let owned = Arc::new(OwnedSet::default());
        let cfg = &leading.cfg;
        let member = match cfg.member_id.as_str() {
            "" => format!("dispatcher-{}", uuid_like()),
            id => id.to_string(),
        };
        let pcfg = PartitionConfig {
            base: cfg.lease_name.clone(),
            member,
            ttl: cfg.lease_ttl(),
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
        let scope = ClaimScope::partitions(owned, RateLimit::new(cfg.dispatch_max_rate));
        let stale_ms = cfg.worker_stale_after.as_millis() as i64;
        let balancer = Arc::new(Mutex::new(Balancer::new(cfg.balancer, stale_ms)));
        let (dispatch, listener) =
            dispatch_loop(&leading, scope, balancer, Duty::Claims, &claims_stop);
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
async fn partition_count(store: &dyn Dispatch, stop: &CancellationToken) -> Option<u32> {
    loop {
        match store.partitions_count().await {
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
