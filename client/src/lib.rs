//! A typed client for the Kairos REST API (`/openapi/...`, see `docs/api.md`).
//!
//! ```no_run
//! use kairos_client::{Client, NewJob};
//!
//! # async fn demo() -> Result<(), kairos_client::Error> {
//! let kairos = Client::with_key("http://127.0.0.1:8080", "kai_…")?;
//! let created = kairos
//!     .create_job(&NewJob::one_shot("hello", "noop").params(serde_json::json!({"greeting": "hi"})))
//!     .await?;
//! let job = kairos.job(&created.job_id).await?;
//! println!("{} is {}", job.job.job_id, job.job.status);
//! # Ok(()) }
//! ```
//!
//! Times are RFC 3339 strings as the API sends them. Every error the API
//! answers with becomes [`Error::Api`] with its status, code and message.
#![warn(missing_docs, unreachable_pub)]

mod types;

pub use types::*;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// What can go wrong talking to the API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API answered with an error (`4xx`/`5xx` and its JSON body).
    #[error("{status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The error code (`not_found`, `invalid_field`, …).
        code: String,
        /// What was wrong.
        message: String,
        /// The request field at fault, if any.
        field: Option<String>,
    },
    /// The request could not be sent or the answer not read.
    #[error("request failed: {0}")]
    Http(#[from] reqwest::Error),
    /// The base URL is not usable.
    #[error("invalid base URL {0:?}")]
    BaseUrl(String),
}

impl Error {
    /// The HTTP status of an API error.
    ///
    /// ```
    /// let e = kairos_client::Error::Api {
    ///     status: 404, code: "not_found".into(), message: "no job".into(), field: None,
    /// };
    /// assert_eq!(e.status(), Some(404));
    /// ```
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A Kairos API client. Cheap to clone (the connection pool is shared).
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    /// A client for the API at `base` (e.g. `http://127.0.0.1:8080`).
    ///
    /// ```
    /// let c = kairos_client::Client::new("http://127.0.0.1:8080").unwrap();
    /// assert!(kairos_client::Client::new("localhost:8080").is_err());
    /// # let _ = c;
    /// ```
    pub fn new(base: impl Into<String>) -> Result<Self, Error> {
        Self::with_http(base, reqwest::Client::new())
    }

    /// A client that sends `Authorization: Bearer <key>` with every request
    /// (every `/openapi/*` route needs a key).
    ///
    /// ```
    /// let c = kairos_client::Client::with_key("http://127.0.0.1:8080", "kai_0123456789ab_…").unwrap();
    /// # let _ = c;
    /// ```
    pub fn with_key(base: impl Into<String>, key: &str) -> Result<Self, Error> {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
            .map_err(|_| Error::BaseUrl("the API key is not a valid header value".into()))?;
        headers.insert(reqwest::header::AUTHORIZATION, value);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .build()?;
        Self::with_http(base, http)
    }

