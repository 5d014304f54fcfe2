//! The dashboard's executions in a real browser (headless Chromium through
//! WebDriver) against `kairos dev` holding 1,000 jobs made through the
//! batch endpoint: from the overview to a failing attempt's error and log
//! lines in two clicks; the execution page (attempt timeline, log
//! live-tailed while the handler writes, events, callbacks; readable
//! without script); links to it from the job page and the audit trail;
//! missed and late trigger counters and the percentile charts; executions
//! filtered by state, job, handler, worker and time with the filters
//! round-tripping through the URL; CSV and JSON export of exactly the
//! filtered rows; previous/next pages with an approximate total on Jobs and
//! Executions; no sideways scrolling at 390 px. Every page is checked with
//! axe-core in the light and the dark colour scheme, and another tenant's
//! data never shows.

mod browser;
use kairos_testkit::cluster as support;

use browser::helpers::{callback_receiver, login, logout, no_rival, rival_tenant, shots_dir};
use browser::{Browser, Tools};
use kairos_core::time::{now_ms, to_rfc3339};
use serde_json::{Value, json};
use std::sync::atomic::Ordering;
use std::time::Duration;
use support::{Cluster, Stack};

/// Checks the page shown in light and in dark (axe, contrast included),
/// reloading it in each scheme.
async fn both_schemes(b: &Browser, name: &str) {
    b.check_page(name).await;
    b.color_scheme("dark").await;
    let url = b.url().await;
    b.goto(&url).await;
    b.check_page(&format!("{name}-dark")).await;
    b.color_scheme("light").await;
    b.goto(&url).await;
}

/// The browser's session cookie, to fetch what a link gives outside it.
async fn session(b: &Browser) -> String {
    let c = b
        .cookies()
        .await
        .into_iter()
        .find(|c| c["name"] == "kairos_session")
        .expect("session cookie");
    format!("kairos_session={}", c["value"].as_str().unwrap_or(""))
}

/// GET `url` with the session cookie: status, headers, body.
async fn fetch(cookie: &str, url: &str) -> (u16, reqwest::header::HeaderMap, String) {
    let r = reqwest::Client::new()
        .get(url)
        .header("cookie", cookie)
        .send()
        .await
        .expect("fetch");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    (status, headers, r.text().await.expect("body"))
}

/// The `data-execution` ids of the rows shown.
async fn shown_rows(b: &Browser) -> Vec<String> {
    let v = b
        .exec(
            "return Array.from(document.querySelectorAll('tr[data-execution]')).map(function (r) { return r.getAttribute('data-execution'); });",
            json!([]),
        )
        .await;
    serde_json::from_value(v).unwrap_or_default()
}

