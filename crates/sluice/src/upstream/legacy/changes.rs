//! The list changes a 2025-11-25 upstream announces on a session's stream, sent up as typed
//! events: nothing below the catalog calls back into it.
//!
//! Takes a [`Change`] a session's stream brought (its GET stream, a stdio process's stdout, a
//! 2024-11-05 SSE stream); gives it, with its upstream and the time it arrived, to the channel
//! the catalog's task reads (`catalog::changes::report_changes`). Refuses nothing; a session of
//! an upstream whose changes another stream reports (a dual-era upstream's listen stream) sends
//! nowhere. The channel holds at most [`CAPACITY`] events: a session announcing faster than the
//! catalog takes them waits, and its stream is read no faster.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use crate::mcp::lists::Change;
use crate::upstream::Upstream;

/// The most announced changes waiting for the catalog's task, from all sessions together.
pub const CAPACITY: usize = 256;

/// One change, as an upstream announced it.
pub struct Announced {
    /// The upstream whose session brought it.
    pub upstream: Arc<Upstream>,
    /// What changed.
    pub change: Change,
    /// When it arrived (a table fetched before it does not show the change).
    pub at: Instant,
}

/// Where a session reports its upstream's list changes.
#[derive(Clone, Default)]
pub struct ListChanged(Option<mpsc::Sender<Announced>>);

impl ListChanged {
    /// A channel to report on, and its receiving end for the catalog's task.
    pub fn channel() -> (ListChanged, mpsc::Receiver<Announced>) {
        let (tx, rx) = mpsc::channel(CAPACITY);
        (ListChanged(Some(tx)), rx)
    }

    /// Reports nowhere: another stream tells this upstream's changes.
    pub fn nowhere() -> ListChanged {
        ListChanged(None)
    }

    /// Sends `change` up, waiting while the channel is full; dropped when nobody reads it.
    pub(super) async fn report(&self, upstream: &Arc<Upstream>, change: Change) {
        if let Some(tx) = &self.0 {
            let at = Instant::now();
            let _ = tx
                .send(Announced {
                    upstream: upstream.clone(),
                    change,
                    at,
                })
                .await;
        }
    }
}
