//! Redis stalled (SIGSTOP) past `redis_timeout_ms` while a state's single use is claimed: the
//! claim is applied when Redis resumes, yet the client, told to retry (`-31019`), gets its
//! retry served, once, on whichever replica it lands; a replay after that is refused.

use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{Cluster, Redis, Setup, ALICE};
use crate::support::call::{self, retry, Call};
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_whose_claim_timed_out_in_a_redis_stall_is_used_once_by_its_retry() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/default.toml");
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).top(&format!("policies = [\"{policy}\"]"))).await;
    let http = call::http();
    let tag = format!("stall-{}", std::process::id());
    let erase = Call::new("erase", json!({"what": "the stalled disk", "tag": tag})).token(ALICE);
    // The destructive tool needs an approval round first: its state is single use.
    let state = erase.send(&http, &c.url, json!({})).await.state();
    let approve = retry(json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}}), &state);
    // Redis stalls: the claim waits in its socket past redis_timeout_ms (300 ms); the client is
    // told to retry.
    redis.pause().await;
    let resp = erase.request(&http, &c.url, approve.clone()).send().await.expect("POST");
    let status = resp.status().as_u16();
    let after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap_or_default().to_owned());
    let msg: serde_json::Value = resp.json().await.expect("JSON");
    redis.resume().await;
    assert_eq!((status, msg["error"]["code"].as_i64(), after.as_deref()), (503, Some(-31019), Some("1")), "{msg}");
    assert!(py.events(&tag).is_empty(), "nothing ran while Redis stalled: {:?}", py.events(&tag));
    // Redis resumed and applied that claim. The client retries the same round (as told, while
    // it is told so): served once, wherever it lands.
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let r = erase.send(&http, &c.url, approve.clone()).await;
        if r.status != 503 {
            break r;
        }
        assert_eq!(r.msg["error"]["code"], -31019, "{}", r.msg);
        assert!(Instant::now() < deadline, "the retry was still told to retry after 10 s: {}", r.msg);
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done.text(), "erased the stalled disk", "the client's retry of the round is served");
    // Replayed on each replica in turn: used.
    for _ in 0..3 {
        erase.send(&http, &c.url, approve.clone()).await.refused_for("unknown_exchange");
    }
    let ran = py.wait_event(&tag, "done").await;
    assert_eq!(ran.iter().filter(|e| *e == "start").count(), 1, "the call ran exactly once: {ran:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_used_once_settling_while_pending_and_usable_again_once_released() {
    use sluice::cluster::shared::{Consumed, TimedOut};
    let redis = Redis::start().await;
    // Two replicas' handles on one Redis.
    let (a, b) = (
        sluice::cluster::Shared::new(&redis.url(), Duration::from_secs(2)).unwrap(),
        sluice::cluster::Shared::new(&redis.url(), Duration::from_secs(2)).unwrap(),
    );
    let mut conn = redis::Client::open(redis.url()).unwrap().get_connection().expect("redis");
    let get = |conn: &mut redis::Connection, k: &str| -> Option<String> { redis::cmd("GET").arg(k).query(conn).unwrap() };
    let set =
        |conn: &mut redis::Connection, k: &str, v: &str| redis::cmd("SET").arg(k).arg(v).arg("PX").arg(60_000).query::<()>(conn).unwrap();
    let now = sluice::state::now_ms();
    let (until, release) = (now + 60_000, TimedOut::Release);
    // Claimed in time: the first use; confirmed (off the request path), then used everywhere.
    assert_eq!(a.consume("n1", until, now, release).await, Ok(Consumed::First));
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(&mut conn, "sluice:n:n1").as_deref() != Some("u") {
        assert!(Instant::now() < deadline, "the claim was not confirmed: {:?}", get(&mut conn, "sluice:n:n1"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(b.consume("n1", until, now, release).await, Ok(Consumed::Used));
    assert_eq!(a.consume("n1", until, now, release).await, Ok(Consumed::Used));
    // Another attempt's claim, just applied and not settled: retry.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    set(&mut conn, "sluice:n:n2", &format!("p:other:{}", secs * 1000 + micros / 1000));
    assert_eq!(b.consume("n2", until, now, release).await, Ok(Consumed::Settling));
    // Released by the replica that gave up on it: usable again, once.
    set(&mut conn, "sluice:n:n2", "free:other");
    assert_eq!(b.consume("n2", until, now, release).await, Ok(Consumed::First));
    // Until its confirmation lands another replica is told to retry (settling), then used.
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(&mut conn, "sluice:n:n2").as_deref() != Some("u") {
        assert!(Instant::now() < deadline, "the claim was not confirmed: {:?}", get(&mut conn, "sluice:n:n2"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(a.consume("n2", until, now, release).await, Ok(Consumed::Used));
    // A claim left pending past the lease (its replica died): used, never a second use.
    set(&mut conn, "sluice:n:n3", "p:other:1000");
    assert_eq!(b.consume("n3", until, now, release).await, Ok(Consumed::Used));
}
