//! The worker protocol: JSON messages on the broker, and the names of every
//! exchange, queue and Redis key. Any program that speaks this is a worker.
//!
//! All names hang off a namespace (default `kairos`), so several deployments —
//! or parallel test runs — can share one RabbitMQ vhost and one Redis db.

use crate::time::Millis;
use crate::worker::WorkerState;
use serde::{Deserialize, Serialize};

/// Version written into every message; readers refuse other major versions.
pub const PROTOCOL_VERSION: u32 = 1;

/// Most dispatches one worker-queue message may carry, whatever a worker
/// offers (its heartbeat's `dispatch_batch`).
pub const MAX_DISPATCH_BATCH: u32 = 256;

/// Heartbeats older than this are dropped by the broker, so beats published
/// while no dispatcher runs do not pile up.
pub const HEARTBEAT_TTL: std::time::Duration = std::time::Duration::from_secs(30);

/// Longest incarnation id the scheduler keeps; a longer one (or an empty
/// one) is treated as absent, as from a legacy worker.
pub const MAX_INCARNATION_LEN: usize = 128;

/// An incarnation id as the scheduler uses it: `None` when absent, empty or
/// longer than [`MAX_INCARNATION_LEN`].
pub fn incarnation_id(raw: &Option<String>) -> Option<&str> {
    raw.as_deref()
        .filter(|s| !s.is_empty() && s.len() <= MAX_INCARNATION_LEN)
}

/// Dispatcher → worker: run one attempt of one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchMsg {
    /// Protocol version.
    pub v: u32,
    /// Execution id (UUIDv7 text).
    pub execution_id: String,
    /// Job id.
    pub job_id: String,
    /// Attempt number from 1; with `execution_id` the idempotency key.
    pub attempt: u32,
    /// Handler name.
    pub handler: String,
    /// Handler input.
    pub params: serde_json::Value,
    /// Due time of the trigger (ms UTC).
    pub scheduled_at: Millis,
    /// Time limit for the handler, if any.
    pub timeout_ms: Option<u64>,
    /// Worker group the job asked for (`workerGroup`); only workers of that
    /// group may run it. Informative for workers; dispatchers read it when a
    /// refused dispatch is rerouted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The trace the job's creator asked it to join (`traceparent` sent
    /// with the create), absent otherwise. The message's `traceparent`
    /// header is then the dispatcher's span in that trace; workers may
    /// ignore this field and read the header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::CallerTrace>,
    /// The job's priority, 0 (lowest) to 9; absent from older dispatchers
    /// (then 5). Brokers deliver higher priorities first from a worker's
    /// queue; workers may ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<crate::priority::Priority>,
    /// Which part of a broadcast or sharded trigger this execution runs
    /// (`{"index": i, "count": n}`); absent for a single job, which is
    /// shard 0 of 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::Shard>,
    /// Someone waits for this attempt (an immediate-lane job or a retry);
    /// brokers deliver it before scheduled work of the same priority.
    /// Absent means `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immediate: bool,
    /// A workflow node's parents' outputs: an object keyed by parent node
    /// id, each the output its execution reported (`null` if none). Absent
    /// for executions that are not workflow nodes, and for root nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_outputs: Option<serde_json::Value>,
}

impl DispatchMsg {
    /// The priority the message asks for (the default when absent).
    pub fn priority(&self) -> crate::priority::Priority {
        self.priority.unwrap_or_default()
    }
}

/// The broker priority of one message carrying `msgs` (see
/// [`crate::priority::delivery_rank`]): its most urgent dispatch's (the
/// claim loops batch one priority and lane at a time, so a batch rarely
/// mixes).
pub fn batch_rank(msgs: &[DispatchMsg]) -> u8 {
    msgs.iter()
        .map(|m| crate::priority::delivery_rank(m.priority(), m.immediate))
        .max()
        .unwrap_or_else(|| crate::priority::delivery_rank(Default::default(), false))
}

/// What a result reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    /// The worker took the attempt and is running the handler.
    Started,
    /// The handler succeeded; `output` holds its result.
    Succeeded,
    /// The handler failed; `error` says why.
    Failed,
    /// The handler exceeded `timeout_ms` and was stopped.
    TimedOut,
}

