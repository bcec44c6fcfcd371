//! Stage 5, governance: approval rules, budgets and call quotas per principal.
//!
//! Takes a tool call or an upstream's ask with its principal; gives allow, deny (with the rule
//! and a reason), approve (an approval round first), or a budget or quota refusal. Rules come from
//! `policies/*.toml` and are reloaded on SIGHUP (a broken file keeps the old rules).

pub mod approval;
pub mod ask;
pub mod budget;
pub mod quota;
pub mod refusal;
pub mod rules;
pub mod shape;
pub mod visibility;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

pub use budget::Budgets;
pub use quota::Quotas;
pub use refusal::Refusal;
pub use rules::{Decision, Effect, Rules, Subject};

/// Round states remembered as consumed at once (each until its expiry, `bridge.park_ms`).
const MAX_CONSUMED: usize = 1 << 20;

/// Rules and budgets, shared by all requests.
pub struct Governor {
    rules: RwLock<Arc<Rules>>,
    /// Whether the current rules hold any `hide` or `show` (read without the lock on every
    /// routed call).
    visibility: AtomicBool,
    paths: Vec<String>,
    upstreams: Vec<String>,
    /// Budgets per principal.
    pub budgets: Budgets,
    /// Per-tool call quotas per principal.
    pub quotas: Quotas,
    /// What each visibility class sees of each list.
    pub views: visibility::Views,
    /// Nonces of round states already presented (every Sluice-sealed round state is single use).
    consumed: crate::state::nonces::Nonces,
}

impl Governor {
    /// Loads the policy files and sets up the budgets.
    pub fn new(cfg: &crate::config::Config) -> Result<Governor, String> {
        let rules = Rules::load(&cfg.policies)?;
        let upstreams: Vec<String> = cfg.upstreams.iter().map(|u| u.name.clone()).collect();
        check_upstreams(&rules, &upstreams)?;
        Ok(Governor {
            visibility: AtomicBool::new(rules.has_visibility()),
            rules: RwLock::new(Arc::new(rules)),
            paths: cfg.policies.clone(),
            upstreams,
            budgets: Budgets::new(&cfg.budget, &cfg.budget_overrides),
            quotas: Quotas::new(&cfg.quotas),
            views: visibility::Views::default(),
            consumed: crate::state::nonces::Nonces::new(MAX_CONSUMED),
        })
    }

    /// The current rules.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// Whether `v` sees `item` of `upstream` (the current rules' `hide` and `show`).
    pub fn shows(&self, v: &visibility::Viewer<'_>, upstream: &str, item: &visibility::Listed<'_>) -> bool {
        !self.has_visibility() || self.rules().shows(v, upstream, item)
    }

    /// Which items of `table` `v` sees, by position (`None`: all of them); see
    /// [`visibility::Views::shown`].
    pub fn shown(
        &self,
        v: &visibility::Viewer<'_>,
        upstream: &str,
        kind: crate::route::table::ListKind,
        table: &Arc<crate::route::table::ListTable>,
    ) -> Option<Arc<[bool]>> {
        if !self.has_visibility() {
            return None;
        }
        self.views.shown(&self.rules(), v, upstream, kind, table)
    }

    /// Whether what a principal sees can depend on who it is (any `hide` or `show` rule).
    pub fn has_visibility(&self) -> bool {
        self.visibility.load(Ordering::Acquire)
    }

    /// Consumes a round state's nonce; `false` when it was presented before (a replay).
    pub fn consume_state(&self, nonce: &str, expires_ms: u64) -> bool {
        self.consumed.consume(nonce, expires_ms, crate::state::now_ms())
    }

    /// Reloads the policy files; on error keeps the old rules and says why.
    pub fn reload(&self) -> Result<usize, String> {
        let fresh = Rules::load(&self.paths)?;
        check_upstreams(&fresh, &self.upstreams)?;
        let n = fresh.len();
        if let Ok(mut g) = self.rules.write() {
            self.visibility.store(fresh.has_visibility(), Ordering::Release);
            *g = Arc::new(fresh);
        }
        Ok(n)
    }
}

/// A `hide` or `show` rule naming an upstream the config does not have would hide nothing.
fn check_upstreams(rules: &Rules, upstreams: &[String]) -> Result<(), String> {
    match rules.unknown_upstreams(upstreams).next() {
        Some((rule, u)) => {
            Err(format!("policy rule {rule:?}: upstream {u:?} is not configured, so the rule would hide or show nothing; fix the name"))
        }
        None => Ok(()),
    }
}
