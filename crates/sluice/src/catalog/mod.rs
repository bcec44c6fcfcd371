//! The catalog: what each upstream is and serves, as Sluice last learned it.
//!
//! Takes the configured upstreams; gives their probed status (era, capabilities) and their
//! federation tables, refreshed once at a time per table, on a lookup miss and on
//! `list_changed` within each table's refresh budget. Refuses nothing: an upstream that cannot
//! be probed or listed is marked unhealthy with a reason that names it, and the others serve
//! (a stdio upstream whose every process serves calls is busy, not down: what it was stands).

pub mod changes;
pub mod hub;
pub mod lists;
pub mod pinned;
pub mod reach;
pub mod reprobe;

use std::sync::{Arc, Weak};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::link::Link;
use crate::route::names::Names;
use crate::route::table::{ListKind, ListTable};
use crate::upstream::Upstream;
use hub::Hub;
pub use reach::Reach;

/// Where the generation serving now is found, as the stages see one ([`Reach`]): the
/// gateway's `Live` (which this module cannot name: it is above every stage), so a task or a
/// stream that outlives a reload works on the current one.
pub trait Current: Send + Sync {
    /// The catalog, scopes and rules of the generation serving now (`None` once serving ended).
    fn reach(&self) -> Option<Arc<Reach>>;
}

/// One config generation's upstreams and what Sluice knows of them, with what it takes to
/// learn more: the stages' handle on the upstreams.
pub struct Catalog {
    /// The upstreams in configured order (that order is the order of federated lists).
    pub upstreams: Vec<Arc<Upstream>>,
    /// The name prefix codec.
    pub names: Names,
    /// How Sluice speaks to them.
    pub link: Link,
    /// Listen streams: list-changed and resource-updated fan-out (one for the process).
    pub hub: Arc<Hub>,
    /// Cancelled on shutdown: the re-probers end with it.
    pub shutdown: CancellationToken,
    /// Set once every upstream has been probed (one for the process).
    ready: Arc<tokio::sync::watch::Sender<bool>>,
    /// This generation's `[timeouts]` (the re-probers' pauses, the waits for a probe, the
    /// pace of upstream listen streams).
    pub timeouts: crate::config::Timeouts,
    /// This generation's `[limits]` (list pages and items, the longest name a head mirrors).
    pub limits: crate::config::Limits,
    /// The generation serving now.
    current: Weak<dyn Current>,
    /// Whether an upstream is reached by each user as themselves (`mode = "oauth"`).
    pub per_user: bool,
    /// Tool pinning (`None`: off).
    pub pins: Option<crate::pins::Scope>,
}

/// What a [`Catalog`] is made of besides its upstreams and names (the process's parts).
pub struct Parts {
    /// How Sluice speaks to upstreams.
    pub link: Link,
    /// The listen hub.
    pub hub: Arc<Hub>,
    /// The shutdown token.
    pub shutdown: CancellationToken,
    /// Readiness.
    pub ready: Arc<tokio::sync::watch::Sender<bool>>,
    /// Where the current catalog is found.
    pub current: Weak<dyn Current>,
    /// Tool pinning (`None`: off).
    pub pins: Option<crate::pins::Scope>,
}

impl Catalog {
    /// The catalog of `upstreams` under `cfg`'s names, limits and timeouts.
    pub fn new(cfg: &crate::config::Config, upstreams: Vec<Arc<Upstream>>, parts: Parts) -> Self {
        Catalog {
            per_user: upstreams
                .iter()
                .any(|u| u.per_user.is_some() || u.exchange.is_some()),
            upstreams,
            names: Names::new(cfg.prefixed(), &cfg.separator),
            link: parts.link,
            hub: parts.hub,
            shutdown: parts.shutdown,
            ready: parts.ready,
            timeouts: cfg.timeouts.clone(),
            limits: cfg.limits.clone(),
            current: parts.current,
            pins: parts.pins,
        }
    }

