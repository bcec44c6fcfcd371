//! Publishing this replica's admin views for the cluster (`[cluster]`).
//!
//! Takes the live generation and the cluster; gives Redis this replica's upstreams and
//! principals views every [`PUBLISH`], living [`TTL`] (`cluster.rs` reads the others'). Refuses
//! nothing: a failed write is retried at the next tick (the Redis client logs it).

use std::sync::Arc;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::cluster::{key, PUBLISH, TTL};
use crate::cluster::Cluster;
use crate::gateway::{Generation, Live};

/// Publishes this replica's views every [`PUBLISH`] until `stop`.
pub async fn publish(live: Arc<Live>, c: Arc<Cluster>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(PUBLISH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Some(gw) = live.get() else { return };
        let view = own(&gw);
        let _ = c.shared.put(&key(c.id()), &view.to_string(), TTL).await;
    }
}

/// This replica's views, as published.
pub fn own(gw: &Arc<Generation>) -> Value {
    let cx = super::Cx {
        gw: gw.clone(),
        op: super::auth::local(),
    };
    json!({"replica": gw.cfg.state.replica, "as_of_ms": crate::state::now_ms(),
        "upstreams": super::views::upstreams_of(&cx),
        "principals": super::views::principals_of(&cx)})
}
