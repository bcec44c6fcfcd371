//! The answer stream of one bridged call: the POST's answer from a 2025-11-25 upstream, taken
//! up again with `Last-Event-ID` when the server ends it early (SEP-1699).
//!
//! Takes the leased session and the call's body; gives its messages in order, then how the
//! stream ended: an error, or "ended before the answer, resumable from here". Bounded: at most
//! `bridge.park_ms + timeouts.response_ms` per message, 64 messages or `max_sse_event_bytes`
//! queued (the reader waits; TCP holds the rest), [`MAX_RESUMES`] reconnections per call, and
//! at most [`MAX_RETRY_WAIT`] before each, whatever `retry:` the server asked for.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::upstream::client::{Answer, HttpClient, Resume, UpstreamError};
use crate::upstream::legacy::Session;
use crate::upstream::message::Message;
use crate::upstream::queue;

/// How many times one call's stream is taken up again before the call fails.
pub(super) const MAX_RESUMES: u32 = 16;

/// The longest wait before a reconnection (a server's `retry:` above it is cut to it).
pub(super) const MAX_RETRY_WAIT: Duration = Duration::from_secs(5);

/// What the call's stream delivers. The error is boxed: the channel allocates 32 slots at once
/// and each parked exchange keeps its channel, so the slot is kept small.
pub(super) enum PostEvent {
    /// One message, decoded.
    Msg(Message),
    /// The stream ended: with an error, or (`None`) plainly, before any resumable point.
    End(Option<Box<UpstreamError>>),
    /// The stream ended after an event with an id: it can be taken up from there.
    Dropped(Box<Resume>),
}

/// The reading task of one call's stream (ended when dropped).
pub(super) struct PostStream {
    rx: queue::Receiver<PostEvent>,
    task: tokio::task::AbortHandle,
    resumes: u32,
    per_message: Duration,
    max_queued: usize,
}

impl Drop for PostStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl PostStream {
    /// POSTs `body` on the session and reads its answer.
    pub(super) fn post(
        session: Arc<Session>,
        client: HttpClient,
        body: Bytes,
        per_message: Duration,
        max_queued: usize,
    ) -> PostStream {
        let (tx, rx) = queue::bounded(64, max_queued);
        // Boxed, so the request's future is freed once the answer started: the task lives as
        // long as the exchange, parked or not.
        let task = tokio::spawn(async move {
            let answer = Box::pin(session.post(&client, body, Some(per_message))).await;
            read(&session, answer, &tx).await;
        })
        .abort_handle();
        PostStream {
            rx,
            task,
            resumes: 0,
            per_message,
            max_queued,
        }
    }

    /// The next event; `None` once the task ended without saying how (it was aborted).
    pub(super) async fn recv(&mut self) -> Option<PostEvent> {
        self.rx.recv().await
    }

    /// Takes the stream up again from `from` (after its `retry`, at most [`MAX_RETRY_WAIT`]);
    /// refuses past [`MAX_RESUMES`] for this call.
    pub(super) fn take_up(
        &mut self,
        session: Arc<Session>,
        client: HttpClient,
        from: Resume,
    ) -> Result<(), UpstreamError> {
        if self.resumes >= MAX_RESUMES {
            return Err(UpstreamError::Protocol(
                session.up.name.clone(),
                format!("it ended the call's stream {MAX_RESUMES} times before answering (each taken up again with Last-Event-ID)"),
            ));
        }
        self.resumes += 1;
        let (tx, rx) = queue::bounded(64, self.max_queued);
        let per_message = self.per_message;
        let task = tokio::spawn(async move {
            tokio::time::sleep(from.retry.unwrap_or_default().min(MAX_RETRY_WAIT)).await;
            let answer = Box::pin(session.resume(&client, &from, per_message)).await;
            read(&session, answer, &tx).await;
        })
        .abort_handle();
        self.task.abort();
        (self.rx, self.task) = (rx, task);
        Ok(())
    }
}

/// Hands the answer's messages over, then how it ended.
async fn read(
    session: &Session,
    answer: Result<Answer, UpstreamError>,
    tx: &queue::Sender<PostEvent>,
) {
    let end = match answer {
        Ok(Answer::Json(http::StatusCode::NOT_FOUND, _))
        | Ok(Answer::Status(http::StatusCode::NOT_FOUND, _)) => {
            session
                .broken
                .store(true, std::sync::atomic::Ordering::Release);
            PostEvent::End(Some(Box::new(UpstreamError::SessionGone(
                session.up.name.clone(),
            ))))
        }
        Ok(Answer::Json(_, b)) => {
            // Not one JSON-RPC object: no answer came (the exchange fails on the end).
            if let Ok(m) = Message::decode(String::from_utf8_lossy(&b).into_owned()) {
                let _ = tx.send(PostEvent::Msg(m), b.len()).await;
            }
            PostEvent::End(None)
        }
        // stdio, SSE: the request was sent; its answer, and the end of the session if it ends
        // first, come through the session's inbox (read to its end first, so an answer written
        // just before the process exited is not lost).
        Ok(Answer::Status(http::StatusCode::ACCEPTED, _)) if session.answers_inline() => {
            let _held = tx; // the exchange reads the inbox; this side stays silent
            return std::future::pending().await;
        }
        Ok(Answer::Sse(mut s)) => loop {
            match s.next().await {
                Ok(Some(d)) => {
                    let size = d.len();
                    if tx.send(PostEvent::Msg(d), size).await.is_err() {
                        return;
                    }
                }
                Ok(None) => {
                    break s
                        .resume_point()
                        .map_or(PostEvent::End(None), |r| PostEvent::Dropped(Box::new(r)))
                }
                Err(e) => break PostEvent::End(Some(Box::new(e))),
            }
        },
        Ok(Answer::Status(status, _)) => PostEvent::End(Some(Box::new(UpstreamError::Protocol(
            session.up.name.clone(),
            format!("HTTP {status} to a call on its session"),
        )))),
        Err(e) => PostEvent::End(Some(Box::new(e))),
    };
    let _ = tx.send(end, 1).await;
}
