//! Configuration: TOML (or CLI flags) in, a validated [`Config`] out.
//!
//! Takes the text of a config file and the quick flags; gives domain types (durations, byte
//! bounds, upstream names checked against the prefix separator). Refuses an unknown key or a bad
//! value at load, naming the file, the line and what was expected. Secrets (upstream headers and
//! tokens) are redacted wherever the config is printed.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a config could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// How tool and prompt names are prefixed with their upstream's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PrefixMode {
    /// Prefix only when more than one upstream is configured.
    #[default]
    Auto,
    /// Always prefix.
    Always,
    /// Never prefix; a name served by two upstreams is reported as a collision.
    Never,
}

/// The protocol era of an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Era {
    /// Probe with `server/discover`.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// A stateless 2026-07-28 server.
    #[serde(rename = "2026-07-28")]
    Modern,
    /// A 2025-11-25 (handshake) server.
    #[serde(rename = "2025-11-25")]
    Legacy,
}

/// Raw file layout; every table refuses unknown keys.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    listen: Option<String>,
    path: Option<String>,
    #[serde(default)]
    allowed_origins: Vec<String>,
    prefix: Option<PrefixMode>,
    separator: Option<String>,
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    timeouts: RawTimeouts,
    #[serde(default)]
    upstream: Vec<RawUpstream>,
    #[serde(default)]
    bridge: RawBridge,
    #[serde(default)]
    state: RawState,
    #[serde(default)]
    auth: RawAuth,
    #[serde(default)]
    budget: RawBudget,
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    audit: RawAudit,
    #[serde(default)]
    metrics: RawMetrics,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    require_auth: Option<bool>,
}

/// `/metrics` and `/readyz`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct MetricsConfig {
    /// Whether `/metrics` and `/readyz` need a credential, like the MCP endpoint (default false;
    /// needs `[auth]`).
    pub require_auth: bool,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawAudit {
    enabled: Option<bool>,
    sink: Option<String>,
    capacity: Option<usize>,
}

/// The audit log.
#[derive(Debug, Clone, Serialize)]
pub struct AuditConfig {
    /// Whether records are written (default true).
    pub enabled: bool,
    /// `stderr` (default) or a file path (appended).
    pub sink: String,
    /// Records buffered before new ones are dropped and counted (default 8192).
    pub capacity: usize,
}

#[derive(Debug, Default, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawLimitsSet {
    sampling_per_window: Option<u32>,
    sampling_burst: Option<u32>,
    tokens_per_window: Option<u32>,
    window_ms: Option<u64>,
    max_rounds: Option<u32>,
    max_tokens_per_ask: Option<u64>,
    max_tokens_action: Option<MaxTokensAction>,
    max_parked_per_principal: Option<usize>,
    max_input_request_bytes: Option<usize>,
    max_input_response_bytes: Option<usize>,
    max_asks_per_round: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawBudget {
    #[serde(flatten)]
    global: RawLimitsSet,
    #[serde(default, rename = "override")]
    overrides: Vec<RawOverride>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    upstream: Option<String>,
    group: Option<String>,
    #[serde(flatten)]
    limits: RawLimitsSet,
}

/// What to do with a sampling ask whose `maxTokens` is over `max_tokens_per_ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MaxTokensAction {
    /// Refuse the ask.
    #[default]
    Deny,
    /// Lower `maxTokens` to the cap and let it go on.
    Clamp,
}

/// Limits for one principal's requests (globally, or for an upstream or a group).
#[derive(Debug, Clone, Serialize)]
pub struct BudgetLimits {
    /// Sampling asks per window (default 60).
    pub sampling_per_window: u32,
    /// Sampling asks allowed at once (default 20).
    pub sampling_burst: u32,
    /// Sum of `maxTokens` asked for per window (default 200000).
    pub tokens_per_window: u32,
    /// The window (default 60 s).
    #[serde(with = "ms", rename = "window_ms")]
    pub window: Duration,
    /// `input_required` rounds per original request (default 5).
    pub max_rounds: u32,
    /// `maxTokens` per sampling ask (default 8192).
    pub max_tokens_per_ask: u64,
    /// Deny or clamp an ask over `max_tokens_per_ask` (default deny).
    pub max_tokens_action: MaxTokensAction,
    /// Parked exchanges per principal (default 16).
    pub max_parked_per_principal: usize,
    /// Bytes of one input request sent to the client (default 256 KiB).
    pub max_input_request_bytes: usize,
    /// Bytes of one input response from the client (default 1 MiB).
    pub max_input_response_bytes: usize,
    /// Input requests (asks) in one round; an upstream asking more at once is refused (default 16).
    pub max_asks_per_round: usize,
}

