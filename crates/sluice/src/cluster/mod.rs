//! Replicas that behave as one (`[cluster]`): what they share in Redis, and who they are.
//!
//! Takes the `[cluster]` settings; gives [`Cluster`]: the shared store ([`shared`]), this
//! replica's id and internal URL, the fail mode while Redis is unreachable, the signed headers
//! one replica sends another ([`peer`]) and the grammar every replica name meets before use
//! ([`replica`], declared with the config that checks `cluster.id`). The forward of a request
//! to its owner is [`handoff`](crate::handoff), the listener that serves such forwards and
//! what the owner may serve [`internal`](crate::internal): both use this store, it names
//! neither. Refuses, through the caller, a governed request while Redis is unreachable under
//! `on_redis_error = "closed"` (`Refusal::SharedState` in `policy`); under `"local"` it counts
//! the fallback and the caller uses its per-process state.

pub mod peer;
pub use crate::config::replica;
pub mod shared;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::config::OnRedisError;
pub use shared::{Charged, Rate, Shared, Unavailable};

/// How often a replica renews its entry in the registry, and how long the entry outlives it.
pub const HEARTBEAT: Duration = Duration::from_secs(2);
/// A replica that missed this long of heartbeats is gone to the others.
pub const REGISTRY_TTL: Duration = Duration::from_secs(6);

/// One replica's view of the cluster.
pub struct Cluster {
    /// The settings.
    pub cfg: crate::config::Cluster,
    /// Redis.
    pub shared: Shared,
    /// Where others reach this replica's internal listener (set once it is bound).
    advertise: OnceLock<String>,
    /// Internal URLs of other replicas seen in the registry (used while Redis is unreachable
    /// under `local`), bounded by [`MAX_KNOWN`].
    known: dashmap::DashMap<String, String>,
    /// Redis commands that failed or timed out.
    pub redis_errors: AtomicU64,
    /// Decisions taken on per-process state because Redis was unreachable (`local`).
    pub fallbacks: AtomicU64,
    /// Requests forwarded to their owner, and those whose owner could not be reached.
    pub forwarded: [AtomicU64; 2],
    /// Bumped when Redis comes back after this replica found it unreachable, or started again
    /// with nothing kept: what lives only in Redis must be written again (bridge B's records).
    pub recovered: tokio::sync::watch::Sender<u64>,
    /// Set when a decision found Redis unreachable (the heartbeat may not have).
    missed: std::sync::atomic::AtomicBool,
    /// Nonces of forwards received, kept past their signature's freshness: a replay is refused.
    pub peer_nonces: crate::state::nonces::Nonces,
}

/// The most forward nonces held at once (a full store refuses forwards, as replays).
const MAX_PEER_NONCES: usize = 1 << 18;

/// The most other replicas' URLs remembered.
const MAX_KNOWN: usize = 1024;

/// What a governed decision does without Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Refuse the request (retryable).
    Refuse,
    /// Decide on this process's own state.
    Local,
}

