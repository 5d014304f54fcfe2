//! Optional OTLP/HTTP export of Kairos's spans (`KAIROS_OTLP_ENDPOINT`, or
//! the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), through the OpenTelemetry SDK's
//! batch processor and OTLP exporter (protobuf).
//!
//! Only spans that carry a W3C `traceparent` field are exported: the API's
//! `request`, the dispatcher's `dispatch` and `apply`, the worker's `attempt`
//! and the relay's `callback`. Each is exported with exactly the ids its
//! `traceparent` (and `parent`) fields name, which are the ids that travel in
//! the HTTP, AMQP and callback headers, so a tracing back end links the
//! processes and the caller's own spans. That is why this is a small layer
//! of its own rather than `tracing-opentelemetry`: that bridge gives every
//! span ids from the SDK's generator, and the SDK (0.33) cannot be handed
//! ids, but its span records can be built whole.
//!
//! A span ends when it was last exited, not when `tracing` closes it: a span
//! stays open while anything created inside it lives (a pooled connection, a
//! library's background task), which can be the whole life of the process.
//! Spans still open at shutdown are exported then, with that end time.

use kairos_core::trace::TraceContext;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor,
};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The Kairos setting naming the collector's base URL (`/v1/traces` is
/// appended unless present).
pub const ENDPOINT_VAR: &str = "KAIROS_OTLP_ENDPOINT";
/// The standard settings that also turn export on (the exporter reads them).
const OTEL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];

/// The full traces URL for a `KAIROS_OTLP_ENDPOINT` value.
fn traces_url(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_string()
    } else {
        format!("{base}/v1/traces")
    }
}

/// Traced spans not exported yet, by `tracing` span id.
type OpenSpans = Arc<Mutex<HashMap<u64, Open>>>;

/// The export pipeline of this process; [`Exporter::shutdown`] flushes it.
#[derive(Clone)]
pub struct Exporter {
    processor: Arc<BatchSpanProcessor>,
    scope: InstrumentationScope,
    open: OpenSpans,
}

