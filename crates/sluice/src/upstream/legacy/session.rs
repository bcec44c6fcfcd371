//! One 2025-11-25 session with an upstream: the handshake, the GET stream, requests, replies.
//! Over Streamable HTTP it is an `Mcp-Session-Id`; over stdio one process, over 2024-11-05
//! HTTP+SSE one connection (its [`Channel`], `inline.rs`), whose one stream plays the part of the
//! GET stream and carries the call's own answer too.
//!
//! Takes an upstream, the bridged capability set to declare and the principal it serves; gives
//! a session whose standalone GET stream is read by a task of its own: pings are answered there,
//! list changes reported, and server requests and notifications handed to the call that leases
//! the session (or refused with an error reply and a warning when none does). The GET stream is
//! bounded by `timeouts.stream_idle_ms`: one silent that long is closed and opened again.
//! Refuses nothing itself; transport failures are [`UpstreamError`]s naming the upstream.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use serde_json::{json, Value};

use crate::mcp::jsonrpc::Incoming;
use crate::mcp::lists::Change;
use crate::mcp::method::Method as McpMethod;
use crate::upstream::client::{Answer, HttpClient, UpstreamError};
use crate::upstream::message::Message;
use crate::upstream::Upstream;

/// What a session's GET stream reports that is not for a leased call.
pub use super::changes::ListChanged;

/// A live 2025-11-25 session.
pub struct Session {
    /// The upstream.
    pub up: Arc<Upstream>,
    /// `Mcp-Session-Id`, if the server issued one.
    pub sid: Option<HeaderValue>,
    /// The negotiated protocol version.
    pub version: HeaderValue,
    /// The `InitializeResult`.
    pub init: Value,
    /// The principal it serves (never shared between principals).
    pub principal: String,
    /// The capabilities it declared (part of its pool key).
    pub caps: super::Bridged,
    next_id: AtomicU64,
    /// Messages from the GET stream for the call that leases the session.
    inbox: tokio::sync::Mutex<crate::upstream::queue::Receiver<Message>>,
    leased: Arc<AtomicBool>,
    /// Set when the upstream said the session is gone (404) or the stream broke.
    pub broken: AtomicBool,
    /// Its channel, for a stdio or 2024-11-05 SSE upstream.
    pub(super) channel: Option<super::channel::Channel>,
    get_task: tokio::task::AbortHandle,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.get_task.abort();
    }
}

fn base_headers(up: &Upstream, version: &HeaderValue, sid: Option<&HeaderValue>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(http::header::HOST, up.host.clone());
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    h.insert(crate::mcp::headers::PROTOCOL_VERSION, version.clone());
    if let Some(s) = sid {
        h.insert(crate::mcp::headers::SESSION_ID, s.clone());
    }
    for (k, v) in &up.extra {
        h.insert(k, v.clone());
    }
    if let Some(token) = up.held_token() {
        h.insert(http::header::AUTHORIZATION, token);
    }
    h
}

