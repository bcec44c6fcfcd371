//! Shares of the pools principals compete for: no principal (and, before authentication, no
//! source address) may hold a whole pool, so one caller cannot lock the others out.
//!
//! Takes a key (a principal's id, a source address) asking for one more place in a pool of
//! `max` places, of which the key may hold at most its share; gives a [`Place`] held until it is
//! dropped. Refuses past the key's share ([`Refused::Share`]) or past the pool's size
//! ([`Refused::Pool`]). Also gives [`Full`], the one refusal every full pool answers with: HTTP
//! 503, `Retry-After`, code `-31020`, a message naming the limit's key (docs/security.md, "Per-principal
//! shares and deadlines"). Bounded: one counter per key holding a place, removed with its last,
//! and one for the places of a caller that is the only key ([`Shares::share_keyless`]).

use std::hash::Hash;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;
use serde_json::{json, Value};

/// Sluice: a pool, or the caller's share of it, is full (HTTP 503 with `Retry-After`).
pub const POOL_FULL: i64 = -31020;

/// When a refused caller is told to retry: places free as calls are answered, so soon.
pub const RETRY_AFTER_MS: u64 = 1000;

/// Which pool was full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pool {
    /// Requests in progress at the front (`limits.max_in_flight`,
    /// `limits.max_in_flight_per_principal`).
    InFlight,
    /// The processes of a stdio upstream, by its name (`max_processes`,
    /// `max_processes_per_principal`).
    Processes(String),
    /// Sessions with 2025-11-25 upstreams (`bridge.max_sessions`,
    /// `bridge.max_sessions_per_principal`).
    Sessions,
    /// The requests under way to an HTTP upstream, by its name (`max_in_flight`,
    /// `max_in_flight_per_principal`).
    Requests(String),
}

/// A pool, or the caller's share of it, is full: retry after [`RETRY_AFTER_MS`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct Full {
    /// The pool.
    pub pool: Pool,
    /// Whether it was the caller's share (else the whole pool).
    pub per_principal: bool,
    /// The limit that was reached.
    pub max: usize,
}

impl Full {
    /// The whole pool is full.
    pub fn pool(pool: Pool, max: usize) -> Full {
        Full {
            pool,
            per_principal: false,
            max,
        }
    }

    /// The caller holds its whole share.
    pub fn share(pool: Pool, max: usize) -> Full {
        Full {
            pool,
            per_principal: true,
            max,
        }
    }

    /// The caller holds its whole `share` of a pool of `max`: named as the pool when the share
    /// is all of it (one principal: its share is no limit of its own).
    pub fn share_of(pool: Pool, share: usize, max: usize) -> Full {
        if share >= max {
            Full::pool(pool, max)
        } else {
            Full::share(pool, share)
        }
    }

    /// The config key of the limit reached.
    pub fn limit(&self) -> &'static str {
        match (&self.pool, self.per_principal) {
            (Pool::InFlight, false) => "limits.max_in_flight",
            (Pool::InFlight, true) => "limits.max_in_flight_per_principal",
            (Pool::Processes(_), false) => "max_processes",
            (Pool::Processes(_), true) => "max_processes_per_principal",
            (Pool::Sessions, false) => "bridge.max_sessions",
            (Pool::Sessions, true) => "bridge.max_sessions_per_principal",
            (Pool::Requests(_), false) => "max_in_flight",
            (Pool::Requests(_), true) => "max_in_flight_per_principal",
        }
    }

    /// When to retry, in milliseconds.
    pub fn retry_after_ms(&self) -> u64 {
        RETRY_AFTER_MS
    }

    /// The error's `data`: the limit's key and value, whether it is a share, when to retry
    /// (and the upstream, for a stdio upstream's processes).
    pub fn data(&self) -> Value {
        let mut data = json!({"limit": self.limit(), "max": self.max, "perPrincipal": self.per_principal, "retryAfterMs": RETRY_AFTER_MS});
        if let Pool::Processes(name) | Pool::Requests(name) = &self.pool {
            data["upstream"] = json!(name);
        }
        data
    }

    fn message(&self) -> String {
        let (key, max, secs) = (self.limit(), self.max, RETRY_AFTER_MS / 1000);
        match (&self.pool, self.per_principal) {
            (Pool::InFlight, false) => format!("too many requests in progress ({key} = {max}); retry after {secs} s"),
            (Pool::InFlight, true) => format!(
                "this principal has its whole share of requests in progress ({key} = {max}, bodies being read included); retry after {secs} s, once some are answered"
            ),
            (Pool::Processes(up), false) => {
                format!("stdio upstream {up:?} has all its processes in use ({key} = {max}); retry after {secs} s")
            }
            (Pool::Processes(up), true) => format!(
                "stdio upstream {up:?}: this principal holds its whole share of the processes ({key} = {max}), each serving one of its calls (parked ones included); retry after {secs} s, once one is answered"
            ),
            (Pool::Sessions, false) => {
                format!("too many sessions with 2025-11-25 upstreams are open ({key} = {max}), none idle; retry after {secs} s")
            }
            (Pool::Requests(up), false) => format!("upstream {up:?} has all its requests under way ({key} = {max}); retry after {secs} s"),
            (Pool::Requests(up), true) => format!(
                "upstream {up:?}: this principal has its whole share of the requests under way to it ({key} = {max}); retry after {secs} s, once one is answered"
            ),
            (Pool::Sessions, true) => format!(
                "this principal holds its whole share of sessions with 2025-11-25 upstreams ({key} = {max}), none idle; retry after {secs} s, once one of its calls is answered"
            ),
        }
    }
}

