//! An upstream's credentials on each request: the headers configured for it (in `extra`),
//! Sluice's own token (`[upstream.auth] mode = "client_credentials"`), or, for one of a
//! `mode = "oauth"` upstream's per-user upstreams, its principal's token, or, for one of a
//! `mode = "token_exchange"` upstream's, the token exchanged for its principal's JWT.
//!
//! Takes a request for the upstream; gives the upstream's answer to it sent with the token
//! that applies, and drops a token the upstream refuses: on 401, and on a 403 that asks a
//! user's token for more scope. Refuses nothing itself: a token that cannot be had is the
//! token source's error (`oauth/`), naming the upstream.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue};

use super::{client, oauth, stdio, Upstream};

impl Upstream {
    /// How Sluice authenticates to it, for the audit record (`None`: static credentials).
    pub fn auth_mode(&self) -> Option<&'static str> {
        if self.per_user.is_some() || self.signed_in.is_some() {
            Some("oauth")
        } else if self.exchange.is_some() || self.exchanged_for.is_some() {
            Some("token_exchange")
        } else {
            self.auth.as_ref().map(|_| "client_credentials")
        }
    }

    /// Sends one 2026-07-28 request: POSTed to its URL, or, for a stdio server, written to its
    /// one process (`stdio::shared`); the answer reads the same either way.
    pub async fn post_modern(
        self: &Arc<Self>,
        client: &client::HttpClient,
        method: &crate::mcp::method::Method,
        headers: HeaderMap,
        body: bytes::Bytes,
        stream_timeout: Option<std::time::Duration>,
    ) -> Result<client::Answer, client::UpstreamError> {
        if self.stdio.is_some() {
            return stdio::shared::post(self, client, body, stream_timeout).await;
        }
        // A principal's own token (`token_exchange`: exchanged for their JWT; `oauth`: theirs
        // after they signed in): one the upstream refuses is dropped, and their next request
        // exchanges their JWT again or asks their consent again.
        let own = match (&self.exchanged_for, &self.signed_in) {
            (Some((exchange, principal)), _) => Some(exchange.header(client, principal).await?),
            (None, Some((users, principal))) => Some(users.header(client, principal).await?),
            (None, None) => None,
        };
        if let Some(token) = own {
            let mut headers = headers;
            headers.insert(http::header::AUTHORIZATION, token.clone());
            let answer = self
                .balancer
                .post(&self.name, client, method, headers, body, stream_timeout)
                .await?;
            self.auth_refused(client, status_of(&answer), Some(&token));
            return Ok(answer);
        }
        let Some(auth) = &self.auth else {
            return self
                .balancer
                .post(&self.name, client, method, headers, body, stream_timeout)
                .await;
        };
        // A token the upstream refuses is dropped and the request sent once more with another.
        let mut headers = headers;
        for last in [false, true] {
            let token = auth.header(client, &self.modern_base).await?;
            headers.insert(http::header::AUTHORIZATION, token.clone());
            let answer = self
                .balancer
                .post(
                    &self.name,
                    client,
                    method,
                    headers.clone(),
                    body.clone(),
                    stream_timeout,
                )
                .await?;
            let refused = status_of(&answer) == Some(http::StatusCode::UNAUTHORIZED);
            if refused {
                auth.rejected(&token);
            }
            if !refused || last {
                return Ok(answer);
            }
        }
        unreachable!("the loop returns on its last turn")
    }

    /// Keeps its users' tokens (`mode = "oauth"`) in the process's `vault`.
    pub fn use_vault(&self, vault: &Arc<oauth::vault::Vault>) {
        if let Some(pu) = &self.per_user {
            pu.users.use_vault(vault.clone());
        }
    }

    /// The token held for it, for headers built where no fetch can wait (2025-11-25 sessions,
    /// after [`Upstream::authorize`]).
    pub fn held_token(&self) -> Option<HeaderValue> {
        if let Some((users, principal)) = &self.signed_in {
            return users.held(principal);
        }
        if let Some((exchange, principal)) = &self.exchanged_for {
            return exchange.held(principal);
        }
        self.auth.as_ref().and_then(oauth::Auth::held)
    }

    /// The upstream answered 401 to a request bearing `sent` (a 2025-11-25 session's): the
    /// token is dropped, so the next session fetches another.
    pub fn token_refused(&self, sent: Option<&HeaderValue>) {
        if let (Some(auth), Some(sent)) = (&self.auth, sent) {
            auth.rejected(sent);
        }
        if let (Some((users, principal)), Some(sent)) = (&self.signed_in, sent) {
            users.rejected(principal, sent);
        }
        if let (Some((exchange, principal)), Some(sent)) = (&self.exchanged_for, sent) {
            exchange.rejected(principal, sent);
        }
    }

    /// The upstream answered `status` to a request bearing `sent`: a 401 drops the token
    /// ([`Upstream::token_refused`]); a 403 that asks a user's token for more scope drops it
    /// too, so their next call asks them to sign in with it (`Users::insufficient`).
    pub fn auth_refused(
        &self,
        client: &client::HttpClient,
        status: Option<http::StatusCode>,
        sent: Option<&HeaderValue>,
    ) {
        match status {
            Some(http::StatusCode::UNAUTHORIZED) => self.token_refused(sent),
            Some(http::StatusCode::FORBIDDEN) => {
                if let (Some((users, principal)), Some(sent)) = (&self.signed_in, sent) {
                    let challenge = client.challenges.take(sent);
                    users.insufficient(principal, sent, challenge.as_deref());
                }
            }
            _ => {}
        }
    }

    /// Gets a token for it when its `[upstream.auth]` asks for one and none is held.
    pub async fn authorize(
        &self,
        client: &client::HttpClient,
    ) -> Result<(), client::UpstreamError> {
        if let Some(auth) = &self.auth {
            auth.header(client, &self.modern_base).await?;
        }
        if let Some((users, principal)) = &self.signed_in {
            users.header(client, principal).await?;
        }
        if let Some((exchange, principal)) = &self.exchanged_for {
            exchange.header(client, principal).await?;
        }
        Ok(())
    }
}

/// The status of an answer that is not a stream.
pub fn status_of(answer: &client::Answer) -> Option<http::StatusCode> {
    match answer {
        client::Answer::Status(s, _) | client::Answer::Json(s, _) => Some(*s),
        client::Answer::Sse(_) => None,
    }
}
