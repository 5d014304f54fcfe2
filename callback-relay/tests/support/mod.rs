//! Shared pieces of the relay tests: real stores with outbox rows made the way
//! the system makes them, a running relay, and a local HTTP receiver.

use kairos_callback_relay::deliver::{DELIVERY_ID_HEADER, SIGNATURE_HEADER};
use kairos_callback_relay::{BackoffPolicy, Relay, RelayConfig, verify};
use kairos_core::callback::{Callback, CallbackAttempt, CallbackState};
use kairos_core::job::{NewJob, RetryPolicy};
use kairos_core::protocol::{PROTOCOL_VERSION, ResultKind, ResultMsg};
use kairos_core::schedule::Schedule;
use kairos_core::store::DispatchScope;
use kairos_core::store::{CallbackStore, Claim, CreateOutcome, Dispatch, JobStore};
use kairos_core::time::now_ms;
use kairos_store_sql::SqlStore;
use kairos_testkit::{mysql_fresh_database, sqlite_temp_url, unique, wait_for};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate, matchers::method};

pub const SECRET: &[u8] = b"relay-test-secret";
pub const TENANT: &str = "t-relay";
pub const DEADLINE: Duration = Duration::from_secs(60);

// ---- store and rows -------------------------------------------------------

pub async fn store_at(url: &str) -> Arc<SqlStore> {
    let store = SqlStore::connect(url).await.expect("connect");
    store.migrate().await.expect("migrate");
    Arc::new(store)
}

pub async fn sqlite() -> (String, Arc<SqlStore>) {
    let url = sqlite_temp_url();
    let store = store_at(&url).await;
    (url, store)
}

pub async fn mysql() -> Option<(String, Arc<SqlStore>)> {
    let url = mysql_fresh_database().await?;
    let store = store_at(&url).await;
    Some((url, store))
}

/// Puts a callback into the outbox the way the system does: a job with a
/// callback URL, a claimed trigger, and a final result. Returns the execution id.
pub async fn finished_execution(store: &SqlStore, url: &str, kind: ResultKind) -> String {
    let now = now_ms();
    let job_id = uuid::Uuid::now_v7().to_string();
    let created = store
        .job_create(NewJob {
            execution_mode: Default::default(),
            trace: None,
            id: job_id.clone(),
            tenant: TENANT.into(),
            name: unique("cb"),
            handler: "noop".into(),
            params: serde_json::json!({}),
            sensitive_params: Vec::new(),
            schedule: Schedule::Once { at: now },
            next_trigger_at: now,
            callback_url: Some(url.to_string()),
            client_request_id: None,
            request_hash: None,
            retry: RetryPolicy::default(),
            timeout_ms: None,
            created_at: now,
            created_by: None,
            worker_group: None,
            priority: Default::default(),
            max_concurrency: None,
        })
        .await
        .expect("job_create");
    let CreateOutcome::Created(job) = created else {
        panic!("job already existed")
    };
    let execution_id = uuid::Uuid::now_v7().to_string();
    let work = store
        .triggers_claim(
            DispatchScope::All { fence: 1 },
            &[Claim {
                shard: Default::default(),
                job: std::sync::Arc::new(job),
                scheduled_at: now,
                next_trigger_at: None,
                execution_id: execution_id.clone(),
                worker_id: None,
            }],
            now,
        )
        .await
        .expect("triggers_claim")
        .work;
    assert_eq!(work.len(), 1, "trigger claimed");
    let (output, error) = match kind {
        ResultKind::Succeeded => (Some(serde_json::json!({"answer": 42})), None),
        _ => (None, Some("handler failed".to_string())),
    };
    store
        .results_apply(
            &[ResultMsg {
                started_at: None,
                traceparent: None,
                v: PROTOCOL_VERSION,
                execution_id: execution_id.clone(),
                attempt: 1,
                worker_id: "w-test".into(),
                kind,
                output,
                error,
                at: now,
                retryable: None,
                incarnation: None,
            }],
            now,
        )
        .await
        .expect("results_apply");
    execution_id
}

pub async fn only_callback(
    store: &SqlStore,
    execution_id: &str,
) -> (Callback, Vec<CallbackAttempt>) {
    let mut all = store
        .callbacks_for_execution(TENANT, execution_id)
        .await
        .expect("callbacks_for_execution");
    assert_eq!(all.len(), 1, "one callback per execution");
    all.remove(0)
}

pub async fn settled(
    store: &SqlStore,
    execution_id: &str,
    state: CallbackState,
) -> (Callback, Vec<CallbackAttempt>) {
    wait_for(
        &format!("callback of {execution_id} to be {state:?}"),
        DEADLINE,
        || async {
            let (cb, attempts) = only_callback(store, execution_id).await;
            (cb.state == state).then_some((cb, attempts))
        },
    )
    .await
}

// ---- relay ----------------------------------------------------------------

pub fn config(owner: &str) -> RelayConfig {
    let mut cfg = RelayConfig::new(std::str::from_utf8(SECRET).unwrap(), owner);
    cfg.callback_allow_private = true;
    cfg.request_timeout = Duration::from_secs(5);
    cfg.lease = Duration::from_secs(30);
    cfg.poll_interval = Duration::from_millis(100);
    cfg.backoff = BackoffPolicy {
        base: Duration::from_millis(20),
        factor: 2.0,
        cap: Duration::from_millis(100),
        give_up_after: Duration::from_secs(600),
        jitter: true,
    };
    cfg
}

pub struct Running {
    pub stop: CancellationToken,
    pub wake: Arc<Notify>,
    pub task: JoinHandle<()>,
}

pub fn start(store: Arc<SqlStore>, cfg: RelayConfig) -> Running {
    let relay = Relay::new(store, cfg).expect("relay config");
    let stop = CancellationToken::new();
    let wake = Arc::new(Notify::new());
    let (s, w) = (stop.clone(), wake.clone());
    let task = tokio::spawn(async move { relay.run(s, w).await.expect("relay run") });
    Running { stop, wake, task }
}

impl Running {
    pub async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("relay task");
    }
}

// ---- receiver -------------------------------------------------------------

/// Answers `fail_with` to the first `fail_first` attempts of every delivery, then 200.
pub struct FlakyReceiver {
    pub fail_first: u32,
    pub fail_with: u16,
    pub seen: Mutex<HashMap<String, u32>>,
}

impl Respond for FlakyReceiver {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let id = header(req, DELIVERY_ID_HEADER);
        let mut seen = self.seen.lock().unwrap();
        let n = seen.entry(id).or_default();
        *n += 1;
        if *n <= self.fail_first {
            ResponseTemplate::new(self.fail_with)
        } else {
            ResponseTemplate::new(200)
        }
    }
}

pub async fn receiver(responder: impl Respond + 'static) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(responder)
        .mount(&server)
        .await;
    server
}

pub fn header(req: &Request, name: &str) -> String {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

pub fn assert_signed(req: &Request) {
    let sig = header(req, SIGNATURE_HEADER);
    assert!(
        verify(SECRET, &sig, &req.body, now_ms() / 1000, 300),
        "invalid signature {sig:?}"
    );
}
