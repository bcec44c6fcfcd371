//! A 2025-11-25 client's request relayed through the stages (`stages`) with its
//! `_meta` filled from the session; its `input_required` rounds turned into real server→client
//! requests on the POST's SSE stream, and the client's POSTed answers sent back with the
//! byte-exact `requestState`, until complete, an error, or the round cap.
//!
//! Takes the session, the method and params; gives the reply (JSON, or the SSE stream of a
//! call). Refuses an ask the client declared no capability for (`-32021` in-stream), an ask it
//! does not answer within `bridge.park_ms`, and rounds past `budget.max_rounds` (`-31010`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::auth::Principal;
use crate::client_sessions::LegacySession;
use crate::gateway::Generation;
use crate::mcp::jsonrpc::{self, Envelope};
use crate::mcp::method::Method;
use crate::mcp::sse::Frame;
use crate::mcp::version;
use crate::respond::Reply;

/// The modern body for a legacy request: `_meta` filled from the session.
fn modern_body(
    s: &LegacySession,
    method: &Method,
    params: &Value,
    extra: Option<(&Map<String, Value>, Option<&Value>)>,
) -> Bytes {
    let mut p = params.as_object().cloned().unwrap_or_default();
    let mut meta = p
        .get("_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.insert(
        crate::mcp::META_PROTOCOL_VERSION.into(),
        version::MODERN.into(),
    );
    meta.insert(
        crate::mcp::META_CLIENT_CAPABILITIES.into(),
        Value::Object(s.caps().clone()),
    );
    if !s.client_info().is_null() {
        meta.insert(crate::mcp::META_CLIENT_INFO.into(), s.client_info().clone());
    }
    if let Some(l) = s.log_level.lock().ok().and_then(|l| l.clone()) {
        meta.insert(crate::mcp::META_LOG_LEVEL.into(), l.into());
    }
    p.insert("_meta".into(), Value::Object(meta));
    if let Some((responses, state)) = extra {
        p.insert("inputResponses".into(), Value::Object(responses.clone()));
        if let Some(st) = state {
            p.insert("requestState".into(), st.clone());
        }
    }
    let n = s.next_request_id();
    Bytes::from(json!({"jsonrpc": "2.0", "id": format!("sluice-b-{n}"), "method": method.as_str(), "params": p}).to_string())
}

/// One message out of a modern reply: notifications to relay, then the final message.
/// `resumes`: whether the client's stream ends where the upstream's did (`resume.rs`; not on
/// the 2024-11-05 transport, whose one stream carries the session).
async fn messages(
    reply: Reply,
    relay: &mpsc::Sender<Frame>,
    resumes: bool,
) -> Result<Value, Reply> {
    match reply {
        Reply::Json(_, b) => {
            serde_json::from_slice(&b).map_err(|_| Reply::Json(StatusCode::BAD_GATEWAY, b))
        }
        Reply::Sse(mut rx) => {
            while let Some(frame) = rx.recv().await {
                let json = match frame {
                    Frame::Resumed if resumes => {
                        let _ = relay.send(frame).await; // the client's stream ends here too (resume.rs)
                        continue;
                    }
                    Frame::Message { json, .. } => json,
                    _ => continue,
                };
                let Ok(msg) = serde_json::from_slice::<Value>(&json) else {
                    continue;
                };
                if msg.get("method").is_some() && msg.get("id").is_none() {
                    let _ = relay.send(Frame::Message { json, id: None }).await;
                    continue;
                }
                return Ok(msg);
            }
            Err(Reply::Plain(
                StatusCode::BAD_GATEWAY,
                "bad gateway: the stream ended before the answer\n",
            ))
        }
        other => Err(other),
    }
}

/// An SSE stream of one message (already whole: it takes no place among the open streams).
fn one_event(msg: Bytes) -> Reply {
    Reply::Sse(crate::respond::SseBody::one(Frame::message(&msg)))
}

