//! Ending a principal's sign-ins through `[auth.login]`, at once and on every replica.
//!
//! Takes an operator's revocation (the admin API's, or `sluice tokens revoke-sign-ins`); gives
//! the refresh families of the principal revoked (the store), its access tokens issued so far
//! refused (the runtime's [`Revoked`]) and, under `[cluster]`, the revocation written to Redis,
//! where every replica reads the others' every [`FOLLOW`] ([`follow`]). Refuses nothing; Redis
//! unreachable is said to the operator (the local part holds already).

use std::sync::Arc;
use std::time::Duration;

use crate::auth::revoked::{Revoked, KEEP};
use crate::cluster::Cluster;

/// How often a replica reads the cluster's revocations.
pub const FOLLOW: Duration = Duration::from_secs(1);
/// The most revocations read at once.
const BATCH: usize = 1024;

fn now_ms() -> u64 {
    crate::state::now_ms()
}

/// Records in Redis that `principal`'s access tokens issued until now are refused.
pub async fn share(c: &Cluster, principal: &str) -> Result<(), String> {
    let now = now_ms();
    c.shared
        .login_revoke_tokens(principal, now, now.saturating_sub(KEEP))
        .await
        .map_err(|_| "Redis is unreachable: other replicas may accept this principal's access tokens until they expire".to_owned())
}

/// Ends `principal`'s sign-ins: its refresh families, and its access tokens here and (under
/// `[cluster]`) on every replica. Gives how many sign-ins were revoked.
pub async fn revoke(
    store: &super::store::Store,
    revoked: &Revoked,
    cluster: Option<&Cluster>,
    principal: &str,
) -> Result<u64, String> {
    revoked.revoke(principal, now_ms());
    if let Some(c) = cluster {
        share(c, principal).await?;
    }
    store.revoke(principal).await
}

/// Reads the cluster's revocations every [`FOLLOW`] into `revoked` until `stop`.
pub async fn follow(
    c: Arc<Cluster>,
    revoked: Arc<Revoked>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut from = now_ms().saturating_sub(KEEP);
    let mut tick = tokio::time::interval(FOLLOW);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Ok(got) = c.shared.login_revocations(from, BATCH).await else {
            continue;
        };
        for (principal, second) in &got {
            revoked.revoke(principal, *second);
        }
        // Read again from the latest millisecond seen (another of that millisecond may follow).
        if let Some(last) = got.iter().map(|(_, s)| *s).max() {
            if got.len() == BATCH || last > from {
                from = last;
            }
        }
    }
}
