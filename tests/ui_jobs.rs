//! The dashboard's jobs, as an operator uses them with 1,000 jobs (issue
//! 35), in headless Chromium against `kairos dev`: a fixed-rate job that
//! keeps failing shows as failing in Jobs (and in the health filter, and on
//! its page); the cron of a job that fires every second is edited on the
//! first save, in a form that offers every field with the live preview
//! (and through `PATCH` at the version just read); a mixed bulk resume
//! touches only the paused jobs, names each job and says "1 job" and "7
//! jobs"; cron is described in words in the job's zone; a paused job lists
//! no next fire times. Every page is checked with axe-core in the light
//! and the dark colour scheme.

mod browser;
use kairos_testkit::cluster as support;

use browser::helpers::{job_status, login, shots_dir, statuses};
use browser::{Browser, Tools};
use serde_json::{Value, json};
use std::time::Duration;
use support::{Cluster, Stack};

/// Jobs seeded through the batch endpoint before anything else.
const SEEDED: usize = 1_000;

/// Checks the page in both colour schemes (axe-core, contrast included).
async fn check_both(b: &Browser, name: &str) {
    b.color_scheme("light").await;
    b.check_page(name).await;
    b.color_scheme("dark").await;
    b.check_page(&format!("{name}-dark")).await;
    b.color_scheme("light").await;
}

/// 1,000 jobs that stay quiet (yearly cron, far one-shots, some paused
/// later), in one batch.
async fn seed(cluster: &Cluster) {
    let jobs: Vec<Value> = (0..SEEDED)
        .map(|i| match i % 3 {
            0 => json!({"jobName": format!("seed-{i:04}"), "jobHandler": "noop",
                        "cronExpr": "0 0 3 1 1 *", "timezone": "Europe/Berlin"}),
            1 => json!({"jobName": format!("seed-{i:04}"), "jobHandler": "noop",
                        "triggerAt": "2099-01-01T00:00:00Z"}),
            _ => json!({"jobName": format!("seed-{i:04}"), "jobHandler": "noop",
                        "everyMs": 86_400_000, "startAt": "2099-01-01T00:00:00Z"}),
        })
        .collect();
    let (s, body) = cluster
        .post("/openapi/jobs/batch", &json!({ "jobs": jobs }))
        .await;
    assert_eq!(s, 200, "{body}");
    let created = body["results"]
        .as_array()
        .map_or(0, |r| r.iter().filter(|i| i["status"] == 201).count());
    assert_eq!(created, SEEDED, "{body}");
}

