//! Bridge B: 2025-11-25 (and older) clients on the same endpoint.
//!
//! Takes requests that carry no modern envelope (no 2026-07-28 `MCP-Protocol-Version` and no
//! modern `_meta` keys); gives them the handshake era: `initialize` answered by Sluice from its
//! upstreams' discovery with a sealed `Mcp-Session-Id`, `ping` / `logging/setLevel` /
//! `resources/(un)subscribe` answered `{}`, the standalone GET stream, DELETE. Every other
//! request is sent through Sluice's own modern pipeline with the `_meta` envelope filled from
//! the session, so it reaches modern and legacy upstreams alike; an `input_required` answer
//! becomes real server→client requests on the POST's SSE stream, and the retry goes back with
//! this round's `inputResponses` and the byte-exact `requestState`, until complete, an error,
//! or the round cap. Refuses a forged, another principal's, ended or expired session with 404.

mod notify;
mod relay;
mod resume;
pub mod shared;
pub mod sse;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::auth::Principal;
pub use crate::client_sessions::{LegacySession, Sessions};
use crate::gateway::Generation;
use crate::mcp::jsonrpc;
use crate::mcp::method::Method;
use crate::mcp::{headers as mh, version};
use crate::respond::Reply;

/// Whether a request is for the handshake era: no modern `MCP-Protocol-Version` and no modern
/// `_meta` keys, and either `initialize`, a session id, or a JSON-RPC response.
pub fn is_legacy(headers: &HeaderMap, body: &[u8]) -> bool {
    let header_ok = match headers
        .get(mh::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
    {
        None => true,
        Some(v) => version::is_legacy(v.trim()),
    };
    if !header_ok {
        return false;
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return headers.contains_key(mh::SESSION_ID);
    };
    let meta = v.pointer("/params/_meta");
    let modern = meta.is_some_and(|m| {
        m.get(crate::mcp::META_PROTOCOL_VERSION).is_some()
            || m.get(crate::mcp::META_CLIENT_CAPABILITIES).is_some()
    });
    if modern {
        return false;
    }
    let method = v.get("method").and_then(Value::as_str).map(Method::parse);
    method == Some(Method::Initialize) || headers.contains_key(mh::SESSION_ID) || method.is_none()
}

fn not_found(id: &str) -> Reply {
    Reply::Json(
        StatusCode::NOT_FOUND,
        jsonrpc::error_body(
            id,
            jsonrpc::INVALID_REQUEST,
            "session not found (ended or expired): initialize a new session",
            None,
        ),
    )
}

/// Audits a session's GET or DELETE as a legacy client's.
fn note_legacy(principal: &Principal) {
    crate::audit::note(|r| {
        r.client_era = "legacy";
        r.principal = Some(principal.id.clone());
    });
}

/// `GET` with a session: the standalone stream (notifications unrelated to a request).
pub async fn get(gw: &Arc<Generation>, headers: &HeaderMap, principal: &Principal) -> Reply {
    note_legacy(principal);
    let Some(s) = shared::session(gw, headers, principal).await else {
        return Reply::Plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: GET needs a valid Mcp-Session-Id\n",
        );
    };
    if let Some(last) = headers.get("last-event-id") {
        // A call stream that ended early (SEP-1699), taken up where it ended.
        return last.to_str().ok().and_then(|id| resume::take_up(&s, gw.cfg.bridge.park, id)).unwrap_or(Reply::Plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: no stream of this session to resume from that Last-Event-ID (it ended, or was not taken up within bridge.park_ms)\n",
        ));
    }
    let (tx, rx) = mpsc::channel(64);
    let _ = tx.try_send(crate::mcp::sse::Frame::Comment("stream open"));
    if let Ok(mut g) = s.get_stream.lock() {
        *g = Some(tx.clone());
    }
    let watch = notify::Watch::start(gw, principal);
    tokio::spawn(watch.run(s, tx, None));
    Reply::Sse(rx.into())
}

/// `DELETE` with a session: ends it (later requests with its id get 404).
pub async fn delete(gw: &Generation, headers: &HeaderMap, principal: &Principal) -> Reply {
    note_legacy(principal);
    match shared::session(gw, headers, principal).await {
        Some(s) => {
            gw.rt.legacy_sessions.remove(&s.id);
            shared::ended(gw, &s.id).await;
            Reply::Json(StatusCode::OK, Bytes::new())
        }
        None => Reply::Plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: DELETE needs a valid Mcp-Session-Id\n",
        ),
    }
}

