//! What each principal used, for operators (the admin API's `principals`).
//!
//! Takes each call a quota counted and each sampling ask a budget charged (after the charge
//! succeeded); gives, per principal, the calls of each quota and the sampling asks and tokens
//! of the current window, with the limit beside them. Counted per fixed window from a
//! principal's first use in it, so `left` is the window's allowance less what was used: an
//! operator's view, not the limiter (whose GCRA refills continuously and, under `[cluster]`,
//! counts every replica: this ledger is this replica's own, labelled so). Bounded: at most
//! [`MAX_PRINCIPALS`] principals (past it a new one is not tracked and counted in `untracked`),
//! each with at most [`MAX_QUOTAS`] quotas; a principal idle for two windows is forgotten on
//! the budgets' timer. Refuses nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::Serialize;

/// Principals tracked at once.
pub const MAX_PRINCIPALS: usize = 10_000;
/// Quotas tracked per principal.
pub const MAX_QUOTAS: usize = 64;

/// One window's count.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Count {
    /// Used in the window.
    pub used: u64,
    /// The window's allowance.
    pub limit: u64,
    /// When the window started (Unix ms).
    pub window_start_ms: u64,
    /// The window's length.
    pub window_ms: u64,
}

impl Count {
    fn add(&mut self, n: u64, limit: u64, window_ms: u64, now: u64) {
        if now.saturating_sub(self.window_start_ms) >= self.window_ms.max(1) {
            *self = Count {
                used: 0,
                limit,
                window_start_ms: now,
                window_ms,
            };
        }
        self.used = self.used.saturating_add(n);
        self.limit = limit;
    }
}

/// What one principal used.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Used {
    /// Calls per quota name.
    pub quotas: HashMap<String, Count>,
    /// Sampling asks.
    pub sampling: Option<Count>,
    /// Sampling tokens asked for.
    pub tokens: Option<Count>,
    /// Last use (Unix ms).
    pub last_ms: u64,
}

/// The ledger.
#[derive(Default)]
pub struct Usage {
    by: Mutex<HashMap<String, Used>>,
    untracked: AtomicU64,
}

impl Usage {
    fn with(&self, principal: &str, f: impl FnOnce(&mut Used, u64)) {
        let now = crate::state::now_ms();
        let Ok(mut by) = self.by.lock() else { return };
        if !by.contains_key(principal) && by.len() >= MAX_PRINCIPALS {
            self.untracked.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let u = by.entry(principal.to_owned()).or_default();
        u.last_ms = now;
        f(u, now);
    }

    /// Notes a call `quota` counted.
    pub fn quota(&self, principal: &str, quota: &crate::config::Quota) {
        let window = quota.window.as_millis() as u64;
        self.with(principal, |u, now| {
            if !u.quotas.contains_key(&quota.name) && u.quotas.len() >= MAX_QUOTAS {
                return;
            }
            let c = u.quotas.entry(quota.name.clone()).or_default();
            c.add(1, u64::from(quota.calls_per_window), window, now);
        });
    }

    /// Notes a sampling ask of `tokens` charged under `limits`.
    pub fn sampling(&self, principal: &str, limits: &crate::config::BudgetLimits, tokens: u64) {
        let window = limits.window.as_millis() as u64;
        self.with(principal, |u, now| {
            let s = u.sampling.get_or_insert_with(Count::default);
            s.add(1, u64::from(limits.sampling_per_window), window, now);
            let t = u.tokens.get_or_insert_with(Count::default);
            t.add(tokens, u64::from(limits.tokens_per_window), window, now);
        });
    }

    /// Each principal's use (sorted by principal).
    pub fn snapshot(&self) -> Vec<(String, Used)> {
        let mut v: Vec<(String, Used)> = self
            .by
            .lock()
            .map(|b| b.iter().map(|(k, u)| (k.clone(), u.clone())).collect())
            .unwrap_or_default();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Principals not tracked because the ledger was full.
    pub fn untracked(&self) -> u64 {
        self.untracked.load(Ordering::Relaxed)
    }

    /// Forgets principals idle for more than `idle_ms`.
    pub fn retain_recent(&self, idle_ms: u64) {
        let now = crate::state::now_ms();
        if let Ok(mut by) = self.by.lock() {
            by.retain(|_, u| now.saturating_sub(u.last_ms) <= idle_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_starts_again_when_its_window_ends() {
        let mut c = Count::default();
        c.add(1, 5, 1000, 10_000);
        c.add(1, 5, 1000, 10_500);
        assert_eq!((c.used, c.window_start_ms), (2, 10_000));
        c.add(1, 5, 1000, 11_000);
        assert_eq!((c.used, c.window_start_ms), (1, 11_000));
    }

    #[test]
    fn the_ledger_is_bounded_and_forgets_the_idle() {
        let u = Usage::default();
        let q = crate::config::Quota {
            name: "q".into(),
            principal: Vec::new(),
            group: Vec::new(),
            upstream: Vec::new(),
            tool: Vec::new(),
            calls_per_window: 3,
            window: std::time::Duration::from_secs(60),
            burst: 3,
        };
        for i in 0..MAX_PRINCIPALS + 5 {
            u.quota(&format!("p{i}"), &q);
        }
        u.quota("p0", &q);
        assert_eq!(u.snapshot().len(), MAX_PRINCIPALS);
        assert_eq!(u.untracked(), 5);
        let p0 = u
            .snapshot()
            .into_iter()
            .find(|(p, _)| p == "p0")
            .expect("p0");
        assert_eq!((p0.1.quotas["q"].used, p0.1.quotas["q"].limit), (2, 3));
        u.retain_recent(0);
    }
}
