//! What lives as long as the process, whatever config is current: the HTTP client, the listen
//! hub, audit, metrics, bridge B's sessions, the open client streams, readiness, the shutdown
//! token, the list-changes channel, and [`Live`], which holds the current [`Generation`] and
//! those a reload retired while they drain.
//!
//! Takes the restart-only parts of the first config (the client's timeouts, the caps of
//! streams and subscriptions, bridge B's keys, the audit sink); gives one `Arc<Runtime>` every
//! generation shares, so a reload builds only what one config holds. Refuses nothing: the
//! config was checked (`gateway::preflight`) before it is built.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Generation;
use crate::catalog::hub::Hub;
use crate::config::Config;
use crate::upstream::client::HttpClient;
use crate::upstream::discover;
use crate::upstream::legacy::changes::ListChanged;

/// Everything that outlives a config generation.
pub struct Runtime {
    /// The pooled upstream client.
    pub client: HttpClient,
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
    /// The audit log.
    pub audit: crate::audit::Audit,
    /// Prometheus metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Sessions of 2025-11-25 clients (bridge B).
    pub legacy_sessions: Arc<crate::client_sessions::Sessions>,
    /// Open client streams, per principal and in total.
    pub streams: Arc<crate::streams::Streams>,
    /// The current generation (and the retired ones while they drain).
    pub live: Arc<Live>,
    /// Where 2025-11-25 sessions report their upstreams' list changes (read by
    /// `catalog::changes::report_changes`, one task for every generation).
    pub changes: ListChanged,
    /// Each principal's tokens at `oauth` upstreams, sealed (in Redis under `[cluster]`);
    /// kept across reloads.
    pub vault: Arc<crate::upstream::oauth::vault::Vault>,
    /// What `[auth.login]` remembers (clients, sign-ins, codes, refresh families): in Redis
    /// under `[cluster]`, else in memory; kept across reloads.
    pub login_store: Arc<crate::login::store::Store>,
    /// Operators' revocations of Sluice's own access tokens (`[auth.login]`), kept across
    /// reloads (under `[cluster]`, followed from Redis: `login/revocations.rs`).
    pub revoked: Arc<crate::auth::revoked::Revoked>,
    /// The operator plane's events (health, held calls, pins, reloads).
    pub events: Arc<crate::events::Events>,
    /// Tool pins (`[pins]`): in Redis under `[cluster]`, else in `[pins] file` or memory; the
    /// store is chosen at start and kept across reloads.
    pub pins: Arc<crate::pins::Pins>,
    /// Calls held for an operator's approval (listed in Redis under `[cluster]`).
    pub approvals: Arc<crate::approvals::Registry>,
}

