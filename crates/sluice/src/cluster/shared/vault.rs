//! The token vault's Redis side (`[cluster]`): sealed values under per-(upstream, principal)
//! keys, the lease one replica takes to refresh a token, and the scan an operator lists with.
//!
//! Takes keys and sealed values (opaque bytes: the vault seals before and opens after);
//! gives get, set with an expiry, delete (only if the value is still the one read, so a
//! replica never drops a token another just refreshed), a lease (`SET NX PX`, released only by
//! its holder) and a bounded scan. Refuses nothing itself: a command that fails or outlasts
//! the timeout is [`Unavailable`].

use std::sync::LazyLock;
use std::time::Duration;

use super::{Shared, Unavailable};

/// The most entries one scan gives (`sluice tokens list`).
pub const MAX_LISTED: usize = 100_000;

/// KEYS: a key. ARGV: the value expected. Deletes it only while it holds that value.
static DELETE_IF: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
",
    )
});

/// KEYS: a key. ARGV: the value expected, the new value, its TTL (ms). Sets it only while it
/// holds the value expected; gives 1 when set.
static REPLACE_IF: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
",
    )
});

impl Shared {
    /// Sets `key` to `value` for `ttl` only while it holds `old`; gives whether it was set.
    pub async fn vault_replace(
        &self,
        key: &str,
        old: &[u8],
        value: &[u8],
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let ms = ttl.as_millis().max(1) as u64;
        let n: i64 = self
            .run("vault_replace", async |c| {
                REPLACE_IF
                    .key(key)
                    .arg(old)
                    .arg(value)
                    .arg(ms)
                    .invoke_async(c)
                    .await
            })
            .await?;
        Ok(n == 1)
    }

    /// The bytes under `key`, if any.
    pub async fn vault_get(&self, key: &str) -> Result<Option<Vec<u8>>, Unavailable> {
        self.run("vault_get", async |c| {
            redis::cmd("GET").arg(key).query_async(c).await
        })
        .await
    }

    /// The bytes under `key`, deleted as they are read (`GETDEL`: one reader gets them).
    pub async fn vault_take(&self, key: &str) -> Result<Option<Vec<u8>>, Unavailable> {
        self.run("vault_take", async |c| {
            redis::cmd("GETDEL").arg(key).query_async(c).await
        })
        .await
    }

    /// Whether `key` holds a value.
    pub async fn vault_exists(&self, key: &str) -> Result<bool, Unavailable> {
        let n: i64 = self
            .run("vault_exists", async |c| {
                redis::cmd("EXISTS").arg(key).query_async(c).await
            })
            .await?;
        Ok(n == 1)
    }

    /// Sets `key` to `value` for `ttl`.
    pub async fn vault_set(
        &self,
        key: &str,
        value: &[u8],
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let ms = ttl.as_millis().max(1) as u64;
        self.run("vault_set", async |c| {
            redis::cmd("SET")
                .arg(key)
                .arg(value)
                .arg("PX")
                .arg(ms)
                .query_async::<()>(c)
                .await
        })
        .await
    }

    /// Deletes `key`: only while it holds `only` when given. Gives whether it was deleted.
    pub async fn vault_delete(&self, key: &str, only: Option<&[u8]>) -> Result<bool, Unavailable> {
        let n: i64 = match only {
            Some(v) => {
                self.run("vault_delete", async |c| {
                    DELETE_IF.key(key).arg(v).invoke_async(c).await
                })
                .await?
            }
            None => {
                self.run("vault_delete", async |c| {
                    redis::cmd("DEL").arg(key).query_async(c).await
                })
                .await?
            }
        };
        Ok(n == 1)
    }

    /// Takes the lease `key` for `holder` during `ttl`: `false` when another holds it.
    pub async fn vault_lease(
        &self,
        key: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let ms = ttl.as_millis().max(1) as u64;
        let set: Option<String> = self
            .run("vault_lease", async |c| {
                redis::cmd("SET")
                    .arg(key)
                    .arg(holder)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms)
                    .query_async(c)
                    .await
            })
            .await?;
        Ok(set.is_some())
    }

    /// Gives the lease `key` back, if `holder` still holds it.
    pub async fn vault_release(&self, key: &str, holder: &str) -> Result<(), Unavailable> {
        self.vault_delete(key, Some(holder.as_bytes()))
            .await
            .map(drop)
    }

    /// The keys matching `pattern` and their values, at most [`MAX_LISTED`].
    pub async fn vault_scan(&self, pattern: &str) -> Result<Vec<(String, Vec<u8>)>, Unavailable> {
        let mut keys: Vec<String> = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = self
                .run("vault_scan", async |c| {
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(pattern)
                        .arg("COUNT")
                        .arg(1000)
                        .query_async(c)
                        .await
                })
                .await?;
            keys.extend(batch);
            keys.truncate(MAX_LISTED);
            if next == 0 || keys.len() >= MAX_LISTED {
                break;
            }
            cursor = next;
        }
        let mut out = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(500) {
            let values: Vec<Option<Vec<u8>>> = self
                .run("vault_scan", async |c| {
                    redis::cmd("MGET").arg(chunk).query_async(c).await
                })
                .await?;
            let found = chunk.iter().zip(values);
            out.extend(found.filter_map(|(k, v)| Some((k.clone(), v?))));
        }
        Ok(out)
    }
}
