//! A channel bounded by bytes as well as by messages, between a task reading an upstream stream
//! and the exchange that consumes it.
//!
//! Takes messages with their size; gives them in order. A sender waits while the messages not
//! yet received hold `bytes` or more (so a reader stops reading the upstream, and TCP holds the
//! rest there, not Sluice). Refuses nothing; a closed receiver fails the send.

use std::sync::Arc;

use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The sending side.
pub struct Sender<T> {
    tx: mpsc::Sender<(T, OwnedSemaphorePermit)>,
    budget: Arc<Semaphore>,
    bytes: usize,
}

/// The receiving side.
pub struct Receiver<T> {
    rx: mpsc::Receiver<(T, OwnedSemaphorePermit)>,
}

/// A channel of at most `slots` messages and `bytes` bytes not yet received.
pub fn bounded<T>(slots: usize, bytes: usize) -> (Sender<T>, Receiver<T>) {
    let bytes = bytes.clamp(1, u32::MAX as usize);
    let (tx, rx) = mpsc::channel(slots.max(1));
    (
        Sender {
            tx,
            budget: Arc::new(Semaphore::new(bytes)),
            bytes,
        },
        Receiver { rx },
    )
}

impl<T> Sender<T> {
    /// Sends `item` of `size` bytes once the budget has room; `Err` when the receiver is gone.
    pub async fn send(&self, item: T, size: usize) -> Result<(), T> {
        let n = size.clamp(1, self.bytes) as u32;
        let Ok(permit) = self.budget.clone().acquire_many_owned(n).await else {
            return Err(item);
        };
        self.tx.send((item, permit)).await.map_err(|e| e.0 .0)
    }

    /// Whether the receiver is gone.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        Sender {
            tx: self.tx.clone(),
            budget: self.budget.clone(),
            bytes: self.bytes,
        }
    }
}

impl<T> Receiver<T> {
    /// The next message (its bytes leave the budget).
    pub async fn recv(&mut self) -> Option<T> {
        self.rx.recv().await.map(|(item, _permit)| item)
    }

    /// Drops every message already queued; gives how many.
    pub fn discard_queued(&mut self) -> usize {
        let mut n = 0;
        while self.rx.try_recv().is_ok() {
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_sender_waits_while_unreceived_messages_hold_the_budget() {
        let (tx, mut rx) = bounded::<u32>(64, 10);
        tx.send(1, 6).await.unwrap();
        let blocked = tokio::time::timeout(std::time::Duration::from_secs(1), tx.send(2, 6)).await;
        assert!(
            blocked.is_err(),
            "12 bytes unreceived is over the budget of 10"
        );
        assert_eq!(rx.recv().await, Some(1));
        tx.send(3, 6).await.unwrap();
        // A message over the whole budget takes all of it: it goes once the rest is received.
        let big = tokio::spawn({
            let tx = tx.clone();
            async move { tx.send(4, 100).await }
        });
        assert_eq!(rx.recv().await, Some(3));
        assert_eq!(rx.recv().await, Some(4));
        assert!(big.await.unwrap().is_ok());
        drop(rx);
        assert_eq!(tx.send(5, 1).await, Err(5));
    }
}
