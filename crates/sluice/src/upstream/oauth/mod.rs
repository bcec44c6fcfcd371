//! Sluice's own identity at an upstream (`[upstream.auth] mode = "client_credentials"`, issue
//! 31): the upstream's authorization server found from its challenge and metadata, a token
//! from the client credentials grant, held and renewed.
//!
//! Takes the upstream's URL, its `[upstream.auth]` and the HTTP client; gives the
//! `Authorization` value to send now ([`Auth::header`]; the one held while it has a tenth of
//! its life left, else a new one, fetched once however many requests wait for it) and the one
//! held ([`Auth::held`], for the 2025-11-25 session paths that build headers without waiting).
//! A token the upstream answers 401 to is dropped ([`Auth::rejected`]). Refuses: after a failed
//! fetch, every request for [`RETRY_AFTER`] gets the same error instead of another fetch, and
//! a fetch within [`MIN_REFETCH`] of one that succeeded (an authorization server is not asked
//! once per request); a fetch over `timeouts.response_ms` in all; an authorization server other
//! than the configured `issuer`, or, without one, a token endpoint off the issuer's origin (the
//! secret goes nowhere else). The token and the secret are never in a log line, a span or an
//! error string.

mod challenge;
mod discovery;
pub mod exchange;
mod grant;
pub mod user;
pub mod vault;

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Uri};

use crate::config::UpstreamAuth;
use crate::upstream::client::{HttpClient, UpstreamError};

pub use challenge::Challenge;

/// How long a failed fetch is answered from memory.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);
/// The shortest time between two fetches that succeeded: an upstream that refuses every token
/// does not make Sluice ask its authorization server once per request.
pub const MIN_REFETCH: Duration = Duration::from_secs(5);

/// One upstream's token and how to get the next.
pub struct Auth {
    name: String,
    url: Uri,
    cfg: UpstreamAuth,
    held: RwLock<Option<Arc<grant::Token>>>,
    /// One fetch at a time; what discovery found, kept for the next fetch; the last failure.
    fetch: tokio::sync::Mutex<Fetch>,
}

#[derive(Default)]
struct Fetch {
    found: Option<discovery::Found>,
    failed: Option<(Instant, UpstreamError)>,
    fetched: Option<Instant>,
}

impl Auth {
    /// The auth of upstream `name` at `url`.
    pub fn new(name: &str, url: Uri, cfg: UpstreamAuth) -> Self {
        Auth {
            name: name.to_owned(),
            url,
            cfg,
            held: RwLock::new(None),
            fetch: tokio::sync::Mutex::new(Fetch::default()),
        }
    }

    /// The token held, until it expires (headers built where no fetch can wait).
    pub fn held(&self) -> Option<HeaderValue> {
        let held = self.held.read().ok()?.clone()?;
        (Instant::now() < held.expires_at).then(|| held.header.clone())
    }

    /// The token held, while it need not be renewed.
    fn fresh(&self) -> Option<HeaderValue> {
        let held = self.held.read().ok()?.clone()?;
        (Instant::now() < held.renew_at).then(|| held.header.clone())
    }

    /// The `Authorization` value to send now; `base`: the headers of a request to the upstream
    /// (for the challenge, read once, without a token).
    pub async fn header(
        &self,
        client: &HttpClient,
        base: &HeaderMap,
    ) -> Result<HeaderValue, UpstreamError> {
        if let Some(h) = self.fresh() {
            return Ok(h);
        }
        let mut fetch = self.fetch.lock().await;
        // Another request may have fetched it while this one waited.
        if let Some(h) = self.fresh() {
            return Ok(h);
        }
        if let Some((at, e)) = &fetch.failed {
            if at.elapsed() < RETRY_AFTER {
                return Err(e.clone());
            }
        }
        if fetch.fetched.is_some_and(|at| at.elapsed() < MIN_REFETCH) {
            // Fetched moments ago: the one held (being renewed) or, if the upstream refused it,
            // an error rather than another fetch.
            return self.held().ok_or_else(|| {
                let why = "it refused the token its authorization server gave moments ago; Sluice asks for another after 5 s";
                UpstreamError::Auth(self.name.clone(), why.into())
            });
        }
        // One deadline for the whole fetch (up to eight requests to metadata and token URLs).
        let deadline = client.response_timeout();
        let fetched = tokio::time::timeout(deadline, self.fetch_token(client, base, &mut fetch))
            .await
            .unwrap_or_else(|_| {
                let why = format!("finding its authorization server and a token took over {} ms (timeouts.response_ms)", deadline.as_millis());
                Err(UpstreamError::Auth(self.name.clone(), why))
            });
        match fetched {
            Ok(token) => {
                fetch.failed = None;
                fetch.fetched = Some(Instant::now());
                let h = token.header.clone();
                if let Ok(mut held) = self.held.write() {
                    *held = Some(Arc::new(token));
                }
                Ok(h)
            }
            Err(e) => {
                tracing::warn!(upstream = %self.name, error = %e, "no token for the upstream");
                fetch.failed = Some((Instant::now(), e.clone()));
                // Found again next time: the upstream may have moved to another server.
                fetch.found = None;
                Err(e)
            }
        }
    }

    /// The upstream answered 401 to `sent`: it is dropped, if still held (the next request
    /// fetches another, at most one per [`MIN_REFETCH`]).
    pub fn rejected(&self, sent: &HeaderValue) {
        if let Ok(mut held) = self.held.write() {
            if held.as_ref().is_some_and(|t| t.header == *sent) {
                *held = None;
            }
        }
    }

    async fn fetch_token(
        &self,
        client: &HttpClient,
        base: &HeaderMap,
        fetch: &mut Fetch,
    ) -> Result<grant::Token, UpstreamError> {
        let found = match fetch.found.take() {
            Some(f) => f,
            None => {
                let challenge = challenge_of(client, &self.name, &self.url, base).await;
                let found = discovery::find(client, &self.name, &self.url, &challenge).await?;
                discovery::pinned(&self.name, &found, self.cfg.issuer.as_deref())?;
                found
            }
        };
        let scopes = self
            .cfg
            .scopes
            .clone()
            .unwrap_or_else(|| found.scopes_supported.clone());
        let token = grant::client_credentials(client, &self.name, &found, &self.cfg, &scopes).await;
        fetch.found = Some(found);
        let token = token?;
        tracing::info!(upstream = %self.name, "obtained a token for the upstream (client credentials)");
        Ok(token)
    }
}

/// The Bearer challenge of the upstream `name` at `url` to a request without a token (none
/// when it gives none); `base`: the headers of a request to it.
pub(super) async fn challenge_of(
    client: &HttpClient,
    name: &str,
    url: &Uri,
    base: &HeaderMap,
) -> Challenge {
    let mut headers = base.clone();
    headers.remove(http::header::AUTHORIZATION);
    let ping = crate::mcp::method::Method::Ping.as_str();
    let body = Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":"sluice-auth","method":"{ping}"}}"#
    ));
    let Ok((headers, _)) = client
        .send(http::Method::POST, name, url, headers, body, None)
        .await
    else {
        return Challenge::default();
    };
    headers
        .get_all(http::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(challenge::parse)
        .find(|c| c.resource_metadata.is_some() || c.scope.is_some())
        .unwrap_or_default()
}
