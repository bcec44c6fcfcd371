//! What a request ends in, as hyper sends it: one JSON object, an SSE stream (with its stream
//! place and audit record riding along, or relayed to another stream behind a 202), 202, a
//! plain-text edge refusal, a challenge, a limit with `Retry-After`, a new session.
//!
//! Takes the outcome of the pipeline; gives the HTTP response. Refuses nothing.

use std::convert::Infallible;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use tokio::sync::mpsc;

use crate::error::GatewayError;
use crate::mcp::jsonrpc;
use crate::mcp::sse::Frame;

/// The body type of every response Sluice writes.
pub type Body = BoxBody<Bytes, Infallible>;

/// The frames of an SSE answer (typed: written as text only by [`Reply::into_response`]), and
/// what must live exactly as long as the stream: its place among the open streams and its
/// audit record (emitted when the stream ends, with what its last message said).
pub struct SseBody {
    rx: mpsc::Receiver<Frame>,
    permit: Option<crate::streams::StreamPermit>,
    audit: Option<crate::audit::StreamAudit>,
    /// Every frame is already queued and nothing writes more: it holds no open stream's place.
    complete: bool,
    /// Where the frames go instead of the response, which is then 202 with no body (a call on
    /// the 2024-11-05 HTTP+SSE transport, whose answers go on the session's one stream).
    relay: Option<mpsc::Sender<Frame>>,
}

impl From<mpsc::Receiver<Frame>> for SseBody {
    fn from(rx: mpsc::Receiver<Frame>) -> Self {
        SseBody {
            rx,
            permit: None,
            audit: None,
            complete: false,
            relay: None,
        }
    }
}

impl SseBody {
    /// A stream of one message, already whole (an answer given on SSE rather than as JSON).
    pub fn one(frame: Frame) -> Self {
        let (tx, rx) = mpsc::channel(1);
        let _ = tx.try_send(frame);
        SseBody {
            rx,
            permit: None,
            audit: None,
            complete: true,
            relay: None,
        }
    }

    /// Whether every frame is already queued (such a stream needs no place among the open ones).
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The next frame.
    pub async fn recv(&mut self) -> Option<Frame> {
        let frame = self.rx.recv().await;
        if let (Some(f), Some(a)) = (&frame, &self.audit) {
            a.observe(f, f.wire_len());
        }
        frame
    }

    /// Holds `permit` until the stream ends.
    pub fn hold(&mut self, permit: crate::streams::StreamPermit) {
        self.permit = Some(permit);
    }

    /// Emits `audit` when the stream ends.
    pub fn audit(&mut self, audit: crate::audit::StreamAudit) {
        if self.relay.is_some() {
            audit.status(StatusCode::ACCEPTED);
        }
        self.audit = Some(audit);
    }

    /// Sends the frames to `to` instead of the response (answered 202): the body keeps its
    /// place and its audit record until its last frame is sent, or `to` closes (which drops
    /// it, ending whatever writes it).
    pub fn relay_to(&mut self, to: mpsc::Sender<Frame>) {
        self.relay = Some(to);
    }

    /// Moves the frames to `to` until the body ends or `to` closes.
    async fn relay(mut self, to: mpsc::Sender<Frame>) {
        loop {
            let frame = tokio::select! {
                f = self.recv() => f,
                _ = to.closed() => None,
            };
            let Some(f) = frame else { return };
            if to.send(f).await.is_err() {
                return;
            }
        }
    }
}

/// What a request ends in.
pub enum Reply {
    /// One JSON object with a status.
    Json(StatusCode, Bytes),
    /// An SSE stream of frames (status 200).
    Sse(SseBody),
    /// 202 with an empty body.
    Accepted,
    /// A status with a short plain-text explanation (edge refusals).
    Plain(StatusCode, &'static str),
    /// 401 / 403 with a `WWW-Authenticate` challenge and a JSON-RPC error body.
    Challenge(StatusCode, String, Bytes),
    /// 429 (or 503) with `Retry-After` (seconds) and a JSON-RPC error body.
    Limited(StatusCode, Bytes, u64),
    /// A legacy `initialize` answer carrying the new `Mcp-Session-Id`.
    Session(StatusCode, Bytes, String),
}

impl Reply {
    /// The reply for a stage error, carrying the request's id.
    pub fn error(id: &str, err: &GatewayError) -> Reply {
        let (status, code, data) = err.classify();
        let body = jsonrpc::error_body(id, code, &err.to_string(), data.as_ref());
        // 503 with Retry-After (seconds, rounded up): the upstream's breaker or max_in_flight,
        // a full pool Sluice keeps, or no healthy upstream.
        match err.retry_after_ms() {
            Some(ms) => Reply::Limited(status, body, ms.div_ceil(1000).max(1)),
            None => Reply::Json(status, body),
        }
    }

