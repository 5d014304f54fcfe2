//! Unit tests of what a due trigger becomes: claims, misfires and overlaps.

use super::*;
use crate::job::{JobStatus, RetryPolicy};
use crate::schedule::{Recurrence, Rule};

const NOW: Millis = 1_767_225_600_000;

fn job(schedule: Schedule, next: Millis) -> Job {
    Job {
        id: "j".into(),
        tenant: "t".into(),
        name: "n".into(),
        handler: "noop".into(),
        params: serde_json::Value::Null,
        sensitive_params: Vec::new(),
        schedule,
        next_trigger_at: Some(next),
        status: JobStatus::Scheduled,
        version: 7,
        revision: 7,
        callback_url: None,
        client_request_id: None,
        request_hash: None,
        retry: RetryPolicy::default(),
        timeout_ms: None,
        created_at: 0,
        updated_at: 0,
        worker_group: None,
        priority: Default::default(),
        lane: Default::default(),
        max_concurrency: None,
        trace: None,
        execution_mode: Default::default(),
        pause_reason: None,
        last_result: None,
        last_result_at: None,
        fail_streak: 0,
    }
}

fn with(rule: Rule, misfire: MisfirePolicy, overlap: OverlapPolicy) -> Schedule {
    Schedule::Recurring(Recurrence {
        misfire,
        overlap,
        ..Recurrence::new(rule)
    })
}

fn every(ms: u64, misfire: MisfirePolicy) -> Schedule {
    with(Rule::Every { every_ms: ms }, misfire, OverlapPolicy::Allow)
}

fn times(claims: &[Claim]) -> Vec<(Millis, Option<Millis>)> {
    claims
        .iter()
        .map(|c| (c.scheduled_at - NOW, c.next_trigger_at.map(|n| n - NOW)))
        .collect()
}

#[test]
fn an_on_time_trigger_keeps_the_rhythm_even_when_slightly_late() {
    let late = job(every(1_000, MisfirePolicy::Skip), NOW - 3_000);
    let claims = claims_for([late], NOW);
    assert_eq!(times(&claims), [(-3_000, Some(-2_000))], "late, not missed");
    assert_eq!(claims[0].job.version, 7);
    let once = job(Schedule::Once { at: NOW }, NOW);
    assert_eq!(times(&claims_for([once], NOW)), [(0, None)]);
}

#[test]
fn fire_once_catches_up_once_then_continues_from_now() {
    let missed = job(every(1_000, MisfirePolicy::FireOnce), NOW - 60_500);
    assert_eq!(
        times(&claims_for([missed], NOW)),
        [(-60_500, Some(500))],
        "next grid point after now"
    );
}

#[test]
fn skip_moves_on_without_an_execution() {
    let s = every(1_000, MisfirePolicy::Skip);
    let missed = job(s.clone(), NOW - 60_500);
    assert_eq!(times(&claims_for([missed], NOW)), [(-60_500, Some(500))]);
    let r = resolve(&s, &[NOW - 60_500], false, true, NOW);
    assert_eq!(r.fates, [Fate::Dropped]);
    assert_eq!(r.job, JobMove::Keep);
    // With nothing left in the window, the job is done at once.
    let r = resolve(&s, &[NOW - 60_500], false, false, NOW);
    assert_eq!(r.job, JobMove::Complete);
    // A job with a live execution ends with it instead.
    let r = resolve(&s, &[NOW - 60_500], true, false, NOW);
    assert_eq!(r.job, JobMove::Keep);
}

#[test]
fn fire_all_fires_each_missed_trigger_a_bounded_number_per_round() {
    let a = job(every(1_000, MisfirePolicy::FireAll), NOW - 3_500 - 5_000);
    let claims = claims_for([a], NOW);
    let t = times(&claims);
    assert_eq!(t.len(), 9, "{t:?}");
    assert_eq!(t[0], (-8_500, Some(-7_500)));
    assert_eq!(
        t[8],
        (-500, Some(500)),
        "the last one carries the future trigger"
    );
    assert!(claims.iter().all(|c| c.job.id == "j" && c.job.version == 7));

    let long = job(every(1_000, MisfirePolicy::FireAll), NOW - 3_600_000);
    let claims = claims_for([long], NOW);
    assert_eq!(claims.len(), FIRE_ALL_PER_JOB);
    let last = claims.last().unwrap();
    assert_eq!(
        last.next_trigger_at,
        Some(last.scheduled_at + 1_000),
        "still in the past: the next round continues"
    );
}

