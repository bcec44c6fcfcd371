//! The requests Sluice itself waits on over a channel that carries every message of a session
//! (a stdio process's stdout, a 2024-11-05 SSE stream), and the end of that channel.
//!
//! Takes request ids registered before their request is sent, and the response lines the
//! channel's reader hands over; gives each waiter its line, or the channel's end with why it
//! ended (content-free), or a timeout. Bounded: one entry per request in flight, removed on
//! answer, timeout or end. Refuses nothing itself.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::message::Message;
use crate::upstream::client::UpstreamError;

/// Removes a waiter when its request ends.
struct Forget<'a>(&'a Pending, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Ok(mut w) = self.0.waiters.lock() {
            w.remove(&self.1);
        }
    }
}

/// Waiters by request id, and the channel's end.
pub struct Pending {
    upstream: Arc<str>,
    waiters: Mutex<HashMap<u64, oneshot::Sender<String>>>,
    ended: CancellationToken,
    why: Mutex<Option<String>>,
}

impl Pending {
    /// An open channel of `upstream`.
    pub fn new(upstream: &str) -> Pending {
        Pending {
            upstream: upstream.into(),
            waiters: Mutex::new(HashMap::new()),
            ended: CancellationToken::new(),
            why: Mutex::new(None),
        }
    }

    /// Registers request `id`, runs `send` (which sends it), and waits up to `timeout` for its
    /// response line.
    pub async fn request(
        &self,
        id: u64,
        timeout: Duration,
        send: impl Future<Output = Result<(), UpstreamError>>,
    ) -> Result<String, UpstreamError> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut w) = self.waiters.lock() {
            w.insert(id, tx);
        }
        // Removed however this ends, a caller that gave up (dropped this future) included.
        let _forget = Forget(self, id);
        match send.await {
            Err(e) => Err(e),
            Ok(()) => tokio::select! {
                r = tokio::time::timeout(timeout, rx) => match r {
                    Ok(Ok(line)) => Ok(line),
                    Ok(Err(_)) => Err(self.error()),
                    Err(_) => Err(UpstreamError::Timeout(self.upstream.to_string(), timeout.as_millis() as u64)),
                },
                _ = self.ended.cancelled() => Err(self.error()),
            },
        }
    }

    /// Hands a response line to the waiter of `id`; gives the line back when none waits (the
    /// response is for a client's call).
    pub fn complete(&self, id: u64, msg: Message) -> Result<(), Message> {
        match self.waiters.lock().ok().and_then(|mut w| w.remove(&id)) {
            Some(tx) => {
                let _ = tx.send(msg.into_text());
                Ok(())
            }
            None => Err(msg),
        }
    }

    /// Records why the channel ends (the first reason stays).
    pub fn note(&self, why: &str) {
        if let Ok(mut w) = self.why.lock() {
            w.get_or_insert_with(|| why.to_owned());
        }
    }

    /// The channel has ended: every waiter is told.
    pub fn close(&self, why: &str) {
        self.note(why);
        self.ended.cancel();
        if let Ok(mut w) = self.waiters.lock() {
            w.clear();
        }
    }

    /// Whether the channel has ended.
    pub fn is_closed(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Resolves once the channel has ended.
    pub async fn closed(&self) {
        self.ended.cancelled().await
    }

    /// The signal of the channel's end.
    pub fn token(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// The error a request or call gets once the channel ended.
    pub fn error(&self) -> UpstreamError {
        let why = self
            .why
            .lock()
            .ok()
            .and_then(|w| w.clone())
            .unwrap_or_else(|| "its session ended".into());
        UpstreamError::Exited(self.upstream.to_string(), why)
    }
}
