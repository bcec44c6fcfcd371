//! Configuration: TOML (or CLI flags) in, a validated [`Config`] out.
//!
//! Takes the text of a config file and the quick flags; gives domain types (durations, byte
//! bounds, upstream names checked against the prefix separator). Refuses an unknown key or a bad
//! value at load, naming the file, the line and column, the key and what was expected, never the
//! refused value (`toml_error.rs`). Secrets (upstream headers and tokens) are redacted wherever
//! the config or an error about it is printed.
//!
//! The file is read into the structs of `raw.rs` first; each section then has its own file with
//! its domain types and the conversion from its raw struct (`limits.rs`, `budget.rs`, `quota.rs`,
//! `auth.rs`, `upstream.rs`, `bridge.rs`), and `redact.rs` prints the result with secrets hidden. This
//! module orders the conversions and holds the checks that span sections.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;

use serde::Serialize;

mod across;
mod admin;
mod approvals;
mod auth;
mod auth_kinds;
mod bridge;
mod budget;
mod cluster;
mod limits;
mod login;
mod loops;
mod pins;
mod quota;
mod raw;
mod raw_governance;
mod raw_upstream;
mod redact;
pub mod replica;
mod resilience;
mod stdio;
mod telemetry;
mod toml_error;
mod upstream;
mod upstream_auth;
mod upstream_oauth;

#[cfg(test)]
mod admin_tests;
#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod exchange_tests;
#[cfg(test)]
mod login_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upstream_tests;

pub use admin::{Admin, AdminKey};
pub use approvals::{Approvals, Webhook};
pub use auth::{ApiKeyConfig, AuthConfig, JwtConfig};
pub use bridge::{AuditConfig, Bridge, MetricsConfig, StateConfig};
pub use budget::{BudgetLimits, BudgetProfile, MaxTokensAction};
pub use cluster::{Cluster, OnRedisError};
pub use limits::{Limits, Timeouts};
pub use login::{is_loopback, LoginConfig, LOGIN_CALLBACK};
pub use loops::{LoopBreaker, LoopOverride};
pub use pins::{PinMode, Pins};
pub use quota::Quota;
pub use redact::{redact_text, redact_url, secret_name};
pub use resilience::Resilience;
pub use stdio::run_as::{RunGroup, RunUser};
pub use stdio::{Stderr, StdioConfig};
pub use telemetry::Telemetry;
pub(crate) use toml_error::describe as describe_toml_error;
pub use upstream::{CacheScope, Era, PrefixMode, Transport, UpstreamConfig};
pub use upstream_auth::{AuthMode, Proof, SigningAlg, Target, TokenEndpointAuth, UpstreamAuth};
pub use upstream_oauth::CALLBACK_PATH;

use budget::Budget;
pub use raw::schema;
use raw::{RawConfig, RawUpstream};

/// Why a config could not be loaded. Shown through the one redaction (`redact.rs`): wherever it
/// is printed (`sluice check`, `serve`'s exit, a reload's log line), a URL's credentials and a
/// secret-named `NAME=VALUE` in it are not.
#[derive(Debug, thiserror::Error)]
#[error("{}", redact_text(.0))]
pub struct ConfigError(pub String);

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
    /// Per-tool call quotas, in file order (the first whose match holds counts a call).
    #[serde(rename = "quota")]
    pub quotas: Vec<Quota>,
    /// The identical-call breaker.
    pub loop_breaker: LoopBreaker,
    /// Calls held for an operator's approval.
    pub approvals: Approvals,
    /// Policy files, in order (their rules are concatenated; first match wins).
    pub policies: Vec<String>,
    /// The audit log.
    pub audit: AuditConfig,
    /// `/metrics` and `/readyz`.
    pub metrics: MetricsConfig,
    /// The upstreams, in configured order.
    #[serde(rename = "upstream")]
    pub upstreams: Vec<UpstreamConfig>,
    /// OpenTelemetry traces (`None`: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<Telemetry>,
    /// Replicas sharing state in Redis (`None`: one process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<Cluster>,
    /// The operator plane (`None`: off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<Admin>,
    /// Tool pinning (`None`: off everywhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pins: Option<Pins>,
}

/// Quick flags that override or extend a config file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--listen ADDR`.
    pub listen: Option<String>,
    /// `--upstream NAME=URL`, repeatable.
    pub upstreams: Vec<String>,
    /// `--env [UPSTREAM:]NAME[=VALUE]`, repeatable: a variable for a stdio `--upstream`.
    pub env: Vec<String>,
    /// `--no-prefix`.
    pub no_prefix: bool,
    /// `--policy FILE`, repeatable: policy files added after the config's.
    pub policies: Vec<String>,
}

/// Where config text came from, so errors can name the file and the line.
#[derive(Debug, Clone, Copy)]
struct Origin<'a> {
    /// The file's path, or `<flags>`.
    name: &'a str,
    /// Its text (spans index into it).
    text: &'a str,
}

