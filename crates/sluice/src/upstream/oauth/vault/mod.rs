//! The token vault: each principal's token at each `oauth` upstream, sealed at rest, in this
//! process's memory or, under `[cluster]`, in Redis so every replica uses the token one replica
//! obtained, and one replica at a time refreshes it.
//!
//! Takes the `[state]` keys (the vault's key is derived from them: [`seal`]) and the cluster,
//! if any; gives the entries by (upstream, principal) ([`Vault::get`], [`Vault::put`],
//! [`Vault::remove`]), the lease a refresh takes ([`Vault::lease`]), and an operator's view
//! and revocation ([`Vault::list`], [`Vault::revoke`]: `sluice tokens`). Refuses: an entry
//! that does not open (altered, sealed for another principal or upstream, or under a key no
//! longer in the ring): it reads as absent. Bounded: [`MAX_PER_UPSTREAM`] entries per upstream
//! in memory (the one expiring first goes); in Redis each entry expires with its refresh
//! token's use ([`KEEP`]) or its access token, whichever the entry has. An entry holds the
//! access token, the refresh token and Sluice's client credentials at the authorization
//! server: none of them is ever in a log line, a span or an error string (`Stored` has no
//! `Debug`).

mod seal;
mod stored;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cluster::{Cluster, Unavailable};
pub(crate) use seal::Sealer;
pub(crate) use stored::{now_ms, Stored};

/// Entries per upstream in memory.
pub const MAX_PER_UPSTREAM: usize = 100_000;
/// How long an entry with a refresh token is kept unused (then its principal signs in again).
pub const KEEP: Duration = Duration::from_secs(30 * 24 * 3600);
/// How long one replica may hold the refresh of one entry before another may take it.
pub const LEASE: Duration = Duration::from_secs(10);

/// An entry as read: what it holds, and its sealed bytes (to delete it only if unchanged).
pub(crate) struct Entry {
    pub stored: Stored,
    pub raw: Vec<u8>,
}

/// What an operator sees of an entry: never a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The principal it is held for.
    pub principal: String,
    /// The upstream it is sent to.
    pub upstream: String,
    /// When its access token expires (Unix milliseconds).
    pub expires_ms: u64,
    /// Whether it holds a refresh token.
    pub refreshable: bool,
    /// The scopes asked for it.
    pub scopes: Vec<String>,
    /// The authorization server that issued it.
    pub issuer: String,
}

/// The vault.
pub struct Vault {
    sealer: Sealer,
    store: Store,
}

enum Store {
    /// Upstream, then principal: when the entry may go, and its sealed bytes.
    Memory(Mutex<HashMap<String, HashMap<String, (u64, Vec<u8>)>>>),
    Shared(Arc<Cluster>),
}

impl Vault {
    /// A vault sealing under `keys`, in Redis when `cluster` is given, else in memory.
    pub fn new(keys: &crate::state::Keys, cluster: Option<Arc<Cluster>>) -> Vault {
        Vault {
            sealer: Sealer::new(keys.derived(seal::DOMAIN)),
            store: match cluster {
                Some(c) => Store::Shared(c),
                None => Store::Memory(Mutex::new(HashMap::new())),
            },
        }
    }

    /// Whether other replicas share it (then what this process holds is checked against it).
    pub fn shared(&self) -> bool {
        matches!(self.store, Store::Shared(_))
    }

    /// `principal`'s entry at `upstream`, if one is held and opens.
    pub(crate) async fn get(
        &self,
        upstream: &str,
        principal: &str,
    ) -> Result<Option<Entry>, Unavailable> {
        let raw = match &self.store {
            Store::Memory(m) => m
                .lock()
                .ok()
                .and_then(|m| Some(m.get(upstream)?.get(principal)?.1.clone())),
            Store::Shared(c) => c.shared.vault_get(&key("v", upstream, principal)).await?,
        };
        Ok(raw.and_then(|raw| {
            let plain = self.sealer.open(upstream, principal, &raw)?;
            let stored = serde_json::from_slice(&plain).ok()?;
            Some(Entry { stored, raw })
        }))
    }

