//! The listen hub: the changes upstreams announce, fanned out to client listens, and the
//! resource URIs client listens want, per principal.
//!
//! Takes upstreams' changes and listens' URI sets; gives each listener the changes (tagged with
//! their upstream) and each upstream listen the URIs it is to subscribe to. Refuses (leaves
//! out, with a warning) URIs past 16 × `limits.max_resource_subscriptions` in all or past that
//! limit for one principal.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, Notify};

/// The longest resource URI a listen may subscribe to: every upstream listen repeats the set.
pub const MAX_URI: usize = 2048;

pub use crate::mcp::lists::Change;

/// A change and the upstream it came from (listeners see only the upstreams their principal
/// may reach).
#[derive(Debug, Clone)]
pub struct Published {
    /// The upstream that announced it.
    pub upstream: Arc<str>,
    /// What changed.
    pub change: Change,
    /// When the upstream's notification arrived (before Sluice fetched the list again): a
    /// table fetched before it does not show the change.
    pub announced: std::time::Instant,
}

/// The fan-out point between upstream and client listen streams.
pub struct Hub {
    tx: broadcast::Sender<Published>,
    /// Resource URIs clients subscribed to: who wants each, and how many of their listens.
    wanted: Mutex<Wanted>,
    /// The most URIs the hub holds (16 × `limits.max_resource_subscriptions`).
    max_wanted: usize,
    /// The most distinct URIs one principal holds across its listens.
    max_per_principal: usize,
    /// Woken when `wanted` gains a URI, so upstream listens re-subscribe.
    pub(crate) changed: Notify,
}

impl Hub {
    /// An empty hub wanting at most 16 × `max_resource_subscriptions` URIs upstream.
    pub fn new(max_resource_subscriptions: usize) -> Self {
        let max_wanted = max_resource_subscriptions.saturating_mul(16);
        Hub {
            tx: broadcast::channel(256).0,
            wanted: Mutex::new(Wanted::default()),
            max_wanted,
            max_per_principal: max_resource_subscriptions,
            changed: Notify::new(),
        }
    }

    /// Announces an upstream's change to every client listen.
    pub fn publish(&self, upstream: &str, change: Change, announced: std::time::Instant) {
        let _ = self.tx.send(Published {
            upstream: upstream.into(),
            change,
            announced,
        });
    }

    /// A receiver for changes from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Published> {
        self.tx.subscribe()
    }

    /// Registers resource URIs a principal's listen wants (a URI new to the hub only while it
    /// is under its cap, and one new to the principal only while the principal is under its
    /// own); returns a guard that releases the ones registered.
    pub fn want(self: &Arc<Self>, who: &crate::auth::Principal, uris: &[String]) -> WantGuard {
        let principal = who.id();
        let (mut grew, mut kept, mut refused) = (false, Vec::with_capacity(uris.len()), 0usize);
        if let Ok(mut w) = self.wanted.lock() {
            for u in uris {
                let held = w.by_principal.get(principal).copied().unwrap_or(0);
                let entry = w.by_uri.get(u);
                let new_to_principal = entry.is_none_or(|p| !p.contains_key(principal));
                if (entry.is_none() && w.by_uri.len() >= self.max_wanted)
                    || (new_to_principal && held >= self.max_per_principal)
                {
                    refused += 1;
                    continue;
                }
                grew |= entry.is_none();
                if new_to_principal {
                    *w.by_principal.entry(principal.to_owned()).or_insert(0) += 1;
                }
                w.by_uri
                    .entry(u.clone())
                    .or_default()
                    .entry(principal.to_owned())
                    .or_insert_with(|| (0, who.clone()))
                    .0 += 1;
                kept.push(u.clone());
            }
        }
        if refused > 0 {
            tracing::warn!(
                refused,
                limit = self.max_wanted,
                per_principal = self.max_per_principal,
                "resource URIs not subscribed upstream: the hub holds 16 x limits.max_resource_subscriptions, a principal that many"
            );
        }
        if grew {
            self.changed.notify_waiters();
        }
        WantGuard {
            hub: self.clone(),
            principal: principal.to_owned(),
            uris: kept,
        }
    }

    /// The wanted URIs for which `keep(principal, uri)` holds for some principal that wants it.
    pub(crate) fn wanted_where(
        &self,
        keep: impl Fn(&crate::auth::Principal, &str) -> bool,
    ) -> Vec<String> {
        let Ok(w) = self.wanted.lock() else {
            return Vec::new();
        };
        w.by_uri
            .iter()
            .filter(|(u, who)| who.values().any(|(_, p)| keep(p, u)))
            .map(|(u, _)| u.clone())
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn wanted(&self) -> Vec<String> {
        self.wanted_where(|_, _| true)
    }
}

/// Who wants which resource URIs.
#[derive(Default)]
struct Wanted {
    /// URI → principal id → how many of its listens want it (and the principal, whose scopes
    /// decide which upstreams hear of the URI).
    by_uri: BTreeMap<String, BTreeMap<String, (usize, crate::auth::Principal)>>,
    /// Principal → how many distinct URIs it wants.
    by_principal: std::collections::HashMap<String, usize>,
}

impl Default for Hub {
    /// A hub for the default `limits.max_resource_subscriptions` (256).
    fn default() -> Self {
        Hub::new(256)
    }
}

/// Releases a client's resource subscriptions when its listen ends.
pub struct WantGuard {
    hub: Arc<Hub>,
    principal: String,
    uris: Vec<String>,
}

impl Drop for WantGuard {
    fn drop(&mut self) {
        let Ok(mut w) = self.hub.wanted.lock() else {
            return;
        };
        let Wanted {
            by_uri,
            by_principal,
        } = &mut *w;
        for u in &self.uris {
            let Some(who) = by_uri.get_mut(u) else {
                continue;
            };
            let Some((n, _)) = who.get_mut(&self.principal) else {
                continue;
            };
            *n -= 1;
            if *n == 0 {
                who.remove(&self.principal);
                if let Some(c) = by_principal.get_mut(&self.principal) {
                    *c -= 1;
                    if *c == 0 {
                        by_principal.remove(&self.principal);
                    }
                }
            }
            if who.is_empty() {
                by_uri.remove(u);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_wants_at_most_sixteen_times_the_limit_and_keeps_what_it_has() {
        let hub = Arc::new(Hub::new(2));
        let first: Vec<String> = (0..40).map(|i| format!("mock://{i}")).collect();
        let who = |id: &str| crate::auth::Principal {
            id: id.into(),
            ..crate::auth::Principal::local()
        };
        let a = hub.want(&who("p"), &first);
        assert_eq!(
            hub.wanted().len(),
            2,
            "a principal holds at most the per-listen limit"
        );
        let many: Vec<WantGuard> = (0..20)
            .map(|i| hub.want(&who(&format!("p{i}")), &first[2 * i..2 * i + 2]))
            .collect();
        assert_eq!(hub.wanted().len(), 32, "16 x 2 in all");
        drop(many);
        assert_eq!(hub.wanted().len(), 2);
        let again = hub.want(&who("q"), &first[..5]);
        assert_eq!(again.uris.len(), 2, "another principal has its own share");
        drop(a);
        assert_eq!(hub.wanted().len(), 2, "the URIs the second listen holds");
        drop(again);
        assert!(
            hub.wanted().is_empty(),
            "a refused URI was never counted, so nothing is left"
        );
    }
}
