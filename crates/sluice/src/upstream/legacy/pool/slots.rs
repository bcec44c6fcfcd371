//! The pool's bookkeeping, without I/O: which sessions are idle, in what order, and how many
//! each principal holds.
//!
//! Takes sessions returned idle, leases and reservations for new sessions; gives an idle session
//! of a key (the most recently returned), the session to close to make room, and the idle ones
//! past their deadline (each its upstream's idle time after it was returned: a stdio
//! upstream's `idle_ms`, else `bridge.session_idle_ms`). Refuses a reservation past a stdio upstream's `max_processes_per_principal`
//! (its sessions are its processes) or `bridge.max_sessions_per_principal` when the principal
//! has no idle session of its own to close (of that upstream, for the first), and past
//! `bridge.max_sessions` when no idle session is left at all. Every operation is O(log n) (plus
//! the sessions it hands back, and a scan of one principal's idle sessions, at most its cap, for
//! the share of one upstream): idle sessions sit in a `BTreeMap` by a return stamp (oldest
//! first), indexed per key and per principal by the same stamps, and by deadline.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tokio::time::Instant;

use crate::upstream::legacy::Bridged;

/// What a pooled session serves: one principal, one upstream, one bridged capability set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) principal: String,
    pub(crate) upstream: String,
    /// The upstream's [`Upstream::instance`](crate::upstream::Upstream::instance): a session of
    /// an upstream a reload replaced is never leased for the new one of that name.
    pub(crate) instance: u64,
    pub(crate) caps: Bridged,
}

/// A new session would pass a cap and nothing idle can be closed for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The principal holds its share of this stdio upstream's processes
    /// (`max_processes_per_principal`), all leased.
    Share(usize),
    /// The principal holds `bridge.max_sessions_per_principal`, all leased.
    Principal(usize),
    /// Sluice holds `bridge.max_sessions`, all leased.
    Global(usize),
}

impl Refused {
    /// The refusal the caller is given (503, naming the limit); `upstream` names the stdio
    /// upstream of a [`Refused::Share`], which has `max_processes`.
    pub(crate) fn full(self, upstream: &str, max_processes: usize) -> crate::shares::Full {
        use crate::shares::{Full, Pool};
        match self {
            Refused::Share(n) => {
                Full::share_of(Pool::Processes(upstream.to_owned()), n, max_processes)
            }
            Refused::Principal(n) => Full::share(Pool::Sessions, n),
            Refused::Global(n) => Full::pool(Pool::Sessions, n),
        }
    }
}

/// The caps a reservation is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub(crate) max: usize,
    pub(crate) per_principal: usize,
    /// The sessions one principal may hold of the upstream being opened (a stdio upstream's
    /// `max_processes_per_principal`: one process per session); `None`: no cap of its own.
    pub(crate) per_upstream: Option<usize>,
}

/// Idle sessions and open counts.
pub(crate) struct Slots<S> {
    stamp: u64,
    /// By return stamp: the session, its key and its deadline.
    idle: BTreeMap<u64, (Key, S, Instant)>,
    by_deadline: BTreeSet<(Instant, u64)>,
    by_key: HashMap<Key, BTreeSet<u64>>,
    held: HashMap<String, Held>,
    open: usize,
}

/// One principal's sessions: how many are open (idle or leased), how many of each upstream
/// instance, and which are idle.
#[derive(Default)]
struct Held {
    open: usize,
    by_instance: HashMap<u64, usize>,
    idle: BTreeSet<u64>,
}

impl<S> Default for Slots<S> {
    fn default() -> Self {
        Slots {
            stamp: 0,
            idle: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
            by_key: HashMap::new(),
            held: HashMap::new(),
            open: 0,
        }
    }
}

impl<S> Slots<S> {
    /// Sessions open (idle and leased).
    pub(crate) fn open(&self) -> usize {
        self.open
    }

    /// The most recently returned idle session of `key`, now leased.
    pub(crate) fn take(&mut self, key: &Key) -> Option<S> {
        let stamp = *self.by_key.get(key)?.last()?;
        self.unidle(stamp).map(|(_, s)| s)
    }

    /// Returns a leased session to the idle set, to be ended at `deadline` unless leased again.
    pub(crate) fn put(&mut self, key: Key, s: S, deadline: Instant) {
        self.stamp += 1;
        let stamp = self.stamp;
        self.by_deadline.insert((deadline, stamp));
        self.by_key.entry(key.clone()).or_default().insert(stamp);
        self.held
            .entry(key.principal.clone())
            .or_default()
            .idle
            .insert(stamp);
        self.idle.insert(stamp, (key, s, deadline));
    }