impl Cluster {
    /// The cluster of `cfg` (no connection is made until first use).
    pub fn new(cfg: &crate::config::Cluster) -> Result<Cluster, String> {
        Ok(Cluster {
            shared: Shared::new(&cfg.redis_url, cfg.redis_timeout)?,
            cfg: cfg.clone(),
            advertise: OnceLock::new(),
            known: dashmap::DashMap::new(),
            redis_errors: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            forwarded: [AtomicU64::new(0), AtomicU64::new(0)],
            peer_nonces: crate::state::nonces::Nonces::new(MAX_PEER_NONCES),
            recovered: tokio::sync::watch::channel(0).0,
            missed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// This replica's id.
    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    /// The ids of the replicas this one knows of (its heartbeat's directory), itself included.
    pub fn replicas(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.known.iter().map(|e| e.key().clone()).collect();
        if !ids.iter().any(|i| i == self.id()) {
            ids.push(self.id().to_owned());
        }
        ids.sort();
        ids
    }

    /// Sets this replica's internal URL from the bound listener (the configured
    /// `advertise_url` wins).
    pub fn bound(&self, addr: std::net::SocketAddr) -> &str {
        self.advertise.get_or_init(|| {
            self.cfg
                .advertise_url
                .clone()
                .unwrap_or_else(|| format!("http://{addr}"))
        })
    }

    /// This replica's internal URL, once its listener is bound.
    pub fn advertised(&self) -> Option<&str> {
        self.advertise.get().map(String::as_str)
    }

    /// What to do after Redis failed `what`: counted, logged, and the fail mode applied.
    pub fn unavailable(&self, what: &'static str) -> Fallback {
        self.redis_errors.fetch_add(1, Ordering::Relaxed);
        self.missed.store(true, Ordering::Relaxed);
        match self.cfg.on_redis_error {
            OnRedisError::Closed => {
                tracing::warn!(
                    decision = what,
                    "Redis unreachable: governed request refused (cluster.on_redis_error = closed)"
                );
                Fallback::Refuse
            }
            OnRedisError::Local => {
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(decision = what, "Redis unreachable: deciding on this replica's own state (cluster.on_redis_error = local)");
                Fallback::Local
            }
        }
    }

    /// Where replica `id` is reached: the registry, or (Redis unreachable) the last URL seen.
    /// `Ok(None)`: it is not registered (gone).
    pub async fn locate(&self, id: &str) -> Result<Option<String>, Unavailable> {
        match self.shared.lookup(id).await {
            Ok(Some(url)) => {
                if self.known.len() < MAX_KNOWN || self.known.contains_key(id) {
                    self.known.insert(id.to_owned(), url.clone());
                }
                Ok(Some(url))
            }
            Ok(None) => {
                self.known.remove(id);
                Ok(None)
            }
            Err(e) => self.known.get(id).map(|u| Some(u.clone())).ok_or(e),
        }
    }

    /// Warns when Redis may evict keys: an evicted nonce would make a used state usable again,
    /// an evicted budget would start over.
    async fn check_eviction(&self) {
        match self.shared.eviction_policy().await.as_deref() {
            Some("noeviction") | None => {}
            Some(policy) => tracing::warn!(
                policy = crate::mcp::recorded::token(policy),
                "Redis maxmemory-policy is not noeviction: under memory pressure it may evict single-use nonces and budgets; set maxmemory-policy noeviction (or give Sluice its own Redis)"
            ),
        }
    }

    /// Renews this replica's registry entry every [`HEARTBEAT`] until `stop`, then removes it.
    pub async fn heartbeat(self: std::sync::Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let Some(url) = self.advertised().map(str::to_owned) else {
            return;
        };
        let mut tick = tokio::time::interval(HEARTBEAT);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut was_down, mut checked, mut epoch) = (false, false, None::<String>);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => break,
            }
            match self.shared.register(&self.cfg.id, &url, REGISTRY_TTL).await {
                Ok(reg) => {
                    let restarted = epoch.as_ref().is_some_and(|e| *e != reg.epoch);
                    epoch = Some(reg.epoch);
                    if restarted || was_down || self.missed.swap(false, Ordering::Relaxed) {
                        self.recovered.send_modify(|n| *n += 1);
                    }
                    // Redis's reply: only ids that meet the grammar are kept.
                    for (id, url) in reg
                        .directory
                        .into_iter()
                        .filter(|(id, _)| replica::is_valid(id))
                    {
                        if self.known.len() < MAX_KNOWN || self.known.contains_key(&id) {
                            self.known.insert(id, url);
                        }
                    }
                    if !checked {
                        checked = true;
                        self.check_eviction().await;
                    }
                    if was_down {
                        was_down = false;
                        tracing::info!(replica = %self.cfg.id, "Redis reachable again: shared budgets and single use resumed");
                    }
                }
                Err(_) => {
                    self.redis_errors.fetch_add(1, Ordering::Relaxed);
                    was_down = true;
                }
            }
        }
        let _ = self.shared.deregister(&self.cfg.id).await;
    }
}
