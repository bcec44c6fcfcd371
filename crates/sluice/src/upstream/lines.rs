//! An answer whose messages arrive on in-process channels rather than in an HTTP body: what a
//! 2026-07-28 stdio server's shared process gives one request (its lines routed to it by id,
//! see `stdio::shared`), read by the same [`Messages`](super::client::Messages) as an HTTP
//! answer so forwarding, probes and listens do not tell the two apart.
//!
//! Takes the request's notification channel, its final-message channel and a guard that the
//! sender drops to cancel; gives the notifications in order, then the final message, or the
//! end of the stream (with why, content-free, when the process ended under it). Refuses
//! nothing; its bounds are the sender's (a full notification channel drops notifications, never
//! the final message).

use tokio::sync::{mpsc, oneshot};

/// The end of a request: its final message, or why it cannot come (content-free).
pub type Final = Result<String, String>;

/// The messages of one request, as they come.
pub struct Answer {
    notes: mpsc::Receiver<String>,
    fin: Option<oneshot::Receiver<Final>>,
    /// Dropped with the answer: the sender cancels the request if it had not finished.
    _guard: Box<dyn Send + Sync>,
}

/// What a message waited for turned out to be.
pub enum Next {
    /// A message (a notification or the final response).
    Message(String),
    /// The request ended without one more: the stream is over.
    End,
    /// The channel it came on ended (why, content-free).
    Gone(String),
}

impl Answer {
    /// An answer read from `notes` then `fin`; `guard` lives as long as it does.
    pub fn new(
        notes: mpsc::Receiver<String>,
        fin: oneshot::Receiver<Final>,
        guard: Box<dyn Send + Sync>,
    ) -> Answer {
        Answer {
            notes,
            fin: Some(fin),
            _guard: guard,
        }
    }

    /// The next message: the notifications sent before the final one come first. Cancel-safe.
    pub async fn next(&mut self) -> Next {
        if let Some(note) = self.notes.recv().await {
            return Next::Message(note);
        }
        // Every notification is read (the sender dropped its side when the request ended).
        // Awaited in place, so a wait cancelled (a timeout, a select) loses nothing.
        let Some(fin) = self.fin.as_mut() else {
            return Next::End;
        };
        let got = fin.await;
        self.fin = None;
        match got {
            Ok(Ok(msg)) => Next::Message(msg),
            Ok(Err(why)) => Next::Gone(why),
            Err(_) => Next::End,
        }
    }
}
