//! The pooled HTTP client Sluice uses toward upstreams, with connect and response timeouts.
//!
//! Takes a prepared request (URL, headers, body bytes); gives the upstream's answer classified
//! as JSON, an SSE stream, 202, or an HTTP error, with the body bounded. Every wait is bounded:
//! the response headers and a JSON body by `timeouts.response_ms`; each message of an SSE
//! answer by the stream timeout the caller gives (a deadline per message: bytes that complete
//! no message do not extend it); a stream opened without one (listen and GET streams) by
//! `timeouts.stream_idle_ms` of silence (any bytes, keep-alive comments included, reset it).
//! Refuses (as [`UpstreamError`]) a connect failure, a timeout, an oversized answer or an
//! unexpected content type; every error names the upstream.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::mcp::sse;

/// Why an upstream exchange failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made.
    #[error("upstream '{0}' is unreachable ({1}); check that it is running and that its url is right")]
    Unreachable(String, String),
    /// The upstream took longer than the configured response timeout, or a stream stayed silent
    /// past `timeouts.stream_idle_ms`.
    #[error(
        "upstream '{0}' did not answer within {1} ms; it may be overloaded (timeouts.response_ms; timeouts.stream_idle_ms for a stream that stays silent)"
    )]
    Timeout(String, u64),
    /// The answer was larger than `limits.max_response_bytes` or an SSE event than `limits.max_sse_event_bytes`.
    #[error("upstream '{0}' sent an answer over the {1}-byte limit (limits.max_response_bytes / max_sse_event_bytes)")]
    TooLarge(String, usize),
    /// The answer was not something an MCP server sends.
    #[error("upstream '{0}' answered something that is not MCP: {1}")]
    Protocol(String, String),
    /// The stream broke before the final response arrived.
    #[error("upstream '{0}' closed the stream before answering")]
    Closed(String),
    /// A stdio upstream's process could not be started.
    #[error("upstream '{0}' could not be started: {1}; check its command, cwd and env")]
    Start(String, String),
    /// A session's own channel ended: a stdio upstream's process, a 2024-11-05 upstream's SSE
    /// stream (why: an exit status, or the protocol error Sluice ended it for; never output).
    #[error("upstream '{0}' stopped: {1}; a new session is opened for the next call")]
    Exited(String, String),
    /// A 2025-11-25 upstream no longer knows the session (HTTP 404).
    #[error("upstream '{0}' ended the session; retry the request")]
    SessionGone(String),
}

impl UpstreamError {
    /// Whether the failure is a timeout (504) rather than a bad gateway (502).
    pub fn is_timeout(&self) -> bool {
        matches!(self, UpstreamError::Timeout(..))
    }
}

/// What an upstream answered to one POST.
pub enum Answer {
    /// `application/json`: one JSON-RPC message, with the HTTP status.
    Json(StatusCode, Bytes),
    /// `text/event-stream`: messages as they come.
    Sse(SseStream),
    /// 202 or another status with no JSON-RPC body.
    Status(StatusCode, Bytes),
}

/// Where a 2025-11-25 stream that ended before its answer is taken up again: a `GET` with
/// `Last-Event-ID`, after the `retry` the server asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    /// The last event id the stream carried.
    pub last_id: String,
    /// The reconnection time it asked for, if any.
    pub retry: Option<Duration>,
}

/// How long an SSE stream may take.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// Each message must arrive within this long of the wait for it starting (calls).
    PerMessage(Duration),
    /// Some bytes must arrive at least this often (listen and GET streams).
    Idle(Duration),
}

/// The events of an upstream SSE answer, read with the per-message deadline (or the idle
/// bound) and the event size bound. The body type is a parameter only so tests can feed one.
pub struct SseStream<B = hyper::body::Incoming> {
    upstream: std::sync::Arc<str>,
    body: B,
    reader: sse::Reader,
    pending: std::collections::VecDeque<sse::Event>,
    bound: Bound,
    /// When the message waited for must have arrived (`PerMessage`); kept in the stream so a
    /// `next` cancelled and called again does not start a fresh wait.
    deadline: Option<tokio::time::Instant>,
}

impl<B> SseStream<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
{
    fn new(upstream: &str, body: B, reader: sse::Reader, bound: Bound) -> Self {
        SseStream { upstream: upstream.into(), body, reader, pending: Default::default(), bound, deadline: None }
    }

    /// Where the stream can be taken up again after it ended (SEP-1699): the last event id it
    /// carried and the reconnection time it asked for; `None` for a stream without ids.
    pub fn resume_point(&self) -> Option<Resume> {
        let last_id = self.reader.last_id()?.to_owned();
        Some(Resume { last_id, retry: self.reader.retry_ms().map(Duration::from_millis) })
    }

