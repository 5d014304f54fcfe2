//! Issue 35 in a real browser (headless Chromium through WebDriver) against
//! the services stack (MariaDB, Redis, RabbitMQ; separate `kairos api`,
//! dispatcher and worker processes): sensitive params masked for a read key
//! in every page and API answer while the worker gets the real values; a
//! deep link kept across the login; the session surviving a restart of
//! `kairos api` and served by a second API instance, and ended by a revoke;
//! an HTML 404 under `/ui` and a favicon; status icons drawn as SVG; key
//! states that read naturally; a New job form without an error before
//! anything is typed; keyboard shortcuts. Every page is checked with
//! axe-core in the light and the dark colour scheme.

mod browser;
use kairos_testkit::cluster as support;

use browser::helpers::{login, shots_dir};
use browser::{Browser, Tools};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Cluster, Stack};

const AUTH: &str = "Bearer e2e-auth-9c2f7a41d3";
const AUTH_TOKEN: &str = "e2e-auth-9c2f7a41d3";
const CUSTOM: &str = "custom-e2e-6b1d";
/// What must never reach a read key, in any form.
const SECRETS: [&str; 2] = [AUTH_TOKEN, CUSTOM];
const MASK: &str = "••••••";

/// Screenshot and axe check of the page shown, in light and in dark.
async fn check_both(b: &Browser, name: &str) {
    b.color_scheme("light").await;
    b.check_page(name).await;
    b.color_scheme("dark").await;
    b.check_page(&format!("{name}-dark")).await;
    b.color_scheme("light").await;
}

/// An HTTP server that records the headers of every request and answers
/// 200 with them echoed as JSON (as some services do: a handler's output
/// may then carry a secret back).
async fn echo_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the echo server");
    let addr = listener.local_addr().expect("address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            let record = record.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !String::from_utf8_lossy(&buf).contains("\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).to_string();
                let mut echo = serde_json::Map::new();
                for line in head.lines().skip(1) {
                    if let Some((k, v)) = line.split_once(':') {
                        record.lock().unwrap().push(format!(
                            "{}: {}",
                            k.trim().to_ascii_lowercase(),
                            v.trim()
                        ));
                        echo.insert(k.trim().to_ascii_lowercase(), json!(v.trim()));
                    }
                }
                let body = Value::Object(echo).to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(answer.as_bytes()).await;
            });
        }
    });
    (format!("http://{addr}/report"), seen)
}

/// A key of the `default` tenant with `role`.
async fn new_key(cluster: &Cluster, role: &str) -> String {
    let (s, key) = cluster
        .post(
            "/openapi/keys",
            &json!({"tenantId": "default", "role": role}),
        )
        .await;
    assert_eq!(s, 201, "{key}");
    key["keyToken"].as_str().expect("keyToken").to_string()
}

/// Asserts the page shows none of the secrets, in its HTML as served now.
async fn no_secret_in_page(b: &Browser) {
    let html = b.source().await;
    for s in SECRETS {
        assert!(
            !html.contains(s),
            "{} shows {s:?} to a read key",
            b.url().await
        );
    }
}

/// Waits until `kairos api` on `base` answers `/readyz`.
async fn wait_ready(base: &str) {
    let http = reqwest::Client::new();
    kairos_testkit::wait_for("the API to answer", Duration::from_secs(60), || {
        let (http, url) = (http.clone(), format!("{base}/readyz"));
        async move {
            let r = http.get(url).send().await.ok()?;
            r.status().is_success().then_some(())
        }
    })
    .await;
}

/// Whether the shortcuts' help is open.
async fn help_open(b: &Browser) -> bool {
    b.exec(
        "var d = document.getElementById('shortcuts'); return !!(d && d.open);",
        json!([]),
    )
    .await
        == true
}