/// Why no place was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The key holds its share (the share is given).
    Share(usize),
    /// The pool is full (its size is given).
    Pool(usize),
}

/// A pool of `max` places, each key holding at most a share of them.
pub struct Shares<K: Eq + Hash> {
    held: DashMap<K, usize>,
    /// Places taken with [`Shares::share_keyless`], counted without keys.
    whole: AtomicUsize,
    total: AtomicUsize,
    max: usize,
}

/// A place counted against a key's share (and, with [`Shares::take`], the pool); given back
/// when dropped.
pub struct Place<K: Eq + Hash + Clone> {
    shares: Arc<Shares<K>>,
    key: Option<K>,
    pooled: bool,
}

impl<K: Eq + Hash + Clone> Shares<K> {
    /// A pool of `max` places.
    pub fn new(max: usize) -> Arc<Shares<K>> {
        Arc::new(Shares {
            held: DashMap::new(),
            whole: AtomicUsize::new(0),
            total: AtomicUsize::new(0),
            max,
        })
    }

    /// A place in the pool for `key`, within its `share`.
    pub fn take(self: &Arc<Self>, key: K, share: usize) -> Result<Place<K>, Refused> {
        let place = self.share(key, share)?;
        place.pooled()
    }

    /// A place within `key`'s `share` only; [`Place::pooled`] adds the pool's.
    pub fn share(self: &Arc<Self>, key: K, share: usize) -> Result<Place<K>, Refused> {
        let mut n = self.held.entry(key.clone()).or_insert(0);
        if *n >= share {
            let none = *n == 0;
            drop(n);
            if none {
                self.held.remove_if(&key, |_, n| *n == 0);
            }
            return Err(Refused::Share(share));
        }
        *n += 1;
        Ok(Place {
            shares: self.clone(),
            key: Some(key),
            pooled: false,
        })
    }

    /// A place within `share`, counted with every other place taken this way and no key: for a
    /// caller that is the only key there is (then no key is copied or hashed).
    pub fn share_keyless(self: &Arc<Self>, share: usize) -> Result<Place<K>, Refused> {
        if self.whole.fetch_add(1, Ordering::AcqRel) >= share {
            self.whole.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Share(share));
        }
        Ok(Place {
            shares: self.clone(),
            key: None,
            pooled: false,
        })
    }

    /// Places of the pool taken now.
    pub fn in_use(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// Places `key` holds now.
    pub fn held_by(&self, key: &K) -> usize {
        self.held.get(key).map_or(0, |n| *n)
    }
}

impl<K: Eq + Hash + Clone> Place<K> {
    /// The same place, now also counted in the pool (the share's place is given back when the
    /// pool is full).
    pub fn pooled(mut self) -> Result<Place<K>, Refused> {
        if self.pooled {
            return Ok(self);
        }
        let s = &self.shares;
        if s.total.fetch_add(1, Ordering::AcqRel) >= s.max {
            s.total.fetch_sub(1, Ordering::AcqRel);
            return Err(Refused::Pool(s.max));
        }
        self.pooled = true;
        Ok(self)
    }
}

