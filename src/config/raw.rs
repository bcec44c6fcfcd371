//! The file as written: one serde struct per table, each refusing unknown keys.
//!
//! Takes nothing but what `toml` hands it; gives the values as they were written (absent ones as
//! `None` or empty); refuses an unknown key or a value of the wrong type (serde names the key, and
//! the loader adds the file and line). Defaults and rules live in each section's conversion.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ApiKeyConfig, CacheScope, Era, MaxTokensAction, PrefixMode, Transport};

/// Raw file layout; every table refuses unknown keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) listen: Option<String>,
    pub(super) path: Option<String>,
    #[serde(default)]
    pub(super) allowed_origins: Vec<String>,
    pub(super) prefix: Option<PrefixMode>,
    pub(super) separator: Option<String>,
    #[serde(default)]
    pub(super) limits: RawLimits,
    #[serde(default)]
    pub(super) timeouts: RawTimeouts,
    #[serde(default)]
    pub(super) upstream: Vec<RawUpstream>,
    #[serde(default)]
    pub(super) bridge: RawBridge,
    #[serde(default)]
    pub(super) state: RawState,
    #[serde(default)]
    pub(super) auth: RawAuth,
    #[serde(default)]
    pub(super) budget: RawBudget,
    #[serde(default)]
    pub(super) quota: Vec<RawQuota>,
    #[serde(default)]
    pub(super) policies: Vec<String>,
    #[serde(default)]
    pub(super) audit: RawAudit,
    #[serde(default)]
    pub(super) metrics: RawMetrics,
    pub(super) telemetry: Option<RawTelemetry>,
    pub(super) cluster: Option<RawCluster>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    pub(super) otlp_endpoint: Option<String>,
    pub(super) service_name: Option<String>,
    pub(super) sampling_ratio: Option<f64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    pub(super) require_auth: Option<bool>,
    pub(super) min_healthy_upstreams: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    pub(super) enabled: Option<bool>,
    pub(super) sink: Option<String>,
    pub(super) capacity: Option<usize>,
}