/// The modern form of a legacy client's capabilities.
fn modern_caps(legacy: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for key in ["sampling", "elicitation", "experimental"] {
        if let Some(v) = legacy.get(key).filter(|v| v.is_object()) {
            out.insert(key.into(), v.clone());
        }
    }
    if legacy.get("roots").is_some() {
        out.insert("roots".into(), json!({}));
    }
    out
}

/// A POSTed message, read once: the JSON value, its id (JSON text, `null` when absent or not
/// a string or number) and its method (none for a response).
struct Message {
    v: Value,
    id: String,
    method: Option<Method>,
}

/// Reads a POST's body as one JSON-RPC 2.0 message; refuses anything else (400, -32700 or -32600).
fn read(body: &Bytes) -> Result<Message, Reply> {
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Err(Reply::error(
                "null",
                &crate::error::GatewayError::Frame(jsonrpc::FrameError::NotJson(e.to_string())),
            ))
        }
    };
    let id = v
        .get("id")
        .filter(|i| i.is_string() || i.is_number())
        .map(|i| i.to_string())
        .unwrap_or_else(|| "null".into());
    if !v.is_object() || v.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(bad(&id, "not a single JSON-RPC 2.0 message"));
    }
    let method = v.get("method").and_then(Value::as_str).map(Method::parse);
    Ok(Message { v, id, method })
}

fn bad(id: &str, m: &'static str) -> Reply {
    Reply::error(
        id,
        &crate::error::GatewayError::Frame(jsonrpc::FrameError::NotRequest(m)),
    )
}

/// The audit record of a legacy client's message: its era, principal, method and name.
fn note(principal: &Principal, msg: &Message) {
    crate::audit::note(|r| {
        r.client_era = "legacy";
        r.principal = Some(principal.id.clone());
        r.method = msg.method.as_ref().map(Method::to_string); // the name once routed (stages.rs)
    });
}

/// A POST on the handshake-era path.
pub async fn post(
    gw: &Arc<Generation>,
    headers: &HeaderMap,
    principal: &Principal,
    body: Bytes,
) -> Reply {
    let msg = match read(&body) {
        Ok(m) => m,
        Err(r) => return r,
    };
    note(principal, &msg);
    if msg.method == Some(Method::Initialize) {
        return initialize(gw, principal, &msg.v, &msg.id).await;
    }
    let Some(s) = shared::session(gw, headers, principal).await else {
        return if headers.contains_key(mh::SESSION_ID) {
            not_found(&msg.id)
        } else {
            bad(&msg.id, "a JSON-RPC response needs a session")
        };
    };
    handle(gw, s, headers, principal, msg, body).await
}

/// A message of a session (either transport's) other than `initialize`: answered here, or
/// relayed through the stages.
async fn handle(
    gw: &Arc<Generation>,
    s: Arc<LegacySession>,
    headers: &HeaderMap,
    principal: &Principal,
    msg: Message,
    body: Bytes,
) -> Reply {
    if let Some(pv) = headers
        .get(mh::PROTOCOL_VERSION)
        .and_then(|h| h.to_str().ok())
    {
        if !version::is_legacy(pv.trim()) {
            return Reply::Plain(
                StatusCode::BAD_REQUEST,
                "bad request: unsupported MCP-Protocol-Version for this session\n",
            );
        }
    }
    let Message { v, id, method } = msg;
    let Some(method) = method else {
        return answered(gw, &s, headers, principal, &id, v, body).await;
    };
    if v.get("id").is_none() {
        if method == Method::Cancelled {
            let target = v
                .pointer("/params/requestId")
                .map(|i| i.to_string())
                .unwrap_or_default();
            if let Some(t) = s.inflight.lock().ok().and_then(|m| m.get(&target).cloned()) {
                t.cancel();
            }
        }
        return Reply::Accepted;
    }
    let params = v.get("params").cloned().unwrap_or_else(|| json!({}));
    match method {
        Method::Ping => Reply::Json(StatusCode::OK, jsonrpc::result_body(&id, "{}")),
        Method::LoggingSetLevel => {
            if let (Ok(mut l), Some(level)) = (
                s.log_level.lock(),
                params.get("level").and_then(Value::as_str),
            ) {
                *l = Some(level.to_owned());
            }
            Reply::Json(StatusCode::OK, jsonrpc::result_body(&id, "{}"))
        }
        Method::ResourcesSubscribe | Method::ResourcesUnsubscribe => {
            subscription(&s, &method, &params, &id)
        }
        // Listen streams are 2026-07-28's; a 2025-11-25 client gets its notifications on GET.
        Method::SubscriptionsListen => Reply::error(
            &id,
            &crate::error::GatewayError::from(crate::validate::ValidateError::Method(
                method.to_string(),
            )),
        ),
        _ => relay::forward(gw, s, principal, method, params, id).await,
    }
}

