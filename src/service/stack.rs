//! The MCP endpoint's edge as a tower stack, read top to bottom:
//!
//! ```text
//! audit          one record per request, emitted on every path (a stream's when it ends)
//! load shed      past limits.max_in_flight: 503 with Retry-After at once, never queued
//! concurrency    limits.max_in_flight requests in progress (until their response head)
//! timeout        timeouts.request_ms from arrival to the response head: 504
//! pipeline       the front door and the stages (pipeline.rs)
//! ```
//!
//! Takes the request; gives the [`Reply`], never an error (tower's own errors, shed and
//! elapsed, become their answers here).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, StatusCode};
use hyper::body::Incoming;
use tower::util::BoxCloneService;
use tower::{BoxError, Layer, Service, ServiceBuilder};

use crate::audit::AuditGuard;
use crate::gateway::Gateway;
use crate::respond::Reply;

/// The endpoint service every connection clones.
pub type Endpoint = BoxCloneService<Request<Incoming>, Reply, Infallible>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Builds the stack once (the concurrency limit is shared by every clone). Its limits are the
/// first generation's (restart-only: `reload.rs`); the pipeline runs on the generation current
/// when the request passes them.
pub fn endpoint(gw: &Gateway) -> Endpoint {
    let limits = (gw.cfg.limits.max_in_flight, gw.cfg.timeouts.request);
    let live = gw.live.clone();
    let pipeline = tower::service_fn(move |req: Request<Incoming>| {
        let live = live.clone();
        // Boxed once here: the pipeline's future is several KiB, and moving it by value through
        // the layers would copy it at each step.
        let run: BoxFuture<Result<Reply, Infallible>> = Box::pin(async move {
            let Some(gw) = live.get() else { return Ok(Reply::Overloaded) };
            // Counted under the concurrency limit: what it holds, shed requests not included.
            let _in_flight = gw.metrics.enter();
            let (parts, body) = req.into_parts();
            Ok(crate::pipeline::run(&gw, parts, body).await)
        });
        run
    });
    let audit = AuditLayer { audit: gw.audit.clone(), metrics: gw.metrics.clone() };
    let stack = ServiceBuilder::new().layer(audit).load_shed().concurrency_limit(limits.0).timeout(limits.1).service(pipeline);
    BoxCloneService::new(stack)
}

/// Shed and elapsed become the answers they stand for.
fn answer_edge_errors(r: Result<Reply, BoxError>) -> Result<Reply, Infallible> {
    Ok(match r {
        Ok(reply) => reply,
        Err(e) if e.is::<tower::load_shed::error::Overloaded>() => Reply::Overloaded,
        Err(_) => Reply::Plain(StatusCode::GATEWAY_TIMEOUT, "gateway timeout: the request took longer than timeouts.request_ms\n"),
    })
}

/// The audit record around everything below it.
#[derive(Clone)]
struct AuditLayer {
    audit: crate::audit::Audit,
    metrics: Arc<crate::metrics::Metrics>,
}

impl<S> Layer<S> for AuditLayer {
    type Service = Audited<S>;
    fn layer(&self, inner: S) -> Audited<S> {
        Audited { layer: self.clone(), inner }
    }
}

/// A service whose every request gets exactly one audit record.
#[derive(Clone)]
struct Audited<S> {
    layer: AuditLayer,
    inner: S,
}

impl<S> Service<Request<Incoming>> for Audited<S>
where
    S: Service<Request<Incoming>, Response = Reply, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = Infallible;
    type Future = BoxFuture<Result<Reply, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Load shedding below is always ready (it answers "overloaded" from `call` instead), and
        // nothing under it can fail to be ready: an error here cannot happen.
        self.inner.poll_ready(cx).map(|_| Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let bytes_in =
            req.headers().get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()).unwrap_or(0);
        let guard = AuditGuard::new(&self.layer.audit, &self.layer.metrics, bytes_in);
        let run = crate::audit::scope(guard.record(), self.inner.call(req));
        Box::pin(async move {
            let reply = answer_edge_errors(run.await).unwrap_or_else(|never| match never {});
            Ok(match reply {
                // A stream's record is complete when the stream ends (what its last message says).
                Reply::Sse(mut body) => {
                    body.audit(guard.into_stream());
                    Reply::Sse(body)
                }
                reply => {
                    guard.finish(reply.status(), reply.json_body());
                    reply
                }
            })
        })
    }
}
