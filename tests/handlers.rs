//! Your code as jobs: routing by handler, handlers embedded in a Rust
//! process (against the services stack, and in the embedded system), and
//! execution logs read back through the typed client.

use kairos_testkit::cluster as support;

use futures::StreamExt;
use kairos::embedded::Embedded;
use kairos_client::{Client, NewJob, PageRequest};
use kairos_core::protocol::Names;
use kairos_testkit as testkit;
use kairos_worker::{HandlerError, JobContext, Worker, typed};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use support::{Cluster, Stack};
use tokio_util::sync::CancellationToken;

#[derive(Deserialize)]
struct ReportParams {
    rows: u32,
}

#[derive(Serialize)]
struct ReportOut {
    rows: u32,
}

/// A handler that logs a line per step and reports progress.
async fn report(ctx: JobContext, p: ReportParams) -> Result<ReportOut, HandlerError> {
    if p.rows == 0 {
        return Err(HandlerError::permanent("a report needs at least one row"));
    }
    for i in 1..=p.rows {
        ctx.info(format!("row {i} of {}", p.rows));
        ctx.progress(f64::from(i) * 100.0 / f64::from(p.rows));
    }
    Ok(ReportOut { rows: p.rows })
}

/// Creates `jobs` concurrently; their ids in order.
async fn create_all(client: &Client, jobs: Vec<NewJob>) -> Vec<String> {
    futures::stream::iter(jobs)
        .map(|j| async move { client.create_job(&j).await.expect("create").job_id })
        .buffered(32)
        .collect()
        .await
}

