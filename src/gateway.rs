//! The gateway's shared state: config, upstreams, the federation codec, the listen hub.
//!
//! Takes a validated [`Config`]; gives one `Arc<Gateway>` every request borrows, plus the
//! background work (probing, table refresh, upstream listen streams) tied to its shutdown
//! token. Refuses to build when an upstream's settings cannot be used (bad header, missing
//! token variable).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::listen::Hub;
use crate::route::names::Names;
use crate::route::table::{ListKind, ListTable};
use crate::upstream::client::HttpClient;
use crate::upstream::{discover, lists, Upstream};

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
    pub ready: AtomicBool,
    /// Cancelled on shutdown; background tasks and listen streams end with it.
    pub shutdown: CancellationToken,
    /// Bridge A: legacy sessions, parked exchanges, sealing keys.
    pub bridge: crate::bridge::Bridge,
    /// Authentication (API keys, JWT) and the resource metadata.
    pub auth: crate::auth::Authenticator,
    /// Approval rules and budgets.
    pub governor: crate::policy::Governor,
    /// The audit log.
    pub audit: crate::audit::Audit,
    /// Prometheus metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Requests in progress (for load shedding).
    pub in_flight: std::sync::atomic::AtomicUsize,
    /// Sessions of 2025-11-25 clients (bridge B).
    pub legacy_sessions: crate::bridge_b::Sessions,
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
    let upstreams = cfg.upstreams.iter().map(|u| Upstream::new(u).map(Arc::new)).collect::<Result<Vec<_>, _>>()?;
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
    let keys = crate::state::keys_from(&cfg.state)?;
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
        let bridge = crate::bridge::Bridge::new(&cfg, client.clone(), keys);
        let shutdown = CancellationToken::new();
        let audit = crate::audit::Audit::start(cfg.audit.enabled, Some(cfg.audit.sink.clone()), cfg.audit.capacity, shutdown.clone());
        Ok(Arc::new(Gateway {
            audit,
            metrics: Arc::new(crate::metrics::Metrics::new()),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            legacy_sessions: crate::bridge_b::Sessions::new(&cfg.bridge),
            streams: crate::streams::Streams::new(cfg.limits.max_streams, cfg.limits.max_streams_per_principal),
            governor,
            auth,
            bridge,
            client,
            upstreams,
            names,
            server_info: discover::server_info(),
            server_info_json: discover::server_info().to_string(),
            hub: Arc::new(Hub::new(cfg.limits.max_resource_subscriptions)),
            ready: AtomicBool::new(false),
            shutdown,
            cfg,
        }))
    }

    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// Whether Sluice has probed every upstream once.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Probes every upstream and fetches the tables of the healthy ones.
    pub async fn probe_all(self: &Arc<Self>) {
        let probes = self.upstreams.iter().map(|up| async move {
            let status = self.probe(up).await;
            if status.healthy {
                for kind in ListKind::ALL {
                    self.refresh(up, kind).await;
                }
            }
        });
        futures_util::future::join_all(probes).await;
        self.ready.store(true, Ordering::Release);
    }

    /// Probes one upstream: `server/discover`, and `initialize` when the answer is not modern
    /// (or the upstream is configured as 2025-11-25).
    pub async fn probe(self: &Arc<Self>, up: &Arc<Upstream>) -> crate::upstream::Status {
        if up.era == crate::config::Era::Legacy {
            return crate::bridge::probe(self, up).await;
        }
        match discover::probe(&self.client, up).await {
            discover::Probe::Modern(s) | discover::Probe::Failed(s) => s,
            discover::Probe::NotModern(why) if up.era == crate::config::Era::Auto => {
                tracing::info!(upstream = %up.name, reason = %why, "not a 2026-07-28 server; trying 2025-11-25");
                crate::bridge::probe(self, up).await
            }
            discover::Probe::NotModern(why) => {
                up.mark_failed(&format!("{why}; it is configured as era = \"2026-07-28\""));
                up.status().as_ref().clone()
            }
        }
    }

    /// Re-fetches one table of one upstream (one fetch at a time per table; a caller that waited
    /// for another's fetch takes its result). Returns the current table.
    pub async fn refresh(self: &Arc<Self>, up: &Arc<Upstream>, kind: ListKind) -> Arc<ListTable> {
        let asked = Instant::now();
        let _guard = up.refresh_lock[kind.index()].lock().await;
        let current = up.list(kind);
        if current.fetched_at >= asked {
            return current;
        }
        if !up.serves(kind.capability()) {
            up.set_list(kind, ListTable::empty());
            return up.list(kind);
        }
        match lists::fetch(self, up, kind).await {
            Ok(table) => {
                self.warn_collisions(up, kind, &table);
                up.set_list(kind, table);
            }
            Err(why) => {
                tracing::warn!(upstream = %up.name, list = kind.name(), reason = %why, "list fetch failed; serving the other upstreams");
                up.mark_failed(&why);
            }
        }
        up.list(kind)
    }

    /// Refreshes a table after a lookup missed in it, within the table's miss budget (else
    /// the current table).
    pub async fn refresh_missed(self: &Arc<Self>, up: &Arc<Upstream>, kind: ListKind) -> Arc<ListTable> {
        if up.miss_refresh[kind.index()].check().is_err() {
            return up.list(kind);
        }
        self.refresh(up, kind).await
    }

    /// Marks one table stale after a list-changed notification and refreshes it.
    pub async fn invalidate(self: &Arc<Self>, up: &Arc<Upstream>, kind: ListKind) {
        let mut stale = (*up.list(kind)).clone();
        stale.ttl_ms = 0;
        up.set_list(kind, stale);
        // Within the table's refresh budget: an upstream repeating list_changed gets its list
        // refetched a few times a second at most; a stale table is refetched when next used.
        self.refresh_missed(up, kind).await;
    }

    fn warn_collisions(&self, up: &Upstream, kind: ListKind, table: &ListTable) {
        if self.names.prefixed() || !kind.named() {
            return;
        }
        for other in self.upstreams.iter().filter(|o| o.name != up.name) {
            let theirs = other.list(kind);
            for item in table.items.iter().filter(|i| theirs.by_key(&i.key).is_some()) {
                tracing::warn!(
                    name = %crate::telemetry::peer_name(&item.public), first = %up.name, second = %other.name, list = kind.name(),
                    "name collision with prefixing off: calls go to the first upstream in config order; turn prefixing on or rename"
                );
            }
        }
    }

    /// Starts the background work: the first probe, periodic refresh, upstream listen streams.
    pub fn spawn_background(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let gw = self.clone();
        // The sweepers first: parked exchanges and sessions expire even while a slow first probe runs.
        tokio::spawn(crate::bridge::sweep_sessions(self.clone()));
        tokio::spawn(crate::bridge::sweep_parked(self.clone()));
        tokio::spawn(async move {
            gw.probe_all().await;
            for up in &gw.upstreams {
                tokio::spawn(crate::listen::upstream_listen(gw.clone(), up.clone()));
            }
            tokio::spawn(crate::policy::reload_on_sighup(gw.clone()));
            tokio::spawn(crate::policy::sweep_budgets(gw.clone()));
            loop {
                tokio::select! {
                    _ = gw.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(gw.cfg.timeouts.refresh) => {}
                }
                for up in &gw.upstreams {
                    let status = gw.probe(up).await;
                    if status.healthy {
                        for kind in ListKind::ALL {
                            gw.refresh(up, kind).await;
                        }
                    }
                }
            }
        })
    }
}