impl Default for BudgetLimits {
    fn default() -> Self {
        BudgetLimits {
            sampling_per_window: 60,
            sampling_burst: 20,
            tokens_per_window: 200_000,
            window: Duration::from_secs(60),
            max_rounds: 5,
            max_tokens_per_ask: 8192,
            max_tokens_action: MaxTokensAction::Deny,
            max_parked_per_principal: 16,
            max_input_request_bytes: 256 << 10,
            max_input_response_bytes: 1 << 20,
            max_asks_per_round: 16,
        }
    }
}

impl BudgetLimits {
    fn merged(&self, r: &RawLimitsSet) -> BudgetLimits {
        BudgetLimits {
            sampling_per_window: r.sampling_per_window.unwrap_or(self.sampling_per_window),
            sampling_burst: r.sampling_burst.unwrap_or(self.sampling_burst),
            tokens_per_window: r.tokens_per_window.unwrap_or(self.tokens_per_window),
            window: r.window_ms.map(Duration::from_millis).unwrap_or(self.window),
            max_rounds: r.max_rounds.unwrap_or(self.max_rounds),
            max_tokens_per_ask: r.max_tokens_per_ask.unwrap_or(self.max_tokens_per_ask),
            max_tokens_action: r.max_tokens_action.unwrap_or(self.max_tokens_action),
            max_parked_per_principal: r.max_parked_per_principal.unwrap_or(self.max_parked_per_principal),
            max_input_request_bytes: r.max_input_request_bytes.unwrap_or(self.max_input_request_bytes),
            max_input_response_bytes: r.max_input_response_bytes.unwrap_or(self.max_input_response_bytes),
            max_asks_per_round: r.max_asks_per_round.unwrap_or(self.max_asks_per_round),
        }
    }
}

/// Limits for an upstream and/or a group.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetProfile {
    /// The upstream it applies to (any when absent).
    pub upstream: Option<String>,
    /// The group it applies to (any when absent).
    pub group: Option<String>,
    /// The limits.
    pub limits: BudgetLimits,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    required_scopes: Vec<String>,
    #[serde(default)]
    api_keys: Vec<ApiKeyConfig>,
    api_keys_env: Option<String>,
    jwt: Option<RawJwt>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    issuer: String,
    audience: Option<String>,
    hs256_secret_env: Option<String>,
    hs256_secret_file: Option<String>,
    #[serde(default)]
    public_keys: Vec<String>,
    jwks_file: Option<String>,
    principal_claim: Option<String>,
    groups_claim: Option<String>,
    leeway_ms: Option<u64>,
}

/// One API key: the SHA-256 (hex) of the key, never the key itself.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// Hex SHA-256 of the key (`sluice hash-key KEY` prints it).
    pub sha256: String,
    /// The principal the key authenticates.
    pub principal: String,
    /// Its groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Its scopes.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// JWT bearer settings.
#[derive(Debug, Clone, Serialize)]
pub struct JwtConfig {
    /// Required `iss`.
    pub issuer: String,
    /// Required `aud` (default: `auth.resource`).
    pub audience: Option<String>,
    /// Environment variable holding an HS256 secret.
    pub hs256_secret_env: Option<String>,
    /// File holding an HS256 secret.
    pub hs256_secret_file: Option<String>,
    /// PEM files of RS256 / ES256 public keys.
    pub public_keys: Vec<String>,
    /// A JWKS file.
    pub jwks_file: Option<String>,
    /// The claim naming the principal (default `sub`).
    pub principal_claim: String,
    /// The claim listing groups (default `groups`).
    pub groups_claim: String,
    /// Clock leeway for `exp` / `nbf` (default 30 s).
    pub leeway_ms: u64,
}

