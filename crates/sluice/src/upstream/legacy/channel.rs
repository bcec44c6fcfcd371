//! The channel of a session whose every message from the server comes on one stream: a stdio
//! process (its stdout), or a 2024-11-05 HTTP+SSE connection (its GET stream, with messages
//! POSTed to the endpoint it named). Over either, a call's own answer arrives on that stream,
//! not as the answer to the request that sent it.
//!
//! Takes messages to send; gives the same operations over both: send one, send a request of
//! Sluice's own and wait for its answer, hand a response to its waiter, end, and learn of the
//! end. Refuses nothing itself: each transport's errors name the upstream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::sse::SseLink;
use crate::upstream::client::UpstreamError;
use crate::upstream::message::Message;
use crate::upstream::stdio::Proc;

/// One session's channel.
#[derive(Clone)]
pub enum Channel {
    /// A stdio server process.
    Stdio(Arc<Proc>),
    /// A 2024-11-05 HTTP+SSE connection.
    Sse(Arc<SseLink>),
}

impl Channel {
    /// Sends one message (request, response or notification).
    pub async fn send(&self, msg: &[u8]) -> Result<(), UpstreamError> {
        match self {
            Channel::Stdio(p) => p.send(msg).await,
            Channel::Sse(l) => l.send(msg).await,
        }
    }

    /// Sends request `id` and waits up to `timeout` for its response (JSON text).
    pub async fn request(
        &self,
        id: u64,
        body: Bytes,
        timeout: Duration,
    ) -> Result<String, UpstreamError> {
        match self {
            Channel::Stdio(p) => p.request(id, body, timeout).await,
            Channel::Sse(l) => l.pending.request(id, timeout, l.send(&body)).await,
        }
    }

    /// Hands a response to Sluice's own request `id`; gives it back when none waits.
    pub fn complete(&self, id: u64, msg: Message) -> Result<(), Message> {
        match self {
            Channel::Stdio(p) => p.complete(id, msg),
            Channel::Sse(l) => l.pending.complete(id, msg),
        }
    }

    /// Ends it for `why` (content-free).
    pub fn end(&self, why: &str) {
        match self {
            Channel::Stdio(p) => p.end(why),
            Channel::Sse(l) => l.pending.close(why),
        }
    }

    /// Its stream ended: a stdio process is ended (its exit status is the reason told), an
    /// SSE session is over.
    pub fn stream_ended(&self) {
        match self {
            Channel::Stdio(p) => p.stop(),
            Channel::Sse(l) => l.pending.close("its SSE stream ended"),
        }
    }

    /// Whether it has ended (or is ending).
    pub fn is_done(&self) -> bool {
        match self {
            Channel::Stdio(p) => p.is_done(),
            Channel::Sse(l) => l.pending.is_closed(),
        }
    }

    /// Resolves once it has ended, with the error a call under way gets.
    pub async fn ended(&self) -> UpstreamError {
        match self {
            Channel::Stdio(p) => {
                p.ended().await;
                p.exit_error()
            }
            Channel::Sse(l) => {
                l.pending.closed().await;
                l.pending.error()
            }
        }
    }

    /// The longest message read from it.
    pub fn max_message(&self) -> usize {
        match self {
            Channel::Stdio(p) => p.max_line,
            Channel::Sse(l) => l.max_event,
        }
    }
}
