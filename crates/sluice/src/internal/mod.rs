//! The internal listener: continuations other replicas forward to this one, their owner.
//!
//! Takes connections on `cluster.listen`, bounded as the public listener's are (idle ones
//! closed, and `cluster.max_connections_per_source` per source); gives, for a `POST` of
//! [`PATH`](crate::handoff::PATH) whose peer head verifies and whose request
//! [`gate`] admits (a retry of a bridge A round parked here, an answer to this
//! replica's own request to a 2025-11-25 client), the answer this replica gives its own
//! clients, run on the current generation with the principal the entry replica authenticated,
//! and an audit record with `forwarded_from` naming the entry replica (not counted in this
//! replica's metrics: the entry replica's record counts it). Refuses every other path (404)
//! and method (405); before reading a byte of the body, a request without peer headers, from a
//! sender whose id is not a replica id, meant for another replica, stale, of another version
//! (no signed body length and digest: logged as an error), whose head's signature does not
//! verify under this cluster's state keys, or whose nonce was seen before (401, logged with the
//! reason); a signed length over `limits.max_body_bytes` (413) or a `Content-Length` other than
//! it (400); then a body that does not arrive within `timeouts.body_read_ms` (408), or is not
//! the signed one (401); before the pipeline sees the body, anything that is not a continuation
//! this replica owns (403, logged and audited: a fresh call, another replica's or another
//! principal's state, an answer to another replica's request), and a continuation of its own
//! whose state expired or whose exchange is gone (`-32602` with `data.reason`). Stops
//! accepting when `stop` is cancelled.

pub mod gate;

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::gateway::Live;
use crate::respond::{Body, Reply};

/// Serves forwards until `stop`, with the public listener's connection bounds: at most
/// `limits.max_connections` at once (when every one is taken, an idle connection that carried
/// no verified forward makes room), `cluster.max_connections_per_source` of them from one
/// source, the first bytes and the request head within `timeouts.header_read_ms`, the head
/// within `limits.max_header_bytes`, and a connection idle past `timeouts.idle_connection_ms`
/// closed (`connections::serve`: HTTP/2 PINGs do not keep it).
pub async fn serve(listener: TcpListener, live: Arc<Live>, stop: CancellationToken) {
    let Some(gw) = live.get() else { return };
    let builder = crate::server::connection_builder(&gw);
    let (deadlines, max) = (
        crate::server::deadlines(&gw.cfg.timeouts),
        gw.cfg.limits.max_connections,
    );
    let per_source = gw
        .cfg
        .cluster
        .as_ref()
        .map_or(max, |c| c.max_connections_per_source);
    drop(gw);
    let connections = crate::connections::Table::new(max, per_source);
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            s = crate::server::accept(&listener, "internal") => s,
        };
        let source = crate::server::peer_source(&stream);
        let held = match connections.admit(source) {
            Ok(p) => p,
            Err(crate::shares::Refused::Pool(n)) => {
                tracing::warn!(
                    limit = n,
                    "internal connection refused: limits.max_connections reached"
                );
                continue;
            }
            Err(crate::shares::Refused::Share(n)) => {
                tracing::warn!(limit = n, %source, "internal connection refused: this source holds cluster.max_connections_per_source");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let live = live.clone();
        let handle = move |req| handle(live.clone(), req);
        tokio::spawn(crate::connections::serve(
            stream,
            held,
            builder.clone(),
            deadlines,
            stop.clone(),
            handle,
        ));
    }
}

fn plain(status: StatusCode, text: &'static str) -> Result<Response<Body>, Infallible> {
    Ok(Reply::Plain(status, text).into_response())
}

async fn handle(
    live: Arc<Live>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible> {
    let Some(gw) = live.get() else {
        return plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "service unavailable: this replica is shutting down\n",
        );
    };
    let Some(c) = gw.governor.cluster.clone() else {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    };
    if req.uri().path() != crate::handoff::PATH {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the internal listener serves only forwarded continuations\n",
        );
    }
    // Replicas forward POSTs only (a round's retry, a 2025-11-25 client's answer).
    if req.method() != http::Method::POST {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: replicas forward POST only\n",
        );
    }
    // The head is verified before a byte of the body is read: its tag binds the body's length
    // and digest, so who cannot sign costs no body read (the connection closes unread).
    let verified = match verify_head(&gw.bridge.keys, &c, &req) {
        Ok(v) => v,
        Err(e) => return refused(e),
    };
    let (parts, body) = req.into_parts();
    let bytes = match read_signed(&parts.headers, body, &verified, &gw.cfg).await {
        Ok(b) => b,
        Err(Unread::Reply(r)) => return Ok(r.into_response()),
        Err(Unread::Peer(e)) => return refused(e),
    };
    let crate::cluster::peer::Verified {
        from, principal, ..
    } = verified;
    // A verified forward: its connection is a replica's, never closed to make room.
    crate::connections::authenticated(&parts.extensions);
    // From here the forward is a request: it gets an audit record here too, naming the replica
    // the client talked to, whatever becomes of it.
    let guard = crate::audit::AuditGuard::unmetered(&gw.rt.audit, bytes.len() as u64);
    let reply = crate::audit::scope(guard.record(), async {
        crate::audit::note(|r| {
            r.forwarded_from = Some(from.to_string());
            r.principal = Some(principal.id.clone());
        });
        // Decided on the decoded request before the pipeline sees the body.
        match gate::admit(&gw, &parts.headers, &bytes, &principal) {
            Ok(what) => {
                tracing::debug!(from = %from, principal = ?principal.id, ?what, "continuation forwarded by another replica");
                crate::handoff::as_forwarded(crate::pipeline::run_forwarded(&gw, parts, principal, bytes)).await
            }
            Err(refusal) => not_served(&from, &principal, refusal),
        }
    })
    .await;
    Ok(reply.audited(guard).into_response())
}

