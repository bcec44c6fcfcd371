//! The composition root: builds every part a request needs from a checked config and holds
//! them (config, upstreams, the federation codec, the HTTP client, bridge A's store and keys,
//! authentication, the governor, audit, metrics, the listen hub, bridge B's sessions, stream
//! caps).
//!
//! Takes a [`Config`]; gives one `Arc<Gateway>` every request borrows (background work tied to
//! its shutdown token is in `background.rs`). A reload (`reload.rs`) builds the next generation
//! with [`Gateway::next`]: a new config, auth, names, governor and upstream list, sharing with
//! the one before everything that outlives a config (sessions, parked exchanges, consumed
//! states, streams, the hub, audit, metrics, the client, unchanged upstreams); [`Live`] holds
//! the current one. Refuses to build when the config fails [`preflight`] (an upstream's
//! settings cannot be used, a security feature configured empty, an unopenable audit sink).

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
    pub ready: Arc<tokio::sync::watch::Sender<bool>>,
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
    pub legacy_sessions: Arc<crate::bridge_b::session::Sessions>,
    /// Open client streams, per principal and in total.
    pub streams: Arc<crate::streams::Streams>,
    /// The current generation (this one until a reload replaces it).
    pub live: Arc<Live>,
    /// This generation's number: 1 at start, one more per applied reload.
    pub generation: u64,
    /// Cancelled when a reload changes who may authenticate: the client streams opened under
    /// this generation's `[auth]` end, so their clients come back with credentials that hold.
    /// Shared with the next generation while `[auth]` stays the same.
    pub revoked: CancellationToken,
    /// Where 2025-11-25 sessions report their upstreams' list changes (read by
    /// `catalog::legacy::report_changes`, one task for every generation).
    pub changes: crate::upstream::legacy::changes::ListChanged,
}

/// Whether two `[auth]` sections certainly accept the same credentials: written the same
/// (which upstream each scope reaches aside: streams judge that per event, on the current
/// generation), and reading no key or secret from a file, which may have changed under them
/// (the process environment cannot).
pub(crate) fn same_auth(a: &crate::config::AuthConfig, b: &crate::config::AuthConfig) -> bool {
    let files = |c: &crate::config::AuthConfig| {
        c.jwt.as_ref().is_some_and(|j| j.hs256_secret_file.is_some() || j.jwks_file.is_some() || !j.public_keys.is_empty())
    };
    let written = |c: &crate::config::AuthConfig| {
        let mut v = serde_json::to_value(c).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.remove("upstream_scopes");
        }
        v
    };
    written(a) == written(b) && !files(a) && !files(b)
}

/// The current generation, swapped whole by a reload. Requests and long-lived streams take
/// [`Gateway::latest`]; a request in flight keeps the generation it started on.
pub struct Live {
    current: arc_swap::ArcSwapOption<Gateway>,
    /// One reload at a time.
    pub(crate) reloading: tokio::sync::Mutex<()>,
    /// Where the config was read, to read it again on SIGHUP (set by `sluice serve`).
    pub source: std::sync::OnceLock<crate::config::Source>,
    /// Generations a reload replaced, while their drain runs: a round parked on an upstream
    /// they held is still routed there, and shutdown ends their processes too.
    retiring: std::sync::Mutex<Vec<Arc<Gateway>>>,
    /// Set once serving ended: no reload makes a generation current after that.
    closed: std::sync::atomic::AtomicBool,
    /// How many generations are draining (`retiring`'s length).
    draining: std::sync::atomic::AtomicUsize,
    /// The receiving end of [`Gateway::changes`], until the background work takes it.
    changes: std::sync::Mutex<Option<Announcements>>,
}

/// The list changes 2025-11-25 sessions announce, as the catalog's task reads them.
pub type Announcements = tokio::sync::mpsc::Receiver<crate::upstream::legacy::changes::Announced>;

impl Live {
    /// Makes `gw` the current generation; `false` once serving ended (nothing changed).
    pub(crate) fn set(&self, gw: &Arc<Gateway>) -> bool {
        let _one = self.retiring.lock();
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        self.current.store(Some(gw.clone()));
        true
    }

    /// The current generation (`None` once serving ended).
    pub fn get(&self) -> Option<Arc<Gateway>> {
        self.current.load_full()
    }

    /// The list changes sessions announce, once: for the task that reports them
    /// (`background.rs`); until it is taken, a session's report waits while the channel is full.
    pub(crate) fn take_changes(&self) -> Option<Announcements> {
        self.changes.lock().ok()?.take()
    }

    /// Notes a generation whose drain starts.
    pub(crate) fn retiring(&self, old: &Arc<Gateway>) {
        if let Ok(mut r) = self.retiring.lock() {
            r.push(old.clone());
            self.draining.store(r.len(), std::sync::atomic::Ordering::Release);
        }
    }

