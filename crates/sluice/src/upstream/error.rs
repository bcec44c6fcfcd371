//! Why an exchange with an upstream failed: the one error type every upstream client and
//! channel gives (HTTP, a 2025-11-25 session, a stdio process, a 2024-11-05 stream).
//!
//! Takes nothing; gives [`UpstreamError`], whose every message names the upstream and says what
//! to check, never the bytes exchanged. Refuses nothing.

/// Why an upstream exchange failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made.
    #[error(
        "upstream '{0}' is unreachable ({1}); check that it is running and that its url is right"
    )]
    Unreachable(String, String),
    /// No connection could be opened: the request was not sent (so it may go elsewhere).
    #[error(
        "upstream '{0}' is unreachable ({1}); check that it is running and that its url is right"
    )]
    NoConnection(String, String),
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
    #[error("upstream '{0}' stopped: {1}; the next call gets a new session (a new process, for a stdio server)")]
    Exited(String, String),
    /// Every endpoint's breaker is open (each failed `breaker_failures` times in a row).
    #[error(
        "upstream '{0}' is failing: every endpoint of it failed repeatedly and is not sent requests for now (its breaker is open); retry in {1} ms"
    )]
    Open(String, u64),
    /// It has `max_in_flight` requests under way.
    #[error("upstream '{0}' has {1} requests under way, its max_in_flight; retry shortly")]
    Busy(String, usize),
    /// A pool Sluice keeps for upstreams (a stdio upstream's processes, the 2025-11-25
    /// sessions), or the principal's share of it, is full: Sluice's refusal, not the upstream's
    /// fault (503, `-31020`).
    #[error(transparent)]
    Full(crate::shares::Full),
    /// Sluice could not obtain a token for it (`[upstream.auth]`): its resource metadata, its
    /// authorization server or the token endpoint refused or said something unusable (why:
    /// Sluice's words and the OAuth error code, never a token, a secret or a body).
    #[error("upstream '{0}' could not be authorized: {1}; check its [upstream.auth] settings and its authorization server")]
    Auth(String, String),
    /// A 2025-11-25 upstream no longer knows the session (HTTP 404).
    #[error("upstream '{0}' ended the session; retry the request")]
    SessionGone(String),
}

impl UpstreamError {
    /// Whether the failure is a timeout (504) rather than a bad gateway (502).
    pub fn is_timeout(&self) -> bool {
        matches!(self, UpstreamError::Timeout(..))
    }

    /// When to retry a request refused by the upstream's breaker, its `max_in_flight` or a full
    /// pool (503).
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            UpstreamError::Open(_, ms) => Some(*ms),
            UpstreamError::Busy(..) => Some(1000),
            UpstreamError::Full(f) => Some(f.retry_after_ms()),
            _ => None,
        }
    }
}

/// No healthy upstream can serve a request now, but a configured one could once back: the
/// upstreams down (each with why, as Sluice recorded it: names and error kinds, never what an
/// upstream sent) and when to retry. Answered 503 with `Retry-After` (`-31030`).
#[derive(Debug, Clone)]
pub struct Unavailable {
    /// What was asked (a method, or the tool, prompt or resource's kind).
    pub what: String,
    /// The upstreams that could serve it, down, with why.
    pub down: Vec<(String, String)>,
    /// When to retry.
    pub retry_after_ms: u64,
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no healthy upstream can serve {} now: ", self.what)?;
        for (i, (name, why)) in self.down.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}upstream '{name}' is down ({why})")?;
        }
        write!(
            f,
            ". Sluice probes it again and serves as soon as it answers: retry in {} s; if it stays down, check the upstream (see Troubleshooting in docs/operations.md)",
            self.retry_after_ms.div_ceil(1000).max(1)
        )
    }
}

impl std::error::Error for Unavailable {}
