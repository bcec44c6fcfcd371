//! The composition root: one config generation ([`Generation`]: the config, upstreams, the
//! federation codec, bridge A, forwarding, authentication, the governor) on the [`Runtime`] that
//! outlives it (client, hub, audit, metrics, bridge B's sessions, streams, `Live`).
//!
//! Takes a [`Config`]; gives one `Arc<Generation>` every request borrows (background work tied
//! to its shutdown token is in `background.rs`). A reload (`reload.rs`) builds the next one with
//! [`Generation::next`]: a new config, auth, names, governor and upstream list on the same
//! runtime, with unchanged upstreams, bridge A's sessions, parked exchanges and consumed states
//! shared; [`Live`] holds the current one. Refuses to build when the config fails [`preflight`]
//! (an upstream's settings cannot be used, a security feature configured empty, an unopenable
//! audit sink).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::catalog::{Catalog, Reach};
use crate::config::Config;
use crate::route::names::Names;
use crate::upstream::Upstream;

mod runtime;

pub use runtime::{Announcements, Live, Runtime};

/// What one config generation holds, and the [`Runtime`] every generation shares.
pub struct Generation {
    /// What outlives this config.
    pub rt: Arc<Runtime>,
    /// The validated config.
    pub cfg: Config,
    /// The upstreams, their names and what Sluice knows of them.
    pub catalog: Arc<Catalog>,
    /// The catalog under this generation's scopes and visibility rules: the handle routing,
    /// lists, discovery and listen streams take.
    pub reach: Arc<Reach>,
    /// Bridge A: legacy sessions, parked exchanges, sealing keys.
    pub bridge: Arc<crate::bridge::Bridge>,
    /// Forwarding to modern upstreams.
    pub forwarder: Arc<crate::forward::Forwarder>,
    /// Authentication (API keys, JWT) and the resource metadata.
    pub auth: Arc<crate::auth::Authenticator>,
    /// Approval rules and budgets.
    pub governor: Arc<crate::policy::Governor>,
    /// The authorization server front (`[auth.login]`).
    pub login: Option<Arc<crate::login::Login>>,
    /// This generation's number: 1 at start, one more per applied reload.
    pub generation: u64,
    /// When it was built (Unix ms).
    pub loaded_at_ms: u64,
    /// Cancelled when a reload changes who may authenticate: the client streams opened under
    /// this generation's `[auth]` end, so their clients come back with credentials that hold.
    /// Shared with the next generation while `[auth]` stays the same.
    pub revoked: CancellationToken,
}

