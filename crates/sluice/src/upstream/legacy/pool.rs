//! The pool of legacy sessions, keyed by (principal, upstream, bridged capability set).
//!
//! Takes a lease request; gives a [`Lease`]: an idle session of that key, or a new one. A lease
//! is exclusive and returns its session to the pool when dropped (a broken one is closed
//! instead). The key's capabilities are the closed [`Bridged`] set, so a client cannot force a
//! new handshake by varying what it declares; a principal's client sessions all lease from its
//! pool (a 2025-11-25 client's session holds none of its own). Idle sessions are ended (DELETE,
//! or the process ended) after `bridge.session_idle_ms`, a stdio upstream's after its own
//! `idle_ms` when that is shorter. Sluice's own requests (probes, lists) to a stdio upstream share its one process:
//! one waits (at most `timeouts.response_ms`) for another's to be given back rather than start
//! a second process. A stdio start that fails logs what the process wrote to stderr before its
//! handshake (`stdio::boot`). Bounded: a stdio upstream's `max_processes_per_principal` per
//! principal (one process per session) and `bridge.max_sessions_per_principal` per principal (a
//! principal at either closes its own least recently used idle session; Sluice's internal
//! principal is exempt), `bridge.max_sessions` in all (the least recently used idle session
//! anywhere is closed) and a stdio upstream's `max_processes` (the place of a process being
//! ended is waited for, within the grace it has to end; else its least recently used idle
//! session is closed); every pool operation is O(log n), see [`slots`]. Refuses a new session
//! past any of them when no idle session can be closed for it with 503 and `Retry-After`,
//! naming the limit ([`crate::shares::Full`]), never a misleading "not MCP".

mod slots;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;

use serde_json::Value;
use tokio::time::Instant;

use self::slots::{Caps, Key, Slots};
use super::session::{ListChanged, Session};
use super::Bridged;
use crate::upstream::client::{HttpClient, UpstreamError};
use crate::upstream::Upstream;

/// All legacy sessions Sluice holds.
pub struct Pool {
    client: HttpClient,
    slots: Mutex<Slots<Arc<Session>>>,
    caps: Caps,
    /// The principal exempt from the cap per principal (Sluice's own list and probe calls).
    exempt: &'static str,
    idle_ttl: Duration,
    /// Told whenever a session is given back.
    returned: tokio::sync::Notify,
    /// How long a stdio process is given to end (half after its stdin closes, half after SIGTERM).
    grace: Duration,
}

/// One session leased to one call.
pub struct Lease {
    /// The session.
    pub session: Arc<Session>,
    pool: Arc<Pool>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.session
            .up
            .leases
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.session.set_leased(false);
        self.pool.give_back(self.session.clone());
    }
}

/// A counted slot for a session being opened; released unless the session opened.
struct Reservation<'a> {
    pool: &'a Pool,
    key: &'a Key,
    opened: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if !self.opened {
            if let Ok(mut s) = self.pool.slots.lock() {
                s.release(&self.key.principal, self.key.instance);
            }
        }
    }
}

impl Pool {
    /// An empty pool bounded by `bridge.max_sessions`, `max_sessions_per_principal` (not for
    /// `exempt`) and `session_idle_ms`.
    /// `grace` bounds the end of a stdio session's process (`timeouts.shutdown_ms`).
    pub fn new(
        client: HttpClient,
        cfg: &crate::config::Bridge,
        exempt: &'static str,
        grace: Duration,
    ) -> Arc<Pool> {
        let caps = Caps {
            max: cfg.max_sessions,
            per_principal: cfg.max_sessions_per_principal,
            per_upstream: None,
        };
        let slots = Mutex::new(Slots::default());
        Arc::new(Pool {
            client,
            slots,
            caps,
            exempt,
            idle_ttl: cfg.session_idle,
            returned: tokio::sync::Notify::new(),
            grace,
        })
    }

    /// How many sessions are open (idle and leased).
    pub fn open_sessions(&self) -> usize {
        self.slots.lock().map(|s| s.open()).unwrap_or(0)
    }

    /// Leases a session of this key (`caps` is normalized to the bridged set), opening one when
    /// none is idle.
    pub async fn lease(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        principal: &str,
        caps: &Value,
        on_list_changed: ListChanged,
    ) -> Result<Lease, UpstreamError> {
        let key = Key {
            principal: principal.to_owned(),
            upstream: up.name.clone(),
            instance: up.instance,
            caps: Bridged::from_value(caps),
        };
        let session = self.take_or_open(up, &key, on_list_changed).await?;
        session.discard_queued();
        session.set_leased(true);
        session
            .up
            .leases
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(Lease {
            session,
            pool: self.clone(),
        })
    }

