//! Recovering an unstarted attempt whose key a replaced process (or one of
//! a worker gone offline) holds, although the execution's row names another
//! worker (a rerouted dispatch
//! whose new worker could not be recorded). Left held, the key makes every
//! worker skip the attempt as a duplicate each time it is requeued.

mod rig;

use kairos_core::coord::OnceGuard;
use kairos_core::execution::ExecStatus;
use kairos_core::protocol::HeartbeatMsg;
use kairos_core::store::HeldAttempt;
use kairos_core::time::now_ms;
use kairos_core::worker::WorkerState;
use kairos_dispatcher::attempts::Attempts;
use kairos_dispatcher::recover;
use kairos_testkit::wait_for;
use rig::{DEADLINE, Rig, next};
use std::time::Duration;

/// A heartbeat of worker `id` from process `incarnation`.
fn beat(id: &str, incarnation: &str) -> HeartbeatMsg {
    HeartbeatMsg {
        capacity: 1,
        incarnation: Some(incarnation.into()),
        held: Some(Vec::new()),
        ..rig::heartbeat(id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_a_gone_process_holds_is_given_back_wherever_the_row_points() {
    let mut rig = Rig::new().await;
    rig.dispatcher(rig.stop.clone());
    // The row will name "tap"; the key is held by worker "b".
    let mut queue = rig.tap_worker("tap", 1).await;
    let job = rig.one_shot("stranded", now_ms()).await;
    let msg = next(&mut queue).await;
    let exec = wait_for("the dispatch recorded", DEADLINE, || async {
        let exec = rig.executions(&job).await.remove(0);
        (exec.status == ExecStatus::Dispatched).then_some(exec)
    })
    .await;
    assert_eq!(exec.worker_id.as_deref(), Some("tap"));
    drop(msg);
    let key = rig.names.attempt_key(&exec.id, exec.attempt);
    let ttl = Duration::from_secs(60);
    assert!(rig.coord.once(&key, "b b-1", ttl).await.unwrap());
    let attempts = Attempts {
        coord: rig.coord.clone(),
        names: rig.names.clone(),
    };
    let held = HeldAttempt {
        execution_id: exec.id.clone(),
        attempt: exec.attempt,
        status: ExecStatus::Dispatched,
        incarnation: None,
        dispatched_at: exec.dispatched_at,
        started_at: None,
    };

    let rescue = || async {
        recover::rescue(rig.store.as_ref(), &attempts, &[&held], &[], "test")
            .await
            .unwrap();
    };

    // Process b-1 is current: it may be starting the attempt, so it keeps
    // its key.
    rig.store
        .workers_record_heartbeats(&[beat("b", "b-1")], now_ms())
        .await
        .unwrap();
    rescue().await;
    assert_eq!(
        rig.coord.holder(&key).await.unwrap().as_deref(),
        Some("b b-1")
    );

    // Once b-1 is replaced, its key goes with the rescue.
    rig.store
        .workers_record_heartbeats(&[beat("b", "b-2")], now_ms() + 1)
        .await
        .unwrap();
    // The rescue decides by the attempt it is handed, whatever the row
    // says by now (the first rescue requeued it).
    rescue().await;
    assert_eq!(rig.coord.holder(&key).await.unwrap(), None);

    // The current process of a worker declared dead holds it: it goes too.
    assert!(rig.coord.once(&key, "b b-2", ttl).await.unwrap());
    rescue().await;
    assert_eq!(
        rig.coord.holder(&key).await.unwrap().as_deref(),
        Some("b b-2")
    );
    rig.store
        .worker_set_state("b", WorkerState::Offline, now_ms())
        .await
        .unwrap();
    rescue().await;
    assert_eq!(rig.coord.holder(&key).await.unwrap(), None);
    rig.shutdown().await;
}
