//! The principals' tokens at one `oauth` upstream: kept in the vault (sealed; shared by the
//! replicas under `[cluster]`), read through this process's cache, refreshed by one replica.
//!
//! Takes a principal; gives the `Authorization` value to send ([`Users::header`]: the cached
//! token while it is fresh, re-read from a shared vault every [`RECHECK`], refreshed once it is
//! due by whoever holds the vault's lease, the others using the old token while it lasts or
//! waiting for the new one up to the lease). Refuses (the caller's consent error): a principal
//! with no entry, one whose entry was sealed for another URL, one whose refresh failed (the
//! entry is dropped, if still the one that failed). The cache holds the access token only;
//! the refresh token and Sluice's client secret stay sealed in the vault.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderValue;

use super::super::discovery::{Found, UserEndpoints};
use super::super::grant::{self, Token};
use super::super::vault::{now_ms, Entry, Stored, Vault};
use super::{code, register, Users, MAX_USERS};
use crate::upstream::client::{HttpClient, UpstreamError};

/// How long this process trusts its cache of a shared vault (a sign-in or a revocation on
/// another replica is seen within it).
pub const RECHECK: Duration = Duration::from_secs(2);
/// How long this process trusts its cache's word that a principal holds no token (each of
/// their requests then reads the shared vault at most this often per upstream).
pub const RECHECK_ABSENT: Duration = Duration::from_millis(250);

/// A principal's token as this process sends it.
pub(super) struct Held {
    pub header: HeaderValue,
    pub renew_at: Instant,
    pub expires_at: Instant,
    pub refreshable: bool,
    /// The scopes asked for it.
    pub scopes: Vec<String>,
    /// Which sign-in it came from (a refresh keeps it).
    pub serial: u64,
    /// Its sealed bytes in the vault (dropped there only while still these).
    pub raw: Vec<u8>,
}

/// What a due token's refresh came to: done (a header or the error), or left to the replica
/// that holds the lease.
enum Renewal {
    Done(Result<HeaderValue, UpstreamError>),
    ByOther(Entry),
}

impl Held {
    fn of(e: &Entry) -> Option<Held> {
        let s = &e.stored;
        let mut header = HeaderValue::from_str(&s.access).ok()?;
        header.set_sensitive(true);
        Some(Held {
            header,
            renew_at: Stored::instant(s.renew_ms),
            expires_at: Stored::instant(s.expires_ms),
            refreshable: s.refresh.is_some(),
            scopes: s.scopes.clone(),
            serial: s.serial,
            raw: e.raw.clone(),
        })
    }
}

impl Users {
    pub(super) fn vault(&self) -> &Arc<Vault> {
        self.vault
            .get_or_init(|| Arc::new(Vault::new(&crate::state::Keys::random(), None)))
    }

    /// Whether `principal` holds a token (fresh or refreshable), as this process last read.
    pub fn has(&self, principal: &str) -> bool {
        self.get(principal)
            .is_some_and(|h| h.refreshable || Instant::now() < h.expires_at)
    }

    pub(super) fn get(&self, principal: &str) -> Option<Arc<Held>> {
        self.tokens.lock().ok()?.get(principal)?.1.clone()
    }

    /// The number of `principal`'s sign-in whose token is held (a new sign-in, a new number).
    pub fn signed_in(&self, principal: &str) -> Option<u64> {
        self.get(principal).map(|h| h.serial)
    }

    /// `principal`'s token while it has not expired (headers built where no refresh can wait).
    pub fn held(&self, principal: &str) -> Option<HeaderValue> {
        let h = self.get(principal)?;
        (Instant::now() < h.expires_at).then(|| h.header.clone())
    }

    /// Reads `principal`'s entry from the vault into the cache, unless the cache is the
    /// vault's (this process's own) or was read within [`RECHECK`]; gives whether they hold a
    /// token. Redis unreachable: the cache stands.
    pub async fn load(&self, principal: &str) -> bool {
        self.loaded(principal).await.is_some()
    }

