//! The broker port's semantics, one suite run against both adapters: the
//! in-process broker always, RabbitMQ when reachable (skip-or-fail policy of
//! `testkit`). Every test has its own namespace, so queues never collide, and
//! deletes what it declared on RabbitMQ when it ends, even by panic.

mod support;

use futures::{FutureExt, StreamExt};
use kairos_core::broker::{BrokerError, DispatchQueue, QueueStats};
use kairos_core::protocol::{
    DispatchMsg, HeartbeatMsg, LogLevel, LogLine, LogMsg, PROTOCOL_VERSION, ResultMsg,
};
use kairos_core::worker::WorkerState;
use support::{Fx, WAIT, decode, dispatch, next, result};

async fn round_trip(fx: &Fx) {
    let w = fx.worker("w").await;
    let msg = dispatch(7);
    fx.broker.dispatch_publish(&w, &msg).await.unwrap();
    let mut s = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    let d = next(&mut s).await;
    assert_eq!(decode(&d), msg);
    assert!(!d.redelivered);
    assert_eq!(d.rejected_by, None);
    assert_eq!(d.traceparent, None, "no trace for an id that is not a UUID");
    d.acker.ack().await.unwrap();
    // A dispatch carries its execution's trace context in a header, also
    // after a reject sends it to the reroute queue.
    let mut traced = dispatch(8);
    traced.execution_id = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into();
    let expected = kairos_core::trace::dispatch_traceparent(&traced).unwrap();
    assert!(
        expected.starts_with("00-0193a1b2c3d47e5f8a9b0c1d2e3f4a5b-"),
        "{expected}"
    );
    let mut reroute = fx.broker.reroute_consume(10).await.unwrap();
    fx.broker.dispatch_publish(&w, &traced).await.unwrap();
    let d = next(&mut s).await;
    assert_eq!(d.traceparent.as_deref(), Some(expected.as_str()));
    d.acker.reject(false).await.unwrap();
    let r = next(&mut reroute).await;
    assert_eq!(r.traceparent.as_deref(), Some(expected.as_str()));
    r.acker.ack().await.unwrap();
    // A job created in a caller's trace: the header continues that trace.
    let mut caller = traced.clone();
    caller.trace = kairos_core::trace::CallerTrace::from_headers(
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        None,
    );
    let expected = kairos_core::trace::dispatch_traceparent(&caller).unwrap();
    assert!(
        expected.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{expected}"
    );
    fx.broker.dispatch_publish(&w, &caller).await.unwrap();
    let d = next(&mut s).await;
    assert_eq!(d.traceparent.as_deref(), Some(expected.as_str()));
    assert_eq!(decode(&d), caller, "the trace travels in the body too");
    d.acker.ack().await.unwrap();
    drop(reroute);
    drop(s);
    // Had the ack not removed it, the consumer's departure would requeue it.
    fx.wait_stats(&w, 0, 0).await;
}

/// Several dispatches in one message arrive as one delivery holding all of
/// them, without a trace header (each has its own trace), and a refused
/// batch reaches the reroute queue whole.
async fn a_dispatch_batch_is_one_message(fx: &Fx) {
    let w = fx.worker("w").await;
    let mut batch = vec![dispatch(1), dispatch(2), dispatch(3)];
    batch[0].execution_id = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b".into();
    let mut s = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    let mut reroute = fx.broker.reroute_consume(10).await.unwrap();
    fx.broker.dispatch_publish_many(&w, &batch).await.unwrap();
    let d = next(&mut s).await;
    let got = kairos_core::protocol::decode_dispatches(&d.payload).unwrap();
    assert_eq!(got, batch);
    assert_eq!(d.traceparent, None, "a batch has no single trace");
    d.acker.reject(false).await.unwrap();
    let r = next(&mut reroute).await;
    assert_eq!(r.rejected_by.as_deref(), Some(w.as_str()));
    let rerouted = kairos_core::protocol::decode_dispatches(&r.payload).unwrap();
    assert_eq!(rerouted, batch);
    r.acker.ack().await.unwrap();
    drop(reroute);
    drop(s);
    fx.wait_stats(&w, 0, 0).await;
}

