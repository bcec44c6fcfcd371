//! The internal listener: continuations other replicas forward to this one, their owner.
//!
//! Takes connections on `cluster.listen`, bounded as the public listener's are (idle ones closed); gives, for a
//! `POST` of [`PATH`](super::forward::PATH) whose peer headers verify and whose request
//! [`gate`](super::gate) admits (a retry of a bridge A round parked here, an answer to this
//! replica's own request to a 2025-11-25 client), the answer this replica gives its own
//! clients, run on the current generation with the principal the entry replica authenticated,
//! and an audit record with `forwarded_from` naming the entry replica (not counted in this
//! replica's metrics: the entry replica's record counts it). Refuses every other path (404)
//! and method (405); before reading the body, a request without peer headers, from a sender
//! whose id is not a replica id, meant for another replica or stale (401); a body over
//! `limits.max_body_bytes` (413) or slower than `timeouts.header_read_ms` (408); a signature
//! that does not verify under this cluster's state keys, or a nonce seen before (401, logged
//! with the reason); before the pipeline sees the body, anything that is not a continuation
//! this replica owns (403, logged and audited: a fresh call, another replica's or another
//! principal's state, an answer to another replica's request), and a continuation of its own
//! whose state expired or whose exchange is gone (`-32602` with `data.reason`). Stops
//! accepting when `stop` is cancelled.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::gateway::Live;
use crate::respond::{Body, Reply};

/// Serves forwards until `stop`, with the public listener's connection bounds: at most
/// `limits.max_connections` at once (when every one is taken, an idle connection that carried
/// no verified forward makes room), the first bytes and the request head within
/// `timeouts.header_read_ms`, the head within `limits.max_header_bytes`, and a connection idle
/// past `timeouts.idle_connection_ms` closed (`connections::serve`: HTTP/2 PINGs do not keep it).
pub async fn serve(listener: TcpListener, live: Arc<Live>, stop: CancellationToken) {
    let Some(gw) = live.get() else { return };
    let builder = crate::server::connection_builder(&gw);
    let (deadlines, max) = (crate::server::deadlines(&gw.cfg.timeouts), gw.cfg.limits.max_connections);
    drop(gw);
    // Replicas are few sources: no share per source here.
    let connections = crate::connections::Table::new(max, max);
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            s = crate::server::accept(&listener, "internal") => s,
        };
        let Ok(held) = connections.admit(std::net::Ipv4Addr::UNSPECIFIED.into()) else {
            tracing::warn!(limit = max, "internal connection refused: limits.max_connections reached");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let live = live.clone();
        let handle = move |req| handle(live.clone(), req);
        tokio::spawn(crate::connections::serve(stream, held, builder.clone(), deadlines, stop.clone(), handle));
    }
}

fn plain(status: StatusCode, text: &'static str) -> Result<Response<Body>, Infallible> {
    Ok(Reply::Plain(status, text).into_response())
}

async fn handle(live: Arc<Live>, req: Request<hyper::body::Incoming>) -> Result<Response<Body>, Infallible> {
    let Some(gw) = live.get() else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "service unavailable: this replica is shutting down\n");
    };
    let Some(c) = gw.governor.cluster.clone() else { return plain(StatusCode::NOT_FOUND, "not found\n") };
    if req.uri().path() != super::forward::PATH {
        return plain(StatusCode::NOT_FOUND, "not found: the internal listener serves only forwarded continuations\n");
    }
    // Replicas forward POSTs only (a round's retry, a 2025-11-25 client's answer).
    if req.method() != http::Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed: replicas forward POST only\n");
    }
    let refused = |e: super::peer::PeerError| {
        tracing::warn!(reason = %e, "internal listener refused a request");
        plain(StatusCode::UNAUTHORIZED, "unauthorized: not a forward signed with this cluster's state keys for this replica\n")
    };
    // Who may not send a forward costs no body read.
    if let Err(e) = super::peer::precheck(req.headers(), c.id(), crate::state::now_ms()) {
        return refused(e);
    }
    let (parts, body) = req.into_parts();
    let read = crate::edge::read_body(&parts.headers, body, gw.cfg.limits.max_body_bytes);
    let bytes = match tokio::time::timeout(gw.cfg.timeouts.header_read, read).await {
        Ok(Ok(b)) => b,
        Ok(Err(r)) => return Ok(r.into_response()),
        Err(_) => return plain(StatusCode::REQUEST_TIMEOUT, "request timeout: the body did not arrive within timeouts.header_read_ms\n"),
    };
    let now = crate::state::now_ms();
    let f = super::peer::Forwarded { from: "", to: c.id(), method: &parts.method, path: super::forward::PATH, body: &bytes };
    let (from, principal) = match super::peer::verify(&gw.bridge.keys, &parts.headers, &f, now) {
        Ok((_, _, nonce)) if !c.peer_nonces.consume_evicting(&nonce, now + 2 * super::peer::SKEW, now) => {
            return refused(super::peer::PeerError::Replayed)
        }
        Ok((from, p, _)) => (from, p),
        Err(e) => return refused(e),
    };
    // A verified forward: its connection is a replica's, never closed to make room.
    crate::connections::authenticated(&parts.extensions);
    // From here the forward is a request: it gets an audit record here too, naming the replica
    // the client talked to, whatever becomes of it.
    let guard = crate::audit::AuditGuard::unmetered(&gw.audit, bytes.len() as u64);
    let reply = crate::audit::scope(guard.record(), async {
        crate::audit::note(|r| {
            r.forwarded_from = Some(from.to_string());
            r.principal = Some(principal.id.clone());
        });
        // Decided on the decoded request before the pipeline sees the body.
        match super::gate::admit(&gw, &parts.headers, &bytes, &principal) {
            Ok(what) => {
                tracing::debug!(from = %from, principal = ?principal.id, ?what, "continuation forwarded by another replica");
                super::forward::as_forwarded(crate::pipeline::run_forwarded(&gw, parts, principal, bytes)).await
            }
            Err(refusal) => not_served(&from, &principal, refusal),
        }
    })
    .await;
    Ok(audited(guard, reply).into_response())
}

/// The answer to a forward the gate refused, logged (fixed text, the principal escaped).
fn not_served(from: &super::replica::ReplicaId, principal: &crate::auth::Principal, refusal: super::gate::Refused) -> Reply {
    match refusal {
        super::gate::Refused::NotOwned(why) => {
            tracing::warn!(from = %from, principal = ?principal.id, why, "internal listener refused a forward: not a continuation this replica owns");
            crate::audit::note(|r| r.decision = Some("refused"));
            Reply::Plain(StatusCode::FORBIDDEN, NOT_OWNED)
        }
        super::gate::Refused::Gone(id, e) => {
            tracing::debug!(from = %from, reason = e.reason(), "a forwarded continuation's state is no longer usable");
            Reply::error(&id, &crate::error::GatewayError::InvalidParams(e.to_string(), Some(serde_json::json!({"reason": e.reason()}))))
        }
    }
}

/// The 403 body of a forward that is not a continuation this replica owns.
const NOT_OWNED: &str = "forbidden: the internal listener serves only continuations this replica owns (a requestState it sealed for an exchange parked here, an answer to its own request to a 2025-11-25 client)\n";

/// Completes the record: a stream's when it ends, any other answer's now.
fn audited(guard: crate::audit::AuditGuard, reply: Reply) -> Reply {
    match reply {
        Reply::Sse(mut body) => {
            body.audit(guard.into_stream());
            Reply::Sse(body)
        }
        reply => {
            guard.finish(reply.status(), reply.json_body());
            reply
        }
    }
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
