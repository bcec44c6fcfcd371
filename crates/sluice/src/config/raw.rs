//! The file as written: one serde struct per table, each refusing unknown keys, each key
//! documented where it is declared. The documentation is the configuration reference: the types
//! derive a JSON Schema ([`schema`]) whose descriptions `docs/configuration-reference.md` is
//! generated from, and a test fails when a key has none.
//!
//! Takes nothing but what `toml` hands it; gives the values as they were written (absent ones as
//! `None` or empty); refuses an unknown key or a value of the wrong type (serde names the key, and
//! the loader adds the file and line). Defaults and rules live in each section's conversion.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PrefixMode;

pub(super) use super::raw_governance::{RawAuth, RawBudget, RawJwt, RawLimitsSet, RawQuota};
pub(super) use super::raw_upstream::RawUpstream;

/// The JSON Schema of a config file, with every key's documentation.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap_or_default()
}

/// A Sluice config file (TOML). Every key is optional but an upstream's `name` and its `url`
/// (or `command`); an unknown key or a bad value is refused at load with its file and line.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    /// Address to listen on (default `127.0.0.1:8080`). Not loopback: `[auth]` is required.
    pub(super) listen: Option<String>,
    /// The MCP endpoint's path (default `/mcp`).
    pub(super) path: Option<String>,
    /// Browser origins allowed besides the listener's own (`Origin` checked on every request).
    #[serde(default)]
    pub(super) allowed_origins: Vec<String>,
    /// When tool and prompt names get their upstream's name as a prefix (default `auto`).
    pub(super) prefix: Option<PrefixMode>,
    /// Between prefix and name (default `__`; `[A-Za-z0-9_.-]+`; an upstream name containing
    /// it is refused).
    pub(super) separator: Option<String>,
    /// Bounds on what clients and upstreams may send and hold.
    #[serde(default)]
    pub(super) limits: RawLimits,
    /// Deadlines, all in milliseconds.
    #[serde(default)]
    pub(super) timeouts: RawTimeouts,
    /// The MCP servers Sluice fronts, in the order their lists are federated.
    #[serde(default)]
    pub(super) upstream: Vec<RawUpstream>,
    /// Bridge A (2025-11-25 servers' sessions and parked calls) and bridge B (2025-11-25
    /// clients' sessions).
    #[serde(default)]
    pub(super) bridge: RawBridge,
    /// The keys that seal `requestState`, and this replica's id.
    #[serde(default)]
    pub(super) state: RawState,
    /// How callers prove who they are: API keys, JWT, OAuth resource metadata. Absent: only a
    /// loopback listener, everyone the principal `local`.
    #[serde(default)]
    pub(super) auth: RawAuth,
    /// Per-principal budgets for sampling and rounds, with overrides per upstream or group.
    #[serde(default)]
    pub(super) budget: RawBudget,
    /// Call quotas per principal or group, per upstream and tool.
    #[serde(default)]
    pub(super) quota: Vec<RawQuota>,
    /// The breaker for identical tool calls (on by default: 30 per 60 s per principal).
    #[serde(default)]
    pub(super) loop_breaker: super::loops::RawLoopBreaker,
    /// Calls held for an operator's approval (`approver = "operator"` rules).
    #[serde(default)]
    pub(super) approvals: super::approvals::RawApprovals,
    /// Policy files: approval rules and visibility (`hide`/`show`), read in order.
    #[serde(default)]
    pub(super) policies: Vec<String>,
    /// The content-free audit log: one JSON record per request.
    #[serde(default)]
    pub(super) audit: RawAudit,
    /// `/metrics` and `/readyz`.
    #[serde(default)]
    pub(super) metrics: RawMetrics,
    /// The operator plane: admin API, event stream and console on a listener of their own.
    /// Absent: off.
    pub(super) admin: Option<super::admin::RawAdmin>,
    /// OpenTelemetry traces over OTLP/HTTP. Absent: no spans at all.
    pub(super) telemetry: Option<RawTelemetry>,
    /// Replicas that behave as one, through Redis. Absent: one process, its state in memory.
    pub(super) cluster: Option<RawCluster>,
    /// Tool pinning: a tool whose definition changed is hidden until an operator accepts it.
    pub(super) pins: Option<super::pins::RawPins>,
}