/// Authentication: API keys and/or JWT; neither means `none` (loopback only).
#[derive(Debug, Clone, Serialize, Default)]
pub struct AuthConfig {
    /// Sluice's own resource URL (the JWT audience, and RFC 9728 `resource`).
    pub resource: String,
    /// Authorization servers advertised in the resource metadata.
    pub authorization_servers: Vec<String>,
    /// Scopes every request needs.
    pub required_scopes: Vec<String>,
    /// Scopes per upstream (from each upstream's `required_scopes`).
    pub upstream_scopes: Vec<(String, Vec<String>)>,
    /// API keys (hashes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<ApiKeyConfig>,
    /// Environment variable with more keys.
    pub api_keys_env: Option<String>,
    /// JWT settings.
    pub jwt: Option<JwtConfig>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawBridge {
    gather_ms: Option<u64>,
    park_ms: Option<u64>,
    session_idle_ms: Option<u64>,
    max_sessions: Option<usize>,
    max_parked: Option<usize>,
    max_client_sessions: Option<usize>,
    client_session_idle_ms: Option<u64>,
    max_client_sessions_per_principal: Option<usize>,
    max_sessions_per_principal: Option<usize>,
    max_subscriptions_per_session: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    #[serde(default)]
    keys: Vec<String>,
    key_env: Option<String>,
    replica: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_connections: Option<usize>,
    max_in_flight: Option<usize>,
    max_header_bytes: Option<usize>,
    max_body_bytes: Option<usize>,
    max_response_bytes: Option<usize>,
    max_sse_event_bytes: Option<usize>,
    max_list_pages: Option<u32>,
    max_list_items: Option<usize>,
    max_json_depth: Option<usize>,
    max_streams: Option<usize>,
    max_streams_per_principal: Option<usize>,
    max_resource_subscriptions: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawTimeouts {
    header_read_ms: Option<u64>,
    request_ms: Option<u64>,
    connect_ms: Option<u64>,
    response_ms: Option<u64>,
    refresh_ms: Option<u64>,
    shutdown_ms: Option<u64>,
    listen_retry_ms: Option<u64>,
    stream_idle_ms: Option<u64>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawUpstream {
    name: toml::Spanned<String>,
    url: toml::Spanned<String>,
    #[serde(default)]
    era: Era,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    cache_ttl_ms: Option<u64>,
    cache_scope: Option<CacheScope>,
    #[serde(default)]
    required_scopes: Vec<String>,
}

/// A cache scope Sluice stamps on a legacy upstream's lists and reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Shareable across principals.
    Public,
    /// One authorization context only.
    #[default]
    Private,
}

/// Limits on sizes; every one has a default and can be set in `[limits]`.
#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// Connections held at once; past it new connections are closed at once (default 10000).
    pub max_connections: usize,
    /// Requests in progress at once; past it Sluice answers 503 with Retry-After (default 1024).
    pub max_in_flight: usize,
    /// Largest request head (431 past it, default 64 KiB).
    pub max_header_bytes: usize,
    /// Largest request body accepted from a client (413 past it). Default 4 MiB.
    pub max_body_bytes: usize,
    /// Largest upstream answer read (JSON body or one SSE event). Default 16 MiB.
    pub max_response_bytes: usize,
    /// Largest single SSE event read from an upstream. Default 4 MiB.
    pub max_sse_event_bytes: usize,
    /// Upstream list pages followed per list. Default 50.
    pub max_list_pages: u32,
    /// Items kept per upstream per list (the rest dropped with a warning). Default 10000.
    pub max_list_items: usize,
    /// Deepest nesting of arrays and objects in a client's request body (-32600 past it).
    /// Default 64, at most 128.
    pub max_json_depth: usize,
    /// SSE streams open to clients at once (listen and GET streams, streamed answers); past it
    /// 503 with Retry-After. Default 10000.
    pub max_streams: usize,
    /// The same per principal (429 with Retry-After past it). Default 100.
    pub max_streams_per_principal: usize,
    /// Resource URIs one listen or one 2025-11-25 session may subscribe to (-32602 past it).
    /// Default 256.
    pub max_resource_subscriptions: usize,
}

/// Every wait Sluice makes; each can be set in `[timeouts]` down to milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Timeouts {
    /// A client must send a request head within this (slowloris). Default 10 s.
    #[serde(with = "ms", rename = "header_read_ms")]
    pub header_read: Duration,
    /// Time from a request's arrival to its response head (504 past it). Default 120 s.
    #[serde(with = "ms", rename = "request_ms")]
    pub request: Duration,
    /// TCP connect to an upstream. Default 2 s.
    #[serde(with = "ms", rename = "connect_ms")]
    pub connect: Duration,
    /// Time for an upstream to answer a request (headers and each streamed message). Default 60 s.
    #[serde(with = "ms", rename = "response_ms")]
    pub response: Duration,
    /// Background refresh of upstream discovery and tables. Default 30 s.
    #[serde(with = "ms", rename = "refresh_ms")]
    pub refresh: Duration,
    /// Graceful shutdown deadline for in-flight requests. Default 10 s.
    #[serde(with = "ms", rename = "shutdown_ms")]
    pub shutdown: Duration,
    /// Pause before re-opening an upstream listen stream that ended. Default 1 s.
    #[serde(with = "ms", rename = "listen_retry_ms")]
    pub listen_retry: Duration,
    /// An upstream listen or GET stream that sends nothing (not even a keep-alive) this long is
    /// closed and reopened. Default 5 min.
    #[serde(with = "ms", rename = "stream_idle_ms")]
    pub stream_idle: Duration,
}