    async fn loaded(&self, principal: &str) -> Option<Arc<Held>> {
        let cached = self.tokens.lock().ok()?.get(principal).cloned();
        if let Some((_, held)) = cached.filter(|(at, held)| self.trusted(principal, *at, held)) {
            return held;
        }
        match self.vault().get(&self.name, principal).await {
            Ok(e) => self.cache(principal, e.as_ref()),
            Err(_) => {
                // Redis away: what this process holds stands for another RECHECK (requests do
                // not each wait for Redis's timeout).
                let held = self.get(principal);
                let mut t = self.tokens.lock().ok()?;
                t.insert(principal.to_owned(), (Instant::now(), held.clone()));
                held
            }
        }
    }

    /// Whether the cache's word on `principal`, read `at`, stands: always with this process's
    /// own vault; with a shared one for [`RECHECK`] when it holds a token, [`RECHECK_ABSENT`]
    /// when not, and not at all while they have a sign-in in progress here (its browser may
    /// come back to another replica).
    fn trusted(&self, principal: &str, at: Instant, held: &Option<Arc<Held>>) -> bool {
        if !self.vault().shared() {
            return true;
        }
        match held {
            Some(_) => at.elapsed() < RECHECK,
            None => {
                at.elapsed() < RECHECK_ABSENT
                    && !self.pending.lock().is_ok_and(|p| {
                        let now = Instant::now();
                        p.values()
                            .any(|p| p.principal == principal && p.expires > now)
                    })
            }
        }
    }

    /// Caches `e` (or its absence) as `principal`'s entry; an entry for another URL is
    /// absent.
    fn cache(&self, principal: &str, e: Option<&Entry>) -> Option<Arc<Held>> {
        let url = self.url.to_string();
        let held = e
            .filter(|e| e.stored.url == url)
            .and_then(Held::of)
            .map(Arc::new);
        let mut t = self.tokens.lock().ok()?;
        if t.len() >= MAX_USERS && !t.contains_key(principal) {
            t.retain(|_, (_, h)| h.is_some());
            if t.len() >= MAX_USERS {
                t.clear(); // a cache: each principal's next request reads the vault again
            }
        }
        t.insert(principal.to_owned(), (Instant::now(), held.clone()));
        held
    }

    /// The `Authorization` value to send for `principal`: the token held, refreshed once it
    /// is due; an error when there is none (their consent is needed).
    pub async fn header(
        &self,
        http: &HttpClient,
        principal: &str,
    ) -> Result<HeaderValue, UpstreamError> {
        let held = self.loaded(principal).await.ok_or_else(|| self.none())?;
        let now = Instant::now();
        if now < held.renew_at {
            return Ok(held.header.clone());
        }
        if !held.refreshable {
            return (now < held.expires_at)
                .then(|| held.header.clone())
                .ok_or_else(|| self.none());
        }
        let one = self.refresh.lock().await;
        match self.renew(http, principal, &held).await {
            Renewal::Done(r) => r,
            Renewal::ByOther(entry) => {
                // Another replica refreshes: waited for without holding this upstream's
                // refreshes (other principals' go on).
                drop(one);
                self.wait_for_other(principal, &entry).await
            }
        }
    }

    pub(super) fn none(&self) -> UpstreamError {
        UpstreamError::Auth(
            self.name.clone(),
            "you have not signed in to it through Sluice, or your sign-in ended: call one of its tools to be asked again".into(),
        )
    }

