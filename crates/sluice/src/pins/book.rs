//! The pins of one upstream and the judgement of a list against them (no I/O).
//!
//! Takes an upstream's pins ([`Entries`]), its mode and the tools it lists now (each with its
//! definition and digest); gives which tools are quarantined, which entries changed (to be
//! stored) and which changes are new (to be told once: a log line, an event, a metric, an audit
//! record). An accept moves a pending definition to the pin. Refuses (quarantines) a tool whose
//! definition differs from its pin, under `strict` a tool not pinned once the upstream has pins,
//! and any tool not pinned once the upstream has [`MAX_PER_UPSTREAM`] pins (fail closed).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::config::PinMode as Mode;

/// The most tools pinned per upstream; past it a tool not pinned yet is quarantined as `new`.
pub const MAX_PER_UPSTREAM: usize = 10_000;

/// A definition and its digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Def {
    /// SHA-256 of the definition's canonical JSON (hex).
    pub digest: String,
    /// The definition (`digest.rs`).
    pub definition: Value,
}

/// Why a tool is quarantined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Its definition differs from its pin.
    Changed,
    /// It was not pinned, and the upstream's mode is `strict` (or its pins are full).
    New,
}

impl Reason {
    /// Its name in the API, events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Changed => "changed",
            Reason::New => "new",
        }
    }
}

/// A definition waiting for an operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// What the upstream lists now.
    #[serde(flatten)]
    pub def: Def,
    /// Why it waits.
    pub reason: Reason,
    /// When it was first seen (Unix ms).
    pub since_ms: u64,
}

/// One tool's pin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The accepted definition (`None`: a new tool never accepted).
    pub pinned: Option<Def>,
    /// A definition listed since that differs from it (the tool is quarantined meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
}

/// One upstream's pins, by the tool's own name.
pub type Entries = BTreeMap<String, Entry>;

/// A tool as listed now.
pub struct Seen {
    /// Its own name.
    pub tool: String,
    /// Its definition and digest.
    pub def: Def,
}

/// A change to tell (once per pending digest).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The tool's own name.
    pub tool: String,
    /// Why it is quarantined.
    pub reason: Reason,
    /// The pinned digest (`None` for a new tool).
    pub old: Option<String>,
    /// The digest listed now.
    pub new: String,
}

/// What a judgement found.
#[derive(Debug, Default)]
pub struct Judged {
    /// The tools withheld now.
    pub quarantined: HashSet<String>,
    /// The entries to store (new pins, new or cleared pendings).
    pub dirty: Vec<String>,
    /// The changes to tell.
    pub changes: Vec<Change>,
}

/// Judges `seen` against `entries` under `mode` at `now_ms`, updating `entries`.
pub fn judge(entries: &mut Entries, mode: Mode, seen: Vec<Seen>, now_ms: u64) -> Judged {
    let mut out = Judged::default();
    if mode == Mode::Off {
        return out;
    }
    let had_pins = entries.values().any(|e| e.pinned.is_some());
    for s in seen {
        let count = entries.len();
        let entry = entries.entry(s.tool.clone()).or_default();
        if entry
            .pinned
            .as_ref()
            .is_some_and(|p| p.digest == s.def.digest)
        {
            if entry.pending.take().is_some() {
                out.dirty.push(s.tool); // back to what was pinned
            }
            continue;
        }
        let full = entry.pinned.is_none() && entry.pending.is_none() && count >= MAX_PER_UPSTREAM;
        let reason = if entry.pinned.is_some() {
            Reason::Changed
        } else if (mode == Mode::Strict && had_pins) || full {
            Reason::New
        } else {
            // Trust on first use.
            entry.pinned = Some(s.def);
            entry.pending = None;
            out.dirty.push(s.tool);
            continue;
        };
        out.quarantined.insert(s.tool.clone());
        if entry
            .pending
            .as_ref()
            .is_some_and(|p| p.def.digest == s.def.digest)
        {
            continue; // told already
        }
        out.changes.push(Change {
            tool: s.tool.clone(),
            reason,
            old: entry.pinned.as_ref().map(|p| p.digest.clone()),
            new: s.def.digest.clone(),
        });
        entry.pending = Some(Pending {
            def: s.def,
            reason,
            since_ms: now_ms,
        });
        if full {
            // The entry stays out of the book: the pins hold at most MAX_PER_UPSTREAM.
            entries.remove(&s.tool);
        } else {
            out.dirty.push(s.tool);
        }
    }
    out
}

/// Why an accept was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// No pin of that tool at that upstream.
    NotFound,
    /// The tool is not quarantined: nothing to accept.
    NotQuarantined,
}

/// Accepts the pending definition of `tool`: it becomes the pin. Gives its digest.
pub fn accept(entries: &mut Entries, tool: &str) -> Result<String, Refused> {
    let entry = entries.get_mut(tool).ok_or(Refused::NotFound)?;
    let pending = entry.pending.take().ok_or(Refused::NotQuarantined)?;
    let digest = pending.def.digest.clone();
    entry.pinned = Some(pending.def);
    Ok(digest)
}

#[cfg(test)]
#[path = "book_tests.rs"]
mod tests;
