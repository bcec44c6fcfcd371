//! A live exchange with a legacy upstream: the call's POST stream and its session's GET stream,
//! read together until the final answer or a round of asks.
//!
//! Takes a leased session and the legacy request; gives an [`Outcome`]: the final message, a
//! round of asks gathered until none arrived for `bridge.gather_ms`, a missing client
//! capability, a failure, or the client gone. Relays request-related progress (and log
//! messages when asked for) as they come. Answers `ping` and refuses asks it cannot bridge
//! with an error reply upstream.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::asks::{self, Ask};
use super::Bridge;
use crate::mcp::jsonrpc::Incoming;
use crate::mcp::method::Method;
use crate::upstream::client::{Answer, UpstreamError};
use crate::upstream::legacy::Lease;

/// What the client-facing side receives from a round.
pub enum Event {
    /// A notification to relay (JSON text).
    Relay(Bytes),
    /// The final body for this HTTP request and its status.
    Final(http::StatusCode, Bytes),
    /// A final reply with headers of its own (a refusal with `Retry-After`).
    Reply(crate::respond::Reply),
}

/// What reading an exchange came to.
pub enum Outcome {
    /// The upstream's final JSON-RPC response (JSON text).
    Final(String),
    /// A round of asks is pending (in [`Live::asks`]).
    Asks,
    /// An ask needs a capability the client did not declare (the ClientCapabilities it needs).
    MissingCapability(Value),
    /// A client-supplied answer was malformed.
    BadAnswer(String),
    /// The upstream failed.
    Failed(UpstreamError),
    /// Governance refused the call (budget, size).
    Refused(crate::policy::Refusal),
    /// The client went away.
    ClientGone,
}

/// What the call's POST stream delivers. The error is boxed: the channel allocates 32 slots at
/// once and each parked exchange keeps its channel, so the slot is kept small.
enum PostEvent {
    Msg(String),
    End(Option<Box<UpstreamError>>),
}

/// The request a live exchange serves, as bound into its sealed state.
#[derive(Debug, Clone)]
pub struct CallInfo {
    /// The principal.
    pub principal: String,
    /// The method.
    pub method: crate::mcp::method::Method,
    /// The name or URI the client used.
    pub name: String,
    /// Digest of the canonical params.
    pub digest: String,
    /// The client's declared capabilities.
    pub caps: Map<String, Value>,
    /// The client's log level rank, if any.
    pub log_level: Option<u8>,
    /// The URI of a resources/read.
    pub uri: Option<String>,
    /// Who asks what for whom, for policies and budgets.
    pub ctx: crate::policy::ask::AskCtx,
}

/// An exchange in progress (or parked between rounds).
pub struct Live {
    /// The leased session (returned to the pool when the exchange is dropped).
    pub lease: Lease,
    /// The upstream request id of the call.
    pub upstream_id: u64,
    post_rx: crate::upstream::queue::Receiver<PostEvent>,
    post_task: tokio::task::AbortHandle,
    /// Asks waiting for the client's answers.
    pub asks: Vec<Ask>,
    /// The last round answered to the client (0 before any).
    pub round: u32,
    /// The request it serves.
    pub info: CallInfo,
    get_open: bool,
    /// Set once the final answer arrived (nothing to cancel upstream).
    pub finished: bool,
    /// Builds the legacy request body for a request id (to re-send it on a new session).
    pub rebuild: Rebuild,
}

/// Builds a legacy request body for a given upstream request id.
pub type Rebuild = std::sync::Arc<dyn Fn(u64) -> Bytes + Send + Sync>;

impl Drop for Live {
    fn drop(&mut self) {
        self.post_task.abort();
    }
}

