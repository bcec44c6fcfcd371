//! The operator plane's event bus: what changed, for the admin API's event stream and the
//! console.
//!
//! Takes events from wherever Sluice learns them (an upstream's health, a held call, a tool
//! pin, a reload); gives each subscriber every event published after it subscribed, with a
//! sequence number and this replica's id. Refuses nothing; a subscriber that falls more than
//! [`CAPACITY`] events behind is told how many it missed (a `lagged` event) instead of
//! holding memory for it. An event carries names, ids and states, never an argument value, a
//! prompt or a result.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

/// Events kept for a slow subscriber before it is told it lagged.
pub const CAPACITY: usize = 1024;

/// What an event is about (its SSE `event:` name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An upstream became healthy or unhealthy, or a breaker opened or closed.
    Health,
    /// A call was held for an operator's approval, or decided, or its wait ran out.
    Approval,
    /// A tool's definition changed (quarantined), or a pin was accepted.
    Pin,
    /// The config was reloaded (or a reload was refused).
    Reload,
}

impl Kind {
    /// The SSE event name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Health => "health",
            Kind::Approval => "approval",
            Kind::Pin => "pin",
            Kind::Reload => "reload",
        }
    }
}

/// One event.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    /// Its number on this replica (from 1).
    pub seq: u64,
    /// What it is about.
    pub kind: Kind,
    /// When (Unix ms).
    pub time_ms: u64,
    /// The replica that saw it (`[state] replica_id`).
    pub replica: String,
    /// What happened: names, ids and states only.
    pub data: Value,
}

/// The bus (one per process, in the runtime).
pub struct Events {
    tx: broadcast::Sender<Event>,
    seq: AtomicU64,
    replica: String,
}

impl Events {
    /// A bus whose events name `replica`.
    pub fn new(replica: &str) -> Events {
        Events {
            tx: broadcast::channel(CAPACITY).0,
            seq: AtomicU64::new(0),
            replica: replica.to_owned(),
        }
    }

    /// Publishes an event (dropped when nobody listens).
    pub fn publish(&self, kind: Kind, data: Value) {
        let event = Event {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            kind,
            time_ms: crate::state::now_ms(),
            replica: self.replica.clone(),
            data,
        };
        let _ = self.tx.send(event);
    }

    /// Every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// The last sequence number given.
    pub fn last_seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_subscriber_sees_what_is_published_after_it_subscribed_in_order() {
        let bus = Events::new("r1");
        bus.publish(Kind::Reload, serde_json::json!({"before": true}));
        let mut rx = bus.subscribe();
        bus.publish(
            Kind::Health,
            serde_json::json!({"upstream": "a", "healthy": false}),
        );
        bus.publish(Kind::Pin, serde_json::json!({"upstream": "a", "tool": "t"}));
        let (a, b) = (rx.recv().await.unwrap(), rx.recv().await.unwrap());
        assert_eq!(
            (a.seq, a.kind, b.seq, b.kind),
            (2, Kind::Health, 3, Kind::Pin)
        );
        assert_eq!(a.replica, "r1");
        assert_eq!(bus.last_seq(), 3);
    }
}
