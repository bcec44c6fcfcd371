//! Governance refusals: stable codes outside the spec's reserved ranges, messages that say
//! which limit was hit and what to do, data a program can act on.
//!
//! Takes a refusal; gives its HTTP status, code, message and data (see docs/governance.md, "Error codes").

use http::StatusCode;
use serde_json::{json, Value};

/// Sluice: the request reached its `input_required` round cap.
pub const ROUND_CAP: i64 = -31010;
/// Sluice: too many exchanges are parked (for this principal, or in total).
pub const PARKED_CAP: i64 = -31011;
/// Sluice: the sampling budget of the window is spent (retry later).
pub const SAMPLING_BUDGET: i64 = -31012;
/// Sluice: the token budget of the window is spent (retry later), or one ask exceeds it.
pub const TOKEN_BUDGET: i64 = -31013;
/// Sluice: a policy rule denied the call or the ask.
pub const POLICY_DENIED: i64 = -31014;
/// Sluice: the user declined (or cancelled) an approval.
pub const APPROVAL_DECLINED: i64 = -31015;
/// Sluice: an ask or an answer is over a size limit (maxTokens or bytes).
pub const TOO_LARGE: i64 = -31016;
/// Sluice: the tool's call quota of the window is spent (`[[quota]]`; retry later).
pub const CALL_QUOTA: i64 = -31017;
/// Sluice: too many streams are open (for this principal, or in total); retry later.
pub const STREAM_CAP: i64 = -31018;
/// Sluice: the shared state (Redis) of a cluster is unreachable; retry shortly.
pub const SHARED_STATE: i64 = -31019;
/// Sluice: the same tool was called with the same arguments too often (`[loop_breaker]`).
pub const REPEATED_CALL: i64 = -31021;
/// Sluice: an operator denied a call held for their approval (`approver = "operator"`).
pub const OPERATOR_DENIED: i64 = -31051;
/// Sluice: no operator decided on a held call within `approvals.wait_ms`.
pub const NO_OPERATOR_DECISION: i64 = -31052;
/// Sluice: too many calls are held for an operator (in all, or for this principal).
pub const HELD_CAP: i64 = -31053;
/// Sluice: the upstream is reached as each user, and this user has not signed in to it.
pub const SIGN_IN: i64 = -31040;
/// Sluice: the user declined (or cancelled) signing in to the upstream.
pub const SIGN_IN_DECLINED: i64 = -31041;
/// Sluice: the upstream is reached with a token exchanged for the caller's JWT, and this caller
/// came without one (an API key).
pub const IDP_TOKEN_NEEDED: i64 = -31042;

/// A governance refusal.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// `max_rounds` reached.
    RoundCap(u32),
    /// Parked exchanges at their cap (`per_principal` true: this principal's).
    ParkedCap { limit: usize, per_principal: bool },
    /// Sampling asks per window spent.
    Sampling { retry_after_ms: u64 },
    /// Tokens per window spent.
    Tokens { retry_after_ms: u64 },
    /// A `[[quota]]`'s calls per window spent.
    Quota {
        name: String,
        limit: u32,
        retry_after_ms: u64,
    },
    /// The same tool called with the same arguments past `[loop_breaker]`'s limit.
    Repeated {
        tool: String,
        limit: u32,
        window_ms: u64,
        retry_after_ms: u64,
    },
    /// One ask wants more tokens than a window allows.
    TokensNever(u64),
    /// A rule denied it.
    Denied { rule: String, reason: String },
    /// The user declined the approval.
    Declined { rule: String },
    /// Over a size limit.
    TooLarge(String),
    /// An operator denied the held call (who is in the audit record, not said to the client).
    OperatorDenied { rule: String },
    /// No operator decided within the wait (ms).
    NoOperatorDecision { rule: String, wait_ms: u64 },
    /// Held calls at their cap (`per_principal` true: this principal's).
    HeldCap { limit: usize, per_principal: bool },
    /// An upstream asked more things in one round than `budget.max_asks_per_round`.
    TooManyAsks(usize),
    /// Streams at their cap (`per_principal` true: this principal's).
    Streams { limit: usize, per_principal: bool },
    /// An approval round is needed but the client did not declare elicitation (-32021).
    NeedsElicitation(String),
    /// Redis is unreachable and `cluster.on_redis_error = "closed"`.
    SharedState,
    /// The user must sign in to `upstream` at `url` (their client cannot be asked: it did not
    /// declare URL elicitation).
    SignIn { upstream: String, url: String },
    /// The user declined signing in to `upstream`, or did not after `rounds` rounds.
    SignInDeclined {
        upstream: String,
        rounds: Option<u32>,
    },
    /// `upstream` exchanges the caller's JWT (`token_exchange`), and the caller has none.
    IdpTokenNeeded { upstream: String },
}

