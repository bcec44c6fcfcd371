//! The composition root: builds every part a request needs from a checked config and holds
//! them (config, upstreams, the federation codec, the HTTP client, bridge A's store and keys,
//! authentication, the governor, audit, metrics, the listen hub, bridge B's sessions, stream
//! caps).
//!
//! Takes a [`Config`]; gives one `Arc<Gateway>` every request borrows (background work tied to
//! its shutdown token is in `background.rs`). Refuses to build when the config fails
//! [`preflight`] (an upstream's settings cannot be used, a security feature configured empty,
//! an unopenable audit sink).

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::listen::hub::Hub;
use crate::route::names::Names;
use crate::upstream::client::HttpClient;
use crate::upstream::{discover, Upstream};

/// Everything requests share.
pub struct Gateway {
    /// The validated config.
    pub cfg: Config,
    /// The pooled upstream client.
    pub client: HttpClient,
    /// The upstreams in configured order (that order is the order of federated lists).
    pub upstreams: Vec<Arc<Upstream>>,
    /// The name prefix codec.
    pub names: Names,
    /// Sluice's `serverInfo`.
    pub server_info: Value,
    /// The same, as JSON text (stamped into every forwarded result).
    pub server_info_json: String,
    /// Listen streams: list-changed and resource-updated fan-out.
    pub hub: Arc<Hub>,
    /// Set once every upstream has been probed.
    pub ready: tokio::sync::watch::Sender<bool>,
    /// Cancelled on shutdown; background tasks and listen streams end with it.
    pub shutdown: CancellationToken,
    /// Bridge A: legacy sessions, parked exchanges, sealing keys.
    pub bridge: Arc<crate::bridge::Bridge>,
    /// Forwarding to modern upstreams.
    pub forwarder: Arc<crate::dispatch::forward::Forwarder>,
    /// Authentication (API keys, JWT) and the resource metadata.
    pub auth: crate::auth::Authenticator,
    /// Approval rules and budgets.
    pub governor: Arc<crate::policy::Governor>,
    /// The audit log.
    pub audit: crate::audit::Audit,
    /// Prometheus metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Sessions of 2025-11-25 clients (bridge B).
    pub legacy_sessions: crate::bridge_b::session::Sessions,
    /// Open client streams, per principal and in total.
    pub streams: Arc<crate::streams::Streams>,
}

/// Everything a gateway reads from the environment and the disk (credentials, keys, policy
/// files, the audit file), checked the same way by `sluice serve` and `sluice check`.
pub struct Parts {
    upstreams: Vec<Arc<Upstream>>,
    auth: crate::auth::Authenticator,
    governor: crate::policy::Governor,
    keys: crate::state::Keys,
}

/// Reads and checks what the config points at, starting nothing. A configured security source
/// that yields nothing (an unset or empty key variable, a policy file without rules, an empty
/// secret) is an error here, never a silent "off".
pub fn preflight(cfg: &Config) -> Result<Parts, String> {
    let upstreams = cfg
        .upstreams
        .iter()
        .map(|u| Upstream::new(u, cfg.limits.max_response_bytes, cfg.timeouts.response, cfg.timeouts.shutdown).map(Arc::new))
        .collect::<Result<Vec<_>, _>>()?;
    let auth = crate::auth::Authenticator::new(&cfg.auth)?;
    if !auth.enabled() && !cfg.listen.ip().is_loopback() {
        return Err(format!(
            "listen = {} is not loopback but no credential is configured: anyone could call through; add [auth] or listen on 127.0.0.1",
            cfg.listen
        ));
    }
    if cfg.metrics.require_auth && !auth.enabled() {
        return Err("metrics.require_auth = true but no credential is configured: add [auth] or drop require_auth".into());
    }
    let governor = crate::policy::Governor::new(cfg)?;
    let keys = crate::state::keys_from(&cfg.state.keys, cfg.state.key_env.as_deref())?;
    if cfg.audit.enabled && cfg.audit.sink != "stderr" {
        check_sink(&cfg.audit.sink)?;
    }
    Ok(Parts { upstreams, auth, governor, keys })
}

/// The audit file can be appended to (created if need be). A FIFO or device is taken as is:
/// opening one may wait for its reader, which is the audit writer's business, not startup's.
fn check_sink(path: &str) -> Result<(), String> {
    let special = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if special {
        return Ok(());
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .map_err(|e| format!("audit.sink = {path:?}: cannot open it for appending: {e}; point it at a writable file or use \"stderr\""))
}

impl Gateway {
    /// Builds the state (no I/O yet but reading what the config points at: see [`preflight`]).
    pub fn new(cfg: Config) -> Result<Arc<Self>, String> {
        let Parts { upstreams, auth, governor, keys } = preflight(&cfg)?;
        let client = HttpClient::new(
            cfg.timeouts.connect,
            cfg.timeouts.response,
            cfg.limits.max_response_bytes,
            cfg.limits.max_sse_event_bytes,
            cfg.timeouts.stream_idle,
        );
        let names = Names::new(cfg.prefixed(), &cfg.separator);
        let governor = Arc::new(governor);
        let bridge = Arc::new(crate::bridge::Bridge::new(&cfg, client.clone(), keys.clone(), governor.clone(), discover::server_info()));
        let forwarder = Arc::new(crate::dispatch::forward::Forwarder {
            client: client.clone(),
            response: cfg.timeouts.response,
            keys: keys.clone(),
            governor: governor.clone(),
            server_info_json: discover::server_info().to_string(),
        });
        let shutdown = CancellationToken::new();
        let audit = crate::audit::Audit::start(cfg.audit.enabled, Some(cfg.audit.sink.clone()), cfg.audit.capacity, shutdown.clone());
        Ok(Arc::new(Gateway {
            audit,
            metrics: Arc::new(crate::metrics::Metrics::new()),
            legacy_sessions: crate::bridge_b::session::Sessions::new(&cfg.bridge, keys),
            streams: crate::streams::Streams::new(cfg.limits.max_streams, cfg.limits.max_streams_per_principal),
            governor,
            auth,
            bridge,
            forwarder,
            client,
            upstreams,
            names,
            server_info: discover::server_info(),
            server_info_json: discover::server_info().to_string(),
            hub: Arc::new(Hub::new(cfg.limits.max_resource_subscriptions)),
            ready: tokio::sync::watch::Sender::new(false),
            shutdown,
            cfg,
        }))
    }

    /// Whether any healthy upstream advertises the server capability `cap`.
    pub fn serves(&self, cap: &str) -> bool {
        self.upstreams.iter().any(|u| u.serves(cap))
    }

    /// The upstreams `p` may reach (its scopes), in config order.
    pub fn reachable<'a>(&'a self, p: &'a crate::auth::Principal) -> impl Iterator<Item = &'a Arc<Upstream>> + 'a {
        self.upstreams.iter().filter(move |u| self.auth.may_reach(p, &u.name))
    }

    /// Whether an upstream `p` may reach serves `cap`.
    pub fn serves_for(&self, p: &crate::auth::Principal, cap: &str) -> bool {
        self.reachable(p).any(|u| u.serves(cap))
    }

    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// Whether Sluice has probed every upstream once.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }
}
