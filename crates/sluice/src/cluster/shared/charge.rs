//! Budget and quota charges across replicas, each applied at most once, and undone when its
//! replica gave up on it.
//!
//! A charge is a GCRA step on Redis's clock for two limits at once (sampling asks and tokens;
//! a call quota is the same with no tokens). A script that outlasts `redis_timeout_ms` is still
//! applied when Redis resumes: the request it was for was refused as retryable (`closed`) or
//! decided on this replica's own state (`local`), so applied late it would count a call twice
//! (its retry is charged again) or count one this replica never served. So each charge carries a
//! token fresh for its attempt, and leaves a record of what it added under that token
//! (`c:<sampling µs>:<tokens µs>`, to the thousandth, for [`ATTEMPT_MS`]); a record already there (this very
//! attempt applied, or refunded) makes the script change nothing. The replica whose charge got no
//! answer in time sends [`REFUND`] at once on the same connection, so it lands after the charge
//! wherever the charge is: it takes back exactly what the record says the attempt added and marks
//! it refunded, or, finding no record (the charge has not landed, or was refused), writes a
//! refunded mark the late charge will find. A charge answered in time needs nothing more (it is
//! confirmed by its answer).
//!
//! Takes the key (a principal under a budget profile, or a quota and principal), both rates and
//! the tokens asked; gives [`Charged`]. Refuses nothing itself: a charge without an answer in
//! time is [`Unavailable`] (and refunded). At worst (a refund that could not be sent within
//! [`ATTEMPT_MS`], or more than [`MAX_SETTLING`](super::single_use::MAX_SETTLING) settling at
//! once) a charge stays counted that was not served: never one served uncounted.

use std::sync::LazyLock;
use std::time::Duration;

use super::{Charged, Rate, Shared, Unavailable};

/// How long an attempt's record (what it added, or that it was refunded) is kept: a refund must
/// land within it (it is sent at once; retried after a lost connection up to this long).
pub const ATTEMPT_MS: u64 = 60_000;

/// GCRA for two limits at once, on Redis's clock. KEYS: sampling TAT, tokens TAT, the attempt's
/// record. ARGV: sampling interval (µs) and burst, tokens interval and burst, tokens asked, the
/// record's lifetime (ms). Gives `{code, wait_us}`: 0 charged, 1 sampling spent, 2 tokens spent,
/// 3 never fits, 4 this attempt was applied or refunded already (nothing changed). TATs are
/// written as integers (`%.0f`: exact to 2^53 µs) and expire when they no longer constrain
/// anything.
static CHARGE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('EXISTS', KEYS[3]) == 1 then return {4, 0} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function check(key, interval, burst, n)
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local new_tat = tat + n * interval
  local allow_at = new_tat - burst * interval
  if allow_at > now then return nil, math.ceil(allow_at - now) end
  return new_tat, 0
end
local function put(key, tat)
  redis.call('SET', key, string.format('%.0f', math.ceil(tat)), 'PX', math.ceil((tat - now) / 1000) + 1)
end
local n = tonumber(ARGV[5])
local tnew = nil
if n > 0 then
  if n > tonumber(ARGV[4]) then return {3, 0} end
  local w
  tnew, w = check(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]), n)
  if not tnew then return {2, w} end
end
local snew, w = check(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), 1)
if not snew then return {1, w} end
put(KEYS[1], snew)
local td = 0
if tnew then
  put(KEYS[2], tnew)
  td = n * tonumber(ARGV[3])
end
redis.call('SET', KEYS[3], string.format('c:%.3f:%.3f', tonumber(ARGV[1]), td), 'PX', ARGV[6])
return {0, 0}
",
    )
});

