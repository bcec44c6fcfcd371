//! The identical-call breaker (`[loop_breaker]`): an agent stuck calling one tool with the
//! same arguments burns the upstream and its own model; past a limit per window, such a call
//! is refused (429 `-31021`, `Retry-After`) before it reaches the upstream.
//!
//! Takes a tool call's principal, groups, upstream, the upstream's own tool name and its raw
//! `arguments`; gives `Ok`, or a [`Refusal::Repeated`]. A call is the same as another when
//! its canonical arguments digest is (xxh3-128 over the decoded JSON, every object's members
//! in key order, every value tagged and length-prefixed, with the upstream and tool).
//! Counted as a GCRA (a burst of the limit, then one each `window / limit`): in this process,
//! per principal and tool, the last [`RING`] distinct argument sets (so loops over a few
//! argument sets are caught too), at most [`MAX_TRACKED`] principal-and-tool pairs (past
//! that, a new pair is not counted until idle ones are swept); or, under `[cluster]`, in Redis
//! (`Governor::charge_repeat`). Refuses nothing else; arguments that do not parse are the
//! validator's to refuse, and count as their bytes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use xxhash_rust::xxh3::Xxh3;

use super::refusal::Refusal;
use super::rules::glob;
use crate::config::LoopBreaker;

/// Distinct argument sets remembered per principal and tool.
pub const RING: usize = 8;
/// Principal-and-tool pairs remembered in one process.
pub const MAX_TRACKED: usize = 100_000;

/// Who calls what, with which arguments.
pub struct Call<'a> {
    /// The principal's id.
    pub principal: &'a str,
    /// Its groups.
    pub groups: &'a [String],
    /// The upstream's name.
    pub upstream: &'a str,
    /// The upstream's own tool name.
    pub tool: &'a str,
    /// The call's `arguments`, as sent (absent: `None`).
    pub arguments: Option<&'a str>,
}

/// One remembered argument set: its digest and when its next call is due (GCRA).
#[derive(Clone, Copy)]
struct Slot {
    digest: [u8; 16],
    due: Instant,
}

/// The breaker: its config and, per principal and tool, the last argument sets.
pub struct Loops {
    cfg: LoopBreaker,
    table: Mutex<HashMap<String, Vec<Slot>>>,
    /// When a full table was last swept.
    swept: Mutex<Option<Instant>>,
}

