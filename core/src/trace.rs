//! W3C trace context (`traceparent`) for one execution's path through the
//! system: claim and publish (dispatcher), run (worker), result apply
//! (dispatcher) and callback delivery (relay).
//!
//! By default the trace id *is* the execution id: a UUIDv7 is 128 bits,
//! exactly a W3C trace id, and every message on the path already carries it.
//! So every process derives the same trace without storing or forwarding
//! anything, and a callback receiver can join its own spans to it through the
//! `traceparent` header of the callback request. A job created with a
//! `traceparent` header keeps that caller's trace instead ([`CallerTrace`],
//! stored with the job and carried in the dispatch message): every execution
//! of the job then lives in the caller's trace. Either way each stage has its
//! own span id, derived from the execution id, the attempt and the stage name.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Where on an execution's path a span belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The dispatcher publishing the attempt to a worker.
    Dispatch,
    /// The worker running the handler.
    Run,
    /// The dispatcher applying the worker's result.
    Apply,
    /// The relay delivering the callback.
    Callback,
}

impl Stage {
    fn as_str(self) -> &'static str {
        match self {
            Stage::Dispatch => "dispatch",
            Stage::Run => "run",
            Stage::Apply => "apply",
            Stage::Callback => "callback",
        }
    }
}

/// One W3C trace context: a trace id, a span id, and the sampled flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// 128-bit trace id; never zero.
    pub trace_id: u128,
    /// 64-bit id of the span this context names; never zero.
    pub span_id: u64,
    /// The `sampled` flag.
    pub sampled: bool,
}

impl TraceContext {
    /// The context of `stage` of `attempt` of the execution `execution_id`
    /// (a UUID). `None` if the id is not a UUID (or is the nil UUID).
    pub fn for_execution(execution_id: &str, attempt: u32, stage: Stage) -> Option<Self> {
        let trace_id = uuid::Uuid::parse_str(execution_id).ok()?.as_u128();
        if trace_id == 0 {
            return None;
        }
        let span_id = fnv1a(&[
            execution_id.as_bytes(),
            &attempt.to_be_bytes(),
            stage.as_str().as_bytes(),
        ])
        .max(1);
        Some(Self {
            trace_id,
            span_id,
            sampled: true,
        })
    }

    /// The context of `stage` of `attempt` of the execution `execution_id`,
    /// in the caller's trace when the job has one (the stage's span id is
    /// the same either way; the caller's `sampled` flag is kept), else in
    /// the execution's own trace ([`Self::for_execution`]).
    pub fn for_stage(
        caller: Option<&TraceContext>,
        execution_id: &str,
        attempt: u32,
        stage: Stage,
    ) -> Option<Self> {
        let own = Self::for_execution(execution_id, attempt, stage)?;
        Some(match caller {
            Some(c) => Self {
                trace_id: c.trace_id,
                span_id: own.span_id,
                sampled: c.sampled,
            },
            None => own,
        })
    }

    /// A new span in this context's trace: same trace id and flags, the
    /// given span id (a zero id is replaced by 1, never valid in W3C).
    pub fn child(&self, span_id: u64) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: span_id.max(1),
            sampled: self.sampled,
        }
    }

    /// The trace id as 32 lower-case hex digits (the form logs and
    /// tracing back ends show).
    pub fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// Parses a `traceparent` header value (version `00`; later versions are
    /// read by their first four fields, as the specification asks).
    pub fn parse(header: &str) -> Option<Self> {
        let mut parts = header.trim().split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        let rest = parts.next();
        if version.len() != 2 || version == "ff" || (version == "00" && rest.is_some()) {
            return None;
        }
        let lower_hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !lower_hex(version, 2)
            || !lower_hex(trace, 32)
            || !lower_hex(span, 16)
            || !lower_hex(flags, 2)
        {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok()?;
        let span_id = u64::from_str_radix(span, 16).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        if trace_id == 0 || span_id == 0 {
            return None;
        }
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

/// The trace context a caller sent with a create (`traceparent` and
/// `tracestate` headers), stored with the job and carried in its dispatch
/// messages, so that every stage of its executions joins the caller's trace.
/// Serialized as `{"traceparent": "…", "tracestate": "…"}` (the stored and
/// the wire form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallerTrace {
    /// A valid `traceparent`: the span the job's spans descend from.
    pub traceparent: String,
    /// The caller's `tracestate`, passed on untouched when it is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl CallerTrace {
    /// The trace context from request headers: `None` when `traceparent` is
    /// absent or invalid (an invalid one is ignored, as W3C asks; it is not
    /// an error). An invalid `tracestate` is dropped, the `traceparent` kept.
    pub fn from_headers(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<Self> {
        let parent = TraceContext::parse(traceparent?)?;
        Some(Self {
            traceparent: parent.to_string(),
            tracestate: tracestate.and_then(valid_tracestate),
        })
    }

    /// The same trace with another parent span (the API's own request span
    /// stands between the caller and the job's spans).
    pub fn with_parent(&self, parent: TraceContext) -> Self {
        Self {
            traceparent: parent.to_string(),
            tracestate: self.tracestate.clone(),
        }
    }

    /// The parent context; `None` if the stored value is not valid (read
    /// from a row or a message that some other program wrote).
    pub fn context(&self) -> Option<TraceContext> {
        TraceContext::parse(&self.traceparent)
    }
}

/// Longest `tracestate` kept (W3C: at most 32 members of at most 256 bytes;
/// vendors are asked to keep it under 512, and propagators may drop more).
const MAX_TRACESTATE: usize = 512;

/// `tracestate` trimmed of optional white space around members when it is a
/// W3C list: 1 to 32 `key=value` members, printable ASCII, no `,` or `=` in
/// values, at most 512 bytes. `None` otherwise (or when empty).
fn valid_tracestate(raw: &str) -> Option<String> {
    let members: Vec<&str> = raw
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    if members.is_empty() || members.len() > 32 {
        return None;
    }
    let key_ok = |k: &str| {
        !k.is_empty()
            && k.len() <= 256
            && k.bytes().all(|b| {
                b.is_ascii_lowercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'-' | b'*' | b'/' | b'@')
            })
    };
    let value_ok = |v: &str| {
        !v.is_empty()
            && v.len() <= 256
            && !v.ends_with(' ')
            && v.bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
    };
    for m in &members {
        let (k, v) = m.split_once('=')?;
        if !key_ok(k) || !value_ok(v) {
            return None;
        }
    }
    let out = members.join(",");
    (out.len() <= MAX_TRACESTATE).then_some(out)
}

/// The `traceparent` header a dispatch of `msg` carries: the dispatcher's
/// span in the job's trace (the caller's, else the execution's). Brokers
/// attach it to the message.
pub fn dispatch_traceparent(msg: &crate::protocol::DispatchMsg) -> Option<String> {
    let caller = msg.trace.as_ref().and_then(CallerTrace::context);
    TraceContext::for_stage(
        caller.as_ref(),
        &msg.execution_id,
        msg.attempt,
        Stage::Dispatch,
    )
    .map(|t| t.to_string())
}

/// The `tracestate` header a dispatch of `msg` carries: the caller's, if any.
pub fn dispatch_tracestate(msg: &crate::protocol::DispatchMsg) -> Option<&str> {
    msg.trace.as_ref().and_then(|t| t.tracestate.as_deref())
}

/// Formats as a `traceparent` header value.
impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }
}

