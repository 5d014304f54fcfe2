//! The result outlet: grouping, `started` first, and patience in an outage.

use super::*;
use crate::testing::Flaky;
use futures::StreamExt;
use kairos_core::protocol::ResultKind;
use kairos_core::protocol::{Names, decode_results};
use kairos_inproc::MemoryBroker;

#[tokio::test]
async fn results_ready_together_travel_together() {
    let broker = MemoryBroker::new(Names::new("results-batch"));
    let reporter = Reporter::new(Arc::new(broker.clone()));
    let sends = (0..200).map(|i| {
        let msg = Report::succeeded(serde_json::json!(i)).into_msg("w", "inc", "e", i);
        let reporter = reporter.clone();
        async move { reporter.finished(msg).await }
    });
    for outcome in futures::future::join_all(sends).await {
        assert_eq!(
            outcome,
            Ok(()),
            "each caller learns its result was confirmed"
        );
    }

    let mut stream = broker.results_consume(1000).await.unwrap();
    let (mut messages, mut attempts) = (0, Vec::new());
    while attempts.len() < 200 {
        let d = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("every result arrives")
            .expect("stream open");
        let results = decode_results(&d.payload).unwrap();
        assert!(results.len() <= MAX_PER_MESSAGE, "messages stay bounded");
        attempts.extend(results.iter().map(|r| r.attempt));
        messages += 1;
    }
    attempts.sort_unstable();
    assert_eq!(attempts, (0..200).collect::<Vec<_>>(), "each result once");
    assert!(
        messages < 200,
        "200 results queued together went out in {messages} messages, not one each"
    );
}

#[tokio::test]
async fn a_lone_result_goes_out_at_once_as_a_plain_object() {
    let broker = MemoryBroker::new(Names::new("results-lone"));
    let reporter = Reporter::new(Arc::new(broker.clone()));
    let msg = Report::started().into_msg("w", "inc", "e", 1);
    reporter.started(msg.clone()).await.unwrap();
    let mut stream = broker.results_consume(10).await.unwrap();
    let d = stream.next().await.unwrap();
    assert_eq!(
        serde_json::from_slice::<ResultMsg>(&d.payload).unwrap(),
        msg
    );
}

#[tokio::test]
async fn started_reports_and_final_results_share_messages() {
    let broker = MemoryBroker::new(Names::new("results-shared"));
    let reporter = Reporter::new(Arc::new(broker.clone()));
    let sends = (0..100u32).map(|i| {
        let reporter = reporter.clone();
        async move {
            if i % 2 == 0 {
                let msg = Report::started().into_msg("w", "inc", "e", i);
                reporter.started(msg).await
            } else {
                let msg = Report::succeeded(serde_json::json!(i)).into_msg("w", "inc", "e", i);
                reporter.finished(msg).await
            }
        }
    });
    for outcome in futures::future::join_all(sends).await {
        assert_eq!(outcome, Ok(()));
    }

    let mut stream = broker.results_consume(1000).await.unwrap();
    let (mut seen, mut mixed) = (0, false);
    while seen < 100 {
        let d = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("every result arrives")
            .expect("stream open");
        let results = decode_results(&d.payload).unwrap();
        let started = results
            .iter()
            .filter(|r| r.kind == ResultKind::Started)
            .count();
        mixed |= started > 0 && started < results.len();
        seen += results.len();
    }
    assert!(
        mixed,
        "a message carried `started` reports and final results together"
    );
}

/// A [`Flaky`] broker, down or up, and a reporter publishing through it.
fn flaky(name: &str, down: bool, gate: Option<tokio::sync::Semaphore>) -> (Arc<Flaky>, Reporter) {
    let broker = Arc::new(Flaky::new(name, down, gate));
    let reporter = Reporter::new(Arc::clone(&broker) as Arc<dyn Broker>);
    (broker, reporter)
}