impl Live {
    /// Sends the legacy request on the leased session and starts reading its answer.
    pub fn start(br: &Bridge, lease: Lease, body_for: impl Fn(u64) -> Bytes + Send + Sync + 'static, info: CallInfo) -> Live {
        let upstream_id = lease.session.next_id();
        let body = body_for(upstream_id);
        let rebuild: Rebuild = std::sync::Arc::new(body_for);
        // Bounded by bytes too: while the exchange is parked nothing reads this, and a hostile
        // upstream must not fill Sluice's memory meanwhile (the reader waits; TCP holds the rest).
        let (tx, rx) = crate::upstream::queue::bounded(64, br.limits.max_sse_event_bytes);
        let session = lease.session.clone();
        let client = br.client.clone();
        // Each message within the park time (the client's turn) plus the response time (the
        // upstream's): keep-alives or a trickle do not hold the call open past it.
        let per_message = br.limits.bridge.park + br.limits.response;
        let post_task = tokio::spawn(async move {
            // The request's future is boxed so that it is freed once the answer started: the
            // task lives as long as the exchange, parked or not.
            let end = match Box::pin(session.post(&client, body, Some(per_message))).await {
                Ok(Answer::Json(http::StatusCode::NOT_FOUND, _)) | Ok(Answer::Status(http::StatusCode::NOT_FOUND, _)) => {
                    session.broken.store(true, std::sync::atomic::Ordering::Release);
                    Some(UpstreamError::SessionGone(session.up.name.clone()))
                }
                Ok(Answer::Json(_, b)) => {
                    let _ = tx.send(PostEvent::Msg(String::from_utf8_lossy(&b).into_owned()), b.len()).await;
                    None
                }
                // stdio, SSE: the request was sent; its answer, and the end of the session if it
                // ends first, come through the session's inbox (read to its end first, so an
                // answer written just before the process exited is not lost).
                Ok(Answer::Status(http::StatusCode::ACCEPTED, _)) if session.answers_inline() => {
                    let _held = &tx; // the exchange reads the inbox; this side stays silent
                    return std::future::pending().await;
                }
                Ok(Answer::Sse(mut s)) => loop {
                    match s.next().await {
                        Ok(Some(d)) => {
                            let size = d.len();
                            if tx.send(PostEvent::Msg(d), size).await.is_err() {
                                return;
                            }
                        }
                        Ok(None) => break None,
                        Err(e) => break Some(e),
                    }
                },
                Ok(Answer::Status(status, _)) => {
                    Some(UpstreamError::Protocol(session.up.name.clone(), format!("HTTP {status} to a call on its session")))
                }
                Err(e) => Some(e),
            };
            let _ = tx.send(PostEvent::End(end.map(Box::new)), 1).await;
        })
        .abort_handle();
        Live { lease, upstream_id, post_rx: rx, post_task, asks: Vec::new(), round: 0, info, get_open: true, finished: false, rebuild }
    }

