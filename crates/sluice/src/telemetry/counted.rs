//! Counts what the span exporter sends: spans exported, and spans lost with a failed batch (a
//! collector down or refusing), for `/metrics` (`sluice_trace_spans_total{result}`).
//!
//! Takes the OTLP exporter; gives the same exporter, counting. Refuses nothing. Spans the batch
//! processor drops on a full queue never reach it and are not counted here.

use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

static EXPORTED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);

/// Spans exported and spans whose batch failed, since start.
pub fn totals() -> (u64, u64) {
    (
        EXPORTED.load(Ordering::Relaxed),
        FAILED.load(Ordering::Relaxed),
    )
}

/// An exporter that counts each batch's spans by its result.
#[derive(Debug)]
pub struct Counted<E>(pub E);

impl<E: SpanExporter> SpanExporter for Counted<E> {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let n = batch.len() as u64;
        let sent = self.0.export(batch);
        async move {
            let result = sent.await;
            let counter = if result.is_ok() { &EXPORTED } else { &FAILED };
            counter.fetch_add(n, Ordering::Relaxed);
            result
        }
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.0.set_resource(resource);
    }
}