impl Exporter {
    /// The exporter configured by the environment, `None` when no endpoint
    /// is set. `service` names the process (`kairos-api`, …) unless
    /// `OTEL_SERVICE_NAME` does. Build it outside any async runtime: the
    /// processor exports from a thread of its own with a blocking client.
    pub fn from_env(service: &str) -> Result<Option<Self>, String> {
        let kairos = std::env::var(ENDPOINT_VAR)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let standard = OTEL_VARS
            .iter()
            .any(|v| std::env::var(v).is_ok_and(|v| !v.trim().is_empty()));
        if kairos.is_none() && !standard {
            return Ok(None);
        }
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = &kairos {
            builder = builder.with_endpoint(traces_url(base));
        }
        let exporter = builder
            .build()
            .map_err(|e| format!("cannot set up OTLP export: {e}"))?;
        let service = std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| service.to_string());
        let mut processor = BatchSpanProcessor::builder(exporter).build();
        processor.set_resource(&Resource::builder().with_service_name(service).build());
        Ok(Some(Self {
            processor: Arc::new(processor),
            scope: InstrumentationScope::builder("kairos")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            open: OpenSpans::default(),
        }))
    }

    /// The `tracing` layer feeding this exporter.
    pub fn layer(&self) -> OtlpLayer {
        OtlpLayer {
            exporter: self.clone(),
        }
    }

    /// Hands one finished span to the batch processor.
    fn export(&self, open: Open) {
        let flags = TraceFlags::default().with_sampled(true);
        self.processor.on_end(SpanData {
            span_context: SpanContext::new(
                TraceId::from(open.context.trace_id),
                SpanId::from(open.context.span_id),
                flags,
                false,
                TraceState::default(),
            ),
            parent_span_id: open
                .parent
                .map_or(SpanId::INVALID, |p| SpanId::from(p.span_id)),
            // Every parent is another process's span (or the caller's).
            parent_span_is_remote: open.parent.is_some(),
            span_kind: kind(open.name),
            name: Cow::Borrowed(open.name),
            start_time: open.start,
            end_time: open.end.unwrap_or_else(SystemTime::now),
            attributes: open.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: self.scope.clone(),
        });
    }

    fn open_spans(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Open>> {
        // A panic elsewhere while holding the map leaves it usable.
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Exports what is buffered, spans still open included, and stops (at
    /// process exit).
    pub fn shutdown(&self) {
        let left: Vec<Open> = self.open_spans().drain().map(|(_, o)| o).collect();
        for open in left {
            self.export(open);
        }
        if let Err(e) = self.processor.shutdown() {
            eprintln!("kairos: flushing OTLP spans failed: {e}");
        }
    }
}

/// Turns traced spans (those with a `traceparent`) into OTLP spans.
pub struct OtlpLayer {
    exporter: Exporter,
}

/// Marks a span the layer tracks, so untraced ones cost no lock.
struct Traced;

/// What is kept of a traced span until it is exported.
struct Open {
    name: &'static str,
    context: TraceContext,
    parent: Option<TraceContext>,
    attributes: Vec<KeyValue>,
    start: SystemTime,
    /// When it was last exited.
    end: Option<SystemTime>,
}

/// Collects a span's fields: the W3C ones apart, the rest as attributes.
#[derive(Default)]
struct Fields {
    traceparent: Option<TraceContext>,
    parent: Option<TraceContext>,
    attributes: Vec<KeyValue>,
}

impl Fields {
    fn text(&mut self, field: &Field, value: String) {
        match field.name() {
            "traceparent" => self.traceparent = TraceContext::parse(&value),
            "parent" => self.parent = TraceContext::parse(&value),
            // The trace id is the span's own; no attribute repeats it.
            "trace_id" => {}
            name => self.attributes.push(KeyValue::new(name, value)),
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, format!("{value:?}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes.push(KeyValue::new(field.name(), value));
    }
}

/// How a back end should draw each of Kairos's spans.
fn kind(name: &str) -> SpanKind {
    match name {
        "request" => SpanKind::Server,
        "dispatch" => SpanKind::Producer,
        "attempt" | "apply" => SpanKind::Consumer,
        "callback" => SpanKind::Client,
        _ => SpanKind::Internal,
    }
}

impl<S> tracing_subscriber::Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        // Spans without a W3C context, and those the caller asked not to
        // sample, are not exported.
        let Some(context) = fields.traceparent.filter(|t| t.sampled) else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        span.extensions_mut().insert(Traced);
        let open = Open {
            name: span.name(),
            context,
            // A parent in another trace is no parent of this span.
            parent: fields.parent.filter(|p| p.trace_id == context.trace_id),
            attributes: fields.attributes,
            start: SystemTime::now(),
            end: None,
        };
        self.exporter.open_spans().insert(id.into_u64(), open);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if !traced(id, &ctx) {
            return;
        }
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(open) = self.exporter.open_spans().get_mut(&id.into_u64()) {
            open.attributes.extend(fields.attributes);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !traced(id, &ctx) {
            return;
        }
        if let Some(open) = self.exporter.open_spans().get_mut(&id.into_u64()) {
            open.end = Some(SystemTime::now());
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if !traced(&id, &ctx) {
            return;
        }
        let open = self.exporter.open_spans().remove(&id.into_u64());
        if let Some(open) = open {
            self.exporter.export(open);
        }
    }
}

/// Whether the layer tracks span `id`.
fn traced<S>(id: &Id, ctx: &Context<'_, S>) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    ctx.span(id)
        .is_some_and(|s| s.extensions().get::<Traced>().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kairos_endpoint_is_a_base_url() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(
            traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }

    #[test]
    fn spans_are_drawn_by_role() {
        assert_eq!(kind("request"), SpanKind::Server);
        assert_eq!(kind("dispatch"), SpanKind::Producer);
        assert_eq!(kind("attempt"), SpanKind::Consumer);
        assert_eq!(kind("callback"), SpanKind::Client);
        assert_eq!(kind("other"), SpanKind::Internal);
    }
}
