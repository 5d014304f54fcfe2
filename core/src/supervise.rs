//! Long-lived tasks: one consumer loop that reopens its stream with backoff and
//! jitter, and one way to spawn a task whose panic stops the process.
//!
//! Every process runs a handful of loops that consume a stream for as long as
//! the process lives (results, heartbeats, reroutes, dispatches, due signals).
//! Their streams end whenever a connection drops; [`consume`] reopens them
//! with the same backoff and the same log lines everywhere.
//!
//! A panic in such a task used to end only that task: the process kept
//! running, healthy-looking, without consuming results. [`spawn_critical`]
//! turns that into an exit with [`EXIT_TASK_PANICKED`], so a supervisor
//! (systemd, Kubernetes, compose) restarts a process that is whole.
//!
//! A task that *returns* while its process should still run is as bad and
//! cannot be turned into an exit as bluntly (it may be the shutdown that
//! ended it). [`CriticalTasks`] remembers which of a process's tasks have
//! ended, so its `/readyz` stops answering ready.

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::{FutureExt, Stream, StreamExt};
use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Exit status of a process whose long-lived task panicked (`EX_SOFTWARE`).
pub const EXIT_TASK_PANICKED: i32 = 70;

/// Spawns `task`, which is meant to live as long as the process; if it
/// panics, the panic is logged and the process exits with
/// [`EXIT_TASK_PANICKED`] rather than run on without it.
pub fn spawn_critical<F>(name: &'static str, task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(async move {
        match AssertUnwindSafe(task).catch_unwind().await {
            Ok(out) => out,
            Err(panic) => {
                let why = panic_message(panic.as_ref());
                tracing::error!(task = name, panic = %why, "a long-lived task panicked; stopping the process so it can be restarted whole");
                std::process::exit(EXIT_TASK_PANICKED);
            }
        }
    })
}

/// The long-lived tasks of one process, for its readiness: each is spawned
/// as [`spawn_critical`] spawns it, and its name is remembered once it ends
/// (returned, or was dropped unfinished). A process whose tasks have not
/// all ended is ready as far as they go; one that lost a task is not, and
/// says which. During shutdown every task ends, and unready is then what a
/// load balancer should see anyway. Cheap to clone; clones share the set.
#[derive(Debug, Clone, Default)]
pub struct CriticalTasks {
    ended: Arc<Mutex<Vec<&'static str>>>,
}

impl CriticalTasks {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Spawns `task` with [`spawn_critical`] and watches it.
    pub fn spawn<F>(&self, name: &'static str, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Dropped when the task returns or is dropped unfinished (aborted,
        // runtime shut down); a panic exits the process before it matters.
        let watch = EndWatch {
            name,
            ended: self.ended.clone(),
        };
        spawn_critical(name, async move {
            let _watch = watch;
            task.await
        })
    }

    /// The names of the tasks that have ended, in the order they did.
    pub fn ended(&self) -> Vec<&'static str> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `Ok` while every watched task runs; otherwise which ones ended, as a
    /// readiness check reports it.
    pub fn check(&self) -> Result<(), String> {
        let ended = self.ended();
        if ended.is_empty() {
            return Ok(());
        }
        Err(format!(
            "long-lived task(s) ended: {}; restart the process",
            ended.join(", ")
        ))
    }
}

/// Records its task's end in a [`CriticalTasks`] when dropped.
struct EndWatch {
    name: &'static str,
    ended: Arc<Mutex<Vec<&'static str>>>,
}

impl Drop for EndWatch {
    fn drop(&mut self) {
        self.ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.name);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_string())
}

/// Bounds of the delay between two attempts to open a stream.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// First delay after a failure.
    pub min: Duration,
    /// Largest delay; reached after a few failures in a row.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            min: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// Delays growing from `min` to `max`, each with up to 100 % jitter so
    /// processes that lost the same connection do not come back in step.
    fn delays(self) -> impl Iterator<Item = Duration> {
        ExponentialBuilder::default()
            .with_min_delay(self.min)
            .with_max_delay(self.max)
            .with_jitter()
            .without_max_times()
            .build()
    }
}

/// A stream a long-lived loop consumes, and what it does with each item.
pub trait Subscription: Send {
    /// What the stream yields.
    type Item: Send;
    /// The stream; it ends when its connection is lost.
    type Stream: Stream<Item = Self::Item> + Unpin + Send;
    /// Why opening failed.
    type Error: Display + Send;
    /// Opens (declares, subscribes to) the stream.
    fn open(&mut self) -> impl Future<Output = Result<Self::Stream, Self::Error>> + Send;
    /// Handles one item. Runs to completion even if `stop` is cancelled
    /// meanwhile; long waits inside should watch the token themselves.
    fn handle(&mut self, item: Self::Item) -> impl Future<Output = ()> + Send;
}