/// `[telemetry]`: traces.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    /// The OTLP/HTTP collector (`/v1/traces` is added to a URL without a path).
    pub(super) otlp_endpoint: Option<String>,
    /// `service.name` of the spans (default `sluice`).
    pub(super) service_name: Option<String>,
    /// Share of new traces kept, 0 to 1 (default 1); a caller's sampled flag is followed.
    pub(super) sampling_ratio: Option<f64>,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetrics {
    /// `/metrics` and `/readyz` need a credential like the endpoint (needs `[auth]`; default
    /// false).
    pub(super) require_auth: Option<bool>,
    /// `/readyz` is 503 while fewer upstreams are healthy (default 1 with any upstream; 0: ready
    /// once every upstream was probed; at most their number).
    pub(super) min_healthy_upstreams: Option<usize>,
}

/// `[audit]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAudit {
    /// Write one record per request (default true).
    pub(super) enabled: Option<bool>,
    /// `stderr` (default) or a file path, appended to.
    pub(super) sink: Option<String>,
    /// Records buffered (default 8192); past it new records are dropped and counted.
    pub(super) capacity: Option<usize>,
}

/// `[bridge]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBridge {
    /// After a 2025-11-25 server's first ask, how long to wait for more before answering
    /// the round (default 20, at most 200).
    pub(super) gather_ms: Option<u64>,
    /// How long a round (or an approval round) waits for the client's retry (default 60000).
    pub(super) park_ms: Option<u64>,
    /// An idle 2025-11-25 upstream session is ended with DELETE after this (default 300000).
    pub(super) session_idle_ms: Option<u64>,
    /// 2025-11-25 upstream sessions held in all (default 1024).
    pub(super) max_sessions: Option<usize>,
    /// Parked exchanges in all (default a quarter of the open-file limit, within 64..65536).
    pub(super) max_parked: Option<usize>,
    /// 2025-11-25 client sessions held; the least recently used goes first (default 1000).
    pub(super) max_client_sessions: Option<usize>,
    /// A 2025-11-25 client session unused this long expires (default 1800000).
    pub(super) client_session_idle_ms: Option<u64>,
    /// One principal's 2025-11-25 client sessions; its own least recently used goes first
    /// (default 16).
    pub(super) max_client_sessions_per_principal: Option<usize>,
    /// One principal's 2025-11-25 upstream sessions (default 32).
    pub(super) max_sessions_per_principal: Option<usize>,
    /// Resource URIs one 2025-11-25 client session may subscribe to (default 256).
    pub(super) max_subscriptions_per_session: Option<usize>,
    /// The path of the 2024-11-05 HTTP+SSE client transport (default `/sse`).
    pub(super) sse_path: Option<String>,
    /// A 2024-11-05 SSE session ends this long after its GET, stream open or not (default
    /// 86400000, at least 1).
    pub(super) sse_session_max_ms: Option<u64>,
}

/// `[cluster]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCluster {
    /// Redis (`redis://host:port/db` or `redis+unix:///path`).
    pub(super) redis_url: Option<String>,
    /// This replica's id, `[A-Za-z0-9._-]{1,64}`; `${VAR}` reads the environment.
    pub(super) id: Option<String>,
    /// `http://host:port` where the other replicas reach the internal listener (default its
    /// bound address, loopback only).
    pub(super) advertise_url: Option<String>,
    /// The internal listener, where other replicas forward continuations.
    pub(super) listen: Option<String>,
    /// `closed` (default: refuse what needs Redis while it is down) or `local` (fall back to
    /// this replica's own counts).
    pub(super) on_redis_error: Option<String>,
    /// The longest one Redis command may take before Redis counts as down (default 500).
    pub(super) redis_timeout_ms: Option<u64>,
    /// Internal listener connections from one source (default a quarter of
    /// `limits.max_connections`, all of them when `listen` is loopback).
    pub(super) max_connections_per_source: Option<usize>,
}

