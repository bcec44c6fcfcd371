//! The bridge's upkeep: parked exchanges whose client never came back cancelled upstream, idle
//! legacy sessions ended, and everything ended at shutdown.
//!
//! Takes bridge A's handle and the shutdown token; runs until shutdown. Refuses nothing.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Bridge;

/// Cancels upstream every parked exchange whose client did not retry within `bridge.park_ms`,
/// until shutdown: one task for the whole table, ticking at an eighth of the park time (5 ms to
/// 250 ms), so an exchange costs no timer task of its own.
pub async fn sweep_parked(br: Arc<Bridge>, shutdown: CancellationToken) {
    let every = (br.limits.bridge.park / 8).clamp(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_millis(250),
    );
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        for p in br.parked.expired(std::time::Instant::now()) {
            if let Some(mut l) = p.live {
                let br = br.clone();
                tokio::spawn(
                    async move { l.cancel(&br, "the client did not answer in time").await },
                );
            }
        }
    }
}

/// Ends legacy sessions idle past `bridge.session_idle_ms`, until shutdown.
pub async fn sweep_sessions(br: Arc<Bridge>, shutdown: CancellationToken) {
    let every = (br.limits.bridge.session_idle / 2).clamp(
        std::time::Duration::from_millis(5),
        std::time::Duration::from_secs(1),
    );
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => br.pool.sweep(false).await,
        }
    }
}

/// At shutdown: cancels every parked exchange upstream and ends every idle legacy session.
pub async fn shutdown(br: &Arc<Bridge>) {
    for p in br.parked.drain() {
        if let Some(mut live) = p.live {
            live.cancel(br, "the gateway is shutting down").await;
        }
    }
    br.pool.sweep(true).await;
}
