//! Sign-ins in progress shared by the replicas (`[cluster]`): the browser may come back to any
//! replica behind the load balancer, so the one that gave the URL also puts the sign-in in the
//! vault, sealed, under the digest of its `state`, for [`PENDING_TTL`].
//!
//! Takes a pending sign-in and its `state`; gives, at the callback on any replica, the sign-in
//! back once: Redis's `GETDEL` makes its single use hold across replicas (with a shared vault
//! it is the only judge; the replica's own table keeps the per-principal bound). Refuses a
//! record that does not open (sealed under another key or for another upstream) or does not
//! parse: it reads as "used or expired". The record holds the PKCE verifier and Sluice's
//! client credentials: sealed, and with no `Debug`.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::super::discovery::{Found, UserEndpoints};
use super::{register, Pending, Server, Users, PENDING_TTL};
use crate::config::TokenEndpointAuth;

/// A pending sign-in as the vault keeps it.
#[derive(Serialize, Deserialize)]
struct Record {
    /// The upstream URL the sign-in was given for: finished only by an upstream at that URL.
    url: String,
    principal: String,
    verifier: String,
    redirect: String,
    scopes: Vec<String>,
    /// Unix ms.
    expires_ms: u64,
    issuer: String,
    iss_parameter: bool,
    token_endpoint: String,
    resource: String,
    client_id: String,
    client_secret: Option<String>,
    method: TokenEndpointAuth,
}

/// The key a `state` is shared under: its SHA-256 (the state itself is a bearer secret).
fn id(state: &str) -> String {
    crate::state::hex(&sha2::Sha256::digest(state.as_bytes()))
}

impl Users {
    /// Shares the sign-in `state` with the other replicas (a shared vault only); gives
    /// whether it is shared.
    pub(super) async fn share(&self, state: &str, p: &Pending) -> bool {
        if !self.vault().shared() {
            return false;
        }
        let (found, client) = (&p.server.found, &p.server.client);
        let left = p.expires.saturating_duration_since(Instant::now());
        let record = Record {
            url: self.url.to_string(),
            principal: p.principal.clone(),
            verifier: p.verifier.clone(),
            redirect: p.redirect.clone(),
            scopes: p.scopes.clone(),
            expires_ms: super::super::vault::now_ms() + left.as_millis() as u64,
            issuer: found.issuer.clone(),
            iss_parameter: found.user.iss_parameter,
            token_endpoint: found.token_endpoint.to_string(),
            resource: found.resource.clone(),
            client_id: client.id.clone(),
            client_secret: client.secret.clone(),
            method: client.method,
        };
        let plain = serde_json::to_vec(&record).unwrap_or_default();
        let key = id(state);
        let shared = self.vault().share(&self.name, &key, &plain, PENDING_TTL);
        let ok = shared.await.is_ok();
        if !ok {
            tracing::warn!(upstream = %self.name, "a sign-in could not be shared with the other replicas (Redis did not answer): only this replica can finish it");
        }
        ok
    }

    /// Whether this upstream issued `state` (still pending here, or shared by a replica).
    pub async fn issued(&self, state: &str) -> bool {
        let here = self.pending.lock().is_ok_and(|p| p.contains_key(state));
        here || self
            .vault()
            .shares(&self.name, &id(state))
            .await
            .unwrap_or(false)
    }

    /// Takes the pending sign-in `state`, once: a shared one as the vault's record decides
    /// (whichever replica gave the URL, and only one replica gets it); another from this
    /// replica's table.
    pub(super) async fn take(&self, state: &str) -> Option<Pending> {
        let here = self.pending.lock().ok().and_then(|mut p| p.remove(state));
        if !self.vault().shared() {
            return here;
        }
        let plain = self.vault().take_shared(&self.name, &id(state)).await;
        if here.as_ref().is_some_and(|p| !p.shared) {
            // Not shared as far as this replica knows (Redis did not answer then); taken from
            // Redis all the same, should the record have landed there.
            return here;
        }
        let r: Record = serde_json::from_slice(&plain.ok()??).ok()?;
        if r.url != self.url.to_string() {
            return None; // given for another URL of this upstream
        }
        let found = Found {
            issuer: r.issuer,
            token_endpoint: r.token_endpoint.parse().ok()?,
            resource: r.resource,
            scopes_supported: Vec::new(),
            grant_types: None,
            auth_methods: None,
            user: UserEndpoints {
                iss_parameter: r.iss_parameter,
                ..UserEndpoints::default()
            },
        };
        let client = register::Client {
            id: r.client_id,
            secret: r.client_secret,
            method: r.method,
            how: "shared",
        };
        let left = r.expires_ms.saturating_sub(super::super::vault::now_ms());
        Some(Pending {
            principal: r.principal,
            verifier: r.verifier,
            redirect: r.redirect,
            server: Arc::new(Server {
                found,
                client,
                challenged: None,
            }),
            expires: Instant::now() + std::time::Duration::from_millis(left),
            scopes: r.scopes,
            shared: true,
        })
    }

    /// Ends the pending sign-in `state` without a token (the server refused, or sent no code).
    pub async fn abandon(&self, state: &str) {
        let _ = self.take(state).await;
    }
}