/// Waits until the job has `status`; returns its detail.
async fn wait_status(client: &Client, id: &str, status: &str) -> kairos_client::JobDetail {
    testkit::wait_for(
        &format!("job {id} to be {status}"),
        Duration::from_secs(60),
        || async {
            let d = client.job(id).await.ok()?;
            (d.job.status == status).then_some(d)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn services_route_by_handler_and_store_logs() {
    let Some(mut cluster) = Cluster::start(Stack::Services, 1, 0).await else {
        return;
    };
    cluster.spawn_worker_with("worker-noop", &[("KAIROS_WORKER_HANDLERS", "noop")]);
    cluster.spawn_worker_with("worker-sleep", &[("KAIROS_WORKER_HANDLERS", " sleep ")]);
    cluster.wait_workers(2).await;
    let client = Client::with_key(cluster.base.clone(), &cluster.key).unwrap();
    let workers = client.workers().await.unwrap();
    let served: HashMap<String, Option<Vec<String>>> = workers
        .into_iter()
        .map(|w| (w.worker_id, w.handlers))
        .collect();
    assert_eq!(served["worker-noop"], Some(vec!["noop".to_string()]));
    assert_eq!(served["worker-sleep"], Some(vec!["sleep".to_string()]));

    // A handler nobody serves: the job waits, visibly, and does not fail.
    let waiting = client
        .create_job(
            &NewJob::one_shot("waits", "report")
                .params(json!({"rows": 5}))
                .max_attempts(1),
        )
        .await
        .unwrap()
        .job_id;
    let detail = testkit::wait_for(
        "the job to wait for a report worker",
        Duration::from_secs(30),
        || async {
            let d = client.job(&waiting).await.ok()?;
            d.waiting_for.is_some().then_some(d)
        },
    )
    .await;
    let w = detail.waiting_for.unwrap();
    assert_eq!((w.handler.as_str(), w.group), ("report", None));
    let exec = detail.last_execution.expect("an execution");
    assert_eq!(exec.status, "pending");
    let shown = client.execution(&exec.execution_id).await.unwrap();
    assert!(
        shown.execution.waiting_for.is_some(),
        "execution view says so too"
    );

    // A Rust service embedding the worker library starts serving it.
    let names = Names::new(cluster.namespace());
    let amqp = cluster.env["KAIROS_AMQP_URL"].clone();
    let redis = cluster.env["KAIROS_REDIS_URL"].clone();
    let broker = kairos::connect::rabbitmq(&amqp, names.clone(), None)
        .await
        .unwrap();
    let coord = kairos::connect::redis(&redis, names.clone()).await.unwrap();
    let service = Worker::builder()
        .id("report-service")
        .handler("report", typed(report))
        .broker(Arc::new(broker))
        .coordination(Arc::new(coord))
        .names(names)
        .heartbeat_every(Duration::from_millis(500))
        .build()
        .unwrap();
    let stop_service = CancellationToken::new();
    let service = tokio::spawn(service.run(stop_service.clone()));

    let done = wait_status(&client, &waiting, "succeeded").await;
    let exec = done.last_execution.unwrap();
    assert_eq!(exec.worker_id.as_deref(), Some("report-service"));
    assert_eq!(exec.attempt, 1);
    // Lines and progress travel apart from the result: they arrive soon after.
    testkit::wait_for(
        "the last progress figure",
        Duration::from_secs(10),
        || async {
            let e = client.execution(&exec.execution_id).await.ok()?.execution;
            (e.progress == Some(100.0)).then_some(())
        },
    )
    .await;
    assert!(done.waiting_for.is_none());
    let history = client.execution(&exec.execution_id).await.unwrap().events;
    assert!(
        history.iter().all(|e| e.status != "failed"),
        "it waited, it never failed: {history:?}"
    );
    let lines = testkit::wait_for(
        "the report's log lines",
        Duration::from_secs(10),
        || async {
            let lines = client.all_execution_logs(&exec.execution_id).await.ok()?;
            (lines.len() == 5).then_some(lines)
        },
    )
    .await;
    let texts: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        texts,
        [
            "row 1 of 5",
            "row 2 of 5",
            "row 3 of 5",
            "row 4 of 5",
            "row 5 of 5"
        ]
    );
    assert!(
        lines
            .iter()
            .all(|l| l.level == "info" && l.worker_id == "report-service")
    );
    let first = client
        .execution_logs(&exec.execution_id, &PageRequest::first(2))
        .await
        .unwrap();
    assert_eq!(first.items.len(), 2);
    let rest = client
        .execution_logs(
            &exec.execution_id,
            &PageRequest {
                limit: Some(10),
                cursor: first.next_cursor.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(rest.items.len(), 3, "paged on from the cursor");
    assert_eq!(rest.items[0].message, "row 3 of 5");
    let unknown = client
        .execution_logs("no-such-execution", &PageRequest::default())
        .await;
    assert_eq!(unknown.unwrap_err().status(), Some(404));

    // 300 mixed jobs: each runs on a worker serving its handler, none fails.
    let mut jobs = Vec::new();
    for i in 0..300 {
        jobs.push(match i % 3 {
            0 => NewJob::one_shot(format!("noop-{i}"), "noop"),
            1 => NewJob::one_shot(format!("sleep-{i}"), "sleep").params(json!({"ms": 5})),
            _ => NewJob::one_shot(format!("report-{i}"), "report").params(json!({"rows": 2})),
        });
    }
    let ids = create_all(&client, jobs).await;
    cluster
        .wait_jobs(&ids, &["succeeded", "failed"], Duration::from_secs(120))
        .await;
    let expected = |i: usize| match i % 3 {
        0 => "worker-noop",
        1 => "worker-sleep",
        _ => "report-service",
    };
    for (i, id) in ids.iter().enumerate() {
        let d = client.job(id).await.unwrap();
        let e = d.last_execution.unwrap();
        assert_eq!(
            d.job.status, "succeeded",
            "{} failed: {:?}",
            d.job.job_name, e.error
        );
        assert_eq!(
            e.worker_id.as_deref(),
            Some(expected(i)),
            "{}",
            d.job.job_name
        );
    }

    stop_service.cancel();
    service.await.unwrap().unwrap();
    cluster.stop_all();
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_system_runs_your_handlers() {
    let shutdown = CancellationToken::new();
    let running = Embedded::new()
        .database_url(testkit::sqlite_temp_url())
        .http_addr("127.0.0.1:0")
        .worker(|w| w.builtin_handlers().handler("report", typed(report)))
        .start(shutdown.clone())
        .await
        .expect("the embedded system starts");
    assert!(running.handlers().contains(&"report".to_string()));
    let client =
        Client::with_key(format!("http://{}", running.addr()), running.admin_key()).unwrap();

    let ok = client
        .create_job(&NewJob::one_shot("r", "report").params(json!({"rows": 3})))
        .await
        .unwrap()
        .job_id;
    let done = wait_status(&client, &ok, "succeeded").await;
    let exec = done.last_execution.unwrap();
    assert_eq!(exec.output, Some(json!({"rows": 3})));
    let lines = testkit::wait_for("log lines", Duration::from_secs(10), || async {
        let l = client.all_execution_logs(&exec.execution_id).await.ok()?;
        (l.len() == 3).then_some(l)
    })
    .await;
    assert_eq!(lines[2].message, "row 3 of 3");

    // A permanent error is final although attempts are left; bad params too.
    for (name, params) in [("empty", json!({"rows": 0})), ("bad", json!({"rows": "x"}))] {
        let id = client
            .create_job(
                &NewJob::one_shot(name, "report")
                    .params(params)
                    .max_attempts(3),
            )
            .await
            .unwrap()
            .job_id;
        let failed = wait_status(&client, &id, "failed").await;
        let e = failed.last_execution.unwrap();
        assert_eq!(e.attempt, 1, "{name}: not retried");
        assert!(e.error.is_some());
    }

    // The client's bodiless control calls still work (pause takes an
    // optional JSON body now; the client sends `null`).
    let cron = client
        .create_job(&NewJob::cron("hourly", "noop", "0 0 * * * *"))
        .await
        .unwrap()
        .job_id;
    let paused = client.pause_job(&cron).await.unwrap();
    assert_eq!(
        (paused.status.as_str(), paused.pause_reason),
        ("paused", None)
    );
    assert_eq!(client.resume_job(&cron).await.unwrap().status, "scheduled");

    shutdown.cancel();
    running.wait().await;
}
