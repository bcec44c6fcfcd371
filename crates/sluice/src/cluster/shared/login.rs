//! The login front's Redis side (`[auth.login]` under `[cluster]`): its records as values with
//! an expiry, taken once where single use, counted per window, and the refresh token chains
//! rotated in one script.
//!
//! Takes keys and values (text the login front wrote: no secret, only hashes of secrets and
//! what a sign-in granted); gives set-if-absent, get, get-and-delete (`GETDEL`: one replica
//! only takes a code or a sign-in), replace keeping the expiry, a counter per window, and
//! [`Shared::login_rotate`], and a principal's chains revoked at once (an operator's
//! `sluice tokens revoke-sign-ins`). Refuses nothing itself: a command that fails or outlasts the
//! timeout is [`Unavailable`].

use std::sync::LazyLock;
use std::time::Duration;

use super::{Shared, Unavailable};

/// KEYS: a chain. ARGV: the hash presented, the next hash, the client. Gives 1 (rotated to the
/// next hash), 0 (no such chain), -1 (revoked), -2 (another client), -3 (not the current hash:
/// the chain is revoked now).
static ROTATE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local f = redis.call('HMGET', KEYS[1], 'client', 'current', 'revoked')
if not f[1] then return 0 end
if f[3] == '1' then return -1 end
if f[1] ~= ARGV[3] then return -2 end
if f[2] ~= ARGV[1] then
  redis.call('HSET', KEYS[1], 'revoked', '1')
  return -3
end
redis.call('HSET', KEYS[1], 'current', ARGV[2])
return 1
",
    )
});

/// KEYS: a principal's set of chains. Marks every chain of the set that still exists revoked,
/// drops the set; gives how many were.
static REVOKE_ALL: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local n = 0
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', k) == 1 then
    redis.call('HSET', k, 'revoked', '1')
    n = n + 1
  end
end
redis.call('DEL', KEYS[1])
return n
",
    )
});

/// KEYS: a principal's set of chains. ARGV: the most to list. Gives `[client, revoked, ...]`
/// of the chains still held (at most ARGV[1] of them).
static LIST_CHAINS: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local out = {}
local n = 0
for _, k in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if n >= tonumber(ARGV[1]) then break end
  local v = redis.call('HMGET', k, 'client', 'revoked')
  if v[1] then
    table.insert(out, v[1])
    table.insert(out, v[2] or '0')
    n = n + 1
  end
end
return out
",
    )
});

/// The sorted set of revocations of Sluice's access tokens: member a principal's hash, score the
/// Unix millisecond up to which its tokens are refused.
const REVOKED: &str = "sluice:login:revoked";

fn ms(ttl: Duration) -> u64 {
    ttl.as_millis().max(1) as u64
}

impl Shared {
    /// Sets `key` to `value` for `ttl` unless it exists; gives whether it was set.
    pub async fn login_put(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let set: Option<String> = self
            .run("login_put", async |c| {
                redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .arg("PX")
                    .arg(ms(ttl))
                    .arg("NX")
                    .query_async(c)
                    .await
            })
            .await?;
        Ok(set.is_some())
    }

    /// The value of `key`.
    pub async fn login_get(&self, key: &str) -> Result<Option<String>, Unavailable> {
        self.run("login_get", async |c| {
            redis::cmd("GET").arg(key).query_async(c).await
        })
        .await
    }

    /// The value of `key`, deleted (`GETDEL`): one caller only gets it.
    pub async fn login_take(&self, key: &str) -> Result<Option<String>, Unavailable> {
        self.run("login_take", async |c| {
            redis::cmd("GETDEL").arg(key).query_async(c).await
        })
        .await
    }

    /// Replaces the value of an existing `key`, its expiry kept; gives whether it existed.
    pub async fn login_replace(&self, key: &str, value: &str) -> Result<bool, Unavailable> {
        let set: Option<String> = self
            .run("login_replace", async |c| {
                redis::cmd("SET")
                    .arg(key)
                    .arg(value)
                    .arg("KEEPTTL")
                    .arg("XX")
                    .query_async(c)
                    .await
            })
            .await?;
        Ok(set.is_some())
    }

    /// Counts one under `key`, the count living `window` from its first; gives the count.
    pub async fn login_count(&self, key: &str, window: Duration) -> Result<u64, Unavailable> {
        let (n, _): (u64, i64) = self
            .run("login_count", async |c| {
                redis::pipe()
                    .atomic()
                    .cmd("INCR")
                    .arg(key)
                    .cmd("PEXPIRE")
                    .arg(key)
                    .arg(ms(window))
                    .arg("NX")
                    .query_async(c)
                    .await
            })
            .await?;
        Ok(n)
    }