impl Refusal {
    /// HTTP status, code, message and data.
    pub fn classify(&self) -> (StatusCode, i64, String, Value) {
        match self {
            Refusal::RoundCap(n) => (
                StatusCode::BAD_REQUEST,
                ROUND_CAP,
                format!("this request reached its limit of {n} input rounds (budget.max_rounds); the server keeps asking: stop, or raise the limit for it"),
                json!({"limit": n}),
            ),
            Refusal::ParkedCap { limit, per_principal } => (
                StatusCode::BAD_REQUEST,
                PARKED_CAP,
                format!(
                    "too many requests are waiting for your answers ({limit}, {}); answer or abandon some, then retry",
                    if *per_principal { "budget.max_parked_per_principal" } else { "bridge.max_parked" }
                ),
                json!({"limit": limit, "perPrincipal": per_principal}),
            ),
            Refusal::Sampling { retry_after_ms } => (
                StatusCode::TOO_MANY_REQUESTS,
                SAMPLING_BUDGET,
                format!("the sampling budget of this window is spent (budget.sampling_per_window); retry in {retry_after_ms} ms"),
                json!({"retryAfterMs": retry_after_ms}),
            ),
            Refusal::Tokens { retry_after_ms } => (
                StatusCode::TOO_MANY_REQUESTS,
                TOKEN_BUDGET,
                format!("the token budget of this window is spent (budget.tokens_per_window); retry in {retry_after_ms} ms"),
                json!({"retryAfterMs": retry_after_ms}),
            ),
            Refusal::Quota { .. } | Refusal::Repeated { .. } => self.calls(),
            Refusal::TokensNever(n) => (
                StatusCode::BAD_REQUEST,
                TOKEN_BUDGET,
                format!("one sampling ask wants {n} tokens, more than a whole window allows (budget.tokens_per_window)"),
                json!({"maxTokens": n}),
            ),
            Refusal::Denied { rule, reason } => {
                (StatusCode::BAD_REQUEST, POLICY_DENIED, format!("denied by policy rule {rule:?}: {reason}"), json!({"rule": rule}))
            }
            Refusal::Declined { rule } => (
                StatusCode::BAD_REQUEST,
                APPROVAL_DECLINED,
                format!("the approval asked by policy rule {rule:?} was declined; nothing was sent on"),
                json!({"rule": rule}),
            ),
            Refusal::NeedsElicitation(rule) => (
                StatusCode::BAD_REQUEST,
                crate::mcp::jsonrpc::MISSING_CAPABILITY,
                format!("policy rule {rule:?} needs your approval (an elicitation) before this goes on; declare the elicitation capability"),
                json!({"requiredCapabilities": {"elicitation": {}}}),
            ),
            Refusal::TooLarge(what) => (StatusCode::BAD_REQUEST, TOO_LARGE, format!("{what}; lower it or raise the limit"), json!({})),
            Refusal::Streams { .. } => self.streams(),
            Refusal::OperatorDenied { .. }
            | Refusal::NoOperatorDecision { .. }
            | Refusal::HeldCap { .. } => self.held(),
            Refusal::SharedState => (
                StatusCode::SERVICE_UNAVAILABLE,
                SHARED_STATE,
                "the gateway's shared state (Redis) is unreachable, so budgets and single use cannot be checked; retry shortly".into(),
                json!({"retryAfterMs": 1000}),
            ),
            Refusal::SignIn { .. }
            | Refusal::SignInDeclined { .. }
            | Refusal::IdpTokenNeeded { .. } => self.sign_in(),
            Refusal::TooManyAsks(limit) => (
                StatusCode::BAD_REQUEST,
                TOO_LARGE,
                format!("the upstream asked more than {limit} things at once (budget.max_asks_per_round); the call was stopped"),
                json!({"limit": limit}),
            ),
        }
    }

