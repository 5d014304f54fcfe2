//! The Kairos dispatcher: finds due triggers, claims them, sends each to one
//! worker, and records what workers report.
//!
//! # Layout
//!
//! - [`attempts`]: attempt keys given back and stop requests posted on the coordination service.
//! - [`lease`]: the Redis (or in-process) lease, its renewal and fencing; leader-only work runs inside a [`lease::Term`].
//! - `leading`: what runs while leading, for one term (dispatch loop, reroute, stop relay, due signals).
//! - `dispatch_loop`: the loop — due triggers → batched claim → publish; sweeps `pending` work. Its parts:
//!   - `dispatch_loop::scope`: what one loop claims (every job, or its partitions; `KAIROS_DISPATCH_MAX_RATE`) and partitioned mode's rules, with its token bucket in `dispatch_loop::rate`;
//!   - `dispatch_loop::claim`: fan-out, a worker picked per claim, the claim through the scope;
//!   - `dispatch_loop::claim_lead`: how long before their due time triggers are claimed (more ahead of a burst);
//!   - `dispatch_loop::lane`: the immediate lane, claiming what someone waits for beside the main loop;
//!   - `dispatch_loop::publish`: worker choice per execution, confirms kept in flight, batched bookkeeping;
//!   - `dispatch_loop::unpublished`: claimed work on its way, and the tasks publishing it at its due time;
//!   - `dispatch_loop::sweeps`: `pending` and waiting work published again, stale slot rows purged.
//! - [`balancer`]: equal-cost / round-robin / random worker selection.
//! - [`reroute`]: dispatches refused by a full worker go to another one (leader only).
//! - [`consume`]: results and heartbeats, applied in batches (every instance).
//! - [`reaper`]: dead workers' work rescued, silent attempts timed out (every instance).
//! - [`recover`]: a restarted worker's old work and attempts its heartbeats no longer list, recovered.
//! - [`partitions`]: partition leases (`KAIROS_DISPATCH_PARTITIONED`): every instance claims its share.
//! - [`stops`]: stop requests recorded in the database carried to workers (leader only).
//! - [`logs`]: execution log lines purged after their retention (every instance).
//! - [`retention`]: finished history purged after its retention, per tenant (leader only).
//!
//! Any number of instances may run; exactly one holds the lease and dispatches
//! or, with `KAIROS_DISPATCH_PARTITIONED`, every one claims the partitions
//! it holds leases on and the lease holder keeps the sweeps and the other
//! leader-only work.
#![warn(missing_docs, unreachable_pub)]

pub mod attempts;
pub mod balancer;
pub mod consume;
mod dispatch_loop;
mod leading;
pub mod lease;
pub mod logs;
mod metrics;
pub mod partitions;
pub mod reaper;
pub mod recover;
pub mod reroute;
pub mod retention;
pub mod stops;
mod workflows;

use attempts::Attempts;
use balancer::Strategy;
use kairos_core::broker::Broker;
use kairos_core::coord::{Coordination, LeaseStore, Membership};
use kairos_core::due::DueSignal;
use kairos_core::protocol::Names;
use kairos_core::retention::RetentionStore;
use kairos_core::store::DispatcherStore;
use kairos_core::supervise::CriticalTasks;
use lease::{LeaseConfig, Term};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Default of [`DispatcherConfig::lease_ttl_ms`].
pub const DEFAULT_LEASE_TTL_MS: u64 = 10_000;
/// Shorter leases renew so often that a busy box would lose them to latency.
const MIN_LEASE_TTL_MS: u64 = 500;

/// A setting the dispatcher cannot run with; the message names its variable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// `ms` refused below `min`, naming the variable.
pub(crate) fn at_least(ms: u64, min: u64, var: &str) -> Result<(), ConfigError> {
    if ms < min {
        return Err(ConfigError(format!(
            "{var} must be at least {min} ms (got {ms})"
        )));
    }
    Ok(())
}

