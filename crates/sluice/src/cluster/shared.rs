//! What replicas share, in Redis: one atomic command or script per decision.
//!
//! Takes the cluster's Redis URL and a timeout per command; gives single use of a nonce (a
//! claim per attempt, released by a replica whose claim timed out: see [`single_use`]), a
//! budget or quota charge (one Lua script: GCRA on Redis's own clock, both limits checked before
//! either is charged, at most once per attempt, refunded by a replica whose charge timed out: see
//! [`charge`]), a place among a principal's parked exchanges (one script over a
//! sorted set scored by expiry, so a replica that dies leaves nothing counted past it), and
//! the registry of replicas' internal URLs (a key per replica with a TTL its heartbeat renews),
//! the token vault's sealed entries and refresh leases ([`vault`]), the login front's
//! records and refresh token chains (`login.rs`), and tool pins (`pins.rs`).
//! Refuses nothing itself: a command that fails or outlasts the timeout is [`Unavailable`],
//! and the caller applies `cluster.on_redis_error`. The connection is made on first use and
//! remade by the connection manager after a loss, so a replica starts while Redis is down.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::sync::OnceCell;

mod approvals;
mod charge;
mod login;
mod pins;
mod sessions;
mod single_use;
mod vault;
pub use approvals::{Decided, MAX_LISTED_HELD};
pub use charge::ATTEMPT_MS;
pub use pins::pins_key;
pub use sessions::Renewed;
use sessions::{OPEN_SESSION, RENEW, RESTORE};
pub use single_use::{Consumed, TimedOut, LEASE_MS};
pub use vault::MAX_LISTED;

/// Redis could not answer in time (down, unreachable, or too slow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the shared state (Redis) did not answer")]
pub struct Unavailable;

/// A rate: one unit every `interval_us` (fractional), up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Microseconds per unit.
    pub interval_us: f64,
    /// The most units taken at once.
    pub burst: u64,
}

/// What a budget charge found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charged {
    /// Both limits had room; both are charged.
    Ok,
    /// The sampling limit is spent; room again after this many microseconds.
    Sampling(u64),
    /// The token limit is spent; room again after this many microseconds.
    Tokens(u64),
    /// One ask wants more tokens than the whole window holds.
    TokensNever,
}

/// A place among a principal's parked exchanges, on Redis's clock. KEYS: the principal's set.
/// ARGV: the handle, how long it stays parked (ms), the cap. Gives 1 (taken) or 0 (at the cap).
/// The set lives as long as its latest entry.
const PARK: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], top[2])
return 1
";

/// A replica's heartbeat. KEYS: its registry entry, the directory (id to URL), the last-seen
/// set, Redis's epoch (a random value the first heartbeat after Redis started sets). ARGV: id,
/// URL, the entry's TTL (ms), how long a silent replica stays in the directory (ms), a fresh
/// epoch. Gives the epoch, then the directory, flat (id, URL, id, URL...).
const REGISTER: &str = r"
redis.call('SET', KEYS[4], ARGV[5], 'NX')
local epoch = redis.call('GET', KEYS[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], now, ARGV[1])
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - tonumber(ARGV[4]), 'LIMIT', 0, 100)
for _, id in ipairs(old) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
local out = redis.call('HGETALL', KEYS[2])
table.insert(out, 1, epoch)
return out
";

/// A silent replica leaves the directory after this long.
const FORGET: Duration = Duration::from_secs(600);
const DIRECTORY: &str = "sluice:directory";
const SEEN: &str = "sluice:seen";
const EPOCH: &str = "sluice:epoch";

/// What a heartbeat read back.
pub struct Registered {
    /// Redis's epoch: a new one means Redis started again with nothing kept.
    pub epoch: String,
    /// Every replica's last known URL.
    pub directory: Vec<(String, String)>,
}

/// The Redis side of a cluster.
pub struct Shared {
    client: redis::Client,
    conn: OnceCell<ConnectionManager>,
    timeout: Duration,
    park: redis::Script,
    register: redis::Script,
    open_session: redis::Script,
    renew: redis::Script,
    restore: redis::Script,
    /// Confirms and releases of single-use claims, and refunds of charges, under way (bounded).
    settling: std::sync::Arc<tokio::sync::Semaphore>,
}

