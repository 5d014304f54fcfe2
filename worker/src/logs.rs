//! Execution logs: what handlers write through [`crate::JobContext::log`] and
//! [`crate::JobContext::progress`], batched per attempt and published to the
//! logs queue in the background. A handler never waits for the broker: when
//! the queue of unsent lines is full, lines are dropped (and counted).

use backon::{ExponentialBuilder, Retryable};
use kairos_core::broker::Broker;
use kairos_core::protocol::{LogLevel, LogLine, LogMsg, PROTOCOL_VERSION};
use kairos_core::time::now_ms;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Lines waiting to be sent before new ones are dropped.
const QUEUE: usize = 10_000;
/// How often buffered lines are sent.
const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Buffered lines that trigger a send before the timer.
const FLUSH_LINES: usize = 500;
/// Lines per message.
const MAX_LINES_PER_MSG: usize = 500;
/// Publish tries per message (logs are best effort; results are not).
const PUBLISH_TRIES: usize = 3;
/// The wait after the first failed publish; it doubles after each one.
const RETRY_DELAY: Duration = Duration::from_millis(100);

enum Entry {
    Line(String, u32, LogLine),
    Progress(String, u32, f64),
    /// Send what is buffered for this attempt now, then answer.
    Flush(String, u32, oneshot::Sender<()>),
}

/// Where a context's lines go. Cheap to clone.
#[derive(Clone)]
pub(crate) struct LogSink {
    tx: Option<mpsc::Sender<Entry>>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSink")
            .field("connected", &self.tx.is_some())
            .finish()
    }
}

impl LogSink {
    /// A sink that drops everything (contexts made outside a worker).
    pub(crate) fn silent() -> Self {
        Self {
            tx: None,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    fn send(&self, entry: Entry) {
        if let Some(tx) = &self.tx
            && tx.try_send(entry).is_err()
        {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(
                    dropped = n + 1,
                    "execution log lines dropped: the logs queue cannot keep up"
                );
            }
        }
    }

    pub(crate) fn line(&self, execution_id: &str, attempt: u32, level: LogLevel, message: String) {
        let line = LogLine {
            at: now_ms(),
            level,
            message,
        };
        self.send(Entry::Line(execution_id.to_string(), attempt, line));
    }

    pub(crate) fn progress(&self, execution_id: &str, attempt: u32, percent: f64) {
        self.send(Entry::Progress(execution_id.to_string(), attempt, percent));
    }

    /// Sends what is buffered for the attempt, waiting at most `wait`: called
    /// when a handler ends, so its last lines are stored close to its result.
    pub(crate) async fn flush(&self, execution_id: &str, attempt: u32, wait: Duration) {
        let Some(tx) = &self.tx else { return };
        let (done, answered) = oneshot::channel();
        let entry = Entry::Flush(execution_id.to_string(), attempt, done);
        if tokio::time::timeout(wait, tx.send(entry)).await.is_ok() {
            let _ = tokio::time::timeout(wait, answered).await;
        }
    }
}

#[derive(Default)]
struct Pending {
    lines: Vec<LogLine>,
    progress: Option<f64>,
}

/// The background task that publishes what sinks collect.
pub(crate) struct Shipper {
    rx: mpsc::Receiver<Entry>,
    broker: Arc<dyn Broker>,
    worker_id: String,
    buffered: BTreeMap<(String, u32), Pending>,
    lines: usize,
}

/// A connected sink and the task that serves it.
pub(crate) fn channel(broker: Arc<dyn Broker>, worker_id: String) -> (LogSink, Shipper) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let sink = LogSink {
        tx: Some(tx),
        dropped: Arc::new(AtomicU64::new(0)),
    };
    let shipper = Shipper {
        rx,
        broker,
        worker_id,
        buffered: BTreeMap::new(),
        lines: 0,
    };
    (sink, shipper)
}