/// A final message for the legacy client: its own id, and no modern stamping.
fn legacy_final(msg: &Value, id: &str) -> Bytes {
    if let Some(mut r) = msg.get("result").cloned() {
        if let Some(o) = r.as_object_mut() {
            o.remove("resultType");
            if let Some(m) = o.get_mut("_meta").and_then(Value::as_object_mut) {
                m.remove(crate::mcp::META_SERVER_INFO);
            }
            if o.get("_meta")
                .and_then(Value::as_object)
                .is_some_and(|m| m.is_empty())
            {
                o.remove("_meta");
            }
        }
        return jsonrpc::result_body(id, &r.to_string());
    }
    let err = msg
        .get("error")
        .cloned()
        .unwrap_or_else(|| json!({"code": jsonrpc::INTERNAL_ERROR, "message": "no answer"}));
    Bytes::from(format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{err}}}"
    ))
}

pub(super) async fn forward(
    gw: &Arc<Generation>,
    s: Arc<LegacySession>,
    principal: &Principal,
    method: Method,
    params: Value,
    id: String,
) -> Reply {
    let streamed = method.may_ask();
    if !streamed {
        // Nothing reads what this request's notifications would be relayed on: a closed channel,
        // so relaying them fails at once instead of filling it and stopping the call.
        let (tx, _) = mpsc::channel::<Frame>(1);
        let env = match Envelope::parse(modern_body(&s, &method, &params, None)) {
            Ok(e) => e,
            Err(e) => return Reply::error(&id, &crate::error::GatewayError::from(e)),
        };
        let reply = crate::stages::run_internal(gw, env, principal).await;
        return match messages(reply, &tx, false).await {
            // On an SSE stream, as the official SDK servers answer by default (every 2025-11-25
            // client accepts one: the edge refuses an Accept without it).
            Ok(msg) => one_event(legacy_final(&msg, &id)),
            Err(r) => r,
        };
    }
    let (tx, rx) = mpsc::channel::<Frame>(64);
    let cancel = tokio_util::sync::CancellationToken::new();
    if let Ok(mut m) = s.inflight.lock() {
        m.insert(id.clone(), cancel.clone());
    }
    let (s2, park) = (s.clone(), gw.cfg.bridge.park);
    let name = method
        .name_member()
        .and_then(|m| params.get(m))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let call = (method.to_string(), name);
    let (gw, principal) = (gw.clone(), principal.clone());
    // In the request's audit scope: what the rounds decide lands in this request's record.
    crate::audit::spawn(async move {
        let work = rounds(&gw, &s, &principal, &method, &params, &id, &tx);
        let out = tokio::select! {
            out = work => Some(out),
            _ = cancel.cancelled() => None, // notifications/cancelled: the upstream work is dropped
            _ = tx.closed() => None,
        };
        if let Some(bytes) = out {
            let _ = tx.send(Frame::message(&bytes)).await;
        }
        if let Ok(mut m) = s.inflight.lock() {
            m.remove(&id);
        }
    });
    if s2.is_sse() {
        // On the 2024-11-05 transport the frames go on the session's stream as they are (`sse.rs`).
        return Reply::Sse(rx.into());
    }
    // The POST's SSE stream: a priming event first (SEP-1699), then requests and the answer,
    // each with an id, resumable with a GET if it ends early.
    super::resume::open(s2, park, call, rx)
}

