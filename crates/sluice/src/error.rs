//! The error taxonomy and its one mapping to HTTP status and JSON-RPC code.
//!
//! Takes a [`GatewayError`] from any stage; gives the client's HTTP status, JSON-RPC code,
//! message and data. Every message says what was wrong and what to do; none carries argument
//! values, prompts or results.

use http::StatusCode;
use serde_json::{json, Value};

use crate::mcp::jsonrpc::{self, FrameError};
use crate::upstream::client::UpstreamError;
use crate::validate::ValidateError;

/// Sluice: the request carries no valid credential (HTTP 401).
pub const UNAUTHENTICATED: i64 = -31001;
/// Sluice: the credential lacks a scope the request needs (HTTP 403).
pub const FORBIDDEN: i64 = -31003;
/// Sluice: the tool's definition changed since it was pinned; an operator must accept it
/// (HTTP 400; docs/pins.md).
pub const QUARANTINED: i64 = -31050;
/// Sluice: no healthy upstream can serve the request now, a configured one could once back
/// (HTTP 503 with `Retry-After`).
pub const NO_HEALTHY_UPSTREAM: i64 = -31030;

/// Which side a failure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client sent something wrong (4xx).
    Downstream,
    /// An upstream failed (502/504).
    Upstream,
    /// Sluice itself failed (500), or a pool it shares among principals is full (503).
    Internal,
}

