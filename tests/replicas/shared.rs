//! What replicas share in Redis: budgets and single use.

use serde_json::json;

use super::harness::{Cluster, Redis, Setup, ALICE, BOB};
use crate::support::call::{self, retry, Call};
use crate::support::peers;

/// Three sampling asks per minute for each principal, whichever replicas serve them.
const BUDGET: &str = "[budget]\nsampling_per_window = 3\nsampling_burst = 3\nwindow_ms = 60000\n\n[bridge]\ngather_ms = 0\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_sampling_budget_is_exact_across_replicas() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).with(BUDGET)).await;
    let http = call::http();
    // Three fresh calls, one sampling ask each: round robin puts them on three replicas.
    let mut owners = Vec::new();
    for i in 0..3 {
        let r = Call::new("ask_once", json!({"text": format!("q{i}")}))
            .id(json!(i))
            .token(ALICE)
            .send(&http, &c.url, json!({}))
            .await;
        owners.push(super::owner_of(&r.state()));
    }
    owners.sort();
    owners.dedup();
    assert!(
        owners.len() >= 2,
        "round robin spread the asks over replicas: {owners:?}"
    );
    // The fourth ask is over Alice's budget on whichever replica it lands (per process she
    // would have had three on each).
    for i in 3..6 {
        let r = Call::new("ask_once", json!({"text": format!("q{i}")}))
            .id(json!(i))
            .token(ALICE)
            .send(&http, &c.url, json!({}))
            .await;
        assert_eq!(
            (r.status, r.msg["error"]["code"].as_i64()),
            (429, Some(-31012)),
            "ask {i} is over the shared budget: {}",
            r.msg
        );
        assert!(
            r.msg["error"]["data"]["retryAfterMs"]
                .as_u64()
                .is_some_and(|ms| ms > 0 && ms <= 20_000),
            "{}",
            r.msg
        );
    }
    // Bob's budget is his own.
    let r = Call::new("ask_once", json!({"text": "b"}))
        .token(BOB)
        .send(&http, &c.url, json!({}))
        .await;
    r.state();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_consumed_once_across_replicas() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/policies/default.toml");
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).top(&format!("policies = [\"{policy}\"]")),
    )
    .await;
    let http = call::http();
    let erase = Call::new("erase", json!({"what": "the disk"})).token(ALICE);
    // The destructive tool needs an approval round first (Sluice's own, stateless).
    let first = erase.send(&http, &c.url, json!({})).await;
    let state = first.state();
    assert!(
        first.input_requests().contains_key("sluice_approval"),
        "{}",
        first.msg
    );
    let approve = json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}});
    // Approved on the next replica: the call runs once.
    let done = erase
        .send(&http, &c.url, retry(approve.clone(), &state))
        .await;
    assert_eq!(done.text(), "erased the disk");
    // The same approval again, on each of the other replicas in turn: consumed already.
    for _ in 0..3 {
        let replay = erase
            .send(&http, &c.url, retry(approve.clone(), &state))
            .await;
        replay.refused_for("unknown_exchange");
    }
    let recs = super::audit_until(&c, "the approved call and its replays", |r| {
        r.iter()
            .filter(|x| x["method"] == "tools/call" && x["name"] == "erase")
            .count()
            >= 5
    })
    .await;
    let replicas: std::collections::BTreeSet<&str> = recs
        .iter()
        .filter(|x| x["name"] == "erase")
        .filter_map(|x| x["replica"].as_str())
        .collect();
    assert_eq!(
        replicas.len(),
        3,
        "the approval and its replays were tried on every replica: {replicas:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_quota_is_counted_across_replicas() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let quota = "[[quota]]\nname = \"erase-twice\"\ntool = [\"erase\"]\ncalls_per_window = 2\nwindow_ms = 60000\n";
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).with(quota)).await;
    let http = call::http();
    for i in 0..2 {
        let r = Call::new("erase", json!({"what": format!("f{i}")}))
            .token(ALICE)
            .send(&http, &c.url, json!({}))
            .await;
        assert_eq!(r.text(), format!("erased f{i}"));
    }
    // Two calls on two replicas spent the quota on all three.
    for _ in 0..3 {
        let r = Call::new("erase", json!({"what": "more"}))
            .token(ALICE)
            .send(&http, &c.url, json!({}))
            .await;
        assert_eq!(
            (r.status, r.msg["error"]["code"].as_i64()),
            (429, Some(-31017)),
            "{}",
            r.msg
        );
        assert_eq!(r.msg["error"]["data"]["quota"], "erase-twice", "{}", r.msg);
    }
    let r = Call::new("erase", json!({"what": "b"}))
        .token(BOB)
        .send(&http, &c.url, json!({}))
        .await;
    assert_eq!(
        r.text(),
        "erased b",
        "another principal's quota is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principals_parked_exchanges_are_capped_across_replicas() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url)
            .with("[budget]\nmax_parked_per_principal = 2\n\n[bridge]\ngather_ms = 0\n"),
    )
    .await;
    let http = call::http();
    let ask = |i: u32| {
        Call::new("ask_once", json!({"text": format!("p{i}")}))
            .id(json!(i))
            .token(ALICE)
    };
    // Two parked on two replicas; the third replica refuses the third (it holds none itself).
    let first = ask(0).send(&http, &c.url, json!({})).await;
    ask(1).send(&http, &c.url, json!({})).await.state();
    let third = ask(2).send(&http, &c.url, json!({})).await;
    assert_eq!(third.refused(-31011)["perPrincipal"], true, "{}", third.msg);
    // Answering one gives its place back, across replicas.
    let key = first
        .input_requests()
        .keys()
        .next()
        .expect("an ask")
        .clone();
    let done = ask(0)
        .send(
            &http,
            &c.url,
            retry(
                json!({ key: crate::support::call::sample("a", "m") }),
                &first.state(),
            ),
        )
        .await;
    done.text();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let again = ask(3).send(&http, &c.url, json!({})).await;
        if again.status == 200 {
            again.state();
            break;
        }
        // The place is given back off the request path: at most a moment later.
        assert_eq!(again.msg["error"]["code"], -31011, "{}", again.msg);
        assert!(
            std::time::Instant::now() < deadline,
            "the answered exchange's place came back within 5 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let b = Call::new("ask_once", json!({"text": "b"}))
        .token(BOB)
        .send(&http, &c.url, json!({}))
        .await;
    b.state();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_are_counted_across_replicas() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let breaker = "[loop_breaker]\nmax_identical_calls = 2\nwindow_ms = 60000\n";
    let c = Cluster::start(&redis, &Setup::legacy(&py.url).with(breaker)).await;
    let http = call::http();
    let erase = |who: &'static str| {
        let (http, url) = (http.clone(), c.url.clone());
        async move {
            Call::new("erase", json!({"what": "same"}))
                .token(who)
                .send(&http, &url, json!({}))
                .await
        }
    };
    for _ in 0..2 {
        assert_eq!(erase(ALICE).await.text(), "erased same");
    }
    // Two identical calls on two replicas spent the limit on all three.
    for _ in 0..3 {
        let r = erase(ALICE).await;
        assert_eq!(
            (r.status, r.msg["error"]["code"].as_i64()),
            (429, Some(-31021)),
            "{}",
            r.msg
        );
        assert_eq!(r.msg["error"]["data"]["tool"], "erase", "{}", r.msg);
    }
    assert_eq!(
        erase(BOB).await.text(),
        "erased same",
        "another principal's count is apart"
    );
}
