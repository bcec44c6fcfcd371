//! Resumable call streams for 2025-11-25 clients (SEP-1699). Each event of a call's POST stream
//! carries an id `N-K` (the session's stream N, its event K). When the upstream ended its own
//! stream early (bridge A takes it up again with `Last-Event-ID`), this stream ends the same
//! way after its last event, so the client sees what it would see direct; its `GET` with
//! `Last-Event-ID: N-K` then gets everything that followed, on a new stream, to the answer.
//!
//! Takes the frames a call's task writes; gives the POST's stream, and the stream of the `GET`
//! that takes it up. Refuses (the caller answers 405) a `Last-Event-ID` naming no detached
//! stream of this session. Bounds: at most [`MAX_DETACHED`] detached streams per session (past
//! it a stream stays on its POST); one not taken up within `bridge.park_ms` is dropped, which
//! ends its call as a client gone would; what the call writes meanwhile waits in its 64-frame
//! channel (the call waits, nothing grows).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::session::{Detached, LegacySession};
use crate::respond::Reply;

/// Detached streams one session may hold at once.
pub(super) const MAX_DETACHED: usize = 16;

/// The POST's stream of a call whose task writes `from`: a priming event (id `N-0`, with
/// `retry`) first, then every frame with its id.
pub(super) fn open(s: Arc<LegacySession>, park: Duration, from: mpsc::Receiver<Bytes>) -> Reply {
    let n = s.next_stream.fetch_add(1, Ordering::Relaxed);
    let (to, rx) = mpsc::channel(64);
    let _ = to.try_send(priming(n, 0));
    tokio::spawn(pump(s, park, n, Detached { from, sent: 0 }, to));
    Reply::Sse(rx.into())
}

/// The stream a `GET` with `Last-Event-ID: id` takes up, if `id` names a detached stream of
/// this session.
pub(super) fn take_up(s: &Arc<LegacySession>, park: Duration, id: &str) -> Option<Reply> {
    let (n, _) = parse(id)?;
    let mut d = s.detached.lock().ok()?.remove(&n)?;
    let (to, rx) = mpsc::channel(64);
    // A new stream opens with its own priming event, as the POST's did.
    d.sent += 1;
    let _ = to.try_send(priming(n, d.sent));
    tokio::spawn(pump(s.clone(), park, n, d, to));
    Some(Reply::Sse(rx.into()))
}

/// An event with id `N-K`, the reconnection time and no data (SEP-1699's priming event).
fn priming(n: u64, k: u64) -> Bytes {
    Bytes::from(format!("id: {n}-{k}\nretry: 1000\ndata: \n\n"))
}

/// `N-K` as numbers.
fn parse(id: &str) -> Option<(u64, u64)> {
    let (n, k) = id.trim().split_once('-')?;
    Some((n.parse().ok()?, k.parse().ok()?))
}

/// Moves frames from the call to the client's stream `to`, each with its id, until the call
/// ends (all sent), the client goes away (the call is dropped with `from`), or the upstream's
/// early end detaches it.
async fn pump(s: Arc<LegacySession>, park: Duration, n: u64, mut d: Detached, to: mpsc::Sender<Bytes>) {
    loop {
        let Some(frame) = d.from.recv().await else { return };
        if frame == crate::mcp::sse::RESUMED {
            match detach(&s, park, n, d) {
                Ok(()) => return,
                Err(kept) => {
                    d = kept; // the session holds the most detached streams: this one stays on its POST
                    continue;
                }
            }
        }
        d.sent += 1;
        let mut with_id = BytesMut::with_capacity(frame.len() + 24);
        with_id.extend_from_slice(format!("id: {n}-{}\n", d.sent).as_bytes());
        with_id.extend_from_slice(&frame);
        if to.send(with_id.freeze()).await.is_err() {
            return;
        }
    }
}

/// Keeps the call for a `GET` within `park` (the POST's stream ends as its sender is dropped);
/// gives it back past [`MAX_DETACHED`].
fn detach(s: &Arc<LegacySession>, park: Duration, n: u64, d: Detached) -> Result<(), Detached> {
    let Ok(mut held) = s.detached.lock() else { return Err(d) };
    if held.len() >= MAX_DETACHED {
        return Err(d);
    }
    let at = d.sent;
    held.insert(n, d);
    drop(held);
    let s = Arc::downgrade(s);
    tokio::spawn(async move {
        tokio::time::sleep(park).await;
        if let Some(s) = s.upgrade() {
            if let Ok(mut held) = s.detached.lock() {
                if held.get(&n).is_some_and(|d| d.sent == at) {
                    held.remove(&n); // not taken up: its call ends as a client gone
                }
            }
        }
    });
    Ok(())
}