impl Session {
    /// Runs the handshake and opens the GET stream.
    pub async fn open(
        client: &HttpClient,
        up: Arc<Upstream>,
        caps: super::Bridged,
        principal: &str,
        on_list_changed: ListChanged,
    ) -> Result<Arc<Session>, UpstreamError> {
        up.authorize(client).await?;
        let init = super::handshake::initialize_body(caps);
        let mut headers = base_headers(&up, &HeaderValue::from_static("2025-11-25"), None);
        headers.remove(crate::mcp::headers::PROTOCOL_VERSION);
        let sent = headers.get(http::header::AUTHORIZATION).cloned();
        let (resp_headers, answer) = client
            .send(
                Method::POST,
                &up.name,
                &up.uri,
                headers,
                Bytes::from(init.to_string()),
                Some(client.response_timeout()),
            )
            .await?;
        let sid = resp_headers.get(crate::mcp::headers::SESSION_ID).cloned();
        if let Answer::Status(s, _) | Answer::Json(s, _) = &answer {
            if *s == http::StatusCode::UNAUTHORIZED {
                up.token_refused(sent.as_ref());
            }
        }
        let (_, body) = crate::upstream::client::final_message(answer, &up.name).await?;
        let (version, result) = super::handshake::initialized(&up.name, &body)?;
        let note = json!({"jsonrpc": "2.0", "method": McpMethod::Initialized.as_str()});
        client
            .post(
                &up.name,
                &up.uri,
                base_headers(&up, &version, sid.as_ref()),
                Bytes::from(note.to_string()),
                None,
            )
            .await?;
        // Bounded by bytes: a parked call does not read it, and an upstream must not fill
        // Sluice's memory on the GET stream meanwhile.
        let (tx, rx) = crate::upstream::queue::bounded(256, client.max_event_bytes());
        let leased = Arc::new(AtomicBool::new(false));
        // The GET stream is opened before the session is used, so an ask the server sends there
        // right after the first call is not lost; a server slow to answer it is waited for only
        // up to the connect timeout.
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let session = SessionRef {
            client: client.clone(),
            up: up.clone(),
            version: version.clone(),
            sid: sid.clone(),
        };
        let reader = GetReader {
            session,
            tx,
            leased: leased.clone(),
            on_list_changed,
        };
        let get_task = tokio::spawn(reader.run(ready_tx)).abort_handle();
        let _ = tokio::time::timeout(client.connect_timeout(), ready_rx).await;
        Ok(Arc::new(Session {
            up,
            sid,
            version,
            init: result,
            principal: principal.to_owned(),
            caps,
            next_id: AtomicU64::new(1),
            inbox: tokio::sync::Mutex::new(rx),
            leased,
            broken: AtomicBool::new(false),
            channel: None,
            get_task,
        }))
    }