/// Dispatcher settings. A field that is a setting is named like its
/// `KAIROS_*` variable in lower case (so the binary reads it by that name
/// from flags, the environment and the `--config` file); the `serde(skip)`
/// ones are fixed timings and what the binary fills in itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct DispatcherConfig {
    /// `KAIROS_BALANCER`: worker selection strategy.
    #[arg(long, env = "KAIROS_BALANCER", value_name = "STRATEGY")]
    pub balancer: Strategy,
    /// `KAIROS_LEASE_TTL_MS`: the longest a crashed or frozen leader delays
    /// dispatching; renewed every third of it.
    #[arg(long, env = "KAIROS_LEASE_TTL_MS", value_name = "MS")]
    pub lease_ttl_ms: u64,
    /// `KAIROS_DISPATCH_STARVATION_MS`: the longest a due trigger waits
    /// behind higher priorities while more is due than the dispatcher
    /// claims at once; past it, it goes before every priority.
    #[arg(long, env = "KAIROS_DISPATCH_STARVATION_MS", value_name = "MS")]
    pub dispatch_starvation_ms: u64,
    /// `KAIROS_DISPATCH_PARTITIONED`: every dispatcher claims the jobs of
    /// the partitions it holds leases on (active-active), instead of one
    /// leader claiming everything; the leader keeps the sweeps and the
    /// other maintenance (see [`partitions`]).
    #[arg(long, env = "KAIROS_DISPATCH_PARTITIONED", value_name = "BOOL", action = clap::ArgAction::Set)]
    pub dispatch_partitioned: bool,
    /// `KAIROS_DISPATCH_MAX_RATE`: at most this many triggers claimed per
    /// second by this dispatcher (0: no limit). For measurements.
    #[arg(long, env = "KAIROS_DISPATCH_MAX_RATE", value_name = "PER_SEC")]
    pub dispatch_max_rate: u32,
    /// Dead-worker, timeout and recovery detection.
    #[serde(flatten)]
    #[command(flatten)]
    pub reaper: reaper::ReaperConfig,
    /// What is kept of execution logs, and for how long.
    #[serde(flatten)]
    #[command(flatten)]
    pub logs: logs::LogConfig,
    /// How long finished history is kept.
    #[serde(flatten)]
    #[command(flatten)]
    pub retention: retention::RetentionConfig,
    /// Lease name shared by the instances of one deployment.
    #[serde(skip)]
    #[arg(skip)]
    pub lease_name: String,
    /// This instance's id in the partitioned dispatchers' group; empty: a
    /// fresh one per run.
    #[serde(skip)]
    #[arg(skip)]
    pub member_id: String,
    /// Longest pause between scans when nothing wakes the loop.
    #[serde(skip)]
    #[arg(skip)]
    pub scan_interval: Duration,
    /// How far ahead a scan looks for the next trigger to sleep until.
    #[serde(skip)]
    #[arg(skip)]
    pub lookahead: Duration,
    /// How long before its due time a trigger is claimed (it is published at
    /// the due time): covers the claim transaction's latency.
    #[serde(skip)]
    #[arg(skip)]
    pub claim_ahead: Duration,
    /// Triggers claimed per transaction.
    #[serde(skip)]
    #[arg(skip)]
    pub batch: u32,
    /// A worker silent for this long receives no new work.
    #[serde(skip)]
    #[arg(skip)]
    pub worker_stale_after: Duration,
    /// Publisher confirms awaited concurrently.
    #[serde(skip)]
    #[arg(skip)]
    pub max_in_flight: usize,
    /// How often the leader carries new stop requests to workers.
    #[serde(skip)]
    #[arg(skip)]
    pub stop_relay_every: Duration,
    /// Queue and key names (must match the workers'); the binary sets them
    /// from `KAIROS_NAMESPACE`.
    #[serde(skip)]
    #[arg(skip)]
    pub names: Names,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        Self {
            balancer: Strategy::EqualCost,
            lease_ttl_ms: DEFAULT_LEASE_TTL_MS,
            dispatch_starvation_ms: 30_000,
            dispatch_partitioned: false,
            dispatch_max_rate: 0,
            reaper: reaper::ReaperConfig::default(),
            logs: logs::LogConfig::default(),
            retention: retention::RetentionConfig::default(),
            lease_name: "dispatcher".into(),
            member_id: String::new(),
            scan_interval: Duration::from_millis(100),
            lookahead: Duration::from_secs(2),
            claim_ahead: Duration::from_millis(100),
            batch: 500,
            worker_stale_after: Duration::from_secs(15),
            max_in_flight: 1024,
            stop_relay_every: Duration::from_millis(250),
            names: Names::default(),
        }
    }
}