/// Whether two `[auth]` sections certainly accept the same credentials: written the same
/// (which upstream each scope reaches aside: streams judge that per event, on the current
/// generation), and reading no key or secret from a file, which may have changed under them
/// (the process environment cannot).
pub(crate) fn same_auth(a: &crate::config::AuthConfig, b: &crate::config::AuthConfig) -> bool {
    let files = |c: &crate::config::AuthConfig| {
        c.jwt.as_ref().is_some_and(|j| {
            j.hs256_secret_file.is_some() || j.jwks_file.is_some() || !j.public_keys.is_empty()
        })
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

/// Everything a gateway reads from the environment and the disk (credentials, keys, policy
/// files, the audit file), checked the same way by `sluice serve` and `sluice check`.
pub struct Parts {
    upstreams: Vec<Arc<Upstream>>,
    auth: crate::auth::Authenticator,
    governor: crate::policy::Governor,
    keys: crate::state::Keys,
    /// `[auth.login]`'s token signer and IdP client secret.
    login: Option<(Arc<crate::auth::issued::Issued>, Option<String>)>,
}

/// The login front of `cfg` on `rt`.
fn login_front(
    cfg: &Config,
    rt: &Runtime,
    parts: Option<(Arc<crate::auth::issued::Issued>, Option<String>)>,
) -> Option<Arc<crate::login::Login>> {
    let (issued, secret) = parts?;
    issued.use_revocations(&rt.revoked);
    let l = cfg.auth.login.as_ref()?;
    let (store, http) = (rt.login_store.clone(), rt.client.clone());
    let front = crate::login::Login::new(l, &cfg.auth, store, issued, http, secret);
    Some(Arc::new(front))
}

/// `u`, an `oauth` upstream's browsers sent back to where Sluice listens unless it says where
/// (only a browser on this machine reaches a loopback address: elsewhere it must say).
fn with_redirect(
    u: &crate::config::UpstreamConfig,
    listen: std::net::SocketAddr,
) -> Result<crate::config::UpstreamConfig, String> {
    let mut u = u.clone();
    let oauth = crate::config::AuthMode::Oauth;
    let path = crate::config::CALLBACK_PATH;
    if let Some(a) = u
        .auth
        .as_mut()
        .filter(|a| a.mode == oauth && a.redirect_uri.is_none())
    {
        if !listen.ip().is_loopback() {
            return Err(format!("upstream '{}': mode = \"oauth\" needs redirect_uri when Sluice listens on {listen}: the URL where users' browsers reach Sluice, ending in {path}", u.name));
        }
        a.redirect_uri = Some(format!("http://{listen}{path}"));
    }
    Ok(u)
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
        .map(|u| {
            let u = with_redirect(u, cfg.listen)?;
            Upstream::new(
                &u,
                cfg.limits.max_response_bytes,
                cfg.timeouts.response,
                cfg.timeouts.shutdown,
            )
            .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut auth = crate::auth::Authenticator::new(&cfg.auth)?;
    // Across sources: an admin key must not be an MCP key read from `api_keys_env` either.
    if let Some(admin) = &cfg.admin {
        if let Some(k) = admin.keys.iter().find(|k| auth.holds_key_hash(&k.sha256)) {
            return Err(format!(
                "[[admin.keys]] {:?} is also an MCP API key ([auth] api_keys_env): an MCP client's key must not open the admin plane; make a key of its own",
                k.name
            ));
        }
    }
    let keys = crate::state::keys_from(&cfg.state.keys, cfg.state.key_env.as_deref())?;
    let login = match &cfg.auth.login {
        Some(l) => {
            let secret = crate::login::client_secret(l)?;
            let issued = auth.accept_issued(keys.derived(crate::auth::issued::DOMAIN));
            issued.map(|i| (i, secret))
        }
        None => None,
    };
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
    if cfg.audit.enabled && cfg.audit.sink != "stderr" {
        check_sink(&cfg.audit.sink)?;
    }
    if let Some(f) = cfg.pins.as_ref().and_then(|p| p.file.as_deref()) {
        crate::pins::file::read(std::path::Path::new(f))?;
    }
    Ok(Parts {
        upstreams,
        auth,
        governor,
        keys,
        login,
    })
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

impl Generation {
    /// Builds the state (no I/O yet but reading what the config points at: see [`preflight`]).
    pub fn new(cfg: Config) -> Result<Arc<Self>, String> {
        let Parts {
            upstreams,
            auth,
            governor,
            keys,
            login,
        } = preflight(&cfg)?;
        let rt = Runtime::new(&cfg, keys.clone(), governor.cluster.clone());
        let login = login_front(&cfg, &rt, login);
        for up in &upstreams {
            up.use_vault(&rt.vault);
            up.health.use_events(&rt.events);
        }
        rt.client.record_versions(cfg.http_versions());
        let governor = Arc::new(governor);
        let bridge = Arc::new(crate::bridge::Bridge::new(
            &cfg,
            rt.client.clone(),
            keys.clone(),
            governor.clone(),
            rt.server_info.clone(),
        ));
        let forwarder = Arc::new(crate::forward::Forwarder {
            client: rt.client.clone(),
            response: cfg.timeouts.response,
            keys,
            governor: governor.clone(),
            server_info_json: rt.server_info_json.clone(),
        });
        let catalog = Arc::new(Catalog::new(
            &cfg,
            upstreams,
            catalog_parts(&rt, &bridge, &cfg),
        ));
        let auth = Arc::new(auth);
        let reach = Arc::new(Reach {
            catalog: catalog.clone(),
            auth: auth.clone(),
            governor: governor.clone(),
        });
        let gw = Arc::new(Generation {
            rt,
            governor,
            auth,
            bridge,
            forwarder,
            catalog,
            reach,
            login,
            revoked: CancellationToken::new(),
            generation: 1,
            loaded_at_ms: crate::state::now_ms(),
            cfg,
        });
        let _ = gw.rt.live.set(&gw);
        Ok(gw)
    }

    /// The next generation for a reloaded `cfg` (checked by [`preflight`] as at startup): its
    /// upstreams are this one's where [`Upstream::same_as`] says nothing changed, new ones
    /// otherwise (not probed yet: `reload.rs` probes them before it makes the generation
    /// current). Nothing is started or changed here but the client's record of each host's HTTP
    /// version, to which the new config's hosts are added (`reload.rs` first refuses a config
    /// that gives a recorded host the other version; a dropped result leaves its hosts recorded,
    /// so a later reload may not give them the other version either).
    pub fn next(&self, cfg: Config) -> Result<Arc<Generation>, String> {
        let Parts {
            upstreams,
            auth,
            governor: _,
            keys: _,
            login,
        } = preflight(&cfg)?;
        let login = login_front(&cfg, &self.rt, login);
        // Tables hold public names: when names are spelled differently now (the prefix or the
        // separator changed, or `prefix = "auto"` and the number of upstreams), none is kept.
        let names = Names::new(cfg.prefixed(), &cfg.separator);
        let renamed = names != self.catalog.names;
        let upstreams = upstreams
            .into_iter()
            .map(|fresh| match self.upstream(&fresh.name) {
                Some(old) if !renamed && old.same_as(&fresh) => old.clone(),
                _ => {
                    fresh.use_vault(&self.rt.vault);
                    fresh.health.use_events(&self.rt.events);
                    fresh
                }
            })
            .collect();
        let governor = Arc::new(self.governor.next(&cfg)?);
        self.rt.client.record_versions(cfg.http_versions());
        let bridge = Arc::new(self.bridge.next(governor.clone()));
        let parts = catalog_parts(&self.rt, &bridge, &cfg);
        let catalog = Arc::new(Catalog::new(&cfg, upstreams, parts));
        let auth = Arc::new(auth);
        let reach = Arc::new(Reach {
            catalog: catalog.clone(),
            auth: auth.clone(),
            governor: governor.clone(),
        });
        Ok(Arc::new(Generation {
            rt: self.rt.clone(),
            catalog,
            reach,
            bridge,
            forwarder: Arc::new(crate::forward::Forwarder {
                governor: governor.clone(),
                ..self.forwarder.as_ref().clone()
            }),
            governor,
            auth,
            login,
            generation: self.generation + 1,
            loaded_at_ms: crate::state::now_ms(),
            revoked: if same_auth(&self.cfg.auth, &cfg.auth) {
                self.revoked.clone()
            } else {
                CancellationToken::new()
            },
            cfg,
        }))
    }

    /// The current generation (`self` once serving ended).
    pub fn latest(self: &Arc<Self>) -> Arc<Generation> {
        self.rt.live.get().unwrap_or_else(|| self.clone())
    }

    /// The policy stage's handles on this generation.
    pub fn policy(&self) -> crate::dispatch::Policy<'_> {
        crate::dispatch::Policy {
            governor: &self.governor,
            keys: &self.bridge.keys,
            park: self.cfg.bridge.park,
            replica: &self.cfg.state.replica,
            server_info: &self.rt.server_info,
        }
    }

    /// While a reload's replaced generations drain, what routing needs of them.
    pub fn retired(&self) -> Option<crate::dispatch::route::Retired<'_>> {
        let live = &self.rt.live;
        live.draining().then(|| crate::dispatch::route::Retired {
            reaches: live.retired().iter().map(|g| g.reach.clone()).collect(),
            keys: &self.bridge.keys,
            hold: self.cfg.timeouts.request,
        })
    }

    /// Dispatch's handles on this generation, for a request that reaches `reach` (this
    /// generation's, or a principal's own: `Reach::for_principal`).
    pub fn dispatcher<'a>(&'a self, reach: &'a Arc<Reach>) -> crate::dispatch::Dispatcher<'a> {
        crate::dispatch::Dispatcher {
            reach,
            policy: self.policy(),
            forwarder: &self.forwarder,
            bridge: &self.bridge,
            revoked: &self.revoked,
        }
    }

    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.catalog.upstream(name)
    }

    /// Whether Sluice has probed every upstream once.
    pub fn is_ready(&self) -> bool {
        *self.rt.ready.borrow()
    }

    /// At shutdown: parked exchanges cancelled upstream, idle legacy sessions ended (DELETE),
    /// then every stdio process ended and waited for (stdin closed, SIGTERM, SIGKILL).
    pub async fn close_upstreams(&self) {
        // A reload's retired upstreams still draining end with the rest.
        let draining: Vec<Arc<Upstream>> = self
            .rt
            .live
            .retired()
            .iter()
            .flat_map(|g| {
                g.catalog
                    .upstreams
                    .iter()
                    .filter(|u| u.retired.is_cancelled())
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .collect();
        let stdio: Vec<_> = self
            .catalog
            .upstreams
            .iter()
            .chain(&draining)
            .filter_map(|u| u.stdio.clone())
            .collect();
        // No process starts once shutdown began (a probe or a lease racing it included).
        for spec in &stdio {
            spec.end_all_now();
        }
        crate::bridge::shutdown(&self.bridge).await;
        // Every upstream's processes end together, not one upstream after another.
        for spec in &stdio {
            spec.end_all_now();
        }
        for spec in &stdio {
            spec.wait_ended().await;
        }
    }
}

/// The process's parts a generation's catalog is made of.
fn catalog_parts(
    rt: &Arc<Runtime>,
    bridge: &crate::bridge::Bridge,
    cfg: &Config,
) -> crate::catalog::Parts {
    let live: Arc<dyn crate::catalog::Current> = rt.live.clone();
    crate::catalog::Parts {
        link: crate::link::Link {
            client: rt.client.clone(),
            pool: bridge.pool.clone(),
            changes: rt.changes.clone(),
            response: cfg.timeouts.response,
            cache: crate::link::Hints::of(cfg),
        },
        hub: rt.hub.clone(),
        shutdown: rt.shutdown.clone(),
        ready: rt.ready.clone(),
        current: Arc::downgrade(&live),
        pins: crate::pins::Scope::of(&rt.pins, cfg),
    }
}