/// How often a full table may be swept for room.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl Loops {
    /// The breaker of a config.
    pub fn new(cfg: &LoopBreaker) -> Self {
        Loops {
            cfg: cfg.clone(),
            table: Mutex::new(HashMap::new()),
            swept: Mutex::new(None),
        }
    }

    /// The limit that applies to `c` (0: not counted), and the window.
    pub fn limit(&self, c: &Call<'_>) -> (u32, Duration) {
        let max = self
            .cfg
            .overrides
            .iter()
            .find(|o| {
                (o.principal.is_empty() || o.principal.iter().any(|p| p == c.principal))
                    && (o.group.is_empty() || o.group.iter().any(|g| c.groups.contains(g)))
                    && (o.upstream.is_empty() || o.upstream.iter().any(|u| u == c.upstream))
                    && (o.tool.is_empty() || o.tool.iter().any(|g| glob(g, c.tool)))
            })
            .map_or(self.cfg.max_identical_calls, |o| o.max_identical_calls);
        (max, self.cfg.window)
    }

    /// Counts one call in this process (the limit > 0 and the digest from [`digest`]).
    pub fn charge(&self, c: &Call<'_>, digest: [u8; 16], max: u32) -> Result<(), Refusal> {
        self.charge_at(c, digest, max, Instant::now())
    }

    fn charge_at(&self, c: &Call<'_>, d: [u8; 16], max: u32, now: Instant) -> Result<(), Refusal> {
        let window = self.cfg.window;
        let interval = window / max.max(1);
        let key = format!("{}:{}:{}", c.principal.len(), c.principal, c.upstream);
        let key = format!("{key}:{}", c.tool);
        let Ok(mut table) = self.table.lock() else {
            return Ok(());
        };
        if !table.contains_key(&key) && table.len() >= MAX_TRACKED {
            // A full table is swept at most once a second: a stream of new pairs against a
            // table of live ones must not cost a scan each.
            let due = self.swept.lock().is_ok_and(|mut at| {
                let due = at.is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY);
                if due {
                    *at = Some(now);
                }
                due
            });
            if due {
                table.retain(|_, ring| ring.iter().any(|s| s.due > now));
            }
            if table.len() >= MAX_TRACKED {
                return Ok(()); // documented: not counted until idle pairs are swept
            }
        }
        let ring = table.entry(key).or_default();
        let slot = match ring.iter().position(|s| s.digest == d) {
            Some(i) => &mut ring[i],
            None if ring.len() < RING => {
                ring.push(Slot {
                    digest: d,
                    due: now,
                });
                ring.last_mut().expect("just pushed")
            }
            None => {
                let oldest = ring.iter_mut().min_by_key(|s| s.due).expect("a full ring");
                *oldest = Slot {
                    digest: d,
                    due: now,
                };
                oldest
            }
        };
        let next = slot.due.max(now) + interval;
        if next.duration_since(now) > window {
            let wait = next.duration_since(now) - window;
            return Err(Refusal::Repeated {
                tool: c.tool.to_owned(),
                limit: max,
                window_ms: window.as_millis() as u64,
                retry_after_ms: (wait.as_millis() as u64).max(1),
            });
        }
        slot.due = next;
        Ok(())
    }

    /// Forgets pairs whose every argument set is idle (run on the budgets' timer).
    pub fn retain_recent(&self) {
        let now = Instant::now();
        if let Ok(mut t) = self.table.lock() {
            t.retain(|_, ring| ring.iter().any(|s| s.due > now));
        }
    }

    /// Pairs remembered now.
    pub fn tracked(&self) -> usize {
        self.table.lock().map_or(0, |t| t.len())
    }
}

/// The canonical digest of a call: upstream, tool and arguments (objects' members in key order,
/// every value tagged and length-prefixed, so no two calls spell the same input). xxh3-128: a
/// fast hash, not a cryptographic one; it only identifies a call to count it, and a collision
/// could only merge two argument sets of one principal's calls of one tool.
pub fn digest(upstream: &str, tool: &str, arguments: Option<&str>) -> [u8; 16] {
    let mut h = Xxh3::new();
    for part in [upstream, tool] {
        bytes(&mut h, b's', part.as_bytes());
    }
    match arguments.map(serde_json::from_str::<Value>) {
        Some(Ok(v)) => canonical(&v, &mut h),
        Some(Err(_)) => bytes(&mut h, b'r', arguments.unwrap_or_default().as_bytes()),
        None => h.update(b"-"),
    }
    h.digest128().to_be_bytes()
}

/// A tag, a length and the bytes.
fn bytes(h: &mut Xxh3, tag: u8, b: &[u8]) {
    h.update(&[tag]);
    h.update(&(b.len() as u64).to_be_bytes());
    h.update(b);
}

/// Feeds `v` canonically to `h`: objects' members sorted by key.
fn canonical(v: &Value, h: &mut Xxh3) {
    match v {
        Value::Null => h.update(b"n"),
        Value::Bool(b) => h.update(if *b { b"t" } else { b"f" }),
        Value::Number(n) => bytes(h, b'#', n.to_string().as_bytes()),
        Value::String(s) => bytes(h, b's', s.as_bytes()),
        Value::Array(a) => {
            h.update(b"[");
            h.update(&(a.len() as u64).to_be_bytes());
            a.iter().for_each(|v| canonical(v, h));
        }
        Value::Object(m) => {
            let mut members: Vec<_> = m.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            h.update(b"{");
            h.update(&(members.len() as u64).to_be_bytes());
            for (k, v) in members {
                bytes(h, b's', k.as_bytes());
                canonical(v, h);
            }
        }
    }
}

#[cfg(test)]
#[path = "loops_tests.rs"]
mod tests;
