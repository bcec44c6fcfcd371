//! What the login front remembers between requests: registered clients, sign-ins under way at
//! the IdP, authorization codes, refresh token families, and per-source registration counts.
//!
//! Takes records keyed by the SHA-256 of their secret (a code, a refresh token, a pending
//! sign-in's id): no secret is held, so a dump of the store cannot be replayed. Gives each back
//! once where it is single use ([`Store::take_code`], [`Store::take_pending`]). Refuses (the
//! insert answers `false`) a record when its table is full of live records; expired records are
//! dropped first. [`Store`] is an enum: these tables in memory (one replica), or Redis under
//! `[cluster]` (`shared.rs`: every replica sees every record); its methods are `async` for
//! the latter.
//!
//! Bounds (documented in docs/login.md): [`MAX_CLIENTS`] registrations of
//! [`REGISTRATION_TTL`], [`MAX_PENDING`] sign-ins of [`PENDING_TTL`], [`MAX_CODES`] codes of
//! [`CODE_TTL`], [`MAX_FAMILIES`] refresh families, [`MAX_SOURCES`] sources counted for
//! [`REGISTRATIONS_PER_MINUTE`] and as many for [`AUTHORIZATIONS_PER_MINUTE`].

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq as _;

use super::records::{Client, Code, Family, Pending, Turn};

pub use super::bounds::*;
pub use super::checks::{hashed, Hashed};

/// The login front's state.
pub enum Store {
    /// In this process (lost on restart; one replica).
    Memory(Memory),
    /// In Redis, shared by the replicas (`[cluster]`; `shared.rs`).
    Redis(super::shared::Redis),
}

/// The in-memory tables.
pub struct Memory {
    clients: Table<String, Client>,
    pending: Table<Hashed, Pending>,
    codes: Table<Hashed, Code>,
    families: Table<Hashed, Family>,
    sources: Table<std::net::IpAddr, u32>,
    authorizing: Table<std::net::IpAddr, u32>,
}

impl Default for Store {
    fn default() -> Store {
        Store::Memory(Memory {
            clients: Table::new(MAX_CLIENTS),
            pending: Table::new(MAX_PENDING),
            codes: Table::new(MAX_CODES),
            families: Table::new(MAX_FAMILIES),
            sources: Table::new(MAX_SOURCES),
            authorizing: Table::new(MAX_SOURCES),
        })
    }
}

impl Store {
    /// The store replicas share, in `cluster`'s Redis.
    pub fn shared(cluster: std::sync::Arc<crate::cluster::Cluster>) -> Store {
        Store::Redis(super::shared::Redis::new(cluster))
    }

    /// Counts one registration of `source`; `false` when it made its minute's share already
    /// (or too many sources are counted now).
    pub async fn count_registration(&self, source: std::net::IpAddr) -> bool {
        match self {
            Store::Memory(m) => m
                .sources
                .update(source, Duration::from_secs(60), 0, |n| {
                    *n += 1;
                    *n <= REGISTRATIONS_PER_MINUTE
                })
                .unwrap_or(false),
            Store::Redis(r) => r.count_registration(source).await,
        }
    }

    /// Counts one sign-in begun by `source`; `false` past [`AUTHORIZATIONS_PER_MINUTE`] (or
    /// when too many sources are counted now).
    pub async fn count_authorization(&self, source: std::net::IpAddr) -> bool {
        match self {
            Store::Memory(m) => m
                .authorizing
                .update(source, Duration::from_secs(60), 0, |n| {
                    *n += 1;
                    *n <= AUTHORIZATIONS_PER_MINUTE
                })
                .unwrap_or(false),
            Store::Redis(r) => r.count_authorization(source).await,
        }
    }

    /// Holds a registered client; `false` when the table is full.
    pub async fn put_client(&self, c: Client) -> bool {
        match self {
            Store::Memory(m) => m.clients.insert(c.client_id.clone(), c, REGISTRATION_TTL),
            Store::Redis(r) => r.put_client(&c, None).await,
        }
    }

    /// Caches a client's metadata document for `ttl`; `false` when the table is full.
    pub async fn put_document(&self, c: Client, ttl: Duration) -> bool {
        match self {
            Store::Memory(m) => m.clients.insert(c.client_id.clone(), c, ttl),
            Store::Redis(r) => r.put_client(&c, Some(ttl)).await,
        }
    }

