//! The internal listener, attacked directly: only a POST signed with the cluster's state keys
//! for this very replica gets through, once; and a 2025-11-25 session's record in Redis stays
//! small whatever the client sends.

use std::time::Duration;

use serde_json::json;

use super::harness::{keys, Cluster, Redis, Setup, ALICE};
use crate::support::call::{self, retry, sample, Call};
use crate::support::peers;

/// The headers of a forward of `body` from replica `from` to `to`, signed under `keys` for
/// `principal`, carrying `mcp` headers (name, value) as a replica carries a client's.
pub(crate) fn signed(
    keys: &sluice::state::Keys,
    (from, to): (&str, &str),
    method: &http::Method,
    principal: &sluice::auth::Principal,
    mcp: &[(&str, &str)],
    body: &[u8],
) -> reqwest::header::HeaderMap {
    let mut h = http::HeaderMap::new();
    for (k, v) in [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ]
    .iter()
    .chain(mcp)
    {
        h.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            http::HeaderValue::from_str(v).unwrap(),
        );
    }
    let f = sluice::cluster::peer::Forwarded {
        from,
        to,
        method,
        path: sluice::handoff::PATH,
        body,
    };
    sluice::cluster::peer::sign(keys, &f, principal, sluice::state::now_ms(), &mut h);
    let mut out = reqwest::header::HeaderMap::new();
    for (k, v) in &h {
        out.insert(
            reqwest::header::HeaderName::from_bytes(k.as_str().as_bytes()).unwrap(),
            reqwest::header::HeaderValue::from_bytes(v.as_bytes()).unwrap(),
        );
    }
    out
}

/// A principal as a forward names it.
pub(crate) fn who(id: &str, groups: &[&str]) -> sluice::auth::Principal {
    sluice::auth::Principal {
        id: id.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        scopes: Default::default(),
        subject: None,
    }
}