#[tokio::test(start_paused = true)]
async fn in_an_outage_started_gives_up_soon_and_a_final_result_waits_it_out() {
    use std::sync::atomic::Ordering::SeqCst;
    let (broker, reporter) = flaky("results-outage", true, None);
    let started = Report::started().into_msg("w", "inc", "e1", 1);
    let finished = Report::succeeded(serde_json::json!(2)).into_msg("w", "inc", "e2", 1);
    let (started_outcome, finished_outcome) = tokio::join!(
        async {
            let outcome = reporter.started(started).await;
            // The `started` was given up while the broker is down; a
            // final result queued with it is still waiting.
            assert_eq!(broker.refused.load(SeqCst), STARTED_TRIES);
            tokio::time::sleep(Duration::from_secs(30)).await;
            broker.down.store(false, SeqCst);
            outcome
        },
        reporter.finished(finished.clone()),
    );
    assert_eq!(started_outcome, Err(NotDelivered));
    assert_eq!(
        finished_outcome,
        Ok(()),
        "the final result outlasted the outage"
    );
    assert!(broker.refused.load(SeqCst) > STARTED_TRIES);
    assert!(broker.refused.load(SeqCst) < FINAL_TRIES);

    let mut stream = broker.inner.results_consume(10).await.unwrap();
    let d = stream.next().await.unwrap();
    assert_eq!(
        decode_results(&d.payload).unwrap(),
        vec![finished],
        "only the final result went out"
    );
}

#[tokio::test]
async fn a_started_report_goes_out_before_final_results_queued_ahead_of_it() {
    let (broker, reporter) = flaky("results-first", false, Some(tokio::sync::Semaphore::new(0)));
    let finals = |range: std::ops::Range<u32>| {
        range
            .map(|i| {
                let msg = Report::succeeded(serde_json::json!(i)).into_msg("w", "inc", "f", i);
                let reporter = reporter.clone();
                tokio::spawn(async move { reporter.finished(msg).await })
            })
            .collect::<Vec<_>>()
    };
    let queued = |r: &Reporter| {
        let p = r.outlet.pending.lock().unwrap();
        (p.publishing, p.queue.len())
    };
    // One publish held in flight, two messages' worth of finals behind it,
    // then a `started`.
    let mut sent = finals(0..1);
    while queued(&reporter) != (true, 0) {
        tokio::task::yield_now().await;
    }
    sent.extend(finals(1..129));
    let started = {
        let msg = Report::started().into_msg("w", "inc", "s", 1);
        let reporter = reporter.clone();
        tokio::spawn(async move { reporter.started(msg).await })
    };
    while queued(&reporter) != (true, 129) {
        tokio::task::yield_now().await;
    }
    let mut stream = broker.inner.results_consume(1000).await.unwrap();
    broker.gate.as_ref().unwrap().add_permits(2);
    let mut messages = Vec::new();
    for _ in 0..2 {
        let d = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("a message")
            .expect("stream open");
        messages.push(decode_results(&d.payload).unwrap());
    }
    assert_eq!(messages[0].len(), 1, "the publish held in flight");
    assert_eq!(
        messages[1][0].kind,
        ResultKind::Started,
        "the next message leads with the `started` queued last"
    );
    broker.gate.as_ref().unwrap().add_permits(10);
    assert_eq!(started.await.unwrap(), Ok(()));
    for s in sent {
        assert_eq!(s.await.unwrap(), Ok(()));
    }
}

#[tokio::test(start_paused = true)]
async fn a_started_queued_during_a_long_wait_gets_its_tries_soon() {
    use std::sync::atomic::Ordering::SeqCst;
    let (broker, reporter) = flaky("results-hurry", true, None);
    let finished = Report::succeeded(serde_json::json!(1)).into_msg("w", "inc", "f", 1);
    let waiting_final = tokio::spawn({
        let reporter = reporter.clone();
        async move { reporter.finished(finished).await }
    });
    // Ten failed publishes in: the drain now waits 5 s or more.
    while broker.refused.load(SeqCst) < 10 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let t0 = tokio::time::Instant::now();
    let started = Report::started().into_msg("w", "inc", "s", 1);
    assert_eq!(reporter.started(started).await, Err(NotDelivered));
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "6 tries at most 1.5 s apart, not behind a 5 s wait: {took:?}"
    );
    broker.down.store(false, SeqCst);
    assert_eq!(waiting_final.await.unwrap(), Ok(()));
}