    /// The catalog serving now (`self` once serving ended).
    pub fn latest(self: &Arc<Self>) -> Arc<Catalog> {
        self.current
            .upgrade()
            .and_then(|c| c.reach())
            .map_or_else(|| self.clone(), |r| r.catalog.clone())
    }

    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name == name)
    }

    /// Whether any healthy upstream advertises the server capability `cap`.
    pub fn serves(&self, cap: &str) -> bool {
        self.upstreams.iter().any(|u| u.serves(cap))
    }

    /// Probes every upstream and fetches the tables of the healthy ones.
    pub async fn probe_all(self: &Arc<Self>) {
        self.probe_each(&self.upstreams).await;
        self.ready.send_replace(true);
    }

    /// Probes each of `ups` and fetches the lists of those found healthy, all at once; starts
    /// each one's re-prober (`reprobe.rs`), which probes it again soon whenever it goes down.
    pub async fn probe_each(self: &Arc<Self>, ups: &[Arc<Upstream>]) {
        for up in ups {
            reprobe::start(self, up);
        }
        let probes = ups.iter().map(|up| self.check(up));
        futures_util::future::join_all(probes).await;
    }

    /// Probes one upstream (one probe of it at a time), fetches its lists when it is healthy,
    /// and tells a change of its health (one line: `upstream::health`).
    pub async fn check(self: &Arc<Self>, up: &Arc<Upstream>) -> crate::upstream::Status {
        let _one = up.health.probing.lock().await;
        up.health.probe_started();
        if up.per_user.is_some() || up.exchange.is_some() {
            // Each user's own upstream is probed with their token; this one only signs them in
            // (`oauth`), or serves nothing (`token_exchange`: its callers have JWTs or none).
            return self.placeholder(up);
        }
        let status = self.link.probe(up).await;
        // A stdio upstream whose every process serves calls keeps its lists as they are.
        if status.healthy && !busy(up) {
            for kind in ListKind::ALL {
                self.refresh(up, kind).await;
            }
        }
        up.report_health();
        up.health.probed.send_modify(|n| *n += 1);
        (*up.status()).clone()
    }

    /// An `oauth` upstream's placeholder: up, serving tools, with its one sign-in tool.
    fn placeholder(&self, up: &Arc<Upstream>) -> crate::upstream::Status {
        let mut caps = serde_json::Map::new();
        caps.insert("tools".into(), serde_json::json!({}));
        up.set_status(crate::upstream::Status {
            probed: true,
            healthy: true,
            discovered: Some(crate::upstream::Discovered {
                capabilities: caps,
                ..Default::default()
            }),
            ..Default::default()
        });
        let sign_in = crate::upstream::per_user::SIGN_IN;
        let table = self.names.publish(&up.name, sign_in).and_then(|public| {
            crate::upstream::per_user::PerUser::sign_in_table(&up.name, &public)
        });
        let table = table.filter(|_| up.per_user.is_some());
        if let Some(t) = table {
            up.set_list(ListKind::Tools, t);
        }
        up.health.probed.send_modify(|n| *n += 1);
        (*up.status()).clone()
    }

    /// The catalog `p` sees: each `oauth` upstream they signed in to, and each `token_exchange`
    /// one when they came with a JWT, replaced by their own (built and probed on first use);
    /// `None` when it is this one.
    pub async fn for_principal(
        self: &Arc<Self>,
        p: &crate::auth::Principal,
    ) -> Option<Arc<Catalog>> {
        let principal = p.id();
        let mut mine: Option<Vec<Arc<Upstream>>> = None;
        for (i, up) in self.upstreams.iter().enumerate() {
            if let Some(own) = self.exchanged(up, p).await {
                mine.get_or_insert_with(|| self.upstreams.clone())[i] = own;
                continue;
            }
            let Some(pu) = &up.per_user else { continue };
            let Some((own, fresh)) = pu.instance(up, principal).await else {
                continue;
            };
            if fresh {
                self.check(&own).await;
                if !pu.users.has(principal) {
                    continue; // its probe found the token refused: the placeholder stands
                }
            }
            mine.get_or_insert_with(|| self.upstreams.clone())[i] = own;
        }
        let upstreams = mine?;
        Some(Arc::new(Catalog {
            upstreams,
            names: self.names.clone(),
            link: self.link.clone(),
            hub: self.hub.clone(),
            shutdown: self.shutdown.clone(),
            ready: self.ready.clone(),
            timeouts: self.timeouts.clone(),
            limits: self.limits.clone(),
            current: self.current.clone(),
            per_user: true,
            pins: self.pins.clone(),
        }))
    }

    /// `p`'s own upstream for the `token_exchange` upstream `up` (probed when built now; one
    /// whose first probe failed is forgotten, so their next call builds and probes another).
    async fn exchanged(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        p: &crate::auth::Principal,
    ) -> Option<Arc<Upstream>> {
        let pp = up.exchange.as_ref()?;
        let (own, fresh) = pp.instance(up, p)?;
        if fresh && !self.check(&own).await.healthy {
            pp.forget(p.id());
        }
        Some(own)
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
        if up.per_user.is_some() || up.exchange.is_some() {
            return current; // the placeholder's table is Sluice's own
        }
        if !up.serves(kind.capability()) {
            up.set_list(kind, ListTable::empty());
            return up.list(kind);
        }
        match lists::fetch(self, up, kind).await {
            Ok(table) => {
                let table = pinned::withhold(self.pins.as_ref(), up, kind, table).await;
                self.warn_collisions(up, kind, &table);
                up.set_list(kind, table);
            }
            Err(why) if busy(up) => {
                tracing::debug!(upstream = %up.name, list = kind.name(), reason = %crate::escape::Escaped(&why), "list fetch skipped: every process is in use; the table stands");
            }
            Err(why) => {
                // Told as the upstream going down (once, not per list or per refresh).
                tracing::debug!(upstream = %up.name, list = kind.name(), reason = %crate::escape::Escaped(&why), "list fetch failed; serving the other upstreams");
                up.mark_failed(&why);
            }
        }
        up.list(kind)
    }

    /// Refreshes a table after a lookup missed in it, within the table's miss budget (else
    /// the current table).
    pub async fn refresh_missed(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        kind: ListKind,
    ) -> Arc<ListTable> {
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
            for item in table
                .items
                .iter()
                .filter(|i| theirs.by_key(&i.key).is_some())
            {
                tracing::warn!(
                    name = %crate::telemetry::peer_name(&item.public), first = %up.name, second = %other.name, list = kind.name(),
                    "name collision with prefixing off: calls go to the first upstream in config order; turn prefixing on or rename"
                );
            }
        }
    }
}

/// Whether `up` is a stdio upstream whose every process is in use (by calls): a request Sluice
/// could not make for itself then is no sign of the server being down.
fn busy(up: &Upstream) -> bool {
    up.stdio.as_ref().is_some_and(|s| s.saturated())
}