/// A worker's immediate queue: declared with its main one, consumed on its
/// own (a full main window does not hold it back), dead-lettering with the
/// worker named, counted in the worker's figures and deleted with it.
async fn the_immediate_queue_is_a_second_window(fx: &Fx) {
    let w = fx.worker("w").await;
    let mut main = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    let mut now = fx
        .broker
        .dispatch_consume_from(&w, DispatchQueue::Immediate, 1)
        .await
        .unwrap();
    let mut reroute = fx.broker.reroute_consume(10).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(1)).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(2)).await.unwrap();
    let held = next(&mut main).await;
    assert_eq!(decode(&held), dispatch(1));
    // The main window (1) is full, and dispatch 2 waits behind it...
    fx.wait_stats(&w, 1, 1).await;
    let mut urgent = dispatch(3);
    urgent.immediate = true;
    fx.broker
        .dispatch_publish_to(&w, DispatchQueue::Immediate, std::slice::from_ref(&urgent))
        .await
        .unwrap();
    // ...while the immediate queue delivers at once.
    let d = next(&mut now).await;
    assert_eq!(decode(&d), urgent);
    assert!(main.next().now_or_never().is_none());
    d.acker.reject(false).await.unwrap();
    let r = next(&mut reroute).await;
    assert_eq!(decode(&r), urgent);
    assert_eq!(r.rejected_by.as_deref(), Some(w.as_str()));
    r.acker.ack().await.unwrap();
    // Figures: ready messages of both queues, the larger consumer count.
    fx.broker
        .dispatch_publish_to(&w, DispatchQueue::Immediate, &[dispatch(4)])
        .await
        .unwrap();
    let waiting = next(&mut now).await;
    drop(waiting);
    drop(now);
    fx.wait_stats(&w, 2, 1).await;
    held.acker.ack().await.unwrap();
    drop(main);
    drop(reroute);
    fx.broker.worker_queue_delete(&w).await.unwrap();
    assert_eq!(fx.stats(&w).await, None);
    let gone = fx
        .broker
        .dispatch_publish_to(&w, DispatchQueue::Immediate, &[dispatch(5)])
        .await;
    assert!(matches!(gone, Err(BrokerError::Refused(_))), "{gone:?}");
}

async fn undeclared_worker_is_refused(fx: &Fx) {
    let nobody = format!("nobody-{}", fx.names.namespace());
    let err = fx.broker.dispatch_publish(&nobody, &dispatch(1)).await;
    assert!(matches!(err, Err(BrokerError::Refused(_))), "{err:?}");
    assert_eq!(fx.stats(&nobody).await, None);
    let consume = fx.broker.dispatch_consume(&nobody, 1).await;
    assert!(matches!(consume, Err(BrokerError::Refused(_))));
    // The broker stays usable after a refusal.
    let w = fx.worker("w").await;
    fx.broker.dispatch_publish(&w, &dispatch(2)).await.unwrap();
}

async fn reject_reroutes_and_requeue_returns(fx: &Fx) {
    let w = fx.worker("w").await;
    let mut s = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    let mut reroute = fx.broker.reroute_consume(10).await.unwrap();

    fx.broker.dispatch_publish(&w, &dispatch(1)).await.unwrap();
    let d = next(&mut s).await;
    d.acker.reject(false).await.unwrap();
    let r = next(&mut reroute).await;
    assert_eq!(decode(&r), dispatch(1));
    assert_eq!(r.rejected_by.as_deref(), Some(w.as_str()));
    r.acker.ack().await.unwrap();

    fx.broker.dispatch_publish(&w, &dispatch(2)).await.unwrap();
    let d = next(&mut s).await;
    assert!(!d.redelivered);
    d.acker.reject(true).await.unwrap();
    let again = next(&mut s).await;
    assert_eq!(decode(&again), dispatch(2));
    assert!(again.redelivered);
    again.acker.ack().await.unwrap();
}

async fn dropped_consumer_redelivers(fx: &Fx) {
    let w = fx.worker("w").await;
    fx.broker.dispatch_publish(&w, &dispatch(1)).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(2)).await.unwrap();
    let mut first = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    let held = next(&mut first).await;
    assert_eq!(decode(&held), dispatch(1));
    // An acker dropped unsettled keeps its message while the consumer lives.
    drop(held);
    fx.wait_stats(&w, 1, 1).await;
    assert!(first.next().now_or_never().is_none());

    drop(first);
    let mut second = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    let a = next(&mut second).await;
    let b = next(&mut second).await;
    let (one, two) = if decode(&a) == dispatch(1) {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(decode(&one), dispatch(1));
    assert!(
        one.redelivered,
        "the dropped consumer's message is a redelivery"
    );
    assert_eq!(decode(&two), dispatch(2));
    assert!(!two.redelivered);
    let (x, y) = futures::join!(one.acker.ack(), two.acker.ack());
    x.unwrap();
    y.unwrap();
}

