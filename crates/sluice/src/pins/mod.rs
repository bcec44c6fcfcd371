//! Tool pinning against rug pulls (`[pins]`, docs/pins.md): a digest of every tool's definition
//! per upstream, kept; a definition that later differs is quarantined until an operator
//! accepts it.
//!
//! Takes each upstream's tools as they are (re)listed (the catalog calls [`Pins::judge`] where
//! a tools table is stored) and operators' accepts (the admin API, `sluice pins accept`); gives
//! the tools to withhold (hidden from every list, a call refused with `-31050`), and tells each
//! change once: a warning naming the upstream, the tool and the digests' prefixes (never a
//! description), a `pin` event on the operator plane's bus, `sluice_tool_pin_changes_total`,
//! and a content-free audit record (`method` `pins/changed`; an accept is `pins/accepted`).
//! Refuses (quarantines) what `book.rs` says; a store that cannot be read or written (Redis
//! down, a file gone bad) is warned about and the pins this process last knew are used.

pub mod book;
pub mod cli;
pub mod digest;
pub mod file;
pub mod store;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use book::{Entries, Mode, Refused, Seen};
use store::Store;

/// Where changes are told besides the log: the operator plane's events, the audit log and the
/// metrics (each optional: `sluice pins` has none).
#[derive(Default, Clone)]
pub struct Tell {
    /// Publishes a `pin` event (the runtime's bus).
    pub event: Option<Arc<dyn Fn(Value) + Send + Sync>>,
    /// The audit log.
    pub audit: Option<crate::audit::Audit>,
    /// The metrics.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// The process's pins (one, kept across reloads).
pub struct Pins {
    store: Store,
    /// What was last read or written of each upstream's entries.
    known: Mutex<file::Book>,
    /// One judgement or accept at a time.
    one: tokio::sync::Mutex<()>,
    tell: Tell,
    /// `sluice check`: judge, store and tell nothing.
    read_only: AtomicBool,
}

/// An accept's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptError {
    /// No such pin.
    NotFound,
    /// Nothing to accept.
    NotQuarantined,
    /// The store could not be read or written.
    Store(String),
}

impl Pins {
    /// The pins of `cfg` (in Redis with `cluster`).
    pub fn new(
        cfg: Option<&crate::config::Pins>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
        tell: Tell,
    ) -> Result<Pins, String> {
        Ok(Pins::with(Store::of(cfg, cluster)?, tell))
    }

    /// Pins kept in this process's memory only.
    pub fn in_memory(tell: Tell) -> Pins {
        Pins::with(Store::Memory(Mutex::default()), tell)
    }

    fn with(store: Store, tell: Tell) -> Pins {
        Pins {
            store,
            known: Mutex::default(),
            one: tokio::sync::Mutex::new(()),
            tell,
            read_only: AtomicBool::new(false),
        }
    }

    /// Judges without storing or telling (`sluice check --principal`).
    pub fn set_read_only(&self) {
        self.read_only.store(true, Ordering::Relaxed);
    }

    async fn load(&self, upstream: &str) -> Entries {
        match self.store.load(upstream).await {
            Ok(e) => e,
            Err(why) => {
                tracing::warn!(upstream = %upstream, reason = %crate::escape::Escaped(&why), "pins could not be read; judging against the pins this process last knew");
                self.known_of(upstream)
            }
        }
    }

    fn known_of(&self, upstream: &str) -> Entries {
        let g = self.known.lock().unwrap_or_else(|e| e.into_inner());
        g.get(upstream).cloned().unwrap_or_default()
    }

    async fn save(&self, upstream: &str, entries: Entries, dirty: &[String]) {
        if let Err(why) = self.store.store(upstream, &entries, dirty).await {
            tracing::warn!(upstream = %upstream, reason = %crate::escape::Escaped(&why), "pins could not be stored; this process keeps them until it can");
        }
        let waiting = entries.values().filter(|e| e.pending.is_some()).count();
        if let Some(m) = &self.tell.metrics {
            m.pins.quarantined(upstream, waiting);
        }
        let mut g = self.known.lock().unwrap_or_else(|e| e.into_inner());
        g.insert(upstream.to_owned(), entries);
    }

    /// Judges the tools `upstream` lists now under `mode`; gives those to withhold.
    pub async fn judge(&self, upstream: &str, mode: Mode, seen: Vec<Seen>) -> HashSet<String> {
        let _one = self.one.lock().await;
        let mut entries = self.load(upstream).await;
        let judged = book::judge(&mut entries, mode, seen, crate::state::now_ms());
        if self.read_only.load(Ordering::Relaxed) {
            return judged.quarantined;
        }
        for c in &judged.changes {
            self.changed(upstream, c);
        }
        self.save(upstream, entries, &judged.dirty).await;
        judged.quarantined
    }

