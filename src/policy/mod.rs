//! Stage 5, governance: approval rules and budgets per principal.
//!
//! Takes a tool call or an upstream's ask with its principal; gives allow, deny (with the rule
//! and a reason), approve (an approval round first), or a budget refusal. Rules come from
//! `policies/*.toml` and are reloaded on SIGHUP (a broken file keeps the old rules).

pub mod approval;
pub mod ask;
pub mod budget;
pub mod refusal;
pub mod rules;

use std::sync::{Arc, RwLock};

pub use budget::Budgets;
pub use refusal::Refusal;
pub use rules::{Decision, Effect, Rules, Subject};

/// Rules and budgets, shared by all requests.
pub struct Governor {
    rules: RwLock<Arc<Rules>>,
    paths: Vec<String>,
    /// Budgets per principal.
    pub budgets: Budgets,
    /// Approval rounds already answered (single use), with their expiry.
    approvals: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl Governor {
    /// Loads the policy files and sets up the budgets.
    pub fn new(cfg: &crate::config::Config) -> Result<Governor, String> {
        let rules = Rules::load(&cfg.policies)?;
        Ok(Governor {
            rules: RwLock::new(Arc::new(rules)),
            paths: cfg.policies.clone(),
            budgets: Budgets::new(&cfg.budget, &cfg.budget_overrides),
            approvals: Default::default(),
        })
    }

    /// The current rules.
    pub fn rules(&self) -> Arc<Rules> {
        self.rules.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// Marks an approval round answered; `false` when it was answered before (a replay).
    pub fn consume_approval(&self, handle: &str, expires_ms: u64) -> bool {
        let Ok(mut used) = self.approvals.lock() else { return false };
        let now = crate::state::now_ms();
        used.retain(|_, exp| *exp > now);
        used.insert(handle.to_owned(), expires_ms).is_none()
    }

    /// Reloads the policy files; on error keeps the old rules and says why.
    pub fn reload(&self) -> Result<usize, String> {
        let fresh = Rules::load(&self.paths)?;
        let n = fresh.len();
        if let Ok(mut g) = self.rules.write() {
            *g = Arc::new(fresh);
        }
        Ok(n)
    }
}

/// Reloads the rules on every SIGHUP until shutdown.
pub async fn reload_on_sighup(gw: Arc<crate::gateway::Gateway>) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
        loop {
            tokio::select! {
                _ = gw.shutdown.cancelled() => return,
                _ = hup.recv() => match gw.governor.reload() {
                    Ok(n) => tracing::info!(rules = n, "policies reloaded"),
                    Err(why) => tracing::warn!(reason = %why, "policy reload failed; keeping the previous rules"),
                },
            }
        }
    }
}

/// Forgets idle principals' budget state once per window, until shutdown.
pub async fn sweep_budgets(gw: Arc<crate::gateway::Gateway>) {
    let every = gw.cfg.budget.window.max(std::time::Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = gw.shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => gw.governor.budgets.retain_recent(),
        }
    }
}
