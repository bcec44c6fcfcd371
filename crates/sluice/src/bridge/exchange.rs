//! A live exchange with a legacy upstream: the call's POST stream and its session's GET stream,
//! read together until the final answer or a round of asks.
//!
//! Takes a leased session and the legacy request; gives an [`Outcome`]: the final message, a
//! round of asks gathered until none arrived for `bridge.gather_ms`, a missing client
//! capability, a failure, or the client gone. Relays request-related progress (and log
//! messages when asked for) as they come. Answers `ping` and refuses asks it cannot bridge
//! with an error reply upstream.

use std::ops::ControlFlow;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::asks::{self, Ask};
use super::post::{PostEvent, PostStream};
use super::Bridge;
use crate::mcp::method::Method;
use crate::upstream::client::UpstreamError;
use crate::upstream::legacy::{Lease, Session};
use crate::upstream::message::Message;

/// What the client-facing side receives from a round.
pub enum Event {
    /// A notification to relay (JSON text).
    Relay(Bytes),
    /// The final body for this HTTP request and its status.
    Final(http::StatusCode, Bytes),
    /// A final reply with headers of its own (a refusal with `Retry-After`).
    Reply(crate::respond::Reply),
    /// The upstream ended the call's stream early and it was taken up again (told only to a
    /// 2025-11-25 client, which sees the same on its own stream).
    Resumed,
}

/// What reading an exchange came to.
pub enum Outcome {
    /// The upstream's final JSON-RPC response.
    Final(Message),
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
    /// Whether the client is a 2025-11-25 one (bridge B), told when the upstream ends the
    /// call's stream early.
    pub legacy_client: bool,
}

/// An exchange in progress (or parked between rounds).
pub struct Live {
    /// The leased session (returned to the pool when the exchange is dropped).
    pub lease: Lease,
    /// The upstream request id of the call.
    pub upstream_id: u64,
    post: PostStream,
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

impl Live {
    /// Sends the legacy request on the leased session and starts reading its answer.
    pub fn start(
        br: &Bridge,
        lease: Lease,
        body_for: impl Fn(u64) -> Bytes + Send + Sync + 'static,
        info: CallInfo,
    ) -> Live {
        let upstream_id = lease.session.next_id();
        let body = body_for(upstream_id);
        let rebuild: Rebuild = std::sync::Arc::new(body_for);
        // Each message within the park time (the client's turn) plus the response time (the
        // upstream's): keep-alives or a trickle do not hold the call open past it. Bounded by
        // bytes too: while the exchange is parked nothing reads it.
        let per_message = br.limits.bridge.park + br.limits.response;
        let post = PostStream::post(
            lease.session.clone(),
            br.client.clone(),
            body,
            per_message,
            br.limits.max_sse_event_bytes,
        );
        Live {
            lease,
            upstream_id,
            post,
            asks: Vec::new(),
            round: 0,
            info,
            get_open: true,
            finished: false,
            rebuild,
        }
    }

