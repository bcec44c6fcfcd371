//! Held calls' Redis side (`[cluster]`): the listing every replica's admin API reads, and the
//! single-use decision any of them writes for the replica holding the call.
//!
//! Takes a held call's id, its listing (JSON, argument keys and shown values only) and expiry,
//! and a decision (JSON); gives list (`sluice:approvals:index`, a sorted set scored by expiry,
//! and one key per call with a TTL), decide (one script: the call must be listed and not
//! decided; the decision is written with `SET NX`, so the first wins) and the holder's read of
//! its decision. Refuses nothing itself: a command that fails or outlasts the timeout is
//! [`Unavailable`].

use std::sync::LazyLock;

use super::{Shared, Unavailable};

const INDEX: &str = "sluice:approvals:index";

fn held_key(id: &str) -> String {
    format!("sluice:approvals:held:{id}")
}

fn decision_key(id: &str) -> String {
    format!("sluice:approvals:decision:{id}")
}

/// The most held calls one listing reads.
pub const MAX_LISTED_HELD: usize = 10_000;

/// KEYS: the held key, the decision key. ARGV: the decision, its TTL (ms). Gives 1 (decided
/// now), 0 (decided before), -1 (not listed: never held, or its wait ended).
static DECIDE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2])
return 1
",
    )
});

/// KEYS: the index, the held key. ARGV: id, the listing, expiry (Unix ms), TTL (ms).
static LIST: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
",
    )
});

/// What deciding found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// This decision is the one.
    Now,
    /// Another came first.
    Before,
    /// The call is not held anywhere (or its wait ended).
    Unknown,
}

impl Shared {
    /// Lists a held call until `expires_ms` (Unix ms).
    pub async fn approvals_list(
        &self,
        id: &str,
        listing: &str,
        expires_ms: u64,
        ttl_ms: u64,
    ) -> Result<(), Unavailable> {
        let key = held_key(id);
        self.run("approvals_list", async |c| {
            LIST.key(INDEX)
                .key(&key)
                .arg(id)
                .arg(listing)
                .arg(expires_ms)
                .arg(ttl_ms.max(1))
                .invoke_async::<i64>(c)
                .await
        })
        .await
        .map(|_| ())
    }

    /// Removes a held call from the listing.
    pub async fn approvals_unlist(&self, id: &str) -> Result<(), Unavailable> {
        let key = held_key(id);
        self.run("approvals_unlist", async |c| {
            redis::pipe()
                .cmd("DEL")
                .arg(&key)
                .ignore()
                .cmd("ZREM")
                .arg(INDEX)
                .arg(id)
                .ignore()
                .query_async::<()>(c)
                .await
        })
        .await
    }

    /// Every listed held call (JSON), its expired entries dropped first (`now_ms`: Unix ms).
    pub async fn approvals_all(&self, now_ms: u64) -> Result<Vec<String>, Unavailable> {
        let ids: Vec<String> = self
            .run("approvals_index", async |c| {
                redis::pipe()
                    .cmd("ZREMRANGEBYSCORE")
                    .arg(INDEX)
                    .arg("-inf")
                    .arg(now_ms)
                    .ignore()
                    .cmd("ZRANGE")
                    .arg(INDEX)
                    .arg(0)
                    .arg(MAX_LISTED_HELD as i64 - 1)
                    .query_async::<(Vec<String>,)>(c)
                    .await
                    .map(|(v,)| v)
            })
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|i| held_key(i)).collect();
        let got: Vec<Option<String>> = self
            .run("approvals_get", async |c| {
                redis::cmd("MGET").arg(&keys).query_async(c).await
            })
            .await?;
        Ok(got.into_iter().flatten().collect())
    }

    /// The listing of one held call.
    pub async fn approvals_get(&self, id: &str) -> Result<Option<String>, Unavailable> {
        let key = held_key(id);
        self.run("approvals_get", async |c| {
            redis::cmd("GET").arg(&key).query_async(c).await
        })
        .await
    }

    /// Writes the decision on `id`, once.
    pub async fn approvals_decide(
        &self,
        id: &str,
        decision: &str,
        ttl_ms: u64,
    ) -> Result<Decided, Unavailable> {
        let (held, key) = (held_key(id), decision_key(id));
        let n: i64 = self
            .run("approvals_decide", async |c| {
                DECIDE
                    .key(&held)
                    .key(&key)
                    .arg(decision)
                    .arg(ttl_ms.max(1))
                    .invoke_async(c)
                    .await
            })
            .await?;
        Ok(match n {
            1 => Decided::Now,
            0 => Decided::Before,
            _ => Decided::Unknown,
        })
    }

    /// The decision written on `id`, if any.
    pub async fn approvals_decision(&self, id: &str) -> Result<Option<String>, Unavailable> {
        let key = decision_key(id);
        self.run("approvals_decision", async |c| {
            redis::cmd("GET").arg(&key).query_async(c).await
        })
        .await
    }
}