#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimitsSet {
    pub(super) sampling_per_window: Option<u32>,
    pub(super) sampling_burst: Option<u32>,
    pub(super) tokens_per_window: Option<u32>,
    pub(super) window_ms: Option<u64>,
    pub(super) max_rounds: Option<u32>,
    pub(super) max_tokens_per_ask: Option<u64>,
    pub(super) max_tokens_action: Option<MaxTokensAction>,
    pub(super) max_parked_per_principal: Option<usize>,
    pub(super) max_input_request_bytes: Option<usize>,
    pub(super) max_input_response_bytes: Option<usize>,
    pub(super) max_asks_per_round: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBudget {
    #[serde(flatten)]
    pub(super) global: RawLimitsSet,
    #[serde(default, rename = "override")]
    pub(super) overrides: Vec<RawOverride>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOverride {
    pub(super) upstream: Option<String>,
    pub(super) group: Option<String>,
    #[serde(flatten)]
    pub(super) limits: RawLimitsSet,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    pub(super) resource: Option<String>,
    #[serde(default)]
    pub(super) authorization_servers: Vec<String>,
    #[serde(default)]
    pub(super) required_scopes: Vec<String>,
    #[serde(default)]
    pub(super) api_keys: Vec<ApiKeyConfig>,
    pub(super) api_keys_env: Option<String>,
    pub(super) jwt: Option<RawJwt>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJwt {
    pub(super) issuer: String,
    pub(super) audience: Option<String>,
    pub(super) hs256_secret_env: Option<String>,
    pub(super) hs256_secret_file: Option<String>,
    #[serde(default)]
    pub(super) public_keys: Vec<String>,
    pub(super) jwks_file: Option<String>,
    pub(super) principal_claim: Option<String>,
    pub(super) groups_claim: Option<String>,
    pub(super) leeway_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBridge {
    pub(super) gather_ms: Option<u64>,
    pub(super) park_ms: Option<u64>,
    pub(super) session_idle_ms: Option<u64>,
    pub(super) max_sessions: Option<usize>,
    pub(super) max_parked: Option<usize>,
    pub(super) max_client_sessions: Option<usize>,
    pub(super) client_session_idle_ms: Option<u64>,
    pub(super) max_client_sessions_per_principal: Option<usize>,
    pub(super) max_sessions_per_principal: Option<usize>,
    pub(super) max_subscriptions_per_session: Option<usize>,
    pub(super) sse_path: Option<String>,
    pub(super) sse_session_max_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    pub(super) redis_url: Option<String>,
    pub(super) id: Option<String>,
    pub(super) advertise_url: Option<String>,
    pub(super) listen: Option<String>,
    pub(super) on_redis_error: Option<String>,
    pub(super) redis_timeout_ms: Option<u64>,
    pub(super) max_connections_per_source: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    #[serde(default)]
    pub(super) keys: Vec<String>,
    pub(super) key_env: Option<String>,
    pub(super) replica: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) max_connections: Option<usize>,
    pub(super) max_in_flight: Option<usize>,
    pub(super) max_header_bytes: Option<usize>,
    pub(super) max_body_bytes: Option<usize>,
    pub(super) max_response_bytes: Option<usize>,
    pub(super) max_sse_event_bytes: Option<usize>,
    pub(super) max_list_pages: Option<u32>,
    pub(super) max_list_items: Option<usize>,
    pub(super) max_json_depth: Option<usize>,
    pub(super) max_streams: Option<usize>,
    pub(super) max_streams_per_principal: Option<usize>,
    pub(super) max_resource_subscriptions: Option<usize>,
    pub(super) max_in_flight_per_principal: Option<usize>,
    pub(super) max_connections_per_source: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimeouts {
    pub(super) header_read_ms: Option<u64>,
    pub(super) request_ms: Option<u64>,
    pub(super) connect_ms: Option<u64>,
    pub(super) response_ms: Option<u64>,
    pub(super) refresh_ms: Option<u64>,
    pub(super) shutdown_ms: Option<u64>,
    pub(super) listen_retry_ms: Option<u64>,
    pub(super) stream_idle_ms: Option<u64>,
    pub(super) body_read_ms: Option<u64>,
    pub(super) idle_connection_ms: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    pub(super) name: toml::Spanned<String>,
    pub(super) url: Option<toml::Spanned<String>>,
    pub(super) urls: Option<Vec<String>>,
    pub(super) breaker_failures: Option<u32>,
    pub(super) breaker_open_ms: Option<u64>,
    pub(super) max_in_flight: Option<usize>,
    pub(super) max_in_flight_per_principal: Option<usize>,
    #[serde(default)]
    pub(super) era: Era,
    #[serde(default)]
    pub(super) transport: Transport,
    pub(super) command: Option<Vec<String>>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) inherit_env: Option<bool>,
    #[serde(default)]
    pub(super) inherit: Vec<String>,
    pub(super) idle_ms: Option<u64>,
    pub(super) cwd: Option<String>,
    pub(super) stderr: Option<String>,
    pub(super) stderr_max_bytes: Option<u64>,
    pub(super) max_processes: Option<usize>,
    pub(super) max_processes_per_principal: Option<usize>,
    pub(super) spare_processes: Option<usize>,
    pub(super) start_ms: Option<u64>,
    pub(super) user: Option<super::stdio::run_as::RawId>,
    pub(super) group: Option<super::stdio::run_as::RawId>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    pub(super) bearer_token_env: Option<String>,
    pub(super) cache_ttl_ms: Option<u64>,
    pub(super) cache_scope: Option<CacheScope>,
    pub(super) http2: Option<bool>,
    #[serde(default)]
    pub(super) required_scopes: Vec<String>,
}

/// A `[[quota]]` table as written.
#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQuota {
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) principal: Vec<String>,
    #[serde(default)]
    pub(super) group: Vec<String>,
    #[serde(default)]
    pub(super) upstream: Vec<String>,
    #[serde(default)]
    pub(super) tool: Vec<String>,
    pub(super) calls_per_window: Option<u32>,
    pub(super) window_ms: Option<u64>,
    pub(super) burst: Option<u32>,
}
