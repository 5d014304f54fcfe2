//! Partitioned dispatch in process (SQLite, in-process broker and
//! coordination): three dispatchers share the partitions, every cron and
//! one-shot trigger runs exactly once, and when one dispatcher stops its
//! partitions are taken over and their triggers still run.

mod rig;

use kairos_core::execution::ExecStatus;
use kairos_core::schedule::{MisfirePolicy, Schedule};
use kairos_core::time::{Millis, now_ms};
use kairos_dispatcher::partitions::HeldView;
use kairos_testkit::wait_for;
use rig::{DEADLINE, Rig, TENANT};
use std::collections::BTreeSet;
use tokio_util::sync::CancellationToken;

/// Every second, one execution per missed trigger: a gap in the executions
/// can only be a trigger skipped.
fn every_second() -> Schedule {
    let mut s = Schedule::cron("* * * * * *", "UTC");
    if let Schedule::Recurring(r) = &mut s {
        r.misfire = MisfirePolicy::FireAll;
    }
    s
}

/// Waits until the dispatchers' views hold every one of the 256
/// partitions, each exactly once, and each view some.
async fn shared_out(views: &[&HeldView]) {
    wait_for("the partitions to be shared out", DEADLINE, || async {
        let held: Vec<Vec<u32>> = views.iter().map(|v| v.get()).collect();
        let total: usize = held.iter().map(Vec::len).sum();
        let distinct: BTreeSet<u32> = held.iter().flatten().copied().collect();
        (total == 256 && distinct.len() == 256 && held.iter().all(|h| !h.is_empty())).then_some(())
    })
    .await;
}

/// One-shots due over the next `spread_ms`, one every `spread_ms / n`.
async fn one_shots(rig: &Rig, tag: &str, n: usize, spread_ms: Millis) -> Vec<String> {
    let start = now_ms();
    let mut ids = Vec::new();
    for i in 0..n {
        let at = start + spread_ms * i as Millis / n as Millis;
        ids.push(rig.one_shot(&format!("{tag}-{i}"), at).await);
    }
    ids
}

/// The cron job's executions: every trigger from its first on, exactly
/// once (no gap, no repeat), and none left unfinished.
async fn every_trigger_once(rig: &Rig, job: &str, first: Millis) -> usize {
    let execs = wait_for("the job's executions to finish", DEADLINE, || async {
        let execs = rig.executions(job).await;
        execs
            .iter()
            .all(|e| e.status == ExecStatus::Succeeded)
            .then_some(execs)
    })
    .await;
    let mut at: Vec<Millis> = execs.iter().map(|e| e.scheduled_at).collect();
    at.sort_unstable();
    assert_eq!(at.first(), Some(&first), "{job}: the first trigger ran");
    for w in at.windows(2) {
        assert_eq!(
            w[1] - w[0],
            1_000,
            "{job}: a trigger skipped or repeated: {at:?}"
        );
    }
    at.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partitioned_dispatchers_share_the_work_and_take_over() {
    let mut rig = Rig::new().await;
    let views: Vec<HeldView> = (0..3).map(|_| HeldView::default()).collect();
    let leading: Vec<CancellationToken> = (0..3).map(|_| CancellationToken::new()).collect();
    for (i, (view, lead)) in views.iter().zip(&leading).enumerate() {
        rig.dispatcher_showing(
            lead.clone(),
            |c| {
                c.dispatch_partitioned = true;
                c.member_id = format!("d{i}");
            },
            view.clone(),
        );
    }
    rig.worker("w1");
    shared_out(&[&views[0], &views[1], &views[2]]).await;

    let first = (now_ms() / 1_000 + 2) * 1_000;
    let mut crons = Vec::new();
    for i in 0..12 {
        crons.push(
            rig.create(&format!("cron-{i}"), every_second(), first)
                .await,
        );
    }
    let shots = one_shots(&rig, "before", 30, 2_000).await;
    for id in &shots {
        rig.wait_succeeded(id, 1).await;
    }

    // One dispatcher stops: the two others take its partitions over.
    let gone: BTreeSet<u32> = views[2].get().into_iter().collect();
    assert!(!gone.is_empty());
    leading[2].cancel();
    shared_out(&[&views[0], &views[1]]).await;
    let after = one_shots(&rig, "after", 30, 2_000).await;
    for id in after.iter().chain(&shots) {
        let execs = rig.wait_succeeded(id, 1).await;
        assert_eq!(execs.len(), 1, "one-shot {id} ran once: {execs:?}");
    }
    // The cron jobs ran through the takeover; stop them and check.
    rig.worked_past(std::time::Duration::from_secs(2)).await;
    for id in &crons {
        rig.store
            .job_pause(TENANT, id, None, now_ms())
            .await
            .expect("pause");
    }
    let mut triggers = 0;
    for id in &crons {
        triggers += every_trigger_once(&rig, id, first).await;
    }
    assert!(triggers >= 12 * 3, "{triggers} triggers");
    rig.shutdown().await;
}
