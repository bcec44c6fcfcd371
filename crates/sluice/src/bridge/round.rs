//! A round of a legacy upstream's asks, put to the client: parked under a sealed state (one
//! input request per ask, or an approval round first), and `-32042` URL elicitations read into
//! asks like any other.
//!
//! Takes a live exchange with its pending asks; gives the client's `input_required` event, or a
//! refusal when the park table or the principal's share of it is full. Refuses a `-32042`
//! answer that breaks the protocol, asks past `budget.max_asks_per_round`, an ask the client has
//! no capability for, and asks policy denies. A round's events become the client's reply as
//! JSON when the final body comes first, as SSE (the rest in-stream) when a notification does.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::exchange::{Event, Live, Outcome};
use super::park::Parked;
use super::{asks, Bridge};
use crate::error::GatewayError;
use crate::mcp::jsonrpc;
use crate::mcp::method::Method;
use crate::mcp::sse;
use crate::respond::Reply;
use crate::state::{self, Bound, Kind, Sealed};
use crate::upstream::client::UpstreamError;
use crate::upstream::message::Message;
use crate::upstream::Upstream;

/// With `[cluster]`, a place among the principal's parked exchanges across replicas; `None`:
/// it has one (or Redis is unreachable and the cluster falls back to this replica's count).
async fn shared_place(
    br: &Bridge,
    principal: &str,
    handle: &str,
    cap: usize,
) -> Option<crate::policy::Refusal> {
    let c = br.governor.cluster.as_ref()?;
    match c
        .shared
        .park(principal, handle, br.limits.bridge.park, cap)
        .await
    {
        Ok(true) => None,
        Ok(false) => Some(crate::policy::Refusal::ParkedCap {
            limit: cap,
            per_principal: true,
        }),
        Err(_) if c.unavailable("parked cap") == crate::cluster::Fallback::Local => None,
        Err(_) => Some(crate::policy::Refusal::SharedState),
    }
}

/// `-32042` (URL elicitation required, 2025-11-25): its elicitations become a round whose retry
/// re-issues the call. Each is an ask like any other: bounded per round, shaped, judged by
/// policy and budgets, and never shown to a client that lacks the capability. `None`: not a
/// -32042 answer.
pub(super) async fn url_elicitations(
    br: &Bridge,
    live: &Live,
    data: &Message,
) -> Option<Result<Vec<asks::Ask>, Outcome>> {
    let err = data.head().error.as_ref().filter(|e| e.code == -32042)?;
    let up = &live.lease.session.up.name;
    let protocol = |why: &str| Outcome::Failed(UpstreamError::Protocol(up.clone(), why.to_owned()));
    let Some(list) = err
        .data
        .as_ref()
        .and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
    else {
        return Some(Err(protocol("a -32042 answer without data.elicitations")));
    };
    let limit = br
        .governor
        .budgets
        .limits(&live.info.ctx.upstream, &live.info.ctx.groups)
        .max_asks_per_round;
    if list.len() > limit {
        return Some(Err(Outcome::Refused(crate::policy::Refusal::TooManyAsks(
            limit,
        ))));
    }
    let mut out: Vec<asks::Ask> = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        let Some(obj) = e.as_object() else {
            return Some(Err(protocol("a -32042 elicitation that is not an object")));
        };
        let mut params = obj.clone();
        params.insert("mode".into(), "url".into());
        let raw = Value::Object(params).to_string();
        let taken: Vec<String> = out.iter().map(|a| a.key.clone()).collect();
        let mut ask = asks::ask(
            &format!("\"url-{i}\""),
            &Method::ElicitationCreate,
            Some(&raw),
            &taken,
        );
        if let Some(needed) = asks::missing_capability(&ask, &live.info.caps) {
            return Some(Err(Outcome::MissingCapability(needed)));
        }
        match crate::policy::ask::judge(
            &br.governor,
            &live.info.ctx,
            &ask.method,
            Some(&raw),
            &mut ask.params,
        )
        .await
        {
            crate::policy::ask::AskVerdict::Allow => {}
            crate::policy::ask::AskVerdict::Approve(rule) => ask.approval = Some(rule),
            crate::policy::ask::AskVerdict::Malformed(why) => return Some(Err(protocol(&why))),
            crate::policy::ask::AskVerdict::Deny(r) | crate::policy::ask::AskVerdict::Refuse(r) => {
                return Some(Err(Outcome::Refused(r)));
            }
        }
        out.push(ask);
    }
    if out.is_empty() {
        return Some(Err(protocol("a -32042 answer with no elicitation")));
    }
    Some(Ok(out))
}

