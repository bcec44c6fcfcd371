//! Each user's own token at an upstream (`[upstream.auth] mode = "oauth"`, issue 31): Sluice
//! is an MCP authorization client for the upstream on behalf of each principal, who consents
//! once in a browser.
//!
//! Takes the upstream's URL and `[upstream.auth]`; gives, per principal, the authorization URL
//! to consent at ([`Users::consent`]: discovery from the upstream's challenge, Sluice's client
//! at the server, PKCE, `resource`, scopes), the end of a consent when the browser comes back
//! ([`Users::finish`]: `state` single use, bound to the principal who asked, expiring after
//! [`PENDING_TTL`]; RFC 9207 `iss` compared as a string; the code exchanged), and the token to
//! send ([`Users::header`], refreshed with the refresh token before it expires, one refresh at
//! a time). Refuses: a `state` it did not issue, one used or expired, an `iss` other than the
//! issuer (or none where the server says it sends one), more than [`PENDING_PER_PRINCIPAL`]
//! consents in progress per principal (the oldest dropped) and [`MAX_PENDING`] in all, more
//! than [`MAX_USERS`] principals' tokens (the one expiring first is dropped). Tokens, codes,
//! verifiers and secrets are never in a log line, a span or an error string.

mod code;
mod register;
mod scopes;
mod shared;
mod tokens;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http::{HeaderMap, Uri};

use super::discovery::{self, Found};
use super::grant;
use super::vault::Vault;
use crate::config::UpstreamAuth;
use crate::upstream::client::{HttpClient, UpstreamError};
use tokens::Held;
pub use tokens::{RECHECK, RECHECK_ABSENT};

/// How long a consent may take, from the URL given to the browser's return.
pub const PENDING_TTL: Duration = Duration::from_secs(600);
/// Consents in progress per principal per upstream (a new one drops the oldest).
pub const PENDING_PER_PRINCIPAL: usize = 4;
/// Consents in progress per upstream, all principals together.
pub const MAX_PENDING: usize = 10_000;
/// Principals whose tokens are held per upstream.
pub const MAX_USERS: usize = 100_000;
/// Sign-ins asked again for the same scopes after an upstream's `403 insufficient_scope`
/// (one asking for a new scope is always asked: step-up).
pub const MAX_SAME_SCOPE: u32 = 2;
/// Scopes asked for one principal at most (the union grows with each step-up).
pub const MAX_SCOPES: usize = 64;

/// What a consent needs of the upstream's authorization server, found once.
struct Server {
    found: Found,
    client: register::Client,
    /// The scopes of the upstream's challenge to a request without a token.
    challenged: Option<Vec<String>>,
}

struct Pending {
    principal: String,
    verifier: String,
    redirect: String,
    server: Arc<Server>,
    expires: Instant,
    scopes: Vec<String>,
    /// Whether the other replicas hold it too (`shared.rs`): then the vault decides its use.
    shared: bool,
}

/// The principals' tokens at one upstream and their consents in progress.
pub struct Users {
    name: String,
    url: Uri,
    cfg: UpstreamAuth,
    redirect: String,
    server: tokio::sync::Mutex<Option<Arc<Server>>>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Where tokens are kept (set by the generation; a private memory vault otherwise).
    vault: OnceLock<Arc<Vault>>,
    /// This process's cache of the vault: per principal, when it was read and what it held.
    tokens: Mutex<HashMap<String, (Instant, Option<Arc<Held>>)>>,
    refresh: tokio::sync::Mutex<()>,
    /// Per principal: the scopes step-ups asked for, and sign-ins asked for no new scope.
    wanted: Mutex<HashMap<String, (Vec<String>, u32)>>,
    /// Set when the upstream refused a token (401): discovery is read again.
    stale: std::sync::atomic::AtomicBool,
    /// When discovery or registration last failed, and how (answered from memory for
    /// [`super::RETRY_AFTER`]: users calling cannot make Sluice ask the servers at will).
    failed: Mutex<Option<(Instant, UpstreamError)>>,
}