    /// The next event's data, `Ok(None)` at the end of the stream.
    pub async fn next(&mut self) -> Result<Option<String>, UpstreamError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                if ev.data.trim().is_empty() {
                    continue; // priming events carry no message (and do not extend the deadline)
                }
                self.deadline = None;
                return Ok(Some(ev.data));
            }
            match self.frame().await? {
                None | Some(Err(_)) => return Ok(None),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let events = self.reader.push(&data).map_err(|e| UpstreamError::TooLarge(self.upstream.to_string(), e.0))?;
                        self.pending.extend(events);
                    }
                }
            }
        }
    }

    /// The next body frame, within the message deadline or the idle bound.
    async fn frame(&mut self) -> Result<Option<Result<hyper::body::Frame<Bytes>, B::Error>>, UpstreamError> {
        let now = tokio::time::Instant::now();
        let (until, limit) = match self.bound {
            Bound::PerMessage(t) => (*self.deadline.get_or_insert(now + t), t),
            Bound::Idle(t) => (now + t, t),
        };
        tokio::time::timeout_at(until, self.body.frame())
            .await
            .map_err(|_| UpstreamError::Timeout(self.upstream.to_string(), limit.as_millis() as u64))
    }
}

/// The shared client: one connection pool for all upstreams. A clone is one `Arc` (long-lived
/// tasks hold one each, so it is kept small).
#[derive(Clone)]
pub struct HttpClient(std::sync::Arc<ClientShared>);

/// What every clone of an [`HttpClient`] shares.
pub struct ClientShared {
    inner: Client<HttpConnector, Full<Bytes>>,
    connect_timeout: Duration,
    response_timeout: Duration,
    max_body: usize,
    max_event: usize,
    stream_idle: Duration,
}

impl std::ops::Deref for HttpClient {
    type Target = ClientShared;
    fn deref(&self) -> &ClientShared {
        &self.0
    }
}

impl HttpClient {
    /// A pooled HTTP/1.1 client with the given connect timeout and bounds; `stream_idle` ends an
    /// SSE stream opened without a stream timeout that sends nothing for that long.
    pub fn new(connect: Duration, response: Duration, max_body: usize, max_event: usize, stream_idle: Duration) -> Self {
        let mut conn = HttpConnector::new();
        conn.set_connect_timeout(Some(connect));
        conn.set_nodelay(true);
        let inner =
            Client::builder(TokioExecutor::new()).pool_idle_timeout(Duration::from_secs(90)).pool_max_idle_per_host(256).build(conn);
        let shared = ClientShared { inner, connect_timeout: connect, response_timeout: response, max_body, max_event, stream_idle };
        HttpClient(std::sync::Arc::new(shared))
    }

    /// The largest SSE event read from an upstream (`limits.max_sse_event_bytes`).
    pub fn max_event_bytes(&self) -> usize {
        self.max_event
    }

    /// The configured connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The configured response timeout.
    pub fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// POSTs `body` to `url` with `headers`; `stream_timeout` bounds the wait for each SSE message
    /// (`None` for long-lived listen streams, which end after `stream_idle` of silence).
    pub async fn post(
        &self,
        upstream: &str,
        url: &http::Uri,
        headers: HeaderMap,
        body: Bytes,
        stream_timeout: Option<Duration>,
    ) -> Result<Answer, UpstreamError> {
        self.send(http::Method::POST, upstream, url, headers, body, stream_timeout).await.map(|(_, a)| a)
    }

    /// Sends a request and returns the response headers with the classified answer.
    pub async fn send(
        &self,
        method: http::Method,
        upstream: &str,
        url: &http::Uri,
        headers: HeaderMap,
        body: Bytes,
        stream_timeout: Option<Duration>,
    ) -> Result<(HeaderMap, Answer), UpstreamError> {
        let mut req = Request::builder()
            .method(method)
            .uri(url.clone())
            .body(Full::new(body))
            .map_err(|e| UpstreamError::Protocol(upstream.into(), e.to_string()))?;
        *req.headers_mut() = headers;
        let t = self.response_timeout;
        let resp = tokio::time::timeout(t, self.inner.request(req))
            .await
            .map_err(|_| UpstreamError::Timeout(upstream.into(), t.as_millis() as u64))?
            .map_err(|e| UpstreamError::Unreachable(upstream.into(), describe(&e)))?;
        let status = resp.status();
        let (parts, body) = resp.into_parts();
        let ctype = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        if ctype.starts_with("text/event-stream") && status.is_success() {
            let bound = stream_timeout.map_or(Bound::Idle(self.stream_idle), Bound::PerMessage);
            let stream = SseStream::new(upstream, body, sse::Reader::new(self.max_event), bound);
            return Ok((parts.headers, Answer::Sse(stream)));
        }
        let bytes = self.read_bounded(upstream, body).await?;
        let answer = if ctype.starts_with("application/json") && !bytes.is_empty() {
            Answer::Json(status, bytes)
        } else {
            Answer::Status(status, bytes)
        };
        Ok((parts.headers, answer))
    }

