//! Bridge B's session records in Redis: opened under the principal's cap, renewed, written
//! back when lost (never over a tombstone). Takes and gives what [`Shared`](super::Shared)'s
//! other commands do; refuses nothing itself.

use std::time::Duration;

use super::{Shared, Unavailable};

/// A 2025-11-25 session opened. KEYS: its record, the principal's sessions (by opening time).
/// ARGV: the session id, the record, the idle time (ms), the cap. Past the cap the principal's
/// oldest sessions end (their records become `ended`). Gives how many ended.
pub(super) const OPEN_SESSION: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  for _, sid in ipairs(redis.call('ZRANGE', KEYS[2], 0, over - 1)) do
    redis.call('SET', 'sluice:s:' .. sid, 'ended', 'PX', ARGV[3])
    redis.call('ZREM', KEYS[2], sid)
  end
end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return math.max(over, 0)
";

/// A held session's record renewed. KEYS: the record, the principal's sessions. ARGV: the
/// tombstone's value, the idle time (ms), the session id. Gives 1 (renewed: the record and its
/// place among the principal's, as used now), 0 (ended), -1 (missing).
pub(super) const RENEW: &str = r"
local v = redis.call('GET', KEYS[1])
if not v then return -1 end
if v == ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'XX', now, ARGV[3])
return 1
";

/// A held session's lost record written back. KEYS: the record, the principal's sessions.
/// ARGV: the session id, the record, the idle time (ms). Writes nothing over a record or a
/// tombstone that is there (a session ended elsewhere stays ended). Gives 1 (written) or 0.
pub(super) const RESTORE: &str = r"
if not redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3], 'NX') then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[2], 'NX', now, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
";

/// What renewing a held session found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// The record is there, renewed.
    Live,
    /// The session ended on another replica.
    Ended,
    /// No record (Redis lost it).
    Missing,
}

/// A session's record key, its principal's set of sessions, and the idle time in ms (at least 1).
fn keys(sid: &str, principal: &str, idle: Duration) -> (String, String, u64) {
    (
        format!("sluice:s:{sid}"),
        format!("sluice:sp:{principal}"),
        idle.as_millis().max(1) as u64,
    )
}

impl Shared {
    /// Writes a new session's record and ends the principal's oldest past `cap`.
    pub async fn open_session(
        &self,
        sid: &str,
        principal: &str,
        record: &str,
        idle: Duration,
        cap: usize,
    ) -> Result<u64, Unavailable> {
        let (k, set, ms) = keys(sid, principal, idle);
        self.run("open session", async |c| {
            let mut inv = self.open_session.key(&k);
            inv.key(&set).arg(sid).arg(record).arg(ms).arg(cap);
            inv.invoke_async(c).await
        })
        .await
    }

    /// Renews a held session's record (`ended`: the tombstone's value) and its place among its
    /// principal's sessions.
    pub async fn renew(
        &self,
        sid: &str,
        principal: &str,
        ended: &str,
        idle: Duration,
    ) -> Result<Renewed, Unavailable> {
        let (k, set, ms) = keys(sid, principal, idle);
        let got: i64 = self
            .run("renew", async |c| {
                let mut inv = self.renew.key(&k);
                inv.key(&set).arg(ended).arg(ms).arg(sid);
                inv.invoke_async(c).await
            })
            .await?;
        Ok(match got {
            1 => Renewed::Live,
            0 => Renewed::Ended,
            _ => Renewed::Missing,
        })
    }

    /// Writes a held session's lost record back, never over a record or a tombstone.
    pub async fn restore_session(
        &self,
        sid: &str,
        principal: &str,
        record: &str,
        idle: Duration,
    ) -> Result<bool, Unavailable> {
        let (k, set, ms) = keys(sid, principal, idle);
        let got: i64 = self
            .run("restore session", async |c| {
                let mut inv = self.restore.key(&k);
                inv.key(&set).arg(sid).arg(record).arg(ms);
                inv.invoke_async(c).await
            })
            .await?;
        Ok(got == 1)
    }
}
