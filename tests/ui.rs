//! The web dashboard in a real browser (headless Chromium through
//! WebDriver), against `kairos dev` and against the services stack: login,
//! the new-job form with its preview and a validation error, a
//! `* * * * * *` job whose executions appear without a reload, pause /
//! resume / cancel, an edit conflict, bulk actions on exactly the ticked
//! rows, redelivery, run again, read keys, keys and audit pages, the
//! lost-server banner, and another tenant's data never shown. Every page is
//! screenshotted (into `KAIROS_UI_SCREENSHOTS`, default a temporary
//! directory; docs/ui/*.png come from such a run) and checked with axe-core
//! for serious or critical accessibility violations.

mod browser;
use kairos_testkit::cluster as support;

use browser::helpers::{
    SECRET_NAME, callback_receiver, job_status, login, logout, no_rival, post_form, rival_tenant,
    shots_dir, shown_job_id, statuses,
};
use browser::{Browser, Tools};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::{Cluster, Stack};

#[tokio::test(flavor = "multi_thread")]
async fn dashboard_in_a_browser() {
    let Some(tools) = Tools::find() else { return };
    let Some(mut cluster) = Cluster::start(Stack::Embedded, 0, 0).await else {
        return;
    };
    let (rival_job, rival_key) = rival_tenant(&cluster).await;
    let b = Browser::start(&tools, &shots_dir()).await;
    let ui = format!("{}/ui", cluster.base);

    // Login: a wrong key is refused with a message; the dev key opens the overview.
    b.goto(&format!("{ui}/overview")).await;
    assert!(
        b.url().await.ends_with("/ui/login?next=%2Fui%2Foverview"),
        "logged out → login, back to the page after"
    );
    b.check_page("login").await;
    b.fill("#key", "kai_nope").await;
    b.click("form button[type=submit]").await;
    b.wait_text("That is not an API key", Duration::from_secs(5))
        .await;
    login(&b, &ui, &cluster.key).await;

    // New job: the preview shows five fire times; bad params and a bad cron
    // expression are refused with the API's messages, beside their fields.
    b.goto(&format!("{ui}/jobs/new")).await;
    b.fill("#jobName", "every-second").await;
    b.fill("#jobHandler", "noop").await;
    b.fill("#cronExpr", "* * * * * *").await;
    b.fill("#params", "{\"greeting\": \"hi\"").await;
    kairos_testkit::wait_for(
        "five previewed fire times",
        Duration::from_secs(5),
        || async { (b.find_all("#preview ol.fires li").await.len() == 5).then_some(()) },
    )
    .await;
    b.wait_text("params is not valid JSON", Duration::from_secs(5))
        .await;
    b.check_page("new-job").await;
    b.click("form#new-job button[type=submit]").await;
    b.wait_text("params is not valid JSON", Duration::from_secs(5))
        .await;
    b.fill("#params", "{\"greeting\": \"hi\"}").await;
    b.fill("#cronExpr", "every second").await;
    b.wait_text("invalid cron expression", Duration::from_secs(5))
        .await;
    b.click("form#new-job button[type=submit]").await;
    // The live preview already shows the error text, so wait for the
    // server's re-rendered form, which marks the field itself.
    kairos_testkit::wait_for(
        "the cron field marked invalid by the server",
        Duration::from_secs(5),
        || async {
            let attr = b
                .exec(
                    "return document.getElementById('cronExpr').getAttribute('aria-invalid')",
                    json!([]),
                )
                .await;
            (attr == "true").then_some(())
        },
    )
    .await;
    b.wait_text("invalid cron expression", Duration::from_secs(5))
        .await;
    b.fill("#cronExpr", "* * * * * *").await;
    b.click("form#new-job button[type=submit]").await;
    b.wait_text("Created.", Duration::from_secs(10)).await;
    let job = shown_job_id(&b).await;
    let created = cluster.get(&format!("/openapi/jobs/{job}")).await;
    assert_eq!(created["jobName"], "every-second", "{created}");

    // Executions appear without a reload: the newest row changes within 2 s
    // (polls every 2 s, one trigger a second), and the page is the same one.
    b.exec("window.kairosNoReload = true; return true;", json!([]))
        .await;
    let newest = || async {
        b.exec(
            "var r = document.querySelector('#executions-live tr[data-execution]'); return r ? r.getAttribute('data-execution') : null;",
            json!([]),
        )
        .await
        .as_str()
        .map(str::to_string)
    };
    let first = kairos_testkit::wait_for("a first execution", Duration::from_secs(6), newest).await;
    kairos_testkit::wait_for(
        "a newer execution within 2 s",
        Duration::from_millis(2600),
        || async { newest().await.filter(|n| *n != first) },
    )
    .await;
    assert_eq!(
        b.exec("return window.kairosNoReload === true", json!([]))
            .await,
        true
    );
    b.wait_text("succeeded", Duration::from_secs(5)).await;
    b.check_page("job").await;
    no_rival(&b, &rival_job).await;

    // Pause (with a reason, shown on the job) and resume.
    b.fill("#reason", "upstream maintenance").await;
    b.click("button[value=pause]").await;
    b.wait_text("Paused.", Duration::from_secs(5)).await;
    b.wait_text("upstream maintenance", Duration::from_secs(5))
        .await;
    assert_eq!(job_status(&cluster, &job).await, "paused");
    b.check_page("job-paused").await;
    b.click("button[value=resume]").await;
    b.wait_text("Resumed.", Duration::from_secs(5)).await;
    assert_ne!(job_status(&cluster, &job).await, "paused");

    // Edit conflict: the job changes (through the API) while the form is open.
    let hourly = cluster
        .create_job(
            json!({"jobName": "hourly-report", "jobHandler": "noop", "cronExpr": "0 0 * * * *"}),
        )
        .await;
    b.goto(&format!("{ui}/jobs/{hourly}/edit")).await;
    b.fill("#cronExpr", "0 30 * * * *").await;
    let (s, _) = cluster
        .patch(
            &format!("/openapi/jobs/{hourly}"),
            &json!({"version": 1, "maxAttempts": 4}),
        )
        .await;
    assert_eq!(s, 200);
    b.click("form#edit-job button[type=submit]").await;
    b.wait_text("changed by someone else", Duration::from_secs(5))
        .await;
    assert_eq!(
        b.exec(
            "return document.getElementById('cronExpr').value",
            json!([])
        )
        .await,
        "0 30 * * * *",
        "the operator's edit is kept"
    );
    b.check_page("edit-conflict").await;
    b.click("form#edit-job button[type=submit]").await;
    b.wait_text("Saved.", Duration::from_secs(5)).await;
    let saved = cluster.get(&format!("/openapi/jobs/{hourly}")).await;
    assert_eq!(
        (saved["cronExpr"].as_str(), saved["maxAttempts"].as_i64()),
        (Some("0 30 * * * *"), Some(4))
    );

    // Cancel asks first.
    b.goto(&format!("{ui}/jobs/{hourly}")).await;
    b.click("button[value=cancel]").await;
    b.wait_text("Cancel this job?", Duration::from_secs(5))
        .await;
    assert_eq!(
        job_status(&cluster, &hourly).await,
        "scheduled",
        "not before confirming"
    );
    b.click("main form button.danger").await;
    b.wait_text("Cancelled.", Duration::from_secs(5)).await;
    assert_eq!(job_status(&cluster, &hourly).await, "cancelled");

    // Bulk actions act on exactly the rows ticked, never on later ones.
    let mut bulk = Vec::new();
    for i in 1..=3 {
        bulk.push(
            cluster
                .create_job(json!({"jobName": format!("bulk-{i}"), "jobHandler": "noop", "cronExpr": "0 0 * * * *"}))
                .await,
        );
    }
    b.goto(&format!("{ui}/jobs?q=bulk-")).await;
    b.check_page("jobs").await;
    no_rival(&b, &rival_job).await;
    for id in &bulk[..2] {
        b.click(&format!("input[name=ids][value='{id}']")).await;
    }
    b.click("button[value=pause]").await;
    b.wait_text("these 2 jobs", Duration::from_secs(5)).await;
    b.click("main form button.primary").await;
    b.wait_text("pause: 2 of 2 jobs done", Duration::from_secs(5))
        .await;
    assert_eq!(
        statuses(&cluster, &bulk).await,
        ["paused", "paused", "scheduled"]
    );
    b.goto(&format!("{ui}/jobs?q=bulk-")).await;
    let late = cluster
        .create_job(
            json!({"jobName": "bulk-late", "jobHandler": "noop", "cronExpr": "0 0 * * * *"}),
        )
        .await;
    b.click("#select-all").await;
    b.click("button[value=cancel]").await;
    b.wait_text("these 3 jobs", Duration::from_secs(5)).await;
    b.click("main form button.primary").await;
    b.wait_text("cancel: 3 of 3 jobs done", Duration::from_secs(5))
        .await;
    assert_eq!(statuses(&cluster, &bulk).await, ["cancelled"; 3]);
    assert_eq!(
        job_status(&cluster, &late).await,
        "scheduled",
        "a job the operator never saw is untouched"
    );

    // Redeliver a delivered callback.
    let (hook, hits) = callback_receiver().await;
    let cb_job = cluster
        .create_job(json!({"jobName": "with-callback", "jobHandler": "noop", "callbackUrl": hook}))
        .await;
    b.goto(&format!("{ui}/jobs/{cb_job}")).await;
    b.wait_text("delivered", Duration::from_secs(15)).await;
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    b.click("#executions-live form[action$='/redeliver'] button")
        .await;
    b.wait_text("Callback queued for redelivery.", Duration::from_secs(5))
        .await;
    kairos_testkit::wait_for("the second delivery", Duration::from_secs(15), || async {
        (hits.load(Ordering::SeqCst) >= 2).then_some(())
    })
    .await;

    // Executions: failures by default, with run again.
    let failing = cluster
        .create_one_shot("always-fails", "fail", json!({}))
        .await;
    b.goto(&format!("{ui}/executions")).await;
    kairos_testkit::wait_for(
        "the failed execution listed",
        Duration::from_secs(15),
        || async {
            b.goto(&format!("{ui}/executions")).await;
            b.body_text().await.contains("always-fails").then_some(())
        },
    )
    .await;
    assert!(
        !b.body_text().await.contains("every-second"),
        "successes are not listed by default"
    );
    b.check_page("executions").await;
    no_rival(&b, &rival_job).await;
    b.click("form[action='/ui/executions/rerun'] button").await;
    b.wait_text(
        "Job run again as a new one-shot job",
        Duration::from_secs(5),
    )
    .await;
    let again = cluster.get("/openapi/jobs?limit=1").await["items"][0].clone();
    assert_eq!(
        (again["jobName"].as_str(), again["jobHandler"].as_str()),
        (Some("always-fails"), Some("fail"))
    );
    assert_ne!(again["jobId"].as_str(), Some(failing.as_str()));
    b.goto(&format!("{ui}/executions?filtered=1")).await;
    no_rival(&b, &rival_job).await;

    // Overview, workers, keys, audit.
    b.goto(&format!("{ui}/overview")).await;
    b.wait_text("per minute", Duration::from_secs(5)).await;
    assert!(!b.find_all("svg.chart rect.ok").await.is_empty());
    b.check_page("overview").await;
    no_rival(&b, &rival_job).await;
    // Live refresh pauses while the tab is hidden and resumes when it shows.
    b.exec(
        "window.kairosPolls = 0;
         document.addEventListener('htmx:afterRequest', function () { window.kairosPolls++; });
         Object.defineProperty(document, 'hidden', {configurable: true, get: function () { return true; }});
         return true;",
        json!([]),
    )
    .await;
    let polls = || async {
        b.exec("return window.kairosPolls", json!([]))
            .await
            .as_i64()
    };
    tokio::time::sleep(Duration::from_millis(4500)).await; // two poll periods must pass unpolled
    assert_eq!(polls().await, Some(0), "no refresh while hidden");
    b.exec(
        "Object.defineProperty(document, 'hidden', {configurable: true, get: function () { return false; }});
         document.dispatchEvent(new Event('visibilitychange'));
         return true;",
        json!([]),
    )
    .await;
    kairos_testkit::wait_for("a refresh once visible", Duration::from_secs(2), || async {
        polls().await.filter(|n| *n > 0)
    })
    .await;
    // Dark mode follows the system, and stays readable (axe checks contrast).
    b.color_scheme("dark").await;
    b.goto(&format!("{ui}/jobs")).await;
    b.check_page("jobs-dark").await;
    b.goto(&format!("{ui}/overview")).await;
    b.check_page("overview-dark").await;
    b.color_scheme("light").await;
    b.goto(&format!("{ui}/workers")).await;
    b.wait_text("dev-worker", Duration::from_secs(5)).await;
    b.check_page("workers").await;
    b.goto(&format!("{ui}/admin/keys")).await;
    b.click("form[action='/ui/admin/keys'] button[type=submit]")
        .await;
    b.wait_text("it is not shown again", Duration::from_secs(5))
        .await;
    let write_key = b
        .exec("return document.getElementById('new-key').value", json!([]))
        .await;
    assert!(write_key.as_str().is_some_and(|k| k.starts_with("kai_")));
    b.goto(&format!("{ui}/admin/keys")).await;
    b.check_page("keys").await;
    // The dev key is an operator's: it sees every tenant and, when it picks
    // one, that tenant's keys (an admin key sees only its own tenant).
    assert_eq!(b.find_all("tr[data-tenant='rival']").await.len(), 1);
    b.goto(&format!("{ui}/admin/keys?tenant=rival")).await;
    let rival_prefix = &rival_key[4..16];
    b.wait_text(rival_prefix, Duration::from_secs(5)).await;
    assert!(
        !b.source().await.contains(&rival_job),
        "keys, not jobs, of the other tenant"
    );
    b.goto(&format!("{ui}/admin/audit")).await;
    b.wait_text("job.pause", Duration::from_secs(5)).await;
    b.check_page("audit").await;
    no_rival(&b, &rival_job).await;

    // Another tenant's job id answers "not found".
    b.goto(&format!("{ui}/jobs/{rival_job}")).await;
    b.wait_text("No job with that id", Duration::from_secs(5))
        .await;
    no_rival(&b, &rival_job).await;
    b.goto(&format!("{ui}/jobs?status=running")).await;
    no_rival(&b, &rival_job).await;

    // A read key sees no action buttons, and the server refuses its changes.
    let (s, read) = cluster
        .post(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": "read"}),
        )
        .await;
    assert_eq!(s, 201);
    logout(&b).await;
    login(&b, &ui, read["keyToken"].as_str().expect("keyToken")).await;
    b.goto(&format!("{ui}/jobs/{job}")).await;
    b.wait_text("Definition", Duration::from_secs(5)).await;
    assert!(
        b.find_all("form[action$='/action']").await.is_empty(),
        "no actions for a read key"
    );
    assert!(b.find_all("button[value=pause]").await.is_empty());
    let cookie = b
        .cookies()
        .await
        .into_iter()
        .find(|c| c["name"] == "kairos_session")
        .expect("session cookie");
    assert_eq!(cookie["httpOnly"], true);
    assert_eq!(cookie["sameSite"], "Strict");
    let csrf: String = b
        .exec(
            "return JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']",
            json!([]),
        )
        .await
        .as_str()
        .expect("csrf token")
        .to_string();
    let forged = post_form(
        &format!("{ui}/jobs/{job}/action"),
        &cookie,
        &format!("csrf={csrf}&action=pause"),
    )
    .await;
    assert_eq!(forged, 403);
    assert_ne!(job_status(&cluster, &job).await, "paused");
    // Without the CSRF token even a write session is refused.
    logout(&b).await;
    login(&b, &ui, write_key.as_str().unwrap_or_default()).await;
    let cookie = b
        .cookies()
        .await
        .into_iter()
        .find(|c| c["name"] == "kairos_session")
        .expect("cookie");
    let no_csrf = post_form(
        &format!("{ui}/jobs/{job}/action"),
        &cookie,
        "csrf=wrong&action=pause",
    )
    .await;
    assert_eq!(no_csrf, 403);
    assert_ne!(job_status(&cluster, &job).await, "paused");

    // The rival's own session sees its job and none of ours.
    logout(&b).await;
    login(&b, &ui, &rival_key).await;
    b.goto(&format!("{ui}/jobs")).await;
    b.wait_text(SECRET_NAME, Duration::from_secs(5)).await;
    assert!(!b.body_text().await.contains("every-second"));

    // When the server goes away the live views say so.
    b.goto(&format!("{ui}/overview")).await;
    cluster.signal("dev", "KILL");
    kairos_testkit::wait_for(
        "the lost-server banner",
        Duration::from_secs(10),
        || async {
            (b.exec(
                "return !document.getElementById('live-lost').hidden",
                json!([]),
            )
            .await
                == true)
                .then_some(())
        },
    )
    .await;
}

/// On the services stack (MySQL, Redis, RabbitMQ; separate API, dispatcher
/// and two worker processes): both workers appear with their load.
#[tokio::test(flavor = "multi_thread")]
async fn workers_with_their_load_on_the_services_stack() {
    let Some(tools) = Tools::find() else { return };
    let Some(cluster) = Cluster::start(Stack::Services, 1, 2).await else {
        return;
    };
    cluster.wait_workers(2).await;
    let b = Browser::start(&tools, &shots_dir()).await;
    let ui = format!("{}/ui", cluster.base);
    login(&b, &ui, &cluster.key).await;
    b.goto(&format!("{ui}/workers")).await;
    kairos_testkit::wait_for("both workers listed", Duration::from_secs(10), || async {
        (b.find_all("tr.worker").await.len() == 2).then_some(())
    })
    .await;
    assert_eq!(
        b.find_all("tr.worker meter").await.len(),
        2,
        "each with its load"
    );
    b.check_page("workers-services").await;
    b.goto(&format!("{ui}/overview")).await;
    kairos_testkit::wait_for(
        "workers on the overview",
        Duration::from_secs(10),
        || async { (b.find_all("#overview-live tr.worker").await.len() == 2).then_some(()) },
    )
    .await;
}