    async fn read_bounded(&self, upstream: &str, body: hyper::body::Incoming) -> Result<Bytes, UpstreamError> {
        let limited = http_body_util::Limited::new(body, self.max_body);
        let t = self.response_timeout;
        match tokio::time::timeout(t, limited.collect()).await {
            Err(_) => Err(UpstreamError::Timeout(upstream.into(), t.as_millis() as u64)),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(UpstreamError::TooLarge(upstream.into(), self.max_body)),
            Ok(Err(_)) => Err(UpstreamError::Closed(upstream.into())),
            Ok(Ok(c)) => Ok(c.to_bytes()),
        }
    }
}

fn describe(e: &hyper_util::client::legacy::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s = inner.to_string();
        src = inner.source();
    }
    s
}

/// Reads the whole stream of an [`Answer`] until the JSON-RPC response, dropping notifications.
pub async fn final_message(answer: Answer, upstream: &str) -> Result<(StatusCode, Bytes), UpstreamError> {
    match answer {
        Answer::Json(s, b) => Ok((s, b)),
        Answer::Status(s, b) => {
            Err(UpstreamError::Protocol(upstream.into(), format!("HTTP {s} without a JSON-RPC body ({} bytes)", b.len())))
        }
        Answer::Sse(mut st) => {
            while let Some(data) = st.next().await? {
                if let Ok(m) = serde_json::from_str::<crate::mcp::jsonrpc::Incoming>(&data) {
                    if m.is_response() {
                        return Ok((StatusCode::OK, Bytes::from(data)));
                    }
                }
            }
            Err(UpstreamError::Closed(upstream.into()))
        }
    }
}

/// Standard headers for a modern request to an upstream.
pub fn modern_headers(host: &HeaderValue, method: &str, name: Option<&str>, extra: &HeaderMap) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(8 + extra.len());
    h.insert(http::header::HOST, host.clone());
    h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(http::header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    h.insert(crate::mcp::headers::PROTOCOL_VERSION, HeaderValue::from_static(crate::mcp::version::MODERN));
    if let Ok(v) = HeaderValue::from_str(&crate::mcp::headers::encode(method)) {
        h.insert(crate::mcp::headers::METHOD, v);
    }
    if let Some(n) = name {
        if let Ok(v) = HeaderValue::from_str(&crate::mcp::headers::encode(n)) {
            h.insert(crate::mcp::headers::NAME, v);
        }
    }
    for (k, v) in extra {
        h.insert(k, v.clone());
    }
    h
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use hyper::body::Frame;
    use tokio::sync::mpsc;
    use tokio::time::{sleep, Instant};

    use super::*;

    /// A body fed by hand, one chunk per send.
    struct Fed(mpsc::UnboundedReceiver<&'static [u8]>);

    impl hyper::body::Body for Fed {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.0.poll_recv(cx).map(|c| c.map(|c| Ok(Frame::data(Bytes::from_static(c)))))
        }
    }

    /// A stream over a body that gets `chunks`, one every `every`, then stays open and silent.
    fn fed(bound: Bound, every: Duration, chunks: Vec<&'static [u8]>) -> SseStream<Fed> {
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
        SseStream::new("slow", Fed(rx), sse::Reader::new(1 << 20), bound)
    }

    #[tokio::test(start_paused = true)]
    async fn trickled_bytes_do_not_extend_a_message_deadline() {
        let trickle = vec![b"da" as &[u8], b"ta", b": \n\n", b"data", b": x", b"y"];
        let mut st = fed(Bound::PerMessage(Duration::from_secs(60)), Duration::from_secs(14), trickle);
        let started = Instant::now();
        let err = tokio::time::timeout(Duration::from_secs(3600), st.next()).await.expect("the deadline ends the wait").unwrap_err();
        assert!(err.is_timeout() && err.to_string().contains("'slow'"), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn each_complete_message_gets_a_fresh_deadline() {
        let msgs = vec![b"data: 1\n\n" as &[u8], b"data: 2\n\n", b"data: 3\n\n"];
        let mut st = fed(Bound::PerMessage(Duration::from_secs(60)), Duration::from_secs(50), msgs);
        for want in ["1", "2", "3"] {
            assert_eq!(st.next().await.unwrap().as_deref(), Some(want));
        }
        assert!(st.next().await.unwrap_err().is_timeout());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_without_a_timeout_ends_after_the_idle_bound_and_keep_alives_reset_it() {
        let keep_alives = vec![b": ka\n\n" as &[u8], b": ka\n\n", b"data: m\n\n", b": ka\n\n"];
        let mut st = fed(Bound::Idle(Duration::from_secs(300)), Duration::from_secs(200), keep_alives);
        let started = Instant::now();
        assert_eq!(st.next().await.unwrap().as_deref(), Some("m"));
        let err = st.next().await.unwrap_err();
        assert!(err.is_timeout() && err.to_string().contains("stream_idle_ms"), "{err}");
        assert_eq!(started.elapsed(), Duration::from_secs(4 * 200 + 300));
    }
}
