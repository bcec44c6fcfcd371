//! Each principal as themselves at the company's identity provider (`[upstream.auth] mode =
//! "token_exchange"`, issue 31): the JWT a principal called Sluice with is exchanged there for a
//! token meant for the upstream (RFC 8693), which is what the upstream sees; the principal's own
//! JWT never goes upstream.
//!
//! Takes the upstream's `[upstream.auth]` (the IdP's `issuer`, Sluice's client there, the
//! `audience`, `resource` and `scopes`) and, per principal, the JWT they last authenticated with
//! ([`Exchange::subject`]); gives the `Authorization` value for that principal's requests
//! ([`Exchange::header`]): the exchanged token, held for the (principal, SHA-256 of their JWT)
//! it was exchanged for until nine tenths into its life, one exchange at a time per principal.
//! Bounded: [`MAX_PRINCIPALS`] principals per upstream (beyond, the one whose token expires
//! first is dropped). Refuses (an [`UpstreamError::Auth`]): a principal without a JWT, an IdP
//! whose metadata names another issuer or does not offer the grant or the client's
//! authentication, a refusal of the IdP (told by its OAuth error code only), an exchange over
//! `timeouts.response_ms`; a failed exchange is answered from memory for [`RETRY_AFTER`] for the
//! same JWT. Neither token is ever in a log line, a span or an error string.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Uri};
use sha2::{Digest, Sha256};

use super::discovery::{self, Found};
use super::grant::{self, Token};
use super::RETRY_AFTER;
use crate::auth::SubjectToken;
use crate::config::UpstreamAuth;
use crate::upstream::client::{HttpClient, UpstreamError};

/// The grant type of RFC 8693.
pub const GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The subject token's type: an access token the identity provider issued (RFC 8693 §3).
pub const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// Principals held per upstream.
pub const MAX_PRINCIPALS: usize = 100_000;

/// One `token_exchange` upstream's principals and their exchanged tokens.
pub struct Exchange {
    name: String,
    url: Uri,
    cfg: UpstreamAuth,
    /// The identity provider's metadata, found once.
    found: tokio::sync::Mutex<Option<Found>>,
    principals: Mutex<HashMap<String, Arc<Held>>>,
}

/// One principal's JWT and what it was exchanged for.
struct Held {
    /// Their latest JWT and its SHA-256.
    subject: Mutex<(SubjectToken, [u8; 32])>,
    /// The token exchanged for the JWT of that hash.
    token: Mutex<Option<([u8; 32], Arc<Token>)>>,
    /// The last failed exchange, for the JWT of that hash.
    failed: Mutex<Option<(Instant, [u8; 32], UpstreamError)>>,
    /// One exchange at a time.
    one: tokio::sync::Mutex<()>,
}

impl Exchange {
    /// The exchange of upstream `name` at `url`.
    pub fn new(name: &str, url: Uri, cfg: UpstreamAuth) -> Self {
        Exchange {
            name: name.to_owned(),
            url,
            cfg,
            found: tokio::sync::Mutex::new(None),
            principals: Mutex::new(HashMap::new()),
        }
    }

    /// Notes the JWT `principal` authenticated with now (the one their next exchange uses).
    pub fn subject(&self, principal: &str, subject: &SubjectToken) {
        let hash: [u8; 32] = Sha256::digest(subject.expose().as_bytes()).into();
        let Ok(mut all) = self.principals.lock() else {
            return;
        };
        if let Some(h) = all.get(principal) {
            if let Ok(mut s) = h.subject.lock() {
                if s.1 != hash {
                    *s = (subject.clone(), hash);
                }
            }
            return;
        }
        if all.len() >= MAX_PRINCIPALS {
            evict(&mut all);
        }
        let held = Held {
            subject: Mutex::new((subject.clone(), hash)),
            token: Mutex::new(None),
            failed: Mutex::new(None),
            one: tokio::sync::Mutex::new(()),
        };
        all.insert(principal.to_owned(), Arc::new(held));
    }

    fn held_for(&self, principal: &str) -> Result<Arc<Held>, UpstreamError> {
        self.principals
            .lock()
            .ok()
            .and_then(|all| all.get(principal).cloned())
            .ok_or_else(|| {
                UpstreamError::Auth(
                    self.name.clone(),
                    "this upstream needs you signed in with the company IdP's token (a JWT of [auth.jwt]); none came with this request".into(),
                )
            })
    }

    /// The token held for `principal`'s current JWT, until it expires (headers built where no
    /// exchange can wait).
    pub fn held(&self, principal: &str) -> Option<HeaderValue> {
        let held = self.held_for(principal).ok()?;
        let t = held.current(|t| Instant::now() < t.expires_at)?;
        Some(t.header.clone())
    }