/// Everything that can end a request early.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The body is not one JSON-RPC request.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The `_meta` envelope is missing or mistyped, or params are invalid.
    #[error("{0}")]
    InvalidParams(String, Option<Value>),
    /// Validation refused it (`_meta`, mirrored headers, version, method).
    #[error(transparent)]
    Validate(#[from] crate::validate::ValidateError),
    /// A name or URI that no upstream serves.
    #[error("{0}")]
    UnknownTarget(String, Option<Value>),
    /// An upstream failed.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// Not authenticated (401) or not authorized (403).
    #[error(transparent)]
    Auth(#[from] crate::auth::AuthError),
    /// The request needs a client capability it did not declare (the capabilities needed).
    #[error("{0}")]
    MissingCapability(String, Value),
    /// Governance refused (round cap, parked cap, budget, policy, approval declined, size).
    #[error("{}", .0.classify().2)]
    Refused(crate::policy::Refusal),
    /// A pool principals compete for at the front (requests in progress), or the principal's
    /// share of it, is full.
    #[error(transparent)]
    Full(crate::shares::Full),
    /// The tool is quarantined: its definition changed since it was pinned (upstream, its own
    /// tool name).
    #[error("tool {1:?} of upstream {0:?} is quarantined: its definition changed since it was pinned; an operator must accept the change (sluice pins accept --upstream {0} --tool {1}, or the console)")]
    Quarantined(String, String),
    /// Every upstream that could serve the request is down (503, `Retry-After`).
    #[error(transparent)]
    Unavailable(#[from] crate::upstream::error::Unavailable),
}

impl GatewayError {
    /// The side that failed.
    pub fn side(&self) -> Side {
        match self {
            GatewayError::Frame(_)
            | GatewayError::InvalidParams(..)
            | GatewayError::Validate(_)
            | GatewayError::UnknownTarget(..) => Side::Downstream,
            GatewayError::Auth(_)
            | GatewayError::Refused(_)
            | GatewayError::Quarantined(..)
            | GatewayError::MissingCapability(..) => Side::Downstream,
            GatewayError::Upstream(UpstreamError::Full(_)) | GatewayError::Full(_) => {
                Side::Internal
            }
            GatewayError::Upstream(_) | GatewayError::Unavailable(_) => Side::Upstream,
        }
    }

    /// When to retry, for a refusal that says so with `Retry-After` (503: a breaker, an
    /// upstream's `max_in_flight`, a full pool Sluice keeps, no healthy upstream).
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            GatewayError::Upstream(e) => e.retry_after_ms(),
            GatewayError::Full(f) => Some(f.retry_after_ms()),
            GatewayError::Unavailable(u) => Some(u.retry_after_ms),
            _ => None,
        }
    }

    /// HTTP status, JSON-RPC code and data. One exhaustive match: a new variant does not
    /// compile until it is mapped here (a body's and validation's refusals through the
    /// exhaustive matches of `classify_frame` and `classify_validate`).
    pub fn classify(&self) -> (StatusCode, i64, Option<Value>) {
        match self {
            GatewayError::Frame(e) => classify_frame(e),
            // Sluice's own -32602 answers are 400 (the spec fixes it for _meta; we keep it uniform).
            GatewayError::InvalidParams(_, data) => (
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_PARAMS,
                data.clone(),
            ),
            GatewayError::Validate(e) => classify_validate(e),
            GatewayError::UnknownTarget(_, data) => (
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_PARAMS,
                data.clone(),
            ),
            // A full pool (or the principal's share of it) is Sluice's own refusal, never the
            // upstream's fault: 503 with Retry-After, naming the limit (docs/governance.md: error codes).
            GatewayError::Upstream(UpstreamError::Full(f)) | GatewayError::Full(f) => (
                StatusCode::SERVICE_UNAVAILABLE,
                crate::shares::POOL_FULL,
                Some(f.data()),
            ),
            // A timeout is the gateway's judgement (504); any other upstream fault is a bad gateway.
            GatewayError::Upstream(e) if e.is_timeout() => {
                (StatusCode::GATEWAY_TIMEOUT, jsonrpc::INTERNAL_ERROR, None)
            }
            // Its breaker or its max_in_flight: unavailable for now, and for how long.
            GatewayError::Upstream(e) if e.retry_after_ms().is_some() => (
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::INTERNAL_ERROR,
                Some(json!({"retryAfterMs": e.retry_after_ms()})),
            ),
            GatewayError::Upstream(_) => (StatusCode::BAD_GATEWAY, jsonrpc::INTERNAL_ERROR, None),
            // Down now, back (re-probed) soon: unavailable, which ones and why, and when to retry.
            GatewayError::Unavailable(u) => {
                let down: Vec<Value> = u
                    .down
                    .iter()
                    .map(|(name, why)| json!({"upstream": name, "reason": why}))
                    .collect();
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    NO_HEALTHY_UPSTREAM,
                    Some(json!({"retryAfterMs": u.retry_after_ms, "down": down})),
                )
            }
            // Sluice's own codes, outside the JSON-RPC reserved range (docs/governance.md: error codes).
            GatewayError::Auth(crate::auth::AuthError::InsufficientScope(_)) => {
                (StatusCode::FORBIDDEN, FORBIDDEN, None)
            }
            GatewayError::Auth(_) => (StatusCode::UNAUTHORIZED, UNAUTHENTICATED, None),
            GatewayError::MissingCapability(_, needed) => (
                StatusCode::BAD_REQUEST,
                jsonrpc::MISSING_CAPABILITY,
                Some(json!({"requiredCapabilities": needed})),
            ),
            GatewayError::Quarantined(upstream, tool) => (
                StatusCode::BAD_REQUEST,
                QUARANTINED,
                Some(json!({"upstream": upstream, "tool": tool, "reason": "quarantined"})),
            ),
            GatewayError::Refused(r) => {
                let (status, code, _, data) = r.classify();
                (status, code, Some(data))
            }
        }
    }
}

/// [`GatewayError::classify`] of an unreadable body: one exhaustive match on [`FrameError`].
fn classify_frame(e: &FrameError) -> (StatusCode, i64, Option<Value>) {
    match e {
        FrameError::NotJson(_) => (StatusCode::BAD_REQUEST, jsonrpc::PARSE_ERROR, None),
        FrameError::NotRequest(_) => (StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, None),
        FrameError::TooDeep(max) => (
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            Some(json!({"maxDepth": max})),
        ),
    }
}

/// [`GatewayError::classify`] of a validation refusal: one exhaustive match on
/// [`ValidateError`].
fn classify_validate(e: &ValidateError) -> (StatusCode, i64, Option<Value>) {
    match e {
        ValidateError::Meta(_) => (StatusCode::BAD_REQUEST, jsonrpc::INVALID_PARAMS, None),
        ValidateError::Headers(_) => (StatusCode::BAD_REQUEST, jsonrpc::HEADER_MISMATCH, None),
        ValidateError::Version {
            requested,
            supported,
        } => (
            StatusCode::BAD_REQUEST,
            jsonrpc::UNSUPPORTED_VERSION,
            Some(json!({"supported": supported, "requested": requested})),
        ),
        ValidateError::Method(_) => (StatusCode::NOT_FOUND, jsonrpc::METHOD_NOT_FOUND, None),
    }
}
