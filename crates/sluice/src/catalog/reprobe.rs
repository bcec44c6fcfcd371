//! Re-probing an upstream that went down, so one that comes back serves again at once rather
//! than at the next refresh (`timeouts.refresh_ms`).
//!
//! Takes an upstream (its re-prober is woken by `upstream::health` when it goes down); gives
//! probes of it, [`REPROBE_FIRST`] after it went down, then each pause twice the last, up to
//! `timeouts.refresh_ms`, until one finds it up; and, for a call that needs it while it is down,
//! the probe under way or one asked for now ([`revive`]), which the call waits for, bounded by
//! `timeouts.connect_ms` (`timeouts.response_ms` for a stdio server, which boots). One
//! task per upstream, one probe of it at a time (`Health::probing`); a call can cause at most
//! one probe per [`REPROBE_GAP`] (clients cannot make Sluice probe faster). Ends with shutdown or
//! when a reload retires the upstream. Refuses nothing.

use std::sync::Arc;
use std::time::Duration;

use super::Catalog;
use crate::upstream::health::{REPROBE_FIRST, REPROBE_GAP};
use crate::upstream::Upstream;

/// Starts `up`'s re-prober (once per upstream).
pub fn start(catalog: &Arc<Catalog>, up: &Arc<Upstream>) {
    if !up
        .health
        .reprober
        .swap(true, std::sync::atomic::Ordering::AcqRel)
    {
        tokio::spawn(run(catalog.clone(), up.clone()));
    }
}

async fn run(mut catalog: Arc<Catalog>, up: Arc<Upstream>) {
    loop {
        // Until it goes down (or a call asks for a probe).
        tokio::select! {
            _ = catalog.shutdown.cancelled() => return,
            _ = up.retired.cancelled() => return,
            _ = up.health.wake.notified() => {}
        }
        let mut pause = REPROBE_FIRST;
        loop {
            // The catalog current now, when it holds this upstream (one a reload is about to
            // make current probes it with its own).
            let latest = catalog.latest();
            if latest.upstreams.iter().any(|u| Arc::ptr_eq(u, &up)) {
                catalog = latest;
            }
            if up.status().healthy {
                break;
            }
            tokio::select! {
                _ = catalog.shutdown.cancelled() => return,
                _ = up.retired.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
                // A call asked: at once, unless a probe started less than REPROBE_GAP ago.
                _ = up.health.wake.notified() => {
                    tokio::select! {
                        _ = catalog.shutdown.cancelled() => return,
                        _ = tokio::time::sleep(up.health.next_asked_probe()) => {}
                    }
                }
            }
            if catalog.check(&up).await.healthy {
                break;
            }
            pause = (pause * 2).min(catalog.timeouts.refresh.max(REPROBE_FIRST));
        }
    }
}

/// For a call that needs `up`: whether it is up, after waiting (at most [`wait_for`]) for the
/// probe of it under way, or for one asked for now when it is down and a call may ask for one
/// ([`REPROBE_GAP`] after the last); a down upstream probed less than that ago, with no probe
/// under way, is answered at once, its probe asked for when the gap ends.
pub async fn revive(up: &Upstream, within: Duration) -> bool {
    if up.status().healthy {
        return true;
    }
    if !up
        .health
        .reprober
        .load(std::sync::atomic::Ordering::Acquire)
    {
        return false;
    }
    let mut probed = up.health.probed.subscribe();
    let under_way = up.health.probing.try_lock().is_err();
    if !under_way {
        // The re-prober probes at once, or once REPROBE_GAP since the last probe has passed:
        // this call is answered now then, and the next one finds the upstream as that probe did.
        up.health.wake.notify_one();
        if !up.health.next_asked_probe().is_zero() {
            return up.status().healthy;
        }
    }
    let _ = tokio::time::timeout(within, probed.changed()).await;
    up.status().healthy
}

/// How long a call waits for a probe of `up`: `timeouts.connect_ms` for an HTTP upstream (a
/// probe that has not connected by then has failed), `timeouts.response_ms` for a stdio one
/// (its new process boots: the call would have waited for that anyway).
pub fn wait_for(up: &Upstream, t: &crate::config::Timeouts) -> Duration {
    if up.stdio.is_some() {
        t.response
    } else {
        t.connect
    }
}

/// The pause a refused call is told to wait before retrying (`Retry-After`, whole seconds):
/// the upstream is probed again well within it.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

const _: () = assert!(REPROBE_GAP.as_millis() < RETRY_AFTER.as_millis());
