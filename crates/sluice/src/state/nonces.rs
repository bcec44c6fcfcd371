//! Single use of sealed state: every round state Sluice seals carries a nonce, and the retry
//! that presents it consumes it.
//!
//! Takes a nonce with its state's expiry; gives `true` the first time (and only the first
//! time) it is presented before expiry. Entries leave with their state's expiry, swept as new
//! ones come (no timer). Refuses (answers `false`, as for a replay) once `max` nonces are held:
//! a full store fails closed, the retry is told its exchange is gone.

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;

/// Consumed nonces until their states expire.
pub struct Nonces {
    inner: Mutex<Inner>,
    max: usize,
}

#[derive(Default)]
struct Inner {
    used: HashSet<String>,
    by_expiry: BTreeSet<(u64, String)>,
    /// [`Nonces::consume_evicting`]: the latest expiry evicted; nothing expiring at or before
    /// it is taken any more (it might be an evicted one, replayed).
    floor: u64,
}

impl Nonces {
    /// A store holding at most `max` nonces.
    pub fn new(max: usize) -> Nonces {
        Nonces {
            inner: Mutex::new(Inner::default()),
            max: max.max(1),
        }
    }

    /// Consumes `nonce` (its state expires at `expires_ms`); `false` when it was consumed
    /// before, or the store is full.
    pub fn consume(&self, nonce: &str, expires_ms: u64, now_ms: u64) -> bool {
        let Ok(mut g) = self.inner.lock() else {
            return false;
        };
        let Inner {
            used, by_expiry, ..
        } = &mut *g;
        while let Some(first) = by_expiry.first() {
            if first.0 > now_ms {
                break;
            }
            if let Some((_, n)) = by_expiry.pop_first() {
                used.remove(&n);
            }
        }
        if used.contains(nonce) {
            return false;
        }
        if used.len() >= self.max {
            tracing::warn!(
                limit = self.max,
                "single-use store full: a retry is refused as a replay"
            );
            return false;
        }
        used.insert(nonce.to_owned());
        by_expiry.insert((expires_ms, nonce.to_owned()));
        true
    }

    /// As [`Nonces::consume`], but a full store evicts its soonest-expiring nonce and refuses,
    /// from then on, every nonce expiring no later than it: a flood of fresh nonces cannot
    /// shut out the next genuine one (it expires later than all it displaced), and an evicted
    /// nonce replayed is still refused.
    pub fn consume_evicting(&self, nonce: &str, expires_ms: u64, now_ms: u64) -> bool {
        let Ok(mut g) = self.inner.lock() else {
            return false;
        };
        if expires_ms <= g.floor {
            return false;
        }
        let Inner {
            used,
            by_expiry,
            floor,
        } = &mut *g;
        while by_expiry.first().is_some_and(|f| f.0 <= now_ms) {
            if let Some((_, n)) = by_expiry.pop_first() {
                used.remove(&n);
            }
        }
        if used.contains(nonce) {
            return false;
        }
        while used.len() >= self.max {
            let Some((e, n)) = by_expiry.pop_first() else {
                break;
            };
            used.remove(&n);
            *floor = (*floor).max(e);
        }
        if expires_ms <= *floor {
            return false;
        }
        used.insert(nonce.to_owned());
        by_expiry.insert((expires_ms, nonce.to_owned()));
        true
    }

    /// Forgets `nonce` (consumed by mistake: the decision it was for could not be taken).
    /// O(log n): the entry is found by its expiry.
    pub fn release(&self, nonce: &str, expires_ms: u64) {
        if let Ok(mut g) = self.inner.lock() {
            if g.by_expiry.remove(&(expires_ms, nonce.to_owned())) {
                g.used.remove(nonce);
            }
        }
    }

    /// How many nonces are held.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|g| g.used.len()).unwrap_or(0)
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_consumed_once_until_its_state_expires_and_a_full_store_fails_closed() {
        let n = Nonces::new(2);
        assert!(n.consume("a", 100, 0));
        assert!(!n.consume("a", 100, 50), "a replay");
        assert!(n.consume("b", 100, 50));
        assert!(!n.consume("c", 100, 50), "full");
        assert!(n.consume("c", 300, 100), "expired entries left");
        assert_eq!(n.len(), 1);
        assert!(!n.consume("c", 300, 200));
        n.release("c", 300);
        assert!(n.consume("c", 300, 200), "released: usable again");
    }

    #[test]
    fn a_full_evicting_store_takes_the_next_fresh_nonce_and_still_refuses_an_evicted_one() {
        let n = Nonces::new(2);
        assert!(n.consume_evicting("a", 100, 0));
        assert!(n.consume_evicting("b", 110, 0));
        assert!(
            n.consume_evicting("c", 120, 0),
            "full: the soonest to expire goes"
        );
        assert!(!n.consume_evicting("a", 100, 0), "the evicted one replayed");
        assert!(!n.consume_evicting("b", 110, 0), "a replay still held");
        assert!(n.consume_evicting("d", 130, 0), "the next fresh one");
        assert!(
            !n.consume_evicting("e", 105, 0),
            "at or under the floor: it could be an evicted one"
        );
    }
}