/// A section's value refused; [`Origin::refuse`] puts the file's name in front.
#[derive(Debug)]
struct Invalid(String);

// === impl Config ===

/// Where `sluice serve` read its config (the `--config` file and the flags over it), to read it
/// again on a reload.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The `--config` file.
    pub path: Option<std::path::PathBuf>,
    /// The command-line flags over it.
    pub overrides: Overrides,
}

impl Source {
    /// Reads it (again).
    pub fn load(&self) -> Result<Config, ConfigError> {
        Config::load(self.path.as_deref(), &self.overrides)
    }
}

impl Config {
    /// Loads a config file (when given) and applies the quick flags.
    pub fn load(path: Option<&Path>, over: &Overrides) -> Result<Config, ConfigError> {
        let (text, origin) = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    ConfigError(format!("{}: cannot read config: {e}", p.display()))
                })?;
                (text, p.display().to_string())
            }
            None => (String::new(), "<flags>".to_owned()),
        };
        Config::from_toml(&text, &origin, over)
    }

    /// Parses and validates config text; `origin` names it in errors.
    ///
    /// The checks run in a fixed order (top-level keys, upstreams, budget, the listener against
    /// auth, bridge, limits, metrics against auth, state), so a file with several mistakes is
    /// always told about the same one first.
    pub fn from_toml(text: &str, origin: &str, over: &Overrides) -> Result<Config, ConfigError> {
        let src = Origin { name: origin, text };
        // Placed by line, column and key path; the value refused is never repeated.
        let mut raw: RawConfig =
            toml::from_str(text).map_err(|e| ConfigError(toml_error::describe(text, origin, e)))?;
        over.apply(&mut raw)?;
        let any_pin = raw.upstream.iter().any(|u| u.pin.is_some());
        let listen = listen_addr(raw.listen, src)?;
        let separator = upstream::separator(raw.separator, src)?;
        let path = endpoint_path(raw.path, src)?;
        let one_principal = across::one_principal(&raw.auth);
        let (mut upstreams, upstream_scopes) =
            upstream::upstreams(raw.upstream, &separator, src, one_principal)?;
        let Budget {
            global: budget,
            overrides: budget_overrides,
        } = raw.budget.try_into().map_err(|e| src.refuse(e))?;
        let quotas = quota::quotas(raw.quota, &upstreams).map_err(|e| src.refuse(e))?;
        let loop_breaker =
            loops::loop_breaker(raw.loop_breaker, &upstreams).map_err(|e| src.refuse(e))?;
        let approvals = approvals::approvals(raw.approvals).map_err(|e| src.refuse(e))?;
        let auth = AuthConfig::from_raw(raw.auth, upstream_scopes, || {
            format!("http://{listen}{path}")
        })
        .map_err(|e| src.refuse(e))?;
        across::open_listener(listen, &auth, origin)?;
        let admin = admin::admin(raw.admin, listen, &auth).map_err(|e| src.refuse(e))?;
        // Across sections: a token exchange needs the principal's JWT.
        upstream_auth::needs_jwt(&upstreams, auth.jwt.is_some())
            .map_err(|e| ConfigError(format!("{origin}: {e}")))?;
        let bridge = across::bridge_of(raw.bridge, &path, src)?;
        let limits = Limits::from_raw(raw.limits, one_principal, listen.ip().is_loopback())
            .map_err(|e| src.refuse(e))?;
        let metrics = across::metrics_config(raw.metrics, &auth, upstreams.len(), origin)?;
        let (state, cluster, cluster_var) =
            state_and_cluster(raw.state, raw.cluster, limits.max_connections, src)?;
        across::apart(&admin, &cluster, origin)?;
        let pins = pins::pins(raw.pins, any_pin, cluster.is_some()).map_err(|e| src.refuse(e))?;
        let audit = AuditConfig::from(raw.audit);
        let telemetry = telemetry::telemetry(raw.telemetry).map_err(|e| src.refuse(e))?;
        // Across sections: a server's stderr may carry content; it must not land in the audit
        // log or Sluice's own output.
        stdio::stderr_apart(&upstreams, &audit.sink)
            .map_err(|e| ConfigError(format!("{origin}: {e}")))?;
        // Across sections: no stdio server inherits a variable the config names as a secret.
        across::keep_secrets(
            &mut upstreams,
            (&state, &auth, cluster_var),
            &approvals,
            origin,
        )?;
        Ok(Config {
            listen,
            path,
            allowed_origins: raw.allowed_origins,
            prefix: raw.prefix.unwrap_or_default(),
            separator,
            limits,
            timeouts: raw.timeouts.into(),
            bridge,
            state,
            auth,
            budget,
            budget_overrides,
            quotas,
            loop_breaker,
            approvals,
            audit,
            metrics,
            policies: raw.policies,
            upstreams,
            telemetry,
            cluster,
            admin,
            pins,
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

    /// The `host:port` of every upstream URL, with whether it is spoken to over HTTP/2.
    pub fn http_versions(&self) -> Vec<(http::uri::Authority, bool)> {
        let urls = self
            .upstreams
            .iter()
            .flat_map(|u| u.resilience.urls.iter().map(move |url| (url, u.http2)));
        urls.filter_map(|(url, h2)| Some((url.parse::<http::Uri>().ok()?.authority()?.clone(), h2)))
            .collect()
    }

    /// The effective config as TOML with secrets redacted (for `sluice check`); without
    /// secrets it loads back unchanged.
    pub fn redacted(&self) -> String {
        redact::print(self)
    }
}

/// `listen`, or `127.0.0.1:8080` (loopback) when absent.
fn listen_addr(listen: Option<String>, src: Origin<'_>) -> Result<SocketAddr, ConfigError> {
    let text = listen.unwrap_or_else(|| "127.0.0.1:8080".into());
    text.parse().map_err(|_| {
        ConfigError(format!(
            "{}: listen = {text:?}: expected IP:PORT, e.g. 127.0.0.1:8080",
            src.name
        ))
    })
}

/// `path`, or `/mcp` when absent; it must be absolute.
fn endpoint_path(path: Option<String>, src: Origin<'_>) -> Result<String, ConfigError> {
    let path = path.unwrap_or_else(|| "/mcp".into());
    if !path.starts_with('/') {
        return Err(ConfigError(format!(
            "{}: path = {path:?}: expected an absolute path such as \"/mcp\"",
            src.name
        )));
    }
    Ok(path)
}

/// `[state]` and `[cluster]`, the replica joined to its cluster; with the variable a `${VAR}`
/// `cluster.redis_url` names (a secret no stdio server inherits).
/// `max_connections`: `limits.max_connections`, the pool the internal listener's share is of.
fn state_and_cluster(
    raw_state: raw::RawState,
    raw_cluster: Option<raw::RawCluster>,
    max_connections: usize,
    src: Origin<'_>,
) -> Result<(StateConfig, Option<Cluster>, Option<String>), ConfigError> {
    let explicit_replica = raw_state.replica.clone();
    let mut state = StateConfig::try_from(raw_state).map_err(|e| src.refuse(e))?;
    let cluster_var = raw_cluster.as_ref().and_then(|c| {
        c.redis_url
            .as_deref()?
            .strip_prefix("${")?
            .strip_suffix('}')
            .map(str::to_owned)
    });
    let cluster = cluster::cluster(raw_cluster, max_connections).map_err(|e| src.refuse(e))?;
    if let Some(c) = &cluster {
        join_cluster(&mut state, explicit_replica, c, src.name)?;
    }
    Ok((state, cluster, cluster_var))
}

/// Across sections: replicas open each other's sealed values, so they need the same configured
/// keys; the id written into sealed state is the cluster's.
fn join_cluster(
    state: &mut StateConfig,
    explicit_replica: Option<String>,
    c: &Cluster,
    origin: &str,
) -> Result<(), ConfigError> {
    if state.keys.is_empty() && state.key_env.is_none() {
        return Err(ConfigError(format!(
            "{origin}: [cluster] needs shared state keys: set state.keys or state.key_env to the same keys on every replica (a random key would make each replica refuse the others' requestState)"
        )));
    }
    if explicit_replica.as_deref().is_some_and(|r| r != c.id) {
        return Err(ConfigError(format!(
            "{origin}: state.replica and cluster.id differ; drop state.replica (cluster.id names this replica)"
        )));
    }
    state.replica = c.id.clone();
    Ok(())
}

// === impl Overrides ===

impl Overrides {
    /// Writes the flags into the file's values: `--listen` and `--no-prefix` replace, and
    /// `--upstream` and `--policy` come after the file's own.
    fn apply(&self, raw: &mut RawConfig) -> Result<(), ConfigError> {
        let mut flagged = Vec::new();
        for spec in &self.upstreams {
            let u = RawUpstream::from_flag(spec)?;
            flagged.push(u.name.get_ref().clone());
            raw.upstream.push(u);
        }
        let flagged: Vec<&str> = flagged.iter().map(String::as_str).collect();
        stdio::inherit::env_flags(&self.env, &flagged, &mut raw.upstream)?;
        if let Some(listen) = &self.listen {
            raw.listen = Some(listen.clone());
        }
        if self.no_prefix {
            raw.prefix = Some(PrefixMode::Never);
        }
        raw.policies.extend(self.policies.iter().cloned());
        Ok(())
    }
}

// === impl Origin ===

impl Origin<'_> {
    /// `file:line` of a span, or `--upstream` for an upstream given as a flag (empty span).
    fn at(&self, span: Range<usize>) -> String {
        if span.end == 0 {
            "--upstream".to_owned()
        } else {
            format!("{}:{}", self.name, line_of(self.text, span.start))
        }
    }

    /// A section's refusal, named by the file.
    fn refuse(&self, e: Invalid) -> ConfigError {
        ConfigError(format!("{}: {}", self.name, e.0))
    }
}

/// The 1-based line holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}