/// The MCP headers of a `tools/call` of `name`.
pub(crate) fn call_headers(name: &str) -> [(&'static str, String); 3] {
    [
        ("mcp-protocol-version", "2026-07-28".into()),
        ("mcp-method", "tools/call".into()),
        ("mcp-name", name.into()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_internal_listener_serves_one_signed_post_for_itself_once_and_nothing_else() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(
        &redis,
        &Setup::legacy(&py.url).with("[bridge]\ngather_ms = 0\n"),
    )
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // A round parked on its owner: its retry is what a replica forwards.
    let ask = Call::new("ask_once", json!({"text": "signed"})).token(ALICE);
    let round = ask.send(&call::http(), &c.url, json!({})).await;
    let owner = super::owner_of(&round.state());
    let (url, o) = (c.internal_url(Cluster::index(&owner)), owner.as_str());
    let key = round
        .input_requests()
        .keys()
        .next()
        .expect("an ask")
        .clone();
    let body = ask
        .body(retry(
            json!({ key: sample("signed answer", "m") }),
            &round.state(),
        ))
        .to_string();
    let hs = call_headers("ask_once");
    let mcp: Vec<(&str, &str)> = hs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (post, alice) = (http::Method::POST, who("alice", &[]));
    // Signed for the owner, by the cluster's keys: served, as alice.
    let h = signed(&keys(), ("r9", o), &post, &alice, &mcp, body.as_bytes());
    let ok = http
        .post(&url)
        .headers(h.clone())
        .body(body.clone())
        .send()
        .await
        .expect("POST");
    assert_eq!(ok.status(), 200);
    let done = ok.text().await.expect("body");
    assert!(
        done.contains("ask_once[signed] via post: signed answer (model=m)"),
        "{done}"
    );
    // The same forward again (a replay seen on the wire): refused.
    let again = http
        .post(&url)
        .headers(h)
        .body(body.clone())
        .send()
        .await
        .expect("POST");
    assert_eq!(again.status(), 401, "a replayed forward");
    // Signed for another replica, with other keys, unsigned, or another method: refused.
    let to_other = signed(
        &keys(),
        ("r9", "r-other"),
        &post,
        &alice,
        &mcp,
        body.as_bytes(),
    );
    let other = http
        .post(&url)
        .headers(to_other)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 401, "a forward meant for another replica");
    let foreign =
        sluice::state::Keys::new(vec![sluice::state::Key::new(1, vec![7u8; 32]).unwrap()]).unwrap();
    let forged = http
        .post(&url)
        .headers(signed(
            &foreign,
            ("r9", o),
            &post,
            &alice,
            &mcp,
            body.as_bytes(),
        ))
        .body(body.clone());
    assert_eq!(
        forged.send().await.unwrap().status(),
        401,
        "signed with other keys"
    );
    let bare = http
        .post(&url)
        .header("authorization", format!("Bearer {ALICE}"))
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(
        bare.status(),
        401,
        "a client's own credential does not open the internal listener"
    );
    let bad_from = signed(
        &keys(),
        ("r9 ERROR", o),
        &post,
        &alice,
        &mcp,
        body.as_bytes(),
    );
    assert_eq!(
        http.post(&url)
            .headers(bad_from)
            .body(body.clone())
            .send()
            .await
            .unwrap()
            .status(),
        401,
        "a sender that is no replica id"
    );
    let delete = http::Method::DELETE;
    let verb = http
        .delete(&url)
        .headers(signed(&keys(), ("r9", o), &delete, &alice, &[], b""))
        .send()
        .await
        .unwrap();
    assert_eq!(verb.status(), 405, "replicas forward POST only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_11_25_sessions_record_stays_small_whatever_its_client_sends() {
    let py = peers::py1().await;
    let redis = Redis::start().await;
    let c = Cluster::start(&redis, &Setup::legacy(&py.url)).await;
    let http = crate::support::call::http();
    let huge = "x".repeat(200_000);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "experimental": {"blob": huge}}, "clientInfo": {"name": huge, "version": "1"}}});
    let resp = http
        .post(&c.url)
        .bearer_auth(ALICE)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let sid = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut redis_conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .expect("redis");
    let rec: String = redis::cmd("GET")
        .arg(format!("sluice:s:{sid}"))
        .query(&mut redis_conn)
        .expect("the record");
    assert!(
        rec.len() <= sluice::bridge_b::shared::MAX_RECORD,
        "the record is {} bytes",
        rec.len()
    );
    assert!(
        rec.contains("\"sampling\""),
        "the asks' capabilities are kept: {rec}"
    );
    // And the session still works on another replica (adopted from that record).
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let r = http
        .post(&c.url)
        .bearer_auth(ALICE)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(ping.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_session_record_is_written_back_but_never_over_a_tombstone() {
    let redis = Redis::start().await;
    let shared =
        sluice::cluster::Shared::new(&redis.url(), Duration::from_secs(2)).expect("a Redis handle");
    let (idle, rec) = (
        Duration::from_secs(60),
        r#"{"p":"alice","v":"2025-11-25","c":{}}"#,
    );
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .expect("redis");
    let get = |conn: &mut redis::Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(conn).unwrap()
    };
    // Lost (Redis restarted): written back.
    assert!(shared
        .restore_session("s-lost", "alice", rec, idle)
        .await
        .unwrap());
    assert_eq!(get(&mut conn, "sluice:s:s-lost").as_deref(), Some(rec));
    // Ended elsewhere (DELETE's tombstone): stays ended.
    shared.put("sluice:s:s-ended", "ended", idle).await.unwrap();
    assert!(!shared
        .restore_session("s-ended", "alice", rec, idle)
        .await
        .unwrap());
    assert_eq!(get(&mut conn, "sluice:s:s-ended").as_deref(), Some("ended"));
    // Live: untouched, and renewing it says so; the tombstone says ended.
    assert!(!shared
        .restore_session("s-lost", "alice", r#"{"p":"other"}"#, idle)
        .await
        .unwrap());
    assert_eq!(get(&mut conn, "sluice:s:s-lost").as_deref(), Some(rec));
    use sluice::cluster::shared::Renewed;
    assert_eq!(
        shared
            .renew("s-lost", "alice", "ended", idle)
            .await
            .unwrap(),
        Renewed::Live
    );
    assert_eq!(
        shared
            .renew("s-ended", "alice", "ended", idle)
            .await
            .unwrap(),
        Renewed::Ended
    );
    assert_eq!(
        shared
            .renew("s-none", "alice", "ended", idle)
            .await
            .unwrap(),
        Renewed::Missing
    );
}