mod ms {
    pub(super) fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }
}

/// One upstream MCP server.
#[derive(Clone, Serialize)]
pub struct UpstreamConfig {
    /// Its name: the prefix of its tools and prompts, and what errors and logs call it.
    pub name: String,
    /// Its MCP endpoint URL (`http://`). Printed with credentials in it redacted.
    #[serde(serialize_with = "redact_url_ser")]
    pub url: String,
    /// Its era, or `auto` to probe.
    pub era: Era,
    /// Static headers sent with every upstream request (credentials for that upstream).
    #[serde(serialize_with = "redact_map")]
    pub headers: Vec<(String, String)>,
    /// Environment variable holding a bearer token for this upstream.
    pub bearer_token_env: Option<String>,
    /// `ttlMs` stamped on a legacy upstream's lists and reads (default 0).
    pub cache_ttl_ms: u64,
    /// `cacheScope` stamped on a legacy upstream's lists and reads (default private).
    pub cache_scope: CacheScope,
}

impl std::fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConfig")
            .field("name", &self.name)
            .field("url", &redact_url(&self.url))
            .field("era", &self.era)
            .field("headers", &self.headers.iter().map(|(k, _)| (k, "<redacted>")).collect::<Vec<_>>())
            .field("bearer_token_env", &self.bearer_token_env)
            .finish()
    }
}

/// `url` with its userinfo and every query value replaced by `redacted` (still a valid URL, so
/// a printed config loads again).
pub fn redact_url(url: &str) -> String {
    let (head, frag) = match url.split_once('#') {
        Some((h, f)) => (h, Some(f)),
        None => (url, None),
    };
    let (head, query) = match head.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (head, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://redacted@{host}{path}"),
                None => head.to_owned(),
            }
        }
        None => head.to_owned(),
    };
    if let Some(q) = query {
        let pairs: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) => format!("{k}=redacted"),
                None => kv.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    if let Some(f) = frag {
        out.push('#');
        out.push_str(f);
    }
    out
}

fn redact_url_ser<S: serde::Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url(url))
}

fn redact_map<S: serde::Serializer>(h: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(h.len()))?;
    for (k, _) in h {
        m.serialize_entry(k, "<redacted>")?;
    }
    m.end()
}

/// The validated configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Address to listen on (default `127.0.0.1:8080`, loopback).
    pub listen: SocketAddr,
    /// The MCP endpoint path (default `/mcp`).
    pub path: String,
    /// Extra allowed `Origin` values (scheme://host[:port]) besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// When names are prefixed.
    pub prefix: PrefixMode,
    /// The prefix separator (default `__`).
    pub separator: String,
    /// Size limits.
    pub limits: Limits,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Bridge A (legacy upstreams) settings.
    pub bridge: Bridge,
    /// Sealing keys and this replica's id.
    pub state: StateConfig,
    /// Authentication.
    pub auth: AuthConfig,
    /// Global budget limits.
    pub budget: BudgetLimits,
    /// Budget limits per upstream and/or group (most specific wins).
    pub budget_overrides: Vec<BudgetProfile>,
    /// Policy files, in order (their rules are concatenated; first match wins).
    pub policies: Vec<String>,
    /// The audit log.
    pub audit: AuditConfig,
    /// `/metrics` and `/readyz`.
    pub metrics: MetricsConfig,
    /// The upstreams, in configured order.
    #[serde(rename = "upstream")]
    pub upstreams: Vec<UpstreamConfig>,
}

