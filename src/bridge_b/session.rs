//! Legacy client sessions: sealed, unguessable ids bound to the principal; ended by DELETE, idle
//! expiry or eviction.
//!
//! Takes an `initialize`; gives a session and its `Mcp-Session-Id` (visible ASCII). Refuses an
//! id that is forged, another principal's, ended or expired (the caller answers 404), and a
//! resource subscription past `bridge.max_subscriptions_per_session` ([`TooManySubscriptions`],
//! answered -32602).
//!
//! Bounds: at most `bridge.max_client_sessions_per_principal` sessions per principal (one more
//! evicts that principal's own least recently used session, so one principal cannot push out
//! another's) and `bridge.max_client_sessions` in all (one more evicts the least recently used
//! anywhere); a session unused for `bridge.client_session_idle_ms` is gone (checked lazily, on
//! `get` and before each eviction). Every store operation is O(log n): see [`store`]. A
//! session's subscriptions are a set of at most `max_subscriptions_per_session` URIs, and a
//! request Sluice sends the client stays registered only while its [`Expected`] lives.

mod store;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use store::Store;

/// One legacy client's session.
pub struct LegacySession {
    /// Its id.
    pub id: String,
    /// The principal it belongs to.
    pub principal: String,
    /// The negotiated protocol version.
    pub version: String,
    /// The client's capabilities, in their 2026-07-28 form.
    pub caps: Map<String, Value>,
    /// Its clientInfo.
    pub client_info: Value,
    /// The log level set with `logging/setLevel`.
    pub log_level: Mutex<Option<String>>,
    next_id: AtomicU64,
    /// Sluice's requests to the client waiting for its responses, by id (JSON text); each entry
    /// lives as long as the [`Expected`] that waits for it.
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Client requests in progress, by id (JSON text), for `notifications/cancelled`.
    pub inflight: Mutex<HashMap<String, tokio_util::sync::CancellationToken>>,
    /// The standalone GET stream, when open.
    pub get_stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// Resource URIs subscribed with `resources/subscribe`.
    subscriptions: Mutex<HashSet<String>>,
    max_subscriptions: usize,
}

/// A `resources/subscribe` past `bridge.max_subscriptions_per_session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this session already holds {0} resource subscriptions, the most allowed (bridge.max_subscriptions_per_session): unsubscribe from one first"
)]
pub struct TooManySubscriptions(pub usize);

/// A request Sluice sent the client: resolves to the client's response. Dropping it (answered,
/// timed out or abandoned) forgets the request, so a client that never answers leaves nothing.
pub struct Expected<'a> {
    session: &'a LegacySession,
    id: String,
    rx: oneshot::Receiver<Value>,
}

impl Future for Expected<'_> {
    type Output = Result<Value, oneshot::error::RecvError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx).poll(cx)
    }
}

impl Drop for Expected<'_> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.session.pending.lock() {
            p.remove(&self.id);
        }
    }
}

impl LegacySession {
    /// A server→client request id unique within the session.
    pub fn next_request_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a request to the client; the returned [`Expected`] resolves to its response
    /// and unregisters it when dropped.
    pub fn expect(&self, id: &str) -> Expected<'_> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.to_owned(), tx);
        }
        Expected { session: self, id: id.to_owned(), rx }
    }

    /// Delivers a response the client POSTed; `false` when nothing waits for it.
    pub fn deliver(&self, id: &str, msg: Value) -> bool {
        match self.pending.lock().ok().and_then(|mut p| p.remove(id)) {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }

    /// Subscribes to a resource URI (again is fine); refused past the session's cap.
    pub fn subscribe(&self, uri: &str) -> Result<(), TooManySubscriptions> {
        let Ok(mut subs) = self.subscriptions.lock() else { return Ok(()) };
        if !subs.contains(uri) {
            if subs.len() >= self.max_subscriptions {
                return Err(TooManySubscriptions(self.max_subscriptions));
            }
            subs.insert(uri.to_owned());
        }
        Ok(())
    }

    /// Drops a resource subscription (none held is fine).
    pub fn unsubscribe(&self, uri: &str) {
        if let Ok(mut subs) = self.subscriptions.lock() {
            subs.remove(uri);
        }
    }

    /// Whether the session subscribed to `uri`.
    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions.lock().map(|s| s.contains(uri)).unwrap_or(false)
    }

    /// The URIs subscribed to now.
    pub fn subscriptions(&self) -> Vec<String> {
        self.subscriptions.lock().map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }
}

/// All legacy sessions.
pub struct Sessions {
    store: Mutex<Store>,
    key: [u8; 32],
    max: usize,
    per_principal: usize,
    max_subscriptions: usize,
    idle: Duration,
}

type HmacSha256 = Hmac<Sha256>;

impl Sessions {
    /// An empty store bounded by `bridge.max_client_sessions`,
    /// `max_client_sessions_per_principal`, `max_subscriptions_per_session` and
    /// `client_session_idle_ms`.
    pub fn new(cfg: &crate::config::Bridge) -> Sessions {
        Sessions {
            store: Mutex::new(Store::default()),
            key: rand::random(),
            max: cfg.max_client_sessions.max(1),
            per_principal: cfg.max_client_sessions_per_principal.max(1),
            max_subscriptions: cfg.max_subscriptions_per_session,
            idle: cfg.client_session_idle,
        }
    }

    fn tag(&self, principal: &str, nonce: &[u8]) -> [u8; 16] {
        let mut m = <HmacSha256 as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| <HmacSha256 as Mac>::new_from_slice(&[0; 32]).expect("hmac key"));
        m.update(b"sluice/session/v1\0");
        m.update(principal.as_bytes());
        m.update(b"\0");
        m.update(nonce);
        let full = m.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// Creates a session: expired ones go first, then (when full) the principal's own least
    /// recently used, then the least recently used of all.
    pub fn create(&self, principal: &str, version: &str, caps: Map<String, Value>, client_info: Value) -> Arc<LegacySession> {
        let nonce: [u8; 16] = rand::random();
        let mut raw = nonce.to_vec();
        raw.extend_from_slice(&self.tag(principal, &nonce));
        let s = Arc::new(LegacySession {
            id: format!("s1.{}", URL_SAFE_NO_PAD.encode(raw)),
            principal: principal.to_owned(),
            version: version.to_owned(),
            caps,
            client_info,
            log_level: Mutex::new(None),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            get_stream: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            max_subscriptions: self.max_subscriptions,
        });
        if let Ok(mut st) = self.store.lock() {
            let now = Instant::now();
            st.expire(now, self.idle);
            if st.held_by(principal) >= self.per_principal {
                st.evict_oldest_of(principal);
            }
            if st.len() >= self.max {
                st.evict_oldest();
            }
            st.insert(s.clone(), now);
        }
        s
    }

    /// The session `id` names for `principal`: the tag is checked in constant time first.
    pub fn get(&self, id: &str, principal: &str) -> Option<Arc<LegacySession>> {
        let raw = URL_SAFE_NO_PAD.decode(id.strip_prefix("s1.")?).ok()?;
        if raw.len() != 32 {
            return None;
        }
        let (nonce, tag) = raw.split_at(16);
        if !bool::from(self.tag(principal, nonce).ct_eq(tag)) {
            return None;
        }
        self.store.lock().ok()?.touch(id, Instant::now(), self.idle)
    }

    /// Ends a session; `false` when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        self.store.lock().ok().and_then(|mut st| st.remove(id)).is_some()
    }

    /// How many sessions are held (expired ones not yet noticed included).
    pub fn len(&self) -> usize {
        self.store.lock().map(|st| st.len()).unwrap_or(0)
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
