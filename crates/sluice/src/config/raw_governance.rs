//! The governance tables as written: `[auth]` (with `[auth.jwt]` and `[[auth.api_keys]]`),
//! `[budget]` (with `[[budget.override]]`) and `[[quota]]`, each key documented where it is
//! declared (the configuration reference is generated from these comments: see `raw.rs`).
//!
//! Takes nothing but what `toml` hands it; gives the values as written; refuses an unknown key
//! or a value of the wrong type. Defaults and rules live in `auth.rs`, `budget.rs`, `quota.rs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ApiKeyConfig, MaxTokensAction};

/// `[budget]` keys, also those of each `[[budget.override]]`.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimitsSet {
    /// Sampling asks per principal per window, refilled evenly (default 60).
    pub(super) sampling_per_window: Option<u32>,
    /// Sampling asks allowed back to back (default 20).
    pub(super) sampling_burst: Option<u32>,
    /// Sum of the `maxTokens` asked for per principal per window (default 200000).
    pub(super) tokens_per_window: Option<u32>,
    /// The window (default 60000).
    pub(super) window_ms: Option<u64>,
    /// `input_required` rounds per original request (default 5).
    pub(super) max_rounds: Option<u32>,
    /// `maxTokens` of one sampling ask (default 8192).
    pub(super) max_tokens_per_ask: Option<u64>,
    /// What an ask over `max_tokens_per_ask` gets (default `deny`).
    pub(super) max_tokens_action: Option<MaxTokensAction>,
    /// Parked 2025-11-25 exchanges waiting for this principal's answers (default 16).
    pub(super) max_parked_per_principal: Option<usize>,
    /// One input request sent to the client (default 262144).
    pub(super) max_input_request_bytes: Option<usize>,
    /// One input response sent back (default 1048576).
    pub(super) max_input_response_bytes: Option<usize>,
    /// Input requests in one round; an upstream asking more is stopped with `-31016`
    /// (default 16).
    pub(super) max_asks_per_round: Option<usize>,
}

/// `[budget]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    /// The budget of every principal.
    #[serde(flatten)]
    pub(super) global: RawLimitsSet,
    /// Other limits for an upstream, a group, or both.
    #[serde(default, rename = "override")]
    pub(super) overrides: Vec<RawOverride>,
}

/// `[[budget.override]]`: the keys of `[budget]`, for some requests.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOverride {
    /// For calls to this upstream.
    pub(super) upstream: Option<String>,
    /// For principals of this group.
    pub(super) group: Option<String>,
    /// The limits that differ.
    #[serde(flatten)]
    pub(super) limits: RawLimitsSet,
}

/// `[auth]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    /// Sluice's own resource URL, in its RFC 9728 metadata and a JWT's default audience
    /// (default the endpoint's URL).
    pub(super) resource: Option<String>,
    /// Authorization servers the RFC 9728 metadata names.
    #[serde(default)]
    pub(super) authorization_servers: Vec<String>,
    /// Scopes every caller needs (403 `insufficient_scope` without one).
    #[serde(default)]
    pub(super) required_scopes: Vec<String>,
    /// API keys, by their SHA-256.
    #[serde(default)]
    pub(super) api_keys: Vec<ApiKeyConfig>,
    /// Environment variable holding `HASH=principal[:group|group][:scope|scope]` entries,
    /// comma-separated.
    pub(super) api_keys_env: Option<String>,
    /// JWT bearer tokens.
    pub(super) jwt: Option<RawJwt>,
    /// Sluice as the authorization server clients sign in to, delegating to the company IdP.
    pub(super) login: Option<super::login::RawLogin>,
}

/// `[auth.jwt]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    /// The required `iss`.
    pub(super) issuer: String,
    /// The required `aud` (default `auth.resource`).
    pub(super) audience: Option<String>,
    /// Environment variable holding an HS256 secret.
    pub(super) hs256_secret_env: Option<String>,
    /// File holding an HS256 secret.
    pub(super) hs256_secret_file: Option<String>,
    /// PEM files of RS256 or ES256 public keys.
    #[serde(default)]
    pub(super) public_keys: Vec<String>,
    /// A JWKS file (RS256, ES256 keys by `kid`).
    pub(super) jwks_file: Option<String>,
    /// The claim naming the principal (default `sub`).
    pub(super) principal_claim: Option<String>,
    /// The claim listing its groups (default `groups`).
    pub(super) groups_claim: Option<String>,
    /// Clock leeway for `exp` and `nbf` (default 30000).
    pub(super) leeway_ms: Option<u64>,
}

/// `[[quota]]`: calls per window, per principal.
#[derive(Debug, Default, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQuota {
    /// Required and unique: named in the refusal (429 `-31017`).
    pub(super) name: Option<String>,
    /// The principals it counts (any principal when this and `group` are absent).
    #[serde(default)]
    pub(super) principal: Vec<String>,
    /// The groups it counts.
    #[serde(default)]
    pub(super) group: Vec<String>,
    /// Configured upstream names (every upstream when absent).
    #[serde(default)]
    pub(super) upstream: Vec<String>,
    /// Globs (`*`, `?`) on the upstream's own tool names (every tool when absent).
    #[serde(default)]
    pub(super) tool: Vec<String>,
    /// Calls allowed per window, 1 to 1000000.
    pub(super) calls_per_window: Option<u32>,
    /// The window (default 60000, at most a day).
    pub(super) window_ms: Option<u64>,
    /// Calls allowed back to back (default `calls_per_window`), then one more each
    /// `window_ms / calls_per_window`.
    pub(super) burst: Option<u32>,
}