    /// A session over a channel: its fields as [`Session::open`] sets them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn over_channel(
        up: Arc<Upstream>,
        version: HeaderValue,
        init: Value,
        principal: &str,
        caps: super::Bridged,
        inbox: crate::upstream::queue::Receiver<Message>,
        leased: Arc<AtomicBool>,
        channel: super::channel::Channel,
        reader: tokio::task::AbortHandle,
    ) -> Session {
        Session {
            up,
            sid: None,
            version,
            init,
            principal: principal.to_owned(),
            caps,
            next_id: AtomicU64::new(1),
            inbox: tokio::sync::Mutex::new(inbox),
            leased,
            broken: AtomicBool::new(false),
            channel: Some(channel),
            get_task: reader,
        }
    }

    /// Whether it can serve another call: not broken, and its channel (if any) not ended.
    pub fn is_usable(&self) -> bool {
        !self.broken.load(Ordering::Acquire) && !self.channel.as_ref().is_some_and(|c| c.is_done())
    }

    /// Whether a call's answer arrives through [`Session::recv`] (stdio, SSE) rather than on
    /// the answer to its POST.
    pub fn answers_inline(&self) -> bool {
        self.channel.is_some()
    }

    /// Resolves when the session's channel ended (never for Streamable HTTP), with the error a
    /// call under way gets.
    pub async fn ended(&self) -> UpstreamError {
        match &self.channel {
            Some(c) => c.ended().await,
            None => std::future::pending().await,
        }
    }

    /// A request id never used before in this session.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Headers for a request on this session.
    pub fn headers(&self) -> HeaderMap {
        base_headers(&self.up, &self.version, self.sid.as_ref())
    }

    /// Drops what a call before left in the inbox (over stdio and SSE, progress or logs the
    /// server wrote after its answer): the next call must not relay them.
    pub fn discard_queued(&self) {
        if let Ok(mut inbox) = self.inbox.try_lock() {
            inbox.discard_queued();
        }
    }

    /// Marks the session leased (its GET stream's requests go to the inbox) or idle.
    pub fn set_leased(&self, on: bool) {
        self.leased.store(on, Ordering::Release);
    }

    /// The next message from the GET stream for the leasing call.
    pub async fn recv(&self) -> Option<Message> {
        self.inbox.lock().await.recv().await
    }

    /// POSTs one message (request, response or notification) on this session. Over a channel
    /// (stdio, SSE) the message is sent there and the answer is 202: what it answers comes
    /// through [`Session::recv`].
    pub async fn post(
        &self,
        client: &HttpClient,
        body: Bytes,
        stream_timeout: Option<std::time::Duration>,
    ) -> Result<Answer, UpstreamError> {
        if let Some(c) = &self.channel {
            c.send(&body).await?;
            return Ok(Answer::Status(http::StatusCode::ACCEPTED, Bytes::new()));
        }
        // A token due for renewal is renewed first (a pooled session outlives tokens).
        self.up.authorize(client).await?;
        let headers = self.headers();
        let sent = headers.get(http::header::AUTHORIZATION).cloned();
        let answer = client
            .post(&self.up.name, &self.up.uri, headers, body, stream_timeout)
            .await?;
        let status = crate::upstream::authorized::status_of(&answer);
        self.up.auth_refused(client, status, sent.as_ref());
        Ok(answer)
    }

    /// Sends request `id` (its `body`) and gives its response (JSON text): a request of
    /// Sluice's own, outside any client's call.
    pub async fn request(
        &self,
        client: &HttpClient,
        id: u64,
        body: Bytes,
        timeout: std::time::Duration,
    ) -> Result<Bytes, UpstreamError> {
        if let Some(c) = &self.channel {
            return c.request(id, body, timeout).await.map(Bytes::from);
        }
        let answer = client
            .post(
                &self.up.name,
                &self.up.uri,
                self.headers(),
                body,
                Some(timeout),
            )
            .await?;
        crate::upstream::client::final_message(answer, &self.up.name)
            .await
            .map(|(_, b)| b)
    }

    /// Answers a server request with a result or an error (JSON text).
    pub async fn reply(&self, client: &HttpClient, id: &str, outcome: Result<&str, (i64, &str)>) {
        let body = reply_body(id, outcome);
        if let Err(e) = self.post(client, body, None).await {
            tracing::warn!(upstream = %self.up.name, error = %crate::escape::Escaped(&e), "could not answer an upstream request");
        }
    }

    /// Sends `notifications/cancelled` for an upstream request id.
    pub async fn cancel(&self, client: &HttpClient, request_id: u64, reason: &str) {
        let body = json!({"jsonrpc": "2.0", "method": McpMethod::Cancelled.as_str(), "params": {"requestId": request_id, "reason": reason}});
        let _ = self.post(client, Bytes::from(body.to_string()), None).await;
    }

    /// Ends its stdio process or 2024-11-05 stream, if it has one (at once; `close` does the
    /// rest).
    pub fn end_channel(&self, why: &str) {
        if let Some(c) = &self.channel {
            c.end(why);
        }
    }

    /// Ends the session upstream (DELETE; over stdio its process is ended, over SSE its stream
    /// closed).
    pub async fn close(&self, client: &HttpClient) {
        self.end_channel("its session was closed");
        if self.sid.is_some() {
            let _ = client
                .send(
                    Method::DELETE,
                    &self.up.name,
                    &self.up.uri,
                    self.headers(),
                    Bytes::new(),
                    None,
                )
                .await;
        }
        self.get_task.abort();
    }
}

/// Opens the standalone GET stream and waits for its answer, so that no ask the server sends
/// there right after the first call is lost; `None` when the server offers none (405).
async fn open_get_stream(
    client: &HttpClient,
    up: &Upstream,
    version: &HeaderValue,
    sid: Option<&HeaderValue>,
) -> Option<crate::upstream::client::Messages> {
    let mut headers = base_headers(up, version, sid);
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.remove(http::header::CONTENT_TYPE);
    match client
        .send(Method::GET, &up.name, &up.uri, headers, Bytes::new(), None)
        .await
    {
        Ok((_, Answer::Sse(stream))) => Some(stream),
        _ => None,
    }
}

/// The task that reads a session's GET stream.
struct GetReader {
    session: SessionRef,
    tx: crate::upstream::queue::Sender<Message>,
    leased: Arc<AtomicBool>,
    on_list_changed: ListChanged,
}

