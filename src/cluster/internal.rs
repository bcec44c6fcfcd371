//! The internal listener: continuations other replicas forward to this one, their owner.
//!
//! Takes connections on `cluster.listen`; gives, for `POST`/`GET`/`DELETE` of
//! [`PATH`](super::forward::PATH) whose peer headers verify, the answer this replica gives its
//! own clients, run on the current generation with the principal the entry replica
//! authenticated (no audit record: the replica the client talked to writes it). Refuses every
//! other path (404), a body over `limits.max_body_bytes` (413) and a request whose signature
//! does not verify under this cluster's state keys, is stale or absent (401, logged with the
//! reason). Stops accepting when `stop` is cancelled.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::gateway::Live;
use crate::respond::{Body, Reply};

tokio::task_local! {
    /// Set while a forwarded request runs: it is never forwarded again (two replicas that
    /// disagree about who owns what cannot bounce a request between them).
    static FORWARDED: ();
}

/// Whether the current request came from another replica.
pub fn is_forwarded() -> bool {
    FORWARDED.try_with(|_| ()).is_ok()
}

/// Serves forwards until `stop`.
pub async fn serve(listener: TcpListener, live: Arc<Live>, stop: CancellationToken) {
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "internal listener: accept failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (live, builder) = (live.clone(), builder.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(live.clone(), req));
            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

async fn handle(live: Arc<Live>, req: Request<hyper::body::Incoming>) -> Result<Response<Body>, Infallible> {
    let Some(gw) = live.get() else {
        return Ok(Reply::Plain(StatusCode::SERVICE_UNAVAILABLE, "service unavailable: this replica is shutting down\n").into_response());
    };
    if req.uri().path() != super::forward::PATH {
        return Ok(
            Reply::Plain(StatusCode::NOT_FOUND, "not found: the internal listener serves only forwarded continuations\n").into_response()
        );
    }
    let (parts, body) = req.into_parts();
    let bytes = match crate::edge::read_body(&parts.headers, body, gw.cfg.limits.max_body_bytes).await {
        Ok(b) => b,
        Err(r) => return Ok(r.into_response()),
    };
    let principal = match super::peer::verify(&gw.bridge.keys, &parts.headers, super::forward::PATH, &bytes, crate::state::now_ms()) {
        Ok((from, p)) => {
            tracing::debug!(from = %from, principal = %p.id, "continuation forwarded by another replica");
            p
        }
        Err(e) => {
            tracing::warn!(reason = %e, "internal listener refused a request");
            return Ok(Reply::Plain(StatusCode::UNAUTHORIZED, "unauthorized: not a forward signed with this cluster's state keys\n")
                .into_response());
        }
    };
    let reply = FORWARDED.scope((), crate::pipeline::run_forwarded(&gw, parts, principal, bytes)).await;
    Ok(reply.into_response())
}

/// Binds `cluster.listen`, serves forwards on it and keeps this replica registered, until the
/// gateway shuts down. Refuses (a startup error) a listener that cannot be bound.
pub fn start(gw: &Arc<crate::gateway::Gateway>) -> Result<(), String> {
    let Some(c) = gw.governor.cluster.clone() else { return Ok(()) };
    let listener = crate::server::bind(c.cfg.listen).map_err(|e| format!("cannot bind cluster.listen {}: {e}", c.cfg.listen))?;
    let addr = listener.local_addr().map_err(|e| format!("cluster.listen: {e}"))?;
    let url = c.bound(addr).to_owned();
    tracing::info!(replica = %c.id(), internal = %addr, advertise = %url, "cluster internal listener up");
    tokio::spawn(serve(listener, gw.live.clone(), gw.shutdown.clone()));
    tokio::spawn(c.heartbeat(gw.shutdown.clone()));
    Ok(())
}