/// Waits for the page at a path ending with `suffix`, loaded with its
/// scripts (a key pressed before keys.js runs would do nothing).
async fn wait_url(b: &Browser, suffix: &str) {
    kairos_testkit::wait_for(
        &format!("a page at …{suffix}"),
        Duration::from_secs(10),
        || async {
            let url = b.url().await;
            let loaded = b
                .exec("return document.readyState === 'complete'", json!([]))
                .await
                == true;
            (url.ends_with(suffix) && loaded).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_secrets_and_polish_in_a_browser() {
    let Some(tools) = Tools::find() else { return };
    let Some(mut cluster) = Cluster::start(Stack::Services, 1, 1).await else {
        return;
    };
    cluster.wait_workers(1).await;
    let b = Browser::start(&tools, &shots_dir()).await;
    let ui = format!("{}/ui", cluster.base);
    let read_key = new_key(&cluster, "read").await;

    // A job whose params carry an Authorization header and a field the job
    // marks sensitive. The worker calls the echo server with the real values,
    // whose answer (the execution's output) echoes them back.
    let (url, seen) = echo_server().await;
    let job = cluster
        .create_job(json!({
            "jobName": "report-with-secrets", "jobHandler": "http",
            "params": {"url": url, "headers": {"Authorization": AUTH, "X-Custom": CUSTOM}, "greeting": "visible-greeting"},
            "sensitiveParams": ["headers.X-Custom"],
        }))
        .await;
    cluster
        .wait_jobs(
            std::slice::from_ref(&job),
            &["succeeded"],
            Duration::from_secs(30),
        )
        .await;
    let received = seen.lock().unwrap().clone();
    assert!(
        received.contains(&format!("authorization: {AUTH}"))
            && received.contains(&format!("x-custom: {CUSTOM}")),
        "the worker sends the real values: {received:?}"
    );

    // A deep link while logged out: the login page, then that very page.
    b.goto(&format!("{ui}/jobs/{job}")).await;
    wait_url(&b, &format!("/ui/login?next=%2Fui%2Fjobs%2F{job}")).await;
    check_both(&b, "login-deep-link").await;
    b.fill("#key", &read_key).await;
    b.click("form button[type=submit]").await;
    wait_url(&b, &format!("/ui/jobs/{job}")).await;
    b.wait_text("visible-greeting", Duration::from_secs(5))
        .await;
    b.wait_text("succeeded", Duration::from_secs(10)).await;

    // The read key sees every secret masked: params, output, everywhere.
    assert!(b.body_text().await.contains(MASK));
    no_secret_in_page(&b).await;
    check_both(&b, "job-masked").await;
    let execs = cluster.executions(&job).await;
    let exec = execs[0]["executionId"]
        .as_str()
        .expect("an execution")
        .to_string();
    for page in [
        "/jobs".to_string(),
        "/executions?filtered=1".to_string(),
        "/overview".to_string(),
        // The output (the echoed headers), live regions and log.
        format!("/executions/{exec}"),
    ] {
        b.goto(&format!("{ui}{page}")).await;
        b.wait_text("Kairos", Duration::from_secs(5)).await;
        no_secret_in_page(&b).await;
    }
    // … and in every API answer it gets.
    let http = reqwest::Client::new();
    let api = |path: String| {
        let (http, base, key) = (http.clone(), cluster.base.clone(), read_key.clone());
        async move {
            http.get(format!("{base}{path}"))
                .bearer_auth(key)
                .send()
                .await
                .expect("read through the API")
                .text()
                .await
                .expect("text")
        }
    };
    for path in [
        format!("/openapi/jobs/{job}"),
        "/openapi/jobs".to_string(),
        format!("/openapi/jobs/{job}/executions"),
        "/openapi/executions".to_string(),
        format!("/openapi/executions/{exec}"),
        format!("/openapi/executions/{exec}/logs"),
        format!("/openapi/executions/{exec}/callbacks"),
    ] {
        let body = api(path.clone()).await;
        assert!(
            body.contains("jobId") || body.contains("items"),
            "{path}: {body}"
        );
        for s in SECRETS {
            assert!(
                !body.contains(s),
                "{path} gives {s:?} to a read key: {body}"
            );
        }
    }
    let as_operator = cluster.get(&format!("/openapi/jobs/{job}")).await;
    assert_eq!(
        as_operator["params"]["headers"]["Authorization"], AUTH,
        "operators get the values"
    );

    // A restart of `kairos api` keeps the browser logged in, on the page it shows.
    cluster.signal("api", "TERM");
    assert!(cluster.wait_exit("api"), "the API stops cleanly");
    cluster.spawn("api", &["api"]);
    wait_ready(&cluster.base).await;
    b.goto(&format!("{ui}/jobs/{job}")).await;
    wait_url(&b, &format!("/ui/jobs/{job}")).await;
    b.wait_text("read key", Duration::from_secs(5)).await;
    // A second API instance serves the same session (no sticky sessions):
    // the browser sends its cookie to the same host on another port.
    let second = format!("127.0.0.1:{}", kairos_testkit::free_port());
    cluster.spawn_with("api-2", &["api"], &[("KAIROS_HTTP_ADDR", second.as_str())]);
    wait_ready(&format!("http://{second}")).await;
    b.goto(&format!("http://{second}/ui/executions")).await;
    wait_url(&b, "/ui/executions").await;
    b.wait_text("read key", Duration::from_secs(5)).await;

    // Status icons are drawn (SVG), so every one has a size, timed out too;
    // no glyph a font could lack is left.
    b.goto(&format!("{ui}/executions?filtered=1")).await;
    b.wait_text("timed out", Duration::from_secs(5)).await;
    let drawn = b
        .exec(
            "var out = [];
             document.querySelectorAll('.status').forEach(function (s) {
               var svg = s.querySelector('svg.icon');
               var r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
               out.push([s.textContent.trim(), r.width, r.height]);
             });
             return out;",
            json!([]),
        )
        .await;
    let badges = drawn.as_array().expect("badges");
    assert!(badges.len() >= 9, "every state is offered: {drawn}");
    for badge in badges {
        assert!(
            badge[1].as_f64() > Some(8.0) && badge[2].as_f64() > Some(8.0),
            "an icon with a size: {badge}"
        );
    }
    assert!(badges.iter().any(|bd| bd[0] == "timed out"));
    let html = b.source().await;
    for glyph in ["⧖", "◷", "❚❚", "⊘", "➜", "↷"] {
        assert!(!html.contains(glyph), "no {glyph} glyph left");
    }
    check_both(&b, "executions-icons").await;

    // Unknown dashboard pages are an HTML page, logged in or not.
    b.goto(&format!("{ui}/nope")).await;
    b.wait_text("Page not found", Duration::from_secs(5)).await;
    assert!(b.body_text().await.contains("/ui/nope"));
    check_both(&b, "not-found").await;
    let r = http
        .get(format!("{ui}/nope"))
        .send()
        .await
        .expect("GET /ui/nope");
    assert_eq!(r.status(), 404);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    // The favicon is linked from every page and served.
    let icon = b
        .exec(
            "var l = document.querySelector('link[rel=icon]'); return l ? l.href : null;",
            json!([]),
        )
        .await;
    assert_eq!(icon, json!(format!("{ui}/assets/favicon.svg")));
    let r = http
        .get(format!("{ui}/assets/favicon.svg"))
        .send()
        .await
        .expect("favicon");
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/svg+xml");
    let r = http
        .get(format!("{}/favicon.ico", cluster.base))
        .send()
        .await
        .expect("favicon.ico");
    assert_eq!(r.status(), 200, "redirected to the SVG");

    // Keyboard shortcuts: ? opens the help (an accessible dialog), Escape
    // closes it; g j, g e, g o go to the pages; / focuses the search field.
    b.goto(&format!("{ui}/overview")).await;
    wait_url(&b, "/ui/overview").await;
    assert!(!help_open(&b).await, "closed until asked for");
    b.press("?").await;
    kairos_testkit::wait_for("the help to open", Duration::from_secs(5), || async {
        help_open(&b).await.then_some(())
    })
    .await;
    check_both(&b, "shortcuts-help").await;
    b.press("\u{E00C}").await;
    kairos_testkit::wait_for("the help to close", Duration::from_secs(5), || async {
        (!help_open(&b).await).then_some(())
    })
    .await;
    b.press("gj").await;
    wait_url(&b, "/ui/jobs").await;
    b.press("/").await;
    let focused = || async {
        b.exec(
            "var a = document.activeElement; return a ? a.getAttribute('type') + ':' + a.getAttribute('name') : null;",
            json!([]),
        )
        .await
    };
    assert_eq!(focused().await, json!("search:q"));
    // Typing in the field types, it does not navigate.
    b.press("gj").await;
    assert_eq!(
        b.exec("return document.activeElement.value", json!([]))
            .await,
        json!("gj")
    );
    b.exec("document.activeElement.blur(); return true;", json!([]))
        .await;
    b.press("ge").await;
    wait_url(&b, "/ui/executions").await;
    b.press("/").await;
    wait_url(&b, "/ui/jobs#search").await;
    kairos_testkit::wait_for(
        "the search field focused",
        Duration::from_secs(5),
        || async { (focused().await == json!("search:q")).then_some(()) },
    )
    .await;
    b.exec("document.activeElement.blur(); return true;", json!([]))
        .await;
    b.press("go").await;
    wait_url(&b, "/ui/overview").await;

    // A revoked key's session ends at its next page, on every instance.
    let (s, _) = cluster
        .delete(&format!("/openapi/keys/{}", &read_key[4..16]))
        .await;
    assert_eq!(s, 200);
    b.goto(&format!("{ui}/jobs")).await;
    wait_url(&b, "/ui/login?next=%2Fui%2Fjobs").await;
    b.goto(&format!("http://{second}/ui/jobs")).await;
    wait_url(&b, "/ui/login?next=%2Fui%2Fjobs").await;

    // Key states read naturally: active, revoked, expired.
    login(&b, &ui, &cluster.key).await;
    b.goto(&format!("{ui}/admin/keys")).await;
    b.wait_text("revoked", Duration::from_secs(5)).await;
    let text = b.body_text().await;
    assert!(text.contains("active"), "{text}");
    for clumsy in ["online active", "cancelled revoked", "lost expired"] {
        assert!(!text.contains(clumsy), "{clumsy:?} on the keys page");
    }
    check_both(&b, "keys-states").await;

    // The New job form opens without an error: the preview says what to type.
    b.goto(&format!("{ui}/jobs/new")).await;
    b.wait_text("Type a cron expression", Duration::from_secs(5))
        .await;
    assert!(b.find_all("[data-preview-error]").await.is_empty());
    assert_eq!(
        b.exec(
            "return Array.from(document.querySelectorAll('.field-error')).map(function (e) { return e.textContent.trim(); }).join('')",
            json!([])
        )
        .await,
        json!(""),
        "no error before anything is typed"
    );
    assert!(b.find_all("[aria-invalid=true]").await.is_empty());
    check_both(&b, "new-job-empty").await;
    // A job made here can mark its own sensitive fields.
    b.fill("#jobName", "from-the-form").await;
    b.fill("#jobHandler", "noop").await;
    b.fill("#cronExpr", "0 0 0 1 1 *").await;
    b.fill("#params", "{\"pin\": \"4321-form-pin\"}").await;
    b.fill("#sensitiveParams", "pin").await;
    b.click("form#new-job button[type=submit]").await;
    b.wait_text("Created.", Duration::from_secs(10)).await;
    assert!(
        !b.source().await.contains("4321-form-pin"),
        "masked for every role"
    );
    let made = browser::helpers::shown_job_id(&b).await;
    let stored = cluster.get(&format!("/openapi/jobs/{made}")).await;
    assert_eq!(stored["sensitiveParams"], json!(["pin"]));
    assert_eq!(stored["params"]["pin"], "4321-form-pin");
}
