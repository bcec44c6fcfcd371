//! The 2024-11-05 HTTP+SSE client transport: the oldest hosts' wire, served through bridge B's
//! sessions at `bridge.sse_path` (default `/sse`).
//!
//! A `GET` there opens a session and its stream; the stream's first event is `endpoint`, whose
//! data is the URL to POST the session's messages to (`<sse_path>?session_id=<id>`, on the same
//! origin). Each POSTed message is answered `202 Accepted`, and everything for the client (its
//! answers, Sluice's requests to it mid-call, notifications) goes on the stream as `event:
//! message`, exactly what a Streamable HTTP session would answer on its POSTs and GET stream:
//! the same sessions, relay, governance and audit (`mod.rs`, `relay.rs`). The session ends when
//! its stream closes, when it is evicted or expires as any session, and at the latest after
//! `bridge.sse_session_max_ms`; its stream closes and its calls in progress are cancelled then.
//!
//! Takes an authenticated principal's `GET` or `POST` (the front door has checked Origin and
//! the credential, and taken the request's place among those in progress); gives the stream,
//! or 202. Refuses a POST naming no session of this principal's on this transport (404:
//! unknown, ended, or another principal's), and a body that is not one JSON-RPC message (400).
//! Bounds: the stream takes one of the principal's places among the open streams
//! (`limits.max_streams`, `max_streams_per_principal`: 429/503 `-31018` past them), and so does
//! each call in progress (refused on the stream, with the call's id, past them); the session
//! counts against `bridge.max_client_sessions` and `max_client_sessions_per_principal` from the
//! GET on; at most [`QUEUE`] messages wait for a client that does not read its stream (a POST
//! then waits for room within `timeouts.request_ms`, a call's relay holds its upstream and its
//! stream place); an open stream keeps its session from idle expiry with a comment every
//! [`KEEP_ALIVE`] (or a third of `bridge.client_session_idle_ms`, when shorter), never past
//! `bridge.sse_session_max_ms`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use tokio::sync::mpsc;

use super::{LegacySession, Message};
use crate::auth::Principal;
use crate::gateway::Generation;
use crate::mcp::jsonrpc;
use crate::mcp::method::Method;
use crate::mcp::sse::Frame;
use crate::respond::{Reply, SseBody};

/// What a request to the transport's path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `GET`: a new session and its stream.
    Open,
    /// `POST`: a message to a session.
    Send,
    /// Anything else (405).
    Other,
}

/// Whether the request is for this transport (its path is `bridge.sse_path`), and what it asks.
pub fn serves(gw: &Generation, parts: &http::request::Parts) -> Option<Verb> {
    if parts.uri.path() != gw.cfg.bridge.sse_path {
        return None;
    }
    Some(match parts.method {
        http::Method::GET => Verb::Open,
        http::Method::POST => Verb::Send,
        _ => Verb::Other,
    })
}

/// Refuses a method the transport does not take (405), before the credential is looked at.
pub fn check_method(verb: Verb) -> Result<(), Reply> {
    match verb {
        Verb::Open | Verb::Send => Ok(()),
        Verb::Other => Err(not_allowed()),
    }
}

fn not_allowed() -> Reply {
    Reply::Plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed: the 2024-11-05 SSE endpoint takes GET (a new session's stream) and POST (its messages)\n",
    )
}

/// Serves an authenticated request to the transport's path.
pub async fn serve(
    gw: &Arc<Generation>,
    verb: Verb,
    parts: &http::request::Parts,
    principal: &Principal,
    body: Bytes,
) -> Reply {
    match verb {
        Verb::Open => open(gw, principal),
        Verb::Send => post(gw, parts, principal, body).await,
        Verb::Other => not_allowed(),
    }
}

/// Messages one session's stream holds for a client that does not read it.
pub const QUEUE: usize = 64;

/// How often an idle stream carries a comment (and keeps its session from expiring).
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `GET`: a new session, and its stream opening with the `endpoint` event.
pub fn open(gw: &Arc<Generation>, principal: &Principal) -> Reply {
    super::note_legacy(principal);
    let permit = match gw.rt.streams.acquire(principal.id()) {
        Ok(p) => p,
        Err(r) => return refused(principal, "null", &r),
    };
    // What the session's messages are queued on (at most QUEUE), and the response body they
    // are moved to: the move stops, closing the stream, whenever the session ends.
    let (queue, queued) = mpsc::channel(QUEUE);
    let (tx, rx) = mpsc::channel(1);
    let s = gw
        .rt
        .legacy_sessions
        .open_sse(principal.id(), queue.clone());
    // A path on the stream's own origin (clients resolve it against the stream's URL); the id
    // is URL-safe as it stands (`s2.` and base64url).
    let _ = tx.try_send(Frame::Named {
        event: "endpoint",
        data: format!("{}?session_id={}", gw.cfg.bridge.sse_path, s.id),
    });
    let watch = super::notify::Watch::start(gw, principal);
    let (sessions, lifetime) = (gw.rt.legacy_sessions.clone(), gw.cfg.bridge.sse_session_max);
    let keep_alive = KEEP_ALIVE
        .min(gw.cfg.bridge.client_session_idle / 3)
        .max(Duration::from_millis(10));
    tokio::spawn(async move {
        let (id, ended) = (s.id.clone(), s.ended.clone());
        tokio::select! {
            _ = watch.run(s, queue, Some(keep_alive)) => {}
            _ = pump(queued, tx) => {} // the client went away
            _ = ended.cancelled() => {} // ended by eviction or expiry
            _ = tokio::time::sleep(lifetime) => tracing::debug!("a 2024-11-05 SSE session reached bridge.sse_session_max_ms"),
        }
        sessions.remove(&id); // its calls end as their relays find the queue closed
    });
    let mut body = SseBody::from(rx);
    body.hold(permit);
    Reply::Sse(body)
}