impl GetReader {
    /// Opens the stream (signalling `ready` once the first answer is in) and reads it; opens it
    /// again each time it ends by staying silent past `timeouts.stream_idle_ms`.
    async fn run(self, ready: tokio::sync::oneshot::Sender<()>) {
        let mut ready = Some(ready);
        loop {
            let s = &self.session;
            // Boxed, so the opening request's future is freed once the stream is open: this task
            // lives as long as the session.
            let stream = Box::pin(open_get_stream(
                &s.client,
                &s.up,
                &s.version,
                s.sid.as_ref(),
            ))
            .await;
            if let Some(r) = ready.take() {
                let _ = r.send(());
            }
            let Some(stream) = stream else { return };
            if !self.read(stream).await {
                return;
            }
            tracing::debug!(upstream = %s.up.name, "legacy GET stream idle past timeouts.stream_idle_ms; reopening");
        }
    }

    /// Reads the stream to its end; `true` when it ended by the idle bound.
    async fn read(&self, mut stream: crate::upstream::client::Messages) -> bool {
        loop {
            let data = match stream.next().await {
                Ok(Some(d)) => d,
                Ok(None) => return false,
                Err(e) => return e.is_timeout(),
            };
            let session_alive = match route(data.head(), &self.leased, &self.session.up.name) {
                // Replies are boxed: their request futures would otherwise size this long-lived task.
                Route::Reply(id, outcome) => {
                    Box::pin(self.session.reply(&id, outcome)).await;
                    true
                }
                Route::ListChanged(change) => {
                    self.on_list_changed.report(&self.session.up, change).await;
                    true
                }
                Route::ToCall => {
                    let size = data.len();
                    self.tx.send(data, size).await.is_ok()
                }
                Route::Drop => true,
            };
            if !session_alive {
                return false;
            }
        }
    }
}

/// Where a message a session's stream brings goes.
pub(super) enum Route {
    /// Answered at once: a `ping`, or a request outside any call (refused).
    Reply(String, Result<&'static str, (i64, &'static str)>),
    /// A list change, for the catalog.
    ListChanged(Change),
    /// For the call that leases the session.
    ToCall,
    /// Nothing to do (a notification outside any call).
    Drop,
}

/// Routes one message of a session's stream (its GET stream, or a stdio process's stdout).
pub(super) fn route(msg: &Incoming, leased: &AtomicBool, upstream: &str) -> Route {
    if let (Some(m), None) = (msg.method.as_ref(), msg.id.as_ref()) {
        if let Some(c) = Change::of(m, msg.params.as_ref().map(|p| p.get())) {
            return Route::ListChanged(c);
        }
    }
    match (msg.method.as_ref(), msg.id.as_ref()) {
        (Some(McpMethod::Ping), Some(id)) => Route::Reply(id.get().to_owned(), Ok("{}")),
        _ if leased.load(Ordering::Acquire) => Route::ToCall,
        (Some(m), Some(id)) => {
            tracing::warn!(upstream = %upstream, method = m.known().unwrap_or("other"), "upstream asked something outside any call; refused");
            Route::Reply(
                id.get().to_owned(),
                Err((
                    -32600,
                    "no call is in progress on this session to route the request to",
                )),
            )
        }
        _ => Route::Drop,
    }
}

struct SessionRef {
    client: HttpClient,
    up: Arc<Upstream>,
    version: HeaderValue,
    sid: Option<HeaderValue>,
}

impl SessionRef {
    async fn reply(&self, id: &str, outcome: Result<&str, (i64, &str)>) {
        let body = reply_body(id, outcome);
        let _ = self
            .client
            .post(
                &self.up.name,
                &self.up.uri,
                base_headers(&self.up, &self.version, self.sid.as_ref()),
                body,
                None,
            )
            .await;
    }
}

/// The JSON-RPC response to a server request: a result (JSON text) or an error.
pub fn reply_body(id: &str, outcome: Result<&str, (i64, &str)>) -> Bytes {
    Bytes::from(match outcome {
        Ok(result) => format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}"),
        Err((code, msg)) => format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{}}}",
            json!({"code": code, "message": msg})
        ),
    })
}