    /// Keeps `stored` as `principal`'s entry at `upstream`; gives its sealed bytes.
    pub(crate) async fn put(
        &self,
        upstream: &str,
        principal: &str,
        stored: &Stored,
    ) -> Result<Vec<u8>, Unavailable> {
        let plain = serde_json::to_vec(stored).unwrap_or_default();
        let raw = self.sealer.seal(upstream, principal, &plain);
        let until = stored.keep_until_ms();
        match &self.store {
            Store::Memory(m) => {
                let Ok(mut m) = m.lock() else {
                    return Err(Unavailable);
                };
                let mine = m.entry(upstream.to_owned()).or_default();
                if mine.len() >= MAX_PER_UPSTREAM && !mine.contains_key(principal) {
                    let now = now_ms();
                    mine.retain(|_, (u, _)| *u > now);
                    let first = mine
                        .iter()
                        .min_by_key(|(_, (u, _))| *u)
                        .map(|(k, _)| k.clone());
                    if let Some(k) = first.filter(|_| mine.len() >= MAX_PER_UPSTREAM) {
                        mine.remove(&k);
                    }
                }
                mine.insert(principal.to_owned(), (until, raw.clone()));
            }
            Store::Shared(c) => {
                let ttl = Duration::from_millis(until.saturating_sub(now_ms()).max(1));
                c.shared
                    .vault_set(&key("v", upstream, principal), &raw, ttl)
                    .await?;
            }
        }
        Ok(raw)
    }

    /// Puts `stored` in place of the entry `old` (its sealed bytes), only while the vault still
    /// holds that one; gives the new sealed bytes, or `None` when it changed meanwhile.
    pub(crate) async fn replace(
        &self,
        upstream: &str,
        principal: &str,
        old: &[u8],
        stored: &Stored,
    ) -> Result<Option<Vec<u8>>, Unavailable> {
        let plain = serde_json::to_vec(stored).unwrap_or_default();
        let raw = self.sealer.seal(upstream, principal, &plain);
        let until = stored.keep_until_ms();
        let done = match &self.store {
            Store::Memory(m) => {
                let Ok(mut m) = m.lock() else {
                    return Err(Unavailable);
                };
                let slot = m.get_mut(upstream).and_then(|mine| mine.get_mut(principal));
                match slot.filter(|(_, was)| was.as_slice() == old) {
                    Some(slot) => {
                        *slot = (until, raw.clone());
                        true
                    }
                    None => false,
                }
            }
            Store::Shared(c) => {
                let ttl = Duration::from_millis(until.saturating_sub(now_ms()).max(1));
                let k = key("v", upstream, principal);
                c.shared.vault_replace(&k, old, &raw, ttl).await?
            }
        };
        Ok(done.then_some(raw))
    }

    /// Drops `principal`'s entry at `upstream`: only while it is still `only` when given (a
    /// token refused is not confused with the one another replica just refreshed). Gives
    /// whether one was dropped.
    pub(crate) async fn remove(
        &self,
        upstream: &str,
        principal: &str,
        only: Option<&[u8]>,
    ) -> Result<bool, Unavailable> {
        match &self.store {
            Store::Memory(m) => {
                let Ok(mut m) = m.lock() else {
                    return Err(Unavailable);
                };
                let Some(mine) = m.get_mut(upstream) else {
                    return Ok(false);
                };
                let same = mine
                    .get(principal)
                    .is_some_and(|(_, raw)| only.is_none_or(|o| o == raw.as_slice()));
                Ok(same && mine.remove(principal).is_some())
            }
            Store::Shared(c) => {
                let k = key("v", upstream, principal);
                c.shared.vault_delete(&k, only).await
            }
        }
    }

    /// The right to refresh `principal`'s entry at `upstream` for [`LEASE`]: `None` while
    /// another replica holds it. In memory there is one process: always given (the caller
    /// serializes its own refreshes).
    pub(crate) async fn lease(
        &self,
        upstream: &str,
        principal: &str,
    ) -> Result<Option<Lease>, Unavailable> {
        let Store::Shared(c) = &self.store else {
            return Ok(Some(Lease(None)));
        };
        let (k, holder) = (key("l", upstream, principal), crate::state::nonce());
        let got = c.shared.vault_lease(&k, &holder, LEASE).await?;
        Ok(got.then(|| Lease(Some((c.clone(), k, holder)))))
    }

    /// Shares `plain`, a sign-in in progress at `upstream` (its `state`'s digest: `id`), with
    /// the other replicas for `ttl`, sealed; in memory there are none (nothing is kept).
    pub(crate) async fn share(
        &self,
        upstream: &str,
        id: &str,
        plain: &[u8],
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let Store::Shared(c) = &self.store else {
            return Ok(());
        };
        let raw = self.sealer.seal(upstream, &pending_label(id), plain);
        c.shared
            .vault_set(&key("vs", upstream, id), &raw, ttl)
            .await
    }

    /// Whether a sign-in `id` at `upstream` is shared (not taken yet).
    pub(crate) async fn shares(&self, upstream: &str, id: &str) -> Result<bool, Unavailable> {
        match &self.store {
            Store::Shared(c) => c.shared.vault_exists(&key("vs", upstream, id)).await,
            Store::Memory(_) => Ok(false),
        }
    }

