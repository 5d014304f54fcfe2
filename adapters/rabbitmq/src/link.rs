//! The connection behind an [`super::AmqpBroker`]: one lapin connection with
//! its publishing channels and declared topology, replaced lazily (by the next
//! call) when it breaks, with every wait bounded.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{AMQPValue, FieldTable};
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties, ErrorKind, ExchangeKind};
use tracing::{info, warn};

use super::QueueType;
use super::publish::Publishers;
use super::{OP_TIMEOUT, short};
use kairos_core::broker::{BrokerError, BrokerResult};
use kairos_core::protocol::HEARTBEAT_TTL;
use kairos_core::protocol::Names;

/// Bound on opening a connection and declaring the topology.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed reconnect, calls fail at once for this long instead of
/// each trying again (an outage must not turn into a connection storm).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// AMQP heartbeat unless the URL sets one: a silently dead peer is noticed
/// within two intervals instead of RabbitMQ's default of minutes.
const HEARTBEAT_SECS: u16 = 15;

/// Owns the current [`Link`] and replaces it when it breaks.
pub(super) struct LinkHandle {
    uri: AMQPUri,
    props: ConnectionProperties,
    shown: Arc<str>,
    names: Names,
    queue_type: QueueType,
    current: RwLock<Arc<Link>>,
    /// Serialises reconnects; holds the last failure and when it happened.
    reconnect: tokio::sync::Mutex<Option<(Instant, String)>>,
}

impl LinkHandle {
    pub(super) async fn connect(
        url: &str,
        names: Names,
        queue_type: QueueType,
    ) -> BrokerResult<LinkHandle> {
        let shown: Arc<str> = kairos_core::redact::redact_url(url).into();
        let mut uri: AMQPUri = url
            .parse()
            .map_err(|e| BrokerError::Unavailable(format!("invalid RabbitMQ URL {shown}: {e}")))?;
        if uri.query.heartbeat.is_none() {
            uri.query.heartbeat = Some(HEARTBEAT_SECS);
        }
        let props = ConnectionProperties::default().with_connection_name(names.namespace().into());
        let link = Link::open(&uri, &props, &shown, &names, queue_type).await?;
        Ok(LinkHandle {
            uri,
            props,
            shown,
            names,
            queue_type,
            current: RwLock::new(Arc::new(link)),
            reconnect: tokio::sync::Mutex::new(None),
        })
    }

    pub(super) fn shown_url(&self) -> &str {
        &self.shown
    }

    fn current(&self) -> Arc<Link> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The working link, reconnecting first if the current one broke.
    pub(super) async fn get(&self) -> BrokerResult<Arc<Link>> {
        let link = self.current();
        if link.is_usable() {
            return Ok(link);
        }
        let wait = CONNECT_TIMEOUT * 2;
        let Ok(mut last_failure) = tokio::time::timeout(wait, self.reconnect.lock()).await else {
            return Err(BrokerError::Unavailable(format!(
                "RabbitMQ at {} is still reconnecting after {wait:?}",
                self.shown
            )));
        };
        let link = self.current();
        if link.is_usable() {
            return Ok(link);
        }
        if let Some((at, why)) = last_failure.as_ref()
            && at.elapsed() < RETRY_AFTER
        {
            return Err(BrokerError::Unavailable(why.clone()));
        }
        warn!(url = %self.shown, "RabbitMQ connection broken; reconnecting");
        match Link::open(
            &self.uri,
            &self.props,
            &self.shown,
            &self.names,
            self.queue_type,
        )
        .await
        {
            Ok(fresh) => {
                let fresh = Arc::new(fresh);
                let old = std::mem::replace(
                    &mut *self.current.write().unwrap_or_else(PoisonError::into_inner),
                    fresh.clone(),
                );
                old.shut_down();
                *last_failure = None;
                info!(url = %self.shown, "RabbitMQ reconnected");
                Ok(fresh)
            }
            Err(e) => {
                *last_failure = Some((Instant::now(), e.to_string()));
                Err(e)
            }
        }
    }
}

/// One connection, its publishing channels and the shared topology.
pub(super) struct Link {
    conn: Connection,
    publishers: Publishers,
    /// Set when the topology was found missing, so the next call replaces
    /// the link and redeclares it.
    poisoned: AtomicBool,
    shown: Arc<str>,
}

