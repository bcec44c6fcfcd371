//! Tool pins in Redis (`[cluster]`): one hash per upstream, `sluice:pin:{upstream}`, a field per
//! tool holding its entry's JSON (opaque here: `pins/` reads and writes it).
//!
//! Takes an upstream's name and entries; gives them all, sets some and deletes others in one
//! transaction. Refuses nothing itself: a command that fails or outlasts the timeout is
//! [`Unavailable`]. Bounded by what is stored: `pins::book::MAX_PER_UPSTREAM` per upstream.

use super::{Shared, Unavailable};

/// The hash of `upstream`'s pins (an upstream name is `[A-Za-z0-9_.-]+`).
pub fn pins_key(upstream: &str) -> String {
    format!("sluice:pin:{upstream}")
}

impl Shared {
    /// Every tool's entry of `upstream` (`HGETALL`).
    pub async fn pins_get(&self, upstream: &str) -> Result<Vec<(String, String)>, Unavailable> {
        let key = pins_key(upstream);
        self.run("pins_get", async |c| {
            redis::cmd("HGETALL").arg(&key).query_async(c).await
        })
        .await
    }

    /// Sets `set` and deletes `del` of `upstream`'s entries, together (`MULTI`).
    pub async fn pins_put(
        &self,
        upstream: &str,
        set: &[(String, String)],
        del: &[String],
    ) -> Result<(), Unavailable> {
        if set.is_empty() && del.is_empty() {
            return Ok(());
        }
        let key = pins_key(upstream);
        self.run("pins_put", async |c| {
            let mut p = redis::pipe();
            p.atomic();
            if !set.is_empty() {
                p.cmd("HSET").arg(&key).arg(set).ignore();
            }
            if !del.is_empty() {
                p.cmd("HDEL").arg(&key).arg(del).ignore();
            }
            p.query_async::<()>(c).await
        })
        .await
    }
}