    /// Like [`Client::new`] with a configured `reqwest` client (timeouts, proxies, headers).
    ///
    /// ```
    /// let http = reqwest::Client::builder().build().unwrap();
    /// let c = kairos_client::Client::with_http("http://127.0.0.1:8080", http).unwrap();
    /// # let _ = c;
    /// ```
    pub fn with_http(base: impl Into<String>, http: reqwest::Client) -> Result<Self, Error> {
        let base = base.into().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::BaseUrl(base));
        }
        Ok(Self { base, http })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn read<T: DeserializeOwned>(resp: reqwest::Response) -> Result<T, Error> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp.json::<T>().await?);
        }
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        let err = &body["error"];
        Err(Error::Api {
            status: status.as_u16(),
            code: err["code"].as_str().unwrap_or("unknown").to_string(),
            message: err["message"]
                .as_str()
                .unwrap_or(status.canonical_reason().unwrap_or("error"))
                .to_string(),
            field: err["field"].as_str().map(str::to_string),
        })
    }

    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, Error> {
        let mut url = self.url(path);
        if !query.is_empty() {
            let mut q = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in query {
                q.append_pair(k, v);
            }
            url = format!("{url}?{}", q.finish());
        }
        Self::read(self.http.get(url).send().await?).await
    }

    async fn post<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, Error> {
        Self::read(self.http.post(self.url(path)).json(body).send().await?).await
    }

    /// `POST /openapi/jobs`: creates a job (or returns the one with the same
    /// `clientRequestId`).
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// use kairos_client::NewJob;
    /// let cron = NewJob::cron("nightly", "report", "0 30 2 * * *").timezone("Europe/Berlin");
    /// let created = c.create_job(&cron).await?;
    /// println!("next trigger {:?}", created.next_trigger_at);
    /// # Ok(()) }
    /// ```
    pub async fn create_job(&self, job: &NewJob) -> Result<Created, Error> {
        self.post("/openapi/jobs", job).await
    }

    /// `GET /openapi/jobs/{id}`: the job with its newest execution.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let detail = c.job("0193…").await?;
    /// if let Some(w) = detail.waiting_for {
    ///     println!("waiting for a worker serving {}", w.handler);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn job(&self, id: &str) -> Result<JobDetail, Error> {
        self.get(&format!("/openapi/jobs/{id}"), &[]).await
    }

    /// `GET /openapi/jobs`: a page of jobs, newest first.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let page = c.jobs(Some("failed"), &kairos_client::PageRequest::first(100)).await?;
    /// for job in page.items { println!("{}", job.job_name); }
    /// # Ok(()) }
    /// ```
    pub async fn jobs(&self, status: Option<&str>, page: &PageRequest) -> Result<Page<Job>, Error> {
        let mut q = page.query();
        if let Some(s) = status {
            q.push(("status", s.to_string()));
        }
        self.get("/openapi/jobs", &q).await
    }

    /// `PATCH /openapi/jobs/{id}`: changes the fields set in `patch` at `version`.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let job = c.job("0193…").await?.job;
    /// let patch = kairos_client::JobPatch::new(job.version).set("cronExpr", "0 */5 * * * *");
    /// c.update_job(&job.job_id, &patch).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_job(&self, id: &str, patch: &JobPatch) -> Result<Job, Error> {
        let req = self
            .http
            .patch(self.url(&format!("/openapi/jobs/{id}")))
            .json(&patch.body());
        Self::read(req.send().await?).await
    }

    /// `POST /openapi/jobs/{id}/pause`.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// assert_eq!(c.pause_job("0193…").await?.status, "paused");
    /// # Ok(()) }
    /// ```
    pub async fn pause_job(&self, id: &str) -> Result<Job, Error> {
        self.post(&format!("/openapi/jobs/{id}/pause"), &()).await
    }

    /// `POST /openapi/jobs/{id}/resume`.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// c.resume_job("0193…").await?;
    /// # Ok(()) }
    /// ```
    pub async fn resume_job(&self, id: &str) -> Result<Job, Error> {
        self.post(&format!("/openapi/jobs/{id}/resume"), &()).await
    }

    /// `POST /openapi/jobs/{id}/trigger`: one execution now.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let t = c.trigger_job("0193…").await?;
    /// println!("execution {}", t.execution_id);
    /// # Ok(()) }
    /// ```
    pub async fn trigger_job(&self, id: &str) -> Result<Triggered, Error> {
        self.post(&format!("/openapi/jobs/{id}/trigger"), &()).await
    }

    /// `DELETE /openapi/jobs/{id}`: cancels the job.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// c.cancel_job("0193…").await?;
    /// # Ok(()) }
    /// ```
    pub async fn cancel_job(&self, id: &str) -> Result<Job, Error> {
        let req = self.http.delete(self.url(&format!("/openapi/jobs/{id}")));
        Self::read(req.send().await?).await
    }

    /// `GET /openapi/jobs/{id}/executions`: a page of a job's executions, newest first.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let page = c.executions("0193…", &kairos_client::PageRequest::default()).await?;
    /// # Ok(()) }
    /// ```
    pub async fn executions(
        &self,
        job_id: &str,
        page: &PageRequest,
    ) -> Result<Page<Execution>, Error> {
        self.get(&format!("/openapi/jobs/{job_id}/executions"), &page.query())
            .await
    }

    /// `GET /openapi/executions/{id}`: an execution with its history.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let e = c.execution("0193…").await?;
    /// println!("{} after {} transitions", e.execution.status, e.events.len());
    /// # Ok(()) }
    /// ```
    pub async fn execution(&self, id: &str) -> Result<ExecutionDetail, Error> {
        self.get(&format!("/openapi/executions/{id}"), &[]).await
    }

    /// `GET /openapi/executions/{id}/logs`: a page of the lines its handler
    /// wrote, oldest first.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let mut page = kairos_client::PageRequest::first(500);
    /// loop {
    ///     let lines = c.execution_logs("0193…", &page).await?;
    ///     for l in &lines.items { println!("{} {} {}", l.at, l.level, l.message); }
    ///     match lines.next_cursor { Some(next) => page.cursor = Some(next), None => break }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn execution_logs(
        &self,
        id: &str,
        page: &PageRequest,
    ) -> Result<Page<LogLine>, Error> {
        self.get(&format!("/openapi/executions/{id}/logs"), &page.query())
            .await
    }

    /// Every log line of an execution stored so far (follows the cursors).
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// let lines = c.all_execution_logs("0193…").await?;
    /// # Ok(()) }
    /// ```
    pub async fn all_execution_logs(&self, id: &str) -> Result<Vec<LogLine>, Error> {
        let mut page = PageRequest::first(500);
        let mut all = Vec::new();
        loop {
            let got = self.execution_logs(id, &page).await?;
            all.extend(got.items);
            match got.next_cursor {
                Some(next) => page.cursor = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// `GET /openapi/workers`: every known worker.
    ///
    /// ```no_run
    /// # async fn f(c: kairos_client::Client) -> Result<(), kairos_client::Error> {
    /// for w in c.workers().await? {
    ///     println!("{} serves {:?}", w.worker_id, w.handlers);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn workers(&self) -> Result<Vec<Worker>, Error> {
        let list: List<Worker> = self.get("/openapi/workers", &[]).await?;
        Ok(list.items)
    }
}