/// `[state]`.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    /// `ID:BASE64` secrets (32 bytes or more); the first seals, all open (rotation). None: a
    /// random key (one replica only).
    #[serde(default)]
    pub(super) keys: Vec<String>,
    /// Environment variable holding more `ID:BASE64` secrets, comma-separated.
    pub(super) key_env: Option<String>,
    /// This replica's id, written into sealed state (default `local`; `cluster.id` under
    /// `[cluster]`).
    pub(super) replica: Option<String>,
}

/// `[limits]`: what each one answers past it is in the hardening bounds table.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    /// Client connections held at once, 1 to 10^9 (default 10000); past it a new one takes the
    /// place of an idle one that served no authenticated request, else it is closed.
    pub(super) max_connections: Option<usize>,
    /// Whole MCP requests in progress, 1 to 10^9 (default 1024); past it 503 `-31020`.
    pub(super) max_in_flight: Option<usize>,
    /// A request's head (431 past it; default 65536, at least 8192).
    pub(super) max_header_bytes: Option<usize>,
    /// A client's request body (413 past it; default 4194304).
    pub(super) max_body_bytes: Option<usize>,
    /// One upstream JSON answer (default 16777216).
    pub(super) max_response_bytes: Option<usize>,
    /// One upstream SSE event, and any one line of an SSE stream (default 4194304).
    pub(super) max_sse_event_bytes: Option<usize>,
    /// Upstream list pages followed per list (default 50).
    pub(super) max_list_pages: Option<u32>,
    /// Items kept per upstream per list, the rest dropped with a warning (default 10000).
    pub(super) max_list_items: Option<usize>,
    /// Nesting of a client's body, 8 to 128 (`-32600` past it; default 64).
    pub(super) max_json_depth: Option<usize>,
    /// SSE streams open to clients (503 past it; default 10000).
    pub(super) max_streams: Option<usize>,
    /// One principal's SSE streams (429 `-31018` past it; default 100).
    pub(super) max_streams_per_principal: Option<usize>,
    /// URIs one listen may name (`-32602` past it; default 256).
    pub(super) max_resource_subscriptions: Option<usize>,
    /// One principal's share of `max_in_flight`, its bodies being read included (default a
    /// quarter of it, all of it without `[auth]`).
    pub(super) max_in_flight_per_principal: Option<usize>,
    /// Connections from one source, an IPv4 address or an IPv6 /64 (default a sixty-fourth of
    /// `max_connections`, at least 8, all of them on a loopback listener).
    pub(super) max_connections_per_source: Option<usize>,
}

/// `[timeouts]`, all in milliseconds.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimeouts {
    /// A client's request head must arrive within this (default 10000).
    pub(super) header_read_ms: Option<u64>,
    /// Arrival to response head (504 past it; default 120000).
    pub(super) request_ms: Option<u64>,
    /// TCP connect to an upstream (default 2000).
    pub(super) connect_ms: Option<u64>,
    /// An upstream's answer: its head, then each streamed message (default 60000).
    pub(super) response_ms: Option<u64>,
    /// Background re-probe and table refresh (default 30000).
    pub(super) refresh_ms: Option<u64>,
    /// Graceful shutdown deadline (default 10000).
    pub(super) shutdown_ms: Option<u64>,
    /// Pause before re-opening an upstream listen stream (default 1000).
    pub(super) listen_retry_ms: Option<u64>,
    /// An upstream listen or GET stream silent this long is closed and reopened (default
    /// 300000).
    pub(super) stream_idle_ms: Option<u64>,
    /// A request's body must arrive whole within this of its head (408 past it; default
    /// 30000).
    pub(super) body_read_ms: Option<u64>,
    /// A client connection with no request in progress since its last one ended is closed
    /// (default 60000).
    pub(super) idle_connection_ms: Option<u64>,
}
