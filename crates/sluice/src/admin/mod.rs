//! The operator plane: the admin listener (`[admin]`), its JSON API, event stream and console.
//!
//! Takes the process's runtime and the current generation; gives operators a view of what
//! Sluice fronts and who uses it, and the actions they take (approve a held call, accept a
//! pin, reload). Refuses every caller that is not an operator (`auth.rs`). Every answer is
//! JSON with `Cache-Control: no-store` and the console's strict headers; an error is
//! `{"error": {"code", "message"}}` with a stable code (docs/operating.md).

pub mod approvals;
pub mod auth;
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

/// What the admin listener keeps across requests: its console sign-ins.
pub struct State {
    /// Console sign-ins.
    pub sessions: auth::Sessions,
}

impl State {
    /// The listener's state for `gw`'s `[admin]`.
    pub fn new(_gw: &Arc<Generation>) -> State {
        State {
            sessions: auth::Sessions::default(),
        }
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
