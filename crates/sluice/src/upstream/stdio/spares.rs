//! A stdio upstream's warm spares: processes started ahead of need, not yet handshaken.
//!
//! Takes the upstream's [`Spec`]; gives a spare to a session that starts ([`Spec::take_spare`]),
//! starting another in its place while `spare_processes` are not running, places under
//! `max_processes` are free and no start failed. A spare no session took within `idle_ms` is
//! ended and not replaced until a session next starts (a laptop idle for the afternoon runs no
//! server for nothing). Refuses nothing: a spare that could not be started counts as a failed
//! start (the back-off of `Spec`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Lines, Proc, Spec};

/// A process started ahead of need, `claimed` once by whichever comes first: a session taking
/// it, or its end after `idle_ms` unused.
pub(super) struct Spare {
    proc: Arc<Proc>,
    lines: Lines,
    claimed: Arc<AtomicBool>,
}

impl Spec {
    /// A warm spare process, if one is running (another is started in its place).
    pub fn take_spare(&self, grace: Duration) -> Option<(Arc<Proc>, Lines)> {
        let taken = loop {
            match self.spares.lock().ok()?.pop_front() {
                Some(s) if s.proc.is_done() || s.claimed.swap(true, Ordering::AcqRel) => continue,
                other => break other,
            }
        };
        // A spare taken is replaced; with none, the caller starts its own process in a free
        // place (`Spec::start` refills after it): a spare started now would take that place.
        if taken.is_some() {
            self.refill(grace);
        }
        taken.map(|s| (s.proc, s.lines))
    }

    /// When a reload retired the upstream (removed, or replaced by one of new settings): its
    /// spares, started ahead with the old settings (user, environment, command) and never
    /// used, are told to end at once, and no spare is started again. Processes in use finish
    /// their calls (the reload's drain ends them).
    pub fn retire_spares(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::Release);
        let spares = self
            .spares
            .lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        for s in spares {
            s.proc
                .end("its upstream was replaced or removed by a reload");
        }
    }

    /// Starts spares until `spare_processes` run, while places are free and no start failed.
    pub(super) fn refill(&self, grace: Duration) {
        let Ok(mut spares) = self.spares.lock() else {
            return;
        };
        spares.retain(|s| !s.proc.is_done());
        let retired = self.retired.load(Ordering::Acquire);
        while spares.len() < self.cfg.spare_processes
            && !self.backing_off()
            && !self.is_closed()
            && !retired
        {
            let Some(slot) = self.slot() else { return };
            match Proc::spawn(self, slot, grace) {
                Ok((proc, lines)) => {
                    let claimed = Arc::new(AtomicBool::new(false));
                    tokio::spawn(end_unused(
                        Arc::downgrade(&proc),
                        claimed.clone(),
                        self.cfg.idle,
                    ));
                    spares.push_back(Spare {
                        proc,
                        lines,
                        claimed,
                    });
                }
                Err(_) => return self.failed(),
            }
        }
    }
}

/// Ends a spare no session took within `idle` (`idle_ms`); it is not replaced until a session
/// next starts. Returns once it has exited, or after `idle`.
async fn end_unused(proc: Weak<Proc>, claimed: Arc<AtomicBool>, idle: Duration) {
    let Some(ended) = proc.upgrade().map(|p| p.signals().1) else {
        return;
    };
    tokio::select! {
        _ = ended.cancelled() => {}
        _ = tokio::time::sleep(idle) => {
            if !claimed.swap(true, Ordering::AcqRel) {
                if let Some(p) = proc.upgrade() {
                    p.end("a warm spare no session took within idle_ms");
                }
            }
        }
    }
}
