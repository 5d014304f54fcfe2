//! Retention (issue 45) end to end, on the embedded system `kairos dev`
//! runs: the leader's purge deletes finished executions and one-shot jobs
//! once past their retention, leaves live jobs alone, and the job list
//! still shows a failing job as failing after its executions are gone. A
//! tenant's override is set and read back through the admin API. Every
//! wait polls with a deadline.

use kairos::embedded::Embedded;
use kairos_client::{Client, NewJob, PageRequest};
use kairos_core::retention::Period;
use kairos_dispatcher::retention::RetentionConfig;
use kairos_testkit as testkit;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Long enough for a system on a busy box to finish what the test waits
/// for; the purge runs every 200 ms with a retention of a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// Whether `GET` of `path` answers 404.
async fn gone(http: &reqwest::Client, base: &str, key: &str, path: &str) -> bool {
    let r = http
        .get(format!("{base}{path}"))
        .bearer_auth(key)
        .send()
        .await
        .expect("request");
    r.status() == reqwest::StatusCode::NOT_FOUND
}

#[tokio::test(flavor = "multi_thread")]
async fn finished_history_is_purged_and_health_stays() {
    let shutdown = CancellationToken::new();
    let retention = RetentionConfig {
        retain_executions: Period(1_000),
        retain_jobs: Period(1_000),
        purge_every: Duration::from_millis(200),
        retention_pause_ms: 10,
        ..RetentionConfig::default()
    };
    let running = Embedded::new()
        .database_url(testkit::sqlite_temp_url())
        .http_addr("127.0.0.1:0")
        .retention_config(retention)
        .start(shutdown.clone())
        .await
        .expect("the embedded system starts");
    let base = format!("http://{}", running.addr());
    let key = running.admin_key().to_string();
    let client = Client::with_key(base.clone(), &key).unwrap();
    let http = reqwest::Client::new();

    // A one-shot job runs, then it and its execution go.
    let once = client
        .create_job(&NewJob::one_shot("once", "noop"))
        .await
        .unwrap()
        .job_id;
    let done = testkit::wait_for("the one-shot job to succeed", DEADLINE, || async {
        let d = client.job(&once).await.ok()?;
        (d.job.status == "succeeded").then_some(d)
    })
    .await;
    let exec = done.last_execution.expect("its execution").execution_id;
    testkit::wait_for("the one-shot job and its execution to go", DEADLINE, || {
        let (http, base, key) = (&http, &base, &key);
        let (once, exec) = (&once, &exec);
        async move {
            let job = gone(http, base, key, &format!("/openapi/jobs/{once}")).await;
            let execution = gone(http, base, key, &format!("/openapi/executions/{exec}")).await;
            (job && execution).then_some(())
        }
    })
    .await;

    // A recurring job failing every second turns `failing`; paused, its
    // executions go, and the job list still says `failing`.
    let failing = client
        .create_job(&NewJob::cron("flaky", "fail", "* * * * * *"))
        .await
        .unwrap()
        .job_id;
    testkit::wait_for("the recurring job to turn failing", DEADLINE, || async {
        let d = client.job(&failing).await.ok()?;
        (d.job.health.as_deref() == Some("failing")).then_some(())
    })
    .await;
    client.pause_job(&failing).await.unwrap();
    testkit::wait_for("the paused job's executions to go", DEADLINE, || async {
        let page = client
            .executions(&failing, &PageRequest::first(100))
            .await
            .ok()?;
        // A trigger claimed just before the pause finishes, then goes too.
        page.items.is_empty().then_some(())
    })
    .await;
    let listed = client.jobs(None, &PageRequest::first(100)).await.unwrap();
    let job = listed
        .items
        .iter()
        .find(|j| j.job_id == failing)
        .expect("the paused job is listed: it is not finished");
    assert_eq!(job.health.as_deref(), Some("failing"));
    assert_eq!(job.last_result.as_deref(), Some("failed"));
    assert!(
        listed.items.iter().all(|j| j.job_id != once),
        "the purged one-shot job is not listed"
    );

    // A tenant override through the admin API, and a refusal naming the field.
    let url = format!("{base}/openapi/tenants/default/retention");
    let put = |body: Value| http.put(&url).bearer_auth(&key).json(&body).send();
    let ok = put(json!({"executions": "7d", "audit": "400d"}))
        .await
        .unwrap();
    assert_eq!(ok.status(), reqwest::StatusCode::OK);
    let bad = put(json!({"jobs": "1mo"})).await.unwrap();
    assert_eq!(bad.status(), reqwest::StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["field"], "jobs", "{body}");
    let read: Value = http
        .get(&url)
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        read,
        json!({"tenantId": "default", "executions": "7d", "jobs": null, "workflowRuns": null, "audit": "400d"}),
        "the refused request changed nothing"
    );

    shutdown.cancel();
    running.wait().await;
}