/// Consumes `sub` until `stop` is cancelled: opens the stream, handles every
/// item, and when the stream fails to open or ends, waits a backoff and opens
/// it again. The backoff starts over once an item has arrived.
pub async fn consume<S: Subscription>(
    what: &'static str,
    mut sub: S,
    backoff: Backoff,
    stop: &CancellationToken,
) {
    let mut delays = backoff.delays();
    while !stop.is_cancelled() {
        let opened = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            s = sub.open() => s,
        };
        let wait = delays.next().unwrap_or(backoff.max);
        match opened {
            Ok(mut stream) => loop {
                let next = tokio::select! {
                    biased;
                    _ = stop.cancelled() => return,
                    item = stream.next() => item,
                };
                let Some(item) = next else {
                    tracing::warn!(task = what, retry_in = ?wait, "stream ended (connection lost or consumer cancelled); reopening");
                    break;
                };
                delays = backoff.delays();
                sub.handle(item).await;
            },
            Err(e) => {
                tracing::warn!(task = what, error = %e, retry_in = ?wait, "cannot open the stream; retrying");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream::{self, BoxStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Fails to open once, then yields two items and ends, forever.
    struct Flaky {
        opens: Arc<AtomicU32>,
        seen: Arc<AtomicU32>,
        stop_after: u32,
        stop: CancellationToken,
    }

    impl Subscription for Flaky {
        type Item = u32;
        type Stream = BoxStream<'static, u32>;
        type Error = &'static str;

        async fn open(&mut self) -> Result<Self::Stream, Self::Error> {
            if self.opens.fetch_add(1, Ordering::SeqCst) == 0 {
                return Err("refused");
            }
            Ok(stream::iter([1, 2]).boxed())
        }

        async fn handle(&mut self, _item: u32) {
            if self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.stop_after {
                self.stop.cancel();
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reopens_after_a_failure_and_after_the_stream_ends() {
        let stop = CancellationToken::new();
        let opens = Arc::new(AtomicU32::new(0));
        let seen = Arc::new(AtomicU32::new(0));
        let sub = Flaky {
            opens: opens.clone(),
            seen: seen.clone(),
            stop_after: 6,
            stop: stop.clone(),
        };
        consume("test", sub, Backoff::default(), &stop).await;
        // One refused open, then three streams of two items each.
        assert_eq!(seen.load(Ordering::SeqCst), 6);
        assert_eq!(opens.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn delays_grow_to_the_cap_with_jitter() {
        let b = Backoff {
            min: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let delays: Vec<Duration> = b.delays().take(12).collect();
        assert!(delays[0] >= b.min && delays[0] <= b.min * 2, "{delays:?}");
        assert!(delays.iter().all(|d| *d <= b.max * 2), "{delays:?}");
        assert!(delays[11] >= b.max, "{delays:?}");
    }

    #[tokio::test]
    async fn a_critical_task_returns_its_output() {
        assert_eq!(spawn_critical("t", async { 7 }).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn a_watched_task_that_returns_makes_the_set_unready() {
        let tasks = CriticalTasks::new();
        let stop = CancellationToken::new();
        let lasting = tasks.spawn("lasting", stop.clone().cancelled_owned());
        let brief = tasks.spawn("brief", async { 7 });
        assert_eq!(brief.await.unwrap(), 7);
        assert_eq!(tasks.ended(), ["brief"]);
        let why = tasks.check().unwrap_err();
        assert!(why.contains("brief") && !why.contains("lasting"), "{why}");
        stop.cancel();
        lasting.await.unwrap();
        assert_eq!(tasks.clone().ended(), ["brief", "lasting"]);
    }

    #[tokio::test]
    async fn a_set_whose_tasks_all_run_is_ready() {
        let tasks = CriticalTasks::new();
        assert_eq!(tasks.check(), Ok(()));
        let running = tasks.spawn("loop", std::future::pending::<()>());
        tokio::task::yield_now().await;
        assert_eq!(tasks.check(), Ok(()));
        // An aborted task has ended too.
        running.abort();
        assert!(running.await.unwrap_err().is_cancelled());
        assert_eq!(tasks.ended(), ["loop"]);
    }

    #[test]
    fn panic_messages_are_read_from_str_and_string() {
        let s: Box<dyn std::any::Any + Send> = Box::new("boom");
        assert_eq!(panic_message(s.as_ref()), "boom");
        let s: Box<dyn std::any::Any + Send> = Box::new(String::from("bang"));
        assert_eq!(panic_message(s.as_ref()), "bang");
    }
}