/// Bridge A: how legacy upstream sessions and parked exchanges are bounded.
#[derive(Debug, Clone, Serialize)]
pub struct Bridge {
    /// After a first ask, how long to wait for more before answering (default 20 ms, at most 200).
    #[serde(with = "ms", rename = "gather_ms")]
    pub gather: Duration,
    /// How long a parked exchange waits for the client's retry (default 60 s).
    #[serde(with = "ms", rename = "park_ms")]
    pub park: Duration,
    /// Idle legacy sessions are ended (DELETE) after this (default 5 min).
    #[serde(with = "ms", rename = "session_idle_ms")]
    pub session_idle: Duration,
    /// Upper bound on legacy upstream sessions held (default 1024).
    pub max_sessions: usize,
    /// Upper bound on parked exchanges (default: a quarter of the file-descriptor limit).
    pub max_parked: usize,
    /// Sessions of 2025-11-25 clients held at once; the least recently used idle one is
    /// evicted first (default 1000).
    pub max_client_sessions: usize,
    /// A 2025-11-25 client's session ends after this long unused (default 30 min).
    #[serde(with = "ms", rename = "client_session_idle_ms")]
    pub client_session_idle: Duration,
    /// Sessions of 2025-11-25 clients one principal holds; its own least recently used goes
    /// first (default 16).
    pub max_client_sessions_per_principal: usize,
    /// Legacy upstream sessions one principal holds (default 32).
    pub max_sessions_per_principal: usize,
    /// Resource URIs one 2025-11-25 client session may subscribe to (default 256).
    pub max_subscriptions_per_session: usize,
}

/// Sealing keys for `requestState`.
#[derive(Clone, Serialize)]
pub struct StateConfig {
    /// `ID:BASE64` secrets; the first seals, all open. Empty: a random key (one replica only).
    #[serde(serialize_with = "redact_list")]
    pub keys: Vec<String>,
    /// Environment variable with more `ID:BASE64` secrets, comma-separated.
    pub key_env: Option<String>,
    /// This replica's id, written into sealed state (default `local`).
    pub replica: String,
}

impl std::fmt::Debug for StateConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateConfig")
            .field("keys", &self.keys.len())
            .field("key_env", &self.key_env)
            .field("replica", &self.replica)
            .finish()
    }
}

fn redact_list<S: serde::Serializer>(v: &[String], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut q = s.serialize_seq(Some(v.len()))?;
    for k in v {
        q.serialize_element(&format!("{}:<redacted>", k.split(':').next().unwrap_or("?")))?;
    }
    q.end()
}

/// Quick flags that override or extend a config file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--listen ADDR`.
    pub listen: Option<String>,
    /// `--upstream NAME=URL`, repeatable.
    pub upstreams: Vec<String>,
    /// `--no-prefix`.
    pub no_prefix: bool,
    /// `--policy FILE`, repeatable: policy files added after the config's.
    pub policies: Vec<String>,
}