/// 64-bit FNV-1a over the parts: a stable, dependency-free span id.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash ^= 0xff;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXEC: &str = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

    #[test]
    fn every_stage_shares_the_execution_trace() {
        let d = TraceContext::for_execution(EXEC, 1, Stage::Dispatch).unwrap();
        let r = TraceContext::for_execution(EXEC, 1, Stage::Run).unwrap();
        let c = TraceContext::for_execution(EXEC, 1, Stage::Callback).unwrap();
        assert_eq!(d.trace_id_hex(), "0193a1b2c3d47e5f8a9b0c1d2e3f4a5b");
        assert_eq!(d.trace_id, r.trace_id);
        assert_eq!(r.trace_id, c.trace_id);
        assert_ne!(d.span_id, r.span_id);
        assert_ne!(
            r.span_id,
            TraceContext::for_execution(EXEC, 2, Stage::Run)
                .unwrap()
                .span_id
        );
        assert_eq!(
            TraceContext::for_execution("not-a-uuid", 1, Stage::Run),
            None
        );
    }

    #[test]
    fn traceparent_round_trips_and_bad_values_are_refused() {
        let t = TraceContext::for_execution(EXEC, 3, Stage::Callback).unwrap();
        let text = t.to_string();
        assert!(
            text.starts_with("00-0193a1b2c3d47e5f8a9b0c1d2e3f4a5b-"),
            "{text}"
        );
        assert!(text.ends_with("-01"), "{text}");
        assert_eq!(TraceContext::parse(&text), Some(t));
        let w3c = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let p = TraceContext::parse(w3c).unwrap();
        assert_eq!(p.to_string(), w3c);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_caller_trace_keeps_its_trace_id_and_flags_with_stage_span_ids() {
        let caller =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
        let own = TraceContext::for_execution(EXEC, 2, Stage::Run).unwrap();
        let t = TraceContext::for_stage(Some(&caller), EXEC, 2, Stage::Run).unwrap();
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.span_id, own.span_id);
        assert!(!t.sampled, "the caller's sampled flag is kept");
        assert_eq!(
            TraceContext::for_stage(None, EXEC, 2, Stage::Run),
            Some(own)
        );
        assert_eq!(
            TraceContext::for_stage(Some(&caller), "x", 2, Stage::Run),
            None
        );
        assert_eq!(caller.child(0).span_id, 1);
        assert_eq!(caller.child(7).trace_id, caller.trace_id);
    }

    #[test]
    fn caller_headers_are_validated_and_bad_ones_ignored() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let t =
            CallerTrace::from_headers(Some(tp), Some("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"))
                .unwrap();
        assert_eq!(t.traceparent, tp);
        assert_eq!(
            t.tracestate.as_deref(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        );
        assert_eq!(
            t.context().unwrap().trace_id_hex(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        // A bad traceparent drops everything; a bad tracestate only itself.
        assert_eq!(CallerTrace::from_headers(Some("00-zz"), Some("a=b")), None);
        assert_eq!(CallerTrace::from_headers(None, Some("a=b")), None);
        for bad in ["", "novalue", "a=b,=c", "A=b", "a=b=c", "a=\u{7f}"] {
            let t = CallerTrace::from_headers(Some(tp), Some(bad)).unwrap();
            assert_eq!(t.tracestate, None, "{bad:?}");
        }
        let many = (0..33)
            .map(|i| format!("k{i}=v"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            CallerTrace::from_headers(Some(tp), Some(&many))
                .unwrap()
                .tracestate,
            None
        );
        // The stored form round-trips and names the headers.
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"traceparent\""), "{json}");
        assert_eq!(serde_json::from_str::<CallerTrace>(&json).unwrap(), t);
        let plain = CallerTrace::from_headers(Some(tp), None).unwrap();
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            format!("{{\"traceparent\":\"{tp}\"}}")
        );
    }
}
