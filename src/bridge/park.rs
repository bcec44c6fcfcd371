//! The park table: exchanges waiting for a client's retry, each under a random handle.
//!
//! Takes an exchange at the end of a round; gives it back exactly once to the retry that names
//! its handle (single use: a replay finds nothing), or to the one sweeper once its deadline has
//! passed (no timer task per exchange). Refuses to park past `bridge.max_parked`.

use std::collections::HashMap;
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

/// Parked exchanges by handle, each with the instant it expires (boxed: the table stays small
/// and moving an entry moves a pointer).
pub struct ParkTable {
    map: Mutex<HashMap<String, (Instant, Box<Parked>)>>,
    max: usize,
}

impl ParkTable {
    /// An empty table holding at most `max` exchanges.
    pub fn new(max: usize) -> Self {
        ParkTable { map: Mutex::new(HashMap::new()), max }
    }

    /// Parks an exchange; gives it back when the table is full.
    pub fn insert(&self, handle: String, p: Parked, deadline: Instant) -> Result<(), Box<Parked>> {
        let p = Box::new(p);
        let Ok(mut m) = self.map.lock() else {
            return Err(p);
        };
        if m.len() >= self.max {
            return Err(p);
        }
        m.insert(handle, (deadline, p));
        Ok(())
    }

    /// Takes out every exchange whose deadline has passed.
    pub fn expired(&self, now: Instant) -> Vec<Box<Parked>> {
        let Ok(mut m) = self.map.lock() else { return Vec::new() };
        if !m.values().any(|(d, _)| *d <= now) {
            return Vec::new();
        }
        let gone: Vec<String> = m.iter().filter(|(_, (d, _))| *d <= now).map(|(k, _)| k.clone()).collect();
        gone.iter().filter_map(|k| m.remove(k)).map(|(_, p)| p).collect()
    }

    /// Looks at a parked exchange without taking it.
    pub fn peek<R>(&self, handle: &str, f: impl FnOnce(&Parked) -> R) -> Option<R> {
        self.map.lock().ok()?.get(handle).map(|(_, p)| f(p))
    }

    /// Takes a parked exchange out (once).
    pub fn take(&self, handle: &str) -> Option<Box<Parked>> {
        self.map.lock().ok()?.remove(handle).map(|(_, p)| p)
    }

    /// How many exchanges are parked.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether none is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many exchanges a principal has parked.
    pub fn count_for(&self, principal: &str) -> usize {
        self.map.lock().map(|m| m.values().filter(|(_, p)| p.info.principal == principal).count()).unwrap_or(0)
    }

    /// The most this table holds.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// Takes every parked exchange (shutdown).
    pub fn drain(&self) -> Vec<Box<Parked>> {
        self.map.lock().map(|mut m| m.drain().map(|(_, (_, p))| p).collect()).unwrap_or_default()
    }
}
