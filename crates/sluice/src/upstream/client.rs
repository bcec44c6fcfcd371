//! The pooled HTTP client Sluice uses toward upstreams, with connect and response timeouts.
//!
//! Takes a prepared request (URL, headers, body bytes); gives the upstream's answer classified
//! as JSON, an SSE stream, 202, or an HTTP error, with the body bounded. Every wait is bounded:
//! the response headers and a JSON body by `timeouts.response_ms`; each message of an SSE
//! answer by the stream timeout the caller gives (a deadline per message: bytes that complete
//! no message do not extend it); a stream opened without one (listen and GET streams) by
//! `timeouts.stream_idle_ms` of silence (any bytes, keep-alive comments included, reset it).
//! Refuses (as [`UpstreamError`]) a connect failure, a timeout, an oversized answer or an
//! unexpected content type; every error names the upstream. A stdio server's answer is given
//! the same bounds ([`HttpClient::lines_stream`]); the stream itself is `stream.rs`. `https://`
//! URLs over TLS (`tls.rs`, HTTP/2 when the server offers it by ALPN). HTTP/1.1,
//! or HTTP/2 with prior knowledge to the hosts of upstreams configured `http2 = true`
//! ([`HttpClient::add_http2`]): one connection per host and port, every request a stream on it, as many
//! at once as the server's `SETTINGS_MAX_CONCURRENT_STREAMS` allows (more wait for a stream).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::mcp::sse;

pub use super::error::UpstreamError;
use super::stream::Bound;
pub use super::stream::{Messages, Resume};

/// What an upstream answered to one POST.
pub enum Answer {
    /// `application/json`: one JSON-RPC message, with the HTTP status.
    Json(StatusCode, Bytes),
    /// `text/event-stream`: messages as they come.
    Sse(Messages),
    /// 202 or another status with no JSON-RPC body.
    Status(StatusCode, Bytes),
}

/// HTTP/2 keep-alive: a ping this often, idle or not.
pub const H2_PING: Duration = Duration::from_secs(20);
/// HTTP/2 keep-alive: the connection is closed when a ping is not answered within this.
pub const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 flow control: unread bytes one stream may hold.
pub const H2_STREAM_WINDOW: u32 = 64 * 1024;
/// HTTP/2 flow control: unread bytes one connection may hold, all its streams together.
pub const H2_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// The shared client: one connection pool for all upstreams. A clone is one `Arc` (long-lived
/// tasks hold one each, so it is kept small).
#[derive(Clone)]
pub struct HttpClient(std::sync::Arc<ClientShared>);

