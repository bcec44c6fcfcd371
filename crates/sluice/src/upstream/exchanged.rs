//! An upstream each user reaches with the token the company's identity provider gives Sluice
//! for theirs (`[upstream.auth] mode = "token_exchange"`): the configured upstream is a
//! placeholder with no tools of its own; each principal who calls with a JWT gets an upstream
//! of their own, built from the same config, whose every request carries the token exchanged
//! for their JWT (`oauth::exchange`), with its own tables, health and sessions.
//!
//! Takes the configured upstream and a principal; gives that principal's upstream
//! ([`PerPrincipal::instance`], built on first use; `None` for a principal without a JWT: an
//! API key). Bounded: [`MAX_PRINCIPALS`] upstreams (beyond, one is dropped and built again on
//! its principal's next call). Refuses nothing: a principal without a JWT is routed to the
//! placeholder, where the policy stage refuses the call (`Refusal::IdpTokenNeeded`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::oauth::exchange::{Exchange, MAX_PRINCIPALS};
use super::Upstream;
use crate::auth::Principal;

/// The principals of one `token_exchange` upstream and their upstreams.
pub struct PerPrincipal {
    /// Their JWTs and exchanged tokens.
    pub exchange: Arc<Exchange>,
    instances: Mutex<HashMap<String, Arc<Upstream>>>,
}

impl PerPrincipal {
    /// The per-principal state of an upstream exchanging tokens by `exchange`.
    pub fn new(exchange: Exchange) -> Self {
        PerPrincipal {
            exchange: Arc::new(exchange),
            instances: Mutex::new(HashMap::new()),
        }
    }

    /// `p`'s own upstream, built from `template`'s config (`fresh`: whether it was built now
    /// and must be probed); `None` when `p` came without a JWT. Notes the JWT `p` came with:
    /// the next exchange is of that one.
    pub fn instance(&self, template: &Upstream, p: &Principal) -> Option<(Arc<Upstream>, bool)> {
        let subject = p.subject.as_ref()?;
        self.exchange.subject(p.id(), subject);
        let mut all = self.instances.lock().ok()?;
        if let Some(u) = all.get(p.id()) {
            return Some((u.clone(), false));
        }
        if all.len() >= MAX_PRINCIPALS {
            if let Some(k) = all.keys().next().cloned() {
                all.remove(&k);
            }
        }
        let mut up =
            Upstream::new(&template.config, 0, Default::default(), Default::default()).ok()?;
        up.exchange = None;
        up.exchanged_for = Some((self.exchange.clone(), p.id().to_owned()));
        let up = Arc::new(up);
        all.insert(p.id().to_owned(), up.clone());
        Some((up, true))
    }

    /// Drops `principal`'s upstream (its first probe failed: the next call builds and probes
    /// another).
    pub fn forget(&self, principal: &str) {
        if let Ok(mut all) = self.instances.lock() {
            all.remove(principal);
        }
    }
}
