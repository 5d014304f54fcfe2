//! A built [`Worker`]: its parts, each shared only with the tasks that use
//! it, and its life from start through drain to stop.

use crate::attempt::Attempts;
use crate::config::{Settings, WorkerError};
use crate::connections::Connections;
use crate::execute::Executor;
use crate::handler::Registry;
use crate::heartbeat::{self, Sources};
use crate::load::Load;
use crate::logs::Shipper;
use crate::pool::Pool;
use crate::reporting::Reporting;
use crate::{consume, metrics, stops};
use kairos_core::broker::Broker;
use kairos_core::coord::Coordination;
use kairos_core::protocol::Names;
use kairos_core::supervise::CriticalTasks;
use kairos_core::worker::WorkerState;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A configured worker, ready to [`run`](Worker::run).
pub struct Worker {
    settings: Settings,
    conn: Arc<Connections>,
    handlers: Arc<Registry>,
    pool: Arc<Pool>,
    load: Arc<Load>,
    reporting: Reporting,
    shipper: Shipper,
    stop_poll: Duration,
    tasks: CriticalTasks,
    deregister: bool,
}

/// What a worker is made of besides its settings (checked by the builder).
pub(crate) struct Parts {
    pub(crate) handlers: Registry,
    pub(crate) names: Names,
    pub(crate) broker: Arc<dyn Broker>,
    pub(crate) coord: Arc<dyn Coordination>,
    pub(crate) stop_poll: Duration,
    pub(crate) tasks: CriticalTasks,
    /// Whether to delete the queues on stop (see [`deregister`]).
    pub(crate) deregister: bool,
}

impl Worker {
    pub(crate) fn new(settings: Settings, parts: Parts) -> Self {
        let Parts {
            handlers,
            names,
            broker,
            coord,
            stop_poll,
            tasks,
            deregister,
        } = parts;
        let (reporting, shipper) = Reporting::new(Arc::clone(&broker), settings.id.clone());
        Self {
            conn: Arc::new(Connections::new(settings.id.clone(), names, broker, coord)),
            handlers: Arc::new(handlers),
            pool: Arc::new(Pool::new(settings.capacity, settings.buffer)),
            load: Arc::new(Load::new()),
            reporting,
            shipper,
            stop_poll,
            tasks,
            deregister,
            settings,
        }
    }

    /// Handler names this worker serves (announced in its heartbeats).
    pub fn handlers(&self) -> Vec<String> {
        self.handlers.names()
    }

    /// This worker's id (its queue is `<namespace>.worker.<id>`).
    pub fn id(&self) -> &str {
        &self.conn.id
    }

    /// Declares the queue, heartbeats and consumes until `shutdown` is
    /// cancelled; then stops consuming (deliveries whose handler has not
    /// started go back to the queue, and the dispatcher requeues them once
    /// this worker is offline), reports `draining`, gives running handlers the
    /// grace period (the drain window), stops the ones still running and
    /// reports nothing for them (handed back: the dispatcher retries them
    /// once without counting against `maxAttempts`), reports `offline` and
    /// deletes its queues (deregistration: what they still hold the
    /// dispatcher requeues from the database).
    /// [`WorkerBuilder::keep_queues_on_stop`](crate::WorkerBuilder::keep_queues_on_stop)
    /// keeps them.
    /// Errors only if the broker fails at startup.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        let Self {
            settings,
            conn,
            handlers,
            pool,
            load,
            reporting,
            shipper,
            stop_poll,
            tasks,
            deregister: delete_queues,
        } = self;
        let id = conn.id.clone();
        let conn_broker = Arc::clone(&conn.broker);
        metrics::register();
        pool.report();
        conn.broker.worker_queue_declare(&id).await?;
        tracing::info!(worker_id = %id, capacity = settings.capacity, buffer = settings.buffer, "worker started");
        let beats_stop = CancellationToken::new();
        let sources = Sources {
            conn: Arc::clone(&conn),
            pool: Arc::clone(&pool),
            load: Arc::clone(&load),
            handlers: handlers.names(),
            group: settings.group.clone(),
            dispatch_batch: settings.dispatch_batch,
            immediate_queue: settings.immediate_queue,
        };
        let beats = tasks.spawn(
            "heartbeats",
            heartbeat::run(sources, settings.heartbeat_every, beats_stop.clone()),
        );
        let stop_watch = tasks.spawn(
            "stop watcher",
            stops::run(
                id.clone(),
                Arc::clone(&conn.coord),
                Arc::clone(&pool),
                stop_poll,
                beats_stop.clone(),
            ),
        );
        let shipper = tasks.spawn("log shipper", shipper.run(beats_stop.clone()));

        let attempts = Attempts {
            conn,
            results: reporting.results,
            executor: Executor {
                handlers,
                pool: Arc::clone(&pool),
                load: Arc::clone(&load),
                logs: reporting.logs,
            },
            attempt_key_ttl: settings.attempt_key_ttl,
        };
        consume::run(
            Arc::new(attempts),
            settings.immediate_queue,
            &tasks,
            shutdown,
        )
        .await;

        let grace = settings.grace_period;
        load.set_state(WorkerState::Draining);
        pool.tasks.close();
        tracing::info!(worker_id = %id, in_flight = pool.tasks.len(), grace = ?grace, "worker draining");
        if tokio::time::timeout(grace, pool.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!(worker_id = %id, unfinished = pool.tasks.len(), "grace period over; stopping handlers still running and reporting them failed");
            pool.hard_stop.cancel();
            pool.tasks.wait().await;
        }
        load.set_state(WorkerState::Offline);
        beats_stop.cancel();
        if let Err(e) = beats.await {
            tracing::error!(worker_id = %id, "heartbeat task failed: {e}");
        }
        if let Err(e) = stop_watch.await {
            tracing::error!(worker_id = %id, "stop watcher failed: {e}");
        }
        if let Err(e) = shipper.await {
            tracing::error!(worker_id = %id, "log shipper failed: {e}");
        }
        if delete_queues {
            deregister(conn_broker.as_ref(), &id).await;
        }
        tracing::info!(worker_id = %id, "worker stopped");
        Ok(())
    }
}

/// Deletes the worker's queues once it said `offline`. Every worker id gets
/// queues of its own, and on Kubernetes every pod is a new id: left behind,
/// a rollout's worth of queues would stay on the broker for good. Dispatches
/// still queued there were for attempts this worker never started; the
/// dispatcher requeues those from the database once it sees the worker
/// offline. If the delete fails, the reaper deletes the queues later.
async fn deregister(broker: &dyn Broker, id: &str) {
    match broker.worker_queue_delete(id).await {
        Ok(()) => tracing::info!(worker_id = %id, "deleted this worker's queues"),
        Err(e) => {
            tracing::warn!(worker_id = %id, "cannot delete this worker's queues: {e}; the dispatcher's reaper will")
        }
    }
}
