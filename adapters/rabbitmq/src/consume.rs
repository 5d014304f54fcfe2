//! Consumers: one channel per consume call with its own prefetch; deliveries
//! mapped to the port's [`Delivery`], settled through [`AmqpAcker`].

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_trait::async_trait;
use futures::Stream;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, BasicRejectOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Consumer};
use tracing::warn;

use super::OP_TIMEOUT;
use super::link::Link;
use super::short;
use kairos_core::broker::{Acker, BrokerError, BrokerResult, Delivery, DeliveryStream};
use kairos_core::protocol::Names;

/// Starts a manual-ack consumer of `queue` on a new channel. `reroute` names
/// are given for the reroute queue, whose deliveries say which worker's
/// queue dead-lettered them.
pub(super) async fn open(
    link: &Link,
    queue: &str,
    prefetch: u16,
    reroute: Option<Names>,
) -> BrokerResult<DeliveryStream> {
    let queue_name = short(queue)?;
    let channel = link.temp_channel().await?;
    let qos = channel.basic_qos(prefetch, BasicQosOptions::default());
    link.bounded("basic.qos", qos).await?;
    let consume = channel.basic_consume(
        queue_name,
        "".into(),
        BasicConsumeOptions::default(),
        FieldTable::default(),
    );
    let consumer = link.bounded("basic.consume", consume).await?;
    Ok(Box::pin(AmqpStream {
        consumer: Some(consumer),
        _channel: channel,
        reroute,
        queue: queue.to_string(),
        shown: link.shown().into(),
    }))
}

/// The stream of one consumer. Dropping it cancels the consumer and closes
/// its channel (lapin does both on drop), so RabbitMQ requeues whatever it
/// left unacked.
struct AmqpStream {
    /// `None` once the stream has ended.
    consumer: Option<Consumer>,
    /// Kept so the channel lives exactly as long as the stream.
    _channel: Channel,
    reroute: Option<Names>,
    queue: String,
    shown: Arc<str>,
}

impl Stream for AmqpStream {
    type Item = Delivery;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Delivery>> {
        let this = &mut *self;
        let Some(consumer) = this.consumer.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(consumer).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(d))) => {
                let rejected_by = this
                    .reroute
                    .as_ref()
                    .and_then(|names| rejected_by(&d.properties, names));
                let traceparent = traceparent(&d.properties);
                Poll::Ready(Some(Delivery {
                    payload: d.data,
                    redelivered: d.redelivered,
                    rejected_by,
                    traceparent,
                    acker: Box::new(AmqpAcker {
                        acker: d.acker,
                        shown: this.shown.clone(),
                    }),
                }))
            }
            Poll::Ready(Some(Err(e))) => {
                warn!(queue = %this.queue, error = %e, "RabbitMQ consumer broke; stream ends");
                this.consumer = None;
                Poll::Ready(None)
            }
            Poll::Ready(None) => {
                this.consumer = None;
                Poll::Ready(None)
            }
        }
    }
}

/// Settles one RabbitMQ delivery. Acks of many deliveries may run at once.
struct AmqpAcker {
    acker: lapin::Acker,
    shown: Arc<str>,
}

impl AmqpAcker {
    async fn settle(
        &self,
        what: &str,
        op: impl Future<Output = lapin::Result<bool>>,
    ) -> BrokerResult<()> {
        match tokio::time::timeout(OP_TIMEOUT, op).await {
            Ok(Ok(true)) => Ok(()),
            // lapin answers `false` when the channel already closed (the
            // broker has requeued the message) or the delivery was settled.
            Ok(Ok(false)) => Err(BrokerError::Unavailable(format!(
                "{what} on RabbitMQ at {}: the delivery's channel is gone or it was already settled",
                self.shown
            ))),
            Ok(Err(e)) => Err(BrokerError::Unavailable(format!(
                "{what} on RabbitMQ at {}: {e}",
                self.shown
            ))),
            Err(_) => Err(BrokerError::Unavailable(format!(
                "{what} on RabbitMQ at {} timed out after {OP_TIMEOUT:?}",
                self.shown
            ))),
        }
    }
}

#[async_trait]
impl Acker for AmqpAcker {
    async fn ack(&self) -> BrokerResult<()> {
        self.settle("basic.ack", self.acker.ack(BasicAckOptions::default()))
            .await
    }

    async fn reject(&self, requeue: bool) -> BrokerResult<()> {
        let op = self.acker.reject(BasicRejectOptions { requeue });
        self.settle("basic.reject", op).await
    }
}

/// The worker whose queue dead-lettered a message: the `queue` of the first
/// (most recent) `x-death` entry, mapped back to a worker id.
/// The `traceparent` header, if the publisher set one.
fn traceparent(props: &BasicProperties) -> Option<String> {
    match props
        .headers()
        .as_ref()?
        .inner()
        .get(super::publish::TRACEPARENT)?
    {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

fn rejected_by(props: &BasicProperties, names: &Names) -> Option<String> {
    let headers = props.headers().as_ref()?;
    let AMQPValue::FieldArray(deaths) = headers.inner().get("x-death")? else {
        return None;
    };
    let AMQPValue::FieldTable(latest) = deaths.as_slice().first()? else {
        return None;
    };
    let queue = match latest.inner().get("queue")? {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        _ => return None,
    };
    names.worker_of_queue(&queue).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::FieldArray;

    #[test]
    fn rejected_by_reads_the_latest_death() {
        let names = Names::new("ns");
        let death = |queue: &str| {
            let mut t = FieldTable::default();
            t.insert("queue".into(), AMQPValue::LongString(queue.into()));
            t.insert("reason".into(), AMQPValue::LongString("rejected".into()));
            AMQPValue::FieldTable(t)
        };
        let mut headers = FieldTable::default();
        headers.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![
                death("ns.worker.w2"),
                death("ns.worker.w1"),
            ])),
        );
        let props = BasicProperties::default().with_headers(headers);
        assert_eq!(rejected_by(&props, &names).as_deref(), Some("w2"));
        assert_eq!(rejected_by(&BasicProperties::default(), &names), None);
        let mut other = FieldTable::default();
        other.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![death("elsewhere.q")])),
        );
        let props = BasicProperties::default().with_headers(other);
        assert_eq!(rejected_by(&props, &names), None);
    }
}