    fn changed(&self, upstream: &str, c: &book::Change) {
        let old = c.old.as_deref().map(digest::short).unwrap_or("none");
        tracing::warn!(
            upstream = %upstream, tool = %crate::telemetry::peer_name(&c.tool), reason = c.reason.as_str(),
            pinned = old, listed = digest::short(&c.new),
            "tool quarantined: its definition is not the one pinned; hidden and refused until an operator accepts it (sluice pins accept, or the console)"
        );
        if let Some(e) = &self.tell.event {
            e(
                json!({"action": "quarantined", "upstream": upstream, "tool": c.tool,
                "reason": c.reason.as_str(), "digest": c.old, "pending_digest": c.new}),
            );
        }
        if let Some(m) = &self.tell.metrics {
            m.pins.changed(upstream);
        }
        self.audit(upstream, &c.tool, "pins/changed", "quarantined", None);
    }

    fn audit(
        &self,
        upstream: &str,
        tool: &str,
        method: &str,
        decision: &'static str,
        who: Option<&str>,
    ) {
        if let Some(a) = &self.tell.audit {
            a.record(crate::audit::Record {
                time_ms: crate::state::now_ms(),
                principal: who.map(str::to_owned),
                client_era: "none",
                method: Some(method.to_owned()),
                name: Some(tool.to_owned()),
                upstream: Some(upstream.to_owned()),
                decision: Some(decision),
                ..Default::default()
            });
        }
    }

    /// Accepts the pending definition of `tool` (every quarantined tool of `upstream` when
    /// `None`) on behalf of `operator`; gives each tool accepted with its digest now pinned.
    pub async fn accept(
        &self,
        upstream: &str,
        tool: Option<&str>,
        operator: &str,
    ) -> Result<Vec<(String, String)>, AcceptError> {
        let _one = self.one.lock().await;
        let mut entries = self
            .store
            .load(upstream)
            .await
            .map_err(AcceptError::Store)?;
        let tools: Vec<String> = match tool {
            Some(t) => vec![t.to_owned()],
            None => entries
                .iter()
                .filter(|(_, e)| e.pending.is_some())
                .map(|(t, _)| t.clone())
                .collect(),
        };
        let mut done = Vec::new();
        for t in &tools {
            match book::accept(&mut entries, t) {
                Ok(d) => done.push((t.clone(), d)),
                Err(Refused::NotFound) if tool.is_some() => return Err(AcceptError::NotFound),
                Err(_) if tool.is_some() => return Err(AcceptError::NotQuarantined),
                Err(_) => {}
            }
        }
        let dirty: Vec<String> = done.iter().map(|(t, _)| t.clone()).collect();
        self.store
            .store(upstream, &entries, &dirty)
            .await
            .map_err(AcceptError::Store)?;
        self.save(upstream, entries, &[]).await;
        for (t, d) in &done {
            self.accepted(upstream, t, d, operator);
        }
        Ok(done)
    }

    fn accepted(&self, upstream: &str, tool: &str, digest: &str, operator: &str) {
        tracing::warn!(upstream = %upstream, tool = %crate::telemetry::peer_name(tool), pinned = digest::short(digest), operator = %crate::escape::Escaped(&operator), "tool definition accepted: pinned and served again");
        if let Some(e) = &self.tell.event {
            e(
                json!({"action": "accepted", "upstream": upstream, "tool": tool, "digest": digest, "operator": operator}),
            );
        }
        self.audit(upstream, tool, "pins/accepted", "accepted", Some(operator));
    }

    /// The pins of each of `upstreams`, as stored now.
    pub async fn list(&self, upstreams: &[String]) -> Result<file::Book, String> {
        self.store.all(upstreams).await
    }
}

/// The pins as one generation applies them: the process's store and each upstream's mode.
#[derive(Clone)]
pub struct Scope {
    /// The process's pins.
    pub pins: Arc<Pins>,
    /// Each configured upstream's mode (an upstream not named: off).
    pub modes: Arc<HashMap<String, Mode>>,
}

impl Scope {
    /// The scope of `cfg` (`None`: pinning off everywhere).
    pub fn of(pins: &Arc<Pins>, cfg: &crate::config::Config) -> Option<Scope> {
        let p = cfg.pins.as_ref()?;
        let modes = cfg
            .upstreams
            .iter()
            .map(|u| (u.name.clone(), p.mode_of(u.pin)))
            .collect();
        Some(Scope {
            pins: pins.clone(),
            modes: Arc::new(modes),
        })
    }

    /// The mode of `upstream`.
    pub fn mode(&self, upstream: &str) -> Mode {
        self.modes.get(upstream).copied().unwrap_or(Mode::Off)
    }
}

#[cfg(test)]
mod tests;
