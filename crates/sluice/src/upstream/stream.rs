//! The messages of one upstream answer as they come, typed: an SSE body read with its bounds, or the
//! lines a stdio server's shared process routed to one request (`lines`), behind one
//! [`Messages`] so no caller tells the two apart.
//!
//! Takes the body (or the routed answer), the SSE reader with its event size bound, and how
//! long the stream may take; gives each message, decoded ([`Message`]), where a 2025-11-25 stream can be taken
//! up again, and the end. Refuses (as [`UpstreamError`] naming the upstream) an event over the
//! bound and a wait past its deadline: each message within the caller's stream timeout (bytes
//! that complete no message do not extend it), or, without one, some bytes at least every
//! `timeouts.stream_idle_ms`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;

use super::error::UpstreamError;
use super::message::Message;
use crate::mcp::sse;

/// Where a 2025-11-25 stream that ended before its answer is taken up again: a `GET` with
/// `Last-Event-ID`, after the `retry` the server asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The last event id the stream carried.
    pub last_id: String,
    /// The reconnection time it asked for, if any.
    pub retry: Option<Duration>,
}

/// Where a stream's messages come from.
enum Source<B> {
    /// An HTTP body of SSE events.
    Http {
        body: B,
        reader: sse::Reader,
        pending: std::collections::VecDeque<sse::Event>,
    },
    /// A stdio server's lines routed to one request (`stdio::shared`).
    Lines(super::lines::Answer),
}

/// How long an SSE stream may take.
#[derive(Debug, Clone, Copy)]
pub(super) enum Bound {
    /// Each message must arrive within this long of the wait for it starting (calls).
    PerMessage(Duration),
    /// Some bytes must arrive at least this often (listen and GET streams).
    Idle(Duration),
}

/// The messages of an upstream answer, typed (decoded once, as they come), read with the
/// per-message deadline (or the idle bound) and the event size bound. The body type is a
/// parameter only so tests can feed one.
pub struct Messages<B = hyper::body::Incoming> {
    upstream: std::sync::Arc<str>,
    source: Source<B>,
    bound: Bound,
    /// Held while the stream is read (the upstream's `max_in_flight` place).
    _hold: Option<Box<dyn Send + Sync>>,
    /// When the message waited for must have arrived (`PerMessage`); kept in the stream so a
    /// `next` cancelled and called again does not start a fresh wait.
    deadline: Option<tokio::time::Instant>,
}

impl<B> Messages<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    pub(super) fn new(upstream: &str, body: B, reader: sse::Reader, bound: Bound) -> Self {
        let source = Source::Http {
            body,
            reader,
            pending: Default::default(),
        };
        Messages {
            upstream: upstream.into(),
            source,
            bound,
            deadline: None,
            _hold: None,
        }
    }

    /// The same stream, holding `hold` until it is dropped.
    pub fn holding(mut self, hold: Option<Box<dyn Send + Sync>>) -> Self {
        self._hold = hold;
        self
    }

    /// Where the stream can be taken up again after it ended (SEP-1699): the last event id it
    /// carried and the reconnection time it asked for; `None` for a stream without ids (and a
    /// stdio answer, which has no stream to take up).
    pub fn resume_point(&self) -> Option<Resume> {
        let Source::Http { reader, .. } = &self.source else {
            return None;
        };
        let last_id = reader.last_id()?.to_owned();
        Some(Resume {
            last_id,
            retry: reader.retry_ms().map(Duration::from_millis),
        })
    }

    /// The next message, decoded, `Ok(None)` at the end of the stream. An event that is not
    /// one JSON-RPC object (a named event of another kind) is skipped, and does not extend
    /// the per-message deadline.
    pub async fn next(&mut self) -> Result<Option<Message>, UpstreamError> {
        loop {
            let Some(text) = self.read_data().await? else {
                return Ok(None);
            };
            match Message::decode(text) {
                Ok(m) => {
                    self.deadline = None;
                    return Ok(Some(m));
                }
                Err(text) => {
                    tracing::debug!(upstream = %self.upstream, bytes = text.len(), "an event that is not a JSON-RPC message; skipped");
                }
            }
        }
    }

    /// The next event's data as text, `Ok(None)` at the end of the stream: for the one event
    /// that is not a message, a 2024-11-05 server's `endpoint` (a URL).
    pub async fn next_data(&mut self) -> Result<Option<String>, UpstreamError> {
        let got = self.read_data().await?;
        if got.is_some() {
            self.deadline = None;
        }
        Ok(got)
    }

    /// The next event's data, without starting a fresh per-message deadline.
    async fn read_data(&mut self) -> Result<Option<String>, UpstreamError> {
        let Messages {
            upstream,
            source,
            bound,
            deadline,
            ..
        } = self;
        let timeout = |limit: Duration| {
            UpstreamError::Timeout(upstream.to_string(), limit.as_millis() as u64)
        };
        let got = match source {
            Source::Lines(answer) => {
                let (until, limit) = wait(*bound, deadline);
                match tokio::time::timeout_at(until, answer.next())
                    .await
                    .map_err(|_| timeout(limit))?
                {
                    super::lines::Next::Message(m) => Some(m),
                    super::lines::Next::End => None,
                    super::lines::Next::Gone(why) => {
                        return Err(UpstreamError::Exited(upstream.to_string(), why))
                    }
                }
            }
            Source::Http {
                body,
                reader,
                pending,
            } => loop {
                if let Some(ev) = pending.pop_front() {
                    if ev.data.trim().is_empty() {
                        continue; // priming events carry no message (and do not extend the deadline)
                    }
                    break Some(ev.data);
                }
                // Per frame: an idle bound counts from the last bytes, a per-message one is kept.
                let (until, limit) = wait(*bound, deadline);
                match tokio::time::timeout_at(until, body.frame())
                    .await
                    .map_err(|_| timeout(limit))?
                {
                    None | Some(Err(_)) => break None,
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            let events = reader
                                .push(&data)
                                .map_err(|e| UpstreamError::TooLarge(upstream.to_string(), e.0))?;
                            pending.extend(events);
                        }
                    }
                }
            },
        };
        Ok(got)
    }
}

