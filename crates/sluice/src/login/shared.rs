//! The login front's records in Redis (`[cluster]`): every replica takes a client another
//! registered, a code another issued, a refresh token another rotated.
//!
//! Takes the records (`records.rs`, JSON) under `sluice:login:<kind>:<hex of a SHA-256>`; gives
//! them back as `store.rs`'s in-memory tables do: codes and finished sign-ins taken once
//! (`GETDEL`), refresh chains rotated in one script (a replay revokes the chain for every
//! replica). Refuses (as "not there" or "not kept": fail closed) whatever Redis does not answer
//! in time. Bounds: every key expires (registrations after [`REGISTRATION_TTL`], sign-ins after
//! [`PENDING_TTL`], codes after [`CODE_TTL`], chains after `refresh_token_ttl_ms`); at most
//! [`REGISTRATIONS_PER_MINUTE`] registrations per source and [`ALL_REGISTRATIONS_PER_MINUTE`]
//! in all per minute, and no more sign-ins, codes or cached documents made per lifetime than the
//! in-memory tables hold ([`MAX_PENDING`], [`MAX_CODES`], [`MAX_CLIENTS`]), cluster-wide.

use std::sync::Arc;
use std::time::Duration;

use super::bounds::{AUTHORIZATIONS_PER_MINUTE, REGISTRATIONS_PER_MINUTE, REGISTRATION_TTL};
use super::bounds::{CODE_TTL, MAX_CLIENTS, MAX_CODES, MAX_PENDING, PENDING_TTL};
use super::checks::{hashed, Hashed};
use super::records::{Client, Code, Family, Grant, Pending, Turn};
use crate::cluster::Cluster;

/// Registrations of all sources together per minute, cluster-wide.
pub const ALL_REGISTRATIONS_PER_MINUTE: u64 = 600;

/// The shared store.
pub struct Redis {
    cluster: Arc<Cluster>,
}

fn key(kind: &str, h: &Hashed) -> String {
    let hex: String = h.iter().map(|b| format!("{b:02x}")).collect();
    format!("sluice:login:{kind}:{hex}")
}

fn hex(h: &Hashed) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn parsed<T: serde::de::DeserializeOwned>(v: Option<String>) -> Option<T> {
    v.and_then(|v| serde_json::from_str(&v).ok())
}

impl Redis {
    /// On `cluster`'s Redis.
    pub fn new(cluster: Arc<Cluster>) -> Redis {
        Redis { cluster }
    }

    /// Counts a registration of `source` (and of all); `false` past either share.
    pub async fn count_registration(&self, source: std::net::IpAddr) -> bool {
        let s = &self.cluster.shared;
        let minute = Duration::from_secs(60);
        let all = s.login_count("sluice:login:registrations", minute).await;
        let one = s
            .login_count(&format!("sluice:login:source:{source}"), minute)
            .await;
        matches!((all, one), (Ok(a), Ok(o)) if a <= ALL_REGISTRATIONS_PER_MINUTE && o <= u64::from(REGISTRATIONS_PER_MINUTE))
    }

    /// Counts a sign-in begun by `source`; `false` past its share.
    pub async fn count_authorization(&self, source: std::net::IpAddr) -> bool {
        let k = format!("sluice:login:authorizing:{source}");
        let n = self
            .cluster
            .shared
            .login_count(&k, Duration::from_secs(60))
            .await;
        n.is_ok_and(|n| n <= u64::from(AUTHORIZATIONS_PER_MINUTE))
    }

    /// Whether one more record of `kind` may be made: at most `max` per `window` cluster-wide,
    /// so records that live `window` number `max` at most.
    async fn admit(&self, kind: &str, window: Duration, max: usize) -> bool {
        let k = format!("sluice:login:made:{kind}");
        let counted = self.cluster.shared.login_count(&k, window).await;
        counted.is_ok_and(|n| n <= max as u64)
    }

    /// Holds a client for `ttl` (a registration's, or a document's cache).
    pub async fn put_client(&self, c: &Client, ttl: Option<Duration>) -> bool {
        let k = key("client", &hashed(&c.client_id));
        let ttl = ttl.unwrap_or(REGISTRATION_TTL);
        if ttl != REGISTRATION_TTL && !self.admit("document", ttl, MAX_CLIENTS).await {
            return false;
        }
        self.cluster
            .shared
            .login_put(&k, &json(c), ttl)
            .await
            .unwrap_or(false)
    }

