//! The MCP endpoint's edge as a tower stack, read top to bottom:
//!
//! ```text
//! audit          one record per request, emitted on every path (a stream's when it ends)
//! timeout        timeouts.request_ms from arrival to the response head: 504
//! pipeline       the front door and the stages (pipeline.rs), which admits the request
//!                (admit.rs): the principal's share of limits.max_in_flight once it is
//!                authenticated, a place in limits.max_in_flight once its body is read;
//!                past either 503 with Retry-After at once, never queued
//! ```
//!
//! Requests in progress are not limited here, at arrival: a request that has sent its head
//! but not its body, or whose principal is not known yet, must not hold a place that other
//! principals need. Takes the request; gives the [`Reply`], never an error (tower's own error,
//! elapsed, becomes its answer here).

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
use crate::gateway::Generation;
use crate::respond::Reply;

/// The endpoint service every connection clones.
pub type Endpoint = BoxCloneService<Request<Incoming>, Reply, Infallible>;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Builds the stack once (the admission is shared by every clone). `limits.max_in_flight` and
/// the request deadline are the first generation's (restart-only: `reload.rs`); the pipeline
/// runs on the generation current when the request arrives.
pub fn endpoint(gw: &Generation) -> Endpoint {
    let deadline = gw.cfg.timeouts.request;
    let admission = crate::pipeline::admit::Admission::new(gw.cfg.limits.max_in_flight);
    let live = gw.rt.live.clone();
    let pipeline = tower::service_fn(move |req: Request<Incoming>| {
        let (live, admission) = (live.clone(), admission.clone());
        // Boxed once here: the pipeline's future is several KiB, and moving it by value through
        // the layers would copy it at each step.
        let run: BoxFuture<Result<Reply, Infallible>> = Box::pin(async move {
            let Some(gw) = live.get() else {
                return Ok(Reply::Plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service unavailable: Sluice is shutting down\n",
                ));
            };
            let (parts, body) = req.into_parts();
            Ok(crate::pipeline::run(&gw, parts, body, &admission).await)
        });
        run
    });
    let audit = AuditLayer {
        audit: gw.rt.audit.clone(),
        metrics: gw.rt.metrics.clone(),
    };
    let stack = ServiceBuilder::new()
        .layer(audit)
        .timeout(deadline)
        .service(pipeline);
    BoxCloneService::new(stack)
}

/// Elapsed becomes the answer it stands for.
fn answer_edge_errors(r: Result<Reply, BoxError>) -> Result<Reply, Infallible> {
    Ok(match r {
        Ok(reply) => reply,
        Err(_) => Reply::Plain(
            StatusCode::GATEWAY_TIMEOUT,
            "gateway timeout: the request took longer than timeouts.request_ms\n",
        ),
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
        Audited {
            layer: self.clone(),
            inner,
        }
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
        // The timeout and the pipeline below are always ready: an error here cannot happen.
        self.inner.poll_ready(cx).map(|_| Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let bytes_in = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let guard = AuditGuard::new(&self.layer.audit, self.layer.metrics.clone(), bytes_in);
        let run = crate::audit::scope(guard.record(), self.inner.call(req));
        Box::pin(async move {
            let reply = answer_edge_errors(run.await).unwrap_or_else(|never| match never {});
            Ok(reply.audited(guard))
        })
    }
}
