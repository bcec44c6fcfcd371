//! Legacy client sessions: sealed, unguessable ids bound to the principal; ended by DELETE, idle
//! expiry or eviction (and, on the 2024-11-05 HTTP+SSE transport, by its stream closing), each
//! of which cancels the session's `ended` token.
//!
//! Takes an `initialize` (or, on the 2024-11-05 transport, the GET that opens its stream, the
//! handshake settled by the first `initialize` after); gives a session and its id (visible
//! ASCII: the `Mcp-Session-Id`, or the `session_id` of the endpoint the stream names). Refuses an
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
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use store::Store;

use crate::mcp::sse::Frame;
use crate::state::{Keys, SHORT_TAG};

/// One legacy client's session.
pub struct LegacySession {
    /// Its id.
    pub id: String,
    /// The principal it belongs to.
    pub principal: String,
    /// What its `initialize` settled: set when the session is created, or, on the 2024-11-05
    /// HTTP+SSE transport (whose session opens with its GET stream), by its first `initialize`.
    handshake: OnceLock<Handshake>,
    /// On the 2024-11-05 HTTP+SSE transport, its one stream: every answer, request and
    /// notification for the client goes there (`sse.rs`). `None` on Streamable HTTP.
    pub sse_stream: Option<mpsc::Sender<Frame>>,
    /// Cancelled when the store lets go of the session (DELETE, eviction, expiry, its SSE
    /// stream closed): its GET stream ends with it.
    pub ended: tokio_util::sync::CancellationToken,
    /// The log level set with `logging/setLevel`.
    pub log_level: Mutex<Option<String>>,
    next_id: AtomicU64,
    /// Sluice's requests to the client waiting for its responses, by id (JSON text); each entry
    /// lives as long as the [`Expected`] that waits for it.
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Client requests in progress, by id (JSON text), for `notifications/cancelled`.
    pub inflight: Mutex<HashMap<String, tokio_util::sync::CancellationToken>>,
    /// The standalone GET stream, when open.
    pub get_stream: Mutex<Option<mpsc::Sender<Frame>>>,
    /// Resource URIs subscribed with `resources/subscribe`.
    subscriptions: Mutex<HashSet<String>>,
    max_subscriptions: usize,
    /// Call streams that ended early and wait for a `GET` with `Last-Event-ID` (`resume.rs`).
    pub(super) detached: Mutex<HashMap<u64, Detached>>,
    /// The number of the next call stream (its events' ids are `N-K`).
    pub(super) next_stream: AtomicU64,
}

/// What a legacy client's `initialize` settled.
pub struct Handshake {
    /// The negotiated protocol version.
    pub version: String,
    /// The client's capabilities, in their 2026-07-28 form.
    pub caps: Map<String, Value>,
    /// Its clientInfo.
    pub client_info: Value,
}

/// The capabilities of a session not initialized yet: none.
static NO_CAPS: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);

/// A call stream whose POST ended early, waiting for a `GET` to take it up (`resume.rs`).
pub(super) struct Detached {
    /// What the call writes.
    pub(super) from: mpsc::Receiver<Frame>,
    /// The number of the last event sent (its id's `K`).
    pub(super) sent: u64,
    /// The call's method and the name or URI it names, for the audit record of the `GET` that
    /// takes it up (the POST's was written when its stream ended).
    pub(super) method: String,
    pub(super) name: Option<String>,
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
    /// The negotiated protocol version (empty before `initialize`).
    pub fn version(&self) -> &str {
        self.handshake.get().map_or("", |h| h.version.as_str())
    }

    /// The client's capabilities, in their 2026-07-28 form (none before `initialize`).
    pub fn caps(&self) -> &Map<String, Value> {
        self.handshake.get().map_or(&NO_CAPS, |h| &h.caps)
    }

    /// Its clientInfo (null before `initialize`).
    pub fn client_info(&self) -> &Value {
        self.handshake
            .get()
            .map_or(&Value::Null, |h| &h.client_info)
    }

    /// Settles the handshake of a session opened before its `initialize` (the 2024-11-05
    /// transport's); `false` when it was settled already (a second `initialize`).
    pub fn initialize(&self, handshake: Handshake) -> bool {
        self.handshake.set(handshake).is_ok()
    }

