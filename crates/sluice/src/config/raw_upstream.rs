//! An `[[upstream]]` table as written, each key documented where it is declared (the
//! configuration reference is generated from these comments: see `raw.rs`).
//!
//! Takes nothing but what `toml` hands it; gives the values as written, the name and URL with
//! where they stand in the file; refuses an unknown key or a value of the wrong type. Defaults
//! and rules live in `upstream.rs`, `resilience.rs` and `stdio.rs`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CacheScope, Era, Transport};

/// `[[upstream]]`: one MCP server, over HTTP (`url`, `urls`) or started by Sluice (`command`).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawUpstream {
    /// Required, `[A-Za-z0-9_.-]+`: the prefix of its names, and what errors and logs call it.
    #[schemars(with = "String")]
    pub(super) name: toml::Spanned<String>,
    /// Its MCP endpoint (`http://` or `https://`); for `transport = "sse"`, its SSE stream.
    #[schemars(with = "Option<String>")]
    pub(super) url: Option<toml::Spanned<String>>,
    /// Instead of `url`: replicas of one server, each behind a breaker.
    pub(super) urls: Option<Vec<String>>,
    /// Consecutive failures of one URL that open its breaker (default 5).
    pub(super) breaker_failures: Option<u32>,
    /// How long an open breaker leaves its URL out before one trial request (default 10000).
    pub(super) breaker_open_ms: Option<u64>,
    /// Requests to this upstream at once; past it 503 with `Retry-After` (default none).
    pub(super) max_in_flight: Option<usize>,
    /// One principal's share of `max_in_flight` (default a quarter of it, all of it without
    /// `[auth]`).
    pub(super) max_in_flight_per_principal: Option<usize>,
    /// Its protocol era (default `auto`: probed with `server/discover`).
    #[serde(default)]
    pub(super) era: Era,
    /// How it is spoken to over HTTP (default `auto`).
    #[serde(default)]
    pub(super) transport: Transport,
    /// A stdio server: the program and its arguments, started with no shell.
    pub(super) command: Option<Vec<String>>,
    /// Variables set for a stdio server (redacted by `sluice check`).
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    /// Pass Sluice's proxies, CAs and package-manager settings, never its secrets (default
    /// true; false: only `PATH`, `HOME`, `USER`, `LANG`, `LC_ALL`, `TMPDIR`, `TZ`).
    pub(super) inherit_env: Option<bool>,
    /// More of Sluice's variables for a stdio server: names, or `PREFIX*` (default none).
    #[serde(default)]
    pub(super) inherit: Vec<String>,
    /// An unused process (a session no call uses, a spare no session took) is ended after this
    /// (default 60000, or `bridge.session_idle_ms` if shorter).
    pub(super) idle_ms: Option<u64>,
    /// A stdio server's working directory (default Sluice's own).
    pub(super) cwd: Option<String>,
    /// A stdio server's stderr: `drop` (default) or `file:PATH` (rotated to `PATH.1` at
    /// `stderr_max_bytes`).
    pub(super) stderr: Option<String>,
    /// Size at which a `file:` stderr is rotated (default 10485760).
    pub(super) stderr_max_bytes: Option<u64>,
    /// A stdio server's processes at once, one per session, Sluice's own and spares included
    /// (default 4).
    pub(super) max_processes: Option<usize>,
    /// One principal's share of `max_processes`, its parked calls included (default a quarter,
    /// at least 1, all of them without `[auth]`).
    pub(super) max_processes_per_principal: Option<usize>,
    /// Processes started ahead and kept warm, at most `max_processes` (default 1).
    pub(super) spare_processes: Option<usize>,
    /// How long a process may take to answer `initialize`, 1 to 600000 (default 30000).
    pub(super) start_ms: Option<u64>,
    /// Run a stdio server as this user: a name or a uid (default Sluice's own; Sluice must be
    /// root, or hold `CAP_SETUID`, `CAP_SETGID` and `CAP_KILL`).
    pub(super) user: Option<super::stdio::run_as::RawId>,
    /// Its group: a name or a gid (default the user's primary group).
    pub(super) group: Option<super::stdio::run_as::RawId>,
    /// Headers sent to this upstream only (redacted by `sluice check`). The protocol's own
    /// (`Mcp-*`) are refused: Sluice sets them per request.
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    /// Environment variable whose value is sent as `Authorization: Bearer` to this upstream.
    pub(super) bearer_token_env: Option<String>,
    /// How Sluice authenticates to it (default: `headers` and `bearer_token_env` as given).
    pub(super) auth: Option<super::upstream_auth::RawAuth>,
    /// For a 2025-11-25 server, which gives none: the `ttlMs` stamped on its lists (default 0).
    pub(super) cache_ttl_ms: Option<u64>,
    /// For a 2025-11-25 server: the `cacheScope` stamped on its lists (default `private`).
    pub(super) cache_scope: Option<CacheScope>,
    /// HTTP/2 with prior knowledge (h2c) to its URLs: one connection per host and port
    /// (default false).
    pub(super) http2: Option<bool>,
    /// Scopes a caller needs to reach this upstream (403 `insufficient_scope` without one).
    #[serde(default)]
    pub(super) required_scopes: Vec<String>,
    /// Tool pinning: `off`, `changes` (a changed definition is quarantined) or `strict` (a new
    /// tool too, once it has pins); default `[pins] mode`.
    pub(super) pin: Option<super::PinMode>,
}