    /// An idle session of `key`, else a new one. Sluice's own requests to a stdio upstream that
    /// already has a process of Sluice's wait for it to be given back (within
    /// `timeouts.response_ms`, then a new one is started): a list refresh that a list change
    /// set off during a probe does not start a second server.
    async fn take_or_open(
        &self,
        up: &Arc<Upstream>,
        key: &Key,
        on_list_changed: ListChanged,
    ) -> Result<Arc<Session>, UpstreamError> {
        let deadline = Instant::now() + self.client.response_timeout();
        loop {
            // Armed before looking, so a session given back in between is not missed.
            let returned = self.returned.notified();
            tokio::pin!(returned);
            returned.as_mut().enable();
            if let Some(s) = self.take_usable(key) {
                return Ok(s);
            }
            let own = up.stdio.is_some() && key.principal == self.exempt;
            let busy = own
                && self
                    .slots
                    .lock()
                    .is_ok_and(|s| s.held_of(&key.principal, key.instance) > 0);
            if !busy || tokio::time::timeout_at(deadline, returned).await.is_err() {
                return self.open(up, key, on_list_changed).await;
            }
        }
    }

    /// The most recently returned idle session of `key` that can still serve (a stdio one whose
    /// process exited is closed and counted gone).
    fn take_usable(&self, key: &Key) -> Option<Arc<Session>> {
        loop {
            let s = self.slots.lock().ok()?.take(key)?;
            if s.is_usable() {
                return Some(s);
            }
            if let Ok(mut slots) = self.slots.lock() {
                slots.release(&s.principal, s.up.instance);
            }
        }
    }

    /// Reserves room (closing an idle session when a cap says so) and opens a session.
    async fn open(
        &self,
        up: &Arc<Upstream>,
        key: &Key,
        on_list_changed: ListChanged,
    ) -> Result<Arc<Session>, UpstreamError> {
        let exempt = key.principal == self.exempt;
        // A stdio upstream's sessions are its processes: one principal holds at most its share.
        let caps = Caps {
            per_upstream: up.stdio.as_ref().map(|s| s.cfg.max_processes_per_principal),
            ..self.caps
        };
        let reserved = self
            .slots
            .lock()
            .map_err(|_| UpstreamError::Closed(up.name.clone()))?
            .reserve(&key.principal, key.instance, exempt, caps);
        let max_processes = up
            .stdio
            .as_ref()
            .map_or(usize::MAX, |s| s.cfg.max_processes);
        let closed = reserved.map_err(|r| UpstreamError::Full(r.full(&up.name, max_processes)))?;
        let mut slot = Reservation {
            pool: self,
            key,
            opened: false,
        };
        if let Some(s) = closed {
            s.close(&self.client).await;
        }
        let s = match (&up.stdio, up.is_sse()) {
            (Some(spec), _) => self.open_stdio(up, spec, key, on_list_changed).await?,
            (None, true) => self.open_sse(up, key, on_list_changed).await?,
            (None, false) => {
                Session::open(
                    &self.client,
                    up.clone(),
                    key.caps,
                    &key.principal,
                    on_list_changed,
                )
                .await?
            }
        };
        slot.opened = true;
        Ok(s)
    }

    /// A stdio session's process: a warm spare, else one started in a free place under its
    /// `max_processes` (the upstream's least recently used idle session is ended to make one
    /// when none is free).
    async fn open_stdio(
        &self,
        up: &Arc<Upstream>,
        spec: &crate::upstream::stdio::Spec,
        key: &Key,
        on_list_changed: ListChanged,
    ) -> Result<Arc<Session>, UpstreamError> {
        let started = match spec.take_spare(self.grace) {
            Some(warm) => warm,
            None => spec.start(self.place(up, spec).await?, self.grace)?,
        };
        let (proc, lines) = started;
        let channel = super::channel::Channel::Stdio(proc.clone());
        let mut open = self.inline(
            channel,
            super::inline::Source::Lines(lines),
            key,
            on_list_changed,
        );
        open.handshake = spec.cfg.start;
        let opened = super::inline::open(up.clone(), open).await;
        match &opened {
            Ok(_) => {
                // Before any call is written to it: its stderr is no longer kept.
                proc.handshaken();
                spec.succeeded();
            }
            Err(e) => {
                spec.failed();
                // Said once its stderr ended (or after the grace), not holding up the caller.
                let (up, why) = (up.clone(), e.to_string());
                tokio::spawn(async move {
                    if let Some(spec) = &up.stdio {
                        spec.log_failed_start(&why, &proc).await;
                    }
                });
            }
        }
        opened
    }