    /// Forgets a generation whose drain ended.
    pub(crate) fn retired_done(&self, old: &Arc<Gateway>) {
        if let Ok(mut r) = self.retiring.lock() {
            r.retain(|g| !Arc::ptr_eq(g, old));
            self.draining.store(r.len(), std::sync::atomic::Ordering::Release);
        }
    }

    /// Whether any generation is draining (one atomic load: the routing of every retry asks).
    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// The generations still draining, newest first.
    pub fn retired(&self) -> Vec<Arc<Gateway>> {
        self.retiring.lock().map(|r| r.iter().rev().cloned().collect()).unwrap_or_default()
    }

    /// Forgets the current generation and the draining ones (at the end of serving: they hold
    /// this `Live`); no reload applies after it.
    pub fn clear(&self) {
        let mut r = self.retiring.lock();
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        self.current.store(None);
        if let Ok(r) = r.as_mut() {
            r.clear();
        }
        self.draining.store(0, std::sync::atomic::Ordering::Release);
    }
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
    // What Sluice holds beyond what this config needs, once per process life.
    crate::upstream::stdio::boundary::capabilities::warn_once(cfg);
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
        client.record_versions(cfg.http_versions());
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
        let (changes, changes_rx) = crate::upstream::legacy::changes::ListChanged::channel();
        let audit = crate::audit::Audit::start(cfg.audit.enabled, Some(cfg.audit.sink.clone()), cfg.audit.capacity);
        let gw = Arc::new(Gateway {
            audit,
            metrics: Arc::new(crate::metrics::Metrics::new()),
            legacy_sessions: Arc::new(crate::bridge_b::session::Sessions::new(&cfg.bridge, keys)),
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
            ready: Arc::new(tokio::sync::watch::Sender::new(false)),
            shutdown,
            revoked: CancellationToken::new(),
            live: Arc::new(Live {
                current: arc_swap::ArcSwapOption::empty(),
                reloading: tokio::sync::Mutex::new(()),
                source: std::sync::OnceLock::new(),
                retiring: std::sync::Mutex::new(Vec::new()),
                closed: std::sync::atomic::AtomicBool::new(false),
                draining: std::sync::atomic::AtomicUsize::new(0),
                changes: std::sync::Mutex::new(Some(changes_rx)),
            }),
            generation: 1,
            changes,
            cfg,
        });
        let _ = gw.live.set(&gw);

        Ok(gw)
    }

    /// The next generation for a reloaded `cfg` (checked by [`preflight`] as at startup): its
    /// upstreams are this one's where [`Upstream::same_as`] says nothing changed, new ones
    /// otherwise (not probed yet: `reload.rs` probes them before it makes the generation
    /// current). Nothing is started or changed here but the client's record of each host's HTTP
    /// version, to which the new config's hosts are added (`reload.rs` first refuses a config
    /// that gives a recorded host the other version; a dropped result leaves its hosts recorded,
    /// so a later reload may not give them the other version either).
    pub fn next(&self, cfg: Config) -> Result<Arc<Gateway>, String> {
        let Parts { upstreams, auth, governor: _, keys: _ } = preflight(&cfg)?;
        // Tables hold public names: when names are spelled differently now (the prefix or the
        // separator changed, or `prefix = "auto"` and the number of upstreams), none is kept.
        let names = Names::new(cfg.prefixed(), &cfg.separator);
        let renamed = names != self.names;
        let upstreams = upstreams
            .into_iter()
            .map(|fresh| match self.upstream(&fresh.name) {
                Some(old) if !renamed && old.same_as(&fresh) => old.clone(),
                _ => fresh,
            })
            .collect();
        let governor = Arc::new(self.governor.next(&cfg)?);
        self.client.record_versions(cfg.http_versions());
        Ok(Arc::new(Gateway {
            audit: self.audit.clone(),
            metrics: self.metrics.clone(),
            legacy_sessions: self.legacy_sessions.clone(),
            streams: self.streams.clone(),
            bridge: Arc::new(self.bridge.next(governor.clone())),
            forwarder: Arc::new(crate::dispatch::forward::Forwarder { governor: governor.clone(), ..self.forwarder.as_ref().clone() }),
            governor,
            auth,
            client: self.client.clone(),
            upstreams,
            names,
            server_info: self.server_info.clone(),
            server_info_json: self.server_info_json.clone(),
            hub: self.hub.clone(),
            ready: self.ready.clone(),
            shutdown: self.shutdown.clone(),
            live: self.live.clone(),
            generation: self.generation + 1,
            changes: self.changes.clone(),
            revoked: if same_auth(&self.cfg.auth, &cfg.auth) { self.revoked.clone() } else { CancellationToken::new() },
            cfg,
        }))
    }

    /// The current generation (`self` once serving ended).
    pub fn latest(self: &Arc<Self>) -> Arc<Gateway> {
        self.live.current.load_full().unwrap_or_else(|| self.clone())
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
