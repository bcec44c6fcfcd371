//! Legacy client sessions: sealed, unguessable ids bound to the principal; bounded, least
//! recently used idle session evicted first; ended by DELETE or idle expiry.
//!
//! Takes an `initialize`; gives a session and its `Mcp-Session-Id` (visible ASCII). Refuses an
//! id that is forged, another principal's, ended or expired (the caller answers 404).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tokio::sync::{mpsc, oneshot};

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
    last_used: Mutex<Instant>,
    next_id: AtomicU64,
    /// Sluice's requests to the client waiting for its responses, by id (JSON text).
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Client requests in progress, by id (JSON text), for `notifications/cancelled`.
    pub inflight: Mutex<HashMap<String, tokio_util::sync::CancellationToken>>,
    /// The standalone GET stream, when open.
    pub get_stream: Mutex<Option<mpsc::Sender<Bytes>>>,
    /// Resource URIs subscribed with `resources/subscribe`.
    pub subscriptions: Mutex<Vec<String>>,
}

impl LegacySession {
    /// A server→client request id unique within the session.
    pub fn next_request_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a request to the client; its response arrives on the returned receiver.
    pub fn expect(&self, id: &str) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.to_owned(), tx);
        }
        rx
    }

    /// Delivers a response the client POSTed; `false` when nothing waits for it.
    pub fn deliver(&self, id: &str, msg: Value) -> bool {
        match self.pending.lock().ok().and_then(|mut p| p.remove(id)) {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }

    fn touch(&self) {
        if let Ok(mut t) = self.last_used.lock() {
            *t = Instant::now();
        }
    }

    fn idle_for(&self) -> Duration {
        self.last_used.lock().map(|t| t.elapsed()).unwrap_or_default()
    }
}

/// All legacy sessions.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<LegacySession>>>,
    key: [u8; 32],
    max: usize,
    idle: Duration,
}

type HmacSha256 = Hmac<Sha256>;

impl Sessions {
    /// An empty store holding at most `max` sessions, each ended after `idle` unused.
    pub fn new(max: usize, idle: Duration) -> Sessions {
        Sessions { map: Mutex::new(HashMap::new()), key: rand::random(), max: max.max(1), idle }
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

    /// Creates a session (evicting the least recently used one when full).
    pub fn create(&self, principal: &str, version: &str, caps: Map<String, Value>, client_info: Value) -> Arc<LegacySession> {
        let nonce: [u8; 16] = rand::random();
        let mut raw = nonce.to_vec();
        raw.extend_from_slice(&self.tag(principal, &nonce));
        let id = format!("s1.{}", URL_SAFE_NO_PAD.encode(raw));
        let s = Arc::new(LegacySession {
            id: id.clone(),
            principal: principal.to_owned(),
            version: version.to_owned(),
            caps,
            client_info,
            log_level: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            get_stream: Mutex::new(None),
            subscriptions: Mutex::new(Vec::new()),
        });
        if let Ok(mut m) = self.map.lock() {
            let idle = self.idle;
            m.retain(|_, s| s.idle_for() < idle);
            if m.len() >= self.max {
                if let Some(oldest) = m.iter().max_by_key(|(_, s)| s.idle_for()).map(|(k, _)| k.clone()) {
                    m.remove(&oldest);
                }
            }
            m.insert(id, s.clone());
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
        let mut m = self.map.lock().ok()?;
        let s = m.get(id).cloned()?;
        if s.idle_for() >= self.idle {
            m.remove(id);
            return None;
        }
        s.touch();
        Some(s)
    }

    /// Ends a session; `false` when it was not there.
    pub fn remove(&self, id: &str) -> bool {
        self.map.lock().ok().and_then(|mut m| m.remove(id)).is_some()
    }

    /// How many sessions are held.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_visible_ascii_and_bound_to_their_principal() {
        let s = Sessions::new(10, Duration::from_secs(60));
        let a = s.create("alice", "2025-11-25", Map::new(), Value::Null);
        assert!(a.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert!(s.get(&a.id, "alice").is_some());
        assert!(s.get(&a.id, "bob").is_none(), "another principal's id");
        // Flip one character of the tag (not the last one, whose low bits are padding).
        let mut forged: Vec<char> = a.id.chars().collect();
        let i = forged.len() - 5;
        forged[i] = if forged[i] == 'A' { 'B' } else { 'A' };
        let forged: String = forged.into_iter().collect();
        assert_ne!(forged, a.id);
        assert!(s.get(&forged, "alice").is_none());
        assert!(s.remove(&a.id));
        assert!(s.get(&a.id, "alice").is_none(), "ended");
    }

    #[test]
    fn the_least_recently_used_session_is_evicted_and_idle_ones_expire() {
        let s = Sessions::new(2, Duration::from_secs(60));
        let a = s.create("p", "v", Map::new(), Value::Null);
        std::thread::sleep(Duration::from_millis(5));
        let b = s.create("p", "v", Map::new(), Value::Null);
        assert!(s.get(&b.id, "p").is_some());
        let _c = s.create("p", "v", Map::new(), Value::Null);
        assert!(s.get(&a.id, "p").is_none(), "a was the least recently used");
        let short = Sessions::new(2, Duration::from_millis(1));
        let d = short.create("p", "v", Map::new(), Value::Null);
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.get(&d.id, "p").is_none(), "expired");
    }
}