impl Config {
    /// Loads a config file (when given) and applies the quick flags.
    pub fn load(path: Option<&Path>, over: &Overrides) -> Result<Config, ConfigError> {
        let (text, origin) = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| ConfigError(format!("{}: cannot read config: {e}", p.display())))?;
                (text, p.display().to_string())
            }
            None => (String::new(), "<flags>".to_owned()),
        };
        Config::from_toml(&text, &origin, over)
    }

    /// Parses and validates config text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str, over: &Overrides) -> Result<Config, ConfigError> {
        let mut raw: RawConfig = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(0);
            ConfigError(format!("{origin}:{line}: {}", e.message()))
        })?;
        for spec in &over.upstreams {
            let (name, url) = spec.split_once('=').ok_or_else(|| {
                ConfigError(format!("--upstream {spec:?}: expected NAME=URL, e.g. --upstream weather=http://127.0.0.1:9000/mcp"))
            })?;
            raw.upstream.push(RawUpstream {
                name: toml::Spanned::new(0..0, name.to_owned()),
                url: toml::Spanned::new(0..0, url.to_owned()),
                era: Era::Auto,
                headers: Default::default(),
                bearer_token_env: None,
                cache_ttl_ms: None,
                cache_scope: None,
                required_scopes: Vec::new(),
            });
        }
        let at = |span: std::ops::Range<usize>| -> String {
            if span.end == 0 {
                "--upstream".to_owned()
            } else {
                format!("{origin}:{}", line_of(text, span.start))
            }
        };
        let listen_text = over.listen.clone().or(raw.listen).unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen: SocketAddr = listen_text
            .parse()
            .map_err(|_| ConfigError(format!("{origin}: listen = {listen_text:?}: expected IP:PORT, e.g. 127.0.0.1:8080")))?;
        let separator = raw.separator.unwrap_or_else(|| "__".into());
        if separator.is_empty() || !separator.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)) {
            return Err(ConfigError(format!("{origin}: separator = {separator:?}: expected one or more of [A-Za-z0-9_.-]")));
        }
        let path = raw.path.unwrap_or_else(|| "/mcp".into());
        if !path.starts_with('/') {
            return Err(ConfigError(format!("{origin}: path = {path:?}: expected an absolute path such as \"/mcp\"")));
        }
        let mut upstreams = Vec::new();
        let mut upstream_scopes = Vec::new();
        for u in raw.upstream {
            let name = u.name.get_ref().clone();
            let name_for_scopes = name.clone();
            let ok_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            if !ok_name {
                return Err(ConfigError(format!("{}: upstream name {name:?}: expected one or more of [A-Za-z0-9_.-]", at(u.name.span()))));
            }
            if name.contains(&separator) {
                return Err(ConfigError(format!(
                    "{}: upstream name {name:?} contains the prefix separator {separator:?}: rename it or set another `separator`",
                    at(u.name.span())
                )));
            }
            if upstreams.iter().any(|x: &UpstreamConfig| x.name == name) {
                return Err(ConfigError(format!("{}: upstream name {name:?} is used twice", at(u.name.span()))));
            }
            let url = u.url.get_ref().clone();
            if !url.starts_with("http://") || url.parse::<http::Uri>().is_err() {
                let shown = redact_url(&url);
                return Err(ConfigError(format!("{}: upstream {name:?} url {shown:?}: expected an http:// URL", at(u.url.span()))));
            }
            upstreams.push(UpstreamConfig {
                name,
                url,
                era: u.era,
                headers: u.headers.into_iter().collect(),
                bearer_token_env: u.bearer_token_env,
                cache_ttl_ms: u.cache_ttl_ms.unwrap_or(0),
                cache_scope: u.cache_scope.unwrap_or_default(),
            });
            if !u.required_scopes.is_empty() {
                upstream_scopes.push((name_for_scopes, u.required_scopes));
            }
        }
        let prefix = if over.no_prefix { PrefixMode::Never } else { raw.prefix.unwrap_or_default() };
        let budget = BudgetLimits::default().merged(&raw.budget.global);
        let budget_overrides: Vec<BudgetProfile> = raw
            .budget
            .overrides
            .iter()
            .map(|o| BudgetProfile { upstream: o.upstream.clone(), group: o.group.clone(), limits: budget.merged(&o.limits) })
            .collect();
        if let Some(o) = budget_overrides.iter().find(|o| o.upstream.is_none() && o.group.is_none()) {
            let _ = o;
            return Err(ConfigError(format!("{origin}: a [[budget.override]] needs an upstream or a group")));
        }
        let ra = raw.auth;
        let jwt = ra.jwt.map(|j| JwtConfig {
            issuer: j.issuer,
            audience: j.audience,
            hs256_secret_env: j.hs256_secret_env,
            hs256_secret_file: j.hs256_secret_file,
            public_keys: j.public_keys,
            jwks_file: j.jwks_file,
            principal_claim: j.principal_claim.unwrap_or_else(|| "sub".into()),
            groups_claim: j.groups_claim.unwrap_or_else(|| "groups".into()),
            leeway_ms: j.leeway_ms.unwrap_or(30_000),
        });
        let auth = AuthConfig {
            resource: ra.resource.unwrap_or_else(|| format!("http://{listen}{path}")),
            authorization_servers: ra.authorization_servers,
            required_scopes: ra.required_scopes,
            upstream_scopes,
            api_keys: ra.api_keys,
            api_keys_env: ra.api_keys_env,
            jwt,
        };
        let no_auth = auth.api_keys.is_empty() && auth.api_keys_env.is_none() && auth.jwt.is_none();
        if no_auth && !listen.ip().is_loopback() {
            return Err(ConfigError(format!(
                "{origin}: listen = {listen} is not loopback but [auth] configures no API keys and no JWT: anyone could call through; add [auth] or listen on 127.0.0.1"
            )));
        }
        let ms = |v: Option<u64>, d: u64| Duration::from_millis(v.unwrap_or(d));
        let t = raw.timeouts;
        let l = raw.limits;
        let b = raw.bridge;
        let gather = b.gather_ms.unwrap_or(20);
        if gather > 200 {
            return Err(ConfigError(format!("{origin}: bridge.gather_ms = {gather}: expected at most 200")));
        }
        let max_json_depth = l.max_json_depth.unwrap_or(64);
        if !(8..=128).contains(&max_json_depth) {
            return Err(ConfigError(format!("{origin}: limits.max_json_depth = {max_json_depth}: expected 8 to 128")));
        }
        let require_auth = raw.metrics.require_auth.unwrap_or(false);
        if require_auth && no_auth {
            return Err(ConfigError(format!(
                "{origin}: metrics.require_auth = true but [auth] configures no API keys and no JWT: add [auth] or drop require_auth"
            )));
        }
        for k in &raw.state.keys {
            crate::state::parse_key(k).map_err(|e| ConfigError(format!("{origin}: state.keys: {e}")))?;
        }
        Ok(Config {
            listen,
            path,
            allowed_origins: raw.allowed_origins,
            prefix,
            separator,
            limits: Limits {
                max_connections: l.max_connections.unwrap_or(10_000),
                max_in_flight: l.max_in_flight.unwrap_or(1024),
                max_header_bytes: l.max_header_bytes.unwrap_or(64 << 10).max(8192),
                max_body_bytes: l.max_body_bytes.unwrap_or(4 << 20),
                max_response_bytes: l.max_response_bytes.unwrap_or(16 << 20),
                max_sse_event_bytes: l.max_sse_event_bytes.unwrap_or(4 << 20),
                max_list_pages: l.max_list_pages.unwrap_or(50),
                max_list_items: l.max_list_items.unwrap_or(10_000),
                max_json_depth,
                max_streams: l.max_streams.unwrap_or(10_000).max(1),
                max_streams_per_principal: l.max_streams_per_principal.unwrap_or(100).max(1),
                max_resource_subscriptions: l.max_resource_subscriptions.unwrap_or(256),
            },
            timeouts: Timeouts {
                header_read: ms(t.header_read_ms, 10_000),
                request: ms(t.request_ms, 120_000),
                connect: ms(t.connect_ms, 2_000),
                response: ms(t.response_ms, 60_000),
                refresh: ms(t.refresh_ms, 30_000),
                shutdown: ms(t.shutdown_ms, 10_000),
                listen_retry: ms(t.listen_retry_ms, 1_000),
                stream_idle: ms(t.stream_idle_ms, 300_000),
            },
            bridge: Bridge {
                gather: Duration::from_millis(gather),
                park: ms(b.park_ms, 60_000),
                session_idle: ms(b.session_idle_ms, 300_000),
                max_sessions: b.max_sessions.unwrap_or(1024),
                max_parked: b.max_parked.unwrap_or_else(default_max_parked),
                max_client_sessions: b.max_client_sessions.unwrap_or(1000),
                client_session_idle: ms(b.client_session_idle_ms, 30 * 60_000),
                max_client_sessions_per_principal: b.max_client_sessions_per_principal.unwrap_or(16).max(1),
                max_sessions_per_principal: b.max_sessions_per_principal.unwrap_or(32).max(1),
                max_subscriptions_per_session: b.max_subscriptions_per_session.unwrap_or(256),
            },
            state: StateConfig {
                keys: raw.state.keys,
                key_env: raw.state.key_env,
                replica: raw.state.replica.unwrap_or_else(|| "local".into()),
            },
            auth,
            budget,
            budget_overrides,
            audit: AuditConfig {
                enabled: raw.audit.enabled.unwrap_or(true),
                sink: raw.audit.sink.clone().unwrap_or_else(|| "stderr".into()),
                capacity: raw.audit.capacity.unwrap_or(8192),
            },
            metrics: MetricsConfig { require_auth },
            policies: raw.policies.into_iter().chain(over.policies.iter().cloned()).collect(),
            upstreams,
        })
    }

    /// Whether tool and prompt names carry their upstream's prefix.
    pub fn prefixed(&self) -> bool {
        match self.prefix {
            PrefixMode::Always => true,
            PrefixMode::Never => false,
            PrefixMode::Auto => self.upstreams.len() > 1,
        }
    }

    /// The effective config as TOML with secrets redacted (for `sluice check`); without
    /// secrets it loads back unchanged.
    pub fn redacted(&self) -> String {
        let mut v = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => return "# cannot print the config".into(),
        };
        // Derived views go back where the file writes them.
        if let Some(auth) = v.get_mut("auth").and_then(|a| a.as_object_mut()) {
            auth.remove("upstream_scopes");
        }
        if let Some(ups) = v.get_mut("upstream").and_then(|u| u.as_array_mut()) {
            for u in ups {
                let name = u.get("name").and_then(|n| n.as_str()).unwrap_or("").to_owned();
                if let Some((_, scopes)) = self.auth.upstream_scopes.iter().find(|(n, _)| *n == name) {
                    u["required_scopes"] = serde_json::json!(scopes);
                }
            }
        }
        let overrides: Vec<serde_json::Value> = self
            .budget_overrides
            .iter()
            .filter_map(|o| {
                let mut m = serde_json::to_value(&o.limits).ok()?;
                if let Some(u) = &o.upstream {
                    m["upstream"] = u.clone().into();
                }
                if let Some(g) = &o.group {
                    m["group"] = g.clone().into();
                }
                Some(m)
            })
            .collect();
        v.remove("budget_overrides");
        if let (Some(b), false) = (v.get_mut("budget").and_then(|b| b.as_object_mut()), overrides.is_empty()) {
            b.insert("override".into(), overrides.into());
        }
        let mut v = serde_json::Value::Object(v);
        strip_nulls(&mut v);
        toml::to_string(&v).unwrap_or_else(|e| format!("# cannot print the config: {e}"))
    }
}

