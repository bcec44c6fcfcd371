//! A 2025-11-25 session whose every message from the server comes on one stream (its
//! [`Channel`]): a stdio process, one process per session (the stdio transport has no session
//! id), or a 2024-11-05 HTTP+SSE connection, one connection per session.
//!
//! Takes the channel (a started process, a warm spare or a new one; or a connected SSE link),
//! the bridged capabilities and the principal; gives a [`Session`] that has done `initialize`
//! and `notifications/initialized` on it, with a task reading its stream: responses to Sluice's
//! own requests go to their waiter, everything else is routed as on an HTTP session's GET stream
//! (pings answered, list changes reported, the rest to the leasing call). Refuses, by ending the
//! session and marking the upstream unhealthy with a message naming it (never the bytes): a
//! message over `limits.max_sse_event_bytes`, and one that is not JSON-RPC (a stdio server must
//! write only MCP messages to stdout).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::HeaderValue;
use serde_json::{json, Value};
use tokio_util::codec::LinesCodecError;

use super::channel::Channel;
use super::session::{route, ListChanged, Route, Session};
use crate::mcp::method::Method as McpMethod;
use crate::upstream::client::{Messages, UpstreamError};
use crate::upstream::message::Message;
use crate::upstream::stdio::{Line, Lines};
use crate::upstream::Upstream;

/// Where the server's messages are read from.
pub(super) enum Source {
    /// A stdio process's stdout lines.
    Lines(Lines),
    /// A 2024-11-05 session's event stream.
    Sse(Messages),
}

impl Source {
    /// The next message; `Err` is a protocol fault (content-free), `None` the end. A stdio
    /// line that is not one JSON-RPC object is a fault (a stdio server must write only MCP
    /// messages to stdout); an SSE event that is not one is skipped by the stream (a named
    /// ping, a repeated endpoint).
    async fn next(&mut self, max: usize) -> Option<Result<Message, Fault>> {
        match self {
            Source::Lines(l) => loop {
                break match l.next().await? {
                    Ok(Line::Text(line)) if line.trim().is_empty() => continue,
                    Ok(Line::Text(line)) => Some(Message::decode(line).map_err(|line| {
                        let n = line.len();
                        Fault::Garbage(format!(
                            "it sent a {n}-byte message that is not JSON-RPC (a stdio server must write only MCP messages to stdout; logs go to stderr)"
                        ))
                    })),
                    Ok(Line::TooLong) | Err(LinesCodecError::MaxLineLengthExceeded) => {
                        Some(Err(Fault::TooLong(format!(
                            "it wrote a stdout line over {max} bytes (limits.max_response_bytes)"
                        ))))
                    }
                    Err(LinesCodecError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
                        Some(Err(Fault::Garbage(
                            "it wrote a stdout line that is not UTF-8 text".into(),
                        )))
                    }
                    Err(LinesCodecError::Io(_)) => None,
                };
            },
            Source::Sse(s) => match s.next().await {
                Ok(Some(data)) => Some(Ok(data)),
                Ok(None) => None,
                Err(UpstreamError::TooLarge(..)) => Some(Err(Fault::TooLong(format!(
                    "it sent an SSE event over {max} bytes (limits.max_sse_event_bytes)"
                )))),
                Err(_) => None,
            },
        }
    }
}

/// Why a stream is given up.
enum Fault {
    /// A message over the bound: that session (and the call on it) fails, the upstream stays up.
    TooLong(String),
    /// Something that is not MCP: the upstream is marked unhealthy too.
    Garbage(String),
}

/// What one session's channel needs beyond the upstream.
pub(super) struct Open<'a> {
    pub(super) channel: Channel,
    pub(super) source: Source,
    pub(super) caps: super::Bridged,
    pub(super) principal: &'a str,
    pub(super) on_list_changed: ListChanged,
    /// How long `initialize` may take: a stdio upstream's `start_ms` (its boot), else
    /// `timeouts.response_ms`.
    pub(super) handshake: Duration,
    pub(super) max_event: usize,
}