impl Users {
    /// The users of upstream `name` at `url`; `redirect`: where browsers come back.
    pub fn new(name: &str, url: Uri, cfg: UpstreamAuth, redirect: String) -> Self {
        Users {
            name: name.to_owned(),
            url,
            cfg,
            redirect,
            server: tokio::sync::Mutex::new(None),
            pending: Mutex::new(HashMap::new()),
            vault: OnceLock::new(),
            tokens: Mutex::new(HashMap::new()),
            refresh: tokio::sync::Mutex::new(()),
            wanted: Mutex::new(HashMap::new()),
            stale: Default::default(),
            failed: Mutex::new(None),
        }
    }

    /// Keeps its users' tokens in `vault` (the process's: memory, or Redis under
    /// `[cluster]`); a second call changes nothing.
    pub fn use_vault(&self, vault: Arc<Vault>) {
        let _ = self.vault.set(vault);
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where browsers come back after consent.
    pub fn redirect(&self) -> &str {
        &self.redirect
    }

    /// The URL where `principal` consents to Sluice reaching the upstream as them; `base`:
    /// the headers of a request to the upstream (for its challenge, read without a token).
    pub async fn consent(
        &self,
        http: &HttpClient,
        principal: &str,
        base: &HeaderMap,
    ) -> Result<String, UpstreamError> {
        let server = self.server(http, base).await?;
        let scopes = self.scopes(&server, principal);
        let started = code::start(
            &self.name,
            &server.found,
            &server.client,
            &self.redirect,
            &scopes,
        )?;
        let mut p = Pending {
            principal: principal.to_owned(),
            verifier: started.verifier,
            redirect: self.redirect.clone(),
            server,
            expires: Instant::now() + PENDING_TTL,
            scopes,
            shared: false,
        };
        p.shared = self.share(&started.state, &p).await;
        let dropped = self.hold_pending(started.state, p)?;
        for state in dropped {
            self.abandon(&state).await; // bounded here: gone from the other replicas too
        }
        Ok(started.url)
    }

    /// Keeps the sign-in `state` in this replica's table, within its bounds; gives the states
    /// that made room.
    fn hold_pending(&self, state: String, p: Pending) -> Result<Vec<String>, UpstreamError> {
        let Ok(mut pending) = self.pending.lock() else {
            return Err(UpstreamError::Auth(self.name.clone(), "busy".into()));
        };
        let now = Instant::now();
        pending.retain(|_, p| p.expires > now);
        let mut mine: Vec<(Instant, String)> = pending
            .iter()
            .filter(|(_, q)| q.principal == p.principal)
            .map(|(k, q)| (q.expires, k.clone()))
            .collect();
        mine.sort();
        let mut dropped = Vec::new();
        while mine.len() >= PENDING_PER_PRINCIPAL {
            dropped.push(mine.remove(0).1);
        }
        if pending.len() >= MAX_PENDING {
            // Full: the sign-in nearest its expiry goes (a flood of them cannot lock users out).
            let first = pending.iter().min_by_key(|(_, q)| q.expires);
            dropped.extend(first.map(|(k, _)| k.clone()));
        }
        for k in &dropped {
            pending.remove(k);
        }
        pending.insert(state, p);
        Ok(dropped)
    }

    async fn server(
        &self,
        http: &HttpClient,
        base: &HeaderMap,
    ) -> Result<Arc<Server>, UpstreamError> {
        let mut held = self.server.lock().await;
        let stale = self.stale.swap(false, std::sync::atomic::Ordering::AcqRel);
        if let Some(s) = held.as_ref().filter(|_| !stale) {
            return Ok(s.clone());
        }
        if let Some((at, e)) = self.failed.lock().ok().and_then(|f| f.clone()) {
            if at.elapsed() < super::RETRY_AFTER {
                return Err(e);
            }
        }
        // One deadline for all of it (up to eight requests and a registration).
        let deadline = http.response_timeout();
        let found = tokio::time::timeout(deadline, self.discover(http, base, held.as_ref()))
            .await
            .unwrap_or_else(|_| {
                let why = format!(
                    "finding its authorization server took over {} ms (timeouts.response_ms)",
                    deadline.as_millis()
                );
                Err(UpstreamError::Auth(self.name.clone(), why))
            });
        if found.is_err() && stale {
            self.stale.store(true, std::sync::atomic::Ordering::Release);
        }
        if let Ok(mut f) = self.failed.lock() {
            *f = found.as_ref().err().map(|e| (Instant::now(), e.clone()));
        }
        let s = Arc::new(found?);
        *held = Some(s.clone());
        Ok(s)
    }

    /// Discovery, and Sluice's client at the server found (`was`: the one before, kept when
    /// the issuer is the same).
    async fn discover(
        &self,
        http: &HttpClient,
        base: &HeaderMap,
        was: Option<&Arc<Server>>,
    ) -> Result<Server, UpstreamError> {
        let challenge = super::challenge_of(http, &self.name, &self.url, base).await;
        let found = discovery::find(http, &self.name, &self.url, &challenge).await?;
        discovery::pinned(&self.name, &found, self.cfg.issuer.as_deref())?;
        // Sluice's client is the server's: kept while the issuer stays, made anew at another
        // (credentials are never carried from one authorization server to the next).
        let kept = was
            .filter(|s| s.found.issuer == found.issuer)
            .map(|s| s.client.clone());
        let client = match kept {
            Some(c) => c,
            None => register::client(http, &self.name, &found, &self.cfg, &self.redirect).await?,
        };
        tracing::info!(upstream = %self.name, how = client.how, "Sluice's client at the upstream's authorization server");
        let challenged = challenge.scope.as_deref().map(|c| {
            c.split(' ')
                .filter(|s| !s.is_empty())
                .take(MAX_SCOPES)
                .map(str::to_owned)
                .collect()
        });
        Ok(Server {
            found,
            client,
            challenged,
        })
    }

    /// The browser came back with `code` for `state` (and the server's `iss`): the code is
    /// exchanged and the token kept for the principal who asked; gives that principal. The
    /// `state` is gone after this, whatever the outcome.
    pub async fn finish(
        &self,
        http: &HttpClient,
        state: &str,
        code: &str,
        iss: Option<&str>,
    ) -> Result<String, UpstreamError> {
        let fail = |why: &str| UpstreamError::Auth(self.name.clone(), why.to_owned());
        let p = self
            .take(state)
            .await
            .filter(|p| Instant::now() < p.expires)
            .ok_or_else(|| fail("this sign-in link was used already or has expired: call the tool again for a new one"))?;
        let found = &p.server.found;
        match iss {
            Some(i) if i != found.issuer => {
                return Err(fail("the authorization response names another issuer than the server Sluice sent you to (RFC 9207): refused"))
            }
            None if found.user.iss_parameter => {
                return Err(fail("the authorization response carries no iss, which its server says it sends (RFC 9207): refused"))
            }
            _ => {}
        }
        let grant = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", p.redirect.as_str()),
            ("code_verifier", p.verifier.as_str()),
        ];
        let (headers, body) = code::request(found, &p.server.client, &grant)?;
        let what = "the authorization code";
        let (token, refresh) =
            grant::exchange(http, &self.name, found, headers, body, what).await?;
        let serial = rand::random::<u64>();
        let client = &p.server.client;
        let stored = self.stored(token, refresh, p.scopes, serial, found, client);
        self.keep(&p.principal, stored).await?;
        tracing::info!(upstream = %self.name, "a user signed in to the upstream");
        Ok(p.principal)
    }
}

#[cfg(test)]
mod tests;
