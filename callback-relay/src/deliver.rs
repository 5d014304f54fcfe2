//! One delivery attempt: guard the URL, POST the stored body with its
//! signature, and turn the answer into the attempt record and what follows.
//!
//! Answers: 2xx delivered; 410 dead at once; 429/503 retried after
//! `Retry-After` when given (up to the cap); a refused address dead at once;
//! anything else — other statuses (3xx included: redirects are not followed),
//! timeouts, connection errors, DNS failures — retried on the backoff
//! schedule until the give-up time.

use crate::backoff::{after_failure, parse_retry_after};
use crate::config::RelayConfig;
use crate::signature::sign_all;
use kairos_core::callback::{Callback, CallbackAttempt};
use kairos_core::store::CallbackNext;
use kairos_core::tenant::SigningSecrets;
use kairos_core::time::{Millis, now_ms};
use kairos_core::trace::{CallerTrace, Stage, TraceContext};
use kairos_netguard::{self as guard, GuardError};
use reqwest::{Client, StatusCode, header};
use std::time::{Duration, Instant};

/// `User-Agent` of every attempt.
pub const USER_AGENT: &str = concat!("kairos-callback-relay/", env!("CARGO_PKG_VERSION"));
/// Same on every attempt of one callback, so receivers can deduplicate.
pub const DELIVERY_ID_HEADER: &str = "Kairos-Delivery-Id";
/// 1-based number of this attempt of the delivery.
pub const DELIVERY_ATTEMPT_HEADER: &str = "Kairos-Delivery-Attempt";
/// `t=<unix seconds>,v1=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "Kairos-Signature";

/// The HTTP client every attempt shares (connection pool, TLS setup).
pub fn client(cfg: &RelayConfig) -> reqwest::Result<Client> {
    client_builder(cfg).build()
}

