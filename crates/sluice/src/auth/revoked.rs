//! Operators' revocations of Sluice's own access tokens (`[auth.login]`).
//!
//! Takes a principal and the millisecond up to which its tokens are refused (an operator ended its
//! sign-ins); gives [`Revoked::refuses`], which a token's verification asks with the token's
//! principal and issue time (ms). Bounded: at most [`MAX`] principals; a revocation is kept [`KEEP`]
//! (longer than any access token lives), and when the table is full the oldest goes first.
//! Under `[cluster]` every replica reads the others' revocations from Redis
//! (`login/revocations.rs`). Refuses nothing.

use std::collections::HashMap;
use std::sync::Mutex;

/// Principals whose revocation is kept at once.
pub const MAX: usize = 100_000;
/// How long a revocation is kept (ms): a day, past the longest access token lifetime.
pub const KEEP: u64 = 86_400_000;

/// The revocations, by principal: the millisecond up to which its tokens are refused.
#[derive(Default)]
pub struct Revoked {
    by: Mutex<HashMap<String, u64>>,
    any: std::sync::atomic::AtomicBool,
}

impl Revoked {
    /// Refuses `principal`'s tokens issued at or before `ms` (Unix ms).
    pub fn revoke(&self, principal: &str, ms: u64) {
        let Ok(mut by) = self.by.lock() else { return };
        if by.len() >= MAX && !by.contains_key(principal) {
            let cutoff = ms.saturating_sub(KEEP);
            by.retain(|_, s| *s >= cutoff);
            if by.len() >= MAX {
                if let Some(oldest) = by.iter().min_by_key(|(_, s)| **s).map(|(k, _)| k.clone()) {
                    by.remove(&oldest);
                }
            }
        }
        let at = by.entry(principal.to_owned()).or_insert(0);
        *at = (*at).max(ms);
        self.any.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether a token of `principal` issued at `issued_ms` is refused.
    pub fn refuses(&self, principal: &str, issued_ms: u64) -> bool {
        if !self.any.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        self.by
            .lock()
            .map(|by| by.get(principal).is_some_and(|s| issued_ms <= *s))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_issued_up_to_the_revocation_is_refused_and_a_later_one_is_not() {
        let r = Revoked::default();
        assert!(!r.refuses("alice", 100));
        r.revoke("alice", 100);
        r.revoke("alice", 50);
        assert!(r.refuses("alice", 100) && r.refuses("alice", 99));
        assert!(!r.refuses("alice", 101) && !r.refuses("bob", 1));
    }
}