    /// Takes the shared sign-in `id` at `upstream`: one replica gets it, once.
    pub(crate) async fn take_shared(
        &self,
        upstream: &str,
        id: &str,
    ) -> Result<Option<Vec<u8>>, Unavailable> {
        let Store::Shared(c) = &self.store else {
            return Ok(None);
        };
        let raw = c.shared.vault_take(&key("vs", upstream, id)).await?;
        Ok(raw.and_then(|raw| self.sealer.open(upstream, &pending_label(id), &raw)))
    }

    /// Every entry held, of `principal` only and at `upstream` only when given.
    pub async fn list(
        &self,
        principal: Option<&str>,
        upstream: Option<&str>,
    ) -> Result<Vec<Listed>, Unavailable> {
        let mut out = Vec::new();
        for (u, p, raw) in self.raw_entries(principal, upstream).await? {
            let Some(s) = self
                .sealer
                .open(&u, &p, &raw)
                .and_then(|plain| serde_json::from_slice::<Stored>(&plain).ok())
            else {
                continue;
            };
            out.push(s.listed(u, p));
        }
        out.sort_by(|a, b| (&a.principal, &a.upstream).cmp(&(&b.principal, &b.upstream)));
        Ok(out)
    }

    /// Drops `principal`'s entries (at `upstream` only, when given); gives how many went.
    pub async fn revoke(
        &self,
        principal: &str,
        upstream: Option<&str>,
    ) -> Result<usize, Unavailable> {
        let mut n = 0;
        for (u, p, _) in self.raw_entries(Some(principal), upstream).await? {
            n += usize::from(self.remove(&u, &p, None).await?);
        }
        Ok(n)
    }

    async fn raw_entries(
        &self,
        principal: Option<&str>,
        upstream: Option<&str>,
    ) -> Result<Vec<(String, String, Vec<u8>)>, Unavailable> {
        let wanted =
            |u: &str, p: &str| principal.is_none_or(|w| w == p) && upstream.is_none_or(|w| w == u);
        match &self.store {
            Store::Memory(m) => {
                let Ok(m) = m.lock() else {
                    return Err(Unavailable);
                };
                let all = m.iter().flat_map(|(u, mine)| {
                    mine.iter()
                        .map(move |(p, (_, raw))| (u.clone(), p.clone(), raw.clone()))
                });
                Ok(all.filter(|(u, p, _)| wanted(u, p)).collect())
            }
            Store::Shared(c) => {
                let hex =
                    |s: Option<&str>| s.map_or("*".to_owned(), |s| crate::state::hex(s.as_bytes()));
                let pattern = format!("sluice:v:{}:{}", hex(upstream), hex(principal));
                let found = c.shared.vault_scan(&pattern).await?;
                Ok(found
                    .into_iter()
                    .filter_map(|(k, raw)| {
                        let (u, p) = names_of(&k)?;
                        wanted(&u, &p).then_some((u, p, raw))
                    })
                    .collect())
            }
        }
    }
}

/// A refresh lease, given back when dropped (in Redis, by its holder only).
pub(crate) struct Lease(Option<(Arc<Cluster>, String, String)>);

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((c, k, holder)) = self.0.take() {
            // Given back off the caller's path; one that is not expires after LEASE.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { c.shared.vault_release(&k, &holder).await });
            }
        }
    }
}

/// The Redis key of kind `kind` (`v`: an entry, `l`: its lease, `vs`: a shared sign-in, its
/// state's digest in place of the principal) for `principal` at `upstream`:
/// both names hex-encoded, so neither can run into the other or into a scan's pattern.
fn key(kind: &str, upstream: &str, principal: &str) -> String {
    let hex = crate::state::hex;
    format!(
        "sluice:{kind}:{}:{}",
        hex(upstream.as_bytes()),
        hex(principal.as_bytes())
    )
}

/// What a shared sign-in is sealed for in place of a principal (no principal's entry opens as
/// one: its key and its associated data differ).
fn pending_label(id: &str) -> String {
    format!("\0sign-in\0{id}")
}

/// The upstream and principal of an entry's key.
fn names_of(key: &str) -> Option<(String, String)> {
    let rest = key.strip_prefix("sluice:v:")?;
    let (u, p) = rest.split_once(':')?;
    let text = |h: &str| String::from_utf8(unhex(h)?).ok();
    Some((text(u)?, text(p)?))
}

fn unhex(h: &str) -> Option<Vec<u8>> {
    if h.len() % 2 != 0 {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests;