/// What [`client`] builds: the guard's resolver, the relay's user agent, and
/// no redirects followed (a receiver's redirect is an answer, not a new
/// target, so it can never lead a delivery to another address).
pub fn client_builder(cfg: &RelayConfig) -> reqwest::ClientBuilder {
    guard::client_builder(cfg.guard())
        .user_agent(USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
}

/// Status code, error text and ending of an attempt.
type Judged = (Option<u16>, Option<String>, Ending);

/// Most of a response body read so the connection can be reused; the body's
/// content is never used.
const DRAIN_LIMIT: usize = 64 * 1024;
/// Longest wait for that body: the answer is already known.
const DRAIN_TIME: Duration = Duration::from_secs(1);

/// How an attempt ended, before the schedule is applied.
#[derive(Debug)]
enum Ending {
    Delivered,
    /// Stop now: 410 or a refused URL.
    Dead,
    /// Retry; the receiver may have said when.
    Retry {
        retry_after: Option<Duration>,
    },
}

/// Makes attempt `callback.attempts + 1` and says what follows it.
pub async fn attempt(
    client: &Client,
    cfg: &RelayConfig,
    callback: &Callback,
    secrets: &SigningSecrets,
) -> (CallbackAttempt, CallbackNext) {
    let number = callback.attempts.saturating_add(1);
    let at = now_ms();
    let started = Instant::now();
    // One limit for the whole attempt: a hanging DNS lookup counts too.
    let result = tokio::time::timeout(
        cfg.request_timeout,
        send(client, cfg, callback, secrets, number),
    )
    .await;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (status_code, error, ending) = match result {
        Ok(Ok(response)) => {
            let judged = judge(response.status(), response.headers(), now_ms());
            drain(response).await;
            judged
        }
        Ok(Err(failed)) => failed,
        Err(_) => (
            None,
            Some(format!(
                "timed out after {:?} without an answer",
                cfg.request_timeout
            )),
            Ending::Retry { retry_after: None },
        ),
    };
    let (next, error) = match ending {
        Ending::Delivered => (CallbackNext::Delivered, error),
        Ending::Dead => (CallbackNext::Dead, error),
        Ending::Retry { retry_after } => {
            let next = after_failure(
                &cfg.backoff,
                number,
                callback.created_at,
                now_ms(),
                retry_after,
            );
            let error = match next {
                CallbackNext::Dead => Some(format!(
                    "{}; giving up: no retry fits within {:?} of the callback's creation",
                    error.as_deref().unwrap_or("failed"),
                    cfg.backoff.give_up_after
                )),
                _ => error,
            };
            (next, error)
        }
    };
    let record = CallbackAttempt {
        attempt: number,
        at,
        status_code,
        latency_ms,
        error,
    };
    (record, next)
}

/// W3C trace context header on every callback request.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// W3C vendor trace state, sent when the job's creator sent one.
pub const TRACESTATE_HEADER: &str = "tracestate";

/// The parent of a callback's span: the span the job's creator's trace
/// continues from (see [`kairos_core::trace::CallerTrace`]), if it sent one.
pub fn callback_parent(callback: &Callback) -> Option<TraceContext> {
    callback.trace.as_ref().and_then(CallerTrace::context)
}

/// The trace context of a callback, callback stage: in the trace of the
/// job's creator when it sent one, else in the execution's (a workflow
/// run's callback: in a trace of its own, derived from the run id).
pub fn callback_trace(callback: &Callback) -> Option<TraceContext> {
    TraceContext::for_stage(
        callback_parent(callback).as_ref(),
        callback.subject.key(),
        0,
        Stage::Callback,
    )
}

async fn send(
    client: &Client,
    cfg: &RelayConfig,
    callback: &Callback,
    secrets: &SigningSecrets,
    number: u32,
) -> Result<reqwest::Response, Judged> {
    // IP literals here; a name is checked by the client's resolver on the
    // addresses it connects to.
    if let Err(refusal) = guard::check_target(&callback.url, cfg.guard()) {
        return Err(refused(refusal));
    }
    let body = callback.payload.as_bytes();
    let mut keys: Vec<&[u8]> = vec![&secrets.current];
    keys.extend(secrets.previous.as_deref());
    let signature = sign_all(&keys, now_ms().div_euclid(1000), body);
    let mut request = client
        .post(&callback.url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(DELIVERY_ID_HEADER, &callback.id)
        .header(DELIVERY_ATTEMPT_HEADER, number.to_string())
        .header(SIGNATURE_HEADER, signature);
    // The execution's trace, so the receiver's spans join it.
    if let Some(trace) = callback_trace(callback) {
        request = request.header(TRACEPARENT_HEADER, trace.to_string());
    }
    if let Some(state) = callback
        .trace
        .as_ref()
        .and_then(|t| t.tracestate.as_deref())
    {
        request = request.header(TRACESTATE_HEADER, state);
    }
    let response = request.body(callback.payload.clone()).send().await;
    response.map_err(|e| match guard::refusal_in(&e) {
        Some(refusal) => refused(refusal.clone()),
        None => (
            e.status().map(|s| s.as_u16()),
            Some(error_chain(&e)),
            Ending::Retry { retry_after: None },
        ),
    })
}

/// Reads a short body so the pooled connection stays usable; a long or slow
/// one is abandoned (the connection is then closed), never waited for.
async fn drain(mut response: reqwest::Response) {
    let read = async {
        let mut seen = 0;
        while let Ok(Some(chunk)) = response.chunk().await {
            seen += chunk.len();
            if seen > DRAIN_LIMIT {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read).await;
}

fn refused(refusal: GuardError) -> Judged {
    let ending = if refusal.is_permanent() {
        Ending::Dead
    } else {
        Ending::Retry { retry_after: None }
    };
    (None, Some(refusal.to_string()), ending)
}

/// Classifies an answer by its status (and `Retry-After`); bodies are ignored.
fn judge(status: StatusCode, headers: &header::HeaderMap, now: Millis) -> Judged {
    let code = Some(status.as_u16());
    if status.is_success() {
        return (code, None, Ending::Delivered);
    }
    if status == StatusCode::GONE {
        return (
            code,
            Some("receiver answered 410 Gone: it wants no more deliveries".into()),
            Ending::Dead,
        );
    }
    let retry_after = match status {
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, now)),
        _ => None,
    };
    let error = if status.is_redirection() {
        let to = headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?");
        format!("receiver answered {status} to {to}; redirects are not followed")
    } else {
        format!("receiver answered {status}")
    };
    (code, Some(error), Ending::Retry { retry_after })
}

/// reqwest's own message is terse ("error sending request"); the causes say why.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairos_core::callback::CallbackState;

    fn answer(code: u16, extra: &[(&'static str, &str)]) -> Judged {
        let mut headers = header::HeaderMap::new();
        for (k, v) in extra {
            headers.insert(*k, v.parse().unwrap());
        }
        judge(StatusCode::from_u16(code).unwrap(), &headers, 0)
    }

    #[test]
    fn answers_are_classified() {
        assert!(matches!(
            answer(200, &[]),
            (Some(200), None, Ending::Delivered)
        ));
        assert!(matches!(answer(204, &[]).2, Ending::Delivered));
        assert!(matches!(answer(410, &[]).2, Ending::Dead));
        assert!(matches!(
            answer(503, &[("retry-after", "7")]).2,
            Ending::Retry { retry_after: Some(d) } if d == Duration::from_secs(7)
        ));
        assert!(matches!(
            answer(429, &[("retry-after", "Thu, 01 Jan 1970 00:00:09 GMT")]).2,
            Ending::Retry { retry_after: Some(d) } if d == Duration::from_secs(9)
        ));
        // Retry-After is only honoured where HTTP defines it for this purpose.
        assert!(matches!(
            answer(500, &[("retry-after", "7")]).2,
            Ending::Retry { retry_after: None }
        ));
        let (code, error, ending) = answer(302, &[("location", "http://10.0.0.1/")]);
        assert_eq!(code, Some(302));
        assert!(error.unwrap().contains("redirects are not followed"));
        assert!(matches!(ending, Ending::Retry { retry_after: None }));
    }

    fn secrets(cfg: &RelayConfig) -> SigningSecrets {
        SigningSecrets {
            current: cfg.secret().to_vec(),
            previous: None,
        }
    }

    fn callback(url: String) -> Callback {
        Callback {
            id: "cb-1".into(),
            subject: kairos_core::callback::CallbackSubject::Execution {
                execution_id: "e".into(),
                job_id: "j".into(),
            },
            tenant: "t".into(),
            url,
            payload: "{}".into(),
            state: CallbackState::Pending,
            attempts: 2,
            next_attempt_at: 0,
            last_error: None,
            created_at: now_ms(),
            trace: None,
        }
    }

    /// Paused time: the 10 s limit passes without waiting 10 s.
    #[tokio::test(start_paused = true)]
    async fn a_silent_receiver_times_out_and_is_retried() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/cb", listener.local_addr().unwrap());
        let mut cfg = RelayConfig::new("k", "r");
        cfg.callback_allow_private = true;
        cfg.backoff.jitter = false;
        let client = client(&cfg).unwrap();
        let before = now_ms();
        let (record, next) = attempt(&client, &cfg, &callback(url), &secrets(&cfg)).await;
        assert_eq!(record.attempt, 3);
        assert_eq!(record.status_code, None);
        assert!(record.error.unwrap().contains("timed out after 10s"));
        // Third attempt without jitter: 1 s · 2² later.
        match next {
            CallbackNext::RetryAt(at) => assert!(at >= before + 4_000 && at <= now_ms() + 4_000),
            other => panic!("expected a retry, got {other:?}"),
        }
        drop(listener);
    }

    #[tokio::test]
    async fn a_refused_address_is_dead_and_says_why() {
        let cfg = RelayConfig::new("k", "r");
        let client = client(&cfg).unwrap();
        let (record, next) = attempt(
            &client,
            &cfg,
            &callback("http://169.254.169.254/".into()),
            &secrets(&cfg),
        )
        .await;
        assert_eq!(next, CallbackNext::Dead);
        assert!(record.error.unwrap().contains("link-local"));
    }
}
