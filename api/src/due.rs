//! The API's due notifier over a [`DueSignal`]: announces due times in the
//! background, and merges the announcements that pile up while one is being
//! sent, so a busy API sends a few signals per commit round, not one per job.
//!
//! Merging keeps what a signal means to the dispatcher: "scan by this time".
//! Every time already reached when the next send starts asks for the same
//! thing (scan now) and goes out as one signal, the latest of them. A time
//! still ahead goes out on its own, once however often it was announced, so
//! the dispatcher still wakes for it. The first announcement after a quiet
//! spell goes out at once: merging never delays a signal, it only drops the
//! ones another signal in the same send already covers. "Sweep now"
//! signals ([`Due::Pending`]) merge the same way: one per send at most.

use crate::DueNotifier;
use kairos_core::due::{Due, DueSignal};
use kairos_core::supervise::spawn_critical;
use kairos_core::time::{Millis, now_ms};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Distinct future due times held while a send is in flight; beyond this the
/// latest are dropped (a lost signal costs latency, never a trigger: the
/// dispatcher's periodic scan finds the job).
const MAX_FUTURE: usize = 1024;

/// Announcements waiting for the sender.
#[derive(Debug, Default)]
struct Waiting {
    /// Executions were left pending since the last send.
    pending: bool,
    /// The latest of the announced times that were already reached.
    reached: Option<Millis>,
    /// Announced times still ahead, each once.
    ahead: BTreeSet<Millis>,
    /// A sender task is running; it takes what is added meanwhile.
    sending: bool,
}

impl Waiting {
    fn add(&mut self, due: Due, now: Millis) {
        let at = match due {
            Due::Pending => {
                self.pending = true;
                return;
            }
            Due::At(at) => at,
        };
        if at <= now {
            self.reached = Some(self.reached.map_or(at, |r| r.max(at)));
        } else if self.ahead.len() < MAX_FUTURE || self.ahead.last().is_some_and(|l| at < *l) {
            self.ahead.insert(at);
            if self.ahead.len() > MAX_FUTURE {
                self.ahead.pop_last();
            }
        }
    }

    /// What to send now: the sweep, if asked, one signal for every time
    /// reached by `now`, then the times still ahead, earliest first.
    fn take(&mut self, now: Millis) -> Vec<Due> {
        let later = self.ahead.split_off(&(now + 1));
        let reached = std::mem::replace(&mut self.ahead, later);
        let latest_reached = reached
            .last()
            .copied()
            .into_iter()
            .chain(self.reached.take())
            .max();
        let sweep = std::mem::take(&mut self.pending).then_some(Due::Pending);
        sweep
            .into_iter()
            .chain(
                latest_reached
                    .into_iter()
                    .chain(std::mem::take(&mut self.ahead))
                    .map(Due::At),
            )
            .collect()
    }
}

/// A notifier that announces on `signal` in the background, merging as the
/// module says.
pub fn merging_notifier(signal: Arc<dyn DueSignal>) -> DueNotifier {
    let waiting = Arc::new(Mutex::new(Waiting::default()));
    Arc::new(move |due| {
        let mut w = waiting.lock().unwrap_or_else(|p| p.into_inner());
        w.add(due, now_ms());
        if !w.sending {
            w.sending = true;
            // A panic here would leave `sending` set and silence the signal
            // for good: it stops the process instead.
            spawn_critical(
                "due signal sender",
                send_waiting(waiting.clone(), signal.clone()),
            );
        }
    })
}