/// Runs the handshake on the channel; gives the session, or why it failed (the channel ended).
pub(super) async fn open(up: Arc<Upstream>, o: Open<'_>) -> Result<Arc<Session>, UpstreamError> {
    let (tx, rx) = crate::upstream::queue::bounded(256, o.max_event);
    let leased = Arc::new(AtomicBool::new(false));
    let channel = o.channel;
    let reader = Reader {
        up: up.clone(),
        channel: channel.clone(),
        tx,
        leased: leased.clone(),
        on_list_changed: o.on_list_changed,
    };
    let task = tokio::spawn(reader.run(o.source)).abort_handle();
    // Until the session exists, dropping this future (the client went away mid-handshake)
    // ends the channel and its reader: nothing is left running unowned.
    let mut guard = Opening {
        task: Some(task),
        channel: channel.clone(),
    };
    let (version, init) = handshake(&channel, &up, o.caps, o.handshake).await?;
    let task = guard.task.take().expect("the reader task, taken once");
    Ok(Arc::new(Session::over_channel(
        up,
        version,
        init,
        o.principal,
        o.caps,
        rx,
        leased,
        channel,
        task,
    )))
}

/// A channel being opened: ended with its reader unless the handshake completed.
struct Opening {
    task: Option<tokio::task::AbortHandle>,
    channel: Channel,
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            self.channel
                .end("its initialize handshake failed or was abandoned");
        }
    }
}

async fn handshake(
    channel: &Channel,
    up: &Upstream,
    caps: super::Bridged,
    within: Duration,
) -> Result<(HeaderValue, Value), UpstreamError> {
    let init = super::handshake::initialize_body(caps);
    let line = channel.request(0, Bytes::from(init.to_string()), within).await.map_err(|e| match (e, channel) {
        (UpstreamError::Timeout(name, ms), Channel::Stdio(_)) => {
            UpstreamError::Start(name, format!("it did not answer initialize within {ms} ms of being taken into use (start_ms)"))
        }
        (e, _) => e,
    })?;
    let (version, result) = super::handshake::initialized(&up.name, line.as_bytes())?;
    let note = json!({"jsonrpc": "2.0", "method": McpMethod::Initialized.as_str()});
    channel.send(note.to_string().as_bytes()).await?;
    Ok((version, result))
}

/// The task that reads a session's stream.
struct Reader {
    up: Arc<Upstream>,
    channel: Channel,
    tx: crate::upstream::queue::Sender<Message>,
    leased: Arc<AtomicBool>,
    on_list_changed: ListChanged,
}

impl Reader {
    async fn run(self, mut source: Source) {
        let max = self.channel.max_message();
        while let Some(next) = source.next(max).await {
            let msg = match next {
                Ok(m) => m,
                Err(Fault::TooLong(why)) => return self.end(&why),
                Err(Fault::Garbage(why)) => return self.fault(&why),
            };
            // A response to a request of Sluice's own (the handshake, a list) goes to its waiter;
            // any other, the call's own answer among them, is routed like every message.
            let head = msg.head();
            let msg = match head
                .id
                .as_ref()
                .and_then(|i| whole_number(i.get()))
                .filter(|_| head.is_response())
            {
                Some(id) => match self.channel.complete(id, msg) {
                    Ok(()) => continue,
                    Err(msg) => msg,
                },
                None => msg,
            };
            match route(msg.head(), &self.leased, &self.up.name) {
                Route::Reply(id, outcome) => {
                    let body = super::session::reply_body(&id, outcome);
                    if self.channel.send(&body).await.is_err() {
                        break;
                    }
                }
                Route::ListChanged(change) => self.on_list_changed.report(&self.up, change).await,
                Route::ToCall => {
                    let size = msg.len();
                    if self.tx.send(msg, size).await.is_err() {
                        break;
                    }
                }
                Route::Drop => {}
            }
        }
        // The stream ended: so did the session.
        self.channel.stream_ended();
    }

    /// Ends the session for a message over the bound; the upstream stays up (a client asking
    /// for something large must not take it down for everyone).
    fn end(&self, why: &str) {
        tracing::warn!(upstream = %self.up.name, reason = %crate::escape::Escaped(why), "upstream sent a message over the bound; its session is ended");
        self.channel.end(why);
    }

    /// Ends the session for a protocol error and marks the upstream unhealthy, saying why.
    fn fault(&self, why: &str) {
        tracing::warn!(upstream = %self.up.name, reason = %crate::escape::Escaped(why), "upstream broke the protocol on its session's stream; the session is ended");
        self.up
            .mark_failed(&format!("upstream '{}': {why}", self.up.name));
        self.channel.end(why);
    }
}

/// A JSON-RPC id as a whole number (`7` and `7.0` alike, as the exchange decodes them).
fn whole_number(raw: &str) -> Option<u64> {
    let n: serde_json::Number = serde_json::from_str(raw).ok()?;
    n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..9.0e15).contains(f))
            .map(|f| f as u64)
    })
}
