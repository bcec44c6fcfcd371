//! Scopes of one `oauth` upstream's users: which a sign-in asks for (MCP's scope selection
//! strategy), and the step-up after the upstream answers `403 insufficient_scope`.
//!
//! Takes the discovered server, the principal and, for a step-up, the upstream's challenge;
//! gives the scopes of the next sign-in (the configured ones, else the challenge's, else the
//! resource metadata's, with those a step-up asked for and `offline_access` where offered).
//! Refuses a step-up that names no new scope once [`MAX_SAME_SCOPE`] sign-ins asked the same,
//! and grows no principal's scopes past [`MAX_SCOPES`].

use http::HeaderValue;

use super::{Server, Users, MAX_SAME_SCOPE, MAX_SCOPES, MAX_USERS};

impl Users {
    /// The upstream answered `403` to `sent` with `challenge` (its `WWW-Authenticate`): when it
    /// is `insufficient_scope` naming scopes, the token is dropped and the principal's next
    /// sign-in asks for those and the ones asked before (step-up), unless it names no new
    /// scope and [`MAX_SAME_SCOPE`] sign-ins were asked for the same ones already. Gives
    /// whether the token was dropped.
    pub fn insufficient(
        &self,
        principal: &str,
        sent: &HeaderValue,
        challenge: Option<&str>,
    ) -> bool {
        let c = challenge
            .map(super::super::challenge::parse)
            .unwrap_or_default();
        let (Some("insufficient_scope"), Some(scope)) = (c.error.as_deref(), c.scope) else {
            return false;
        };
        let Some(held) = self.get(principal).filter(|h| h.header == *sent) else {
            return false;
        };
        let Ok(mut wanted) = self.wanted.lock() else {
            return false;
        };
        let mut union = held.scopes.clone();
        let mut grew = false;
        for s in scope.split(' ').filter(|s| !s.is_empty()) {
            if !union.iter().any(|x| x == s) && union.len() < MAX_SCOPES {
                union.push(s.to_owned());
                grew = true;
            }
        }
        let same = wanted.get(principal).map_or(0, |w| w.1);
        if !grew && same >= MAX_SAME_SCOPE {
            return false;
        }
        if wanted.len() >= MAX_USERS && !wanted.contains_key(principal) {
            wanted.clear();
        }
        wanted.insert(
            principal.to_owned(),
            (union, if grew { 0 } else { same + 1 }),
        );
        drop(wanted);
        self.drop_token(principal, sent);
        tracing::info!(upstream = %self.name, "the upstream wants more scope of a user: their next call asks them to sign in again");
        true
    }

    /// The scopes asked for (MCP's scope selection): the configured ones, else the upstream's
    /// challenge's, else its resource metadata's `scopes_supported`; with those a step-up
    /// asked for, and `offline_access` where the authorization server lists it.
    pub(super) fn scopes(&self, server: &Server, principal: &str) -> Vec<String> {
        let found = &server.found;
        let mut s = self
            .cfg
            .scopes
            .clone()
            .or_else(|| server.challenged.clone())
            .unwrap_or_else(|| found.scopes_supported.clone());
        if let Some((more, _)) = self
            .wanted
            .lock()
            .ok()
            .and_then(|w| w.get(principal).cloned())
        {
            for m in more {
                if !s.contains(&m) {
                    s.push(m);
                }
            }
        }
        let offline = "offline_access";
        if found.user.scopes_supported.iter().any(|x| x == offline)
            && !s.iter().any(|x| x == offline)
        {
            s.push(offline.to_owned());
        }
        s
    }
}