/// Worker → dispatchers: progress or outcome of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultMsg {
    /// Protocol version.
    pub v: u32,
    /// Execution id.
    pub execution_id: String,
    /// Attempt the result belongs to; results for other attempts are ignored.
    pub attempt: u32,
    /// Reporting worker.
    pub worker_id: String,
    /// What happened.
    pub kind: ResultKind,
    /// Handler output (success).
    #[serde(default)]
    pub output: Option<serde_json::Value>,
    /// Error text (failure, timeout).
    #[serde(default)]
    pub error: Option<String>,
    /// On a `failed` result: `false` says a retry cannot help (bad params, a
    /// permanent refusal), so the failure is final whatever attempts the job
    /// has left. Absent or `true`: retried per the job's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    /// When it happened on the worker (ms UTC).
    pub at: Millis,
    /// The reporting worker process (see [`HeartbeatMsg::incarnation`]). A
    /// result from an incarnation that a later one of the same worker id has
    /// replaced changes nothing. Absent from legacy workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// The worker's span for this attempt (W3C `traceparent`), so that the
    /// dispatcher applying the result stays in the attempt's trace. Absent
    /// from workers that do not trace: the execution's own trace is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// On a final result: when the handler started (ms UTC), so that the
    /// execution records it even when its `started` report is applied after
    /// this one (dispatchers compete for the results queue). Absent from
    /// legacy workers and on `started` itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Millis>,
}

/// The body of one message on the results queue: a single result object, or
/// an array of them when a worker reports many attempts at once (Kairos
/// workers batch whatever is ready while the previous publish is confirmed).
/// One object for one result keeps the body every worker has always sent.
pub fn encode_results(msgs: &[ResultMsg]) -> serde_json::Result<Vec<u8>> {
    encode_one_or_many(msgs)
}

/// Reads a results-queue body written by [`encode_results`] or by any worker
/// that sends one object per message.
pub fn decode_results(payload: &[u8]) -> serde_json::Result<Vec<ResultMsg>> {
    decode_one_or_many(payload)
}

/// The body of one message on a worker queue: a single dispatch object, or
/// an array of them for a worker whose heartbeats offer a
/// [`HeartbeatMsg::dispatch_batch`] above one. Every other worker only ever
/// gets the single object.
pub fn encode_dispatches(msgs: &[DispatchMsg]) -> serde_json::Result<Vec<u8>> {
    encode_one_or_many(msgs)
}

/// Reads a worker-queue body written by [`encode_dispatches`].
pub fn decode_dispatches(payload: &[u8]) -> serde_json::Result<Vec<DispatchMsg>> {
    decode_one_or_many(payload)
}

fn encode_one_or_many<T: Serialize>(msgs: &[T]) -> serde_json::Result<Vec<u8>> {
    match msgs {
        [one] => serde_json::to_vec(one),
        many => serde_json::to_vec(many),
    }
}

fn decode_one_or_many<T: serde::de::DeserializeOwned>(
    payload: &[u8],
) -> serde_json::Result<Vec<T>> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany<T> {
        One(T),
        Many(Vec<T>),
    }
    Ok(match serde_json::from_slice(payload)? {
        OneOrMany::One(m) => vec![m],
        OneOrMany::Many(ms) => ms,
    })
}

/// An attempt a worker holds: running, or accepted and waiting for a slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeldRef {
    /// Execution id.
    pub execution_id: String,
    /// Attempt number.
    pub attempt: u32,
}

/// Worker → dispatchers, every few seconds: registration and load figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeartbeatMsg {
    /// Protocol version.
    pub v: u32,
    /// Stable worker id.
    pub worker_id: String,
    /// Queue the worker consumes.
    pub queue: String,
    /// Handlers it can run in parallel.
    pub capacity: u32,
    /// Handlers running now.
    pub active: u32,
    /// Mean handler duration over a recent window.
    pub avg_cost_ms: f64,
    /// CPU idle percentage, 0–100.
    pub cpu_idle: f64,
    /// Lifecycle state.
    pub state: WorkerState,
    /// When the figures were taken (ms UTC).
    pub at: Millis,
    /// Handler names the worker serves; `None` (absent or null) is a legacy
    /// worker, taken to serve every handler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handlers: Option<Vec<String>>,
    /// Worker group, if any: jobs that name a `workerGroup` run only on
    /// workers of that group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Fresh random id of this worker process, new at every start. A worker
    /// id seen with a new incarnation was restarted: what the previous
    /// process held is recovered at once. Absent from legacy workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// Every attempt the worker holds when the figures were taken (running
    /// and buffered). Dispatchers recover attempts the database gives this
    /// worker that it no longer lists. Absent (`None`) from legacy workers,
    /// which are then not reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Vec<HeldRef>>,
    /// Most dispatches the worker takes in one message (an array body, see
    /// [`encode_dispatches`]): a burst then costs one persistent message and
    /// one ack per batch instead of per attempt. Absent, 0 or 1: one dispatch
    /// object per message, as every worker has always read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch_batch: Option<u32>,
    /// Whether the worker also consumes its immediate queue
    /// ([`Names::immediate_queue`]), with a prefetch window of its own:
    /// dispatches marked `immediate` are then sent there. Absent or false:
    /// everything comes through the main queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub immediate_queue: bool,
}

