//! Priorities and the immediate lane, end to end in one process (SQLite,
//! the in-process broker): a backlog is claimed by priority, and a job
//! someone waits for overtakes a backlog through its own claim loop. The
//! order is read from what a worker receives, never from timings.

mod rig;

use kairos_core::broker::DeliveryStream;
use kairos_core::due::{Due, DueSignal};
use kairos_core::job::NewJob;
use kairos_core::priority::Priority;
use kairos_core::protocol::decode_dispatches;
use kairos_core::schedule::Schedule;
use kairos_core::store::CreateOutcome;
use kairos_core::time::{Millis, now_ms};
use rig::{Rig, new_job, next};
use std::collections::HashMap;

/// Triggers claimed per round in these tests: a backlog is many rounds.
const BATCH: u32 = 100;

/// `n` one-shots of the main lane (created before they were due) at
/// `priority`, all due at `due`, stored in one call.
async fn backlog(rig: &Rig, prefix: &str, n: usize, priority: u8, due: Millis) -> Vec<String> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob {
            priority: Priority::new(priority).unwrap(),
            created_at: due - 60_000,
            ..new_job(&format!("{prefix}{i}"), Schedule::Once { at: due }, due)
        })
        .collect();
    let ids = jobs.iter().map(|j| j.id.clone()).collect();
    for outcome in rig.store.jobs_create_many(jobs).await.unwrap() {
        assert!(matches!(outcome, CreateOutcome::Created(_)));
    }
    ids
}

/// A worker played by the test (see `Rig::tap_worker`), recorded by a
/// dispatcher that consumes heartbeats but does not lead, so nothing is
/// claimed before the test has stored its backlog.
async fn tap(rig: &mut Rig) -> DeliveryStream {
    let not_leading = tokio_util::sync::CancellationToken::new();
    not_leading.cancel();
    rig.dispatcher(not_leading);
    rig.tap_worker("tap", 50).await
}

/// Reads `queue` until `order` holds `want` dispatches: each job id with its
/// position in the order of arrival.
async fn arrivals(queue: &mut DeliveryStream, order: &mut HashMap<String, usize>, want: usize) {
    while order.len() < want {
        let d = next(queue).await;
        for m in decode_dispatches(&d.payload).unwrap() {
            let at = order.len();
            assert!(
                order.insert(m.job_id, at).is_none(),
                "each job dispatched once"
            );
        }
        d.acker.ack().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_claimed_by_priority() {
    let mut rig = Rig::new().await;
    let mut queue = tap(&mut rig).await;
    let now = now_ms();
    // Ten rounds of bulk work, and urgent work due after all of it: in due
    // order it would come last.
    let bulk = backlog(&rig, "bulk", 1_000, 0, now - 5_000).await;
    let urgent = backlog(&rig, "urgent", 20, 9, now - 1_000).await;
    rig.dispatcher_with(rig.stop.clone(), |c| c.batch = BATCH);

    let mut order = HashMap::new();
    arrivals(&mut queue, &mut order, bulk.len() + urgent.len()).await;
    // The first round is read in due order (nothing says a backlog is there
    // until it is full); from the second on, priority 9 goes first.
    let last_urgent = urgent.iter().map(|id| order[id]).max().unwrap();
    assert!(
        last_urgent < 3 * BATCH as usize,
        "priority 9 arrived by position {last_urgent} of {}",
        order.len()
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_due_at_creation_overtakes_a_backlog() {
    let mut rig = Rig::new().await;
    let mut queue = tap(&mut rig).await;
    let bulk = backlog(&rig, "bulk", 5_000, 9, now_ms() - 5_000).await;
    rig.dispatcher_with(rig.stop.clone(), |c| c.batch = BATCH);

    // Once the backlog is being worked through, someone creates a job and
    // waits for it; the API announces it as due now.
    let mut order = HashMap::new();
    arrivals(&mut queue, &mut order, 1).await;
    let created = now_ms();
    let waited = rig
        .create("waited-for", Schedule::Once { at: created }, created)
        .await;
    rig.due.announce(Due::At(created)).await;
    arrivals(&mut queue, &mut order, bulk.len() + 1).await;
    let position = order[&waited];
    // Its own loop claims it at once, even below the backlog's priority;
    // the main loop would reach it last.
    assert!(
        position < bulk.len() / 2,
        "the waited-for job arrived at position {position} of {}",
        order.len()
    );
    rig.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_trigger_overtakes_a_backlog() {
    let mut rig = Rig::new().await;
    let mut queue = tap(&mut rig).await;
    let hourly = rig
        .create(
            "hourly",
            Schedule::cron("0 0 * * * *", "UTC"),
            now_ms() + 3_600_000,
        )
        .await;
    let bulk = backlog(&rig, "bulk", 20_000, 9, now_ms() - 5_000).await;
    rig.dispatcher_with(rig.stop.clone(), |c| c.batch = BATCH);

    let mut order = HashMap::new();
    arrivals(&mut queue, &mut order, 1).await;
    let now = now_ms();
    let exec = uuid::Uuid::now_v7().to_string();
    rig.store
        .job_trigger_now(rig::TENANT, &hourly, &exec, now)
        .await
        .unwrap();
    rig.due.announce(Due::Pending).await;
    arrivals(&mut queue, &mut order, bulk.len() + 1).await;
    // The sweep that publishes it runs after the round in progress, not on
    // its one-second timer (by then thousands more would have gone).
    let position = order[&hourly];
    assert!(
        position < 1_000,
        "the triggered job arrived at position {position} of {}",
        order.len()
    );
    rig.shutdown().await;
}

/// For a worker whose heartbeats offer an immediate queue, work someone
/// waits for travels there (its own prefetch window on the worker) and
/// scheduled work through the main queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waited_for_work_travels_in_the_immediate_queue() {
    let mut rig = Rig::new().await;
    let not_leading = tokio_util::sync::CancellationToken::new();
    not_leading.cancel();
    rig.dispatcher(not_leading);
    let (mut main, now) = rig.tap_worker_queues("tap", 50, true).await;
    let mut now = now.expect("the immediate queue is consumed");
    let bulk = backlog(&rig, "bulk", 200, 5, now_ms() - 5_000).await;
    rig.dispatcher_with(rig.stop.clone(), |c| c.batch = BATCH);

    let mut order = HashMap::new();
    arrivals(&mut main, &mut order, 1).await;
    let created = now_ms();
    let waited = rig
        .create("waited-for", Schedule::Once { at: created }, created)
        .await;
    rig.due.announce(Due::At(created)).await;
    let d = next(&mut now).await;
    let msgs = decode_dispatches(&d.payload).unwrap();
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0].job_id, waited);
    assert!(msgs[0].immediate);
    d.acker.ack().await.unwrap();
    // Every scheduled one comes through the main queue.
    arrivals(&mut main, &mut order, bulk.len()).await;
    assert!(bulk.iter().all(|id| order.contains_key(id)));
    rig.shutdown().await;
}
