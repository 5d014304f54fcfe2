//! Confirmed, mandatory publishing. Many publishes share a channel and their
//! confirms are awaited concurrently; only the instant a publish is numbered
//! and queued is serialised.
//!
//! Each route (exchange + routing key, i.e. each worker) gets its own
//! confirm-mode channel. RabbitMQ acks many publishes in one frame, and lapin
//! hands a returned (unroutable) message to whichever confirm of that frame it
//! settles first, not necessarily the one returned. On a channel of one route,
//! every publish of a frame shares one fate (the queue exists or not), so the
//! answer each caller gets is right; mixed on one channel, a publish to a live
//! worker could be told `Refused` and one to a missing worker `Ok`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Channel, Confirmation};

use super::link::{Link, is_not_found};
use super::short;
use kairos_core::broker::{BrokerError, BrokerResult};

/// Bound on waiting for a publisher confirm. Persistent messages are confirmed
/// after the broker writes them; this only catches a broker that went silent.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle route channels are closed once there are more than this many.
const MAX_ROUTE_CHANNELS: usize = 256;

/// A confirm-mode channel for one route. `order` makes "take the next confirm
/// number" and "queue the frames" one step: lapin numbers confirms when a
/// publish starts and RabbitMQ numbers them as frames arrive, so two publishes
/// interleaved between those points would swap confirms.
struct Publisher {
    channel: Channel,
    order: Mutex<()>,
}

/// The route channels of one connection.
#[derive(Default)]
pub(super) struct Publishers {
    by_route: Mutex<HashMap<String, Arc<Publisher>>>,
    /// One channel opened at a time, so a burst to a new route opens one.
    opening: tokio::sync::Mutex<()>,
}

impl Publishers {
    fn cached(&self, route: &str) -> Option<Arc<Publisher>> {
        let map = self.by_route.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(route)
            .filter(|p| p.channel.status().connected())
            .cloned()
    }

    async fn get(&self, link: &Link, route: &str) -> BrokerResult<Arc<Publisher>> {
        if let Some(p) = self.cached(route) {
            return Ok(p);
        }
        let _opening = self.opening.lock().await;
        if let Some(p) = self.cached(route) {
            return Ok(p);
        }
        let channel = link.temp_channel().await?;
        let op = channel.confirm_select(ConfirmSelectOptions::default());
        link.bounded("confirm.select", op).await?;
        let publisher = Arc::new(Publisher {
            channel,
            order: Mutex::new(()),
        });
        let mut map = self.by_route.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= MAX_ROUTE_CHANNELS {
            // Unused right now (only the map holds them): dropping closes them.
            map.retain(|_, p| Arc::strong_count(p) > 1);
        }
        map.insert(route.to_string(), publisher.clone());
        Ok(publisher)
    }
}

/// Publishes `body` with `mandatory` set and waits for the confirm. A message
/// no queue takes comes back as [`BrokerError::Refused`].
/// AMQP header carrying the W3C trace context.
pub(super) const TRACEPARENT: &str = "traceparent";
/// AMQP header carrying the W3C vendor trace state (dispatches of jobs whose
/// creator sent one).
pub(super) const TRACESTATE: &str = "tracestate";

/// `headers` are string AMQP headers (the trace context), none for most
/// messages.
pub(super) async fn publish(
    link: &Link,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    persistent: bool,
    headers: &[(&str, String)],
    priority: Option<u8>,
) -> BrokerResult<()> {
    let exchange_name = short(exchange)?;
    let key = short(routing_key)?;
    let mut props = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(if persistent { 2 } else { 1 });
    if let Some(p) = priority {
        props = props.with_priority(p);
    }
    if !headers.is_empty() {
        let mut table = lapin::types::FieldTable::default();
        for (name, value) in headers {
            table.insert(
                (*name).into(),
                lapin::types::AMQPValue::LongString(value.as_str().into()),
            );
        }
        props = props.with_headers(table);
    }
    let options = BasicPublishOptions {
        mandatory: true,
        immediate: false,
    };
    let route = format!("{exchange}\n{routing_key}");
    let publisher = link.publishers().get(link, &route).await?;
    let mut send = pin!(
        publisher
            .channel
            .basic_publish(exchange_name, key, options, body, props)
    );
    // lapin numbers the confirm and queues the frames in the first poll of
    // `basic_publish` (no await between the two), so holding `order` for that
    // poll alone keeps numbering and wire order the same without holding a
    // lock across any wait.
    let mut first = true;
    let sent = std::future::poll_fn(|cx| {
        if std::mem::take(&mut first) {
            let _order = publisher
                .order
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            return send.as_mut().poll(cx);
        }
        send.as_mut().poll(cx)
    });
    let confirm = link.bounded("basic.publish", sent).await?;
    let confirmation = match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            if is_not_found(&e) {
                // The exchange vanished under us: a new link redeclares it.
                link.poison();
            }
            return Err(link.unavailable("publisher confirm", &e));
        }
        Err(_) => {
            return Err(BrokerError::Unavailable(format!(
                "no publisher confirm from RabbitMQ at {} within {CONFIRM_TIMEOUT:?}",
                link.shown()
            )));
        }
    };
    match confirmation {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)) => {
            Err(BrokerError::Refused(format!(
                "no queue takes routing key {routing_key:?} on exchange {exchange:?}: {} {}",
                returned.reply_code, returned.reply_text
            )))
        }
        Confirmation::Nack(None) => Err(BrokerError::Refused(format!(
            "RabbitMQ nacked a message for {routing_key:?} on exchange {exchange:?}"
        ))),
        Confirmation::NotRequested => Err(BrokerError::Unavailable(
            "publishing channel lost confirm mode".into(),
        )),
    }
}
