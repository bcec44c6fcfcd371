//! The trust boundary between replicas, and the text peers choose: the internal listener serves
//! only a continuation its replica owns, even to a forward signed with the cluster's own keys
//! (and audits what it serves, naming the replica the client talked to); a replica name a
//! client wrote into an answer id is checked against `cluster.id`'s grammar before it is used,
//! and no peer text forges a line in a replica's log.

use serde_json::json;

use super::harness::{keys, Cluster, Redis, Setup, ALICE};
use super::internal::{call_headers, signed, who};
use crate::support::call::{self, retry, sample, Call};
use crate::support::peers;

/// What a forged line would start with (a time no real line of the run can carry).
const FORGED: &str = "1999-12-31T23:59:59.999999Z ERROR sluice: principal=admin granted root";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_signed_with_the_cluster_key_runs_only_a_continuation_its_replica_owns() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).with("[bridge]\ngather_ms = 0\n"),
    )
    .await;
    let (http, post) = (call::http(), http::Method::POST);
    // Alice's round, parked on its owner.
    let ask = Call::new("ask_once", json!({"text": "mine"})).token(ALICE);
    let round = ask.send(&http, &c.url, json!({})).await;
    let owner = super::owner_of(&round.state());
    let (o, other) = (Cluster::index(&owner), (Cluster::index(&owner) + 1) % 3);
    let other_id = format!("r{}", other + 1);
    let forward = |to: usize, p: &sluice::auth::Principal, name: &str, body: &str| {
        let hs = call_headers(name);
        let mcp: Vec<(&str, &str)> = hs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let to_id = format!("r{}", to + 1);
        http.post(c.internal_url(to))
            .headers(signed(
                &keys(),
                ("r9", &to_id),
                &post,
                p,
                &mcp,
                body.as_bytes(),
            ))
            .body(body.to_owned())
            .send()
    };
    // A fresh tools/call as another principal in another group, signed with the right key:
    // refused before the body is dispatched, so the upstream never hears of it.
    let tag = format!("forged-erase-{}", std::process::id());
    let erase = Call::new("erase", json!({"what": "everything", "tag": tag}))
        .body(json!({}))
        .to_string();
    let r = forward(o, &who("bob", &["admin"]), "erase", &erase)
        .await
        .expect("POST");
    assert_eq!(
        r.status(),
        403,
        "a fresh call is no continuation: {}",
        r.text().await.unwrap_or_default()
    );
    assert!(
        py.events(&tag).is_empty(),
        "the forged call reached the upstream: {:?}",
        py.events(&tag)
    );
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": crate::support::client::meta()}});
    let r = forward(o, &who("alice", &[]), "tools/list", &list.to_string())
        .await
        .expect("POST");
    assert_eq!(r.status(), 403, "a fresh list is no continuation either");
    // Alice's own state, forwarded for bob, for alice in a group she is not in, or to a replica
    // that does not own it: refused, and it stays usable.
    let key = round
        .input_requests()
        .keys()
        .next()
        .expect("an ask")
        .clone();
    let cont = ask
        .body(retry(
            json!({ key.clone(): sample("ok", "m") }),
            &round.state(),
        ))
        .to_string();
    for (to, p, what) in [
        (o, who("bob", &[]), "another principal"),
        (o, who("alice", &["admin"]), "other groups"),
        (other, who("alice", &[]), "not its owner"),
    ] {
        let r = forward(to, &p, "ask_once", &cont).await.expect("POST");
        assert_eq!(r.status(), 403, "alice's continuation forwarded for {what}");
    }
    // An answer to another replica's request (bridge B), a 2025-11-25 request, and an array
    // (an answer's fields in order, naming the owner; a batch): refused.
    let legacy = [
        ("mcp-protocol-version", "2025-11-25"),
        ("mcp-session-id", "s2.any"),
    ];
    for body in [
        json!({"jsonrpc": "2.0", "id": format!("sluice-{other_id}-1"), "result": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
        json!(["2.0", format!("sluice-{owner}-1"), null, {}, null]),
        json!([{"jsonrpc": "2.0", "id": format!("sluice-{owner}-1"), "result": {}}]),
    ] {
        let h = signed(
            &keys(),
            ("r9", &owner),
            &post,
            &who("alice", &[]),
            &legacy,
            body.to_string().as_bytes(),
        );
        let r = http
            .post(c.internal_url(o))
            .headers(h)
            .body(body.to_string())
            .send()
            .await
            .expect("POST");
        assert_eq!(r.status(), 403, "{body}");
    }
    // The genuine continuation, sent to a replica that does not own it: forwarded and served.
    let done = ask
        .send(
            &http,
            &c.replica(other).url(),
            retry(json!({ key: sample("ok", "m") }), &round.state()),
        )
        .await;
    assert_eq!(done.text(), "ask_once[mine] via post: ok (model=m)");
    // The owner audited what it served, naming the entry replica, and what it refused.
    // Both records: the owner's and the entry replica's (each written when its side ends).
    let recs = super::audit_until(
        &c,
        "the owner's and the entry's records of the forward",
        |r| {
            r.iter().any(|x| {
                x["forwarded_from"] == other_id.as_str()
                    && x["name"] == "ask_once"
                    && x["status"] == 200
            }) && r
                .iter()
                .any(|x| x["replica"] == other_id.as_str() && x["owner"] == owner.as_str())
        },
    )
    .await;
    let served: Vec<_> = recs
        .iter()
        .filter(|x| x["forwarded_from"] == other_id.as_str())
        .collect();
    assert_eq!(served.len(), 1, "{served:#?}");
    assert_eq!(
        (
            &served[0]["replica"],
            &served[0]["principal"],
            &served[0]["method"]
        ),
        (&json!(owner), &json!("alice"), &json!("tools/call"))
    );
    let entry = recs
        .iter()
        .filter(|x| x["replica"] == other_id.as_str() && x["owner"] == owner.as_str())
        .count();
    assert_eq!(
        entry, 1,
        "the entry replica's own record names the owner: {recs:#?}"
    );
    let refused = recs
        .iter()
        .filter(|x| x["forwarded_from"] == "r9" && x["status"] == 403)
        .count();
    assert_eq!(
        refused, 9,
        "each refused forward is audited where it was refused: {recs:#?}"
    );
    assert!(
        c.replica(o)
            .output()
            .contains("not a continuation this replica owns"),
        "the refusal is logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_name_a_client_wrote_into_an_answer_id_forges_no_log_line() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url)).await;
    let mut client = crate::support::legacy_client::Legacy::new(&c.url).token(ALICE);
    client.initialize(json!({"sampling": {}})).await;
    // Answers whose ids look like Sluice's but carry a line in the replica's place; each lands
    // on the next replica (round robin), three times round.
    let ids = [
        format!("sluice-r9\n{FORGED}-1"),
        format!("sluice-r9\r\n{FORGED}-2"),
        format!("sluice-\n{FORGED}\n-3"),
    ];
    for id in ids.iter().chain(&ids).chain(&ids) {
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}});
        assert_eq!(
            client.post(&answer).await.status(),
            202,
            "an answer nobody waits for is taken and dropped"
        );
    }
    // A forward whose principal (as an identity provider may spell it) carries a line.
    let (http, post) = (call::http(), http::Method::POST);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": crate::support::client::meta()}}).to_string();
    let mcp = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let h = signed(
        &keys(),
        ("r9", "r1"),
        &post,
        &who(&format!("bob\n{FORGED}"), &[]),
        &mcp,
        list.as_bytes(),
    );
    http.post(c.internal_url(0))
        .headers(h)
        .body(list)
        .send()
        .await
        .expect("POST");
    // Each replica then logs a refused credential: what came before is in its output.
    for i in 0..3 {
        let marker = http
            .post(c.replica(i).url())
            .bearer_auth("not-a-key")
            .header("accept", "application/json, text/event-stream");
        let r = marker.body("{}").send().await.expect("POST");
        assert_eq!(r.status(), 401);
        c.replica(i).logged("request not authenticated", 1).await;
    }
    for i in 0..3 {
        let out = c.replica(i).output();
        let forged: Vec<&str> = out
            .lines()
            .filter(|l| l.trim_start().starts_with("1999-12-31T23:59:59"))
            .collect();
        assert!(
            forged.is_empty(),
            "replica r{} wrote a forged line: {forged:#?}",
            i + 1
        );
    }
}
