//! The operator plane: the admin listener (`[admin]`), its JSON API, event stream and console.
//!
//! Takes the process's runtime and the current generation; gives operators a view of what
//! Sluice fronts and who uses it, and the actions they take (approve a held call, accept a
//! pin, reload). Refuses every caller that is not an operator (`auth.rs`). Every answer is
//! JSON with `Cache-Control: no-store` and the console's strict headers; an error is
//! `{"error": {"code", "message"}}` with a stable code (docs/operating.md).

pub mod approvals;
pub mod events;
pub mod pins;

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
