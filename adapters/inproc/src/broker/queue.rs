//! One in-process queue: ready messages, consumers with the deliveries they
//! hold unacked, and the round-robin hand-out bounded by each prefetch.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Weak;
use tokio::sync::mpsc;
// Tokio's clock, so tests can pause time to see heartbeats expire.
use tokio::time::Instant;

use super::Shared;
use super::stream::MemoryAcker;
use kairos_core::broker::{Delivery, QueueStats};
use kairos_core::protocol::HEARTBEAT_TTL;

/// What a queue is for; decides dead-lettering and expiry.
#[derive(Debug, Clone)]
pub(super) enum QueueKind {
    /// A worker's dispatch queue: rejected messages go to the reroute queue.
    Worker(String),
    /// The reroute queue itself.
    Reroute,
    /// The results queue.
    Results,
    /// The execution logs queue.
    Logs,
    /// The heartbeat queue: messages expire after [`HEARTBEAT_TTL`].
    Heartbeats,
}

/// A message at rest.
#[derive(Debug, Clone)]
pub(super) struct Message {
    payload: Vec<u8>,
    pub(super) redelivered: bool,
    rejected_by: Option<String>,
    traceparent: Option<String>,
    /// Higher is delivered first, as from a RabbitMQ priority queue
    /// (worker queues; 0 elsewhere).
    priority: u8,
    /// For expiry; kept across requeues, as RabbitMQ does.
    enqueued: Instant,
}

impl Message {
    pub(super) fn new(payload: Vec<u8>, traceparent: Option<String>) -> Message {
        Message {
            payload,
            redelivered: false,
            rejected_by: None,
            traceparent,
            priority: 0,
            enqueued: Instant::now(),
        }
    }

    /// The message at `priority`.
    pub(super) fn with_priority(self, priority: u8) -> Message {
        Message { priority, ..self }
    }

    /// The copy the reroute queue receives when `worker` rejects it.
    pub(super) fn dead_lettered(self, worker: String) -> Message {
        Message {
            payload: self.payload,
            redelivered: false,
            rejected_by: Some(worker),
            traceparent: self.traceparent,
            priority: self.priority,
            enqueued: Instant::now(),
        }
    }
}

/// A consumer attached to a queue.
struct Consumer {
    id: u64,
    /// 0 means unlimited, as in AMQP.
    prefetch: u16,
    /// Delivered and not settled, by delivery tag (oldest first).
    unacked: BTreeMap<u64, Message>,
    tx: mpsc::UnboundedSender<Delivery>,
}

impl Consumer {
    fn has_room(&self) -> bool {
        self.prefetch == 0 || self.unacked.len() < usize::from(self.prefetch)
    }
}

/// One queue.
pub(super) struct Queue {
    name: String,
    kind: QueueKind,
    ready: VecDeque<Message>,
    consumers: Vec<Consumer>,
    /// Index of the consumer next in line, for round-robin.
    cursor: usize,
    next_tag: u64,
}

impl Queue {
    pub(super) fn new(name: String, kind: QueueKind) -> Queue {
        Queue {
            name,
            kind,
            ready: VecDeque::new(),
            consumers: Vec::new(),
            cursor: 0,
            next_tag: 0,
        }
    }

    pub(super) fn kind(&self) -> &QueueKind {
        &self.kind
    }

    /// Queues `msg` behind every ready message of its priority or a
    /// higher one (at the back when all share one: the usual case).
    pub(super) fn push_back(&mut self, msg: Message) {
        self.expire();
        let at = self
            .ready
            .iter()
            .rposition(|m| m.priority >= msg.priority)
            .map_or(0, |i| i + 1);
        self.ready.insert(at, msg);
    }

    pub(super) fn push_front(&mut self, msg: Message) {
        self.ready.push_front(msg);
    }

    pub(super) fn stats(&mut self) -> QueueStats {
        self.expire();
        QueueStats {
            messages: u32::try_from(self.ready.len()).unwrap_or(u32::MAX),
            consumers: u32::try_from(self.consumers.len()).unwrap_or(u32::MAX),
        }
    }

    pub(super) fn add_consumer(
        &mut self,
        id: u64,
        prefetch: u16,
    ) -> mpsc::UnboundedReceiver<Delivery> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.consumers.push(Consumer {
            id,
            prefetch,
            unacked: BTreeMap::new(),
            tx,
        });
        rx
    }

    /// Detaches a consumer; what it held goes back to the head of the queue,
    /// oldest first, marked redelivered.
    pub(super) fn remove_consumer(&mut self, id: u64) {
        let Some(pos) = self.consumers.iter().position(|c| c.id == id) else {
            return;
        };
        let consumer = self.consumers.remove(pos);
        for (_, mut msg) in consumer.unacked.into_iter().rev() {
            msg.redelivered = true;
            self.ready.push_front(msg);
        }
        if self.cursor > pos {
            self.cursor -= 1;
        }
        if self.cursor >= self.consumers.len() {
            self.cursor = 0;
        }
    }

    pub(super) fn take_unacked(&mut self, consumer: u64, tag: u64) -> Option<Message> {
        self.consumers
            .iter_mut()
            .find(|c| c.id == consumer)?
            .unacked
            .remove(&tag)
    }

    /// Hands ready messages to consumers with room, round-robin, until either
    /// runs out.
    pub(super) fn pump(&mut self, shared: &Weak<Shared>) {
        self.expire();
        while !self.ready.is_empty() && !self.consumers.is_empty() {
            let n = self.consumers.len();
            let Some(idx) = (0..n)
                .map(|i| (self.cursor + i) % n)
                .find(|&i| self.consumers[i].has_room())
            else {
                return;
            };
            self.cursor = (idx + 1) % n;
            let Some(msg) = self.ready.pop_front() else {
                return;
            };
            self.next_tag += 1;
            let tag = self.next_tag;
            let consumer = &mut self.consumers[idx];
            let delivery = Delivery {
                payload: msg.payload.clone(),
                redelivered: msg.redelivered,
                rejected_by: msg.rejected_by.clone(),
                traceparent: msg.traceparent.clone(),
                acker: Box::new(MemoryAcker::new(
                    shared.clone(),
                    self.name.clone(),
                    consumer.id,
                    tag,
                )),
            };
            if consumer.tx.send(delivery).is_ok() {
                consumer.unacked.insert(tag, msg);
            } else {
                // Its stream is being dropped: take the message back and the
                // consumer out, as the stream's own drop would.
                self.ready.push_front(msg);
                let id = consumer.id;
                self.remove_consumer(id);
            }
        }
    }

    /// Drops expired heartbeats from the head (where the oldest are).
    fn expire(&mut self) {
        if !matches!(self.kind, QueueKind::Heartbeats) {
            return;
        }
        while self
            .ready
            .front()
            .is_some_and(|m| m.enqueued.elapsed() > HEARTBEAT_TTL)
        {
            self.ready.pop_front();
        }
    }
}