/// The 401 answer to a forward whose head or body did not verify, logged with the reason (an
/// error when the sender runs another version, a warning otherwise).
fn refused(e: crate::cluster::peer::PeerError) -> Result<Response<Body>, Infallible> {
    match e {
        crate::cluster::peer::PeerError::OtherVersion => {
            tracing::error!(reason = %e, "internal listener refused a forward")
        }
        _ => tracing::warn!(reason = %e, "internal listener refused a forward"),
    }
    plain(
        StatusCode::UNAUTHORIZED,
        "unauthorized: not a forward signed with this cluster's state keys for this replica\n",
    )
}

/// Verifies a forward's head for this replica, now, then consumes its nonce: a nonce seen
/// before is a replay.
fn verify_head(
    keys: &crate::state::Keys,
    c: &crate::cluster::Cluster,
    req: &Request<hyper::body::Incoming>,
) -> Result<crate::cluster::peer::Verified, crate::cluster::peer::PeerError> {
    let now = crate::state::now_ms();
    let head = crate::cluster::peer::verify(
        keys,
        req.headers(),
        c.id(),
        req.method(),
        crate::handoff::PATH,
        now,
    );
    match head {
        Ok(v)
            if !c.peer_nonces.consume_evicting(
                &v.nonce,
                now + 2 * crate::cluster::peer::SKEW,
                now,
            ) =>
        {
            Err(crate::cluster::peer::PeerError::Replayed)
        }
        Ok(v) => Ok(v),
        Err(e) => Err(e),
    }
}

/// Why a signed forward's body was not taken.
enum Unread {
    /// Too large, late, or not as declared: answered as the public listener would.
    Reply(Reply),
    /// Not the body the head signed.
    Peer(crate::cluster::peer::PeerError),
}

/// Reads exactly the body the verified head signed: refused unread when that length is over
/// `limits.max_body_bytes` (413) or a `Content-Length` says another (400); read within
/// `timeouts.body_read_ms` (408), at most the signed length, then checked against its digest.
async fn read_signed(
    h: &http::HeaderMap,
    body: hyper::body::Incoming,
    v: &crate::cluster::peer::Verified,
    cfg: &crate::config::Config,
) -> Result<bytes::Bytes, Unread> {
    if v.length > cfg.limits.max_body_bytes {
        return Err(Unread::Reply(Reply::Plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload too large: the body exceeds limits.max_body_bytes\n",
        )));
    }
    let declared = h
        .get(http::header::CONTENT_LENGTH)
        .map(|v| v.to_str().ok().and_then(|v| v.parse::<usize>().ok()));
    if declared.is_some_and(|d| d != Some(v.length)) {
        return Err(Unread::Reply(Reply::Plain(
            StatusCode::BAD_REQUEST,
            "bad request: Content-Length is not the signed body length\n",
        )));
    }
    match crate::edge::read_body_within(h, body, v.length, cfg.timeouts.body_read).await {
        Ok(b) => v.check_body(&b).map(|()| b).map_err(Unread::Peer),
        Err(r) if r.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(Unread::Peer(crate::cluster::peer::PeerError::BadBody))
        }
        Err(r) => Err(Unread::Reply(r)),
    }
}

/// The answer to a forward the gate refused, logged (fixed text, the principal escaped).
fn not_served(
    from: &crate::config::replica::ReplicaId,
    principal: &crate::auth::Principal,
    refusal: gate::Refused,
) -> Reply {
    match refusal {
        gate::Refused::NotOwned(why) => {
            tracing::warn!(from = %from, principal = ?principal.id, why, "internal listener refused a forward: not a continuation this replica owns");
            crate::audit::note(|r| r.decision = Some("refused"));
            Reply::Plain(StatusCode::FORBIDDEN, NOT_OWNED)
        }
        gate::Refused::Gone(id, e) => {
            tracing::debug!(from = %from, reason = e.reason(), "a forwarded continuation's state is no longer usable");
            Reply::error(
                &id,
                &crate::error::GatewayError::InvalidParams(
                    e.to_string(),
                    Some(serde_json::json!({"reason": e.reason()})),
                ),
            )
        }
    }
}

/// The 403 body of a forward that is not a continuation this replica owns.
const NOT_OWNED: &str = "forbidden: the internal listener serves only continuations this replica owns (a requestState it sealed for an exchange parked here, an answer to its own request to a 2025-11-25 client)\n";

/// Binds `cluster.listen`, serves forwards on it and keeps this replica registered, until the
/// gateway shuts down. Refuses (a startup error) a listener that cannot be bound.
pub fn start(gw: &Arc<crate::gateway::Generation>) -> Result<(), String> {
    let Some(c) = gw.governor.cluster.clone() else {
        return Ok(());
    };
    let listener = crate::server::bind(c.cfg.listen)
        .map_err(|e| format!("cannot bind cluster.listen {}: {e}", c.cfg.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cluster.listen: {e}"))?;
    let url = c.bound(addr).to_owned();
    tracing::info!(replica = %c.id(), internal = %addr, advertise = %url, "cluster internal listener up");
    tokio::spawn(serve(listener, gw.rt.live.clone(), gw.rt.shutdown.clone()));
    tokio::spawn(c.heartbeat(gw.rt.shutdown.clone()));
    Ok(())
}
