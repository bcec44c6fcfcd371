//! Held calls under `[cluster]`: listed in Redis for every replica's admin API, decided there
//! once, and the decision read back by the replica holding the call every [`POLL`].
//!
//! Takes the cluster; gives list, unlist, the whole listing, decide and the holder's read.
//! Refuses nothing itself: Redis unreachable is `Err(Unavailable)` (the caller decides).

use std::sync::Arc;
use std::time::Duration;

use super::{Held, Verdict};
use crate::cluster::shared::{Decided, Unavailable};
use crate::cluster::Cluster;

/// How often the replica holding a call reads Redis for its decision.
pub const POLL: Duration = Duration::from_millis(250);

/// The Redis side of the registry.
pub struct Shared(Arc<Cluster>);

impl Shared {
    /// Over `cluster`'s Redis.
    pub fn new(cluster: Arc<Cluster>) -> Shared {
        Shared(cluster)
    }

    /// Lists `held` until its wait ends.
    pub async fn list(&self, held: &Held) -> Result<(), Unavailable> {
        let text = serde_json::to_string(held).unwrap_or_default();
        let ttl = held.expires_at_ms.saturating_sub(crate::state::now_ms());
        self.0
            .shared
            .approvals_list(&held.id, &text, held.expires_at_ms, ttl)
            .await
    }

    /// Removes `id` from the listing (in the background: a hold ends synchronously).
    pub fn unlist(&self, id: &str) {
        let (c, id) = (self.0.clone(), id.to_owned());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = c.shared.approvals_unlist(&id).await;
            });
        }
    }

    /// Every listed held call.
    pub async fn all(&self) -> Result<Vec<Held>, Unavailable> {
        let texts = self.0.shared.approvals_all(crate::state::now_ms()).await?;
        Ok(texts
            .iter()
            .filter_map(|t| serde_json::from_str(t).ok())
            .collect())
    }

    /// One listed held call.
    pub async fn get(&self, id: &str) -> Result<Option<Held>, Unavailable> {
        let t = self.0.shared.approvals_get(id).await?;
        Ok(t.and_then(|t| serde_json::from_str(&t).ok()))
    }

    /// Writes `verdict` on `id`, once.
    pub async fn decide(
        &self,
        id: &str,
        verdict: &Verdict,
        ttl_ms: u64,
    ) -> Result<Decided, Unavailable> {
        let text = serde_json::to_string(verdict).unwrap_or_default();
        self.0.shared.approvals_decide(id, &text, ttl_ms).await
    }

    /// The decision written on `id`, if any.
    pub async fn decision(&self, id: &str) -> Result<Option<Verdict>, Unavailable> {
        let t = self.0.shared.approvals_decision(id).await?;
        Ok(t.and_then(|t| serde_json::from_str(&t).ok()))
    }
}