    /// The client registered as `id`, unexpired.
    pub async fn client(&self, id: &str) -> Option<Client> {
        match self {
            Store::Memory(m) => m.clients.get(&id.to_owned()),
            Store::Redis(r) => r.client(id).await,
        }
    }

    /// Holds a sign-in under way, keyed by the hash of its id.
    pub async fn put_pending(&self, key: Hashed, p: Pending) -> bool {
        match self {
            Store::Memory(m) => m.pending.insert(key, p, PENDING_TTL),
            Store::Redis(r) => r.put_pending(&key, &p).await,
        }
    }

    /// The sign-in under way, left in place (the consent page and the IdP redirect read it).
    pub async fn pending(&self, key: &Hashed) -> Option<Pending> {
        match self {
            Store::Memory(m) => m.pending.get(key),
            Store::Redis(r) => r.pending(key).await,
        }
    }

    /// Replaces a sign-in under way in place (its lifetime unchanged); `false` when gone.
    pub async fn update_pending(&self, key: &Hashed, p: Pending) -> bool {
        match self {
            Store::Memory(m) => m.pending.modify(key, |old| *old = p).is_some(),
            Store::Redis(r) => r.update_pending(key, &p).await,
        }
    }

    /// The sign-in under way, removed: the IdP's callback finishes it once.
    pub async fn take_pending(&self, key: &Hashed) -> Option<Pending> {
        match self {
            Store::Memory(m) => m.pending.take(key),
            Store::Redis(r) => r.take_pending(key).await,
        }
    }

    /// Holds an authorization code.
    pub async fn put_code(&self, key: Hashed, c: Code) -> bool {
        match self {
            Store::Memory(m) => m.codes.insert(key, c, CODE_TTL),
            Store::Redis(r) => r.put_code(&key, &c).await,
        }
    }

    /// The code, removed whatever comes of it: a code is used once.
    pub async fn take_code(&self, key: &Hashed) -> Option<Code> {
        match self {
            Store::Memory(m) => m.codes.take(key),
            Store::Redis(r) => r.take_code(key).await,
        }
    }

    /// Holds a refresh family for `ttl`.
    pub async fn put_family(&self, key: Hashed, f: Family, ttl: Duration) -> bool {
        match self {
            Store::Memory(m) => m.families.insert(key, f, ttl),
            Store::Redis(r) => r.put_family(&key, &f, ttl).await,
        }
    }

    /// `principal`'s sign-ins held (refresh families): `(client, revoked)`, at most `max`.
    pub async fn sign_ins(
        &self,
        principal: &str,
        max: usize,
    ) -> Result<Vec<(String, bool)>, String> {
        match self {
            Store::Redis(r) => r
                .sign_ins(principal, max)
                .await
                .map_err(|_| "Redis is unreachable: the sign-ins cannot be listed now".into()),
            Store::Memory(m) => Ok(m.families.values(max, |f| {
                (f.grant.principal == principal).then(|| (f.grant.client_id.clone(), f.revoked))
            })),
        }
    }

    /// Revokes every sign-in of `principal` (its refresh families); gives how many.
    pub async fn revoke(&self, principal: &str) -> Result<u64, String> {
        match self {
            Store::Redis(r) => r
                .revoke(principal)
                .await
                .map_err(|_| "Redis is unreachable: nothing was revoked; try again".into()),
            Store::Memory(m) => Ok(m.families.modify_all(|f| {
                let mine = f.grant.principal == principal && !f.revoked;
                if mine {
                    f.revoked = true;
                }
                mine
            })),
        }
    }

    /// Presents the refresh token hashed `presented` to family `key` for `client_id`: the
    /// current one rotates to `next`; an earlier one revokes the family.
    pub async fn rotate(
        &self,
        key: &Hashed,
        presented: &Hashed,
        next: &Hashed,
        client_id: &str,
    ) -> Turn {
        let m = match self {
            Store::Redis(r) => return r.rotate(key, presented, next, client_id).await,
            Store::Memory(m) => m,
        };
        let turn = m.families.modify(key, |f| {
            if f.revoked {
                return Turn::Revoked;
            }
            if f.grant.client_id != client_id {
                return Turn::OtherClient;
            }
            if !bool::from(f.current.ct_eq(presented)) {
                f.revoked = true;
                return Turn::Replayed;
            }
            f.current = *next;
            Turn::Rotated(f.grant.clone())
        });
        turn.unwrap_or(Turn::Unknown)
    }
}