impl Shipper {
    /// Publishes batches until `stop`, then sends what is left and returns.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        let mut tick = tokio::time::interval(FLUSH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => self.flush_all().await,
                entry = self.rx.recv() => match entry {
                    Some(e) => self.take(e).await,
                    None => break,
                },
            }
            if self.lines >= FLUSH_LINES {
                self.flush_all().await;
            }
        }
        while let Ok(e) = self.rx.try_recv() {
            self.take(e).await;
        }
        self.flush_all().await;
    }

    async fn take(&mut self, entry: Entry) {
        match entry {
            Entry::Line(id, attempt, line) => {
                self.buffered
                    .entry((id, attempt))
                    .or_default()
                    .lines
                    .push(line);
                self.lines += 1;
            }
            Entry::Progress(id, attempt, p) => {
                self.buffered.entry((id, attempt)).or_default().progress = Some(p);
            }
            Entry::Flush(id, attempt, done) => {
                if let Some(p) = self.buffered.remove(&(id.clone(), attempt)) {
                    self.lines -= p.lines.len();
                    self.send(id, attempt, p).await;
                }
                let _ = done.send(());
            }
        }
    }

    async fn flush_all(&mut self) {
        let all = std::mem::take(&mut self.buffered);
        self.lines = 0;
        for ((id, attempt), p) in all {
            self.send(id, attempt, p).await;
        }
    }

    async fn send(&self, execution_id: String, attempt: u32, p: Pending) {
        let mut chunks: Vec<Vec<LogLine>> = p
            .lines
            .chunks(MAX_LINES_PER_MSG)
            .map(<[LogLine]>::to_vec)
            .collect();
        if chunks.is_empty() {
            chunks.push(Vec::new());
        }
        let last = chunks.len() - 1;
        for (i, lines) in chunks.into_iter().enumerate() {
            let msg = LogMsg {
                v: PROTOCOL_VERSION,
                execution_id: execution_id.clone(),
                attempt,
                worker_id: self.worker_id.clone(),
                lines,
                // The latest figure travels with the last chunk.
                progress: if i == last { p.progress } else { None },
            };
            if msg.lines.is_empty() && msg.progress.is_none() {
                continue;
            }
            self.publish(&msg).await;
        }
    }

    async fn publish(&self, msg: &LogMsg) {
        // Jittered, so workers cut off together do not all retry in step.
        let backoff = ExponentialBuilder::default()
            .with_min_delay(RETRY_DELAY)
            .with_max_times(PUBLISH_TRIES - 1)
            .with_jitter();
        let sent = (|| self.broker.log_publish(msg))
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .await;
        if let Err(e) = sent {
            tracing::warn!(
                execution_id = %msg.execution_id,
                lines = msg.lines.len(),
                "execution log lines not delivered: {e}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Flaky;
    use futures::StreamExt;
    use kairos_core::protocol::LogLevel;

    fn msg() -> LogMsg {
        LogMsg {
            v: PROTOCOL_VERSION,
            execution_id: "e".into(),
            attempt: 1,
            worker_id: "w".into(),
            lines: vec![LogLine {
                at: 1,
                level: LogLevel::Info,
                message: "hello".into(),
            }],
            progress: None,
        }
    }

    fn shipper_on(failures: u32) -> (Arc<Flaky>, Shipper) {
        let broker = Arc::new(Flaky::new("logs-retry", false, None));
        broker.log_failures.store(failures, Ordering::SeqCst);
        let (_sink, shipper) = channel(Arc::clone(&broker) as Arc<dyn Broker>, "w".into());
        (broker, shipper)
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_log_publish_is_retried() {
        let (broker, shipper) = shipper_on(PUBLISH_TRIES as u32 - 1);
        shipper.publish(&msg()).await;
        assert_eq!(broker.log_tries.load(Ordering::SeqCst), 3);
        let mut stream = broker.inner.logs_consume(10).await.unwrap();
        let d = stream.next().await.unwrap();
        assert_eq!(serde_json::from_slice::<LogMsg>(&d.payload).unwrap(), msg());
    }

    #[tokio::test(start_paused = true)]
    async fn log_lines_are_dropped_after_the_last_try() {
        let (broker, shipper) = shipper_on(10);
        shipper.publish(&msg()).await;
        assert_eq!(
            broker.log_tries.load(Ordering::SeqCst),
            PUBLISH_TRIES as u32,
            "best effort: a few tries, then the lines are dropped"
        );
    }
}