/// Runs the request and its `input_required` rounds; gives the final message body.
async fn rounds(
    gw: &Arc<Generation>,
    s: &LegacySession,
    principal: &Principal,
    method: &Method,
    params: &Value,
    id: &str,
    tx: &mpsc::Sender<Frame>,
) -> Bytes {
    let max = gw.governor.budgets.limits("", &principal.groups).max_rounds;
    let mut extra: Option<(Map<String, Value>, Option<Value>)> = None;
    let mut round = 0u32;
    loop {
        let body = modern_body(
            s,
            method,
            params,
            extra.as_ref().map(|(r, st)| (r, st.as_ref())),
        );
        let env = match Envelope::parse(body) {
            Ok(e) => e,
            Err(e) => {
                return jsonrpc::error_body(id, jsonrpc::INVALID_REQUEST, &e.to_string(), None)
            }
        };
        let reply = crate::stages::run_internal(gw, env, principal).await;
        let msg = match messages(reply, tx, !s.is_sse()).await {
            Ok(m) => m,
            Err(r) => {
                return r.json_body().cloned().unwrap_or_else(|| {
                    jsonrpc::error_body(id, jsonrpc::INTERNAL_ERROR, "the request failed", None)
                })
            }
        };
        let result = msg.get("result");
        if result
            .and_then(|r| r.get("resultType"))
            .and_then(Value::as_str)
            != Some("input_required")
        {
            return legacy_final(&msg, id);
        }
        round += 1;
        if round > max {
            let r = crate::policy::Refusal::RoundCap(max);
            let (_, code, m, data) = r.classify();
            return jsonrpc::error_body(id, code, &m, Some(&data));
        }
        let result = result.cloned().unwrap_or_default();
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let state = result.get("requestState").cloned();
        if requests.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await; // a requestState-only answer: retry, paced
            extra = Some((Map::new(), state));
            continue;
        }
        match ask_client(gw, s, &requests, tx).await {
            Ok(responses) => extra = Some((responses, state)),
            Err(body) => return Bytes::from(body.replace("\"id\":null", &format!("\"id\":{id}"))),
        }
    }
}

fn error_text(code: i64, msg: &str, data: Option<&Value>) -> String {
    String::from_utf8_lossy(&jsonrpc::error_body("null", code, msg, data)).into_owned()
}

/// Sends each input request to the client as a real request on the stream and gathers the
/// answers (by input key).
async fn ask_client(
    gw: &Generation,
    s: &LegacySession,
    requests: &Map<String, Value>,
    tx: &mpsc::Sender<Frame>,
) -> Result<Map<String, Value>, String> {
    let mut waiting = Vec::new();
    for (key, req) in requests {
        let method = Method::parse(req.get("method").and_then(Value::as_str).unwrap_or(""));
        let mut params = req.get("params").cloned().unwrap_or_else(|| json!({}));
        let needed = match method {
            Method::SamplingCreateMessage => {
                (!s.caps().contains_key("sampling")).then(|| json!({"sampling": {}}))
            }
            Method::ElicitationCreate => {
                (!s.caps().contains_key("elicitation")).then(|| json!({"elicitation": {}}))
            }
            Method::RootsList => (!s.caps().contains_key("roots")).then(|| json!({"roots": {}})),
            _ => Some(json!({})),
        };
        if let Some(needed) = needed {
            let msg = format!("the server needs the client capability {needed} for this request; declare it at initialize");
            return Err(error_text(
                jsonrpc::MISSING_CAPABILITY,
                &msg,
                Some(&json!({"requiredCapabilities": needed})),
            ));
        }
        if method == Method::ElicitationCreate
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && params.get("elicitationId").is_none()
        {
            params["elicitationId"] = format!("sluice-{}", crate::state::nonce()).into();
        }
        let rid = super::shared::request_id(gw, s.next_request_id());
        let rid_json = Value::String(rid.clone()).to_string();
        let rx = s.expect(&rid_json);
        let request =
            json!({"jsonrpc": "2.0", "id": rid, "method": method.as_str(), "params": params});
        if tx
            .send(Frame::message(request.to_string().as_bytes()))
            .await
            .is_err()
        {
            return Err(error_text(
                jsonrpc::INTERNAL_ERROR,
                "the client went away",
                None,
            ));
        }
        waiting.push((key.clone(), method, rx));
    }
    let mut out = Map::new();
    for (key, method, rx) in waiting {
        let answer = match tokio::time::timeout(gw.cfg.bridge.park, rx).await {
            Ok(Ok(a)) => a,
            _ => {
                return Err(error_text(
                    jsonrpc::INTERNAL_ERROR,
                    "the client did not answer the server's request in time",
                    None,
                ))
            }
        };
        match (answer.get("result"), method) {
            (Some(r), _) => {
                out.insert(key, r.clone());
            }
            (None, Method::ElicitationCreate) => {
                out.insert(key, json!({"action": "cancel"}));
            }
            (None, _) => {
                let e = answer.get("error").cloned().unwrap_or(Value::Null);
                return Err(format!("{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{e}}}"));
            }
        }
    }
    Ok(out)
}