    /// Tells the upstream the call is abandoned (a legacy server does not take a disconnect as
    /// cancellation) and marks nothing else: dropping the exchange frees the session.
    pub async fn cancel(&mut self, br: &Bridge, reason: &str) {
        if !self.finished {
            self.lease.session.cancel(&br.client, self.upstream_id, reason).await;
            self.finished = true;
            // Some servers (the Python SDK 1.x among them) can lose a session when a cancellation
            // races the call's own answer: never lease a session again after cancelling on it.
            self.lease.session.broken.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Sends the same call again on a new session (after the old one answered 404).
    pub fn restart(self, br: &Bridge, lease: Lease) -> Live {
        let rebuild = self.rebuild.clone();
        Live::start(br, lease, move |id| rebuild(id), self.info.clone())
    }

    /// Reads until an outcome. `supplied` holds answers given without a requestState.
    pub async fn drive(&mut self, br: &Bridge, events: &mpsc::Sender<Event>, supplied: &mut Map<String, Value>) -> Outcome {
        let gather = br.limits.bridge.gather;
        // While Sluice waits on the upstream (not on the client), each message is due within
        // timeouts.response_ms: keep-alives and trickled bytes bring none.
        let response = br.limits.response;
        let deadline = tokio::time::sleep(response);
        tokio::pin!(deadline);
        loop {
            let wait = if self.asks.is_empty() { None } else { Some(gather) };
            // Biased: a client that went away wins; then a message (an ask among them) that is
            // ready together with the gather timer joins this round instead of the next.
            let msg = tokio::select! {
                biased;
                _ = events.closed() => return Outcome::ClientGone,
                m = self.post_rx.recv() => match m {
                    Some(PostEvent::Msg(d)) => d,
                    Some(PostEvent::End(e)) => return Outcome::Failed(e.map(|e| *e).unwrap_or_else(|| UpstreamError::Closed(self.lease.session.up.name.clone()))),
                    None => return Outcome::Failed(UpstreamError::Closed(self.lease.session.up.name.clone())),
                },
                m = self.lease.session.recv(), if self.get_open => match m {
                    Some(d) => d,
                    // Over stdio or SSE the inbox ends with the session: the call fails, saying why.
                    None if self.lease.session.answers_inline() => return Outcome::Failed(self.lease.session.ended().await),
                    None => { self.get_open = false; continue; }
                },
                _ = sleep_opt(wait) => return Outcome::Asks,
                _ = &mut deadline => {
                    let up = self.lease.session.up.name.clone();
                    return Outcome::Failed(UpstreamError::Timeout(up, response.as_millis() as u64));
                }
            };
            deadline.as_mut().reset(tokio::time::Instant::now() + response);
            if let Some(out) = self.handle(br, events, supplied, &msg).await {
                return out;
            }
        }
    }

    async fn handle(
        &mut self,
        br: &Bridge,
        events: &mpsc::Sender<Event>,
        supplied: &mut Map<String, Value>,
        data: &str,
    ) -> Option<Outcome> {
        let msg: Incoming = serde_json::from_str(data).ok()?;
        let session = self.lease.session.clone();
        // Names only: an upstream's method it made up is `other`.
        let known = msg.method.as_ref().map(|m| m.known().unwrap_or("other"));
        tracing::trace!(upstream = %session.up.name, method = known.unwrap_or("(response)"), ours = self.upstream_id, "legacy exchange message");
        if msg.is_response() {
            // The id decoded, not compared as text: `7` and `7.0` are the same number.
            let ours = msg.id.as_ref().and_then(|i| crate::mcp::number::Exact::parse(i.get()))
                == crate::mcp::number::Exact::parse(&self.upstream_id.to_string());
            if ours {
                self.finished = true;
                return Some(Outcome::Final(data.to_owned()));
            }
            return None;
        }
        match (msg.method.as_ref(), msg.id.as_ref()) {
            (Some(Method::Ping), Some(id)) => session.reply(&br.client, id.get(), Ok("{}")).await,
            (Some(m), Some(id)) if m.is_ask() => {
                return self.on_ask(br, supplied, m, id.get(), msg.params.as_deref().map(|p| p.get())).await
            }
            (Some(m), Some(id)) => {
                tracing::warn!(upstream = %session.up.name, method = m.known().unwrap_or("other"), "upstream sent a request Sluice does not bridge; refused");
                session.reply(&br.client, id.get(), Err((-32601, "method not supported through this gateway"))).await;
            }
            (Some(Method::Progress), None) => {
                let _ = events.send(Event::Relay(Bytes::copy_from_slice(data.as_bytes()))).await;
            }
            (Some(Method::LogMessage), None) => {
                let level = msg.params.as_ref().and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
                let rank = level.as_ref().and_then(|p| p.get("level")).and_then(Value::as_str).and_then(crate::mcp::level_rank);
                if let (Some(want), Some(r)) = (self.info.log_level, rank) {
                    if r >= want {
                        let _ = events.send(Event::Relay(Bytes::copy_from_slice(data.as_bytes()))).await;
                    }
                }
            }
            _ => {}
        }
        None
    }

    /// One ask of the upstream: bounded per round, checked against the client's capabilities,
    /// judged by policy and budgets, answered from a pre-supplied response, or kept for the round.
    async fn on_ask(
        &mut self,
        br: &Bridge,
        supplied: &mut Map<String, Value>,
        m: &Method,
        id: &str,
        params: Option<&str>,
    ) -> Option<Outcome> {
        let session = self.lease.session.clone();
        let limit = br.governor.budgets.limits(&self.info.ctx.upstream, &self.info.ctx.groups).max_asks_per_round;
        if self.asks.len() >= limit {
            // A round is bounded before anything of the ask is read.
            session.reply(&br.client, id, Err((-1, "too many requests at once (gateway limit)"))).await;
            return Some(Outcome::Refused(crate::policy::Refusal::TooManyAsks(limit)));
        }
        let taken: Vec<String> = self.asks.iter().map(|a| a.key.clone()).collect();
        let ask = asks::ask(id, m, params, &taken);
        if let Some(needed) = asks::missing_capability(&ask, &self.info.caps) {
            session.reply(&br.client, id, Err((-32601, "the client did not declare the capability this request needs"))).await;
            return Some(Outcome::MissingCapability(needed));
        }
        let mut ask = ask;
        let raw = params;
        match crate::policy::ask::judge(&br.governor, &self.info.ctx, &ask.method, raw, &mut ask.params) {
            crate::policy::ask::AskVerdict::Allow => {}
            crate::policy::ask::AskVerdict::Malformed(why) => {
                // The upstream's mistake: that ask fails, its call goes on.
                tracing::warn!(upstream = %session.up.name, method = ask.method.known().unwrap_or("other"), reason = %why, "upstream sent a malformed ask; answered with an error");
                session.reply(&br.client, &ask.id, Err((crate::mcp::jsonrpc::INVALID_PARAMS, &why))).await;
                return None;
            }
            crate::policy::ask::AskVerdict::Approve(rule) => ask.approval = Some(rule),
            crate::policy::ask::AskVerdict::Deny(_) => {
                // This ask only: the upstream hears "rejected" and its call goes on.
                match ask.method {
                    Method::ElicitationCreate => session.reply(&br.client, &ask.id, Ok(r#"{"action":"decline"}"#)).await,
                    _ => session.reply(&br.client, &ask.id, Err((-1, "User rejected the request (gateway policy)"))).await,
                }
                return None;
            }
            crate::policy::ask::AskVerdict::Refuse(r) => {
                session.reply(&br.client, &ask.id, Err((-1, "refused by the gateway's budget"))).await;
                return Some(Outcome::Refused(r));
            }
        }
        // An ask that needs approval is never answered by a pre-supplied response.
        if let Some(answer) = supplied.remove(&ask.key).filter(|_| ask.approval.is_none()) {
            // The same size bound as an answer to a round.
            let max = br.governor.budgets.limits(&self.info.ctx.upstream, &self.info.ctx.groups).max_input_response_bytes;
            let size = answer.to_string().len();
            if size > max {
                session.reply(&br.client, &ask.id, Err((-1, "the answer was refused by the gateway (too large)"))).await;
                return Some(Outcome::Refused(crate::policy::Refusal::TooLarge(format!(
                    "inputResponses[{:?}] is {size} bytes, over budget.max_input_response_bytes ({max})",
                    ask.key
                ))));
            }
            return match asks::validate(&ask.method, &answer) {
                Ok(result) => {
                    session.reply(&br.client, &ask.id, Ok(&result)).await;
                    None
                }
                Err(why) => Some(Outcome::BadAnswer(why)),
            };
        }
        self.asks.push(ask);
        None
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        // Zero (`gather_ms = 0`): ready at once, not at the timer wheel's next millisecond tick;
        // the biased select still takes a message that is already there first.
        Some(d) if d.is_zero() => {}
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
