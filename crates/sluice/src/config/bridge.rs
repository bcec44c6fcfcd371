//! `[bridge]`, `[state]`, `[audit]` and `[metrics]`: how legacy sessions are bounded, what seals
//! `requestState`, where audit records go, who may read `/metrics`, and how many healthy
//! upstreams `/readyz` needs.
//!
//! Takes the raw tables; gives [`Bridge`], [`StateConfig`], [`AuditConfig`] and [`MetricsConfig`]
//! with each absent value at its default (`max_parked` from the file-descriptor limit). Refuses
//! `bridge.gather_ms` over 200 and a `state.keys` entry that is not `ID:BASE64`; the keys stay
//! redacted in `Debug` and when printed. Whether `metrics.require_auth` has an `[auth]` to
//! require, and `metrics.min_healthy_upstreams` that many upstreams, is checked where the config
//! is assembled.

use std::time::Duration;

use serde::Serialize;

use super::limits::{millis, ms};
use super::raw::{RawAudit, RawBridge, RawMetrics, RawState};
use super::redact::redact_list;
use super::Invalid;

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
    /// The path of the 2024-11-05 HTTP+SSE client transport (default `/sse`): a GET there opens
    /// a session's stream, a POST with its `session_id` sends it a message.
    pub sse_path: String,
    /// The longest a 2024-11-05 HTTP+SSE session lasts, its stream open or not: then its stream
    /// closes and its calls end (default 24 h; at least 1 ms).
    #[serde(with = "ms", rename = "sse_session_max_ms")]
    pub sse_session_max: Duration,
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

/// `/metrics` and `/readyz`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct MetricsConfig {
    /// Whether `/metrics` and `/readyz` need a credential, like the MCP endpoint (default false;
    /// needs `[auth]`).
    pub require_auth: bool,
    /// `/readyz` answers 200 only while at least this many upstreams are healthy (default: 1
    /// when any upstream is configured; 0 makes readiness "every upstream probed once" only).
    /// At most the number of upstreams (checked where the config is assembled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_healthy_upstreams: Option<usize>,
}

impl MetricsConfig {
    /// Refuses a `min_healthy_upstreams` over the `configured` upstreams (never ready).
    pub fn check_upstreams(&self, configured: usize) -> Result<(), String> {
        match self.min_healthy_upstreams {
            Some(n) if n > configured => Err(format!(
                "metrics.min_healthy_upstreams = {n} but {configured} upstream(s) are configured: /readyz could never answer 200; give at most {configured}"
            )),
            _ => Ok(()),
        }
    }

    /// The healthy upstreams `/readyz` needs, of `configured`.
    pub fn min_healthy(&self, configured: usize) -> usize {
        self.min_healthy_upstreams
            .unwrap_or(usize::from(configured > 0))
    }
}

// === impl Bridge ===

impl TryFrom<RawBridge> for Bridge {
    type Error = Invalid;

    fn try_from(b: RawBridge) -> Result<Bridge, Invalid> {
        let gather = b.gather_ms.unwrap_or(20);
        if gather > 200 {
            return Err(Invalid(format!(
                "bridge.gather_ms = {gather}: expected at most 200"
            )));
        }
        Ok(Bridge {
            gather: Duration::from_millis(gather),
            park: millis(b.park_ms, 60_000),
            session_idle: millis(b.session_idle_ms, 300_000),
            max_sessions: b.max_sessions.unwrap_or(1024),
            max_parked: b.max_parked.unwrap_or_else(default_max_parked),
            max_client_sessions: b.max_client_sessions.unwrap_or(1000),
            client_session_idle: millis(b.client_session_idle_ms, 30 * 60_000),
            max_client_sessions_per_principal: b.max_client_sessions_per_principal.unwrap_or(16).max(1),
            max_sessions_per_principal: b.max_sessions_per_principal.unwrap_or(32).max(1),
            max_subscriptions_per_session: b.max_subscriptions_per_session.unwrap_or(256),
            sse_path: sse_path(b.sse_path)?,
            sse_session_max: match b.sse_session_max_ms {
                Some(0) => {
                    return Err(Invalid("bridge.sse_session_max_ms = 0: expected at least 1 (the default is 86400000, a day)".into()))
                }
                v => millis(v, 24 * 3_600_000),
            },
        })
    }
}

impl Bridge {
    /// Refuses a `sse_path` that is the MCP endpoint's `path`: the 2024-11-05 transport needs a
    /// path of its own.
    pub(super) fn apart_from(&self, path: &str) -> Result<(), String> {
        if self.sse_path == path {
            return Err(format!(
                "bridge.sse_path and path are both {path:?}: the 2024-11-05 SSE endpoint needs a path of its own; set bridge.sse_path"
            ));
        }
        Ok(())
    }
}

