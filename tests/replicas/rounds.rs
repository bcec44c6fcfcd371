//! Continuations that reach another replica than the one holding them.

use serde_json::json;

use super::harness::{Cluster, Redis, Setup, ALICE};
use crate::support::call::{self, retry, sample, Call};
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_a_round_completes_though_each_request_lands_on_another_replica() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).with("[bridge]\ngather_ms = 0\n"),
    )
    .await;
    let http = call::http();
    let two = Call::new(
        "two_rounds",
        json!({"topic": "replicas", "tag": "cluster-two-rounds"}),
    )
    .token(ALICE);
    let r1 = two.send(&http, &c.url, json!({})).await;
    let owner = super::owner_of(&r1.state());
    let asked = r1.input_requests().keys().next().expect("one ask").clone();
    let r2 = two
        .send(
            &http,
            &c.url,
            retry(json!({ asked: sample("src/main.rs", "m") }), &r1.state()),
        )
        .await;
    assert_eq!(
        super::owner_of(&r2.state()),
        owner,
        "the exchange stays parked where it started"
    );
    let asked = r2.input_requests().keys().next().expect("one ask").clone();
    let done = two
        .send(
            &http,
            &c.url,
            retry(json!({ asked: sample("a summary", "m") }), &r2.state()),
        )
        .await;
    assert_eq!(
        done.text(),
        "two_rounds[replicas] first: src/main.rs (model=m) | second: a summary (model=m)"
    );
    // The two retries came to the other replicas, which forwarded them to the owner and
    // wrote their audit records naming it; the owner wrote one for each forward it served,
    // naming the replica the client talked to.
    let recs = super::audit_until(&c, "five records of the call", |r| {
        r.iter().filter(|x| x["name"] == "two_rounds").count() >= 5
    })
    .await;
    let calls: Vec<_> = recs
        .iter()
        .filter(|x| x["name"] == "two_rounds" && x.get("forwarded_from").is_none())
        .collect();
    assert_eq!(
        calls.len(),
        3,
        "one record per client request, once: {calls:#?}"
    );
    let forwarded: Vec<_> = calls
        .iter()
        .filter(|x| x["owner"] == owner.as_str())
        .collect();
    assert_eq!(
        forwarded.len(),
        2,
        "both retries were forwarded to {owner}: {calls:#?}"
    );
    assert!(
        forwarded.iter().all(|x| x["replica"] != owner.as_str()),
        "{calls:#?}"
    );
    let served: Vec<_> = recs
        .iter()
        .filter(|x| x["name"] == "two_rounds" && x.get("forwarded_from").is_some())
        .collect();
    assert_eq!(
        served.len(),
        2,
        "the owner audited each forward it served: {served:#?}"
    );
    for s in &served {
        assert_eq!(s["replica"], owner.as_str(), "{s}");
        assert!(
            forwarded
                .iter()
                .any(|f| f["replica"] == s["forwarded_from"]),
            "it names the entry replica: {s}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_11_25_clients_sampling_round_goes_through_bridge_b_across_replicas() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).with("[bridge]\ngather_ms = 0\n"),
    )
    .await;
    // The SDK client: initialize, ping, setLevel, tools/list, then a call that samples. Each
    // request (its answer to Sluice's sampling request included) lands on the next replica.
    let plan = json!({"url": c.url, "token": ALICE, "calls": [
        {"name": "ask_once", "arguments": {"text": "across"}, "expect": ["ask_once[across] via post: ECHO1[question across]"]},
        {"name": "two_rounds", "arguments": {"topic": "t"}, "expect": ["first: ECHO1[pick files for t]"]},
    ]});
    let run = peers::py1_client(&plan).await;
    assert!(
        run.success,
        "the 2025-11-25 client's calls through three replicas:\n{}",
        run.transcript
    );
    let recs = super::audit_until(
        &c,
        "the legacy client's requests on several replicas",
        |r| {
            r.iter()
                .filter(|x| x["client_era"] == "legacy")
                .filter_map(|x| x["replica"].as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                >= 2
        },
    )
    .await;
    assert!(
        recs.iter()
            .any(|x| x["client_era"] == "legacy" && x["method"] == "tools/call"),
        "{recs:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_11_25_session_is_served_by_every_replica_and_ended_on_all_by_one_delete() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url)).await;
    let mut client = crate::support::legacy_client::Legacy::new(&c.url).token(ALICE);
    client.initialize(json!({"sampling": {}})).await;
    // Each ping lands on the next replica: every one serves the session.
    for i in 1..=3 {
        let (status, msg) = client.call(i, "ping", json!({})).await;
        assert_eq!((status, &msg["result"]), (200, &json!({})), "{msg}");
    }
    // Bob cannot use Alice's session on any replica.
    let bob = client
        .with_session(&client.sid())
        .token(super::harness::BOB);
    for i in 4..=6 {
        assert_eq!(
            bob.call(i, "ping", json!({})).await.0,
            404,
            "another principal's session"
        );
    }
    // One DELETE, on whichever replica: the session is gone on every one.
    assert_eq!(client.delete().await.status(), 200);
    for i in 7..=9 {
        assert_eq!(
            client.call(i, "ping", json!({})).await.0,
            404,
            "the session ended on every replica"
        );
    }
}
