//! The OTLP/HTTP (protobuf) exporter behind the spans: a batch processor on the tokio runtime
//! (no thread of its own), the configured sampler and `service.name`.
//!
//! Takes the `[telemetry]` section; gives the `tracing` layer that turns spans into OTel spans
//! and the [`Otel`] handle that flushes them at shutdown. Refuses nothing but an exporter the
//! crate cannot build. A failed export (a collector down) loses its batch without a log line
//! (the SDK is built without its internal logs), counted in `/metrics` (`counted.rs`); a full
//! queue drops spans, never blocks a request. The `OTEL_EXPORTER_OTLP_HEADERS` and
//! `OTEL_BSP_*` variables of the OTel SDK apply. A span goes out without the `tracestate` of
//! its context: that is a client's text (bounded and validated, `tracestate.rs`), carried
//! upstream and never to the collector.

use std::time::Duration;

use opentelemetry::trace::{SpanContext, TraceState, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};

use crate::config::Telemetry;

/// How long an export may take, and shutdown may wait for the last batch.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The running exporter.
pub struct Otel {
    provider: SdkTracerProvider,
}

/// Builds the exporter and the layer for the subscriber; registers the W3C trace-context
/// propagator and the provider globally (the spans `trace.rs` builds directly use it).
pub fn start<S>(
    t: &Telemetry,
) -> Result<
    (
        Otel,
        tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
    ),
    String,
>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(t.otlp_endpoint.clone())
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| format!("[telemetry]: cannot build the OTLP exporter: {e}"))?;
    let processor =
        opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(
            WithoutTraceState(super::counted::Counted(exporter)),
            opentelemetry_sdk::runtime::Tokio,
        )
        .build();
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(t.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            t.sampling_ratio,
        ))))
        .with_resource(resource)
        .build();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    opentelemetry::global::set_tracer_provider(provider.clone());
    let tracer = provider.tracer(super::trace::TRACER);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false);
    Ok((Otel { provider }, layer))
}

impl Otel {
    /// Exports what is queued and stops (bounded by the export timeout).
    pub async fn shutdown(self) {
        // The SDK's shutdown blocks its caller until the batch task answers: off the runtime's workers.
        let provider = self.provider;
        let done =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(EXPORT_TIMEOUT));
        match tokio::time::timeout(EXPORT_TIMEOUT * 2, done).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %crate::escape::Escaped(&e), "traces: the last spans may not have been exported")
            }
            _ => tracing::warn!(
                "traces: the exporter did not stop in time; the last spans may be lost"
            ),
        }
    }
}

/// An exporter that sends each span (and its links) with an empty `tracestate`.
#[derive(Debug)]
struct WithoutTraceState<E>(E);

fn cleared(c: &SpanContext) -> SpanContext {
    SpanContext::new(
        c.trace_id(),
        c.span_id(),
        c.trace_flags(),
        c.is_remote(),
        TraceState::default(),
    )
}

impl<E: SpanExporter> SpanExporter for WithoutTraceState<E> {
    fn export(
        &self,
        mut batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        for s in &mut batch {
            s.span_context = cleared(&s.span_context);
            for l in &mut s.links.links {
                l.span_context = cleared(&l.span_context);
            }
        }
        self.0.export(batch)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource);
    }
}