/// Undoes one attempt. KEYS: as [`CHARGE`]'s. ARGV: the record's lifetime (ms). Takes back from
/// each TAT what the attempt's record says it added (a TAT no longer ahead of now is deleted:
/// full again) and marks the attempt refunded; with no record, marks it refunded before it lands.
/// Gives 1 when it took something back. Sent as `EVAL` with its text, never `EVALSHA`: a refund
/// whose `NOSCRIPT` answer came after its sender gave up would never be applied.
const REFUND: &str = r"
local a = redis.call('GET', KEYS[3])
if not a then redis.call('SET', KEYS[3], 'r', 'PX', ARGV[1]) return 0 end
local s, tk = string.match(a, '^c:([%d.]+):([%d.]+)$')
if not s then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function back(key, d)
  local tat = tonumber(redis.call('GET', key) or '')
  if not tat or d == 0 then return end
  local new = tat - d
  if new <= now then
    redis.call('DEL', key)
  else
    redis.call('SET', key, string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000) + 1)
  end
end
back(KEYS[1], tonumber(s))
back(KEYS[2], tonumber(tk))
redis.call('SET', KEYS[3], 'r', 'KEEPTTL')
return 1
";

impl Shared {
    /// Charges one sampling ask of `tokens` tokens (none: a call quota) to `key`, once; a charge
    /// that gets no answer in time is refunded, off the request path, on the same connection.
    pub async fn charge(
        &self,
        key: &str,
        sampling: Rate,
        token_rate: Rate,
        tokens: u64,
    ) -> Result<Charged, Unavailable> {
        // One hash tag for all three: the scripts' keys share a slot behind a Redis Cluster.
        let token = crate::state::nonce();
        let keys = [
            format!("sluice:b:{{{key}}}:s"),
            format!("sluice:b:{{{key}}}:t"),
            format!("sluice:b:{{{key}}}:a:{token}"),
        ];
        let got: Result<(i64, i64), Unavailable> = self
            .run("charge", async |c| {
                let mut inv = CHARGE.key(&keys[0]);
                inv.key(&keys[1]).key(&keys[2]);
                inv.arg(sampling.interval_us)
                    .arg(sampling.burst)
                    .arg(token_rate.interval_us)
                    .arg(token_rate.burst)
                    .arg(tokens);
                inv.arg(ATTEMPT_MS).invoke_async(c).await
            })
            .await;
        let (code, wait) = match got {
            Ok(x) => x,
            Err(e) => {
                self.refund(keys);
                return Err(e);
            }
        };
        let wait = wait.max(1) as u64;
        Ok(match code {
            0 => Charged::Ok,
            1 => Charged::Sampling(wait),
            2 => Charged::Tokens(wait),
            3 => Charged::TokensNever,
            // A fresh token is never applied before: Redis answered something else.
            _ => return Err(Unavailable),
        })
    }

    /// Sends [`REFUND`] for an attempt, off the request path: tried again after a lost
    /// connection until it is sent or [`ATTEMPT_MS`] passed; a command that timed out was sent
    /// and lands after the charge (on the same connection), or before it (on a new one after a
    /// lost connection: the charge then finds its attempt refunded and changes nothing).
    fn refund(&self, keys: [String; 3]) {
        let Ok(permit) = self.settling.clone().try_acquire_owned() else {
            tracing::warn!(
                limit = super::single_use::MAX_SETTLING,
                "too many charges settling at once: this one stays counted"
            );
            return;
        };
        let (conn, timeout) = (self.conn.get().cloned(), self.timeout);
        let Some(mut conn) = conn else { return };
        let until = std::time::Instant::now() + Duration::from_millis(ATTEMPT_MS);
        tokio::spawn(async move {
            let mut wait = timeout;
            while std::time::Instant::now() < until {
                let refund = redis::cmd("EVAL")
                    .arg(REFUND)
                    .arg(3)
                    .arg(&keys[..])
                    .arg(ATTEMPT_MS)
                    .to_owned();
                match tokio::time::timeout(timeout, refund.query_async::<i64>(&mut conn)).await {
                    Ok(Ok(_)) | Err(_) => break,
                    Ok(Err(e)) if e.is_timeout() => break,
                    Ok(Err(_)) => {}
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            drop(permit);
        });
    }
}