async fn prefetch_bounds_unacked(fx: &Fx) {
    let w = fx.worker("w").await;
    for i in 0..5 {
        fx.broker.dispatch_publish(&w, &dispatch(i)).await.unwrap();
    }
    let mut s = fx.broker.dispatch_consume(&w, 2).await.unwrap();
    let d0 = next(&mut s).await;
    let d1 = next(&mut s).await;
    fx.wait_stats(&w, 3, 1).await;
    assert!(
        s.next().now_or_never().is_none(),
        "a third delivery before any ack"
    );

    d0.acker.ack().await.unwrap();
    let d2 = next(&mut s).await;
    fx.wait_stats(&w, 2, 1).await;
    let (a, b) = futures::join!(d1.acker.ack(), d2.acker.ack());
    a.unwrap();
    b.unwrap();
    let d3 = next(&mut s).await;
    let d4 = next(&mut s).await;
    let mut seen: Vec<u64> = [&d3, &d4]
        .iter()
        .map(|d| decode(d).scheduled_at as u64 - 1_760_000_000_000)
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, vec![3, 4], "FIFO order within one consumer");
    d3.acker.ack().await.unwrap();
    d4.acker.ack().await.unwrap();
    fx.wait_stats(&w, 0, 1).await;
}

async fn results_consumers_compete(fx: &Fx) {
    let a = fx.broker.results_consume(5).await.unwrap();
    let b = fx.broker.results_consume(5).await.unwrap();
    let msgs: Vec<ResultMsg> = (0..20).map(result).collect();
    let publishes = msgs
        .iter()
        .map(|m| fx.broker.results_publish(std::slice::from_ref(m)));
    for r in futures::future::join_all(publishes).await {
        r.unwrap();
    }
    let mut both = futures::stream::select(a.map(|d| ('a', d)), b.map(|d| ('b', d)));
    let mut got = Vec::new();
    while got.len() < 20 {
        let (who, d) = tokio::time::timeout(WAIT, both.next())
            .await
            .expect("results within the deadline")
            .expect("streams open");
        let r: ResultMsg = serde_json::from_slice(&d.payload).unwrap();
        d.acker.ack().await.unwrap();
        got.push((who, r.attempt));
    }
    let mut attempts: Vec<u32> = got.iter().map(|g| g.1).collect();
    attempts.sort_unstable();
    assert_eq!(attempts, (0..20).collect::<Vec<_>>());
    assert!(got.iter().any(|g| g.0 == 'a') && got.iter().any(|g| g.0 == 'b'));
}

async fn many_concurrent_publishes(fx: &Fx) {
    let w = fx.worker("w").await;
    let msgs: Vec<DispatchMsg> = (0..2000).map(dispatch).collect();
    let w = w.as_str();
    let publishes = msgs.iter().map(|m| fx.broker.dispatch_publish(w, m));
    let results = futures::future::join_all(publishes).await;
    let failed: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first {:?}",
        failed.len(),
        failed.first()
    );
    fx.wait_stats(w, 2000, 0).await;
}

/// Confirms and returned messages stay matched to their publishes when
/// refused and accepted publishes share channels concurrently.
async fn refusals_stay_with_their_publish_under_load(fx: &Fx) {
    let w = fx.worker("w").await;
    let nobody = format!("nobody-{}", fx.names.namespace());
    let msgs: Vec<(bool, DispatchMsg)> = (0..400).map(|i| (i % 3 == 0, dispatch(i))).collect();
    let publishes = msgs.iter().map(|(refused, m)| {
        let target = if *refused {
            nobody.as_str()
        } else {
            w.as_str()
        };
        fx.broker.dispatch_publish(target, m)
    });
    let results = futures::future::join_all(publishes).await;
    for ((refused, m), r) in msgs.iter().zip(&results) {
        match r {
            Ok(()) => assert!(!refused, "{} to nobody was confirmed", m.execution_id),
            Err(BrokerError::Refused(_)) => assert!(refused, "{} was refused", m.execution_id),
            Err(e) => panic!("{e}"),
        }
    }
    let accepted = msgs.iter().filter(|(refused, _)| !refused).count() as u32;
    fx.wait_stats(&w, accepted, 0).await;
}