    /// The `Authorization` value for `principal`'s request now: the token held for their
    /// current JWT while it need not be renewed, else a new exchange.
    pub async fn header(
        &self,
        client: &HttpClient,
        principal: &str,
    ) -> Result<HeaderValue, UpstreamError> {
        let held = self.held_for(principal)?;
        if let Some(t) = held.current(|t| Instant::now() < t.renew_at) {
            return Ok(t.header.clone());
        }
        let _one = held.one.lock().await;
        // Another request may have exchanged it while this one waited.
        if let Some(t) = held.current(|t| Instant::now() < t.renew_at) {
            return Ok(t.header.clone());
        }
        let (subject, hash) = held.subject.lock().map_err(|_| self.poisoned())?.clone();
        if let Some((at, h, e)) = held.failed.lock().map_err(|_| self.poisoned())?.as_ref() {
            if *h == hash && at.elapsed() < RETRY_AFTER {
                return Err(e.clone());
            }
        }
        let deadline = client.response_timeout();
        let exchanged = tokio::time::timeout(deadline, self.exchange(client, &subject))
            .await
            .unwrap_or_else(|_| {
                let why = format!("the token exchange at the company's identity provider took over {} ms (timeouts.response_ms)", deadline.as_millis());
                Err(UpstreamError::Auth(self.name.clone(), why))
            });
        match exchanged {
            Ok(token) => {
                tracing::info!(upstream = %self.name, principal = %crate::escape::Escaped(principal), "exchanged the principal's token at the identity provider");
                let h = token.header.clone();
                if let Ok(mut t) = held.token.lock() {
                    *t = Some((hash, Arc::new(token)));
                }
                Ok(h)
            }
            Err(e) => {
                tracing::warn!(upstream = %self.name, error = %e, "no exchanged token for the principal");
                if let Ok(mut f) = held.failed.lock() {
                    *f = Some((Instant::now(), hash, e.clone()));
                }
                Err(e)
            }
        }
    }

    /// The upstream answered 401 to `sent`: it is dropped, if still held for `principal` (their
    /// next request exchanges their JWT again).
    pub fn rejected(&self, principal: &str, sent: &HeaderValue) {
        let Ok(held) = self.held_for(principal) else {
            return;
        };
        let mut token = match held.token.lock() {
            Ok(t) => t,
            Err(_) => return,
        };
        if token.as_ref().is_some_and(|(_, t)| t.header == *sent) {
            *token = None;
        }
    }

    fn poisoned(&self) -> UpstreamError {
        UpstreamError::Auth(self.name.clone(), "a lock was poisoned".into())
    }

    /// One exchange of `subject` at the identity provider (its metadata found first, once).
    async fn exchange(
        &self,
        client: &HttpClient,
        subject: &SubjectToken,
    ) -> Result<Token, UpstreamError> {
        let mut found = self.found.lock().await;
        let idp = match found.as_ref() {
            Some(f) => f.clone(),
            None => {
                let issuer = self.cfg.issuer.as_deref().unwrap_or_default();
                let f = discovery::at_issuer(client, &self.name, issuer).await?;
                let idp = "the company's identity provider";
                grant::offered(&f, &self.cfg, GRANT, idp)
                    .map_err(|why| UpstreamError::Auth(self.name.clone(), why))?;
                *found = Some(f.clone());
                f
            }
        };
        drop(found);
        let (headers, body) = request(&idp, &self.cfg, &self.url, subject)?;
        let what = "the token exchange";
        let (token, _) = grant::exchange(client, &self.name, &idp, headers, body, what).await?;
        Ok(token)
    }
}

impl Held {
    /// The token exchanged for the current JWT, when `ok` says it may be used.
    fn current(&self, ok: impl Fn(&Token) -> bool) -> Option<Arc<Token>> {
        let hash = self.subject.lock().ok()?.1;
        let t = self.token.lock().ok()?;
        let (h, t) = t.as_ref()?;
        (*h == hash && ok(t)).then(|| t.clone())
    }
}

/// Makes room: the principals with no usable token go first, else the one whose token
/// expires first.
fn evict(all: &mut HashMap<String, Arc<Held>>) {
    let now = Instant::now();
    let expiry = |h: &Held| {
        h.token
            .lock()
            .ok()
            .and_then(|t| t.as_ref().map(|(_, t)| t.expires_at))
    };
    all.retain(|_, h| expiry(h).is_some_and(|e| e > now));
    if all.len() >= MAX_PRINCIPALS {
        let first = all
            .iter()
            .min_by_key(|(_, h)| expiry(h))
            .map(|(p, _)| p.clone());
        if let Some(p) = first {
            all.remove(&p);
        }
    }
}

/// The token exchange request (RFC 8693 §2.1): the subject token as an access token, an access
/// token asked for, the `audience` and `resource` configured (the upstream's `url` as the
/// resource when neither is), the scopes, and Sluice's client authentication.
fn request(
    idp: &Found,
    cfg: &UpstreamAuth,
    url: &Uri,
    subject: &SubjectToken,
) -> Result<(HeaderMap, Bytes), UpstreamError> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", GRANT);
    form.append_pair("subject_token", subject.expose());
    form.append_pair("subject_token_type", ACCESS_TOKEN);
    form.append_pair("requested_token_type", ACCESS_TOKEN);
    let target = &cfg.target;
    if let Some(a) = &target.audience {
        form.append_pair("audience", a);
    }
    match (&target.resource, &target.audience) {
        (Some(r), _) => {
            form.append_pair("resource", r);
        }
        (None, None) => {
            form.append_pair("resource", &url.to_string());
        }
        (None, Some(_)) => {}
    }
    if let Some(scopes) = cfg.scopes.as_ref().filter(|s| !s.is_empty()) {
        form.append_pair("scope", &scopes.join(" "));
    }
    let mut headers = HeaderMap::new();
    grant::client_auth(&mut form, &mut headers, cfg, &idp.issuer)?;
    grant::post_headers(&mut headers, &idp.token_endpoint, grant::FORM);
    Ok((headers, Bytes::from(form.finish())))
}

#[cfg(test)]
mod tests;