async fn job(cluster: &Cluster, id: &str) -> Value {
    cluster.get(&format!("/openapi/jobs/{id}")).await
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_health_busy_edits_safe_bulk_and_cron_words() {
    let Some(tools) = Tools::find() else { return };
    let Some(cluster) = Cluster::start(Stack::Embedded, 0, 0).await else {
        return;
    };
    seed(&cluster).await;
    let b = Browser::start(&tools, &shots_dir()).await;
    let ui = format!("{}/ui", cluster.base);
    login(&b, &ui, &cluster.key).await;

    // The first page of 1,000 jobs, with its new columns.
    b.goto(&format!("{ui}/jobs")).await;
    b.wait_text("seed-0999", Duration::from_secs(5)).await;
    assert_eq!(b.find_all("tbody tr[data-job]").await.len(), 50);
    assert_eq!(b.find_all("td.last-result").await.len(), 50);
    check_both(&b, "jobs-1000").await;

    // A fixed-rate job that keeps failing shows as failing.
    let failing = cluster
        .create_job(json!({"jobName": "rate-fails", "jobHandler": "fail", "everyMs": 1000}))
        .await;
    kairos_testkit::wait_for(
        "the fixed-rate job failing",
        Duration::from_secs(30),
        || async { (job(&cluster, &failing).await["health"] == "failing").then_some(()) },
    )
    .await;
    let shown = job(&cluster, &failing).await;
    assert_eq!(shown["lastResult"], "failed", "{shown}");
    assert_ne!(
        shown["status"], "failed",
        "a recurring job's status alone looks fine"
    );
    b.goto(&format!("{ui}/jobs?q=rate-fails")).await;
    let row = format!("tr[data-job='{failing}']");
    let state = b.text(&format!("{row} td.state")).await;
    assert!(state.contains("failing"), "{state}");
    let last = b.text(&format!("{row} td.last-result")).await;
    assert!(last.contains("failed"), "{last}");
    check_both(&b, "jobs-failing").await;
    // The health filter finds it among the 1,000, and only failing jobs.
    b.goto(&format!("{ui}/jobs?health=failing")).await;
    b.wait_text("rate-fails", Duration::from_secs(5)).await;
    assert_eq!(
        b.find_all("tbody tr[data-job]").await,
        b.find_all(&row).await,
        "only the failing job"
    );
    b.goto(&format!("{ui}/jobs/{failing}")).await;
    let health = b.text("#job-health").await;
    assert!(
        health.contains("failing") && health.contains("runs failed"),
        "{health}"
    );
    check_both(&b, "job-failing").await;

    // Editing the cron of a job that fires every second: the first save.
    let busy = cluster
        .create_job(
            json!({"jobName": "busy-edit", "jobHandler": "noop", "cronExpr": "* * * * * *"}),
        )
        .await;
    let fired = || async { cluster.executions(&busy).await.len() };
    kairos_testkit::wait_for("the busy job firing", Duration::from_secs(10), || async {
        (fired().await >= 2).then_some(())
    })
    .await;
    b.goto(&format!("{ui}/jobs/{busy}/edit")).await;
    // Every field the API accepts, as in New job, with its preview.
    for field in [
        "#params",
        "input[name=kind][value=at]",
        "input[name=kind][value=cron]",
        "input[name=kind][value=every]",
        "input[name=kind][value=delay]",
        "#cronExpr",
        "#everyMs",
        "#delayMs",
        "#triggerAt",
        "#timezone",
        "#startAt",
        "#endAt",
        "#misfirePolicy",
        "#overlapPolicy",
        "#maxAttempts",
        "#retryBackoffMs",
        "#timeoutMs",
        "#callbackUrl",
        "#workerGroup",
        "#preview",
    ] {
        assert_eq!(
            b.find_all(field).await.len(),
            1,
            "the edit form offers {field}"
        );
    }
    let loaded = fired().await;
    b.fill("#cronExpr", "*/2 * * * * *").await;
    b.exec(
        "var s = document.getElementById('overlapPolicy'); s.value = 'forbid'; \
         s.dispatchEvent(new Event('change', {bubbles: true})); return true;",
        json!([]),
    )
    .await;
    kairos_testkit::wait_for(
        "the preview of the new cron",
        Duration::from_secs(5),
        || async {
            let words = b.find_all("#preview [data-cron-words]").await;
            let text = if words.is_empty() {
                String::new()
            } else {
                b.text("#preview [data-cron-words]").await
            };
            (text == "Every 2 seconds" && b.find_all("#preview ol.fires li").await.len() == 5)
                .then_some(())
        },
    )
    .await;
    check_both(&b, "edit-busy").await;
    // It fires while the form is open: the scheduler's bookkeeping moves.
    kairos_testkit::wait_for("a fire while editing", Duration::from_secs(5), || async {
        (fired().await > loaded).then_some(())
    })
    .await;
    b.click("form#edit-job button[type=submit]").await;
    b.wait_text("Saved.", Duration::from_secs(5)).await;
    assert!(!b.body_text().await.contains("changed by someone else"));
    let saved = job(&cluster, &busy).await;
    assert_eq!(
        (saved["cronExpr"].as_str(), saved["overlapPolicy"].as_str()),
        (Some("*/2 * * * * *"), Some("forbid"))
    );
    // The job page says it in words.
    let schedule = b.text("#job-schedule").await;
    assert!(schedule.contains("Every 2 seconds"), "{schedule}");
    // And through the API: PATCH at the version just read, while it fires.
    let version = saved["version"].as_i64().expect("version");
    let now = fired().await;
    kairos_testkit::wait_for("another fire", Duration::from_secs(5), || async {
        (fired().await > now).then_some(())
    })
    .await;
    let (s, patched) = cluster
        .patch(
            &format!("/openapi/jobs/{busy}"),
            &json!({"version": version, "cronExpr": "*/3 * * * * *"}),
        )
        .await;
    assert_eq!(s, 200, "{patched}");
    assert_eq!(patched["version"], version + 1);

    // A mixed bulk resume touches only the paused jobs.
    let mut mixed = Vec::new();
    for i in 1..=7 {
        mixed.push(
            cluster
                .create_job(
                    json!({"jobName": format!("mixed-{i}"), "jobHandler": "noop",
                                   "cronExpr": "0 0 * * * *"}),
                )
                .await,
        );
    }
    for id in mixed.iter().step_by(2) {
        let (s, _) = cluster
            .post(&format!("/openapi/jobs/{id}/pause"), &json!({}))
            .await;
        assert_eq!(s, 200);
    }
    let before: Vec<Value> =
        futures::future::join_all(mixed.iter().map(|id| job(&cluster, id))).await;
    b.goto(&format!("{ui}/jobs?q=mixed-")).await;
    b.click("#select-all").await;
    b.click("button[value=resume]").await;
    b.wait_text(
        "resume applies to 4 of the 7 jobs you ticked",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(b.find_all("tr[data-applies=yes]").await.len(), 4);
    assert_eq!(b.find_all("tr[data-applies=no]").await.len(), 3);
    let confirm = b.body_text().await;
    assert!(confirm.contains("mixed-1") && confirm.contains("skipped: not paused (scheduled)"));
    assert!(confirm.contains("Yes, resume 4 jobs"), "{confirm}");
    check_both(&b, "bulk-confirm").await;
    b.click("main form button.primary").await;
    b.wait_text(
        "resume: 4 of 4 jobs done. 3 jobs skipped",
        Duration::from_secs(5),
    )
    .await;
    let done = b.body_text().await;
    for i in 1..=7 {
        assert!(
            done.contains(&format!("mixed-{i}")),
            "results by name: {done}"
        );
    }
    check_both(&b, "bulk-done").await;
    assert_eq!(statuses(&cluster, &mixed).await, ["scheduled"; 7]);
    for (i, (id, was)) in mixed.iter().zip(&before).enumerate() {
        let now = job(&cluster, id).await;
        if i % 2 == 0 {
            assert_eq!(
                now["version"],
                was["version"].as_i64().unwrap() + 1,
                "resumed"
            );
        } else {
            assert_eq!(
                now["version"], was["version"],
                "a scheduled job is untouched"
            );
        }
    }
    // One job: singular words.
    b.goto(&format!("{ui}/jobs?q=mixed-1")).await;
    b.click(&format!("input[name=ids][value='{}']", mixed[0]))
        .await;
    b.click("button[value=pause]").await;
    b.wait_text("You are about to pause this job", Duration::from_secs(5))
        .await;
    assert!(b.body_text().await.contains("Yes, pause 1 job"));
    b.click("main form button.primary").await;
    b.wait_text("pause: 1 of 1 job done.", Duration::from_secs(5))
        .await;
    assert!(!b.body_text().await.contains("1 jobs"));
    assert_eq!(job_status(&cluster, &mixed[0]).await, "paused");

    // Cron in words, in the job's zone; a paused job lists no fire times.
    let weekday = cluster
        .create_job(json!({"jobName": "weekday-report", "jobHandler": "noop",
                           "cronExpr": "0 30 9 * * MON-FRI", "timezone": "Europe/Berlin"}))
        .await;
    let words = "At 09:30, Monday through Friday (Europe/Berlin time)";
    b.goto(&format!("{ui}/jobs?q=weekday-report")).await;
    b.wait_text(words, Duration::from_secs(5)).await;
    b.goto(&format!("{ui}/jobs/{weekday}")).await;
    b.wait_text(words, Duration::from_secs(5)).await;
    assert_eq!(b.find_all("ol.fires li").await.len(), 5);
    b.click("button[value=pause]").await;
    b.wait_text("Paused.", Duration::from_secs(5)).await;
    b.wait_text("None while the job is paused", Duration::from_secs(5))
        .await;
    assert!(
        b.find_all("ol.fires li").await.is_empty(),
        "no fire times while paused"
    );
    check_both(&b, "job-paused-words").await;
    b.goto(&format!("{ui}/jobs?q=weekday-report")).await;
    b.wait_text("none while paused", Duration::from_secs(5))
        .await;
    check_both(&b, "jobs-paused").await;
}