async fn stats_follow_consumers(fx: &Fx) {
    let w = fx.worker("w").await;
    assert_eq!(
        fx.stats(&w).await,
        Some(QueueStats {
            messages: 0,
            consumers: 0
        })
    );
    let one = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    let two = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    fx.wait_stats(&w, 0, 2).await;
    drop(one);
    fx.wait_stats(&w, 0, 1).await;
    drop(two);
    fx.wait_stats(&w, 0, 0).await;
    fx.broker.worker_queue_delete(&w).await.unwrap();
    assert_eq!(fx.stats(&w).await, None);
    let err = fx.broker.dispatch_publish(&w, &dispatch(1)).await;
    assert!(matches!(err, Err(BrokerError::Refused(_))), "{err:?}");
}

async fn heartbeats_and_results_round_trip(fx: &Fx) {
    let beat = HeartbeatMsg {
        v: PROTOCOL_VERSION,
        worker_id: "w-1".into(),
        queue: fx.names.worker_queue("w-1"),
        capacity: 8,
        active: 3,
        avg_cost_ms: 12.5,
        cpu_idle: 87.0,
        state: WorkerState::Online,
        at: 1_760_000_000_123,
        handlers: None,
        group: None,
        incarnation: None,
        held: None,
        dispatch_batch: None,
        immediate_queue: false,
    };
    fx.broker.heartbeat_publish(&beat).await.unwrap();
    fx.broker.results_publish(&[result(3)]).await.unwrap();
    fx.broker
        .results_publish(&[result(4), result(5)])
        .await
        .unwrap();
    let mut beats = fx.broker.heartbeats_consume(10).await.unwrap();
    let mut results = fx.broker.results_consume(10).await.unwrap();
    let hb = next(&mut beats).await;
    assert_eq!(
        serde_json::from_slice::<HeartbeatMsg>(&hb.payload).unwrap(),
        beat
    );
    let rs = next(&mut results).await;
    assert_eq!(
        serde_json::from_slice::<ResultMsg>(&rs.payload).unwrap(),
        result(3),
        "one result is one plain object, as every worker sends it"
    );
    let batch = next(&mut results).await;
    assert_eq!(
        kairos_core::protocol::decode_results(&batch.payload).unwrap(),
        vec![result(4), result(5)],
        "several results travel in one message"
    );
    hb.acker.ack().await.unwrap();
    rs.acker.ack().await.unwrap();
    batch.acker.ack().await.unwrap();
    assert!(fx.broker.is_healthy().await);
}

async fn log_batches_round_trip_and_consumers_compete(fx: &Fx) {
    let batch = |i: u32| LogMsg {
        v: PROTOCOL_VERSION,
        execution_id: format!("exec-{i}"),
        attempt: 1,
        worker_id: "w-1".into(),
        lines: vec![LogLine {
            at: 1_760_000_000_000,
            level: LogLevel::Warn,
            message: format!("line {i} ünïcode"),
        }],
        progress: Some(f64::from(i)),
    };
    for i in 0..4 {
        fx.broker.log_publish(&batch(i)).await.unwrap();
    }
    let mut a = fx.broker.logs_consume(10).await.unwrap();
    let mut b = fx.broker.logs_consume(10).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let d = tokio::select! {
            d = next(&mut a) => d,
            d = next(&mut b) => d,
        };
        let msg: LogMsg = serde_json::from_slice(&d.payload).unwrap();
        d.acker.ack().await.unwrap();
        seen.push(msg);
    }
    seen.sort_by(|x, y| x.execution_id.cmp(&y.execution_id));
    assert_eq!(
        seen,
        (0..4).map(batch).collect::<Vec<_>>(),
        "each batch once"
    );
}

