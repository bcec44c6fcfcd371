//! Single use of a sealed state across replicas, with a retry that can succeed after a timeout.
//!
//! A plain `SET NX` that outlasts `redis_timeout_ms` is still applied when Redis resumes: the
//! client, told to retry (`-31019`), then found its state used by an attempt that never ran.
//! So a use is claimed by an attempt, under a token fresh for that attempt, in one script:
//! `p:<token>:<Redis ms>` (pending). The replica that got the claim's answer in time goes on
//! and confirms it (`u`, used); the replica whose claim timed out gave up, never goes on, and
//! sends `release` at once on the same connection (ordered after the claim, wherever it is):
//! `free:<token>`, unused again, so the client's retry of the same state, on any replica,
//! claims it once and a third try finds it used. Nobody but the replica that made an attempt
//! knows whether it ran (a retry and a replay are the same bytes), so that replica says it.
//!
//! Takes a state's nonce and expiry; gives [`Consumed`]: the first use, used already, or
//! settling (a claim younger than [`LEASE_MS`] neither confirmed nor released: answered as
//! retryable). Refuses nothing itself: a claim without an answer in time is [`Unavailable`].
//! A claim left pending past [`LEASE_MS`] (its replica died between claim and confirm or
//! release) counts as used: never a second use, at worst a client told to start again.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use super::{Shared, Unavailable};

/// How long a claim may stay pending before it counts as used.
pub const LEASE_MS: u64 = 10_000;
/// The most settle tasks (a confirm or a release sent after a timeout) at once; past it the
/// claim is left to [`LEASE_MS`].
pub(super) const MAX_SETTLING: usize = 4096;

/// KEYS: the nonce's key. ARGV: the attempt's token, the state's time left (ms), the lease
/// (ms). Gives 1 (claimed), 0 (used, or this attempt was released before it landed), 2
/// (another attempt's claim is pending: retry).
static CLAIM: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if v == 'free:' .. ARGV[1] then return 0 end
if v and string.sub(v, 1, 5) ~= 'free:' then
  local at = string.match(v, '^p:[^:]*:(%d+)$')
  if at and now - tonumber(at) < tonumber(ARGV[3]) then return 2 end
  return 0
end
redis.call('SET', KEYS[1], 'p:' .. ARGV[1] .. ':' .. now, 'PX', ARGV[2])
return 1
",
    )
});

/// KEYS: the nonce's key. ARGV: the token, `u` (confirm) or `free` (release), the state's time
/// left (ms). Turns this attempt's pending claim into used, or into released; a release also
/// writes `free:<token>` where nothing is yet (its claim may still land: it will find it
/// released). Gives 1 when it changed something. Sent as `EVAL` with its text, never `EVALSHA`:
/// a settle sent while Redis stalls, whose `NOSCRIPT` answer came after its sender gave up (Redis
/// started again, its scripts gone), would never be applied.
const SETTLE: &str = r"
local v = redis.call('GET', KEYS[1])
local mine = v and string.sub(v, 1, #ARGV[1] + 3) == 'p:' .. ARGV[1] .. ':'
if ARGV[2] == 'u' then
  if mine then redis.call('SET', KEYS[1], 'u', 'KEEPTTL') return 1 end
  return 0
end
if mine or not v then redis.call('SET', KEYS[1], 'free:' .. ARGV[1], 'PX', ARGV[3]) return 1 end
return 0
";

/// What claiming a state's single use found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumed {
    /// This is its first use, on every replica.
    First,
    /// It was used (or its claim outlived the lease unsettled).
    Used,
    /// An earlier attempt's claim is not settled yet (it timed out, its release is on the
    /// way): retry shortly.
    Settling,
}

/// What becomes of a claim that got no answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimedOut {
    /// The request is refused (`on_redis_error = "closed"`): the claim is released.
    Release,
    /// The request goes on (`"local"`): the claim is confirmed.
    Confirm,
}

fn key(nonce: &str) -> String {
    format!("sluice:n:{nonce}")
}

impl Shared {
    /// Claims the single use of the state with `nonce` (expiring at `expires_ms`); a claim that
    /// gets no answer within the timeout is settled as `timed_out` says, off the request path.
    pub async fn consume(
        &self,
        nonce: &str,
        expires_ms: u64,
        now_ms: u64,
        timed_out: TimedOut,
    ) -> Result<Consumed, Unavailable> {
        let ttl = expires_ms.saturating_sub(now_ms).max(1);
        let (k, token) = (key(nonce), crate::state::nonce());
        let got: Result<i64, Unavailable> = self
            .run("consume", async |c| {
                CLAIM
                    .key(&k)
                    .arg(&token)
                    .arg(ttl)
                    .arg(LEASE_MS)
                    .invoke_async(c)
                    .await
            })
            .await;
        match got {
            Ok(1) => {
                self.settle(k, token, "u", expires_ms);
                Ok(Consumed::First)
            }
            Ok(2) => Ok(Consumed::Settling),
            Ok(_) => Ok(Consumed::Used),
            Err(e) => {
                self.settle(
                    k,
                    token,
                    if timed_out == TimedOut::Release {
                        "free"
                    } else {
                        "u"
                    },
                    expires_ms,
                );
                Err(e)
            }
        }
    }

    /// Sends a confirm (`u`) or a release (`free`) of the attempt `token`, off the request path:
    /// tried again after a lost connection until it is sent or the state expires; a command
    /// that timed out was sent (the connection is kept) and lands after the claim.
    fn settle(&self, k: String, token: String, how: &'static str, expires_ms: u64) {
        let Ok(permit) = self.settling.clone().try_acquire_owned() else {
            tracing::warn!(
                limit = MAX_SETTLING,
                "too many single-use claims settling at once: this one is left to its lease"
            );
            return;
        };
        let (conn, timeout) = (self.conn.get().cloned(), self.timeout);
        let Some(mut conn) = conn else { return };
        tokio::spawn(async move {
            let mut wait = timeout;
            loop {
                let left = expires_ms.saturating_sub(crate::state::now_ms());
                if left == 0 {
                    break;
                }
                let settle = redis::cmd("EVAL")
                    .arg(SETTLE)
                    .arg(1)
                    .arg(&k)
                    .arg(&token)
                    .arg(how)
                    .arg(left)
                    .to_owned();
                match tokio::time::timeout(timeout, settle.query_async::<i64>(&mut conn)).await {
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

/// The bound on settle tasks, for [`Shared::new`].
pub(super) fn settling() -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(MAX_SETTLING))
}