    /// The client `id`.
    pub async fn client(&self, id: &str) -> Option<Client> {
        let k = key("client", &hashed(id));
        parsed(self.cluster.shared.login_get(&k).await.ok().flatten())
    }

    /// Holds a sign-in under way.
    pub async fn put_pending(&self, k: &Hashed, p: &Pending) -> bool {
        if !self.admit("pending", PENDING_TTL, MAX_PENDING).await {
            return false;
        }
        let s = &self.cluster.shared;
        s.login_put(&key("pending", k), &json(p), PENDING_TTL)
            .await
            .unwrap_or(false)
    }

    /// The sign-in under way, left in place.
    pub async fn pending(&self, k: &Hashed) -> Option<Pending> {
        parsed(
            self.cluster
                .shared
                .login_get(&key("pending", k))
                .await
                .ok()
                .flatten(),
        )
    }

    /// Replaces a sign-in under way, its expiry kept.
    pub async fn update_pending(&self, k: &Hashed, p: &Pending) -> bool {
        let s = &self.cluster.shared;
        s.login_replace(&key("pending", k), &json(p))
            .await
            .unwrap_or(false)
    }

    /// The sign-in under way, taken.
    pub async fn take_pending(&self, k: &Hashed) -> Option<Pending> {
        parsed(
            self.cluster
                .shared
                .login_take(&key("pending", k))
                .await
                .ok()
                .flatten(),
        )
    }

    /// Holds a code.
    pub async fn put_code(&self, k: &Hashed, c: &Code) -> bool {
        if !self.admit("code", CODE_TTL, MAX_CODES).await {
            return false;
        }
        let s = &self.cluster.shared;
        s.login_put(&key("code", k), &json(c), CODE_TTL)
            .await
            .unwrap_or(false)
    }

    /// The code, taken.
    pub async fn take_code(&self, k: &Hashed) -> Option<Code> {
        parsed(
            self.cluster
                .shared
                .login_take(&key("code", k))
                .await
                .ok()
                .flatten(),
        )
    }

    /// Starts a refresh chain.
    pub async fn put_family(&self, k: &Hashed, f: &Family, ttl: Duration) -> bool {
        let (k, current, grant) = (key("family", k), hex(&f.current), json(&f.grant));
        let owner = key("principal", &hashed(&f.grant.principal));
        let chain = (f.grant.client_id.as_str(), current.as_str(), grant.as_str());
        let made = self.cluster.shared.login_chain(&k, &owner, chain, ttl);
        made.await.is_ok()
    }

    /// Revokes every sign-in of `principal` (its refresh token chains); gives how many.
    pub async fn revoke(&self, principal: &str) -> Result<u64, crate::cluster::Unavailable> {
        let owner = key("principal", &hashed(principal));
        self.cluster.shared.login_revoke_all(&owner).await
    }

    /// `principal`'s sign-ins held: `(client, revoked)`, at most `max`.
    pub async fn sign_ins(
        &self,
        principal: &str,
        max: usize,
    ) -> Result<Vec<(String, bool)>, crate::cluster::Unavailable> {
        let owner = key("principal", &hashed(principal));
        self.cluster.shared.login_chains(&owner, max).await
    }

    /// Presents `presented` to the chain `k` for `client_id`, `next` current if it was.
    pub async fn rotate(
        &self,
        k: &Hashed,
        presented: &Hashed,
        next: &Hashed,
        client_id: &str,
    ) -> Turn {
        let (k, presented, next) = (key("family", k), hex(presented), hex(next));
        let s = &self.cluster.shared;
        match s.login_rotate(&k, &presented, &next, client_id).await {
            Ok((1, grant)) => match parsed::<Grant>(grant) {
                Some(g) => Turn::Rotated(g),
                None => Turn::Unknown,
            },
            Ok((-1, _)) => Turn::Revoked,
            Ok((-2, _)) => Turn::OtherClient,
            Ok((-3, _)) => Turn::Replayed,
            _ => Turn::Unknown,
        }
    }
}