/// `resources/subscribe` and `resources/unsubscribe`, answered `{}`.
fn subscription(s: &LegacySession, method: &Method, params: &Value, id: &str) -> Reply {
    if let Some(uri) = params.get("uri").and_then(Value::as_str) {
        if uri.len() > crate::listen::MAX_URI {
            let e = format!(
                "the uri is longer than {} bytes; subscribe to a shorter one",
                crate::listen::MAX_URI
            );
            return Reply::error(id, &crate::error::GatewayError::InvalidParams(e, None));
        }
        if *method == Method::ResourcesUnsubscribe {
            s.unsubscribe(uri);
        } else if let Err(e) = s.subscribe(uri) {
            return Reply::error(
                id,
                &crate::error::GatewayError::InvalidParams(e.to_string(), None),
            );
        }
    }
    Reply::Json(StatusCode::OK, jsonrpc::result_body(id, "{}"))
}

/// A response to one of Sluice's requests to the client: delivered here, or forwarded to the
/// replica that sent the request (its id names it, checked against `cluster.id`'s grammar);
/// 202 either way, as for an answer nobody waits for.
async fn answered(
    gw: &Arc<Generation>,
    s: &LegacySession,
    headers: &HeaderMap,
    principal: &Principal,
    id: &str,
    v: Value,
    body: Bytes,
) -> Reply {
    if s.deliver(id, v) {
        return Reply::Accepted;
    }
    let (Some(owner), Some(c)) = (shared::waiting_elsewhere(gw, id), &gw.governor.cluster) else {
        return Reply::Accepted;
    };
    let f = crate::handoff::Forward {
        owner: owner.as_str(),
        method: http::Method::POST,
        headers,
        principal,
        body,
        id: "null",
    };
    c.forward(&gw.rt.client, &gw.bridge.keys, f)
        .await
        .unwrap_or(Reply::Accepted)
}

/// What a legacy `initialize` settles: the version answered (the one asked for when Sluice
/// knows it, else 2025-11-25), the capabilities in their modern form, the clientInfo.
fn handshake_of(v: &Value) -> crate::client_sessions::Handshake {
    let asked = v
        .pointer("/params/protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = if version::is_legacy(asked) {
        asked
    } else {
        version::LEGACY[0]
    };
    let caps = modern_caps(v.pointer("/params/capabilities").unwrap_or(&Value::Null));
    let client_info = v
        .pointer("/params/clientInfo")
        .cloned()
        .unwrap_or(Value::Null);
    crate::client_sessions::Handshake {
        version: version.to_owned(),
        caps,
        client_info,
    }
}

/// The `InitializeResult` for `version`: the upstreams' discovery (the families they serve,
/// plus `logging`), Sluice's serverInfo, the instructions.
fn initialize_result(gw: &Generation, principal: &Principal, version: &str) -> String {
    let discovered: Value = serde_json::from_str(&crate::dispatch::discover::result(
        &gw.reach,
        &gw.rt.server_info,
        principal,
    ))
    .unwrap_or(Value::Null);
    let mut server_caps = discovered
        .get("capabilities")
        .cloned()
        .unwrap_or_else(|| json!({}));
    server_caps["logging"] = json!({});
    let mut result = json!({"protocolVersion": version, "capabilities": server_caps, "serverInfo": gw.rt.server_info});
    if let Some(i) = discovered.get("instructions") {
        result["instructions"] = i.clone();
    }
    result.to_string()
}

async fn initialize(gw: &Arc<Generation>, principal: &Principal, v: &Value, id: &str) -> Reply {
    let h = handshake_of(v);
    crate::dispatch::discover::first_probes(&gw.reach, principal).await;
    let s = gw
        .rt
        .legacy_sessions
        .create(principal.id(), &h.version, h.caps, h.client_info);
    shared::created(gw, &s).await;
    let result = initialize_result(gw, principal, s.version());
    Reply::Session(
        StatusCode::OK,
        jsonrpc::result_body(id, &result),
        s.id.clone(),
    )
}
