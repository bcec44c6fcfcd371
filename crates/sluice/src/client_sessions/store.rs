//! The table behind [`super::Sessions`]: sessions by id, in order of last use globally and per
//! principal.
//!
//! Takes sessions and uses of them; gives the session an id names and the least recently used
//! one (of all, or of one principal) to evict. Refuses nothing. Every operation is O(log n): a
//! `HashMap` by id, a `BTreeMap` from a use stamp (a counter bumped on each use, so stamps are
//! unique and sorted like the uses) to the id, and per principal a `BTreeMap` of its own stamps;
//! the least recently used is the first key. Chosen over the `lru` crate because two orders
//! (global and per principal) are kept over the same entries, and no dependency is needed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::LegacySession;

/// Sessions with their use order.
#[derive(Default)]
pub(super) struct Store {
    by_id: HashMap<Arc<str>, Entry>,
    by_use: BTreeMap<u64, Arc<str>>,
    by_principal: HashMap<String, BTreeMap<u64, Arc<str>>>,
    clock: u64,
}

struct Entry {
    session: Arc<LegacySession>,
    stamp: u64,
    used: Instant,
}

impl Store {
    /// Every session held and used within `idle` of `now`.
    pub(super) fn all(&self, now: Instant, idle: Duration) -> Vec<Arc<LegacySession>> {
        self.by_id
            .values()
            .filter(|e| now.saturating_duration_since(e.used) < idle)
            .map(|e| e.session.clone())
            .collect()
    }

    /// Sessions held.
    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Sessions `principal` holds.
    pub(super) fn held_by(&self, principal: &str) -> usize {
        self.by_principal.get(principal).map_or(0, BTreeMap::len)
    }

    /// Adds a session, used `now`.
    pub(super) fn insert(&mut self, session: Arc<LegacySession>, now: Instant) {
        let stamp = self.tick();
        let id: Arc<str> = Arc::from(session.id.as_str());
        self.by_use.insert(stamp, id.clone());
        self.by_principal
            .entry(session.principal.clone())
            .or_default()
            .insert(stamp, id.clone());
        if let Some(old) = self.by_id.insert(
            id,
            Entry {
                session,
                stamp,
                used: now,
            },
        ) {
            self.unlink(&old.session.principal, old.stamp); // ids are random: never in practice
        }
    }

    /// The session `id` names, marked used `now`; `None` (and removed) when idle for `idle`.
    pub(super) fn touch(
        &mut self,
        id: &str,
        now: Instant,
        idle: Duration,
    ) -> Option<Arc<LegacySession>> {
        let used = self.by_id.get(id)?.used;
        if now.saturating_duration_since(used) >= idle {
            self.remove(id);
            return None;
        }
        let stamp = self.tick();
        let Store {
            by_id,
            by_use,
            by_principal,
            ..
        } = self;
        let e = by_id.get_mut(id)?;
        let key = by_use.remove(&e.stamp).unwrap_or_else(|| Arc::from(id));
        by_use.insert(stamp, key.clone());
        if let Some(own) = by_principal.get_mut(&e.session.principal) {
            own.remove(&e.stamp);
            own.insert(stamp, key);
        }
        e.stamp = stamp;
        e.used = now;
        Some(e.session.clone())
    }

    /// Removes a session, telling whatever waits on its `ended` (its GET stream).
    pub(super) fn remove(&mut self, id: &str) -> Option<Arc<LegacySession>> {
        let e = self.by_id.remove(id)?;
        self.unlink(&e.session.principal, e.stamp);
        e.session.ended.cancel();
        Some(e.session)
    }

    /// Removes the sessions unused for `idle` (the oldest first, stopping at the first fresh one).
    pub(super) fn expire(&mut self, now: Instant, idle: Duration) {
        while let Some(id) = self.by_use.first_key_value().map(|(_, id)| id.clone()) {
            match self.by_id.get(&*id) {
                Some(e) if now.saturating_duration_since(e.used) < idle => return,
                Some(_) => {
                    self.remove(&id);
                }
                None => {
                    self.by_use.pop_first(); // not reachable: every stamp names a held session
                }
            }
        }
    }

    /// Removes `principal`'s least recently used session.
    pub(super) fn evict_oldest_of(&mut self, principal: &str) {
        let id = self
            .by_principal
            .get(principal)
            .and_then(|own| own.first_key_value())
            .map(|(_, id)| id.clone());
        if let Some(id) = id {
            self.remove(&id);
        }
    }

    /// Removes the least recently used session of all.
    pub(super) fn evict_oldest(&mut self) {
        if let Some(id) = self.by_use.first_key_value().map(|(_, id)| id.clone()) {
            self.remove(&id);
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn unlink(&mut self, principal: &str, stamp: u64) {
        self.by_use.remove(&stamp);
        if let Some(own) = self.by_principal.get_mut(principal) {
            own.remove(&stamp);
            if own.is_empty() {
                self.by_principal.remove(principal);
            }
        }
    }
}