impl Link {
    async fn open(
        uri: &AMQPUri,
        props: &ConnectionProperties,
        shown: &Arc<str>,
        names: &Names,
        queue_type: QueueType,
    ) -> BrokerResult<Link> {
        let connect = Connection::connect_uri(uri.clone(), props.clone());
        let conn = match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                return Err(BrokerError::Unavailable(format!(
                    "cannot connect to RabbitMQ at {shown}: {e}"
                )));
            }
            Err(_) => {
                return Err(BrokerError::Unavailable(format!(
                    "cannot connect to RabbitMQ at {shown}: timed out after {CONNECT_TIMEOUT:?}"
                )));
            }
        };
        let link = Link {
            conn,
            publishers: Publishers::default(),
            poisoned: AtomicBool::new(false),
            shown: shown.clone(),
        };
        link.declare_topology(names, queue_type).await?;
        Ok(link)
    }

    async fn declare_topology(&self, names: &Names, queue_type: QueueType) -> BrokerResult<()> {
        let ch = self.temp_channel().await?;
        let durable = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        let exchanges = [
            (names.dispatch_exchange(), ExchangeKind::Direct),
            (names.reroute_exchange(), ExchangeKind::Fanout),
        ];
        for (name, kind) in exchanges {
            let op = ch.exchange_declare(short(&name)?, kind, durable, FieldTable::default());
            self.bounded("exchange.declare", op).await?;
        }
        let mut heartbeat_args = FieldTable::default();
        let ttl_ms = i32::try_from(HEARTBEAT_TTL.as_millis()).unwrap_or(i32::MAX);
        heartbeat_args.insert("x-message-ttl".into(), AMQPValue::LongInt(ttl_ms));
        let queues = [
            (names.reroute_queue(), FieldTable::default()),
            (names.results_queue(), FieldTable::default()),
            (names.heartbeats_queue(), heartbeat_args),
            (names.logs_queue(), FieldTable::default()),
        ];
        for (name, mut args) in queues {
            if queue_type == QueueType::Quorum {
                // Replicated across the cluster (Raft); RabbitMQ's choice for
                // data safety. A queue cannot change type once declared.
                args.insert(
                    "x-queue-type".into(),
                    AMQPValue::LongString("quorum".into()),
                );
            }
            let op = ch.queue_declare(short(&name)?, QueueDeclareOptions::durable(), args);
            self.bounded("queue.declare", op).await?;
        }
        let op = ch.queue_bind(
            short(&names.reroute_queue())?,
            short(&names.reroute_exchange())?,
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        );
        self.bounded("queue.bind", op).await
    }

    /// Connected, with the topology in place as far as we know.
    fn is_usable(&self) -> bool {
        self.conn.status().connected() && !self.poisoned.load(Ordering::Relaxed)
    }

    /// Marks the link for replacement by the next call.
    pub(super) fn poison(&self) {
        self.poisoned.store(true, Ordering::Relaxed);
    }

    /// Closes a replaced connection, so consumers still on it end their
    /// streams and re-consume on the new one.
    fn shut_down(self: Arc<Self>) {
        if !self.conn.status().connected() {
            return;
        }
        tokio::spawn(async move {
            let close = self
                .conn
                .close(200, "kairos: replaced by a new connection".into());
            let _ = tokio::time::timeout(OP_TIMEOUT, close).await;
        });
    }

    pub(super) fn publishers(&self) -> &Publishers {
        &self.publishers
    }

    /// A fresh channel; it closes itself when dropped.
    pub(super) async fn temp_channel(&self) -> BrokerResult<Channel> {
        self.bounded("channel.open", self.conn.create_channel())
            .await
    }

    /// Awaits a lapin call within [`OP_TIMEOUT`], keeping its own error apart
    /// so the caller can tell "not found" from a broken link.
    pub(super) async fn bounded_raw<T>(
        &self,
        what: &str,
        op: impl Future<Output = lapin::Result<T>>,
    ) -> BrokerResult<lapin::Result<T>> {
        tokio::time::timeout(OP_TIMEOUT, op).await.map_err(|_| {
            BrokerError::Unavailable(format!(
                "{what} on RabbitMQ at {} timed out after {OP_TIMEOUT:?}",
                self.shown
            ))
        })
    }

    /// Awaits a lapin call within [`OP_TIMEOUT`], mapping its error.
    pub(super) async fn bounded<T>(
        &self,
        what: &str,
        op: impl Future<Output = lapin::Result<T>>,
    ) -> BrokerResult<T> {
        self.bounded_raw(what, op)
            .await?
            .map_err(|e| self.unavailable(what, &e))
    }

    /// Maps a lapin error: the broker refusing the request (a channel-level
    /// error such as 404 or 406) is [`BrokerError::Refused`]; anything else
    /// means the link is not working.
    pub(super) fn unavailable(&self, what: &str, e: &lapin::Error) -> BrokerError {
        let text = format!("{what} on RabbitMQ at {}: {e}", self.shown);
        match e.kind() {
            ErrorKind::ProtocolError(p) if matches!(p.kind(), AMQPErrorKind::Soft(_)) => {
                BrokerError::Refused(text)
            }
            _ => BrokerError::Unavailable(text),
        }
    }

    pub(super) fn shown(&self) -> &str {
        &self.shown
    }
}

/// Whether the broker answered 404 (no such queue or exchange).
/// A declare whose arguments differ from the existing queue's (406).
pub(super) fn is_precondition_failed(e: &lapin::Error) -> bool {
    matches!(e.kind(), ErrorKind::ProtocolError(p)
        if matches!(p.kind(), AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)))
}

pub(super) fn is_not_found(e: &lapin::Error) -> bool {
    matches!(e.kind(), ErrorKind::ProtocolError(p)
        if matches!(p.kind(), AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND)))
}
