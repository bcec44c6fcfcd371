//! An upstream's health as told to operators: each change (down with why, up again, a stdio
//! server's process that exited and the new one that answered) is one log line and one count,
//! and a state that does not change says nothing; and the wake-up of its re-prober.
//!
//! Takes the upstream's [`Status`] each time a probe ends or a call marks it failed; gives the
//! log line and the counts `/metrics` reads (`sluice_upstream_health_changes_total`), and wakes
//! the re-prober (`catalog::reprobe`) when it goes down. Bounded: a few atomics and one small
//! state per upstream. Refuses nothing. The reason logged is Sluice's own (the upstream's name
//! and an error kind, never what it sent).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Status;

/// The first pause before re-probing an upstream found down; it doubles after each failed
/// re-probe up to `timeouts.refresh_ms`.
pub const REPROBE_FIRST: Duration = Duration::from_millis(100);

/// The least time between two re-probes a client's call may cause (a call to a down upstream
/// asks for one at once): clients cannot make Sluice probe an upstream faster than this.
pub const REPROBE_GAP: Duration = Duration::from_millis(250);

/// What was last told of an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    /// Nothing yet (not probed).
    Nothing,
    /// It is up.
    Up,
    /// It is down, since then.
    Down(Instant),
}

/// Changes kept in an upstream's history (the admin API's `history`).
pub const HISTORY: usize = 32;

/// One change of health, as the admin API shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Change {
    /// When (Unix ms).
    pub time_ms: u64,
    /// Up (true) or down.
    pub healthy: bool,
    /// Why it went down (Sluice's own words: an error kind, never what the upstream sent).
    pub reason: Option<String>,
}

/// The health bookkeeping of one upstream.
pub struct Health {
    /// The last [`HISTORY`] changes, oldest first.
    history: Mutex<std::collections::VecDeque<Change>>,
    /// Where changes are published (the operator plane's events), once set.
    events: std::sync::OnceLock<std::sync::Arc<crate::events::Events>>,
    told: Mutex<Told>,
    /// Changes to down and to up since start.
    went_down: AtomicU64,
    came_up: AtomicU64,
    /// Wakes the re-prober: the upstream went down, or a call wants it probed now.
    pub wake: tokio::sync::Notify,
    /// One probe of it at a time (startup, the refresh, the re-prober, a call's).
    pub probing: tokio::sync::Mutex<()>,
    /// When its last probe started (a call may ask for one only [`REPROBE_GAP`] after it).
    last_probe: Mutex<Option<Instant>>,
    /// Probes completed: a call that asked for one waits for this to move.
    pub probed: tokio::sync::watch::Sender<u64>,
    /// Whether its re-prober was started (one per upstream).
    pub(crate) reprober: std::sync::atomic::AtomicBool,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            history: Mutex::new(std::collections::VecDeque::new()),
            events: std::sync::OnceLock::new(),
            told: Mutex::new(Told::Nothing),
            went_down: AtomicU64::new(0),
            came_up: AtomicU64::new(0),
            wake: tokio::sync::Notify::new(),
            probing: tokio::sync::Mutex::new(()),
            last_probe: Mutex::new(None),
            probed: tokio::sync::watch::Sender::new(0),
            reprober: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Health {
    /// Tells a change of `status` (one line, one count); nothing when the state is the one last
    /// told. `stdio`: the upstream is a process Sluice starts (its coming back is a restart).
    pub fn report(&self, name: &str, status: &Status, stdio: bool) {
        if !status.probed && status.error.is_none() {
            return; // nothing known yet
        }
        let now = Instant::now();
        let before = {
            let Ok(mut told) = self.told.lock() else {
                return;
            };
            let before = *told;
            match (before, status.healthy) {
                (Told::Up, true) | (Told::Down(_), false) => return,
                (_, true) => *told = Told::Up,
                (_, false) => *told = Told::Down(now),
            }
            before
        };
        let why = status.error.as_deref().unwrap_or("no reason recorded");
        self.remember(name, status.healthy, (!status.healthy).then_some(why));
        match (before, status.healthy) {
            (_, false) => {
                self.went_down.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(upstream = %name, reason = %crate::escape::Escaped(why), "upstream is down: calls that need it get 503 until a re-probe finds it back");
                self.wake.notify_one();
            }
            (Told::Down(since), true) => {
                self.came_up.fetch_add(1, Ordering::Relaxed);
                let down_ms = now.saturating_duration_since(since).as_millis() as u64;
                if stdio {
                    tracing::info!(upstream = %name, down_ms, wire = status.wire.name(), "stdio upstream restarted: its new process answered; it is up again");
                } else {
                    tracing::info!(upstream = %name, down_ms, wire = status.wire.name(), "upstream is up again");
                }
            }
            (_, true) => {
                self.came_up.fetch_add(1, Ordering::Relaxed);
                tracing::info!(upstream = %name, wire = status.wire.name(), "upstream is up");
            }
        }
    }

    /// Publishes its changes on `events` from now on (set once, by the gateway).
    pub fn use_events(&self, events: &std::sync::Arc<crate::events::Events>) {
        let _ = self.events.set(events.clone());
    }

    /// The last [`HISTORY`] changes, oldest first.
    pub fn history(&self) -> Vec<Change> {
        self.history
            .lock()
            .map(|h| h.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn remember(&self, name: &str, healthy: bool, why: Option<&str>) {
        let change = Change {
            time_ms: crate::state::now_ms(),
            healthy,
            reason: why.map(str::to_owned),
        };
        if let Ok(mut h) = self.history.lock() {
            if h.len() == HISTORY {
                h.pop_front();
            }
            h.push_back(change.clone());
        }
        if let Some(events) = self.events.get() {
            let data =
                serde_json::json!({"upstream": name, "healthy": healthy, "reason": change.reason});
            events.publish(crate::events::Kind::Health, data);
        }
    }

    /// What was last told.
    pub fn told(&self) -> Told {
        self.told.lock().map(|t| *t).unwrap_or(Told::Nothing)
    }

    /// Changes told since start: (to down, to up).
    pub fn changes(&self) -> (u64, u64) {
        (
            self.went_down.load(Ordering::Relaxed),
            self.came_up.load(Ordering::Relaxed),
        )
    }

    /// Notes that a probe starts now.
    pub fn probe_started(&self) {
        if let Ok(mut l) = self.last_probe.lock() {
            *l = Some(Instant::now());
        }
    }

    /// How long until a call may ask for a probe (zero: now).
    pub fn next_asked_probe(&self) -> Duration {
        let last = self.last_probe.lock().ok().and_then(|l| *l);
        last.map_or(Duration::ZERO, |t| REPROBE_GAP.saturating_sub(t.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(healthy: bool, why: &str) -> Status {
        Status {
            probed: true,
            healthy,
            error: (!healthy).then(|| why.to_owned()),
            ..Status::default()
        }
    }

    #[test]
    fn only_a_change_is_told_and_counted() {
        let h = Health::default();
        h.report("a", &status(true, ""), false);
        h.report("a", &status(true, ""), false);
        assert_eq!(h.changes(), (0, 1), "up once");
        h.report("a", &status(false, "refused"), false);
        h.report("a", &status(false, "timed out"), false);
        assert_eq!(
            h.changes(),
            (1, 1),
            "down once, whatever the reason says next"
        );
        assert!(matches!(h.told(), Told::Down(_)));
        h.report("a", &status(true, ""), false);
        assert_eq!(h.changes(), (1, 2));
        h.report("a", &Status::default(), false);
        assert_eq!(h.changes(), (1, 2), "a status not probed yet tells nothing");
    }
}
