//! What principals may reach and see in one generation: its catalog, read under its scopes
//! (`[auth]`) and its visibility rules (`hide`/`show`). The handle routing, lists, discovery and
//! listen streams take instead of the whole generation.
//!
//! Takes the catalog, the authenticator and the governor one generation holds; gives the
//! upstreams a principal may reach, whether one of them serves a family, and the current
//! generation's [`Reach`] for a stream that outlives a reload. Refuses nothing: each caller
//! answers for what a principal may not reach (as unknown, or 403 with the scope to ask for).

use std::sync::Arc;

use super::Catalog;
use crate::auth::{Authenticator, Principal};
use crate::policy::Governor;
use crate::upstream::Upstream;

/// One generation's catalog, scopes and visibility rules.
pub struct Reach {
    /// The upstreams and what Sluice knows of them.
    pub catalog: Arc<Catalog>,
    /// Who may reach which upstream (`[auth]` scopes).
    pub auth: Arc<Authenticator>,
    /// The visibility rules (and the rest of policy, for the stages that judge calls).
    pub governor: Arc<Governor>,
}

impl Reach {
    /// The current generation's (`self` once serving ended): a stream judges each event by the
    /// config serving now, a reload's included.
    pub fn latest(self: &Arc<Self>) -> Arc<Reach> {
        self.catalog
            .current
            .upgrade()
            .and_then(|c| c.reach())
            .unwrap_or_else(|| self.clone())
    }

    /// The upstreams `p` may reach (its scopes), in config order.
    pub fn reachable<'a>(&'a self, p: &'a Principal) -> impl Iterator<Item = &'a Arc<Upstream>> {
        self.catalog
            .upstreams
            .iter()
            .filter(move |u| self.auth.may_reach(p, &u.name))
    }

    /// Whether an upstream `p` may reach serves `cap`.
    pub fn serves_for(&self, p: &Principal, cap: &str) -> bool {
        self.reachable(p).any(|u| u.serves(cap))
    }

    /// The upstream called `name`.
    pub fn upstream(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.catalog.upstream(name)
    }

    /// What `p` reaches: this, with each `oauth` upstream they signed in to replaced by their
    /// own (`Catalog::for_principal`); this itself when the config has no such upstream.
    pub async fn for_principal(self: &Arc<Self>, p: &Principal) -> Arc<Reach> {
        if !self.catalog.per_user {
            return self.clone();
        }
        match self.catalog.for_principal(p).await {
            Some(catalog) => Arc::new(Reach {
                catalog,
                auth: self.auth.clone(),
                governor: self.governor.clone(),
            }),
            None => self.clone(),
        }
    }
}