    /// Tells the upstream the call is abandoned (a legacy server does not take a disconnect as
    /// cancellation) and marks nothing else: dropping the exchange frees the session.
    pub async fn cancel(&mut self, br: &Bridge, reason: &str) {
        if !self.finished {
            self.lease
                .session
                .cancel(&br.client, self.upstream_id, reason)
                .await;
            self.finished = true;
            // Some servers (the Python SDK 1.x among them) can lose a session when a cancellation
            // races the call's own answer: never lease a session again after cancelling on it.
            self.lease
                .session
                .broken
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Sends the same call again on a new session (after the old one answered 404).
    pub fn restart(self, br: &Bridge, lease: Lease) -> Live {
        let rebuild = self.rebuild.clone();
        Live::start(br, lease, move |id| rebuild(id), self.info.clone())
    }

    /// Reads until an outcome. `supplied` holds answers given without a requestState.
    pub async fn drive(
        &mut self,
        br: &Bridge,
        events: &mpsc::Sender<Event>,
        supplied: &mut Map<String, Value>,
    ) -> Outcome {
        let gather = br.limits.bridge.gather;
        // While Sluice waits on the upstream (not on the client), each message is due within
        // timeouts.response_ms: keep-alives and trickled bytes bring none.
        let response = br.limits.response;
        let deadline = tokio::time::sleep(response);
        tokio::pin!(deadline);
        loop {
            let wait = if self.asks.is_empty() {
                None
            } else {
                Some(gather)
            };
            // Biased: a client that went away wins; then a message (an ask among them) that is
            // ready together with the gather timer joins this round instead of the next.
            let msg = tokio::select! {
                biased;
                _ = events.closed() => return Outcome::ClientGone,
                m = self.post.recv() => match m {
                    Some(PostEvent::Msg(d)) => d,
                    // The server ended the stream before its answer, after an event id: taken
                    // up again from there (within the same deadline).
                    Some(PostEvent::Dropped(from)) => match self.post.take_up(self.lease.session.clone(), br.client.clone(), *from) {
                        Ok(()) => {
                            if self.info.legacy_client {
                                let _ = events.send(Event::Resumed).await;
                            }
                            // The wait before reconnecting is the server's to ask: the next
                            // message is due a response time after it, not before.
                            deadline.as_mut().reset(tokio::time::Instant::now() + response + super::post::MAX_RETRY_WAIT);
                            continue;
                        }
                        Err(e) => return Outcome::Failed(e),
                    },
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
            deadline
                .as_mut()
                .reset(tokio::time::Instant::now() + response);
            if let Some(out) = self.handle(br, events, supplied, msg).await {
                return out;
            }
        }
    }

    async fn handle(
        &mut self,
        br: &Bridge,
        events: &mpsc::Sender<Event>,
        supplied: &mut Map<String, Value>,
        data: Message,
    ) -> Option<Outcome> {
        let msg = data.head();
        let session = self.lease.session.clone();
        // Names only: an upstream's method it made up is `other`.
        let known = msg.method.as_ref().map(|m| m.known().unwrap_or("other"));
        tracing::trace!(upstream = %session.up.name, method = known.unwrap_or("(response)"), ours = self.upstream_id, "legacy exchange message");
        if msg.is_response() {
            // The id decoded, not compared as text: `7` and `7.0` are the same number.
            let ours = msg
                .id
                .as_ref()
                .and_then(|i| crate::mcp::number::Exact::parse(i.get()))
                == crate::mcp::number::Exact::parse(&self.upstream_id.to_string());
            if ours {
                self.finished = true;
                return Some(Outcome::Final(data));
            }
            return None;
        }
        match (msg.method.as_ref(), msg.id.as_ref()) {
            (Some(Method::Ping), Some(id)) => session.reply(&br.client, id.get(), Ok("{}")).await,
            (Some(m), Some(id)) if m.is_ask() => {
                return self
                    .on_ask(
                        br,
                        supplied,
                        m,
                        id.get(),
                        msg.params.as_deref().map(|p| p.get()),
                    )
                    .await
            }
            (Some(m), Some(id)) => {
                tracing::warn!(upstream = %session.up.name, method = m.known().unwrap_or("other"), "upstream sent a request Sluice does not bridge; refused");
                session
                    .reply(
                        &br.client,
                        id.get(),
                        Err((-32601, "method not supported through this gateway")),
                    )
                    .await;
            }
            (Some(Method::Progress), None) => {
                let _ = events
                    .send(Event::Relay(Bytes::copy_from_slice(data.text().as_bytes())))
                    .await;
            }
            (Some(Method::LogMessage), None) => {
                let rank = crate::mcp::message_rank(msg.params.as_deref());
                // A modern client gets the levels it asked for; a 2025-11-25 one that set no
                // level gets what the server sends, as it would direct.
                let wanted = match (self.info.log_level, rank) {
                    (Some(want), Some(r)) => r >= want,
                    (None, _) => self.info.legacy_client,
                    (Some(_), None) => false,
                };
                if wanted {
                    let _ = events
                        .send(Event::Relay(Bytes::copy_from_slice(data.text().as_bytes())))
                        .await;
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
        let limit = br
            .governor
            .budgets
            .limits(&self.info.ctx.upstream, &self.info.ctx.groups)
            .max_asks_per_round;
        if self.asks.len() >= limit {
            // A round is bounded before anything of the ask is read.
            session
                .reply(
                    &br.client,
                    id,
                    Err((-1, "too many requests at once (gateway limit)")),
                )
                .await;
            return Some(Outcome::Refused(crate::policy::Refusal::TooManyAsks(limit)));
        }
        let taken: Vec<String> = self.asks.iter().map(|a| a.key.clone()).collect();
        let ask = asks::ask(id, m, params, &taken);
        if let Some(needed) = asks::missing_capability(&ask, &self.info.caps) {
            session
                .reply(
                    &br.client,
                    id,
                    Err((
                        -32601,
                        "the client did not declare the capability this request needs",
                    )),
                )
                .await;
            return Some(Outcome::MissingCapability(needed));
        }
        let mut ask = ask;
        let raw = params;
        if let ControlFlow::Break(out) = judge(br, &session, &self.info.ctx, &mut ask, raw).await {
            return out;
        }
        // An ask that needs approval is never answered by a pre-supplied response.
        if let Some(answer) = supplied.remove(&ask.key).filter(|_| ask.approval.is_none()) {
            return self.answer_supplied(br, &session, &ask, &answer).await;
        }
        self.asks.push(ask);
        None
    }

    /// A pre-supplied answer to `ask` (given without a requestState): refused over the size
    /// bound of an answer to a round, else checked and sent upstream as the ask's response.
    async fn answer_supplied(
        &self,
        br: &Bridge,
        session: &Session,
        ask: &Ask,
        answer: &Value,
    ) -> Option<Outcome> {
        // The same size bound as an answer to a round.
        let max = br
            .governor
            .budgets
            .limits(&self.info.ctx.upstream, &self.info.ctx.groups)
            .max_input_response_bytes;
        let size = answer.to_string().len();
        if size > max {
            session
                .reply(
                    &br.client,
                    &ask.id,
                    Err((-1, "the answer was refused by the gateway (too large)")),
                )
                .await;
            return Some(Outcome::Refused(crate::policy::Refusal::TooLarge(format!(
                "inputResponses[{:?}] is {size} bytes, over budget.max_input_response_bytes ({max})",
                ask.key
            ))));
        }
        match asks::validate(&ask.method, answer) {
            Ok(result) => {
                session.reply(&br.client, &ask.id, Ok(&result)).await;
                None
            }
            Err(why) => Some(Outcome::BadAnswer(why)),
        }
    }
}

/// Judges an ask by policy and budgets: it goes on (`Continue`, marked for approval when a
/// rule asks for it), or is answered upstream here (`Break`): a malformed or denied ask fails
/// alone and the call goes on (`None`); a refused one ends the call (its outcome).
async fn judge(
    br: &Bridge,
    session: &Session,
    ctx: &crate::policy::ask::AskCtx,
    ask: &mut Ask,
    raw: Option<&str>,
) -> ControlFlow<Option<Outcome>> {
    match crate::policy::ask::judge(&br.governor, ctx, &ask.method, raw, &mut ask.params).await {
        crate::policy::ask::AskVerdict::Allow => ControlFlow::Continue(()),
        crate::policy::ask::AskVerdict::Malformed(why) => {
            // The upstream's mistake: that ask fails, its call goes on.
            tracing::warn!(upstream = %session.up.name, method = ask.method.known().unwrap_or("other"), reason = %crate::escape::Escaped(&why), "upstream sent a malformed ask; answered with an error");
            session
                .reply(
                    &br.client,
                    &ask.id,
                    Err((crate::mcp::jsonrpc::INVALID_PARAMS, &why)),
                )
                .await;
            ControlFlow::Break(None)
        }
        crate::policy::ask::AskVerdict::Approve(rule) => {
            ask.approval = Some(rule);
            ControlFlow::Continue(())
        }
        crate::policy::ask::AskVerdict::Deny(_) => {
            // This ask only: the upstream hears "rejected" and its call goes on.
            match ask.method {
                Method::ElicitationCreate => {
                    session
                        .reply(&br.client, &ask.id, Ok(r#"{"action":"decline"}"#))
                        .await
                }
                _ => {
                    session
                        .reply(
                            &br.client,
                            &ask.id,
                            Err((-1, "User rejected the request (gateway policy)")),
                        )
                        .await
                }
            }
            ControlFlow::Break(None)
        }
        crate::policy::ask::AskVerdict::Refuse(r) => {
            session
                .reply(
                    &br.client,
                    &ask.id,
                    Err((-1, "refused by the gateway's budget")),
                )
                .await;
            ControlFlow::Break(Some(Outcome::Refused(r)))
        }
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
