//! Forwarding one client request to a modern upstream and relaying its answer.
//!
//! Takes the request (body bytes, possibly renamed), the client's headers and log level; gives a
//! [`Reply`]: JSON when the final answer is the first thing to send (so an error keeps the
//! status its code fixes), otherwise an SSE stream that relays request-related progress and,
//! when asked for, log messages, then the stamped final response. Refuses nothing itself; a
//! client that goes away drops the stream, which closes the upstream stream (modern
//! cancellation).

pub mod rounds;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use tokio::sync::mpsc;

use crate::error::GatewayError;
use crate::mcp::jsonrpc::RawObject;
use crate::mcp::method::Method;
use crate::mcp::{jsonrpc, sse};
use crate::policy::Governor;
use crate::respond::{
    error_reply, finish, read_final, result_reply, unexpected_result, Final, Reply, ResultKind,
};
use crate::state::Keys;
use crate::upstream::client::{modern_headers, Answer, HttpClient, Messages, UpstreamError};
use crate::upstream::message::Message;
use crate::upstream::Upstream;
use rounds::RoundError;

/// What forwarding uses, built once by the composition root: the upstream client and its
/// answer timeout, the keys and governor that seal and judge a modern upstream's rounds, and
/// the `serverInfo` stamped into results.
#[derive(Clone)]
pub struct Forwarder {
    /// The pooled upstream client.
    pub client: HttpClient,
    /// `timeouts.response_ms`.
    pub response: std::time::Duration,
    /// Sealing keys for round states.
    pub keys: Keys,
    /// Ask policy and budgets.
    pub governor: Arc<Governor>,
    /// Sluice's `serverInfo` as JSON text.
    pub server_info_json: String,
}

/// One request on its way to an upstream.
pub struct Call {
    /// The client's request id (JSON text).
    pub id: String,
    /// The JSON-RPC method.
    pub method: crate::mcp::method::Method,
    /// The upstream's own name for `Mcp-Name` (tools/call, prompts/get) or the URI (resources/read).
    pub mcp_name: Option<String>,
    /// The URI of a `resources/read`, for error data.
    pub uri: Option<String>,
    /// The body to send.
    pub body: Bytes,
    /// The lowest log level the client asked for (`None`: relay no log messages).
    pub log_level: Option<u8>,
    /// How to seal an `input_required` answer (tools/call, prompts/get, resources/read); `None`
    /// when built, filled by [`forward`] from its `make_seal` only when the answer may need it.
    pub seal: Option<rounds::RoundSeal>,
    /// The call's trace context, sent in place of the client's (`None`: tracing off, the
    /// client's `traceparent`, `tracestate` and `baggage` go through as they came).
    pub trace: Option<crate::telemetry::trace::Carrier>,
    /// The principal's place under the upstream's `max_in_flight_per_principal`, held with the
    /// call (a streamed answer's relay holds it until the stream ends).
    pub share: Option<crate::shares::Place<String>>,
}

enum Msg {
    Final(Reply),
    Relay(Bytes),
    Skip,
}

/// Builds the seal of a possible round; called only for a JSON answer whose decoded
/// `resultType` is `input_required`, or before relaying an SSE answer (which may carry one
/// later), so a plain JSON answer pays nothing for it. `None` for a method that may not
/// return `input_required`.
pub type MakeSeal<'a> = &'a (dyn Fn() -> rounds::RoundSeal + Sync);

/// The upstream's request headers: its own, the call's `Mcp-Method` and `Mcp-Name`, the
/// client's `Mcp-Param-*` and trace context, and this call's span when tracing is on.
fn upstream_headers(up: &Upstream, call: &Call, client_headers: &HeaderMap) -> HeaderMap {
    let mut headers = modern_headers(
        &up.modern_base,
        call.method.as_str(),
        call.mcp_name.as_deref(),
    );
    for (k, v) in client_headers {
        let n = k.as_str();
        if n.starts_with(crate::mcp::headers::PARAM_PREFIX)
            || n == "traceparent"
            || n == "tracestate"
            || n == "baggage"
        {
            headers.append(k, v.clone());
        }
    }
    if let Some(c) = &call.trace {
        c.put_headers(&mut headers);
    }
    headers
}

/// Sends the call and relays the answer.
pub async fn forward(
    fw: &Arc<Forwarder>,
    up: &Arc<Upstream>,
    mut call: Call,
    client_headers: &HeaderMap,
    make_seal: Option<MakeSeal<'_>>,
) -> Result<Reply, GatewayError> {
    let headers = upstream_headers(up, &call, client_headers);
    let t = fw.response;
    // A failure counts against the endpoint's breaker (`upstream::balance`). With one URL, an
    // upstream that cannot be reached is down until its next probe (left out of lists); with
    // several, its other URLs (or its next trial) serve the next call.
    let answer = match up
        .post_modern(
            &fw.client,
            &call.method,
            headers,
            call.body.clone(),
            Some(t),
        )
        .await
    {
        Ok(a) => a,
        Err(e) => {
            if matches!(
                e,
                UpstreamError::Unreachable(..) | UpstreamError::NoConnection(..)
            ) && up.balancer.endpoints.len() <= 1
            {
                up.mark_failed(&e.to_string());
            }
            return Err(e.into());
        }
    };
    match answer {
        Answer::Json(status, body) => {
            let text = std::str::from_utf8(&body).unwrap_or("");
            Ok(reply_for(fw, up, &call, status, read_final(text), || {
                make_seal.map(|f| f())
            })
            .await)
        }
        Answer::Status(status, _) => Err(UpstreamError::Protocol(
            up.name.clone(),
            format!("HTTP {status} without a JSON-RPC body"),
        )
        .into()),
        Answer::Sse(mut stream) => loop {
            if call.seal.is_none() {
                call.seal = make_seal.map(|f| f());
            }
            let Some(msg) = stream.next().await? else {
                return Err(UpstreamError::Closed(up.name.clone()).into());
            };
            match classify(fw, up, &call, &msg).await {
                Msg::Skip => continue,
                Msg::Final(reply) => return Ok(reply),
                Msg::Relay(first) => {
                    let (tx, rx) = mpsc::channel(64);
                    let _ = tx.try_send(sse::Frame::message(&first));
                    crate::audit::spawn(pump(fw.clone(), up.clone(), call, stream, tx));
                    return Ok(Reply::Sse(rx.into()));
                }
            }
        },
    }
}