/// A worker's queue delivers higher priorities first, immediate work first
/// within one priority, then first come first served; a batch goes at its
/// most urgent dispatch's rank.
async fn higher_priorities_are_delivered_first(fx: &Fx) {
    use kairos_core::priority::Priority;
    let w = fx.worker("w").await;
    let at = |i: u64, p: u8| DispatchMsg {
        priority: Some(Priority::new(p).unwrap()),
        ..dispatch(i)
    };
    // Published while nobody consumes, so the queue holds them all.
    fx.broker.dispatch_publish(&w, &at(1, 0)).await.unwrap();
    fx.broker.dispatch_publish(&w, &at(2, 5)).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(3)).await.unwrap();
    fx.broker
        .dispatch_publish_many(&w, &[at(4, 0), at(5, 9)])
        .await
        .unwrap();
    fx.broker.dispatch_publish(&w, &at(6, 9)).await.unwrap();
    let urgent = DispatchMsg {
        immediate: true,
        ..dispatch(7)
    };
    fx.broker.dispatch_publish(&w, &urgent).await.unwrap();
    let mut s = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    let mut order = Vec::new();
    for _ in 0..6 {
        let d = next(&mut s).await;
        let ids: Vec<String> = kairos_core::protocol::decode_dispatches(&d.payload)
            .unwrap()
            .into_iter()
            .map(|m| m.execution_id)
            .collect();
        order.push(ids.join("+"));
        d.acker.ack().await.unwrap();
    }
    assert_eq!(
        order,
        [
            "exec-4+exec-5",
            "exec-6",
            "exec-7",
            "exec-2",
            "exec-3",
            "exec-1"
        ],
        "9 (the batch, then the single), 5 (immediate, published last; then explicit, then absent: the default), 0"
    );
}

/// Deregistration (a worker stopping for good): deleting a worker's queues
/// ends their consumers and drops what they held, without rerouting it
/// (the dispatcher requeues that work from the database); deleting again is
/// harmless, and declaring again starts empty.
async fn deleting_worker_queues_drops_their_messages(fx: &Fx) {
    let w = fx.worker("w").await;
    let mut reroute = fx.broker.reroute_consume(10).await.unwrap();
    let mut main = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(1)).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(2)).await.unwrap();
    fx.broker
        .dispatch_publish_to(&w, DispatchQueue::Immediate, &[dispatch(3)])
        .await
        .unwrap();
    let held = next(&mut main).await;
    assert_eq!(decode(&held), dispatch(1));
    fx.wait_stats(&w, 2, 1).await;
    fx.broker.worker_queue_delete(&w).await.unwrap();
    let ended = tokio::time::timeout(WAIT, main.next()).await;
    assert!(
        matches!(ended, Ok(None)),
        "the consumer ends with its queue"
    );
    drop(held);
    assert_eq!(fx.stats(&w).await, None);
    fx.broker.worker_queue_delete(&w).await.unwrap();
    fx.broker.worker_queue_declare(&w).await.unwrap();
    assert_eq!(
        fx.stats(&w).await,
        Some(QueueStats {
            messages: 0,
            consumers: 0
        })
    );
    // Nothing of the deleted queues reached the reroute queue: the first
    // message there is one refused after the delete.
    let mut again = fx.broker.dispatch_consume(&w, 1).await.unwrap();
    fx.broker.dispatch_publish(&w, &dispatch(4)).await.unwrap();
    next(&mut again).await.acker.reject(false).await.unwrap();
    let r = next(&mut reroute).await;
    assert_eq!(decode(&r), dispatch(4));
    r.acker.ack().await.unwrap();
}

/// Runs each case as `<case>::memory` and `<case>::rabbitmq`.
macro_rules! on_both {
    ($($case:ident),* $(,)?) => {$(
        mod $case {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                super::$case(&super::Fx::memory()).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn rabbitmq() {
                if let Some(fx) = super::Fx::rabbit().await {
                    super::$case(&fx).await;
                }
            }
        }
    )*};
}

on_both!(
    round_trip,
    a_dispatch_batch_is_one_message,
    the_immediate_queue_is_a_second_window,
    undeclared_worker_is_refused,
    reject_reroutes_and_requeue_returns,
    dropped_consumer_redelivers,
    prefetch_bounds_unacked,
    results_consumers_compete,
    many_concurrent_publishes,
    refusals_stay_with_their_publish_under_load,
    stats_follow_consumers,
    heartbeats_and_results_round_trip,
    log_batches_round_trip_and_consumers_compete,
    higher_priorities_are_delivered_first,
    deleting_worker_queues_drops_their_messages,
);

mod rabbit_only;