/// Moves the session's queued messages to its response body until the client goes away.
async fn pump(mut queued: mpsc::Receiver<Frame>, tx: mpsc::Sender<Frame>) {
    loop {
        let frame = tokio::select! {
            f = queued.recv() => f,
            _ = tx.closed() => return,
        };
        let Some(frame) = frame else { return };
        if tx.send(frame).await.is_err() {
            return;
        }
    }
}

/// `POST ?session_id=…`: one message of the session, answered 202; its answer goes on the stream.
pub async fn post(
    gw: &Arc<Generation>,
    parts: &http::request::Parts,
    principal: &Principal,
    body: Bytes,
) -> Reply {
    let msg = match super::read(&body) {
        Ok(m) => m,
        Err(r) => return r,
    };
    super::note(principal, &msg);
    let Some((s, stream)) = session_of(gw, parts.uri.query(), principal) else {
        return super::not_found(&msg.id);
    };
    let id = msg.id.clone();
    // A call holds a place among the open streams while it runs (its frames are a stream's).
    let call = msg.v.get("id").is_some() && msg.method.as_ref().is_some_and(Method::may_ask);
    let place = match call.then(|| gw.rt.streams.acquire(principal.id())) {
        Some(Err(r)) => return send(&stream, refused(principal, &id, &r)).await,
        Some(Ok(p)) => Some(p),
        None => None,
    };
    let reply = match msg.method {
        Some(Method::Initialize) => initialize(gw, &s, principal, &msg),
        _ => super::handle(gw, s, &parts.headers, principal, msg, body).await,
    };
    match (reply, place) {
        (Reply::Sse(mut call), Some(place)) if !call.is_complete() => {
            // Relayed to the stream frame by frame (`respond`), the POST answered 202; the call's
            // audit record is written when its last frame is sent, as on Streamable HTTP.
            call.hold(place);
            call.relay_to(stream);
            Reply::Sse(call)
        }
        (reply, _) => send(&stream, reply).await,
    }
}

/// The session `session_id` names in the query, if it is this principal's and this transport's.
fn session_of(
    gw: &Generation,
    query: Option<&str>,
    principal: &Principal,
) -> Option<(Arc<LegacySession>, mpsc::Sender<Frame>)> {
    let id = query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("session_id="))?;
    let s = gw.rt.legacy_sessions.get(id, principal.id())?;
    let stream = s.sse_stream.clone()?;
    Some((s, stream))
}

/// `initialize` on this transport: settles the session's handshake (once), answered as on
/// Streamable HTTP but with no new session (the stream's is the session).
fn initialize(gw: &Generation, s: &LegacySession, principal: &Principal, msg: &Message) -> Reply {
    let h = super::handshake_of(&msg.v);
    let version = h.version.clone();
    if !s.initialize(h) {
        return super::bad(
            &msg.id,
            "this session is initialized already: open a new stream (GET) for a new session",
        );
    }
    Reply::Json(
        StatusCode::OK,
        jsonrpc::result_body(&msg.id, &super::initialize_result(gw, principal, &version)),
    )
}

/// A refused stream place: audited and logged as the front door does, answered `-31018`.
fn refused(principal: &Principal, id: &str, r: &crate::policy::Refusal) -> Reply {
    tracing::info!(principal = ?principal.id(), "stream refused: too many open");
    crate::audit::note(|a| a.decision = Some("refused"));
    Reply::refusal(id, r)
}

/// Puts what a message was answered on the stream and answers the POST 202; a refusal of the
/// POST itself (`Plain`: a bad header) stays its own answer, and a stream gone is 404.
async fn send(stream: &mpsc::Sender<Frame>, reply: Reply) -> Reply {
    let frames = match reply {
        Reply::Accepted => return Reply::Accepted,
        Reply::Plain(..) => return reply,
        Reply::Sse(mut body) => {
            let mut frames = Vec::new();
            while let Some(f) = body.recv().await {
                if let Some(json) = f.json() {
                    note_error(json);
                }
                frames.push(f);
            }
            frames
        }
        other => match other.json_body() {
            Some(b) if !b.is_empty() => {
                note_error(b);
                vec![Frame::message(b)]
            }
            _ => Vec::new(),
        },
    };
    for f in frames {
        if stream.send(f).await.is_err() {
            return super::not_found("null");
        }
    }
    Reply::Accepted
}

/// The error code of an answer sent on the stream, for the POST's audit record (whose own
/// answer, 202, carries none).
fn note_error(body: &[u8]) {
    if memchr::memmem::find(body, b"\"error\"").is_none() {
        return;
    }
    let body = body.split(|b| *b == b'\n').next().unwrap_or(body);
    let code = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/code").and_then(|c| c.as_i64()));
    if let Some(code) = code {
        crate::audit::note(|r| r.error_code = Some(code));
    }
}
