//! The pool of legacy sessions, keyed by (principal, upstream, declared capabilities).
//!
//! Takes a lease request; gives a [`Lease`]: an idle session of that key, or a new one. A lease
//! is exclusive and returns its session to the pool when dropped (a broken one is closed
//! instead). Idle sessions are ended (DELETE) after `bridge.session_idle_ms`. Refuses a new
//! session past `bridge.max_sessions` when no idle session can be evicted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::session::{ListChanged, Session};
use crate::upstream::client::{HttpClient, UpstreamError};
use crate::upstream::Upstream;

type Key = (String, String, String);

/// All legacy sessions Sluice holds.
pub struct Pool {
    client: HttpClient,
    idle: Mutex<HashMap<Key, Vec<Arc<Session>>>>,
    count: AtomicUsize,
    max: usize,
    idle_ttl: Duration,
}

/// One session leased to one call.
pub struct Lease {
    /// The session.
    pub session: Arc<Session>,
    pool: Arc<Pool>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.session.set_leased(false);
        self.pool.give_back(self.session.clone());
    }
}

impl Pool {
    /// An empty pool.
    pub fn new(client: HttpClient, max: usize, idle_ttl: Duration) -> Arc<Pool> {
        Arc::new(Pool { client, idle: Mutex::new(HashMap::new()), count: AtomicUsize::new(0), max, idle_ttl })
    }

    /// How many sessions are open (idle and leased).
    pub fn open_sessions(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Leases a session of this key, opening one when none is idle.
    pub async fn lease(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        principal: &str,
        caps: &Value,
        on_list_changed: ListChanged,
    ) -> Result<Lease, UpstreamError> {
        let key = (principal.to_owned(), up.name.clone(), caps.to_string());
        let reused = self.idle.lock().ok().and_then(|mut m| m.get_mut(&key).and_then(Vec::pop));
        let session = match reused {
            Some(s) => s,
            None => {
                if self.count.load(Ordering::Relaxed) >= self.max && !self.evict_one().await {
                    return Err(UpstreamError::Protocol(
                        up.name.clone(),
                        format!("too many legacy sessions open (bridge.max_sessions = {})", self.max),
                    ));
                }
                let s = Session::open(&self.client, up.clone(), caps, principal, on_list_changed).await?;
                self.count.fetch_add(1, Ordering::Relaxed);
                s
            }
        };
        session.set_leased(true);
        Ok(Lease { session, pool: self.clone() })
    }

    fn give_back(self: &Arc<Self>, s: Arc<Session>) {
        if s.broken.load(Ordering::Acquire) {
            self.count.fetch_sub(1, Ordering::Relaxed);
            let client = self.client.clone();
            tokio::spawn(async move { s.close(&client).await });
            return;
        }
        if let Ok(mut t) = s.idle_since.lock() {
            *t = Instant::now();
        }
        let key = (s.principal.clone(), s.up.name.clone(), s.caps_key.clone());
        if let Ok(mut m) = self.idle.lock() {
            m.entry(key).or_default().push(s);
        }
    }

    async fn evict_one(&self) -> bool {
        let victim = self.idle.lock().ok().and_then(|mut m| {
            let key = m
                .iter()
                .filter_map(|(k, v)| v.first().and_then(|s| Some((k.clone(), *s.idle_since.lock().ok()?))))
                .min_by_key(|(_, t)| *t)
                .map(|(k, _)| k)?;
            let list = m.get_mut(&key)?;
            let s = list.remove(0);
            if list.is_empty() {
                m.remove(&key);
            }
            Some(s)
        });
        match victim {
            Some(s) => {
                self.count.fetch_sub(1, Ordering::Relaxed);
                s.close(&self.client).await;
                true
            }
            None => false,
        }
    }

    /// Ends sessions idle longer than the idle TTL (`all`: every idle session, at shutdown).
    pub async fn sweep(&self, all: bool) {
        let now = Instant::now();
        let expired: Vec<Arc<Session>> = match self.idle.lock() {
            Ok(mut m) => {
                let mut out = Vec::new();
                for list in m.values_mut() {
                    let (old, keep): (Vec<_>, Vec<_>) = list
                        .drain(..)
                        .partition(|s| all || s.idle_since.lock().map(|t| now.duration_since(*t) >= self.idle_ttl).unwrap_or(true));
                    *list = keep;
                    out.extend(old);
                }
                m.retain(|_, v| !v.is_empty());
                out
            }
            Err(_) => Vec::new(),
        };
        for s in expired {
            self.count.fetch_sub(1, Ordering::Relaxed);
            s.close(&self.client).await;
        }
    }
}