impl Runtime {
    /// The process's parts for the first config (`keys`: bridge B's and the vault's, from
    /// `[state]`; `cluster`: the replicas' shared state, if any).
    pub(super) fn new(
        cfg: &Config,
        keys: crate::state::Keys,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Arc<Runtime> {
        let client = HttpClient::new(
            cfg.timeouts.connect,
            cfg.timeouts.response,
            cfg.limits.max_response_bytes,
            cfg.limits.max_sse_event_bytes,
            cfg.timeouts.stream_idle,
        );
        let (changes, changes_rx) = ListChanged::channel();
        let login_store = match &cluster {
            Some(c) => crate::login::store::Store::shared(c.clone()),
            None => crate::login::store::Store::default(),
        };
        let events = Arc::new(crate::events::Events::new(&cfg.state.replica));
        let audit = crate::audit::Audit::keeping(
            cfg.audit.enabled,
            Some(cfg.audit.sink.clone()),
            cfg.audit.capacity,
            cfg.admin.as_ref().map_or(0, |a| a.recent_audit),
        );
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let pins = pins(cfg, cluster.clone(), &events, &audit, &metrics);
        let bus = events.clone();
        let announce: crate::approvals::Announce =
            Box::new(move |v| bus.publish(crate::events::Kind::Approval, v));
        let approvals = crate::approvals::Registry::new(announce, metrics.clone(), cluster.clone());
        let vault = crate::upstream::oauth::vault::Vault::new(&keys, cluster);
        Arc::new(Runtime {
            approvals,
            client,
            server_info: discover::server_info(),
            server_info_json: discover::server_info().to_string(),
            hub: Arc::new(Hub::new(cfg.limits.max_resource_subscriptions)),
            ready: Arc::new(tokio::sync::watch::Sender::new(false)),
            shutdown: CancellationToken::new(),
            audit,
            metrics,
            legacy_sessions: Arc::new(crate::client_sessions::Sessions::new(&cfg.bridge, keys)),
            streams: crate::streams::Streams::new(
                cfg.limits.max_streams,
                cfg.limits.max_streams_per_principal,
            ),
            live: Arc::new(Live::new(changes_rx)),
            changes,
            vault: Arc::new(vault),
            login_store: Arc::new(login_store),
            revoked: Arc::default(),
            events,
            pins,
        })
    }
}

/// The process's pins, telling changes on `events`, `audit` and `metrics` (`preflight` read the
/// pins file; one that went bad since is warned about and the pins start empty in memory).
fn pins(
    cfg: &Config,
    cluster: Option<Arc<crate::cluster::Cluster>>,
    events: &Arc<crate::events::Events>,
    audit: &crate::audit::Audit,
    metrics: &Arc<crate::metrics::Metrics>,
) -> Arc<crate::pins::Pins> {
    let bus = events.clone();
    let tell = crate::pins::Tell {
        event: Some(Arc::new(move |v| bus.publish(crate::events::Kind::Pin, v))),
        audit: Some(audit.clone()),
        metrics: Some(metrics.clone()),
    };
    let cluster = cluster.filter(|_| cfg.pins.is_some());
    let pins = crate::pins::Pins::new(cfg.pins.as_ref(), cluster, tell.clone());
    Arc::new(pins.unwrap_or_else(|why| {
        tracing::error!(reason = %crate::escape::Escaped(&why), "pins file unreadable since the config was checked: pins start empty, in memory");
        crate::pins::Pins::in_memory(tell)
    }))
}

/// The current generation, swapped whole by a reload. Requests and long-lived streams take
/// [`Generation::latest`]; a request in flight keeps the generation it started on.
pub struct Live {
    current: arc_swap::ArcSwapOption<Generation>,
    /// One reload at a time.
    pub(crate) reloading: tokio::sync::Mutex<()>,
    /// Where the config was read, to read it again on SIGHUP (set by `sluice serve`).
    pub source: std::sync::OnceLock<crate::config::Source>,
    /// Generations a reload replaced, while their drain runs: a round parked on an upstream
    /// they held is still routed there, and shutdown ends their processes too.
    retiring: std::sync::Mutex<Vec<Arc<Generation>>>,
    /// Set once serving ended: no reload makes a generation current after that.
    closed: std::sync::atomic::AtomicBool,
    /// How many generations are draining (`retiring`'s length).
    draining: std::sync::atomic::AtomicUsize,
    /// The receiving end of [`Runtime::changes`], until the background work takes it.
    changes: std::sync::Mutex<Option<Announcements>>,
}

impl crate::catalog::Current for Live {
    fn reach(&self) -> Option<Arc<crate::catalog::Reach>> {
        self.get().map(|g| g.reach.clone())
    }
}

/// The list changes 2025-11-25 sessions announce, as the catalog's task reads them.
pub type Announcements = tokio::sync::mpsc::Receiver<crate::upstream::legacy::changes::Announced>;

impl Live {
    /// No generation yet; `changes` kept for the task that reports them.
    fn new(changes: Announcements) -> Live {
        Live {
            current: arc_swap::ArcSwapOption::empty(),
            reloading: tokio::sync::Mutex::new(()),
            source: std::sync::OnceLock::new(),
            retiring: std::sync::Mutex::new(Vec::new()),
            closed: std::sync::atomic::AtomicBool::new(false),
            draining: std::sync::atomic::AtomicUsize::new(0),
            changes: std::sync::Mutex::new(Some(changes)),
        }
    }

    /// Makes `gw` the current generation; `false` once serving ended (nothing changed).
    pub(crate) fn set(&self, gw: &Arc<Generation>) -> bool {
        let _one = self.retiring.lock();
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        self.current.store(Some(gw.clone()));
        true
    }

    /// The current generation (`None` once serving ended).
    pub fn get(&self) -> Option<Arc<Generation>> {
        self.current.load_full()
    }

    /// The list changes sessions announce, once: for the task that reports them
    /// (`background.rs`); until it is taken, a session's report waits while the channel is full.
    pub(crate) fn take_changes(&self) -> Option<Announcements> {
        self.changes.lock().ok()?.take()
    }

    /// Notes a generation whose drain starts.
    pub(crate) fn retiring(&self, old: &Arc<Generation>) {
        if let Ok(mut r) = self.retiring.lock() {
            r.push(old.clone());
            self.draining
                .store(r.len(), std::sync::atomic::Ordering::Release);
        }
    }

    /// Forgets a generation whose drain ended.
    pub(crate) fn retired_done(&self, old: &Arc<Generation>) {
        if let Ok(mut r) = self.retiring.lock() {
            r.retain(|g| !Arc::ptr_eq(g, old));
            self.draining
                .store(r.len(), std::sync::atomic::Ordering::Release);
        }
    }

    /// Whether any generation is draining (one atomic load: the routing of every retry asks).
    pub fn draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// The generations still draining, newest first.
    pub fn retired(&self) -> Vec<Arc<Generation>> {
        self.retiring
            .lock()
            .map(|r| r.iter().rev().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets the current generation and the draining ones (at the end of serving: they hold
    /// this `Live`); no reload applies after it.
    pub fn clear(&self) {
        let mut r = self.retiring.lock();
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.current.store(None);
        if let Ok(r) = r.as_mut() {
            r.clear();
        }
        self.draining.store(0, std::sync::atomic::Ordering::Release);
    }
}