/// The page's query string, as sorted name/value pairs.
async fn query_of(b: &Browser) -> Vec<(String, String)> {
    let url = b.url().await;
    let q = url.split_once('?').map_or("", |(_, q)| q);
    let mut pairs: Vec<(String, String)> = url::form_urlencoded::parse(q.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort();
    pairs
}

/// Clicks `css` and waits for the URL to change.
async fn click_to(b: &Browser, css: &str) -> String {
    let before = b.url().await;
    b.click(css).await;
    kairos_testkit::wait_for(
        &format!("a new page after clicking {css}"),
        Duration::from_secs(10),
        || async {
            let now = b.url().await;
            (now != before && b.exec("return document.readyState", json!([])).await == "complete")
                .then_some(now)
        },
    )
    .await
}

/// Clicks `css` (a submit button that may lead to the same URL) and waits
/// for the new page.
async fn submit(b: &Browser, css: &str) {
    b.exec("window.kairosOldPage = true; return true;", json!([]))
        .await;
    b.click(css).await;
    kairos_testkit::wait_for("the next page", Duration::from_secs(10), || async {
        let fresh = b
            .exec(
                "return window.kairosOldPage !== true && document.readyState === 'complete'",
                json!([]),
            )
            .await;
        (fresh == true).then_some(())
    })
    .await;
}

/// A UTC time as a `datetime-local` input holds it, to the second; never on
/// a whole minute (an input would drop `:00` seconds).
fn local(ms: i64) -> String {
    let ms = if (ms / 1_000) % 60 == 0 {
        ms + 1_000
    } else {
        ms
    };
    to_rfc3339(ms)[..19].to_string()
}

/// 1,000 jobs in one batch: 940 yearly cron jobs over four handlers (they
/// do not fire during the test) and 60 one-shot `noop` jobs due now.
async fn seed(cluster: &Cluster) -> Vec<String> {
    let handlers = ["report", "thumbnail", "sync", "mail"];
    let mut jobs: Vec<Value> = (0..940)
        .map(|i| {
            json!({"jobName": format!("seed-{i:04}"), "jobHandler": handlers[i % 4],
                   "cronExpr": "0 0 1 1 *"})
        })
        .collect();
    jobs.extend((0..60).map(|i| json!({"jobName": format!("quick-{i:02}"), "jobHandler": "noop"})));
    let (s, body) = cluster
        .post("/openapi/jobs/batch", &json!({"jobs": jobs}))
        .await;
    assert_eq!(s, 200, "{body}");
    let results = body["results"].as_array().expect("results");
    assert_eq!(results.len(), 1_000);
    assert!(results.iter().all(|r| r["status"] == 201), "{body}");
    results[940..]
        .iter()
        .map(|r| r["job"]["jobId"].as_str().expect("jobId").to_string())
        .collect()
}

/// The only execution of `job`, once it exists.
async fn execution_of(cluster: &Cluster, job: &str) -> Value {
    kairos_testkit::wait_for("the job's execution", Duration::from_secs(20), || async {
        cluster.executions(job).await.into_iter().next()
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn executions_in_a_browser() {
    let Some(tools) = Tools::find() else { return };
    let Some(cluster) = Cluster::start(Stack::Embedded, 0, 0).await else {
        return;
    };
    let (rival_job, rival_key) = rival_tenant(&cluster).await;
    let quick = seed(&cluster).await;
    let failing = cluster
        .create_job(json!({"jobName": "nightly-import", "jobHandler": "fail",
                           "params": {"message": "disk full on /data"},
                           "maxAttempts": 2, "retryBackoffMs": 200}))
        .await;
    // Due half a minute ago: claimed as a misfire (missed) and late.
    let misfired = cluster
        .create_job(json!({"jobName": "late-start", "jobHandler": "noop",
                           "triggerAt": to_rfc3339(now_ms() - 30_000)}))
        .await;
    // No worker serves this handler: it waits, late.
    cluster
        .create_job(json!({"jobName": "waits-for-worker", "jobHandler": "nobody-serves-this"}))
        .await;
    let (hook, hits) = callback_receiver().await;
    let with_callback = cluster
        .create_job(json!({"jobName": "with-callback", "jobHandler": "noop", "callbackUrl": hook}))
        .await;
    let mut done = quick.clone();
    done.extend([misfired.clone(), with_callback.clone()]);
    cluster
        .wait_jobs(&done, &["succeeded"], Duration::from_secs(60))
        .await;
    cluster
        .wait_jobs(
            std::slice::from_ref(&failing),
            &["failed"],
            Duration::from_secs(30),
        )
        .await;
    let exec = execution_of(&cluster, &failing).await;
    let exec_id = exec["executionId"]
        .as_str()
        .expect("executionId")
        .to_string();
    assert_eq!(exec["attempt"], 2, "{exec}");

    let b = Browser::start(&tools, &shots_dir()).await;
    let ui = format!("{}/ui", cluster.base);
    login(&b, &ui, &cluster.key).await;

    // The overview counts missed and late triggers, and charts p50/p95/p99
    // lateness and run time.
    b.wait_text("missed", Duration::from_secs(5)).await;
    let figure = |id: &'static str| {
        let b = &b;
        async move {
            b.exec(
                &format!("return document.querySelector('#{id} dd').textContent"),
                json!([]),
            )
            .await
            .as_str()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .expect("a figure")
        }
    };
    assert_eq!(figure("missed").await, 1, "the misfired trigger");
    assert!(
        figure("late").await >= 2,
        "the misfire and the one waiting for a worker"
    );
    for chart in ["c-lateness", "c-runtime"] {
        let lines = b
            .find_all(&format!(
                "section[aria-labelledby={chart}] svg.chart g.p99 circle"
            ))
            .await;
        assert!(!lines.is_empty(), "{chart} draws its p99");
    }
    assert_eq!(
        b.find_all(&format!("ul.failures a[href='/ui/executions/{exec_id}']"))
            .await
            .len(),
        1,
        "the latest failures link to their execution"
    );
    both_schemes(&b, "overview-triggers").await;
    no_rival(&b, &rival_job).await;

    // Two clicks from the overview to the failing attempt's error and log.
    let listed = click_to(
        &b,
        "section[aria-labelledby=c-execs] a[href*='status=failed']",
    )
    .await;
    assert!(listed.contains("/ui/executions?"), "{listed}");
    click_to(&b, &format!("tr[data-execution='{exec_id}'] a.exec-link")).await;
    assert!(
        b.url()
            .await
            .ends_with(&format!("/ui/executions/{exec_id}"))
    );
    b.wait_text("disk full on /data", Duration::from_secs(5))
        .await;
    let log = b.text("#log-lines").await;
    for attempt in [1, 2] {
        assert!(
            log.contains(&format!("attempt {attempt}: disk full on /data")),
            "{log}"
        );
    }
    assert_eq!(
        b.find_all("li.attempt").await.len(),
        2,
        "a failed attempt and its retry"
    );
    let first = b.text("li.attempt[data-attempt='1']").await;
    assert!(
        first.contains("failed")
            && first.contains("disk full on /data")
            && first.contains("dev-worker"),
        "{first}"
    );
    b.wait_text("Events", Duration::from_secs(1)).await;
    assert!(
        b.find_all("section[aria-labelledby=h-events] tbody tr")
            .await
            .len()
            >= 6,
        "pending, dispatched, running, failed, twice"
    );
    both_schemes(&b, "execution").await;
    no_rival(&b, &rival_job).await;

    // Without script the page holds the same: it is rendered by the server.
    let cookie = session(&b).await;
    let (s, _, html) = fetch(&cookie, &format!("{ui}/executions/{exec_id}")).await;
    assert_eq!(s, 200);
    assert!(html.contains("attempt 2: disk full on /data") && html.contains("data-attempt=\"1\""));

    // Another tenant's execution is not found, page and tail alike.
    let rival_exec: Value = reqwest::Client::new()
        .get(format!(
            "{}/openapi/jobs/{rival_job}/executions",
            cluster.base
        ))
        .bearer_auth(&rival_key)
        .send()
        .await
        .expect("rival executions")
        .json()
        .await
        .expect("json");
    if let Some(id) = rival_exec["items"][0]["executionId"].as_str() {
        b.goto(&format!("{ui}/executions/{id}")).await;
        b.wait_text("No execution with that id", Duration::from_secs(5))
            .await;
        no_rival(&b, &rival_job).await;
        let (s, _, _) = fetch(&cookie, &format!("{ui}/executions/{id}/tail?after=0")).await;
        assert_eq!(s, 404);
    }

    // The job page links to its executions' pages.
    b.goto(&format!("{ui}/jobs/{failing}")).await;
    click_to(&b, "#executions-live a.exec-link").await;
    assert!(
        b.url()
            .await
            .ends_with(&format!("/ui/executions/{exec_id}"))
    );

    live_tail(&b, &cluster, &ui).await;
    filters_and_export(&b, &cluster, &ui, &exec_id, &cookie).await;
    paging(&b, &ui).await;
    phone_width(&b, &ui, &exec_id).await;

    // A redelivery is in the audit trail, linking to its execution.
    kairos_testkit::wait_for("the first delivery", Duration::from_secs(20), || async {
        (hits.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    let cb_exec = execution_of(&cluster, &with_callback).await["executionId"]
        .as_str()
        .expect("executionId")
        .to_string();
    b.goto(&format!("{ui}/executions/{cb_exec}")).await;
    b.wait_text("delivered", Duration::from_secs(10)).await;
    click_to(&b, "form[action$='/redeliver'] button").await;
    b.wait_text("Callback queued for redelivery.", Duration::from_secs(5))
        .await;
    assert!(b.url().await.contains(&format!("/ui/executions/{cb_exec}")));
    b.goto(&format!("{ui}/admin/audit")).await;
    b.wait_text("callback.redeliver", Duration::from_secs(5))
        .await;
    both_schemes(&b, "audit-execution-link").await;
    click_to(&b, &format!("a[href='/ui/executions/{cb_exec}']")).await;
    b.wait_text("Callback deliveries", Duration::from_secs(5))
        .await;

    // A read key sees the page without its actions.
    let (s, read) = cluster
        .post(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": "read"}),
        )
        .await;
    assert_eq!(s, 201);
    logout(&b).await;
    login(&b, &ui, read["keyToken"].as_str().expect("keyToken")).await;
    b.goto(&format!("{ui}/executions/{cb_exec}")).await;
    b.wait_text("Callback deliveries", Duration::from_secs(5))
        .await;
    assert!(b.find_all("form[action$='/redeliver']").await.is_empty());
    assert!(
        b.find_all("form[action='/ui/executions/rerun']")
            .await
            .is_empty()
    );
}

/// A running handler's new log lines appear without a reload, and the tail
/// stops once the execution ended and its last lines are in.
async fn live_tail(b: &Browser, cluster: &Cluster, ui: &str) {
    let job = cluster
        .create_job(json!({"jobName": "slow-report", "jobHandler": "sleep",
                           "params": {"ms": 4000, "logEveryMs": 1000}}))
        .await;
    let exec = kairos_testkit::wait_for("the sleep to run", Duration::from_secs(20), || async {
        cluster
            .executions(&job)
            .await
            .into_iter()
            .find(|e| e["status"] == "running")
    })
    .await;
    let id = exec["executionId"].as_str().expect("executionId");
    b.goto(&format!("{ui}/executions/{id}")).await;
    b.exec("window.kairosNoReload = true; return true;", json!([]))
        .await;
    let rows = || async { b.find_all("#log-lines tr").await.len() };
    let at_load = rows().await;
    b.wait_text("slept 4000 ms", Duration::from_secs(15)).await;
    assert!(
        rows().await >= 5 && rows().await > at_load,
        "lines were added: {} then {}",
        at_load,
        rows().await
    );
    kairos_testkit::wait_for(
        "the status to show the end",
        Duration::from_secs(5),
        || async {
            b.text("#execution-status")
                .await
                .contains("succeeded")
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        b.exec("return window.kairosNoReload === true", json!([]))
            .await,
        true,
        "the page was not reloaded"
    );
    kairos_testkit::wait_for("the tail to stop", Duration::from_secs(15), || async {
        (b.exec(
            "return document.querySelector('[data-tail]').hasAttribute('data-tail-done')",
            json!([]),
        )
        .await
            == true)
            .then_some(())
    })
    .await;
    assert_eq!(
        rows().await,
        5,
        "each line once (sleeping, slept 1000/2000/3000 of 4000, slept 4000): {}",
        b.text("#log-lines").await
    );
}

/// Filters set in the form land in the URL, come back from it, and the
/// export of that URL holds exactly the rows listed.
async fn filters_and_export(b: &Browser, cluster: &Cluster, ui: &str, exec_id: &str, cookie: &str) {
    b.goto(&format!("{ui}/executions?filtered=1")).await;
    b.click("input[name=status][value=failed]").await;
    b.fill("input[name=handler]", "fail").await;
    b.fill("input[name=worker]", "dev-worker").await;
    let hour = 3_600_000;
    let (from, to) = (local(now_ms() - hour), local(now_ms() + hour));
    b.exec(
        "document.querySelector('input[name=from]').value = arguments[0];
         document.querySelector('input[name=to]').value = arguments[1]; return true;",
        json!([from, to]),
    )
    .await;
    submit(b, "form.filters button[type=submit]").await;
    let q = query_of(b).await;
    for (k, v) in [
        ("status", "failed"),
        ("handler", "fail"),
        ("worker", "dev-worker"),
        ("from", from.as_str()),
        ("to", to.as_str()),
    ] {
        assert!(
            q.contains(&(k.to_string(), v.to_string())),
            "{k}={v} in {q:?}"
        );
    }
    assert_eq!(shown_rows(b).await, [exec_id.to_string()]);
    b.wait_text("1 execution matches.", Duration::from_secs(1))
        .await;
    // The form shows the URL's filters; submitting it again changes nothing.
    let value = |name: &'static str| async move {
        b.exec(
            &format!("return document.querySelector('input[name={name}]').value"),
            json!([]),
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    };
    assert_eq!(
        (value("handler").await, value("worker").await),
        ("fail".into(), "dev-worker".into())
    );
    assert_eq!(
        (value("from").await, value("to").await),
        (from.clone(), to.clone())
    );
    let url = b.url().await;
    b.goto(&url).await;
    assert_eq!(
        shown_rows(b).await,
        [exec_id.to_string()],
        "the URL alone gives the view"
    );
    submit(b, "form.filters button[type=submit]").await;
    assert_eq!(query_of(b).await, q, "the filters round-trip");
    assert_eq!(shown_rows(b).await, [exec_id.to_string()]);
    both_schemes(b, "executions-filtered").await;

    // Export: CSV and JSON of exactly these rows.
    let href = |format: &'static str| async move {
        b.exec(
            &format!("return document.querySelector('a[href*=\"format={format}\"]').href"),
            json!([]),
        )
        .await
        .as_str()
        .expect("export link")
        .to_string()
    };
    let (s, h, csv) = fetch(cookie, &href("csv").await).await;
    assert_eq!(s, 200);
    assert!(h["content-type"].to_str().unwrap().starts_with("text/csv"));
    assert_eq!(h["x-kairos-export-truncated"], "false");
    assert!(h["content-disposition"].to_str().unwrap().contains(".csv"));
    let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert!(
        lines[0].starts_with("executionId,jobId,jobName,handler,status"),
        "{csv}"
    );
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(
        lines[1].starts_with(&format!("{exec_id},"))
            && lines[1].contains(",nightly-import,fail,failed,2,dev-worker,"),
        "{csv}"
    );
    let (s, h, json) = fetch(cookie, &href("json").await).await;
    assert_eq!(
        (s, h["content-type"].to_str().unwrap()),
        (200, "application/json")
    );
    let doc: Value = serde_json::from_str(&json).expect("JSON export");
    assert_eq!(doc["truncated"], false);
    assert_eq!(doc["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(doc["items"][0]["executionId"], exec_id);
    assert_eq!(doc["items"][0]["error"], "disk full on /data");

    // A larger filter: the export holds what the API lists for it.
    let (s, _, csv) = fetch(
        cookie,
        &format!("{ui}/executions/export?format=csv&filtered=1&handler=noop"),
    )
    .await;
    assert_eq!(s, 200);
    let mut exported: Vec<String> = csv
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').next().unwrap_or_default().to_string())
        .collect();
    let api = cluster
        .get("/openapi/executions?handler=noop&limit=500")
        .await;
    let mut listed: Vec<String> = api["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["executionId"].as_str().unwrap_or_default().to_string())
        .collect();
    exported.sort();
    listed.sort();
    assert_eq!(
        exported.len(),
        62,
        "60 quick jobs, the misfire and the callback job"
    );
    assert_eq!(exported, listed);
    // A bad time is a clear message, not a list of everything.
    b.goto(&format!("{ui}/executions?filtered=1&from=yesterday"))
        .await;
    b.wait_text(
        "From “yesterday” is not a date and time",
        Duration::from_secs(5),
    )
    .await;
    assert!(shown_rows(b).await.is_empty());
}

/// Next and previous pages with the filters kept, and a total, on
/// Executions and Jobs.
async fn paging(b: &Browser, ui: &str) {
    b.goto(&format!("{ui}/executions?filtered=1&handler=noop"))
        .await;
    b.wait_text("62 executions match. Page 1 of 2", Duration::from_secs(5))
        .await;
    let page1 = shown_rows(b).await;
    assert_eq!(page1.len(), 50);
    click_to(b, "nav.pager a[rel=next]").await;
    b.wait_text("Page 2 of 2", Duration::from_secs(5)).await;
    assert!(
        query_of(b)
            .await
            .contains(&("handler".into(), "noop".into())),
        "the filter is kept"
    );
    assert_eq!(shown_rows(b).await.len(), 12);
    click_to(b, "nav.pager a[rel=prev]").await;
    b.wait_text("Page 1 of 2", Duration::from_secs(5)).await;
    assert_eq!(shown_rows(b).await, page1);

    b.goto(&format!("{ui}/jobs")).await;
    // 1,000 seeded, 5 more, the rerun-free rest: about 21 pages of 50.
    b.wait_text("jobs match. Page 1 of 21", Duration::from_secs(5))
        .await;
    let first_row = || async {
        b.exec(
            "return document.querySelector('tr[data-job]').getAttribute('data-job')",
            json!([]),
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    };
    click_to(b, "nav.pager a[rel=next]").await;
    b.wait_text("Page 2 of 21", Duration::from_secs(5)).await;
    let second = first_row().await;
    click_to(b, "nav.pager a[rel=next]").await;
    b.wait_text("Page 3 of 21", Duration::from_secs(5)).await;
    click_to(b, "nav.pager a[rel=prev]").await;
    b.wait_text("Page 2 of 21", Duration::from_secs(5)).await;
    assert_eq!(
        first_row().await,
        second,
        "previous leads back to the same page"
    );
    both_schemes(b, "jobs-paged").await;
}

/// At 390 px wide nothing scrolls sideways.
async fn phone_width(b: &Browser, ui: &str, exec_id: &str) {
    b.viewport(Some((390, 844))).await;
    for (name, path) in [
        ("executions-390", "/executions?filtered=1".to_string()),
        ("jobs-390", "/jobs".to_string()),
        ("execution-390", format!("/executions/{exec_id}")),
        ("overview-390", "/overview".to_string()),
    ] {
        b.goto(&format!("{ui}{path}")).await;
        let fits = b
            .exec(
                "return [document.documentElement.scrollWidth, window.innerWidth];",
                json!([]),
            )
            .await;
        let (scroll, inner) = (fits[0].as_i64().unwrap_or(0), fits[1].as_i64().unwrap_or(0));
        assert_eq!(inner, 390, "the viewport is a phone's");
        assert!(
            scroll <= inner,
            "{name}: {scroll} px wide in a {inner} px viewport"
        );
        both_schemes(b, name).await;
    }
    b.viewport(None).await;
}