    /// A place under a stdio upstream's `max_processes`: a free one; else the one a process
    /// being ended frees (within the grace it has to end: a call cancelled to make room for
    /// this one, or an idle session closed); else the upstream's least recently used idle
    /// session is ended for it; else refused at once, naming `max_processes` (Sluice's own
    /// probes and lists too: every process in use is no sign of a server down, and the catalog
    /// keeps what it knew, `Spec::saturated`).
    async fn place(
        &self,
        up: &Upstream,
        spec: &crate::upstream::stdio::Spec,
    ) -> Result<OwnedSemaphorePermit, UpstreamError> {
        if let Some(slot) = spec.slot() {
            return Ok(slot);
        }
        if spec.ending() {
            if let Some(slot) = spec.slot_within(self.grace).await {
                return Ok(slot);
            }
        }
        let victim = self
            .slots
            .lock()
            .ok()
            .and_then(|mut s| s.close_oldest_of(&up.name));
        if let Some(victim) = victim {
            victim.close(&self.client).await;
            drop(victim);
            return spec
                .slot_within(self.grace)
                .await
                .ok_or_else(|| spec.full());
        }
        Err(spec.full())
    }

    /// A 2024-11-05 HTTP+SSE session: its own GET stream, initialized.
    async fn open_sse(
        &self,
        up: &Arc<Upstream>,
        key: &Key,
        on_list_changed: ListChanged,
    ) -> Result<Arc<Session>, UpstreamError> {
        let (link, stream) = super::sse::connect(&self.client, up).await?;
        let channel = super::channel::Channel::Sse(link);
        super::inline::open(
            up.clone(),
            self.inline(
                channel,
                super::inline::Source::Sse(stream),
                key,
                on_list_changed,
            ),
        )
        .await
    }

    fn inline<'a>(
        &self,
        channel: super::channel::Channel,
        source: super::inline::Source,
        key: &'a Key,
        on_list_changed: ListChanged,
    ) -> super::inline::Open<'a> {
        super::inline::Open {
            channel,
            source,
            caps: key.caps,
            principal: &key.principal,
            on_list_changed,
            handshake: self.client.response_timeout(),
            max_event: self.client.max_event_bytes(),
        }
    }

    fn give_back(self: &Arc<Self>, s: Arc<Session>) {
        // A session of an upstream a reload removed or replaced ends once its call is done.
        if !s.is_usable() || s.up.retired.is_cancelled() {
            // A stdio process is told to end now, not once the task below runs: a call waiting
            // for its place (`place`) sees it ending.
            s.end_channel("its session was closed");
            if let Ok(mut slots) = self.slots.lock() {
                slots.release(&s.principal, s.up.instance);
            }
            self.returned.notify_waiters();
            let client = self.client.clone();
            tokio::spawn(async move { s.close(&client).await });
            return;
        }
        let key = Key {
            principal: s.principal.clone(),
            upstream: s.up.name.clone(),
            instance: s.up.instance,
            caps: s.caps,
        };
        // A stdio process costs a whole server: its own idle time, within the bridge's.
        let idle =
            s.up.stdio
                .as_ref()
                .map_or(self.idle_ttl, |spec| spec.cfg.idle.min(self.idle_ttl));
        if let Ok(mut slots) = self.slots.lock() {
            slots.put(key, s, Instant::now() + idle);
        }
        self.returned.notify_waiters();
    }

    /// Ends sessions idle past their idle time (`all`: every idle session, at shutdown).
    pub async fn sweep(&self, all: bool) {
        let now = (!all).then(Instant::now);
        let expired = self
            .slots
            .lock()
            .map(|mut s| s.expire(now))
            .unwrap_or_default();
        for s in expired {
            s.close(&self.client).await;
        }
    }

    /// Ends the idle sessions of an upstream a reload retired (leased ones end when their call
    /// gives them back).
    pub async fn retire(&self, up: &Upstream) {
        let idle = self
            .slots
            .lock()
            .map(|mut s| s.expire_instance(up.instance))
            .unwrap_or_default();
        for s in idle {
            s.close(&self.client).await;
        }
    }
}
