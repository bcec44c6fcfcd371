//! The park table: exchanges waiting for a client's retry, each under a random handle.
//!
//! Takes an exchange at the end of a round; gives it back exactly once to the retry that names
//! its handle (single use: a replay finds nothing), or to the one sweeper once its deadline has
//! passed (no timer task per exchange), or to a new call of the same principal that needs the
//! process it holds ([`Table::take_oldest_of`]). Refuses to park past `bridge.max_parked`. Every
//! operation is O(log n) or better in what is parked (the oldest of a principal's: a scan of
//! its own entries, at most its cap): each principal's entries are indexed, not counted, and
//! the sweep takes from the front of an index ordered by deadline (it once scanned the whole
//! table, and each park counted the principal's entries: 50k parked took 29 s).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::asks::Ask;
use super::exchange::{CallInfo, Live};
use crate::upstream::Upstream;

/// One parked exchange.
pub struct Parked {
    /// The live exchange; `None` when the upstream's call ended with URL elicitations required
    /// (`-32042`) and the retry re-issues it.
    pub live: Option<Live>,
    /// The asks the client must answer.
    pub asks: Vec<Ask>,
    /// The request it serves.
    pub info: CallInfo,
    /// The round the client was just given.
    pub round: u32,
    /// The upstream.
    pub up: Arc<Upstream>,
    /// Whether the retry re-issues the call (after URL elicitations) instead of answering asks.
    pub reissue: bool,
    /// Whether the client was shown an approval round (for the asks marked for approval).
    pub approving: bool,
}

/// What the table needs of an entry: whose it is.
pub trait Owned {
    /// The principal it counts against.
    fn principal(&self) -> &str;
}

impl Owned for Parked {
    fn principal(&self) -> &str {
        &self.info.principal
    }
}

/// Parked exchanges by handle, each with the instant it expires (boxed: the table stays small
/// and moving an entry moves a pointer).
pub type ParkTable = Table<Parked>;

/// A table of entries by handle with a deadline each, counted per principal.
pub struct Table<T> {
    inner: Mutex<Inner<T>>,
    max: usize,
}

struct Inner<T> {
    map: HashMap<String, (Instant, Box<T>)>,
    /// Every entry's (deadline, handle), earliest first.
    by_deadline: BTreeSet<(Instant, String)>,
    /// Each principal's entries, as (deadline, handle), earliest first (none at zero).
    mine: HashMap<String, BTreeSet<(Instant, String)>>,
}

impl<T: Owned> Inner<T> {
    fn forget(&mut self, handle: &str, deadline: Instant, p: &T) {
        let key = (deadline, handle.to_owned());
        self.by_deadline.remove(&key);
        if let Some(set) = self.mine.get_mut(p.principal()) {
            set.remove(&key);
            if set.is_empty() {
                self.mine.remove(p.principal());
            }
        }
    }

    fn remove(&mut self, handle: &str) -> Option<Box<T>> {
        let (deadline, p) = self.map.remove(handle)?;
        self.forget(handle, deadline, &p);
        Some(p)
    }
}

impl<T: Owned> Table<T> {
    /// An empty table holding at most `max` entries.
    pub fn new(max: usize) -> Self {
        let inner = Inner {
            map: HashMap::new(),
            by_deadline: BTreeSet::new(),
            mine: HashMap::new(),
        };
        Table {
            inner: Mutex::new(inner),
            max,
        }
    }

    /// Parks an entry; gives it back when the table is full.
    pub fn insert(&self, handle: String, p: T, deadline: Instant) -> Result<(), Box<T>> {
        self.insert_capped(handle, p, deadline, usize::MAX)
            .map_err(|(p, _)| p)
    }

    /// Parks an entry unless the table is full or its principal has `per_principal` parked,
    /// checked under the one lock (concurrent parks of one principal cannot pass the cap); gives
    /// it back with whether the principal's cap was the reason.
    pub fn insert_capped(
        &self,
        handle: String,
        p: T,
        deadline: Instant,
        per_principal: usize,
    ) -> Result<(), (Box<T>, bool)> {
        let p = Box::new(p);
        let Ok(mut m) = self.inner.lock() else {
            return Err((p, false));
        };
        if m.map.len() >= self.max {
            return Err((p, false));
        }
        if m.mine.get(p.principal()).map_or(0, BTreeSet::len) >= per_principal
            && !m.map.contains_key(&handle)
        {
            return Err((p, true));
        }
        // Handles are random 128-bit nonces; one seen again replaces the entry, counted once.
        m.remove(&handle);
        m.mine
            .entry(p.principal().to_owned())
            .or_default()
            .insert((deadline, handle.clone()));
        m.by_deadline.insert((deadline, handle.clone()));
        m.map.insert(handle, (deadline, p));
        Ok(())
    }

    /// Takes out every entry whose deadline has passed (from the front of the deadline index).
    pub fn expired(&self, now: Instant) -> Vec<Box<T>> {
        let Ok(mut m) = self.inner.lock() else {
            return Vec::new();
        };
        let mut gone = Vec::new();
        while let Some((deadline, _)) = m.by_deadline.first() {
            if *deadline > now {
                break;
            }
            let Some((_, handle)) = m.by_deadline.pop_first() else {
                break;
            };
            if let Some((deadline, p)) = m.map.remove(&handle) {
                m.forget(&handle, deadline, &p);
                gone.push(p);
            }
        }
        gone
    }

    /// Takes out `principal`'s entry that expires first among those `which` picks (a new call
    /// of that principal needs what it holds), with its handle; a scan of the principal's own
    /// entries.
    pub fn take_oldest_of(
        &self,
        principal: &str,
        which: impl Fn(&T) -> bool,
    ) -> Option<(String, Box<T>)> {
        let mut m = self.inner.lock().ok()?;
        let handle = m
            .mine
            .get(principal)?
            .iter()
            .find(|(_, h)| m.map.get(h).is_some_and(|(_, p)| which(p)))?
            .1
            .clone();
        let p = m.remove(&handle)?;
        Some((handle, p))
    }

    /// Looks at an entry without taking it.
    pub fn peek<R>(&self, handle: &str, f: impl FnOnce(&T) -> R) -> Option<R> {
        self.inner.lock().ok()?.map.get(handle).map(|(_, p)| f(p))
    }

    /// Takes an entry out (once).
    pub fn take(&self, handle: &str) -> Option<Box<T>> {
        self.inner.lock().ok()?.remove(handle)
    }

    /// How many entries are parked.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.map.len()).unwrap_or(0)
    }

    /// Whether none is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many entries a principal has parked.
    pub fn count_for(&self, principal: &str) -> usize {
        self.inner
            .lock()
            .map(|m| m.mine.get(principal).map_or(0, BTreeSet::len))
            .unwrap_or(0)
    }

    /// Each principal with entries parked, and how many (the admin API's `principals`).
    pub fn principals(&self) -> Vec<(String, usize)> {
        self.inner
            .lock()
            .map(|m| m.mine.iter().map(|(p, e)| (p.clone(), e.len())).collect())
            .unwrap_or_default()
    }

    /// The most this table holds.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// Takes every entry (shutdown).
    pub fn drain(&self) -> Vec<Box<T>> {
        let Ok(mut m) = self.inner.lock() else {
            return Vec::new();
        };
        m.by_deadline.clear();
        m.mine.clear();
        m.map.drain().map(|(_, (_, p))| p).collect()
    }
}

#[cfg(test)]
mod tests;