/// Sends what is waiting until nothing is; then stops, and the next
/// announcement starts a new sender.
async fn send_waiting(waiting: Arc<Mutex<Waiting>>, signal: Arc<dyn DueSignal>) {
    loop {
        let batch = {
            let mut w = waiting.lock().unwrap_or_else(|p| p.into_inner());
            let batch = w.take(now_ms());
            if batch.is_empty() {
                w.sending = false;
                return;
            }
            batch
        };
        for due in batch {
            signal.announce(due).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use futures::stream::BoxStream;
    use kairos_core::coord::CoordResult;
    use tokio::sync::{Semaphore, mpsc};

    /// A signal that holds each announcement until the test lets it through
    /// and reports what was sent.
    struct Gated {
        gate: Semaphore,
        sent: mpsc::UnboundedSender<Due>,
    }

    #[async_trait]
    impl DueSignal for Gated {
        async fn announce(&self, due: Due) {
            if let Ok(permit) = self.gate.acquire().await {
                permit.forget();
            }
            let _ = self.sent.send(due);
        }
        async fn subscribe(&self) -> CoordResult<BoxStream<'static, Due>> {
            Ok(Box::pin(futures::stream::empty()))
        }
    }

    /// A merging notifier over a gated signal, with `first` announced and
    /// held at the gate: what is announced next waits behind it.
    async fn one_in_flight(
        first: Millis,
    ) -> (Arc<Gated>, mpsc::UnboundedReceiver<Due>, DueNotifier) {
        let (sent, rx) = mpsc::unbounded_channel();
        let signal = Arc::new(Gated {
            gate: Semaphore::new(0),
            sent,
        });
        let notify = merging_notifier(signal.clone());
        notify(Due::At(first));
        tokio::task::yield_now().await;
        (signal, rx, notify)
    }

    #[tokio::test]
    async fn times_reached_while_a_signal_is_in_flight_go_out_as_one() {
        let now = now_ms();
        let (signal, mut sent, notify) = one_in_flight(now - 5).await;
        // The first one is being sent (held at the gate); these pile up.
        for i in 0..100 {
            notify(Due::At(now - 100 + i));
        }
        signal.gate.add_permits(10);
        assert_eq!(sent.recv().await, Some(Due::At(now - 5)));
        assert_eq!(
            sent.recv().await,
            Some(Due::At(now - 1)),
            "the latest reached time"
        );
        // Nothing else was sent, and a later announcement starts again.
        tokio::task::yield_now().await;
        assert!(sent.try_recv().is_err());
        notify(Due::At(now - 2));
        assert_eq!(sent.recv().await, Some(Due::At(now - 2)));
    }

    #[tokio::test]
    async fn times_ahead_each_go_out_once_in_order() {
        let now = now_ms();
        let (signal, mut sent, notify) = one_in_flight(now - 1).await;
        let (a, b) = (now + 60_000, now + 120_000);
        notify(Due::At(b));
        notify(Due::At(a));
        notify(Due::At(b));
        notify(Due::At(now - 3));
        signal.gate.add_permits(10);
        let got: Vec<Due> = vec![
            sent.recv().await.unwrap(),
            sent.recv().await.unwrap(),
            sent.recv().await.unwrap(),
            sent.recv().await.unwrap(),
        ];
        let want: Vec<Due> = [now - 1, now - 3, a, b].into_iter().map(Due::At).collect();
        assert_eq!(got, want);
        tokio::task::yield_now().await;
        assert!(sent.try_recv().is_err(), "b was announced twice, sent once");
    }

    #[test]
    fn a_time_ahead_that_has_been_reached_merges_with_the_rest() {
        let mut w = Waiting::default();
        w.add(Due::At(100), 50);
        w.add(Due::At(40), 50);
        w.add(Due::At(200), 50);
        // At 150 the first has been reached: one signal for both, then 200.
        assert_eq!(w.take(150), ats(&[100, 200]));
        assert!(w.take(150).is_empty());
    }

    #[test]
    fn the_earliest_times_ahead_are_kept_when_too_many_wait() {
        let mut w = Waiting::default();
        for i in 0..(MAX_FUTURE as Millis + 10) {
            w.add(Due::At(1_000 + (MAX_FUTURE as Millis + 10 - i)), 0);
        }
        let sent = w.take(0);
        assert_eq!(sent.len(), MAX_FUTURE);
        assert_eq!(sent.first(), Some(&Due::At(1_001)));
    }

    #[test]
    fn sweeps_asked_while_a_signal_is_in_flight_go_out_once_and_first() {
        let mut w = Waiting::default();
        w.add(Due::At(40), 50);
        w.add(Due::Pending, 50);
        w.add(Due::Pending, 50);
        assert_eq!(w.take(50), vec![Due::Pending, Due::At(40)]);
        assert!(w.take(50).is_empty(), "a sweep goes out once");
    }

    fn ats(times: &[Millis]) -> Vec<Due> {
        times.iter().copied().map(Due::At).collect()
    }
}
