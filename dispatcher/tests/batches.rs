//! Batched dispatch in one process: a worker whose heartbeats offer batches
//! gets a burst in few messages, each trigger in exactly one of them, and a
//! batch a worker refuses is split among the others. The worker under
//! observation here is the test itself, speaking the worker protocol on the
//! in-process broker, so that every message it receives can be counted.

mod rig;

use futures::StreamExt;
use kairos_core::broker::Broker;
use kairos_core::execution::ExecStatus;
use kairos_core::protocol::{
    DispatchMsg, PROTOCOL_VERSION, ResultKind, ResultMsg, decode_dispatches,
};
use kairos_core::time::now_ms;
use kairos_testkit::wait_for;
use rig::{DEADLINE, Rig, next};
use std::collections::HashSet;

/// What a worker reports for a dispatch it ran.
fn succeeded(worker: &str, m: &DispatchMsg) -> ResultMsg {
    ResultMsg {
        v: PROTOCOL_VERSION,
        execution_id: m.execution_id.clone(),
        attempt: m.attempt,
        worker_id: worker.into(),
        kind: ResultKind::Succeeded,
        output: None,
        error: None,
        retryable: None,
        at: now_ms(),
        incarnation: None,
        traceparent: None,
        started_at: Some(now_ms()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_reaches_a_worker_that_takes_batches_in_few_messages() {
    let mut rig = Rig::new().await;
    rig.dispatcher(rig.stop.clone());
    let mut queue = rig.tap_worker("tap", 50).await;
    let due = now_ms() + 500;
    let mut jobs = Vec::new();
    for i in 0..200 {
        jobs.push(rig.one_shot(&format!("b{i}"), due).await);
    }
    let (mut messages, mut seen) = (0, HashSet::new());
    while seen.len() < jobs.len() {
        let d = next(&mut queue).await;
        let batch = decode_dispatches(&d.payload).unwrap();
        assert!(
            batch.len() <= 50,
            "at most the batch offered: {}",
            batch.len()
        );
        messages += 1;
        for m in &batch {
            assert!(seen.insert(m.execution_id.clone()), "sent once: {m:?}");
        }
        let results: Vec<ResultMsg> = batch.iter().map(|m| succeeded("tap", m)).collect();
        rig.broker.results_publish(&results).await.unwrap();
        d.acker.ack().await.unwrap();
    }
    assert!(
        messages * 10 <= jobs.len(),
        "{} dispatches came in {messages} messages",
        jobs.len()
    );
    for job in &jobs {
        assert_eq!(rig.wait_succeeded(job, 1).await.len(), 1);
    }
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_batch_is_split_and_each_dispatch_runs_elsewhere_once() {
    let mut rig = Rig::new().await;
    rig.dispatcher(rig.stop.clone());
    let mut queue = rig.tap_worker("refuser", 50).await;
    let due = now_ms() + 300;
    let mut jobs = Vec::new();
    for i in 0..20 {
        jobs.push(rig.one_shot(&format!("r{i}"), due).await);
    }
    // The refuser holds what it was sent until another worker is known,
    // then refuses every message, batches included.
    let mut held = Vec::new();
    let mut count = 0;
    while count < jobs.len() {
        let d = next(&mut queue).await;
        count += decode_dispatches(&d.payload).unwrap().len();
        held.push(d);
    }
    assert!(held.len() < jobs.len(), "some came as a batch");
    rig.worker("w-1");
    wait_for("the worker's heartbeat", DEADLINE, || async {
        let workers = rig.store.workers_list().await.unwrap();
        workers.iter().any(|w| w.id == "w-1").then_some(())
    })
    .await;
    for d in held {
        d.acker.reject(false).await.unwrap();
    }
    // Until the leader's view has the other worker, a reroute may come back.
    let refusing = tokio::spawn(async move {
        while let Some(d) = queue.next().await {
            d.acker.reject(false).await.unwrap();
        }
    });
    for job in &jobs {
        let execs = rig.wait_succeeded(job, 1).await;
        assert_eq!(execs.len(), 1, "one execution: {execs:?}");
        let e = &execs[0];
        assert_eq!(e.status, ExecStatus::Succeeded);
        assert_eq!(e.attempt, 1, "a refused dispatch keeps its attempt");
        assert_eq!(e.worker_id.as_deref(), Some("w-1"));
    }
    refusing.abort();
    rig.shutdown().await;
}
