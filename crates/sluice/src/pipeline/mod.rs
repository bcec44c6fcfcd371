//! The one place that orders the stages of a request to the MCP endpoint.
//!
//! ```text
//! edge (Origin/Host 403, POST 405, Accept 406; the 2024-11-05 transport's path: GET or POST,
//!   any Accept) → authenticate (401/403)
//!  → the principal's share of requests in progress (503) → body (413, 408)
//!  → a place among the requests in progress (503) → parse once (-32700 / -32600)          → notifications: 202
//!  → _meta (-32602) → route lookup (errors held) → headers vs body (-32020)
//!  → version (-32022) → method (-32601/404) → dispatch → respond
//! ```
//!
//! Takes the request head and body; gives the [`Reply`]. Every refusal carries the request's
//! id once it could be read.

use std::sync::Arc;

use http::request::Parts;

pub mod admit;

use crate::edge;
use crate::error::GatewayError;
use crate::gateway::Generation;
use crate::mcp::jsonrpc::Envelope;
use crate::respond::Reply;
use crate::telemetry::trace::RequestTrace;

/// Runs one request through the pipeline, admitted by `admission` (`admit.rs`).
pub async fn run(
    gw: &Arc<Generation>,
    parts: Parts,
    body: hyper::body::Incoming,
    admission: &crate::pipeline::admit::Admission,
) -> Reply {
    // Edge first: nothing about the body matters if the caller may not talk to us.
    if let Err(r) = edge::check_origin(
        &parts,
        gw.cfg.listen.ip().is_loopback(),
        &gw.cfg.allowed_origins,
    ) {
        return r;
    }
    // GET and DELETE exist only for 2025-11-25 sessions (bridge B); otherwise 405. The
    // 2024-11-05 transport's path takes GET (its stream) and POST, with any Accept.
    let session_verb = is_session_verb(gw, &parts);
    let sse = crate::bridge_b::sse::serves(gw, &parts);
    if let Err(r) = match (session_verb, sse) {
        (true, _) => Ok(()),
        (false, Some(verb)) => crate::bridge_b::sse::check_method(verb),
        (false, None) => {
            edge::check_method(&parts.method).and_then(|_| edge::check_accept(&parts.headers))
        }
    } {
        return r;
    }
    // The request's span (none with tracing off); parented once its body is read.
    let mut trace = RequestTrace::start(&parts.headers);
    // Authenticate before reading the body: an unknown caller costs no more than its headers.
    let principal = match trace.authenticate(|| gw.auth.authenticate(&parts.headers)) {
        Ok(p) => {
            // Its connection has served an authenticated request: it never makes room for another.
            crate::connections::authenticated(&parts.extensions);
            p
        }
        Err(e) => {
            trace.refuse_parent();
            return crate::stages::challenge(gw, "null", e);
        }
    };
    // The principal's share before its body: a body held open costs its own share only.
    let entered = match admission.enter(
        principal.id(),
        gw.cfg.limits.max_in_flight_per_principal,
        !gw.auth.enabled(),
    ) {
        Ok(e) => e,
        Err(full) => return refuse_full("null", full),
    };
    let bytes = if session_verb || sse == Some(crate::bridge_b::sse::Verb::Open) {
        bytes::Bytes::new()
    } else {
        match edge::read_body_within(
            &parts.headers,
            body,
            gw.cfg.limits.max_body_bytes,
            gw.cfg.timeouts.body_read,
        )
        .await
        {
            Ok(b) => b,
            Err(r) => return r,
        }
    };
    // A place among the requests in progress only now that the request is whole.
    let _in_flight = match entered.whole() {
        Ok(place) => place,
        Err(full) => return refuse_full(&readable_id(&bytes), full),
    };
    let _counted = gw.rt.metrics.enter();
    serve(gw, &parts, &principal, bytes, &mut trace).await
}

/// A GET or DELETE of a Streamable HTTP 2025-11-25 session (bridge B), not on the 2024-11-05
/// transport's path.
fn is_session_verb(gw: &Generation, parts: &Parts) -> bool {
    matches!(parts.method, http::Method::GET | http::Method::DELETE)
        && parts.headers.contains_key(crate::mcp::headers::SESSION_ID)
        && crate::bridge_b::sse::serves(gw, parts).is_none()
}

/// A full pool of requests in progress (or the principal's share of it): 503, Retry-After.
fn refuse_full(id: &str, full: crate::shares::Full) -> Reply {
    tracing::debug!(
        limit = full.limit(),
        "request refused: too many in progress"
    );
    crate::audit::note(|a| a.decision = Some("refused"));
    Reply::error(id, &GatewayError::Full(full))
}

/// A request another replica forwarded (`internal/mod.rs`): its principal was
/// authenticated there and its headers signed with the state keys; everything after
/// authentication runs here as for a client of this replica's own.
pub async fn run_forwarded(
    gw: &Arc<Generation>,
    parts: Parts,
    principal: crate::auth::Principal,
    bytes: bytes::Bytes,
) -> Reply {
    let mut trace = RequestTrace::start(&parts.headers);
    serve(gw, &parts, &principal, bytes, &mut trace).await
}

