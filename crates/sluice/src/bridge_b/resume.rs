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

use tokio::sync::mpsc;

use crate::client_sessions::{Detached, LegacySession};
use crate::mcp::sse::Frame;
use crate::respond::Reply;

/// The version whose clients take a stream up with `Last-Event-ID`.
const RESUMES: &str = "2025-11-25";

/// Detached streams one session may hold at once.
pub(super) const MAX_DETACHED: usize = 16;

/// The POST's stream of a call whose task writes `from`: a priming event (id `N-0`, with
/// `retry`) first, then every frame with its id.
pub(super) fn open(
    s: Arc<LegacySession>,
    park: Duration,
    call: (String, Option<String>),
    from: mpsc::Receiver<Frame>,
) -> Reply {
    let n = s.next_stream.fetch_add(1, Ordering::Relaxed);
    let (to, rx) = mpsc::channel(64);
    let _ = to.try_send(priming(n, 0));
    let (method, name) = call;
    tokio::spawn(pump(
        s,
        park,
        n,
        Detached {
            from,
            sent: 0,
            method,
            name,
        },
        to,
    ));
    Reply::Sse(rx.into())
}

/// The stream a `GET` with `Last-Event-ID: id` takes up, if `id` names a detached stream of
/// this session.
pub(super) fn take_up(s: &Arc<LegacySession>, park: Duration, id: &str) -> Option<Reply> {
    let (n, k) = parse(id)?;
    let mut held = s.detached.lock().ok()?;
    // An event it was never sent names no point of this stream. One before the last sent is
    // taken up from the end all the same: what it missed on the ended stream is not sent again.
    if held.get(&n).is_none_or(|d| k > d.sent) {
        return None;
    }
    let mut d = held.remove(&n)?;
    drop(held);
    // This GET's record is the call's from here on: it says which call, and how it ended.
    crate::audit::note(|r| {
        r.method = Some(d.method.clone());
        r.name.clone_from(&d.name);
    });
    let (to, rx) = mpsc::channel(64);
    // A new stream opens with its own priming event, as the POST's did.
    d.sent += 1;
    let _ = to.try_send(priming(n, d.sent));
    tokio::spawn(pump(s.clone(), park, n, d, to));
    Some(Reply::Sse(rx.into()))
}

/// An event with id `N-K`, the reconnection time and no data (SEP-1699's priming event).
fn priming(n: u64, k: u64) -> Frame {
    Frame::Priming {
        id: format!("{n}-{k}"),
        retry_ms: 1000,
    }
}

/// `N-K` as numbers.
fn parse(id: &str) -> Option<(u64, u64)> {
    let (n, k) = id.trim().split_once('-')?;
    Some((n.parse().ok()?, k.parse().ok()?))
}

/// Moves frames from the call to the client's stream `to`, each with its id, until the call
/// ends (all sent), the client goes away (the call is dropped with `from`), or the upstream's
/// early end detaches it.
async fn pump(
    s: Arc<LegacySession>,
    park: Duration,
    n: u64,
    mut d: Detached,
    to: mpsc::Sender<Frame>,
) {
    loop {
        // A client gone (or its stream refused) ends the call now, not at its next event.
        let frame = tokio::select! {
            f = d.from.recv() => match f { Some(f) => f, None => return },
            _ = to.closed() => return,
        };
        if frame == Frame::Resumed {
            if s.version() != RESUMES {
                continue; // an older client does not take streams up (SEP-1699 is 2025-11-25's)
            }
            match detach(&s, park, n, d) {
                Ok(()) => return,
                Err(kept) => {
                    d = kept; // the session holds the most detached streams: this one stays on its POST
                    continue;
                }
            }
        }
        let Frame::Message { json, .. } = frame else {
            continue; // a comment: nothing the client reads, no id spent
        };
        d.sent += 1;
        let with_id = Frame::Message {
            json,
            id: Some(format!("{n}-{}", d.sent)),
        };
        if to.send(with_id).await.is_err() {
            return;
        }
    }
}