/// What every clone of an [`HttpClient`] shares.
pub struct ClientShared {
    inner: Client<super::tls::Connector, Full<Bytes>>,
    /// The HTTP/2 (prior knowledge) client, for the hosts `versions` says `true` of.
    h2: Client<super::tls::Connector, Full<Bytes>>,
    /// The HTTP version of every upstream host used so far (`true`: HTTP/2), grow-only.
    versions: std::sync::RwLock<std::collections::HashMap<http::uri::Authority, bool>>,
    /// Whether `versions` says HTTP/2 of any (the HTTP/1.1-only case takes no lock).
    h2_any: std::sync::atomic::AtomicBool,
    connect_timeout: Duration,
    response_timeout: Duration,
    max_body: usize,
    max_event: usize,
    stream_idle: Duration,
    /// The challenges of 401 and 403 answers to requests with a token, not read yet.
    pub challenges: super::challenges::Challenges,
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
    pub fn new(
        connect: Duration,
        response: Duration,
        max_body: usize,
        max_event: usize,
        stream_idle: Duration,
    ) -> Self {
        let mut conn = HttpConnector::new();
        conn.set_connect_timeout(Some(connect));
        conn.set_nodelay(true);
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .build(super::tls::connector(conn.clone()));
        // HTTP/2: a ping every 20 s (idle too), the connection dropped and a new one made when
        // none is answered within 10 s (a black-holed connection is not kept for ever); 64 KiB
        // per stream and 16 MiB per connection of unread data (parked exchanges read nothing:
        // with hyper's 2 MiB / 5 MiB defaults three of them could stall every request on it).
        let h2 = Client::builder(TokioExecutor::new())
            .timer(hyper_util::rt::TokioTimer::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .http2_only(true)
            .http2_keep_alive_interval(Some(H2_PING))
            .http2_keep_alive_timeout(H2_PING_TIMEOUT)
            .http2_keep_alive_while_idle(true)
            .http2_initial_stream_window_size(H2_STREAM_WINDOW)
            .http2_initial_connection_window_size(H2_CONNECTION_WINDOW)
            .build(super::tls::connector(conn));
        let shared = ClientShared {
            inner,
            h2,
            versions: Default::default(),
            h2_any: Default::default(),
            connect_timeout: connect,
            response_timeout: response,
            max_body,
            max_event,
            stream_idle,
            challenges: Default::default(),
        };
        HttpClient(std::sync::Arc::new(shared))
    }

    /// Records the HTTP version of each host (`true`: HTTP/2 with prior knowledge, for the
    /// upstreams configured `http2 = true`), for the rest of the process: the first version a
    /// host gets is kept, so an exchange of a generation a reload replaced goes on in the
    /// version it began in (a reload that would switch a host is refused, `reload.rs`).
    pub fn record_versions(&self, hosts: impl IntoIterator<Item = (http::uri::Authority, bool)>) {
        if let Ok(mut v) = self.versions.write() {
            for (host, h2) in hosts {
                v.entry(host).or_insert(h2);
            }
            self.h2_any.store(
                v.values().any(|h2| *h2),
                std::sync::atomic::Ordering::Release,
            );
        }
    }

    /// Speaks HTTP/2 to these hosts (as [`HttpClient::record_versions`] with `true`).
    pub fn add_http2(&self, hosts: impl IntoIterator<Item = http::uri::Authority>) {
        self.record_versions(hosts.into_iter().map(|h| (h, true)));
    }

    /// The version `authority` was recorded with (`Some(true)`: HTTP/2), if it was.
    pub fn version_of(&self, authority: &http::uri::Authority) -> Option<bool> {
        self.versions.read().ok()?.get(authority).copied()
    }

    /// Whether `authority` is spoken to over HTTP/2.
    pub fn speaks_http2(&self, authority: &http::uri::Authority) -> bool {
        self.h2_any.load(std::sync::atomic::Ordering::Acquire)
            && self.version_of(authority) == Some(true)
    }

    /// The HTTP/2 client for `url` when its host was recorded as HTTP/2.
    fn for_url(&self, url: &http::Uri) -> Option<&Client<super::tls::Connector, Full<Bytes>>> {
        url.authority()
            .is_some_and(|a| self.speaks_http2(a))
            .then_some(&self.h2)
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

    /// The stream of an answer that came on in-process channels (a stdio server's), bounded as
    /// an HTTP answer's: `stream_timeout` per message, or `stream_idle` of silence without one.
    pub fn lines_stream(
        &self,
        upstream: &str,
        answer: super::lines::Answer,
        stream_timeout: Option<Duration>,
    ) -> Messages {
        let bound = stream_timeout.map_or(Bound::Idle(self.stream_idle), Bound::PerMessage);
        Messages::over_lines(upstream, answer, bound)
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
        self.send(
            http::Method::POST,
            upstream,
            url,
            headers,
            body,
            stream_timeout,
        )
        .await
        .map(|(_, a)| a)
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
        let max = self.max_body;
        self.send_within(method, upstream, url, headers, body, stream_timeout, max)
            .await
    }

    /// [`HttpClient::send`], a body read only up to `max_body` bytes (under the client's own
    /// bound): what a small document fetched for someone else may be.
    #[allow(clippy::too_many_arguments)]
    pub async fn send_within(
        &self,
        method: http::Method,
        upstream: &str,
        url: &http::Uri,
        headers: HeaderMap,
        body: Bytes,
        stream_timeout: Option<Duration>,
        max_body: usize,
    ) -> Result<(HeaderMap, Answer), UpstreamError> {
        let mut req = Request::builder()
            .method(method)
            .uri(url.clone())
            .body(Full::new(body))
            .map_err(|e| UpstreamError::Protocol(upstream.into(), e.to_string()))?;
        let sent = headers.get(http::header::AUTHORIZATION).cloned();
        *req.headers_mut() = headers;
        let client = match self.for_url(url) {
            Some(h2) => {
                // Over HTTP/2 the URL's authority is `:authority`; a `Host` beside it is refused
                // by RFC 9113 when they differ (a configured one is refused at startup).
                req.headers_mut().remove(http::header::HOST);
                h2
            }
            None => &self.inner,
        };
        let t = self.response_timeout;
        let resp = tokio::time::timeout(t, client.request(req))
            .await
            .map_err(|_| UpstreamError::Timeout(upstream.into(), t.as_millis() as u64))?
            .map_err(|e| match e.is_connect() {
                true => UpstreamError::NoConnection(upstream.into(), describe(&e)),
                false => UpstreamError::Unreachable(upstream.into(), describe(&e)),
            })?;
        let status = resp.status();
        let (parts, body) = resp.into_parts();
        if let (Some(sent), true) = (&sent, status == 401 || status == 403) {
            if let Some(www) = parts.headers.get(http::header::WWW_AUTHENTICATE) {
                self.challenges.note(sent, www);
            }
        }
        let ctype = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ctype.starts_with("text/event-stream") && status.is_success() {
            let bound = stream_timeout.map_or(Bound::Idle(self.stream_idle), Bound::PerMessage);
            let stream = Messages::new(upstream, body, sse::Reader::new(self.max_event), bound);
            return Ok((parts.headers, Answer::Sse(stream)));
        }
        let bytes = self
            .read_bounded(upstream, body, max_body.min(self.max_body))
            .await?;
        let answer = if ctype.starts_with("application/json") && !bytes.is_empty() {
            Answer::Json(status, bytes)
        } else {
            Answer::Status(status, bytes)
        };
        Ok((parts.headers, answer))
    }

    async fn read_bounded(
        &self,
        upstream: &str,
        body: hyper::body::Incoming,
        max: usize,
    ) -> Result<Bytes, UpstreamError> {
        let limited = http_body_util::Limited::new(body, max);
        let t = self.response_timeout;
        match tokio::time::timeout(t, limited.collect()).await {
            Err(_) => Err(UpstreamError::Timeout(
                upstream.into(),
                t.as_millis() as u64,
            )),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                Err(UpstreamError::TooLarge(upstream.into(), max))
            }
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
pub async fn final_message(
    answer: Answer,
    upstream: &str,
) -> Result<(StatusCode, Bytes), UpstreamError> {
    match answer {
        Answer::Json(s, b) => Ok((s, b)),
        Answer::Status(s, b) => Err(UpstreamError::Protocol(
            upstream.into(),
            format!("HTTP {s} without a JSON-RPC body ({} bytes)", b.len()),
        )),
        Answer::Sse(mut st) => {
            while let Some(m) = st.next().await? {
                if m.head().is_response() {
                    return Ok((StatusCode::OK, Bytes::from(m.into_text())));
                }
            }
            Err(UpstreamError::Closed(upstream.into()))
        }
    }
}

/// The headers every modern request to an upstream carries (its `Host`, the content type,
/// `Accept`, the protocol version, then its configured ones, which win), built once per
/// upstream; [`modern_headers`] adds a request's own.
pub fn modern_base(host: &HeaderValue, extra: &HeaderMap) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(8 + extra.len());
    h.insert(http::header::HOST, host.clone());
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert(
        crate::mcp::headers::PROTOCOL_VERSION,
        HeaderValue::from_static(crate::mcp::version::MODERN),
    );
    for (k, v) in extra {
        h.insert(k, v.clone());
    }
    h
}

/// Standard headers for a modern request to an upstream: its [`modern_base`] with
/// `Mcp-Method` and `Mcp-Name` (unless its configured headers set them).
pub fn modern_headers(base: &HeaderMap, method: &str, name: Option<&str>) -> HeaderMap {
    let mut h = base.clone();
    h.reserve(4);
    if !base.contains_key(crate::mcp::headers::METHOD) {
        if let Ok(v) = HeaderValue::from_str(&crate::mcp::headers::encode(method)) {
            h.insert(crate::mcp::headers::METHOD, v);
        }
    }
    if let (Some(n), false) = (name, base.contains_key(crate::mcp::headers::NAME)) {
        if let Ok(v) = HeaderValue::from_str(&crate::mcp::headers::encode(n)) {
            h.insert(crate::mcp::headers::NAME, v);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_headers_add_the_request_own_to_the_template_and_configured_ones_win() {
        let mut extra = HeaderMap::new();
        extra.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer up"),
        );
        extra.insert(
            crate::mcp::headers::NAME,
            HeaderValue::from_static("pinned"),
        );
        let base = modern_base(&HeaderValue::from_static("up.example:8080"), &extra);
        let h = modern_headers(&base, "tools/call", Some("météo"));
        assert_eq!(h[http::header::HOST], "up.example:8080");
        assert_eq!(h[http::header::CONTENT_TYPE], "application/json");
        assert_eq!(
            h[http::header::ACCEPT],
            "application/json, text/event-stream"
        );
        assert_eq!(
            h[crate::mcp::headers::PROTOCOL_VERSION],
            crate::mcp::version::MODERN
        );
        assert_eq!(h[crate::mcp::headers::METHOD], "tools/call");
        assert_eq!(h[http::header::AUTHORIZATION], "Bearer up");
        // A configured header is the upstream's own: it wins over the request's, as it did
        // when the configured headers were inserted last.
        assert_eq!(
            h.get_all(crate::mcp::headers::NAME)
                .iter()
                .collect::<Vec<_>>(),
            ["pinned"]
        );
        let plain = modern_base(&HeaderValue::from_static("h"), &HeaderMap::new());
        let h = modern_headers(&plain, "tools/call", Some("météo"));
        assert_eq!(
            h[crate::mcp::headers::NAME],
            &*crate::mcp::headers::encode("météo")
        );
        assert!(h[crate::mcp::headers::NAME]
            .to_str()
            .unwrap()
            .starts_with("=?base64?"));
        assert!(modern_headers(&plain, "tools/list", None)
            .get(crate::mcp::headers::NAME)
            .is_none());
    }
}