impl<K: Eq + Hash + Clone> Drop for Place<K> {
    fn drop(&mut self) {
        if self.pooled {
            self.shares.total.fetch_sub(1, Ordering::AcqRel);
        }
        match self.key.take() {
            Some(key) => {
                self.shares.held.remove_if_mut(&key, |_, n| {
                    *n = n.saturating_sub(1);
                    *n == 0
                });
            }
            None => {
                self.shares.whole.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_share_and_the_pool_at_most_max() {
        let s = Shares::<&str>::new(3);
        let a1 = s.take("a", 2).unwrap();
        let _a2 = s.take("a", 2).unwrap();
        assert_eq!(s.take("a", 2).err(), Some(Refused::Share(2)));
        let _b = s.take("b", 2).unwrap();
        assert_eq!(s.take("c", 2).err(), Some(Refused::Pool(3)));
        assert_eq!(
            s.held_by(&"c"),
            0,
            "a refused key holds nothing (and has no counter left)"
        );
        assert!(s.held.get("c").is_none());
        drop(a1);
        let _c = s.take("c", 2).expect("a place given back is free again");
        assert_eq!(s.in_use(), 3);
    }

    #[test]
    fn a_share_is_held_before_the_pools_place_and_given_back_if_the_pool_is_full() {
        let s = Shares::<&str>::new(2);
        let reading = s.share("a", 1).unwrap();
        assert_eq!(s.in_use(), 0, "a share alone takes no place in the pool");
        let _whole = reading.pooled().unwrap();
        let _c = s.take("c", 1).unwrap();
        let other = s.share("b", 1).unwrap();
        assert_eq!(other.pooled().err(), Some(Refused::Pool(2)));
        assert_eq!(s.held_by(&"b"), 0, "the refused one gave its share back");
        assert_eq!(s.held_by(&"a"), 1);
    }

    #[test]
    fn keyless_places_are_counted_without_a_key_and_bounded_by_their_share() {
        let s = Shares::<&str>::new(2);
        let reading: Vec<_> = (0..2)
            .map(|_| s.share_keyless(2).expect("within the share"))
            .collect();
        assert!(s.held.is_empty(), "no counter by key");
        assert_eq!(
            s.share_keyless(2).err(),
            Some(Refused::Share(2)),
            "bounded by the share"
        );
        drop(reading);
        let held: Vec<_> = (0..2)
            .map(|_| {
                s.share_keyless(2)
                    .and_then(Place::pooled)
                    .expect("within the pool")
            })
            .collect();
        assert_eq!(
            s.share_keyless(3).and_then(Place::pooled).err(),
            Some(Refused::Pool(2))
        );
        drop(held);
        assert_eq!((s.in_use(), s.whole.load(Ordering::Acquire)), (0, 0));
        let keyed = Shares::<&str>::new(2);
        let _a = keyed.share("a", 2).unwrap();
        assert_eq!(
            keyed.held_by(&"a"),
            1,
            "a table made with `new` counts every share by key"
        );
    }

    #[test]
    fn a_zero_share_refuses_at_once() {
        let s = Shares::<u8>::new(4);
        assert_eq!(s.take(1, 0).err(), Some(Refused::Share(0)));
        assert!(s.held.is_empty());
    }

    #[test]
    fn every_message_names_its_limit_and_when_to_retry() {
        for f in [
            Full::pool(Pool::InFlight, 9),
            Full::share(Pool::InFlight, 9),
            Full::pool(Pool::Processes("files".into()), 9),
            Full::share(Pool::Processes("files".into()), 9),
            Full::pool(Pool::Sessions, 9),
            Full::share(Pool::Sessions, 9),
            Full::pool(Pool::Requests("web".into()), 9),
            Full::share(Pool::Requests("web".into()), 9),
        ] {
            let msg = f.to_string();
            assert!(
                msg.contains(&format!("{} = 9", f.limit())) && msg.contains("retry after 1 s"),
                "{msg}"
            );
            assert_eq!(f.data()["limit"], f.limit());
        }
        assert!(Full::pool(Pool::Processes("files".into()), 16)
            .to_string()
            .starts_with("stdio upstream \"files\" has all its processes in use"));
    }
}
