//! What the dashboard test does over and over: log in and out, read a job's
//! state through the API, make another tenant whose data must never show,
//! receive callbacks, post a form with a session cookie.

use super::Browser;
use crate::support::Cluster;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub const SECRET_NAME: &str = "rival-secret-job";

pub fn shots_dir() -> PathBuf {
    std::env::var_os("KAIROS_UI_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(kairos_testkit::unique("kairos_ui_shots")))
}

/// Another tenant with a write key and a job that runs every second: none
/// of it may ever appear in the default tenant's dashboard.
pub async fn rival_tenant(cluster: &Cluster) -> (String, String) {
    let (s, body) = cluster
        .post("/openapi/tenants", &json!({"tenantId": "rival"}))
        .await;
    assert_eq!(s, 201, "{body}");
    let (s, key) = cluster
        .post(
            "/openapi/keys",
            &json!({"tenantId": "rival", "role": "write"}),
        )
        .await;
    assert_eq!(s, 201, "{key}");
    let token = key["keyToken"].as_str().expect("keyToken").to_string();
    let r: Value = reqwest::Client::new()
        .post(format!("{}/openapi/jobs", cluster.base))
        .bearer_auth(&token)
        .json(&json!({"jobName": SECRET_NAME, "jobHandler": "fail",
                      "params": {"marker": "rival-marker"}, "cronExpr": "* * * * * *"}))
        .send()
        .await
        .expect("create the rival job")
        .json()
        .await
        .expect("create answer");
    (r["jobId"].as_str().expect("jobId").to_string(), token)
}

/// Asserts the page shows nothing of the rival tenant.
pub async fn no_rival(b: &Browser, rival_job: &str) {
    let html = b.source().await;
    for needle in [rival_job, SECRET_NAME, "rival-marker", "\"rival\""] {
        assert!(
            !html.contains(needle),
            "{} shows {needle:?} of another tenant",
            b.url().await
        );
    }
}

/// A receiver that answers 200 to every callback and counts them.
pub async fn callback_receiver() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let addr = listener.local_addr().expect("receiver address");
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut seen = Vec::new();
                // Read the head and the body its Content-Length announces.
                loop {
                    let Ok(n) = sock.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let len = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if seen.len() >= head_end + 4 + len {
                            break;
                        }
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = sock
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (format!("http://{addr}/hook"), hits)
}

pub async fn login(b: &Browser, ui: &str, key: &str) {
    b.goto(&format!("{ui}/login")).await;
    b.fill("#key", key).await;
    b.click("form button[type=submit]").await;
    kairos_testkit::wait_for(
        "the overview after login",
        Duration::from_secs(10),
        || async { b.url().await.ends_with("/ui/overview").then_some(()) },
    )
    .await;
}

pub async fn logout(b: &Browser) {
    b.click("header form[action='/ui/logout'] button").await;
    kairos_testkit::wait_for("the login page", Duration::from_secs(10), || async {
        b.url().await.ends_with("/ui/login").then_some(())
    })
    .await;
}

pub async fn job_status(cluster: &Cluster, id: &str) -> String {
    cluster.get(&format!("/openapi/jobs/{id}")).await["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The id of the job page shown.
pub async fn shown_job_id(b: &Browser) -> String {
    let url = b.url().await;
    let path = url.split('?').next().unwrap_or_default();
    path.rsplit('/').next().unwrap_or_default().to_string()
}

/// POSTs a form (already encoded) with the browser's session cookie; the status.
pub async fn post_form(url: &str, cookie: &Value, body: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header(
            "cookie",
            format!("kairos_session={}", cookie["value"].as_str().unwrap_or("")),
        )
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_string())
        .send()
        .await
        .expect("post the form")
        .status()
        .as_u16()
}

pub async fn statuses(cluster: &Cluster, ids: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for id in ids {
        out.push(job_status(cluster, id).await);
    }
    out
}