impl Shared {
    /// A handle on `url` (no connection yet); every command is bounded by `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<Shared, String> {
        let client = redis::Client::open(url).map_err(|e| format!("cluster.redis_url: {e}"))?;
        Ok(Shared {
            client,
            conn: OnceCell::new(),
            timeout,
            park: redis::Script::new(PARK),
            register: redis::Script::new(REGISTER),
            open_session: redis::Script::new(OPEN_SESSION),
            renew: redis::Script::new(RENEW),
            restore: redis::Script::new(RESTORE),
            settling: single_use::settling(),
        })
    }

    async fn conn(&self) -> Result<ConnectionManager, Unavailable> {
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1)
            .set_max_delay(self.timeout);
        let made = self
            .conn
            .get_or_try_init(|| async {
                ConnectionManager::new_lazy_with_config(self.client.clone(), cfg)
            })
            .await;
        made.cloned().map_err(|e| {
            tracing::warn!(error = %crate::escape::Escaped(&e), "cannot set up the Redis connection");
            Unavailable
        })
    }

    /// Runs one command (or script) under the timeout.
    async fn run<T: redis::FromRedisValue>(
        &self,
        what: &'static str,
        cmd: impl AsyncFnOnce(&mut ConnectionManager) -> redis::RedisResult<T>,
    ) -> Result<T, Unavailable> {
        let mut c = self.conn().await?;
        match tokio::time::timeout(self.timeout, cmd(&mut c)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                tracing::warn!(op = what, kind = ?e.kind(), "Redis command failed");
                Err(Unavailable)
            }
            Err(_) => {
                tracing::warn!(
                    op = what,
                    timeout_ms = self.timeout.as_millis() as u64,
                    "Redis command timed out"
                );
                Err(Unavailable)
            }
        }
    }

    /// Takes a place for `handle` among `principal`'s parked exchanges (`cap` at most, across
    /// replicas) until `expires_ms`: `false` at the cap.
    pub async fn park(
        &self,
        principal: &str,
        handle: &str,
        park: Duration,
        cap: usize,
    ) -> Result<bool, Unavailable> {
        let key = format!("sluice:p:{principal}");
        let ms = park.as_millis() as u64;
        let got: i64 = self
            .run("park", async |c| {
                self.park
                    .key(&key)
                    .arg(handle)
                    .arg(ms)
                    .arg(cap)
                    .invoke_async(c)
                    .await
            })
            .await?;
        Ok(got == 1)
    }

    /// Gives back `handle`'s place (answered, cancelled or expired).
    pub async fn unpark(&self, principal: &str, handle: &str) -> Result<(), Unavailable> {
        let key = format!("sluice:p:{principal}");
        self.run("unpark", async |c| {
            redis::cmd("ZREM")
                .arg(&key)
                .arg(handle)
                .query_async::<i64>(c)
                .await
        })
        .await
        .map(|_| ())
    }

    /// Says where replica `id` is reached, for `ttl`; gives every replica's last known URL
    /// (the directory a replica keeps for when Redis is away; a replica silent for 10 minutes
    /// leaves it).
    pub async fn register(
        &self,
        id: &str,
        url: &str,
        ttl: Duration,
    ) -> Result<Registered, Unavailable> {
        let key = format!("sluice:r:{id}");
        let (ms, forget) = (ttl.as_millis() as u64, FORGET.as_millis() as u64);
        let fresh = crate::state::nonce();
        let flat: Vec<String> = self
            .run("register", async |c| {
                let mut inv = self.register.key(&key);
                inv.key(DIRECTORY)
                    .key(SEEN)
                    .key(EPOCH)
                    .arg(id)
                    .arg(url)
                    .arg(ms)
                    .arg(forget)
                    .arg(&fresh);
                inv.invoke_async(c).await
            })
            .await?;
        let mut it = flat.into_iter();
        let epoch = it.next().unwrap_or_default();
        let mut directory = Vec::new();
        while let (Some(id), Some(url)) = (it.next(), it.next()) {
            directory.push((id, url));
        }
        Ok(Registered { epoch, directory })
    }

    /// Removes replica `id` from the registry and the directory (it is stopping).
    pub async fn deregister(&self, id: &str) -> Result<(), Unavailable> {
        let key = format!("sluice:r:{id}");
        self.run("deregister", async |c| {
            redis::pipe()
                .cmd("DEL")
                .arg(&key)
                .ignore()
                .cmd("HDEL")
                .arg(DIRECTORY)
                .arg(id)
                .ignore()
                .cmd("ZREM")
                .arg(SEEN)
                .arg(id)
                .ignore()
                .query_async::<()>(c)
                .await
        })
        .await
    }

    /// Redis's `maxmemory-policy`, when it may be read (a managed Redis may refuse `CONFIG`).
    pub async fn eviction_policy(&self) -> Option<String> {
        let got: Result<Vec<String>, _> = self
            .run("config", async |c| {
                redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("maxmemory-policy")
                    .query_async(c)
                    .await
            })
            .await;
        got.ok().and_then(|v| v.into_iter().nth(1))
    }

    /// Where replica `id` is reached (`None`: not registered, so gone).
    pub async fn lookup(&self, id: &str) -> Result<Option<String>, Unavailable> {
        let key = format!("sluice:r:{id}");
        let got = self
            .run("lookup", async |c| {
                redis::cmd("GET")
                    .arg(&key)
                    .query_async::<Option<String>>(c)
                    .await
            })
            .await?;
        // Redis is a peer: what it hands back is used as a replica's URL only when it reads as
        // one (`cluster.advertise_url`'s grammar); anything else is no registered replica.
        Ok(got.filter(|u| replica_url(u)))
    }

    /// Stores a small value under `key` until `ttl` (bridge B's session records).
    pub async fn put(&self, key: &str, value: &str, ttl: Duration) -> Result<(), Unavailable> {
        let ms = ttl.as_millis().max(1) as u64;
        self.run("put", async |c| {
            redis::cmd("SET")
                .arg(key)
                .arg(value)
                .arg("PX")
                .arg(ms)
                .query_async::<String>(c)
                .await
        })
        .await
        .map(|_| ())
    }

    /// The values under `keys` (`MGET`), in their order.
    pub async fn get_many(&self, keys: &[String]) -> Result<Vec<Option<String>>, Unavailable> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.run("mget", async |c| {
            redis::cmd("MGET")
                .arg(keys)
                .query_async::<Vec<Option<String>>>(c)
                .await
        })
        .await
    }

    /// The value under `key`, its expiry renewed to `ttl` (`GETEX`), if any.
    pub async fn get_renewing(
        &self,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<String>, Unavailable> {
        let ms = ttl.as_millis().max(1) as u64;
        self.run("getex", async |c| {
            redis::cmd("GETEX")
                .arg(key)
                .arg("PX")
                .arg(ms)
                .query_async::<Option<String>>(c)
                .await
        })
        .await
    }
}

/// Whether `u` reads as a replica's internal URL: `http://host:port` (at most 512 bytes, no
/// path past `/`, no query), as `cluster.advertise_url` must be.
fn replica_url(u: &str) -> bool {
    let Ok(uri) = (u.len() <= 512)
        .then_some(u)
        .unwrap_or("")
        .parse::<http::Uri>()
    else {
        return false;
    };
    uri.scheme_str() == Some("http")
        && uri.host().is_some_and(|h| !h.is_empty())
        && uri.port().is_some()
        && matches!(uri.path(), "" | "/")
        && uri.query().is_none()
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_a_url_that_reads_as_a_replicas_is_taken_from_redis() {
        for ok in ["http://10.0.0.7:9100", "http://sluice-1.sluice:9100/"] {
            assert!(super::replica_url(ok), "{ok}");
        }
        let long = format!("http://h:1/{}", "a".repeat(600));
        for bad in [
            "",
            "https://h:9100",
            "http://h",
            "http://h:9100/x",
            "http://h:9100/?q=1",
            "evil\nline",
            long.as_str(),
        ] {
            assert!(!super::replica_url(bad), "{bad}");
        }
    }
}