/// A bounded map whose entries expire.
struct Table<K, V> {
    max: usize,
    map: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash + Clone, V: Clone> Table<K, V> {
    fn new(max: usize) -> Self {
        Table {
            max,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (Instant, V)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Inserts (replacing one of the same key); `false` when full of live entries.
    fn insert(&self, k: K, v: V, ttl: Duration) -> bool {
        let now = Instant::now();
        let mut map = self.lock();
        if map.len() >= self.max && !map.contains_key(&k) {
            map.retain(|_, (until, _)| *until > now);
            if map.len() >= self.max {
                return false;
            }
        }
        map.insert(k, (now + ttl, v));
        true
    }

    fn get(&self, k: &K) -> Option<V> {
        let map = self.lock();
        map.get(k)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, v)| v.clone())
    }

    fn take(&self, k: &K) -> Option<V> {
        self.lock()
            .remove(k)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, v)| v)
    }

    /// What `pick` makes of the live entries, at most `max`.
    fn values<R>(&self, max: usize, pick: impl Fn(&V) -> Option<R>) -> Vec<R> {
        let now = Instant::now();
        let map = self.lock();
        map.values()
            .filter(|(until, _)| *until > now)
            .filter_map(|(_, v)| pick(v))
            .take(max)
            .collect()
    }

    /// Applies `step` to every live entry; gives how many it said `true` of.
    fn modify_all(&self, step: impl Fn(&mut V) -> bool) -> u64 {
        let now = Instant::now();
        let mut map = self.lock();
        let mut n = 0;
        for (until, v) in map.values_mut() {
            if *until > now && step(v) {
                n += 1;
            }
        }
        n
    }

    fn modify<R>(&self, k: &K, step: impl FnOnce(&mut V) -> R) -> Option<R> {
        let mut map = self.lock();
        match map.get_mut(k) {
            Some((until, v)) if *until > Instant::now() => Some(step(v)),
            _ => None,
        }
    }

    /// Applies `step` to the entry (a fresh `init` living `ttl` when absent or expired);
    /// `None` when a fresh one cannot be held.
    fn update(
        &self,
        k: K,
        ttl: Duration,
        init: V,
        step: impl FnOnce(&mut V) -> bool,
    ) -> Option<bool> {
        let mut map = self.lock();
        let now = Instant::now();
        if let Some((until, v)) = map.get_mut(&k) {
            if *until > now {
                return Some(step(v));
            }
        }
        drop(map);
        let mut v = init;
        let r = step(&mut v);
        self.insert(k, v, ttl).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_refuses_until_entries_expire() {
        let t: Table<u32, u32> = Table::new(2);
        assert!(t.insert(1, 1, Duration::from_secs(60)));
        assert!(t.insert(2, 2, Duration::ZERO));
        // 2 has expired: it makes room.
        assert!(t.insert(3, 3, Duration::from_secs(60)));
        assert!(!t.insert(4, 4, Duration::from_secs(60)));
        assert_eq!(t.take(&1), Some(1));
        assert_eq!(t.take(&1), None, "taken once");
    }

    #[tokio::test]
    async fn registrations_are_rate_limited_per_source() {
        let s = Store::default();
        let a: std::net::IpAddr = "192.0.2.1".parse().unwrap();
        let b: std::net::IpAddr = "192.0.2.2".parse().unwrap();
        for _ in 0..REGISTRATIONS_PER_MINUTE {
            assert!(s.count_registration(a).await);
        }
        assert!(
            !s.count_registration(a).await,
            "the 11th in a minute is refused"
        );
        for _ in 0..AUTHORIZATIONS_PER_MINUTE {
            assert!(
                s.count_authorization(a).await,
                "counted apart from registrations"
            );
        }
        assert!(
            !s.count_authorization(a).await,
            "one more sign-in in a minute is refused"
        );
        assert!(
            s.count_registration(b).await,
            "another source is counted apart"
        );
    }
}