    /// The stream caps' classification.
    /// A call quota's or the identical-call breaker's refusal.
    fn calls(&self) -> (StatusCode, i64, String, Value) {
        match self {
                Refusal::Quota { name, limit, retry_after_ms } => (
                    StatusCode::TOO_MANY_REQUESTS,
                    CALL_QUOTA,
                    format!("the call quota {name:?} is spent ({limit} calls per window, refilled evenly: a burst, then one each window / {limit}); retry in {retry_after_ms} ms"),
                    json!({"quota": name, "limit": limit, "retryAfterMs": retry_after_ms}),
                ),
                Refusal::Repeated { tool, limit, window_ms, retry_after_ms } => (
                    StatusCode::TOO_MANY_REQUESTS,
                    REPEATED_CALL,
                    format!("the tool {tool:?} was called with these same arguments {limit} times within {window_ms} ms (loop_breaker.max_identical_calls): is the agent stuck in a loop? Change the arguments, or retry in {retry_after_ms} ms"),
                    json!({"tool": tool, "limit": limit, "windowMs": window_ms, "retryAfterMs": retry_after_ms}),
                ),
            _ => (StatusCode::TOO_MANY_REQUESTS, CALL_QUOTA, String::new(), json!({})),
        }
    }

    fn streams(&self) -> (StatusCode, i64, String, Value) {
        match self {
            Refusal::Streams { limit, per_principal } => (
                if *per_principal { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::SERVICE_UNAVAILABLE },
                STREAM_CAP,
                format!(
                    "too many streams are open ({limit}, {}); close a listen or streamed call, or retry shortly",
                    if *per_principal { "limits.max_streams_per_principal" } else { "limits.max_streams" }
                ),
                json!({"limit": limit, "perPrincipal": per_principal, "retryAfterMs": 1000}),
            ),
            _ => (StatusCode::SERVICE_UNAVAILABLE, STREAM_CAP, String::new(), json!({})),
        }
    }

    /// The refusals of calls held for an operator.
    fn held(&self) -> (StatusCode, i64, String, Value) {
        match self {
            Refusal::OperatorDenied { rule } => (
                StatusCode::BAD_REQUEST,
                OPERATOR_DENIED,
                format!("an operator denied this call (policy rule {rule:?} holds it for an operator's approval); nothing was sent on"),
                json!({"rule": rule}),
            ),
            Refusal::NoOperatorDecision { rule, wait_ms } => (
                StatusCode::BAD_REQUEST,
                NO_OPERATOR_DECISION,
                format!("no operator decided within {} s (policy rule {rule:?}, approvals.wait_ms); nothing was sent on: call again to be held again", wait_ms / 1000),
                json!({"rule": rule, "waitMs": wait_ms}),
            ),
            Refusal::HeldCap { limit, per_principal } => (
                if *per_principal { StatusCode::TOO_MANY_REQUESTS } else { StatusCode::SERVICE_UNAVAILABLE },
                HELD_CAP,
                format!(
                    "too many calls wait for an operator's approval ({limit}, {}); wait for them to be decided, then retry",
                    if *per_principal { "approvals.max_held_per_principal" } else { "approvals.max_held" }
                ),
                json!({"limit": limit, "perPrincipal": per_principal}),
            ),
            _ => (StatusCode::BAD_REQUEST, OPERATOR_DENIED, String::new(), json!({})),
        }
    }

    /// The sign-in refusals' classification (an upstream reached as each user).
    fn sign_in(&self) -> (StatusCode, i64, String, Value) {
        match self {
            Refusal::SignIn { upstream, url } => (
                StatusCode::FORBIDDEN,
                SIGN_IN,
                format!("upstream {upstream:?} is reached as each user, and you have not signed in to it through Sluice: open the URL in data.url in your browser (it is yours alone: do not share it), sign in, then call again"),
                json!({"upstream": upstream, "url": url}),
            ),
            Refusal::SignInDeclined { upstream, rounds: None } => (
                StatusCode::BAD_REQUEST,
                SIGN_IN_DECLINED,
                format!("signing in to upstream {upstream:?} was declined; nothing was sent to it (call again to be asked again)"),
                json!({"upstream": upstream}),
            ),
            Refusal::SignInDeclined { upstream, rounds: Some(n) } => (
                StatusCode::BAD_REQUEST,
                SIGN_IN_DECLINED,
                format!("no sign-in to upstream {upstream:?} came back after {n} rounds; nothing was sent to it (call again to be asked again)"),
                json!({"upstream": upstream, "rounds": n}),
            ),
            Refusal::IdpTokenNeeded { upstream } => (
                StatusCode::FORBIDDEN,
                IDP_TOKEN_NEEDED,
                format!("upstream {upstream:?} needs you signed in with the company IdP's token: it is reached as each user with a token exchanged for the JWT you call Sluice with, and this request came with an API key; call with a token from the identity provider of [auth.jwt]"),
                json!({"upstream": upstream}),
            ),
            _ => (StatusCode::BAD_REQUEST, SIGN_IN, String::new(), json!({})),
        }
    }
}
