//! An exchange with a legacy upstream run to the end of a round, and the round's conclusion.
//!
//! Takes a live exchange (new, or resumed with a retry's answers), the request's event channel
//! and JSON-RPC id, and the upstream it runs on; gives on the channel the round's one final
//! event: the upstream's final answer, or a round of asks (a `-32042` answer's URL
//! elicitations among them) parked for the client's retry. A session that answers 404 before
//! anything of the call reached the client is replaced once. Refuses, cancelling the call
//! upstream: an approval the client cannot give (no `elicitation`: `-32021`), an ask needing a
//! capability the client did not declare (`-32021`), a malformed answer (`-32602`), a refusal
//! of the gateway's; an upstream failure ends the call and its session is never leased again.
//! Sends nothing when the client went away.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use super::exchange::{CallInfo, Event, Live, Outcome};
use super::round::{park, url_elicitations};
use super::Bridge;
use crate::error::GatewayError;
use crate::mcp::jsonrpc;
use crate::respond::Reply;
use crate::upstream::client::UpstreamError;
use crate::upstream::legacy::{self, session::ListChanged};
use crate::upstream::Upstream;

/// The upstream an exchange runs on, and what its new sessions do with list changes.
pub(super) struct On {
    /// The upstream.
    pub(super) up: Arc<Upstream>,
    /// What a new session of its does with a list-changed notification.
    pub(super) hook: ListChanged,
}

/// Drives an exchange to the end of a round and concludes it; a session gone (404) before
/// anything of the call reached the client is replaced once, and the call sent again on it.
pub(super) async fn run(
    br: Arc<Bridge>,
    mut live: Live,
    mut supplied: Map<String, Value>,
    tx: mpsc::Sender<Event>,
    id: String,
    on: On,
) {
    let up = &on.up;
    let mut outcome = live.drive(&br, &tx, &mut supplied).await;
    // A new session on 404, once, when nothing of the call has reached the client yet.
    if matches!(outcome, Outcome::Failed(UpstreamError::SessionGone(_)))
        && live.round == 0
        && live.asks.is_empty()
    {
        let caps = legacy::legacy_capabilities(&live.info.caps);
        let principal = live.info.principal.clone();
        if let Ok(lease) = br.pool.lease(up, &principal, &caps, on.hook.clone()).await {
            live = live.restart(&br, lease);
            outcome = live.drive(&br, &tx, &mut supplied).await;
        }
    }
    conclude(&br, live, outcome, &tx, &id, up).await
}

/// Concludes a round with its outcome: one final event on `tx` (nothing when the client went
/// away), the call cancelled upstream when the outcome ends it.
pub(super) async fn conclude(
    br: &Arc<Bridge>,
    mut live: Live,
    outcome: Outcome,
    tx: &mpsc::Sender<Event>,
    id: &str,
    up: &Arc<Upstream>,
) {
    let outcome = match outcome {
        // A -32042 answer is a round of URL elicitations, judged like any other asks.
        Outcome::Final(data) => match url_elicitations(br, &live, &data).await {
            Some(Ok(asks)) => {
                live.asks = asks;
                live.finished = true;
                let ev = park(br, live, true, id, up).await;
                let _ = tx.send(ev).await;
                return;
            }
            Some(Err(refused)) => refused,
            None => Outcome::Final(data),
        },
        other => other,
    };
    let event = match outcome {
        Outcome::Final(data) => final_answer(br, &live.info, id, up, data.text()),
        Outcome::Asks
            if live.asks.iter().any(|a| a.approval.is_some())
                && !live.info.caps.contains_key("elicitation") =>
        {
            live.cancel(
                br,
                "approval needs elicitation, which the client did not declare",
            )
            .await;
            let msg = "a gateway policy needs your approval (an elicitation) before this goes on; declare the elicitation capability";
            let data = json!({"requiredCapabilities": {"elicitation": {}}});
            missing_capability(id, msg, &data)
        }
        Outcome::Asks => park(br, live, false, id, up).await,
        Outcome::Refused(r) => {
            live.cancel(br, "refused by the gateway").await;
            Event::Reply(Reply::refusal(id, &r))
        }
        Outcome::MissingCapability(needed) => {
            live.cancel(br, "the client lacks a capability the request needs")
                .await;
            let msg = "the upstream asked for something the client did not declare the capability for; declare it in clientCapabilities and retry";
            missing_capability(id, msg, &json!({"requiredCapabilities": needed}))
        }
        Outcome::BadAnswer(why) => {
            live.cancel(br, "malformed input response").await;
            error(
                id,
                StatusCode::BAD_REQUEST,
                &GatewayError::InvalidParams(why, None),
            )
        }
        Outcome::Failed(e) => failed(&live, e, id, up),
        Outcome::ClientGone => {
            live.cancel(br, "the client disconnected").await;
            return;
        }
    };
    let _ = tx.send(event).await;
}

/// The client's final answer from the upstream's final message (`data`, JSON text).
fn final_answer(br: &Bridge, info: &CallInfo, id: &str, up: &Upstream, data: &str) -> Event {
    let (s, b) = crate::respond::finish(
        id,
        &info.method,
        &up.name,
        StatusCode::OK,
        data,
        info.uri.as_deref(),
        &br.server_info_json,
    );
    Event::Final(s, b)
}

/// A 400 `-32021` final answer: the client lacks a capability (`data`: the error's data, the
/// `requiredCapabilities` to declare).
fn missing_capability(id: &str, msg: &str, data: &Value) -> Event {
    Event::Final(
        StatusCode::BAD_REQUEST,
        jsonrpc::error_body(id, jsonrpc::MISSING_CAPABILITY, msg, Some(data)),
    )
}

/// A final JSON-RPC error answer for `e`, with `status`.
fn error(id: &str, status: StatusCode, e: &GatewayError) -> Event {
    let (_, code, data) = e.classify();
    Event::Final(
        status,
        jsonrpc::error_body(id, code, &e.to_string(), data.as_ref()),
    )
}

/// The final answer to an exchange the upstream failed (logged); its session is never leased
/// again.
fn failed(live: &Live, e: UpstreamError, id: &str, up: &Upstream) -> Event {
    tracing::debug!(upstream = %up.name, error = %crate::escape::Escaped(&e), round = live.round, "legacy exchange failed");
    live.lease
        .session
        .broken
        .store(true, std::sync::atomic::Ordering::Release);
    let e = GatewayError::from(e);
    error(id, e.classify().0, &e)
}