    /// Whether the session is the 2024-11-05 HTTP+SSE transport's.
    pub fn is_sse(&self) -> bool {
        self.sse_stream.is_some()
    }

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
        Expected {
            session: self,
            id: id.to_owned(),
            rx,
        }
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
        let Ok(mut subs) = self.subscriptions.lock() else {
            return Ok(());
        };
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
        self.subscriptions
            .lock()
            .map(|s| s.contains(uri))
            .unwrap_or(false)
    }

    /// The URIs subscribed to now.
    pub fn subscriptions(&self) -> Vec<String> {
        self.subscriptions
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// All legacy sessions.
pub struct Sessions {
    store: Mutex<Store>,
    keys: Keys,
    max: usize,
    per_principal: usize,
    max_subscriptions: usize,
    idle: Duration,
}

/// The domain of a session id's tag (apart from `requestState`'s).
const DOMAIN: &[u8] = b"sluice/session/v2\0";
/// `s2.` then base64url(key id ‖ 16-byte nonce ‖ 16-byte tag).
const PREFIX: &str = "s2.";
const RAW: usize = 1 + 16 + SHORT_TAG;

impl Sessions {
    /// An empty store bounded by `bridge.max_client_sessions`,
    /// `max_client_sessions_per_principal`, `max_subscriptions_per_session` and
    /// `client_session_idle_ms`.
    /// Ids are tagged with the sealing key of `keys` (`[state] keys`): a replica that shares
    /// the keys can verify another's ids (the sessions themselves live in this process's store,
    /// so until that store is shared another replica still answers 404), and a rotated-out
    /// key's ids verify while it is in the ring.
    pub fn new(cfg: &crate::config::Bridge, keys: Keys) -> Sessions {
        Sessions {
            store: Mutex::new(Store::default()),
            keys,
            max: cfg.max_client_sessions.max(1),
            per_principal: cfg.max_client_sessions_per_principal.max(1),
            max_subscriptions: cfg.max_subscriptions_per_session,
            idle: cfg.client_session_idle,
        }
    }

    /// A fresh id for `principal`.
    fn mint(&self, principal: &str) -> String {
        let nonce: [u8; 16] = rand::random();
        let (key, tag) = self.keys.tag(DOMAIN, &[principal.as_bytes(), &nonce]);
        let mut raw = Vec::with_capacity(RAW);
        raw.push(key);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&tag);
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw))
    }

    /// Whether `id` is one this gateway (or a replica sharing its keys) minted for `principal`:
    /// the tag is checked, in constant time, before the store is looked at.
    fn genuine(&self, id: &str, principal: &str) -> bool {
        let Some(raw) = id
            .strip_prefix(PREFIX)
            .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
        else {
            return false;
        };
        if raw.len() != RAW {
            return false;
        }
        let (nonce, tag) = raw[1..].split_at(16);
        self.keys
            .verify_tag(raw[0], DOMAIN, &[principal.as_bytes(), nonce], tag)
    }

    /// Creates a session: expired ones go first, then (when full) the principal's own least
    /// recently used, then the least recently used of all.
    pub fn create(
        &self,
        principal: &str,
        version: &str,
        caps: Map<String, Value>,
        client_info: Value,
    ) -> Arc<LegacySession> {
        let handshake = Handshake {
            version: version.to_owned(),
            caps,
            client_info,
        };
        self.hold(
            self.mint(principal),
            principal,
            OnceLock::from(handshake),
            None,
        )
    }

    /// Creates a 2024-11-05 HTTP+SSE session, whose messages go to `stream` and whose
    /// handshake its first `initialize` settles; bounded and evicted as [`Sessions::create`].
    pub fn open_sse(&self, principal: &str, stream: mpsc::Sender<Frame>) -> Arc<LegacySession> {
        self.hold(
            self.mint(principal),
            principal,
            OnceLock::new(),
            Some(stream),
        )
    }

    /// Holds here a session another replica opened (its record read from the cluster's shared
    /// state), under the same bounds; `None` when `id` is not genuine for `principal`.
    pub fn adopt(
        &self,
        id: &str,
        principal: &str,
        version: &str,
        caps: Map<String, Value>,
        client_info: Value,
    ) -> Option<Arc<LegacySession>> {
        if !self.genuine(id, principal) {
            return None;
        }
        // Two requests of one session may both come to adopt it: the first one's copy stays.
        if let Some(held) = self
            .store
            .lock()
            .ok()
            .and_then(|mut st| st.touch(id, Instant::now(), self.idle))
        {
            return Some(held);
        }
        let handshake = Handshake {
            version: version.to_owned(),
            caps,
            client_info,
        };
        Some(self.hold(id.to_owned(), principal, OnceLock::from(handshake), None))
    }

    /// Whether `id` is genuine for `principal` (its tag checked in constant time).
    pub fn is_genuine(&self, id: &str, principal: &str) -> bool {
        self.genuine(id, principal)
    }

    fn hold(
        &self,
        id: String,
        principal: &str,
        handshake: OnceLock<Handshake>,
        sse_stream: Option<mpsc::Sender<Frame>>,
    ) -> Arc<LegacySession> {
        let s = Arc::new(LegacySession {
            id,
            principal: principal.to_owned(),
            handshake,
            sse_stream,
            ended: tokio_util::sync::CancellationToken::new(),
            log_level: Mutex::new(None),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            get_stream: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            max_subscriptions: self.max_subscriptions,
            detached: Mutex::new(HashMap::new()),
            next_stream: AtomicU64::new(1),
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
        if !self.genuine(id, principal) {
            return None;
        }
        self.store.lock().ok()?.touch(id, Instant::now(), self.idle)
    }

    /// Ends a session; `false` when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        self.store
            .lock()
            .ok()
            .and_then(|mut st| st.remove(id))
            .is_some()
    }

    /// Every session held and not idle past `bridge.client_session_idle_ms` (at most
    /// `bridge.max_client_sessions`).
    pub fn all(&self) -> Vec<Arc<LegacySession>> {
        self.store
            .lock()
            .map(|st| st.all(Instant::now(), self.idle))
            .unwrap_or_default()
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
