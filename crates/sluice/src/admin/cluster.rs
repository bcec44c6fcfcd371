//! The admin views of the whole cluster (`[cluster]`).
//!
//! Takes Redis, where every replica publishes its views (upstreams, principals: each
//! replica's own state) every [`PUBLISH`] (`publish.rs`: `sluice:admin:view:<replica>`, living
//! [`TTL`]); gives a view's reader the other replicas' last published views, each labelled
//! with its replica and `as_of_ms`. Refuses nothing: a replica that stopped publishing drops out after
//! [`TTL`]; Redis unreachable leaves `cluster` out of the answer with `cluster_error` set.
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

/// The other replicas' last published `kind` views (`upstreams` or `principals`), labelled;
/// `None` without `[cluster]`.
pub async fn others(gw: &Arc<Generation>, kind: &str) -> Option<Value> {
    let c = gw.governor.cluster.clone()?;
    let ids: Vec<String> = c.replicas().into_iter().filter(|r| r != c.id()).collect();
    let keys: Vec<String> = ids.iter().map(|r| key(r)).collect();
    Some(match c.shared.get_many(&keys).await {
        Ok(got) => {
            let views: Vec<Value> = got
                .into_iter()
                .flatten()
                .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
                .map(|v| v.get(kind).cloned().unwrap_or(Value::Null))
                .filter(|v| v.is_object())
                .collect();
            json!(views)
        }
        Err(_) => json!({"error": "Redis is unreachable: other replicas' views are unknown"}),
    })
}
