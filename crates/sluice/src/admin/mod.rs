//! The operator plane: the admin listener (`[admin]`), its JSON API, event stream and console.
//!
//! Takes the process's runtime and the current generation; gives operators a view of what
//! Sluice fronts and who uses it, and the actions they take (approve a held call, accept a
//! pin, reload). Refuses every caller that is not an operator (`auth.rs`). Every answer is
//! JSON with `Cache-Control: no-store` and the console's strict headers; an error is
//! `{"error": {"code", "message"}}` with a stable code (docs/operating.md).

pub mod approvals;
pub mod auth;
pub mod body;
pub mod cluster;
pub mod console;
pub use crate::events;
pub mod listen;
pub mod pins;
pub mod publish;
pub mod routes;
pub mod session;
pub mod sign_ins;
pub mod stream;
pub mod views;

pub use listen::start;

use std::sync::Arc;

use bytes::Bytes;
use http::{header, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::gateway::Generation;
use crate::respond::Body;

/// The API's version prefix.
pub const PREFIX: &str = "/admin/v1";

/// Who is acting: an operator's name and how they proved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// The admin key's `name`, the JWT's principal, or `local` (an unauthenticated loopback
    /// listener).
    pub name: String,
    /// `key`, `jwt`, `session` (a console sign-in) or `loopback`.
    pub via: &'static str,
}

/// What a route handler gets: the generation serving now and the operator.
pub struct Cx {
    /// The current generation.
    pub gw: Arc<Generation>,
    /// Who asks.
    pub op: Operator,
}

/// An admin answer.
pub type Answer = Response<Body>;

/// A JSON answer.
pub fn json(status: StatusCode, v: &Value) -> Answer {
    let body = Bytes::from(v.to_string());
    let mut r = Response::new(
        http_body_util::Full::new(body)
            .map_err(|e| match e {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// An error answer: `{"error": {"code", "message"}}`; `code` is stable and documented.
pub fn error(status: StatusCode, code: &str, message: &str) -> Answer {
    json(
        status,
        &json!({"error": {"code": code, "message": message}}),
    )
}

/// `404 not_found`.
pub fn not_found(what: &str) -> Answer {
    error(StatusCode::NOT_FOUND, "not_found", what)
}

/// `405 method_not_allowed`.
pub fn method_not_allowed(allowed: &str) -> Answer {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        &format!("this path takes {allowed}"),
    )
}

/// Event streams open at once on the admin listener.
pub const MAX_STREAMS: usize = 16;
/// Failed credentials one source may present per [`FAILURE_WINDOW`] before it is told to
/// slow down (429).
pub const MAX_FAILURES: u32 = 10;
/// The window of [`MAX_FAILURES`].
pub const FAILURE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);
/// Sources whose failures are counted at once.
const MAX_FAILING_SOURCES: usize = 4096;

/// What the admin listener keeps across requests: its console sign-ins, its event streams'
/// places and the failed credentials of each source.
pub struct State {
    /// Console sign-ins.
    pub sessions: auth::Sessions,
    /// Places for event streams ([`MAX_STREAMS`]).
    pub streams: Arc<tokio::sync::Semaphore>,
    failures:
        std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (u32, std::time::Instant)>>,
}

/// The source of an admin request (set by the listener).
#[derive(Debug, Clone, Copy)]
pub struct Source(pub std::net::IpAddr);

impl State {
    /// The listener's state for `gw`'s `[admin]`.
    pub fn new(_gw: &Arc<Generation>) -> State {
        State {
            sessions: auth::Sessions::default(),
            streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
            failures: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Whether `source` presented [`MAX_FAILURES`] failed credentials within the window.
    pub fn throttled(&self, source: Option<Source>) -> bool {
        let Some(Source(ip)) = source else {
            return false;
        };
        let Ok(f) = self.failures.lock() else {
            return false;
        };
        f.get(&ip)
            .is_some_and(|(n, since)| *n >= MAX_FAILURES && since.elapsed() < FAILURE_WINDOW)
    }

    /// Counts a failed credential of `source`.
    pub fn failed(&self, source: Option<Source>) {
        let Some(Source(ip)) = source else { return };
        let Ok(mut f) = self.failures.lock() else {
            return;
        };
        if f.len() >= MAX_FAILING_SOURCES && !f.contains_key(&ip) {
            f.retain(|_, (_, since)| since.elapsed() < FAILURE_WINDOW);
            if f.len() >= MAX_FAILING_SOURCES {
                return;
            }
        }
        let e = f.entry(ip).or_insert((0, std::time::Instant::now()));
        if e.1.elapsed() >= FAILURE_WINDOW {
            *e = (0, std::time::Instant::now());
        }
        e.0 += 1;
    }
}

/// A redirect (303) to `to`.
pub fn redirect(to: &'static str) -> Answer {
    let mut r = json(StatusCode::SEE_OTHER, &json!({"location": to}));
    r.headers_mut()
        .insert(header::LOCATION, header::HeaderValue::from_static(to));
    r
}

/// Adds the headers every admin answer carries: no caching, no sniffing, no framing, no
/// referrer, and a Content-Security-Policy that lets a JSON answer load nothing (the console's
/// pages set their own, as strict).
pub fn secured(mut a: Answer) -> Answer {
    use header::HeaderValue as V;
    let h = a.headers_mut();
    h.insert(header::CACHE_CONTROL, V::from_static("no-store"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, V::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, V::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, V::from_static("no-referrer"));
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            V::from_static("default-src 'none'; frame-ancestors 'none'"),
        );
    }
    a
}
