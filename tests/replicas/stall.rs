//! Redis stalled (SIGSTOP) past `redis_timeout_ms`: what a replica sent is applied when Redis
//! resumes, after the replica gave up on it and told its client to retry (`-31019`).
//!
//! - a state's single-use claim: the client's retry is served once, on whichever replica it
//!   lands; a replay after that is refused;
//! - a call quota's charge and a sampling budget's charge: refunded by the replica that gave up
//!   on them (behind them, on the same connection), so the client's retry gets the quota's or
//!   the budget's last place and the next call is refused, on every replica; a charge undone
//!   takes back exactly what it added.

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
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).top(&format!("policies = [\"{policy}\"]")),
    )
    .await;
    let http = call::http();
    let tag = format!("stall-{}", std::process::id());
    let erase = Call::new("erase", json!({"what": "the stalled disk", "tag": tag})).token(ALICE);
    // The destructive tool needs an approval round first: its state is single use.
    let state = erase.send(&http, &c.url, json!({})).await.state();
    let approve = retry(
        json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}}),
        &state,
    );
    // Redis stalls: the claim waits in its socket past redis_timeout_ms (300 ms); the client is
    // told to retry.
    redis.pause().await;
    let resp = erase
        .request(&http, &c.url, approve.clone())
        .send()
        .await
        .expect("POST");
    let status = resp.status().as_u16();
    let after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let msg: serde_json::Value = resp.json().await.expect("JSON");
    redis.resume().await;
    assert_eq!(
        (status, msg["error"]["code"].as_i64(), after.as_deref()),
        (503, Some(-31019), Some("1")),
        "{msg}"
    );
    assert!(
        py.events(&tag).is_empty(),
        "nothing ran while Redis stalled: {:?}",
        py.events(&tag)
    );
    // Redis resumed and applied that claim. The client retries the same round (as told, while
    // it is told so): served once, wherever it lands.
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        let r = erase.send(&http, &c.url, approve.clone()).await;
        if r.status != 503 {
            break r;
        }
        assert_eq!(r.msg["error"]["code"], -31019, "{}", r.msg);
        assert!(
            Instant::now() < deadline,
            "the retry was still told to retry after 10 s: {}",
            r.msg
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        done.text(),
        "erased the stalled disk",
        "the client's retry of the round is served"
    );
    // Replayed on each replica in turn: used.
    for _ in 0..3 {
        erase
            .send(&http, &c.url, approve.clone())
            .await
            .refused_for("unknown_exchange");
    }
    let ran = py.wait_event(&tag, "done").await;
    assert_eq!(
        ran.iter().filter(|e| *e == "start").count(),
        1,
        "the call ran exactly once: {ran:?}"
    );
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
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .expect("redis");
    let get = |conn: &mut redis::Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(conn).unwrap()
    };
    let set = |conn: &mut redis::Connection, k: &str, v: &str| {
        redis::cmd("SET")
            .arg(k)
            .arg(v)
            .arg("PX")
            .arg(60_000)
            .query::<()>(conn)
            .unwrap()
    };
    let now = sluice::state::now_ms();
    let (until, release) = (now + 60_000, TimedOut::Release);
    // Claimed in time: the first use; confirmed (off the request path), then used everywhere.
    assert_eq!(
        a.consume("n1", until, now, release).await,
        Ok(Consumed::First)
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(&mut conn, "sluice:n:n1").as_deref() != Some("u") {
        assert!(
            Instant::now() < deadline,
            "the claim was not confirmed: {:?}",
            get(&mut conn, "sluice:n:n1")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        b.consume("n1", until, now, release).await,
        Ok(Consumed::Used)
    );
    assert_eq!(
        a.consume("n1", until, now, release).await,
        Ok(Consumed::Used)
    );
    // Another attempt's claim, just applied and not settled: retry.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
    set(
        &mut conn,
        "sluice:n:n2",
        &format!("p:other:{}", secs * 1000 + micros / 1000),
    );
    assert_eq!(
        b.consume("n2", until, now, release).await,
        Ok(Consumed::Settling)
    );
    // Released by the replica that gave up on it: usable again, once.
    set(&mut conn, "sluice:n:n2", "free:other");
    assert_eq!(
        b.consume("n2", until, now, release).await,
        Ok(Consumed::First)
    );
    // Until its confirmation lands another replica is told to retry (settling), then used.
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(&mut conn, "sluice:n:n2").as_deref() != Some("u") {
        assert!(
            Instant::now() < deadline,
            "the claim was not confirmed: {:?}",
            get(&mut conn, "sluice:n:n2")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        a.consume("n2", until, now, release).await,
        Ok(Consumed::Used)
    );
    // A claim left pending past the lease (its replica died): used, never a second use.
    set(&mut conn, "sluice:n:n3", "p:other:1000");
    assert_eq!(
        b.consume("n3", until, now, release).await,
        Ok(Consumed::Used)
    );
}

/// Sends `call` while the answer is "retry shortly" (`-31019`: Redis was away), at most 10 s;
/// gives the first other answer.
async fn until_served(
    call: &Call,
    http: &reqwest::Client,
    url: &str,
) -> crate::support::call::Reply {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = call.send(http, url, json!({})).await;
        if r.status != 503 {
            return r;
        }
        assert_eq!(r.msg["error"]["code"], -31019, "{}", r.msg);
        assert!(
            Instant::now() < deadline,
            "the retry was still told to retry after 10 s: {}",
            r.msg
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `call`, sent while Redis is stalled (SIGSTOP): refused as retryable (503 `-31019`), Redis
/// resumed (SIGCONT) once the answer is in.
async fn stalled(redis: &Redis, call: &Call, http: &reqwest::Client, url: &str) {
    redis.pause().await;
    let r = call.send(http, url, json!({})).await;
    redis.resume().await;
    assert_eq!(
        (r.status, r.msg["error"]["code"].as_i64()),
        (503, Some(-31019)),
        "refused while Redis stalled: {}",
        r.msg
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_charge_that_timed_out_in_a_redis_stall_leaves_the_quota_to_its_retry() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let quota = "[[quota]]\nname = \"twice-an-hour\"\ntool = [\"erase\"]\ncalls_per_window = 2\nburst = 2\nwindow_ms = 3600000\n";
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).with(quota)).await;
    let http = call::http();
    let tag = format!("quota-stall-{}", std::process::id());
    let erase = Call::new("erase", json!({"what": "once", "tag": tag})).token(ALICE);
    // The quota's first call, served (Redis has its charge script from then on).
    let first = Call::new(
        "erase",
        json!({"what": "first", "tag": format!("{tag}-first")}),
    )
    .token(ALICE);
    assert_eq!(
        first.send(&http, &c.url, json!({})).await.text(),
        "erased first"
    );
    // The second call's charge waits in Redis's socket past redis_timeout_ms and is applied when
    // Redis resumes; the client was told to retry, and its retry is the quota's second call.
    stalled(&redis, &erase, &http, &c.url).await;
    assert!(
        py.events(&tag).is_empty(),
        "nothing ran while Redis stalled: {:?}",
        py.events(&tag)
    );
    assert_eq!(
        until_served(&erase, &http, &c.url).await.text(),
        "erased once",
        "the retry is served"
    );
    // The quota counts those two calls, on every replica.
    for _ in 0..3 {
        let r = erase.send(&http, &c.url, json!({})).await;
        assert_eq!(
            (r.status, r.msg["error"]["code"].as_i64()),
            (429, Some(-31017)),
            "{}",
            r.msg
        );
    }
    let ran = py.wait_event(&tag, "done").await;
    assert_eq!(
        ran.iter().filter(|e| *e == "start").count(),
        1,
        "the stalled call ran once, as its retry: {ran:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_charge_that_timed_out_in_a_redis_stall_leaves_the_budget_to_its_retry() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let budget = "[budget]\nsampling_per_window = 2\nsampling_burst = 2\nwindow_ms = 3600000\n\n[bridge]\ngather_ms = 0\n";
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).with(budget)).await;
    let http = call::http();
    // The budget's first ask, charged (Redis has the charge script from then on).
    Call::new("ask_once", json!({"text": "first"}))
        .id(json!(9))
        .token(ALICE)
        .send(&http, &c.url, json!({}))
        .await
        .state();
    // The upstream's second ask is charged while Redis stalls: the call is refused as
    // retryable, and its retry gets the budget's second ask (a round to answer).
    let ask = Call::new("ask_once", json!({"text": "stalled"})).token(ALICE);
    stalled(&redis, &ask, &http, &c.url).await;
    until_served(&ask, &http, &c.url).await.state();
    // The budget counts those two asks, on every replica.
    for i in 0..3 {
        let r = Call::new("ask_once", json!({"text": format!("over{i}")}))
            .id(json!(i + 2))
            .token(ALICE)
            .send(&http, &c.url, json!({}))
            .await;
        assert_eq!(
            (r.status, r.msg["error"]["code"].as_i64()),
            (429, Some(-31012)),
            "{}",
            r.msg
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_that_timed_out_is_undone_exactly_and_others_are_kept() {
    use sluice::cluster::{Charged, Rate};
    let redis = Redis::start().await;
    let shared = sluice::cluster::Shared::new(&redis.url(), Duration::from_millis(300)).unwrap();
    // Four asks an hour, and 350 tokens.
    let (asks, tokens) = (
        Rate {
            interval_us: 9e8,
            burst: 4,
        },
        Rate {
            interval_us: 3.6e9 / 350.0,
            burst: 350,
        },
    );
    let charge = |n: u64| shared.charge("alice", asks, tokens, n);
    assert_eq!(charge(100).await, Ok(Charged::Ok));
    redis.pause().await;
    let late = charge(100).await;
    redis.resume().await;
    assert!(
        late.is_err(),
        "the charge got no answer within redis_timeout_ms: {late:?}"
    );
    // Applied on resume, then undone by its refund (sent behind it on the same connection):
    // its attempt's record says refunded.
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .expect("redis");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempts: Vec<String> = redis::cmd("KEYS")
            .arg("sluice:b:{alice}:a:*")
            .query(&mut conn)
            .unwrap();
        let values: Vec<Option<String>> = attempts
            .iter()
            .map(|k| redis::cmd("GET").arg(k).query(&mut conn).unwrap())
            .collect();
        if values.iter().any(|v| v.as_deref() == Some("r")) {
            assert_eq!(values.len(), 2, "one record per attempt: {values:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the timed-out charge was not refunded: {values:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // What is left is there, and only that (the charge before the stall is kept).
    assert_eq!(charge(100).await, Ok(Charged::Ok));
    assert_eq!(charge(100).await, Ok(Charged::Ok));
    assert!(
        matches!(charge(100).await, Ok(Charged::Tokens(_))),
        "300 of 350 tokens are spent"
    );
    assert_eq!(
        charge(50).await,
        Ok(Charged::Ok),
        "the last 50 tokens and the fourth ask"
    );
    assert!(
        matches!(charge(0).await, Ok(Charged::Sampling(_))),
        "four asks are spent"
    );
}