impl HeartbeatMsg {
    /// The owner a worker writes into its attempt keys: `<worker_id>` for a
    /// legacy worker, `<worker_id> <incarnation>` otherwise, so the keys of
    /// one incarnation can be given back without touching the next one's.
    pub fn key_owner(worker_id: &str, incarnation: Option<&str>) -> String {
        match incarnation {
            Some(inc) => format!("{worker_id} {inc}"),
            None => worker_id.to_string(),
        }
    }
}

/// Severity of an execution log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    /// Fine-grained detail.
    Debug,
    /// Normal progress.
    Info,
    /// Something odd, the handler carries on.
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "debug" => Some(LogLevel::Debug),
            "info" => Some(LogLevel::Info),
            "warn" => Some(LogLevel::Warn),
            "error" => Some(LogLevel::Error),
            _ => None,
        }
    }
}

/// One line a handler wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    /// When it was written on the worker (ms UTC).
    pub at: Millis,
    /// Severity.
    pub level: LogLevel,
    /// The text.
    pub message: String,
}

/// Worker → dispatchers (queue `<ns>.logs`): log lines and the latest progress
/// figure of one attempt, batched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogMsg {
    /// Protocol version.
    pub v: u32,
    /// Execution id.
    pub execution_id: String,
    /// Attempt the lines belong to.
    pub attempt: u32,
    /// Reporting worker.
    pub worker_id: String,
    /// Lines, oldest first (may be empty when only progress changed).
    #[serde(default)]
    pub lines: Vec<LogLine>,
    /// Latest progress, 0–100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<f64>,
}

/// Names of every exchange, queue and key, under one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    ns: String,
}

impl Default for Names {
    fn default() -> Self {
        Self::new("kairos")
    }
}

impl Names {
    /// Names under namespace `ns` (e.g. `kairos`, or a unique one per test).
    pub fn new(ns: impl Into<String>) -> Self {
        Self { ns: ns.into() }
    }

    /// The namespace itself.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// Direct exchange that routes dispatches by worker id.
    pub fn dispatch_exchange(&self) -> String {
        format!("{}.dispatch", self.ns)
    }

    /// A worker's queue; its routing key is the worker id.
    pub fn worker_queue(&self, worker_id: &str) -> String {
        format!("{}.worker.{worker_id}", self.ns)
    }

    /// A worker's immediate queue (see [`crate::broker::DispatchQueue`]),
    /// published to through the default exchange. Its prefix differs from
    /// [`Names::worker_queue`]'s, so no worker id can name another's queue.
    pub fn immediate_queue(&self, worker_id: &str) -> String {
        format!("{}.immediate.{worker_id}", self.ns)
    }

    /// One of a worker's dispatch queues.
    pub fn dispatch_queue(&self, worker_id: &str, queue: crate::broker::DispatchQueue) -> String {
        match queue {
            crate::broker::DispatchQueue::Main => self.worker_queue(worker_id),
            crate::broker::DispatchQueue::Immediate => self.immediate_queue(worker_id),
        }
    }