/// `bridge.sse_path`, or `/sse`: an absolute path with no query, not one Sluice serves
/// otherwise (that it differs from `path` is checked where the config is assembled).
fn sse_path(p: Option<String>) -> Result<String, Invalid> {
    let p = p.unwrap_or_else(|| "/sse".into());
    let taken =
        ["/healthz", "/metrics", "/readyz"].contains(&p.as_str()) || p.starts_with("/.well-known/");
    if !p.starts_with('/') || p.contains(['?', '#']) || taken {
        return Err(Invalid(format!(
            "bridge.sse_path = {p:?}: expected an absolute path of its own such as \"/sse\" (no query; not /healthz, /metrics, /readyz or under /.well-known/)"
        )));
    }
    Ok(p)
}

/// A parked legacy exchange holds its session's upstream connections (the call's POST stream
/// and the GET stream): by default allow a quarter of the soft file-descriptor limit.
fn default_max_parked() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse::<usize>().ok())
        });
    (soft.unwrap_or(1024) / 4).clamp(64, 65_536)
}

// === impl StateConfig ===

impl TryFrom<RawState> for StateConfig {
    type Error = Invalid;

    fn try_from(s: RawState) -> Result<StateConfig, Invalid> {
        for k in &s.keys {
            crate::state::parse_key(k).map_err(|e| Invalid(format!("state.keys: {e}")))?;
        }
        Ok(StateConfig {
            keys: s.keys,
            key_env: s.key_env,
            replica: s.replica.unwrap_or_else(|| "local".into()),
        })
    }
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

// === impl AuditConfig ===

impl From<RawAudit> for AuditConfig {
    fn from(a: RawAudit) -> AuditConfig {
        AuditConfig {
            enabled: a.enabled.unwrap_or(true),
            sink: a.sink.unwrap_or_else(|| "stderr".into()),
            capacity: a.capacity.unwrap_or(8192),
        }
    }
}

// === impl MetricsConfig ===

impl From<RawMetrics> for MetricsConfig {
    fn from(m: RawMetrics) -> MetricsConfig {
        MetricsConfig {
            require_auth: m.require_auth.unwrap_or(false),
            min_healthy_upstreams: m.min_healthy_upstreams,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::{Config, Overrides};

    fn load(text: &str) -> Result<Config, String> {
        Config::from_toml(text, "sluice.toml", &Overrides::default()).map_err(|e| e.0)
    }

    #[test]
    fn min_healthy_upstreams_defaults_to_one_and_cannot_exceed_the_upstreams() {
        let two = "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/\"\n[[upstream]]\nname = \"b\"\nurl = \"http://127.0.0.1:2/\"\n";
        let c = load(two).expect("loads");
        assert_eq!(
            c.metrics.min_healthy(c.upstreams.len()),
            1,
            "one healthy upstream by default"
        );
        assert_eq!(c.metrics.min_healthy(0), 0);
        let c = load(&format!("[metrics]\nmin_healthy_upstreams = 2\n{two}")).expect("loads");
        assert_eq!(c.metrics.min_healthy(2), 2);
        assert!(
            c.redacted().contains("min_healthy_upstreams = 2"),
            "{}",
            c.redacted()
        );
        let e = load(&format!("[metrics]\nmin_healthy_upstreams = 3\n{two}")).expect_err("refused");
        assert!(
            e.contains("min_healthy_upstreams = 3 but 2 upstream(s)")
                && e.contains("give at most 2"),
            "{e}"
        );
    }

    #[test]
    fn the_sse_transport_has_a_path_of_its_own_and_a_bounded_session() {
        let b = load("").unwrap().bridge;
        assert_eq!(
            (b.sse_path.as_str(), b.sse_session_max),
            ("/sse", Duration::from_secs(86_400)),
            "the defaults"
        );
        assert_eq!(
            load("[bridge]\nsse_path = \"/old/sse\"\n")
                .unwrap()
                .bridge
                .sse_path,
            "/old/sse"
        );
        for bad in [
            "sse",
            "/sse?x=1",
            "/healthz",
            "/metrics",
            "/readyz",
            "/.well-known/sse",
        ] {
            let e = load(&format!("[bridge]\nsse_path = {bad:?}\n")).unwrap_err();
            assert!(
                e.contains("bridge.sse_path") && e.contains("expected an absolute path of its own"),
                "{bad}: {e}"
            );
        }
        let e = "sluice.toml: bridge.sse_path and path are both \"/sse\": the 2024-11-05 SSE endpoint needs a path of its own; set bridge.sse_path";
        assert_eq!(load("path = \"/sse\"\n").unwrap_err(), e);
        assert!(load("path = \"/sse\"\n[bridge]\nsse_path = \"/legacy\"\n").is_ok());
        let e = load("[bridge]\nsse_session_max_ms = 0\n").unwrap_err();
        assert!(
            e.starts_with("sluice.toml: bridge.sse_session_max_ms = 0: expected at least 1"),
            "{e}"
        );
        let c = load("[bridge]\nsse_session_max_ms = 5000\n").unwrap();
        assert!(
            c.redacted().contains("sse_session_max_ms = 5000"),
            "printed back: {}",
            c.redacted()
        );
    }
}