impl DispatcherConfig {
    /// Lease time to live.
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.lease_ttl_ms)
    }

    /// Refuses values the dispatcher cannot run with, naming the variable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        at_least(self.lease_ttl_ms, MIN_LEASE_TTL_MS, "KAIROS_LEASE_TTL_MS")?;
        at_least(
            self.dispatch_starvation_ms,
            1_000,
            "KAIROS_DISPATCH_STARVATION_MS",
        )?;
        self.reaper.validate()?;
        self.logs.validate()?;
        self.retention.validate()
    }
}

/// A dispatcher instance.
pub struct Dispatcher {
    store: Arc<dyn DispatcherStore>,
    broker: Arc<dyn Broker>,
    coord: Arc<dyn Coordination>,
    cfg: DispatcherConfig,
    due: Option<Arc<dyn DueSignal>>,
    on_callbacks: Option<Arc<Notify>>,
    members: Option<Arc<dyn Membership>>,
    held: partitions::HeldView,
    tasks: CriticalTasks,
    history: Option<Arc<dyn RetentionStore>>,
}

impl Dispatcher {
    /// A dispatcher over the given adapters; `coord` holds the leader lease,
    /// the workers' attempt keys and the stop requests.
    pub fn new(
        store: Arc<dyn DispatcherStore>,
        broker: Arc<dyn Broker>,
        coord: Arc<dyn Coordination>,
        cfg: DispatcherConfig,
    ) -> Self {
        Self {
            store,
            broker,
            coord,
            cfg,
            due: None,
            on_callbacks: None,
            members: None,
            held: partitions::HeldView::default(),
            tasks: CriticalTasks::new(),
            history: None,
        }
    }

    /// Purges finished history past its retention while leading (see
    /// [`retention`]); without it, history is kept forever.
    pub fn retention(mut self, history: Arc<dyn RetentionStore>) -> Self {
        self.history = Some(history);
        self
    }

    /// Listens to due signals (the API announces jobs it made due), so the
    /// leader dispatches them at once instead of at its next scan.
    pub fn due_signal(mut self, due: Arc<dyn DueSignal>) -> Self {
        self.due = Some(due);
        self
    }

    /// The group partitioned dispatchers announce themselves in (the same
    /// Redis, or in-process service, as the leases): needed by
    /// `KAIROS_DISPATCH_PARTITIONED`.
    pub fn membership(mut self, members: Arc<dyn Membership>) -> Self {
        self.members = Some(members);
        self
    }

    /// Shows the partitions this instance holds in `view` (partitioned mode).
    pub fn partitions_view(mut self, view: partitions::HeldView) -> Self {
        self.held = view;
        self
    }

    /// Notified whenever applied results queued a callback (the in-process relay's wake-up).
    pub fn notify_callbacks(mut self, n: Arc<Notify>) -> Self {
        self.on_callbacks = Some(n);
        self
    }