    /// The refresh of a due token, once across replicas: re-read (another request or replica
    /// may have refreshed it), then under the vault's lease.
    async fn renew(&self, http: &HttpClient, principal: &str, held: &Held) -> Renewal {
        let cached = || {
            let h = self.get(principal).map(|h| h.header.clone());
            Renewal::Done(h.ok_or_else(|| self.none()))
        };
        let vault = self.vault().clone();
        let entry = match self.fresh_or_due(principal, held).await {
            Ok(Some(e)) => e,
            Ok(None) => return cached(),
            Err(e) => return Renewal::Done(Err(e)),
        };
        let lease = match vault.lease(&self.name, principal).await {
            Ok(Some(l)) => l,
            Ok(None) => return Renewal::ByOther(entry),
            Err(_) => return Renewal::Done(self.unshared(held)),
        };
        // Refreshed by another replica between the read and the lease.
        let entry = match self.fresh_or_due(principal, held).await {
            Ok(Some(e)) => e,
            Ok(None) => return cached(),
            Err(e) => return Renewal::Done(Err(e)),
        };
        // Within the lease, so that no other replica refreshes with the same refresh token.
        let within = super::super::vault::LEASE.saturating_sub(Duration::from_secs(2));
        let refreshed = tokio::time::timeout(within, self.refreshed(http, &entry.stored))
            .await
            .unwrap_or_else(|_| {
                Err(UpstreamError::Auth(
                    self.name.clone(),
                    "the refresh took too long".into(),
                ))
            });
        let out = match refreshed {
            Ok(stored) => self.refreshed_kept(principal, &entry, stored).await,
            Err(e) => {
                tracing::warn!(upstream = %self.name, error = %e, "a user's token could not be refreshed");
                let _ = vault.remove(&self.name, principal, Some(&entry.raw)).await;
                self.cache(principal, None);
                Err(self.none())
            }
        };
        drop(lease);
        Renewal::Done(out)
    }

    /// Keeps a refreshed entry in place of `old`, unless the vault changed meanwhile (an
    /// operator revoked it, or the user signed in again): that word stands.
    async fn refreshed_kept(
        &self,
        principal: &str,
        old: &Entry,
        stored: Stored,
    ) -> Result<HeaderValue, UpstreamError> {
        tracing::info!(upstream = %self.name, "refreshed a user's token for the upstream");
        let raw = match self
            .vault()
            .replace(&self.name, principal, &old.raw, &stored)
            .await
        {
            Ok(Some(raw)) => raw,
            Ok(None) => {
                let now = self.vault().get(&self.name, principal).await.ok().flatten();
                let held = self.cache(principal, now.as_ref());
                return held.map(|h| h.header.clone()).ok_or_else(|| self.none());
            }
            Err(_) => Vec::new(), // Redis away: sent from here while it lasts
        };
        let e = Entry { stored, raw };
        let held = self.cache(principal, Some(&e));
        held.map(|h| h.header.clone()).ok_or_else(|| self.none())
    }

    /// The vault's entry when it is still due (`None`: fresh now, cached); an error when gone.
    async fn fresh_or_due(
        &self,
        principal: &str,
        held: &Held,
    ) -> Result<Option<Entry>, UpstreamError> {
        let entry = match self.vault().get(&self.name, principal).await {
            Ok(Some(e)) => e,
            Ok(None) => {
                self.cache(principal, None);
                return Err(self.none());
            }
            Err(_) => {
                // Redis did not answer: the token held here while it lasts (still cached).
                self.unshared(held)?;
                return Ok(None);
            }
        };
        if entry.stored.url != self.url.to_string() {
            // Obtained for another URL of this upstream: never sent or refreshed here.
            self.cache(principal, None);
            return Err(self.none());
        }
        if now_ms() < entry.stored.renew_ms {
            self.cache(principal, Some(&entry));
            return Ok(None);
        }
        Ok(Some(entry))
    }

