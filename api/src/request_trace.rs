//! The trace context of each request: the caller's W3C `traceparent` (and
//! `tracestate`) when it sent a valid one, else a fresh trace. The request's
//! span joins it, and a job created by the request keeps it, so that the
//! job's executions continue the caller's trace.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use kairos_core::trace::{CallerTrace, TraceContext};

/// The request's place in a trace, kept in the request's extensions.
#[derive(Debug, Clone)]
pub(crate) struct RequestTrace {
    /// The API's own span for this request.
    pub(crate) span: TraceContext,
    /// The caller's context, as sent (validated).
    pub(crate) caller: Option<CallerTrace>,
}

impl RequestTrace {
    /// From the request headers. An invalid `traceparent` is ignored (W3C
    /// asks receivers to restart the trace), never an error.
    pub(crate) fn from_headers(headers: &axum::http::HeaderMap) -> Self {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let caller = CallerTrace::from_headers(header("traceparent"), header("tracestate"));
        let span_id = rand::random::<u64>();
        let span = match caller.as_ref().and_then(CallerTrace::context) {
            Some(parent) => parent.child(span_id),
            None => TraceContext {
                trace_id: rand::random::<u128>().max(1),
                span_id: span_id.max(1),
                sampled: true,
            },
        };
        Self { span, caller }
    }

    /// What a job created by this request stores: the caller's trace with
    /// this request's span as the parent of the job's spans. `None` when
    /// the caller sent no trace (each execution then has its own).
    pub(crate) fn job_trace(&self) -> Option<CallerTrace> {
        self.caller.as_ref().map(|c| c.with_parent(self.span))
    }

    /// The request's span, with the trace fields named as in every process.
    pub(crate) fn make_span(&self, req: &Request) -> tracing::Span {
        let parent = self
            .caller
            .as_ref()
            .map(|c| c.traceparent.as_str())
            .unwrap_or_default();
        tracing::info_span!(
            "request",
            method = %req.method(),
            uri = %req.uri(),
            trace_id = %self.span.trace_id_hex(),
            traceparent = %self.span,
            parent = %parent,
        )
    }
}

/// Records the request's [`RequestTrace`] for the trace layer's span and the
/// handlers (it runs outside both).
pub(crate) async fn adopt(mut req: Request, next: Next) -> Response {
    let trace = RequestTrace::from_headers(req.headers());
    req.extensions_mut().insert(trace);
    next.run(req).await
}

/// Paths polled by orchestrators and scrapers: their requests are logged in
/// a span without a trace, so trace export is not flooded with them.
const PROBES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// The trace layer's span for `req`: the one its [`RequestTrace`] names.
pub(crate) fn span_for(req: &Request) -> tracing::Span {
    if PROBES.contains(&req.uri().path()) {
        return tracing::info_span!("request", method = %req.method(), uri = %req.uri());
    }
    match req.extensions().get::<RequestTrace>() {
        Some(t) => t.make_span(req),
        None => RequestTrace::from_headers(req.headers()).make_span(req),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderMap;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_caller_trace_is_adopted_with_the_request_span_as_parent() {
        let mut h = HeaderMap::new();
        h.insert("traceparent", TP.parse().unwrap());
        h.insert("tracestate", "congo=t61rcWkgMzE".parse().unwrap());
        let t = RequestTrace::from_headers(&h);
        assert_eq!(t.span.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(t.span.span_id, 0x00f0_67aa_0ba9_02b7);
        let job = t.job_trace().unwrap();
        assert_eq!(job.traceparent, t.span.to_string());
        assert_eq!(job.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
    }

    #[test]
    fn without_a_valid_traceparent_the_request_starts_its_own_trace() {
        let mut h = HeaderMap::new();
        h.insert("traceparent", "00-not-a-trace-01".parse().unwrap());
        let a = RequestTrace::from_headers(&h);
        let b = RequestTrace::from_headers(&HeaderMap::new());
        assert_eq!(a.job_trace(), None);
        assert_eq!(b.job_trace(), None);
        assert_ne!(a.span.trace_id, b.span.trace_id);
        assert_ne!(a.span.trace_id, 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736);
    }
}
