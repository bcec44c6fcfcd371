//! The list changes 2025-11-25 sessions announce, taken to the caches and the listeners: the
//! catalog's task.
//!
//! Takes the announcements (from every session of every generation) and where the catalog
//! serving now is found; gives refreshes of the stale tables and notifications on the hub.
//! Refuses nothing: a retired upstream's changes are dropped.

use std::sync::Weak;

use tokio::sync::mpsc;

use super::Current;
use crate::upstream::legacy::changes::Announced;

/// The catalog's task that takes the list changes 2025-11-25 sessions announce
/// ([`Announced`], from every session of every generation) to the caches and listeners. The
/// generation current when a change arrives does the work (a pooled session outlives the one
/// that opened it); a retired upstream's changes are dropped (its name may be its successor's
/// now). Ends when no session or generation can send any more, or `current` is gone.
pub async fn report_changes(current: Weak<dyn Current>, mut rx: mpsc::Receiver<Announced>) {
    while let Some(a) = rx.recv().await {
        if a.upstream.retired.is_cancelled() {
            continue;
        }
        let Some(current) = current.upgrade() else {
            return;
        };
        let Some(catalog) = current.reach().map(|r| r.catalog.clone()) else {
            continue;
        };
        tokio::spawn(async move {
            for k in a.change.kinds() {
                catalog.invalidate(&a.upstream, *k).await;
            }
            catalog.hub.publish(&a.upstream.name, a.change, a.at);
        });
    }
}