    /// The worker id behind a queue name from [`Names::worker_queue`] or
    /// [`Names::immediate_queue`].
    pub fn worker_of_queue<'a>(&self, queue: &'a str) -> Option<&'a str> {
        let rest = queue.strip_prefix(&self.ns)?;
        rest.strip_prefix(".worker.")
            .or_else(|| rest.strip_prefix(".immediate."))
    }

    /// Dead-letter exchange of worker queues.
    pub fn reroute_exchange(&self) -> String {
        format!("{}.reroute", self.ns)
    }

    /// Queue behind the dead-letter exchange; dispatchers pick another worker.
    pub fn reroute_queue(&self) -> String {
        format!("{}.reroute", self.ns)
    }

    /// Queue of results, consumed by every dispatcher.
    pub fn results_queue(&self) -> String {
        format!("{}.results", self.ns)
    }

    /// Queue of worker heartbeats, consumed by every dispatcher.
    pub fn heartbeats_queue(&self) -> String {
        format!("{}.heartbeats", self.ns)
    }

    /// Queue of execution log lines, consumed by every dispatcher.
    pub fn logs_queue(&self) -> String {
        format!("{}.logs", self.ns)
    }

    /// Redis key of a named leader lease.
    pub fn lease_key(&self, lease: &str) -> String {
        format!("{}:lease:{lease}", self.ns)
    }

    /// Redis key of a lease's fencing counter.
    pub fn fence_key(&self, lease: &str) -> String {
        format!("{}:lease:{lease}:fence", self.ns)
    }

    /// Redis key that lets exactly one worker run an attempt.
    pub fn attempt_key(&self, execution_id: &str, attempt: u32) -> String {
        format!("{}:attempt:{execution_id}:{attempt}", self.ns)
    }

    /// Redis key whose presence asks the worker running an attempt to stop it.
    pub fn stop_key(&self, execution_id: &str, attempt: u32) -> String {
        format!("{}:stop:{execution_id}:{attempt}", self.ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_queue_names_round_trip() {
        let n = Names::new("t1");
        assert_eq!(n.worker_queue("w-1"), "t1.worker.w-1");
        assert_eq!(n.worker_of_queue("t1.worker.w-1"), Some("w-1"));
        assert_eq!(n.worker_of_queue("t2.worker.w-1"), None);
        assert_eq!(n.immediate_queue("w-1"), "t1.immediate.w-1");
        assert_eq!(n.worker_of_queue("t1.immediate.w-1"), Some("w-1"));
        // A worker named like another's immediate queue keeps its own.
        let tricky = n.worker_queue("x.immediate.w-1");
        assert_ne!(tricky, n.immediate_queue("w-1"));
        assert_eq!(n.worker_of_queue(&tricky), Some("x.immediate.w-1"));
    }

    #[test]
    fn result_json_is_the_documented_shape() {
        let r = ResultMsg {
            started_at: None,
            traceparent: None,
            v: PROTOCOL_VERSION,
            execution_id: "e".into(),
            attempt: 2,
            worker_id: "w".into(),
            kind: ResultKind::TimedOut,
            output: None,
            error: Some("late".into()),
            retryable: None,
            at: 7,
            incarnation: None,
        };
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["kind"], "timed_out");
        assert_eq!(json["attempt"], 2);
        let minimal =
            r#"{"v":1,"execution_id":"e","attempt":1,"worker_id":"w","kind":"started","at":1}"#;
        let parsed: ResultMsg = serde_json::from_str(minimal).unwrap();
        assert_eq!(parsed.kind, ResultKind::Started);
        assert_eq!(parsed.incarnation, None);
        assert!(json.get("incarnation").is_none(), "legacy shape unchanged");
        assert!(json.get("retryable").is_none(), "absent unless said");
    }

    #[test]
    fn results_travel_as_one_object_or_an_array() {
        let r = |attempt| ResultMsg {
            started_at: None,
            v: PROTOCOL_VERSION,
            execution_id: "e".into(),
            attempt,
            worker_id: "w".into(),
            kind: ResultKind::Started,
            output: None,
            error: None,
            retryable: None,
            at: 1,
            incarnation: None,
            traceparent: None,
        };
        let one = encode_results(&[r(1)]).unwrap();
        assert_eq!(
            one.first(),
            Some(&b'{'),
            "a single result is the plain object"
        );
        assert_eq!(decode_results(&one).unwrap(), vec![r(1)]);
        let many = encode_results(&[r(1), r(2), r(3)]).unwrap();
        assert_eq!(many.first(), Some(&b'['));
        assert_eq!(decode_results(&many).unwrap(), vec![r(1), r(2), r(3)]);
        assert!(decode_results(b"{\"v\":1}").is_err(), "not a result");
        assert!(decode_results(b"[1]").is_err());
    }

    #[test]
    fn dispatches_travel_as_one_object_or_an_array() {
        let d = |attempt| DispatchMsg {
            v: PROTOCOL_VERSION,
            execution_id: "e".into(),
            job_id: "j".into(),
            attempt,
            handler: "noop".into(),
            params: serde_json::Value::Null,
            scheduled_at: 1,
            timeout_ms: None,
            group: None,
            trace: None,
            priority: None,
            shard: None,
            immediate: false,
            parent_outputs: None,
        };
        let one = encode_dispatches(&[d(1)]).unwrap();
        assert_eq!(
            one.first(),
            Some(&b'{'),
            "a single dispatch is the plain object"
        );
        assert_eq!(decode_dispatches(&one).unwrap(), vec![d(1)]);
        let many = encode_dispatches(&[d(1), d(2)]).unwrap();
        assert_eq!(many.first(), Some(&b'['));
        assert_eq!(decode_dispatches(&many).unwrap(), vec![d(1), d(2)]);
        let beat = r#"{"v":1,"worker_id":"w","queue":"q","capacity":1,"active":0,
            "avg_cost_ms":0,"cpu_idle":100,"state":"online","at":1,"dispatch_batch":32}"#;
        let beat: HeartbeatMsg = serde_json::from_str(beat).unwrap();
        assert_eq!(beat.dispatch_batch, Some(32));
    }

    #[test]
    fn heartbeats_without_handlers_are_legacy_workers() {
        let old = r#"{"v":1,"worker_id":"w","queue":"q","capacity":1,"active":0,
            "avg_cost_ms":0,"cpu_idle":100,"state":"online","at":1}"#;
        let beat: HeartbeatMsg = serde_json::from_str(old).unwrap();
        assert_eq!(beat.handlers, None);
        assert_eq!(beat.group, None);
        assert_eq!(beat.dispatch_batch, None, "one dispatch per message");
        let new = r#"{"v":1,"worker_id":"w","queue":"q","capacity":1,"active":0,
            "avg_cost_ms":0,"cpu_idle":100,"state":"online","at":1,
            "handlers":["noop"],"group":"edge","incarnation":"x"}"#;
        let beat: HeartbeatMsg = serde_json::from_str(new).unwrap();
        assert_eq!(beat.handlers, Some(vec!["noop".to_string()]));
        assert_eq!(beat.group.as_deref(), Some("edge"));
    }

    #[test]
    fn log_messages_are_the_documented_shape() {
        let json = r#"{"v":1,"execution_id":"e","attempt":1,"worker_id":"w-1",
            "lines":[{"at":5,"level":"info","message":"hi"}],"progress":50.0}"#;
        let m: LogMsg = serde_json::from_str(json).unwrap();
        assert_eq!(m.lines[0].level, LogLevel::Info);
        assert_eq!(m.progress, Some(50.0));
        let bare: LogMsg =
            serde_json::from_str(r#"{"v":1,"execution_id":"e","attempt":1,"worker_id":"w"}"#)
                .unwrap();
        assert!(bare.lines.is_empty() && bare.progress.is_none());
    }

    #[test]
    fn heartbeat_incarnation_and_held_are_optional() {
        let legacy = r#"{"v":1,"worker_id":"w","queue":"q","capacity":2,"active":0,
            "avg_cost_ms":0,"cpu_idle":100,"state":"online","at":1}"#;
        let b: HeartbeatMsg = serde_json::from_str(legacy).unwrap();
        assert_eq!((b.incarnation.as_deref(), b.held.as_ref()), (None, None));
        let new = r#"{"v":1,"worker_id":"w","queue":"q","capacity":2,"active":1,
            "avg_cost_ms":0,"cpu_idle":100,"state":"online","at":1,"incarnation":"i-1",
            "held":[{"execution_id":"e","attempt":2}]}"#;
        let b: HeartbeatMsg = serde_json::from_str(new).unwrap();
        assert_eq!(b.incarnation.as_deref(), Some("i-1"));
        assert_eq!(
            b.held,
            Some(vec![HeldRef {
                execution_id: "e".into(),
                attempt: 2
            }])
        );
        assert_eq!(HeartbeatMsg::key_owner("w", Some("i-1")), "w i-1");
        assert_eq!(HeartbeatMsg::key_owner("w", None), "w");
        assert_eq!(incarnation_id(&Some(String::new())), None);
        assert_eq!(incarnation_id(&Some("x".repeat(129))), None);
        assert_eq!(incarnation_id(&Some("i".into())), Some("i"));
    }
}