/// TOML has no null: absent options are left out.
fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// A parked legacy exchange holds its session's upstream connections (the call's POST stream
/// and the GET stream): by default allow a quarter of the soft file-descriptor limit.
fn default_max_parked() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits").ok().and_then(|t| {
        t.lines().find(|l| l.starts_with("Max open files")).and_then(|l| l.split_whitespace().nth(3)).and_then(|v| v.parse::<usize>().ok())
    });
    (soft.unwrap_or(1024) / 4).clamp(64, 65_536)
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml(text, "sluice.toml", &Overrides::default())
    }

    #[test]
    fn an_unknown_key_is_refused_with_file_and_line() {
        let err = load("listen = \"127.0.0.1:1\"\n\n[limits]\nmax_bodybytes = 3\n").unwrap_err().0;
        assert!(err.starts_with("sluice.toml:4:"), "{err}");
        assert!(err.contains("max_bodybytes"), "{err}");
    }

    #[test]
    fn an_upstream_name_holding_the_separator_is_refused_with_its_line() {
        let err = load("[[upstream]]\nname = \"a__b\"\nurl = \"http://127.0.0.1:1/mcp\"\n").unwrap_err().0;
        assert!(err.starts_with("sluice.toml:2:") && err.contains("separator"), "{err}");
    }

    #[test]
    fn defaults_listen_on_loopback_and_flags_add_upstreams() {
        let over = Overrides { upstreams: vec!["a=http://127.0.0.1:9/mcp".into()], ..Default::default() };
        let c = Config::from_toml("", "x", &over).unwrap();
        assert!(c.listen.ip().is_loopback());
        assert_eq!(c.upstreams[0].name, "a");
        assert!(!c.prefixed());
        assert_eq!(c.limits.max_body_bytes, 4 << 20);
    }

    #[test]
    fn secrets_are_redacted_when_printed() {
        let c = load("[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer s3cret\" }\n")
            .unwrap();
        assert!(!c.redacted().contains("s3cret"));
        assert!(!format!("{c:?}").contains("s3cret"));
        let c = load("[[upstream]]\nname = \"a\"\nurl = \"http://user:pa55word@127.0.0.1:1/mcp?token=t0ken&x=1#f\"\n").unwrap();
        let printed = c.redacted();
        for secret in ["pa55word", "user:", "t0ken"] {
            assert!(!printed.contains(secret) && !format!("{c:?}").contains(secret), "{secret} in {printed}");
        }
        assert!(printed.contains("http://redacted@127.0.0.1:1/mcp?token=redacted&x=redacted#f"), "{printed}");
        Config::from_toml(&printed, "printed", &Overrides::default()).expect("the printed config loads again");
        let e = load("[[upstream]]\nname = \"a\"\nurl = \"https://u:pa55word@h/mcp\"\n").unwrap_err().0;
        assert!(!e.contains("pa55word"), "{e}");
    }
}

#[cfg(test)]
mod roundtrip {
    use super::*;

    #[test]
    fn the_printed_effective_config_loads_back_unchanged() {
        let c = Config::from_toml(
            "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\n[timeouts]\nconnect_ms = 7\n",
            "x",
            &Overrides::default(),
        )
        .unwrap();
        let printed = c.redacted();
        let again = Config::from_toml(&printed, "printed", &Overrides::default()).unwrap();
        assert_eq!(again.redacted(), printed);
        assert_eq!(again.timeouts.connect, Duration::from_millis(7));
    }
}

#[cfg(test)]
mod sections;