/// Everything after authentication: bridge B's session verbs and legacy posts, or the parse
/// and the stages of a 2026-07-28 request.
async fn serve(
    gw: &Arc<Generation>,
    parts: &Parts,
    principal: &crate::auth::Principal,
    bytes: bytes::Bytes,
    trace: &mut RequestTrace,
) -> Reply {
    if is_session_verb(gw, parts) {
        return if parts.method == http::Method::GET {
            hold_stream(
                gw,
                principal,
                "null",
                crate::bridge_b::get(gw, &parts.headers, principal).await,
            )
        } else {
            crate::bridge_b::delete(gw, &parts.headers, principal).await
        };
    }
    // Nesting first, for either era: nothing below reads a body deeper than the bound.
    let max_depth = gw.cfg.limits.max_json_depth;
    if crate::mcp::jsonrpc::nests_deeper_than(&bytes, max_depth) {
        return Reply::error(
            &readable_id(&bytes),
            &GatewayError::from(crate::mcp::jsonrpc::FrameError::TooDeep(max_depth)),
        );
    }
    // A 2024-11-05 HTTP+SSE client: a session's stream, or a message to its session.
    if let Some(verb) = crate::bridge_b::sse::serves(gw, parts) {
        trace.begin(None, None);
        note_trace(trace);
        let reply = crate::telemetry::trace::traced!(
            trace.span().clone(),
            Box::pin(crate::bridge_b::sse::serve(
                gw, verb, parts, principal, bytes
            ))
        );
        trace.outcome(reply.status().as_u16(), None);
        return reply; // its streams took their places themselves
    }
    // A 2025-11-25 client (no modern envelope): the handshake era, on the same endpoint.
    if crate::bridge_b::is_legacy(&parts.headers, &bytes) {
        trace.begin(None, None);
        note_trace(trace);
        let reply = crate::telemetry::trace::traced!(
            trace.span().clone(),
            Box::pin(crate::bridge_b::post(gw, &parts.headers, principal, bytes))
        );
        trace.outcome(reply.status().as_u16(), None);
        return hold_stream(gw, principal, "null", reply);
    }
    // Parse once: every later stage reads from this envelope.
    let bytes_for_id = bytes.clone();
    let env = match Envelope::parse_prechecked(bytes) {
        Ok(e) => e,
        Err(e) => return Reply::error(&readable_id(&bytes_for_id), &GatewayError::from(e)),
    };
    // A notification needs no answer and 2026-07-28 defines none client→server over HTTP.
    if env.is_notification() {
        return Reply::Accepted;
    }
    let id = env.id_json().to_owned();
    crate::audit::note(|r| {
        r.op = Some(env.method.known().unwrap_or("other"));
        if r.full {
            r.principal = Some(principal.id.clone());
            r.method = Some(env.method.to_string()); // the name once routing resolved it (stages.rs)
        }
    });
    run_stages(gw, trace, env, &parts.headers, principal, &id).await
}

/// The stages for a parsed 2026-07-28 request, in its span.
async fn run_stages(
    gw: &Arc<Generation>,
    trace: &mut RequestTrace,
    env: Envelope,
    headers: &http::HeaderMap,
    principal: &crate::auth::Principal,
    id: &str,
) -> Reply {
    let method = env.method.clone();
    if crate::telemetry::trace::on() {
        let version = headers
            .get(crate::mcp::headers::PROTOCOL_VERSION)
            .and_then(|v| v.to_str().ok());
        trace.begin(Some(&env), version);
        note_trace(trace);
    }
    match crate::telemetry::trace::traced!(
        trace.span().clone(),
        crate::stages::run(gw, env, Some(headers), principal)
    ) {
        Ok(reply) => {
            trace.outcome(reply.status().as_u16(), None);
            hold_stream(gw, principal, id, reply)
        }
        Err(e) => {
            if crate::telemetry::trace::on() {
                let (status, code, _) = e.classify();
                trace.outcome(status.as_u16(), Some(code));
            }
            crate::stages::error_reply(gw, id, &method, e)
        }
    }
}

/// The trace id goes into the audit record, so a record and its spans can be found together.
fn note_trace(trace: &RequestTrace) {
    if let Some(id) = trace.trace_id() {
        crate::audit::note(|r| r.trace_id = Some(id));
    }
}

/// A streamed answer takes one of the principal's stream places for as long as it is open;
/// past the caps it is refused (and dropping it ends whatever fed it).
fn hold_stream(
    gw: &Generation,
    principal: &crate::auth::Principal,
    id: &str,
    reply: Reply,
) -> Reply {
    let Reply::Sse(mut body) = reply else {
        return reply;
    };
    if body.is_complete() {
        return Reply::Sse(body); // an answer already whole: it holds no stream open
    }
    match gw.rt.streams.acquire(principal.id()) {
        Ok(permit) => {
            body.hold(permit);
            Reply::Sse(body)
        }
        Err(r) => {
            tracing::info!(principal = ?principal.id(), "stream refused: too many open");
            crate::audit::note(|a| a.decision = Some("refused"));
            Reply::refusal(id, &r)
        }
    }
}

/// The id of a body that is JSON but not a valid request, when it can be read (else `null`).
fn readable_id(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct IdOnly<'a> {
        #[serde(borrow)]
        id: Option<&'a serde_json::value::RawValue>,
    }
    match crate::mcp::jsonrpc::decode_object::<IdOnly<'_>>(body) {
        Ok(IdOnly { id: Some(id) })
            if matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')) =>
        {
            id.get().to_owned()
        }
        _ => "null".to_owned(),
    }
}
