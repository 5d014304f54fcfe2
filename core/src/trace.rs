//! W3C trace context (`traceparent`) for one execution's path through the
//! system: claim and publish (dispatcher), run (worker), result apply
//! (dispatcher) and callback delivery (relay).
//!
//! The trace id *is* the execution id: a UUIDv7 is 128 bits, exactly a W3C
//! trace id, and every message on the path already carries it. So every
//! process derives the same trace without storing or forwarding anything, and
//! a callback receiver can join its own spans to it through the `traceparent`
//! header of the callback request. Each stage has its own span id, derived
//! from the execution id, the attempt and the stage name.

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

/// The `traceparent` header a dispatch of `msg` carries: the dispatcher's
/// span in the execution's trace. Brokers attach it to the message.
pub fn dispatch_traceparent(msg: &crate::protocol::DispatchMsg) -> Option<String> {
    TraceContext::for_execution(&msg.execution_id, msg.attempt, Stage::Dispatch)
        .map(|t| t.to_string())
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
}