    /// Starts a chain under `key` for `ttl`: its client, current hash and what it grants; the
    /// chain joins the set `owner` (its principal's, living as long as its longest chain).
    pub async fn login_chain(
        &self,
        key: &str,
        owner: &str,
        (client, current, grant): (&str, &str, &str),
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        self.run("login_chain", async |c| {
            redis::pipe()
                .atomic()
                .cmd("HSET")
                .arg(key)
                .arg("client")
                .arg(client)
                .arg("current")
                .arg(current)
                .arg("revoked")
                .arg("0")
                .arg("grant")
                .arg(grant)
                .ignore()
                .cmd("PEXPIRE")
                .arg(key)
                .arg(ms(ttl))
                .ignore()
                .cmd("SADD")
                .arg(owner)
                .arg(key)
                .ignore()
                .cmd("PEXPIRE")
                .arg(owner)
                .arg(ms(ttl))
                .arg("NX")
                .ignore()
                .cmd("PEXPIRE")
                .arg(owner)
                .arg(ms(ttl))
                .arg("GT")
                .ignore()
                .query_async::<()>(c)
                .await
        })
        .await
    }

    /// Revokes every chain of the set `owner`; gives how many.
    pub async fn login_revoke_all(&self, owner: &str) -> Result<u64, Unavailable> {
        self.run("login_revoke_all", async |c| {
            REVOKE_ALL.key(owner).invoke_async(c).await
        })
        .await
    }

    /// The chains of the set `owner`: `(client, revoked)`, at most `max`.
    pub async fn login_chains(
        &self,
        owner: &str,
        max: usize,
    ) -> Result<Vec<(String, bool)>, Unavailable> {
        let flat: Vec<String> = self
            .run("login_chains", async |c| {
                LIST_CHAINS.key(owner).arg(max).invoke_async(c).await
            })
            .await?;
        Ok(flat
            .chunks(2)
            .filter_map(|p| match p {
                [client, revoked] => Some((client.clone(), revoked == "1")),
                _ => None,
            })
            .collect())
    }

    /// Records that `member`'s access tokens issued up to `second` (Unix ms) are refused, and
    /// forgets revocations older than `keep_from`.
    pub async fn login_revoke_tokens(
        &self,
        member: &str,
        second: u64,
        keep_from: u64,
    ) -> Result<(), Unavailable> {
        self.run("login_revoke_tokens", async |c| {
            redis::pipe()
                .atomic()
                .cmd("ZADD")
                .arg(REVOKED)
                .arg("GT")
                .arg(second)
                .arg(member)
                .ignore()
                .cmd("ZREMRANGEBYSCORE")
                .arg(REVOKED)
                .arg("-inf")
                .arg(format!("({keep_from}"))
                .ignore()
                .query_async::<()>(c)
                .await
        })
        .await
    }

    /// The revocations at or after `from` (Unix ms), at most `max`: `(member, ms)`.
    pub async fn login_revocations(
        &self,
        from: u64,
        max: usize,
    ) -> Result<Vec<(String, u64)>, Unavailable> {
        self.run("login_revocations", async |c| {
            redis::cmd("ZRANGEBYSCORE")
                .arg(REVOKED)
                .arg(from)
                .arg("+inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(max)
                .query_async::<Vec<(String, u64)>>(c)
                .await
        })
        .await
    }

    /// Rotates the chain under `key` from `presented` to `next` for `client` (see [`ROTATE`]
    /// for the answer), and its grant.
    pub async fn login_rotate(
        &self,
        key: &str,
        presented: &str,
        next: &str,
        client: &str,
    ) -> Result<(i64, Option<String>), Unavailable> {
        let turn: i64 = self
            .run("login_rotate", async |c| {
                ROTATE
                    .key(key)
                    .arg(presented)
                    .arg(next)
                    .arg(client)
                    .invoke_async(c)
                    .await
            })
            .await?;
        if turn != 1 {
            return Ok((turn, None));
        }
        let grant = self
            .run("login_grant", async |c| {
                redis::cmd("HGET")
                    .arg(key)
                    .arg("grant")
                    .query_async(c)
                    .await
            })
            .await?;
        Ok((turn, grant))
    }
}
