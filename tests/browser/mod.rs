//! A headless Chromium for the dashboard tests: starts `chromedriver` with a
//! fresh profile and speaks the W3C WebDriver protocol to it.
//!
//! The client is these few calls over `reqwest` (already a dependency)
//! rather than a WebDriver crate: the tests need navigation, clicks, typing,
//! script execution, cookies and screenshots, and nothing else.
//!
//! Chromium and chromedriver come from Debian (`chromium`,
//! `chromium-driver`; `.ci/run` installs them). axe-core (the accessibility
//! checker) is read from `KAIROS_AXE_CORE` (a path to `axe.min.js`; `.ci/run`
//! fetches it with npm). When either is missing the test is skipped, or
//! fails when `KAIROS_REQUIRE_SERVICES=1`.
#![allow(dead_code)]

pub mod helpers;

use base64::Engine;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Skips (returns `None` after printing `SKIPPED: …`) or panics when
/// services are required.
fn unavailable<T>(what: &str) -> Option<T> {
    if std::env::var("KAIROS_REQUIRE_SERVICES").as_deref() == Ok("1") {
        panic!("{what}, and KAIROS_REQUIRE_SERVICES=1");
    }
    println!("SKIPPED: {what}; set KAIROS_REQUIRE_SERVICES=1 to fail instead");
    None
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// What a browser test needs: chromium, chromedriver and axe-core.
pub struct Tools {
    chromium: PathBuf,
    driver: PathBuf,
    /// axe-core's source, injected into each page checked.
    pub axe: String,
}

impl Tools {
    /// The tools, or `None` (skip) / panic (required) when one is missing.
    pub fn find() -> Option<Tools> {
        let Some(chromium) = find_program(&["chromium", "chromium-browser", "google-chrome"])
        else {
            return unavailable(
                "chromium not installed (apt-get install chromium chromium-driver)",
            );
        };
        let Some(driver) = find_program(&["chromedriver"]) else {
            return unavailable("chromedriver not installed (apt-get install chromium-driver)");
        };
        let axe = match std::env::var("KAIROS_AXE_CORE") {
            Ok(p) => match std::fs::read_to_string(&p) {
                Ok(src) => src,
                Err(e) => return unavailable(&format!("cannot read axe-core at {p}: {e}")),
            },
            Err(_) => {
                return unavailable("KAIROS_AXE_CORE (path to axe-core's axe.min.js) is not set");
            }
        };
        Some(Tools {
            chromium,
            driver,
            axe,
        })
    }
}

/// A chromedriver process and one browser session on it.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    profile: PathBuf,
    axe: String,
    shots: PathBuf,
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session makes chromedriver quit the browser; killing
        // chromedriver alone would leave Chromium running, orphaned.
        let url = format!("{}/session/{}", self.base, self.session);
        kairos_testkit::cleanup_blocking(Duration::from_secs(10), move || async move {
            let _ = reqwest::Client::new().delete(url).send().await;
        });
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free port")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium with a fresh profile;
    /// screenshots go to `shots`.
    pub async fn start(tools: &Tools, shots: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new(&tools.driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        kairos_testkit::wait_for("chromedriver to answer", Duration::from_secs(20), || {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let r = http.get(format!("{base}/status")).send().await.ok()?;
                let v: Value = r.json().await.ok()?;
                (v["value"]["ready"] == true).then_some(())
            }
        })
        .await;
        let profile = std::env::temp_dir().join(kairos_testkit::unique("kairos_chrome"));
        std::fs::create_dir_all(&profile).expect("create the browser profile");
        std::fs::create_dir_all(shots).expect("create the screenshot directory");
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": tools.chromium.to_string_lossy(),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1366,900",
                    format!("--user-data-dir={}", profile.display()),
                ]
            }
        }}});
        let r: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new WebDriver session")
            .json()
            .await
            .expect("session answer");
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {r}"))
            .to_string();
        Browser {
            driver,
            base,
            session,
            http,
            profile,
            axe: tools.axe.clone(),
            shots: shots.to_path_buf(),
        }
    }

    /// One WebDriver command; its `value`, or the error it answered.
    async fn try_cmd(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let mut req = self.http.request(method.clone(), &url);
        if let Some(b) = body {
            req = req.json(&b);
        } else if method == reqwest::Method::POST {
            req = req.json(&json!({}));
        }
        let r = req
            .send()
            .await
            .map_err(|e| format!("WebDriver {method} {path}: {e}"))?;
        let status = r.status();
        let v: Value = r.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            Ok(v["value"].clone())
        } else {
            Err(format!(
                "WebDriver {method} {path}: {status} {}",
                v["value"]["message"]
            ))
        }
    }

    async fn cmd(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_cmd(method, path, body)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Loads `url` and waits for it.
    pub async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.cmd(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The page's HTML as it is now.
    pub async fn source(&self) -> String {
        self.cmd(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs `script` (a function body) with `args`; its return value.
    pub async fn exec(&self, script: &str, args: Value) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// The elements matching `css` (maybe none).
    pub async fn find_all(&self, css: &str) -> Vec<String> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/elements",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The one element matching `css`, waiting up to 5 s for it.
    pub async fn find(&self, css: &str) -> String {
        kairos_testkit::wait_for(
            &format!("element {css}"),
            Duration::from_secs(5),
            || async { self.find_all(css).await.into_iter().next() },
        )
        .await
    }

    /// Runs `act` on the element matching `css`, finding it again if the
    /// page replaced it between the find and the act (a live region or a
    /// re-render may): WebDriver then answers "stale element reference".
    async fn on_element<F, Fut>(&self, css: &str, what: &str, act: F) -> Value
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<Value, String>>,
    {
        let mut last = String::new();
        for _ in 0..5 {
            let el = self.find(css).await;
            match act(el).await {
                Ok(v) => return v,
                Err(e) if e.contains("stale element") => last = e,
                Err(e) => panic!("{what} {css}: {e}"),
            }
        }
        panic!("{what} {css}: {last}");
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        self.on_element(css, "click", |el| async move {
            self.try_cmd(reqwest::Method::POST, &format!("/element/{el}/click"), None)
                .await
        })
        .await;
    }

    /// Replaces the text of the input matching `css` (clear and type happen
    /// on one element, found again as a pair if it goes stale).
    pub async fn fill(&self, css: &str, text: &str) {
        self.on_element(css, "fill", |el| async move {
            self.try_cmd(reqwest::Method::POST, &format!("/element/{el}/clear"), None)
                .await?;
            self.try_cmd(
                reqwest::Method::POST,
                &format!("/element/{el}/value"),
                Some(json!({"text": text})),
            )
            .await
        })
        .await;
    }

    /// Presses `keys` one after the other on whatever has the focus, as a
    /// person typing would (W3C actions: each key goes down and up).
    /// WebDriver's special keys are written as their code points, e.g.
    /// `"\u{E00C}"` for Escape.
    pub async fn press(&self, keys: &str) {
        let actions: Vec<Value> = keys
            .chars()
            .flat_map(|c| {
                [
                    json!({"type": "keyDown", "value": c.to_string()}),
                    json!({"type": "keyUp", "value": c.to_string()}),
                ]
            })
            .collect();
        self.cmd(
            reqwest::Method::POST,
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )
        .await;
    }

    /// The visible text of the element matching `css`.
    pub async fn text(&self, css: &str) -> String {
        self.on_element(css, "text of", |el| async move {
            self.try_cmd(reqwest::Method::GET, &format!("/element/{el}/text"), None)
                .await
        })
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// The visible text of the whole page (empty while a page loads).
    pub async fn body_text(&self) -> String {
        self.try_cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": "return document.body ? document.body.innerText : '';", "args": []})),
        )
        .await
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
    }

    /// Waits until the page's text contains `needle`; on timeout the panic
    /// shows the page as it was.
    pub async fn wait_text(&self, needle: &str, deadline: Duration) {
        let start = std::time::Instant::now();
        loop {
            let text = self.body_text().await;
            if text.contains(needle) {
                return;
            }
            if start.elapsed() > deadline {
                panic!(
                    "timed out after {deadline:?} waiting for {needle:?} on {}; the page shows:\n{text}",
                    self.url().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The browser's cookies for the current page (HttpOnly ones included).
    pub async fn cookies(&self) -> Vec<Value> {
        self.cmd(reqwest::Method::GET, "/cookie", None)
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Saves a PNG of the page (up to 2400 px tall) as `<shots>/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let height = self
            .exec("return document.documentElement.scrollHeight", json!([]))
            .await
            .as_i64()
            .unwrap_or(900)
            .clamp(900, 2400);
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": 1366, "height": height + 140})),
        )
        .await;
        let b64 = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": 1366, "height": 900})),
        )
        .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("screenshot is base64");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("write screenshot");
    }

    /// Runs axe-core on the page; the serious and critical violations.
    pub async fn axe_violations(&self) -> Vec<String> {
        self.exec(&format!("{};return true;", self.axe), json!([]))
            .await;
        let script = r#"
            var done = arguments[arguments.length - 1];
            axe.run(document, {resultTypes: ['violations']}).then(function (r) {
                done(r.violations
                    .filter(function (v) { return v.impact === 'serious' || v.impact === 'critical'; })
                    .map(function (v) {
                        return v.impact + ' ' + v.id + ': ' + v.help + ' at ' +
                            v.nodes.map(function (n) { return n.target.join(' '); }).join(', ');
                    }));
            }).catch(function (e) { done(['axe failed: ' + e]); });
        "#;
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/execute/async",
                Some(json!({"script": script, "args": []})),
            )
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|s| s.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Emulates the system's colour scheme (`light` or `dark`) through the
    /// DevTools protocol chromedriver exposes.
    pub async fn color_scheme(&self, scheme: &str) {
        self.cmd(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": "Emulation.setEmulatedMedia", "params": {
                "features": [{"name": "prefers-color-scheme", "value": scheme}]
            }})),
        )
        .await;
    }

    /// Makes the page's viewport `width` × `height` CSS pixels, as a phone
    /// of that size would (DevTools device emulation; the window keeps its
    /// size); `None` goes back to the window's own size.
    pub async fn viewport(&self, size: Option<(u32, u32)>) {
        let (cmd, params) = match size {
            Some((width, height)) => (
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": true}),
            ),
            None => ("Emulation.clearDeviceMetricsOverride", json!({})),
        };
        self.cmd(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
        .await;
    }

    /// Screenshot and accessibility check of the page being shown.
    pub async fn check_page(&self, name: &str) {
        self.screenshot(name).await;
        let violations = self.axe_violations().await;
        assert!(
            violations.is_empty(),
            "axe-core found serious violations on {name} ({}):\n{}",
            self.url().await,
            violations.join("\n")
        );
    }
}