#[test]
fn fire_all_is_bounded_per_round_across_jobs() {
    let jobs: Vec<Job> = (0..20)
        .map(|_| job(every(1_000, MisfirePolicy::FireAll), NOW - 3_600_000))
        .collect();
    let claims = claims_for(jobs.clone(), NOW);
    // Every job gets its first claim; the extra ones stop at the round's budget.
    assert_eq!(claims.len(), FIRE_ALL_PER_ROUND + 20);
}

#[test]
fn fixed_delay_waits_for_the_end_unless_skipping_a_misfire() {
    let d = |m| with(Rule::Delay { delay_ms: 2_000 }, m, OverlapPolicy::Allow);
    let on_time = job(d(MisfirePolicy::Skip), NOW);
    assert_eq!(times(&claims_for([on_time], NOW)), [(0, None)]);
    let missed = job(d(MisfirePolicy::FireAll), NOW - 60_000);
    assert_eq!(times(&claims_for([missed], NOW)), [(-60_000, None)]);
    let skipped = job(d(MisfirePolicy::Skip), NOW - 60_000);
    assert_eq!(times(&claims_for([skipped], NOW)), [(-60_000, Some(2_000))]);
}

#[test]
fn the_last_trigger_before_end_at_leaves_none() {
    let mut s = every(1_000, MisfirePolicy::FireOnce);
    if let Schedule::Recurring(r) = &mut s {
        r.end_at = Some(NOW + 500);
    }
    assert_eq!(times(&claims_for([job(s, NOW)], NOW)), [(0, None)]);
}

#[test]
fn forbid_records_overlapping_triggers_as_skipped() {
    let s = with(
        Rule::Every { every_ms: 1_000 },
        MisfirePolicy::FireAll,
        OverlapPolicy::Forbid,
    );
    let r = resolve(&s, &[NOW], false, true, NOW);
    assert_eq!(
        (r.fates.as_slice(), r.job),
        ([Fate::Dispatch].as_slice(), JobMove::Run)
    );
    let r = resolve(&s, &[NOW], true, true, NOW);
    assert_eq!(r.fates, [Fate::Skipped(SKIPPED_OVERLAP)]);
    assert_eq!(r.job, JobMove::Keep);
    assert!(!r.stop_live);
    let r = resolve(&s, &[NOW - 9_000, NOW - 8_000], false, true, NOW);
    assert_eq!(r.fates, [Fate::Dispatch, Fate::Skipped(SKIPPED_OVERLAP)]);
}

#[test]
fn replace_stops_the_live_execution_and_keeps_the_newest_trigger() {
    let s = with(
        Rule::Cron {
            expr: "* * * * * *".into(),
            tz: "UTC".into(),
            dialect: Default::default(),
        },
        MisfirePolicy::FireAll,
        OverlapPolicy::Replace,
    );
    let r = resolve(&s, &[NOW], true, true, NOW);
    assert_eq!(r.fates, [Fate::Dispatch]);
    assert!(r.stop_live);
    let r = resolve(&s, &[NOW], false, true, NOW);
    assert!(!r.stop_live, "nothing to stop");
    let r = resolve(&s, &[NOW - 9_000, NOW - 8_000], false, true, NOW);
    assert_eq!(r.fates, [Fate::Skipped(SKIPPED_REPLACED), Fate::Dispatch]);
}

#[test]
fn allow_and_one_shots_always_dispatch() {
    let once = Schedule::Once { at: NOW - 60_000 };
    let r = resolve(&once, &[NOW - 60_000], true, false, NOW);
    assert_eq!(
        (r.fates.as_slice(), r.job),
        ([Fate::Dispatch].as_slice(), JobMove::Run)
    );
    let s = every(1_000, MisfirePolicy::FireOnce);
    let r = resolve(&s, &[NOW - 60_000], true, true, NOW);
    assert_eq!(r.fates, [Fate::Dispatch]);
    assert!(!r.stop_live);
}

#[test]
fn a_changed_schedule_restarts_from_now() {
    assert_eq!(
        rescheduled(&Schedule::Once { at: 5 }, NOW, 0, true),
        Some(5)
    );
    let created = NOW - 10_500;
    let e = every(1_000, MisfirePolicy::FireOnce);
    assert_eq!(rescheduled(&e, NOW, created, true), Some(NOW + 500));
    let d = with(
        Rule::Delay { delay_ms: 1_000 },
        MisfirePolicy::FireOnce,
        OverlapPolicy::Allow,
    );
    assert_eq!(rescheduled(&d, NOW, created, false), Some(NOW));
    assert_eq!(rescheduled(&d, NOW, created, true), None, "its end decides");
    let mut ended = e.clone();
    if let Schedule::Recurring(r) = &mut ended {
        r.end_at = Some(NOW - 1);
    }
    assert_eq!(rescheduled(&ended, NOW, created, false), None);
}