    /// The reply for a governance refusal: 429 with `Retry-After` for a spent window budget.
    pub fn refusal(id: &str, r: &crate::policy::Refusal) -> Reply {
        let e = GatewayError::Refused(r.clone());
        let retry_after_ms = match r {
            crate::policy::Refusal::Sampling { retry_after_ms }
            | crate::policy::Refusal::Tokens { retry_after_ms }
            | crate::policy::Refusal::Quota { retry_after_ms, .. }
            | crate::policy::Refusal::Repeated { retry_after_ms, .. } => *retry_after_ms,
            crate::policy::Refusal::Streams { .. } | crate::policy::Refusal::SharedState => 1000,
            _ => return Reply::error(id, &e),
        };
        let (status, code, data) = e.classify();
        Reply::Limited(
            status,
            jsonrpc::error_body(id, code, &e.to_string(), data.as_ref()),
            retry_after_ms.div_ceil(1000).max(1),
        )
    }

    /// The body of this reply when it is one JSON object (for sending it in-stream instead).
    pub fn json_body(&self) -> Option<&Bytes> {
        match self {
            Reply::Json(_, b)
            | Reply::Limited(_, b, _)
            | Reply::Challenge(_, _, b)
            | Reply::Session(_, b, _) => Some(b),
            _ => None,
        }
    }

    /// The HTTP status this reply will carry.
    pub fn status(&self) -> StatusCode {
        match self {
            Reply::Json(s, _)
            | Reply::Plain(s, _)
            | Reply::Challenge(s, _, _)
            | Reply::Session(s, _, _) => *s,
            Reply::Limited(s, ..) => *s,
            Reply::Sse(b) if b.relay.is_some() => StatusCode::ACCEPTED,
            Reply::Sse(_) => StatusCode::OK,
            Reply::Accepted => StatusCode::ACCEPTED,
        }
    }

    /// The reply with its audit record completed: a stream's when it ends (what its last message
    /// says), any other answer's now.
    pub fn audited(self, guard: crate::audit::AuditGuard) -> Reply {
        match self {
            Reply::Sse(mut body) => {
                body.audit(guard.into_stream());
                Reply::Sse(body)
            }
            reply => {
                guard.finish(reply.status(), reply.json_body());
                reply
            }
        }
    }

    /// Builds the hyper response.
    pub fn into_response(self) -> Response<Body> {
        let mut b = Response::builder().status(self.status());
        let body = match self {
            Reply::Json(_, bytes) => {
                b = b.header(http::header::CONTENT_TYPE, "application/json");
                Full::new(bytes).boxed()
            }
            Reply::Sse(mut body) if body.relay.is_some() => {
                if let Some(to) = body.relay.take() {
                    tokio::spawn(body.relay(to));
                }
                Full::new(Bytes::new()).boxed()
            }
            Reply::Sse(body) => {
                b = b
                    .header(http::header::CONTENT_TYPE, "text/event-stream")
                    .header(http::header::CACHE_CONTROL, "no-cache")
                    .header("x-accel-buffering", "no");
                let stream = futures_util::stream::unfold(body, |mut body| async move {
                    body.recv().await.map(|f| {
                        (
                            Ok::<_, Infallible>(hyper::body::Frame::data(f.write())),
                            body,
                        )
                    })
                });
                StreamBody::new(stream).boxed()
            }
            Reply::Accepted => Full::new(Bytes::new()).boxed(),
            Reply::Session(_, bytes, sid) => {
                b = b
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .header(crate::mcp::headers::SESSION_ID, sid);
                Full::new(bytes).boxed()
            }
            Reply::Limited(_, bytes, secs) => {
                b = b
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .header(http::header::RETRY_AFTER, secs.to_string());
                Full::new(bytes).boxed()
            }
            Reply::Challenge(_, challenge, bytes) => {
                b = b
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .header(http::header::WWW_AUTHENTICATE, challenge);
                Full::new(bytes).boxed()
            }
            Reply::Plain(status, text) => {
                b = b.header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8");
                if status == StatusCode::METHOD_NOT_ALLOWED {
                    b = b.header(http::header::ALLOW, HeaderValue::from_static("POST"));
                }
                Full::new(Bytes::from_static(text.as_bytes())).boxed()
            }
        };
        b.body(body)
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
    }
}
