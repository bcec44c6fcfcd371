//! The admin views of the whole cluster (`[cluster]`).
//!
//! Takes Redis, where every replica publishes its views (upstreams, principals: each
//! replica's own state) every [`PUBLISH`] (`publish.rs`: `sluice:admin:view:<replica>`, living
//! [`TTL`]); gives a view's reader the other replicas' last published views, each labelled
//! with its replica and `as_of_ms`. Refuses a view over [`MAX_VIEW_BYTES`] (left out) and reads
//! at most [`MAX_REPLICAS`]; a replica that stopped publishing drops out after [`TTL`]; Redis
//! unreachable leaves `cluster` out of the answer with `cluster_error` set.
//! (Held calls and pins are shared in Redis themselves: their views are the cluster's.)

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::gateway::Generation;

/// How often a replica publishes its views.
pub const PUBLISH: Duration = Duration::from_secs(2);
/// How long a published view lives.
pub const TTL: Duration = Duration::from_secs(10);

pub(super) fn key(replica: &str) -> String {
    format!("sluice:admin:view:{replica}")
}

/// The most other replicas' views read for one answer.
pub const MAX_REPLICAS: usize = 64;
/// The largest published view read (a bigger one is left out).
pub const MAX_VIEW_BYTES: usize = 1 << 20;

/// The other replicas' last published `kind` views (`upstreams` or `principals`), each
/// labelled with the replica whose key it was read from (not what the view says of itself);
/// `None` without `[cluster]`, `Some(Err)` when Redis did not answer.
pub async fn others(gw: &Arc<Generation>, kind: &str) -> Option<Result<Value, String>> {
    let c = gw.governor.cluster.clone()?;
    let ids: Vec<String> = c
        .replicas()
        .into_iter()
        .filter(|r| r != c.id())
        .take(MAX_REPLICAS)
        .collect();
    let keys: Vec<String> = ids.iter().map(|r| key(r)).collect();
    Some(match c.shared.get_many(&keys).await {
        Ok(got) => {
            let views: Vec<Value> = ids
                .iter()
                .zip(got)
                .filter_map(|(id, t)| Some((id, t?)))
                .filter(|(_, t)| t.len() <= MAX_VIEW_BYTES)
                .filter_map(|(id, t)| {
                    let mut v = serde_json::from_str::<Value>(&t).ok()?.get(kind)?.clone();
                    v.as_object_mut()?.insert("replica".into(), json!(id));
                    Some(v)
                })
                .collect();
            Ok(json!(views))
        }
        Err(_) => Err("Redis is unreachable: other replicas' views are unknown".into()),
    })
}