/// Parks a live exchange for the client's retry: its round sealed, its asks (or the approval
/// that comes first) sent as an `input_required` result; refused, and the upstream's call
/// cancelled, past the principal's or the table's cap of parked exchanges.
pub(super) async fn park(
    br: &Arc<Bridge>,
    mut live: Live,
    reissue: bool,
    id: &str,
    up: &Arc<Upstream>,
) -> Event {
    let asks = std::mem::take(&mut live.asks);
    let round = live.round + 1;
    let park_for = br.limits.bridge.park;
    let (handle, token) = seal_round(br, &live, round, up);
    // An approval round comes first when a rule wants one for any of these asks.
    let approving = asks.iter().any(|a| a.approval.is_some());
    let requests = round_requests(&asks, &live, up);
    let info = live.info.clone();
    let limits = br
        .governor
        .budgets
        .limits(&up.name, &info.ctx.groups)
        .clone();
    let max = limits.max_parked_per_principal;
    let over = if br.parked.count_for(&info.principal) >= max {
        Some(crate::policy::Refusal::ParkedCap {
            limit: max,
            per_principal: true,
        })
    } else {
        shared_place(br, &info.principal, &handle, max).await
    };
    let parked = Parked {
        live: if reissue { None } else { Some(live) },
        asks,
        info,
        round,
        up: up.clone(),
        reissue,
        approving,
    };
    let handle_copy = handle.clone();
    let refused = match over {
        Some(r) => Some((r, Box::new(parked))),
        None => place(br, handle, parked, park_for, max),
    };
    if let Some((refusal, back)) = refused {
        br.release(&back.info.principal, &handle_copy);
        let br2 = br.clone();
        tokio::spawn(async move {
            if let Some(mut l) = back.live {
                l.cancel(&br2, "too many parked exchanges").await;
            }
        });
        return Event::Reply(Reply::refusal(id, &refusal));
    }
    let result = json!({"resultType": "input_required", "inputRequests": requests, "requestState": token,
        "_meta": {crate::mcp::META_SERVER_INFO: br.server_info}});
    Event::Final(
        StatusCode::OK,
        jsonrpc::result_body(id, &result.to_string()),
    )
}

/// Seals the next round of a live exchange (bound to its principal, method, name, arguments
/// and upstream, valid for `bridge.park_ms`); gives its park handle (the state's nonce: taking
/// the exchange once is its single use) and the sealed token.
fn seal_round(br: &Bridge, live: &Live, round: u32, up: &Upstream) -> (String, String) {
    let bound = Bound {
        principal: live.info.principal.clone(),
        method: live.info.method.to_string(),
        name: live.info.name.clone(),
        digest: live.info.digest.clone(),
        upstream: up.name.clone(),
    };
    let sealed = Sealed::issue(
        Kind::Bridge,
        bound,
        round,
        state::now_ms() + br.limits.bridge.park.as_millis() as u64,
        &br.limits.replica,
    );
    let handle = sealed.handle.clone().unwrap_or_default();
    let token = br.keys.seal(&sealed);
    // A reload's drain waits for its answer.
    up.hold_until(sealed.expires_ms);
    (handle, token)
}

/// The round's `inputRequests`: the asks, or the approval a rule wants for one of them first.
fn round_requests(asks: &[asks::Ask], live: &Live, up: &Upstream) -> Value {
    match asks.iter().find(|a| a.approval.is_some()) {
        Some(a) => {
            let shape =
                crate::policy::shape::AskShape::read(&a.method, Some(&a.params.to_string()))
                    .unwrap_or_default();
            let msg = crate::policy::approval::for_ask(
                &up.name,
                live.info.ctx.tool.as_deref(),
                &a.method,
                &shape,
                a.approval.as_deref().unwrap_or(""),
            );
            json!({crate::policy::approval::KEY: crate::policy::approval::request(&msg)})
        }
        None => asks::input_requests(asks),
    }
}

/// Puts the exchange in the park table until `park_for` passes; gives it back with the
/// refusal when the table or the principal's share of it is full.
fn place(
    br: &Bridge,
    handle: String,
    parked: Parked,
    park_for: std::time::Duration,
    max: usize,
) -> Option<(crate::policy::Refusal, Box<Parked>)> {
    br.parked
        .insert_capped(handle, parked, std::time::Instant::now() + park_for, max)
        .err()
        .map(|(back, mine)| {
            let limit = if mine { max } else { br.parked.capacity() };
            (
                crate::policy::Refusal::ParkedCap {
                    limit,
                    per_principal: mine,
                },
                back,
            )
        })
}

/// Turns a round's events into the client's reply: JSON when the final body comes first, SSE
/// when a notification comes first.
pub(super) async fn reply_from(mut rx: mpsc::Receiver<Event>, id: &str, upstream: &str) -> Reply {
    match rx.recv().await {
        None => Reply::error(
            id,
            &GatewayError::from(UpstreamError::Closed(upstream.to_owned())),
        ),
        Some(Event::Final(s, b)) => Reply::Json(s, b),
        Some(Event::Reply(r)) => r,
        Some(first @ (Event::Relay(_) | Event::Resumed)) => {
            let (stx, srx) = mpsc::channel(64);
            let _ = stx.try_send(match first {
                Event::Relay(b) => sse::Frame::message(&b),
                _ => sse::Frame::Resumed,
            });
            crate::audit::spawn(async move {
                loop {
                    // The client gone ends the exchange now (its drive sees `events` closed),
                    // not at the upstream's next message.
                    let ev = tokio::select! {
                        ev = rx.recv() => match ev { Some(ev) => ev, None => return },
                        _ = stx.closed() => return,
                    };
                    let (bytes, last) = match ev {
                        Event::Resumed => {
                            if stx.send(sse::Frame::Resumed).await.is_err() {
                                return;
                            }
                            continue;
                        }
                        Event::Relay(b) => (b, false),
                        Event::Final(_, b) => (b, true),
                        // Once streaming, a refusal travels in-stream.
                        Event::Reply(r) => (r.json_body().cloned().unwrap_or_default(), true),
                    };
                    if stx.send(sse::Frame::message(&bytes)).await.is_err() || last {
                        return;
                    }
                }
            });
            Reply::Sse(srx.into())
        }
    }
}