impl Messages {
    /// The stream of a stdio server's answer routed to one request.
    pub(super) fn over_lines(upstream: &str, answer: super::lines::Answer, bound: Bound) -> Self {
        Messages {
            upstream: upstream.into(),
            source: Source::Lines(answer),
            bound,
            deadline: None,
            _hold: None,
        }
    }
}

/// When the message waited for must have arrived (kept in `deadline` for a per-message bound,
/// so a `next` cancelled and called again does not start a fresh wait), and the bound's length.
fn wait(
    bound: Bound,
    deadline: &mut Option<tokio::time::Instant>,
) -> (tokio::time::Instant, Duration) {
    let now = tokio::time::Instant::now();
    match bound {
        Bound::PerMessage(t) => (*deadline.get_or_insert(now + t), t),
        Bound::Idle(t) => (now + t, t),
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use hyper::body::Frame;
    use tokio::sync::mpsc;
    use tokio::time::{sleep, Instant};

    use super::*;
    use crate::mcp::sse;

    /// A body fed by hand, one chunk per send.
    struct Fed(mpsc::UnboundedReceiver<&'static [u8]>);

    impl hyper::body::Body for Fed {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0
                .poll_recv(cx)
                .map(|c| c.map(|c| Ok(Frame::data(Bytes::from_static(c)))))
        }
    }

    /// A stream over a body that gets `chunks`, one every `every`, then stays open and silent.
    fn fed(bound: Bound, every: Duration, chunks: Vec<&'static [u8]>) -> Messages<Fed> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            for c in chunks {
                sleep(every).await;
                if tx.send(c).is_err() {
                    return;
                }
            }
            std::future::pending::<()>().await;
        });
        Messages::new("slow", Fed(rx), sse::Reader::new(1 << 20), bound)
    }

    #[tokio::test(start_paused = true)]
    async fn trickled_bytes_do_not_extend_a_message_deadline() {
        let trickle = vec![b"da" as &[u8], b"ta", b": \n\n", b"data", b": x", b"y"];
        let mut st = fed(
            Bound::PerMessage(Duration::from_secs(60)),
            Duration::from_secs(14),
            trickle,
        );
        let started = Instant::now();
        let err = tokio::time::timeout(Duration::from_secs(3600), st.next())
            .await
            .expect("the deadline ends the wait")
            .unwrap_err();
        assert!(
            err.is_timeout() && err.to_string().contains("'slow'"),
            "{err}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn each_complete_message_gets_a_fresh_deadline() {
        let msgs = vec![
            b"data: {\"id\":1,\"result\":{}}\n\n" as &[u8],
            b"data: {\"id\":2,\"result\":{}}\n\n",
            b"data: {\"id\":3,\"result\":{}}\n\n",
        ];
        let mut st = fed(
            Bound::PerMessage(Duration::from_secs(60)),
            Duration::from_secs(50),
            msgs,
        );
        for want in ["1", "2", "3"] {
            let m = st.next().await.unwrap().expect("a message");
            assert_eq!(m.head().id.as_deref().map(|i| i.get()), Some(want));
        }
        assert!(st.next().await.unwrap_err().is_timeout());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_without_a_timeout_ends_after_the_idle_bound_and_keep_alives_reset_it() {
        let keep_alives = vec![
            b": ka\n\n" as &[u8],
            b": ka\n\n",
            b"data: {\"id\":1,\"result\":{}}\n\n",
            b": ka\n\n",
        ];
        let mut st = fed(
            Bound::Idle(Duration::from_secs(300)),
            Duration::from_secs(200),
            keep_alives,
        );
        let started = Instant::now();
        let m = st.next().await.unwrap().expect("a message");
        assert!(m.head().is_response());
        let err = st.next().await.unwrap_err();
        assert!(
            err.is_timeout() && err.to_string().contains("stream_idle_ms"),
            "{err}"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(4 * 200 + 300));
    }

    #[tokio::test(start_paused = true)]
    async fn events_that_are_not_messages_are_skipped_and_do_not_extend_the_deadline() {
        let noise = vec![
            b"data: ping\n\n" as &[u8],
            b"data: [1,2]\n\n",
            b"data: 42\n\n",
        ];
        let mut st = fed(
            Bound::PerMessage(Duration::from_secs(60)),
            Duration::from_secs(25),
            noise,
        );
        let started = Instant::now();
        let err = st.next().await.unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }
}
