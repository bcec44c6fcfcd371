//! What the vault keeps of one sign-in: enough for any replica to send the token, to refresh it
//! at the authorization server that issued it, and to tell whether it still belongs to the
//! upstream asking.
//!
//! Takes a token and what its sign-in used; gives the serialized entry (sealed by the vault)
//! and an operator's view of it without the secrets. Refuses nothing; it has no `Debug`, so no
//! token, refresh token or secret can be printed from it by mistake.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::TokenEndpointAuth;

/// One principal's sign-in at one upstream.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Stored {
    /// The upstream URL it was obtained for: an entry for another URL is not sent.
    pub url: String,
    /// The protected resource it is for (`resource`, sent again with a refresh).
    pub resource: String,
    /// The `Authorization` value: `Bearer …`.
    pub access: String,
    /// When it is refreshed (Unix ms): nine tenths into its lifetime.
    pub renew_ms: u64,
    /// When it stops being sent (Unix ms).
    pub expires_ms: u64,
    /// The refresh token, if the server gave one.
    pub refresh: Option<String>,
    /// The scopes asked for it.
    pub scopes: Vec<String>,
    /// Which sign-in it came from (random; a refresh keeps it).
    pub serial: u64,
    /// The authorization server that issued it, and its token endpoint (refreshed there only).
    pub issuer: String,
    pub token_endpoint: String,
    /// Sluice's client at that server.
    pub client_id: String,
    pub client_secret: Option<String>,
    pub method: TokenEndpointAuth,
}

impl Stored {
    /// Until when the entry is worth keeping: a refreshable one for [`super::KEEP`] after its
    /// last change, another until its access token expires.
    pub(crate) fn keep_until_ms(&self) -> u64 {
        match self.refresh {
            Some(_) => now_ms().saturating_add(super::KEEP.as_millis() as u64),
            None => self.expires_ms,
        }
    }

    /// The instant (of this process's clock) a Unix-ms time stands for.
    pub(crate) fn instant(ms: u64) -> Instant {
        let now = now_ms();
        let now_i = Instant::now();
        if ms >= now {
            now_i + std::time::Duration::from_millis(ms - now)
        } else {
            now_i
                .checked_sub(std::time::Duration::from_millis(now - ms))
                .unwrap_or(now_i)
        }
    }

    /// The Unix-ms time an instant of this process stands for.
    pub(crate) fn unix_ms(at: Instant) -> u64 {
        let now = Instant::now();
        match at.checked_duration_since(now) {
            Some(ahead) => now_ms().saturating_add(ahead.as_millis() as u64),
            None => now_ms().saturating_sub(now.duration_since(at).as_millis() as u64),
        }
    }

    /// What an operator sees of it.
    pub(crate) fn listed(&self, upstream: String, principal: String) -> super::Listed {
        super::Listed {
            principal,
            upstream,
            expires_ms: self.expires_ms,
            refreshable: self.refresh.is_some(),
            scopes: self.scopes.clone(),
            issuer: self.issuer.clone(),
        }
    }
}

/// The wall clock, in Unix milliseconds (0 before 1970).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