    /// Another replica holds the lease: the old token while it lasts, else the new one once
    /// it is in the vault (up to the lease).
    async fn wait_for_other(
        &self,
        principal: &str,
        entry: &Entry,
    ) -> Result<HeaderValue, UpstreamError> {
        if now_ms() < entry.stored.expires_ms {
            let held = self
                .cache(principal, Some(entry))
                .ok_or_else(|| self.none())?;
            return Ok(held.header.clone());
        }
        let until = Instant::now() + super::super::vault::LEASE;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Ok(Some(e)) = self.vault().get(&self.name, principal).await {
                if now_ms() < e.stored.renew_ms {
                    return self
                        .cache(principal, Some(&e))
                        .map(|h| h.header.clone())
                        .ok_or_else(|| self.none());
                }
            }
        }
        Err(self.none())
    }

    /// Redis did not answer: the token this process holds while it has not expired.
    fn unshared(&self, held: &Held) -> Result<HeaderValue, UpstreamError> {
        if Instant::now() < held.expires_at {
            return Ok(held.header.clone());
        }
        let why = "the shared token store (Redis) did not answer and your token here has expired: try again";
        Err(UpstreamError::Auth(self.name.clone(), why.into()))
    }

    /// A new access token for `old` at the authorization server that issued it.
    async fn refreshed(&self, http: &HttpClient, old: &Stored) -> Result<Stored, UpstreamError> {
        let refresh = old.refresh.as_deref().unwrap_or_default();
        let bad = |_| {
            UpstreamError::Auth(
                self.name.clone(),
                "the token endpoint kept for the sign-in is not a URL".into(),
            )
        };
        let found = Found {
            issuer: old.issuer.clone(),
            token_endpoint: old.token_endpoint.parse().map_err(bad)?,
            resource: old.resource.clone(),
            scopes_supported: Vec::new(),
            grant_types: None,
            auth_methods: None,
            user: UserEndpoints::default(),
        };
        let client = register::Client {
            id: old.client_id.clone(),
            secret: old.client_secret.clone(),
            method: old.method,
            how: "kept",
        };
        let grant = [("grant_type", "refresh_token"), ("refresh_token", refresh)];
        let (headers, body) = code::request(&found, &client, &grant)?;
        let what = "the refresh token";
        let (token, next) = grant::exchange(http, &self.name, &found, headers, body, what).await?;
        // A server that rotates refresh tokens gives a new one; one that does not, none.
        let refresh = next.or_else(|| old.refresh.clone());
        Ok(self.stored(
            token,
            refresh,
            old.scopes.clone(),
            old.serial,
            &found,
            &client,
        ))
    }

    /// The vault entry of a token obtained at `found` by `client`.
    pub(super) fn stored(
        &self,
        token: Token,
        refresh: Option<String>,
        scopes: Vec<String>,
        serial: u64,
        found: &Found,
        client: &register::Client,
    ) -> Stored {
        Stored {
            url: self.url.to_string(),
            resource: found.resource.clone(),
            access: token.header.to_str().unwrap_or_default().to_owned(),
            renew_ms: Stored::unix_ms(token.renew_at),
            expires_ms: Stored::unix_ms(token.expires_at),
            refresh,
            scopes,
            serial,
            issuer: found.issuer.clone(),
            token_endpoint: found.token_endpoint.to_string(),
            client_id: client.id.clone(),
            client_secret: client.secret.clone(),
            method: client.method,
        }
    }

    /// Keeps `stored` for `principal` (in the vault and the cache).
    pub(super) async fn keep(&self, principal: &str, stored: Stored) -> Result<(), UpstreamError> {
        let raw = self.vault().put(&self.name, principal, &stored).await.map_err(|_| {
            let why = "the shared token store (Redis) did not answer, so your sign-in could not be kept: call the tool again to sign in";
            UpstreamError::Auth(self.name.clone(), why.into())
        })?;
        self.cache(principal, Some(&Entry { stored, raw }));
        Ok(())
    }

    /// Drops `principal`'s token (an operator revoked it, or they signed out).
    pub async fn forget(&self, principal: &str) {
        self.cache(principal, None);
        let _ = self.vault().remove(&self.name, principal, None).await;
    }

    /// The upstream answered 401 to `sent`: dropped if still the one held, and the next
    /// sign-in reads the upstream's resource metadata again (it may have moved to another
    /// authorization server, where Sluice registers anew).
    pub fn rejected(&self, principal: &str, sent: &HeaderValue) {
        if self.drop_token(principal, sent) {
            self.stale.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Drops `principal`'s token if it is still `sent`: from the cache at once, from the vault
    /// off the caller's path (only while the vault holds the same entry).
    pub(super) fn drop_token(&self, principal: &str, sent: &HeaderValue) -> bool {
        let Some(held) = self.get(principal).filter(|h| h.header == *sent) else {
            return false;
        };
        self.cache(principal, None);
        let (vault, name, p) = (
            self.vault().clone(),
            self.name.clone(),
            principal.to_owned(),
        );
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { vault.remove(&name, &p, Some(&held.raw)).await });
        }
        true
    }
}
