//! The audit record: what one request's record may hold, and nothing that could hold content.
//!
//! Takes nothing; gives the [`Record`] type the stages note into and the writer serializes (the
//! schema docs/operations.md documents). Refuses nothing.

use serde::Serialize;

/// One audit record (the schema docs/operations.md documents).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Record {
    /// Milliseconds since the Unix epoch when the request arrived.
    pub time_ms: u64,
    /// The authenticated principal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The client the principal signed in with to Sluice (`[auth.login]`): its metadata
    /// document URL or its registration's `client_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// `modern` (2026-07-28) or `legacy` (2025-11-25).
    pub client_era: &'static str,
    /// The JSON-RPC method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The tool or prompt name, or resource URI.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The upstream that served it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The upstream's era.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_era: Option<&'static str>,
    /// How Sluice authenticated to the upstream, when not with static credentials:
    /// `client_credentials` or `oauth` (never the token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_auth: Option<&'static str>,
    /// Input keys of an `input_required` answer, with their methods (`key=method`), sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_keys: Vec<String>,
    /// The round this request answered (from its sealed state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// The replica that held the exchange, when this one forwarded the request to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// With `[cluster]`, on the replica that served a forwarded request: the replica the client
    /// talked to (which writes its own record of the request, with `owner`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_from: Option<String>,
    /// The policy rule that decided, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_rule: Option<String>,
    /// `allow`, `deny`, `approve` or `refused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    /// The operator who approved or denied a call held for an operator's approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// Sampling asks left in the window, when a budget was charged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_left: Option<u64>,
    /// The HTTP status (499: the client went away first).
    pub status: u16,
    /// The JSON-RPC error code, if the answer was an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<i64>,
    /// Microseconds from arrival to the response head.
    pub latency_us: u64,
    /// Request body bytes.
    pub bytes_in: u64,
    /// Response body bytes (JSON answers; streams count 0).
    pub bytes_out: u64,
    /// The request's trace id (32 hex digits), with `[telemetry]` on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The method's metrics label (`Method::known`, or `other`), when the stage that read the
    /// method set it (else metrics read `method`). Not written.
    #[serde(skip)]
    pub op: Option<&'static str>,
    /// Whether the audit log is on: with it off, the front door's note skips the principal,
    /// method and name strings (metrics read `op`, upstream, status, code, input keys).
    /// Not written.
    #[serde(skip)]
    pub full: bool,
}
