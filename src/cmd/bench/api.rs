//! The few REST calls the benchmark makes, over one keep-alive connection
//! pool, with the times the server recorded parsed out of the answers.
//!
//! The client shares the cores of the deployment it measures, so the hot
//! calls stay light: their URLs are parsed once, and answers are read into
//! the fields the bench uses rather than into a whole JSON tree.

use anyhow::{Context, Result, bail};
use kairos_core::time::{Millis, parse_rfc3339};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// Server timestamps of one job's latest execution.
#[derive(Debug, Clone, Copy)]
pub(super) struct Times {
    pub(super) created: Millis,
    pub(super) dispatched: Option<Millis>,
    pub(super) started: Option<Millis>,
    pub(super) finished: Option<Millis>,
}

/// Server timestamps of one execution of a recurring job.
#[derive(Debug, Clone, Copy)]
pub(super) struct Run {
    pub(super) scheduled: Millis,
    pub(super) dispatched: Option<Millis>,
    pub(super) started: Option<Millis>,
}

/// What the bench reads of one job: its status and its newest execution's
/// times.
#[derive(Debug, Clone)]
pub(super) struct JobRead {
    pub(super) status: String,
    pub(super) times: Times,
}

/// The part of a job view the bench reads.
#[derive(Deserialize)]
struct JobView {
    status: String,
    #[serde(rename = "createdAt")]
    created_at: String,
    #[serde(rename = "lastExecution")]
    last_execution: Option<ExecutionView>,
}

/// The times of the job view's `lastExecution`.
#[derive(Deserialize, Default)]
struct ExecutionView {
    #[serde(rename = "dispatchedAt")]
    dispatched_at: Option<String>,
    #[serde(rename = "startedAt")]
    started_at: Option<String>,
    #[serde(rename = "finishedAt")]
    finished_at: Option<String>,
}

/// A client of one deployment's API.
pub(super) struct Api {
    base: String,
    /// `POST` targets, parsed once.
    jobs: Url,
    batch: Url,
    http: reqwest::Client,
}

/// The part of a create answer the bench reads.
#[derive(Deserialize)]
struct Created {
    #[serde(rename = "jobId")]
    job_id: String,
}

/// The part of a bulk create answer the bench reads: each item's job id, or
/// the item itself when it was refused.
#[derive(Deserialize)]
struct BatchAnswer {
    results: Vec<Value>,
}

fn ms(v: &Value) -> Option<Millis> {
    v.as_str().and_then(|s| parse_rfc3339(s).ok())
}