/// Keeps the call for a `GET` within `park` (the POST's stream ends as its sender is dropped);
/// gives it back past [`MAX_DETACHED`].
fn detach(s: &Arc<LegacySession>, park: Duration, n: u64, d: Detached) -> Result<(), Detached> {
    let Ok(mut held) = s.detached.lock() else {
        return Err(d);
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge_b::Sessions;

    fn session() -> Arc<LegacySession> {
        session_of("2025-11-25")
    }

    fn session_of(version: &str) -> Arc<LegacySession> {
        let cfg = crate::config::Config::from_toml("", "t", &Default::default())
            .expect("default config")
            .bridge;
        let sessions = Sessions::new(&cfg, crate::state::Keys::random());
        sessions.create(
            "alice",
            version,
            Default::default(),
            serde_json::Value::Null,
        )
    }

    async fn frames(r: Reply) -> Vec<String> {
        let Reply::Sse(mut body) = r else {
            panic!("an SSE reply")
        };
        let mut out = Vec::new();
        while let Some(f) = body.recv().await {
            out.push(String::from_utf8_lossy(&f.write()).into_owned());
        }
        out
    }

    const PARK: Duration = Duration::from_secs(60);

    fn call() -> (String, Option<String>) {
        ("tools/call".into(), Some("t".into()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_ended_early_is_taken_up_once_by_its_last_event_id_with_nothing_lost() {
        let s = session();
        let (tx, rx) = mpsc::channel(64);
        let post = open(s.clone(), PARK, call(), rx);
        tx.send(Frame::message(
            b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}",
        ))
        .await
        .unwrap();
        tx.send(Frame::Resumed).await.unwrap();
        // Written while no stream is attached: it waits for the GET.
        tx.send(Frame::message(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        ))
        .await
        .unwrap();
        let on_post = frames(post).await;
        assert_eq!(on_post.len(), 2, "{on_post:?}");
        assert!(
            on_post[0].starts_with("id: 1-0\nretry: 1000\ndata: \n\n"),
            "a priming event first: {on_post:?}"
        );
        assert!(
            on_post[1].starts_with("id: 1-1\nevent: message\ndata: {"),
            "{on_post:?}"
        );
        assert!(take_up(&s, PARK, "2-1").is_none(), "another stream's id");
        assert!(
            take_up(&s, PARK, "1-2").is_none(),
            "an event it was never sent"
        );
        assert!(take_up(&s, PARK, "not-an-id").is_none());
        let get = take_up(&s, PARK, "1-1").expect("the detached stream");
        assert!(take_up(&s, PARK, "1-1").is_none(), "taken up once");
        drop(tx); // the call ended after its answer
        let on_get = frames(get).await;
        assert_eq!(on_get.len(), 2, "{on_get:?}");
        assert!(
            on_get[0].starts_with("id: 1-2\nretry: 1000\ndata: \n\n"),
            "{on_get:?}"
        );
        assert!(
            on_get[1].starts_with("id: 1-3\n") && on_get[1].contains("\"result\""),
            "{on_get:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_not_taken_up_within_park_ms_is_dropped_and_its_call_sees_the_client_gone() {
        let s = session();
        let (tx, rx) = mpsc::channel(64);
        let post = open(s.clone(), PARK, call(), rx);
        tx.send(Frame::Resumed).await.unwrap();
        assert_eq!(
            frames(post).await.len(),
            1,
            "the priming event, then the end"
        );
        tokio::time::timeout(PARK * 2, tx.closed())
            .await
            .expect("the call's writer is told the client is gone");
        assert!(take_up(&s, PARK, "1-0").is_none(), "expired");
    }

    /// A call whose upstream ended early, then answered: the answer must come on the POST's own
    /// stream (the stream was not detached).
    async fn answered_on_its_post(s: &Arc<LegacySession>) {
        let (tx, rx) = mpsc::channel(64);
        let post = open(s.clone(), PARK, call(), rx);
        tx.send(Frame::Resumed).await.unwrap();
        tx.send(Frame::message(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
        ))
        .await
        .unwrap();
        drop(tx);
        let on_post = frames(post).await;
        assert!(
            on_post.len() == 2 && on_post[1].contains("\"result\""),
            "the answer on the POST itself: {on_post:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_most_detached_streams_a_stream_stays_on_its_post() {
        let s = session();
        let mut writers = Vec::new();
        for _ in 0..MAX_DETACHED {
            let (tx, rx) = mpsc::channel(64);
            let post = open(s.clone(), PARK, call(), rx);
            tx.send(Frame::Resumed).await.unwrap();
            frames(post).await;
            writers.push(tx);
        }
        answered_on_its_post(&s).await;
        assert_eq!(s.detached.lock().unwrap().len(), MAX_DETACHED);
    }

    #[tokio::test(start_paused = true)]
    async fn an_older_clients_stream_is_not_detached_and_a_client_gone_ends_the_call_at_once() {
        let s = session_of("2025-06-18");
        answered_on_its_post(&s).await;
        assert!(s.detached.lock().unwrap().is_empty());

        // The client goes away while the call is silent: its writer is told without a next event.
        let (tx, rx) = mpsc::channel(64);
        drop(open(session(), PARK, call(), rx));
        tokio::time::timeout(Duration::from_secs(1), tx.closed())
            .await
            .expect("the call sees the client gone");
    }
}