async fn pump(
    fw: Arc<Forwarder>,
    up: Arc<Upstream>,
    call: Call,
    mut stream: Messages,
    tx: mpsc::Sender<sse::Frame>,
) {
    loop {
        let next = tokio::select! {
            n = stream.next() => n,
            _ = tx.closed() => return, // the client went away: dropping the stream cancels upstream
        };
        let msg = match next {
            Ok(Some(m)) => m,
            Ok(None) => {
                let err = GatewayError::from(UpstreamError::Closed(up.name.clone()));
                let _ = tx
                    .send(sse::Frame::message(&error_bytes(&call.id, &err)))
                    .await;
                return;
            }
            Err(e) => {
                let _ = tx
                    .send(sse::Frame::message(&error_bytes(
                        &call.id,
                        &GatewayError::from(e),
                    )))
                    .await;
                return;
            }
        };
        match classify(&fw, &up, &call, &msg).await {
            Msg::Skip => {}
            Msg::Relay(b) => {
                if tx.send(sse::Frame::message(&b)).await.is_err() {
                    return;
                }
            }
            Msg::Final(reply) => {
                let _ = tx
                    .send(sse::Frame::message(
                        reply.json_body().map_or(&b""[..], |b| &b[..]),
                    ))
                    .await;
                return;
            }
        }
    }
}

/// The client's reply for an upstream's final message: a complete result stamped, an
/// `input_required` round sealed and judged (only where the method allows one), anything else
/// refused as the upstream's protocol error; decided on the decoded `resultType`.
async fn reply_for(
    fw: &Forwarder,
    up: &Upstream,
    call: &Call,
    status: StatusCode,
    fin: Final<'_>,
    seal: impl FnOnce() -> Option<rounds::RoundSeal>,
) -> Reply {
    let (id, method, info) = (&call.id, &call.method, &fw.server_info_json);
    let json = |(s, b): (StatusCode, Bytes)| Reply::Json(s, b);
    match fin {
        Final::Result(m, ResultKind::Complete) => json(result_reply(id, method, &m, info)),
        Final::Result(m, ResultKind::InputRequired) => {
            let Some(seal) = seal() else {
                return json(unexpected_result(id, &up.name));
            };
            let wrapped = rounds::wrap(&fw.keys, &fw.governor, &seal, &m).await;
            if wrapped.is_ok() {
                up.hold_until(seal.template.expires_ms); // a reload's drain waits for its answer
            }
            match wrapped {
                Ok(result) => match serde_json::from_str::<RawObject<'_>>(&result) {
                    Ok(m) => json(result_reply(id, method, &m, info)),
                    Err(_) => json(unexpected_result(id, &up.name)),
                },
                Err(RoundError::Refused(r)) => Reply::refusal(id, &r),
                Err(RoundError::Protocol(why)) => {
                    tracing::warn!(upstream = %up.name, reason = %crate::escape::Escaped(&why), "upstream sent a round that breaks the protocol; call refused");
                    Reply::error(id, &UpstreamError::Protocol(up.name.clone(), why).into())
                }
            }
        }
        Final::Result(_, ResultKind::Other) => json(unexpected_result(id, &up.name)),
        Final::Error(e) => json(error_reply(id, e, status, call.uri.as_deref())),
        Final::Bad => json(finish(id, method, &up.name, status, "", None, info)),
    }
}

fn error_bytes(id: &str, err: &GatewayError) -> Bytes {
    let (_, code, data) = err.classify();
    jsonrpc::error_body(id, code, &err.to_string(), data.as_ref())
}

async fn classify(fw: &Forwarder, up: &Upstream, call: &Call, message: &Message) -> Msg {
    let (msg, data) = (message.head(), message.text());
    if msg.is_response() {
        return Msg::Final(
            reply_for(fw, up, call, StatusCode::OK, read_final(data), || {
                call.seal.clone()
            })
            .await,
        );
    }
    match (msg.method.as_ref(), msg.id.is_some()) {
        (Some(Method::Progress), false) => Msg::Relay(Bytes::copy_from_slice(data.as_bytes())),
        (Some(Method::LogMessage), false) => {
            let Some(want) = call.log_level else {
                return Msg::Skip;
            };
            let rank = crate::mcp::message_rank(msg.params.as_deref());
            if rank.is_some_and(|r| r >= want) {
                Msg::Relay(Bytes::copy_from_slice(data.as_bytes()))
            } else {
                Msg::Skip
            }
        }
        _ => Msg::Skip,
    }
}