impl Api {
    pub(super) fn new(base: &str, key: Option<&str>, connections: usize) -> Result<Self> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .context("the API key is not a valid header value")?;
            headers.insert(AUTHORIZATION, value);
        }
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .pool_max_idle_per_host(connections.max(1))
            .timeout(Duration::from_secs(30))
            .build()
            .context("cannot build the HTTP client")?;
        let url = |path: &str| {
            Url::parse(&format!("{base}{path}")).with_context(|| format!("{base} is not a URL"))
        };
        Ok(Self {
            base: base.to_string(),
            jobs: url("/openapi/jobs")?,
            batch: url("/openapi/jobs/batch")?,
            http,
        })
    }

    /// Polls `/readyz` until it answers 200.
    pub(super) async fn wait_ready(&self, within: Duration) -> Result<()> {
        let start = std::time::Instant::now();
        loop {
            let ready = self
                .http
                .get(format!("{}/readyz", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return Ok(());
            }
            if start.elapsed() > within {
                bail!("no 200 from /readyz within {within:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// POSTs `body` to `url`; the JSON answer of a 2xx, else an error
    /// naming the status and the answer.
    async fn post<T: DeserializeOwned>(&self, url: &Url, body: &Value) -> Result<T> {
        let path = url.path();
        // A deployment's rate limit answers 429 with Retry-After: wait as
        // told (nothing was created) rather than abort the run.
        let mut waits = 0;
        let resp = loop {
            let resp = self
                .http
                .post(url.clone())
                .json(body)
                .send()
                .await
                .with_context(|| format!("POST {path}"))?;
            if resp.status() != reqwest::StatusCode::TOO_MANY_REQUESTS || waits == 60 {
                break resp;
            }
            let secs = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1);
            waits += 1;
            tokio::time::sleep(std::time::Duration::from_secs(secs.clamp(1, 10))).await;
        };
        let status = resp.status();
        let answer = resp
            .bytes()
            .await
            .with_context(|| format!("reading the answer to POST {path}"))?;
        if !status.is_success() {
            bail!(
                "POST {path} refused ({status}): {}",
                String::from_utf8_lossy(&answer)
            );
        }
        serde_json::from_slice(&answer).with_context(|| format!("unexpected answer to POST {path}"))
    }

    /// Creates a job; its id.
    pub(super) async fn create(&self, body: &Value) -> Result<String> {
        let answer: Created = self.post(&self.jobs, body).await?;
        Ok(answer.job_id)
    }

    /// Creates jobs in one `POST /openapi/jobs/batch`; their ids, in order.
    pub(super) async fn create_batch(&self, jobs: Vec<Value>) -> Result<Vec<String>> {
        let body = serde_json::json!({ "jobs": jobs });
        let answer: BatchAnswer = self.post(&self.batch, &body).await?;
        answer
            .results
            .iter()
            .map(|r| match r["job"]["jobId"].as_str() {
                Some(id) => Ok(id.to_string()),
                None => bail!("a batch item was refused: {r}"),
            })
            .collect()
    }

    /// POSTs `body` to `path` (under the base URL); the answer of a 2xx.
    pub(super) async fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        let url = Url::parse(&format!("{}{path}", self.base))
            .with_context(|| format!("{path} is not a path"))?;
        self.post(&url, body).await
    }

    /// GETs `path` (under the base URL); the answer of a 2xx.
    pub(super) async fn get_json(&self, path: &str) -> Result<Value> {
        let answer = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .with_context(|| format!("GET {path}"))?
            .error_for_status()?
            .json()
            .await
            .with_context(|| format!("reading the answer to GET {path}"))?;
        Ok(answer)
    }

    /// A job's status and the server's times of its newest execution
    /// (`GET /openapi/jobs/{id}`: one read by primary key, whatever the
    /// size of the table).
    pub(super) async fn job(&self, job: &str) -> Result<JobRead> {
        let view: JobView = self
            .http
            .get(format!("{}/openapi/jobs/{job}", self.base))
            .send()
            .await
            .with_context(|| format!("GET job {job}"))?
            .error_for_status()?
            .json()
            .await
            .with_context(|| format!("reading job {job}"))?;
        let created = parse_rfc3339(&view.created_at)
            .ok()
            .with_context(|| format!("job {job} has no createdAt"))?;
        let last = view.last_execution.unwrap_or_default();
        let at = |t: &Option<String>| t.as_deref().and_then(|s| parse_rfc3339(s).ok());
        Ok(JobRead {
            status: view.status,
            times: Times {
                created,
                dispatched: at(&last.dispatched_at),
                started: at(&last.started_at),
                finished: at(&last.finished_at),
            },
        })
    }

    /// A job's executions (up to 500, newest first).
    pub(super) async fn executions(&self, job: &str) -> Result<Vec<Run>> {
        let page: Value = self
            .http
            .get(format!(
                "{}/openapi/jobs/{job}/executions?limit=500",
                self.base
            ))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        Ok(page["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                Some(Run {
                    scheduled: ms(&e["scheduledAt"])?,
                    dispatched: ms(&e["dispatchedAt"]),
                    started: ms(&e["startedAt"]),
                })
            })
            .collect())
    }

    /// Cancels a job (`DELETE`); failures are reported, not fatal.
    pub(super) async fn cancel(&self, job: &str) {
        let sent = self
            .http
            .delete(format!("{}/openapi/jobs/{job}", self.base))
            .send()
            .await;
        if let Err(e) = sent {
            eprintln!("could not cancel {job}: {e}");
        }
    }
}