    /// Counts one more open session for `principal` on upstream `instance` (`exempt`: no cap
    /// per principal); gives the idle session closed to make room (the principal's own oldest of
    /// that upstream when it holds its share of it, else its own oldest when it is at its cap,
    /// else the oldest of all when Sluice is at its cap), or why there is no room.
    pub(crate) fn reserve(
        &mut self,
        principal: &str,
        instance: u64,
        exempt: bool,
        caps: Caps,
    ) -> Result<Option<S>, Refused> {
        let (held, of_upstream) = self.held.get(principal).map_or((0, 0), |h| {
            (h.open, h.by_instance.get(&instance).copied().unwrap_or(0))
        });
        let share = caps.per_upstream.filter(|_| !exempt);
        let victim = if let Some(share) = share.filter(|s| of_upstream >= *s) {
            Some(
                self.close_idle(
                    self.oldest_idle_of(principal, instance)
                        .ok_or(Refused::Share(share))?,
                ),
            )
        } else if !exempt && held >= caps.per_principal {
            let oldest = self
                .held
                .get(principal)
                .and_then(|h| h.idle.first().copied());
            Some(self.close_idle(oldest.ok_or(Refused::Principal(caps.per_principal))?))
        } else if self.open >= caps.max {
            let oldest = self.idle.first_key_value().map(|(stamp, _)| *stamp);
            Some(self.close_idle(oldest.ok_or(Refused::Global(caps.max))?))
        } else {
            None
        };
        self.open += 1;
        let h = self.held.entry(principal.to_owned()).or_default();
        h.open += 1;
        *h.by_instance.entry(instance).or_default() += 1;
        Ok(victim.flatten())
    }

    /// The stamp of `principal`'s least recently returned idle session of upstream `instance`
    /// (a scan of its idle sessions, at most its cap).
    fn oldest_idle_of(&self, principal: &str, instance: u64) -> Option<u64> {
        let h = self.held.get(principal)?;
        h.idle.iter().copied().find(|stamp| {
            self.idle
                .get(stamp)
                .is_some_and(|(k, _, _)| k.instance == instance)
        })
    }

    /// One of `principal`'s open sessions of upstream `instance` is gone (closed, broken, or
    /// never opened).
    pub(crate) fn release(&mut self, principal: &str, instance: u64) {
        self.open = self.open.saturating_sub(1);
        if let Some(h) = self.held.get_mut(principal) {
            h.open = h.open.saturating_sub(1);
            if let Some(n) = h.by_instance.get_mut(&instance) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    h.by_instance.remove(&instance);
                }
            }
            if h.open == 0 && h.idle.is_empty() {
                self.held.remove(principal);
            }
        }
    }

    /// Removes and gives the idle sessions whose deadline is at or before `now` (every idle
    /// one when `None`); they count as closed.
    pub(crate) fn expire(&mut self, now: Option<Instant>) -> Vec<S> {
        let mut out = Vec::new();
        while let Some(&(deadline, stamp)) = self.by_deadline.first() {
            if now.is_some_and(|n| deadline > n) {
                break;
            }
            match self.close_idle(stamp) {
                Some(s) => out.push(s),
                None => drop(self.by_deadline.pop_first()),
            }
        }
        out
    }

    /// How many sessions `principal` holds open (idle or leased) of upstream `instance`.
    pub(crate) fn held_of(&self, principal: &str, instance: u64) -> usize {
        self.held
            .get(principal)
            .and_then(|h| h.by_instance.get(&instance))
            .copied()
            .unwrap_or(0)
    }

    /// Removes and gives every idle session of one upstream instance (a reload retired it);
    /// they count as closed.
    pub(crate) fn expire_instance(&mut self, instance: u64) -> Vec<S> {
        let stamps: Vec<u64> = self
            .idle
            .iter()
            .filter(|(_, (k, _, _))| k.instance == instance)
            .map(|(s, _)| *s)
            .collect();
        stamps
            .into_iter()
            .filter_map(|stamp| self.close_idle(stamp))
            .collect()
    }

    /// Closes the least recently used idle session of `upstream` (a stdio upstream at its
    /// `max_processes`), counted closed. O(idle sessions): this is the rare path of a stdio
    /// upstream whose every process is taken.
    pub(crate) fn close_oldest_of(&mut self, upstream: &str) -> Option<S> {
        let stamp = self
            .idle
            .iter()
            .find(|(_, (k, _, _))| k.upstream == upstream)
            .map(|(s, _)| *s)?;
        self.close_idle(stamp)
    }

    /// Removes an idle session from every index; gives it with its key.
    fn unidle(&mut self, stamp: u64) -> Option<(Key, S)> {
        let (key, s, deadline) = self.idle.remove(&stamp)?;
        self.by_deadline.remove(&(deadline, stamp));
        if let Some(set) = self.by_key.get_mut(&key) {
            set.remove(&stamp);
            if set.is_empty() {
                self.by_key.remove(&key);
            }
        }
        if let Some(h) = self.held.get_mut(&key.principal) {
            h.idle.remove(&stamp);
        }
        Some((key, s))
    }

    /// Removes an idle session that is to be closed, and counts it closed.
    fn close_idle(&mut self, stamp: u64) -> Option<S> {
        let (key, s) = self.unidle(stamp)?;
        self.release(&key.principal, key.instance);
        Some(s)
    }
}

#[cfg(test)]
mod tests;