    /// Watches the dispatcher's long-lived tasks (the consumers, the reaper,
    /// the log purge) in `tasks`, so the process's `/readyz` reports one that
    /// ended. Leader-only tasks end with each term and are not watched.
    pub fn critical_tasks(mut self, tasks: CriticalTasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// Runs until `shutdown`; on shutdown the lease is released at once.
    pub async fn run(self, shutdown: CancellationToken) {
        self.run_until(shutdown.clone(), shutdown).await
    }

    /// Runs with a two-phase stop: `stop_leading` ends dispatching and releases
    /// the lease; `stop_consuming` ends the result and heartbeat consumers.
    /// An embedding process stops leading first, lets its workers drain and
    /// report, and only then stops consuming, so no result is left unrecorded.
    pub async fn run_until(
        self,
        stop_leading: CancellationToken,
        stop_consuming: CancellationToken,
    ) {
        metrics::register();
        let slots_freed = Arc::new(Notify::new());
        let results = self.tasks.spawn(
            "results consumer",
            consume::run_results(
                self.store.clone(),
                self.broker.clone(),
                self.on_callbacks.clone(),
                slots_freed.clone(),
                self.due.clone(),
                stop_consuming.clone(),
            ),
        );
        let log_lines = self.tasks.spawn(
            "logs consumer",
            consume::run_logs(
                self.store.clone(),
                self.broker.clone(),
                self.cfg.logs.limits(),
                stop_consuming.clone(),
            ),
        );
        let log_purge = self.tasks.spawn(
            "log purge",
            logs::run_purge(
                self.store.clone(),
                self.cfg.logs.clone(),
                stop_consuming.clone(),
            ),
        );
        let attempts = Attempts {
            coord: self.coord.clone(),
            names: self.cfg.names.clone(),
        };
        let heartbeats = self.tasks.spawn(
            "heartbeats consumer",
            consume::run_heartbeats(
                self.store.clone(),
                self.broker.clone(),
                attempts.clone(),
                stop_consuming.clone(),
            ),
        );
        let reaper = self.tasks.spawn(
            "reaper",
            reaper::run(
                self.store.clone(),
                self.broker.clone(),
                attempts.clone(),
                self.cfg.reaper.clone(),
                stop_consuming.clone(),
            ),
        );
        let lease_cfg = LeaseConfig {
            name: self.cfg.lease_name.clone(),
            ttl: self.cfg.lease_ttl(),
        };
        let mut cfg = self.cfg.clone();
        let claims = match (&self.members, cfg.dispatch_partitioned) {
            (Some(members), true) => Some(leading::spawn_partitioned(
                leading::Leading {
                    store: self.store.clone(),
                    broker: self.broker.clone(),
                    due: self.due.clone(),
                    slots_freed: slots_freed.clone(),
                    cfg: cfg.clone(),
                },
                self.coord.clone(),
                members.clone(),
                self.held.clone(),
                stop_leading.clone(),
            )),
            (None, true) => {
                tracing::error!(
                    "KAIROS_DISPATCH_PARTITIONED needs a member group (Dispatcher::membership); dispatching from the leader alone"
                );
                cfg.dispatch_partitioned = false;
                None
            }
            (_, false) => None,
        };
        let leader = leading::Leading {
            store: self.store.clone(),
            broker: self.broker.clone(),
            due: self.due.clone(),
            slots_freed,
            cfg,
        };
        let lock: Arc<dyn LeaseStore> = self.coord.clone();
        let history = self.history.clone();
        lease::campaign(lock, lease_cfg, stop_leading, move |term: Term| {
            // The retention purge is leader-only work too: it ends with the term.
            let purge = history.clone().map(|h| {
                kairos_core::supervise::spawn_critical(
                    "retention purge",
                    retention::run(h, leader.cfg.retention.clone(), term.clone()),
                )
            });
            let term_work = leading::run_term(leader.clone(), attempts.clone(), term);
            async move {
                term_work.await;
                if let Some(purge) = purge {
                    let _ = purge.await;
                }
            }
        })
        .await;
        if let Some(claims) = claims {
            let _ = claims.await;
        }
        let _ = results.await;
        let _ = heartbeats.await;
        let _ = log_lines.await;
        let _ = log_purge.await;
        let _ = reaper.await;
    }
}
