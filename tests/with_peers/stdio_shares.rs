//! A 2025-11-25 stdio upstream's processes are shared fairly (issue 28, class 3): a call
//! answered `input_required` keeps its session, i.e. its process, leased while it is parked, so
//! one principal's parked calls could hold every process. Against the real FastMCP
//! `mcp==1.30.0` server (tests/peers/py1_upstream.py) over stdio, whose `ask_once` asks one
//! sampling mid-call:
//!
//! - one principal holds its share (`max_processes_per_principal`, a quarter of
//!   `max_processes` under `[auth]`) and no more: its next call cancels the exchange it parked
//!   longest (whose retry is then refused, `unknown_exchange`) and takes that process; with
//!   nothing of its own parked it is refused with 503, `Retry-After` and `-31020` naming the
//!   key; another principal's call is served meanwhile;
//! - with every process serving parked calls, a third principal gets 503 naming
//!   `max_processes` (not 502 "not MCP"), and is served once one of them is answered;
//! - probes that find every process in use leave the upstream up (its lists as they were), so
//!   its calls are told the pool is full, not that it is down; with `max_processes = 1` the
//!   first session gets the one place (no warm spare is started into it first).

use serde_json::{json, Value};

use crate::support::call::{http, retry, sample, Call};
use crate::support::gateway::{keys, ApiKey, Gateway, Upstream, ALICE_KEY, BOB_KEY};
use crate::support::peers::{self, peer_env, script};

const CAROL_KEY: &str = "stdio-shares-carol-key-0123456789";

/// `tests/peers/py1_upstream.py` over stdio as `py1`, with these keys.
fn py1(tag: &str, keys: &[(&str, i64)]) -> Upstream {
    let events = peers::scratch().join(format!("stdio-shares-{tag}"));
    let py = peer_env("SLUICE_PY1").display().to_string();
    let mut u = Upstream::stdio(
        "py1",
        &[
            py,
            script("py1_upstream.py").display().to_string(),
            "--stdio".into(),
            "--events".into(),
            events.display().to_string(),
        ],
    );
    for (k, v) in keys {
        u = u.key(k, *v);
    }
    u
}

/// Sluice with bridge A's key, three principals (alice, bob, carol) and `up`.
async fn gateway(up: Upstream) -> sluice::Running {
    Gateway::bridge(keys::BRIDGE_A)
        .named("stdio_shares.toml")
        .top("prefix", "always")
        .two_keys()
        .api_key(ApiKey::new(CAROL_KEY, "carol"))
        .upstream_spec(up)
        .all_legacy()
        .start()
        .await
}

fn ask(key: &str, text: &str) -> Call {
    Call::new("py1__ask_once", json!({"text": text})).token(key)
}

/// Sends `call`; gives the status, `Retry-After` and the JSON-RPC message.
async fn send(call: &Call, url: &str, extra: Value) -> (u16, Option<String>, Value) {
    let resp = call
        .request(&http(), url, extra)
        .send()
        .await
        .expect("POST to sluice");
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or("").to_owned());
    let text = resp.text().await.expect("a body");
    let json = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .unwrap_or(&text)
        .to_owned();
    (
        status,
        retry_after,
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")),
    )
}

/// Asserts a full pool's answer: 503, `Retry-After: 1`, `-31020`, `data.limit` = `limit`, and a
/// message naming the upstream and `limit = max`.
fn assert_full(status: u16, retry_after: Option<String>, msg: &Value, limit: &str, max: usize) {
    assert_eq!(
        (status, msg["error"]["code"].as_i64()),
        (503, Some(-31020)),
        "{msg}"
    );
    assert_eq!(
        retry_after.as_deref(),
        Some("1"),
        "Retry-After on a full pool: {msg}"
    );
    assert_eq!(msg["error"]["data"]["limit"], limit, "{msg}");
    assert_eq!(msg["error"]["data"]["upstream"], "py1", "{msg}");
    let text = msg["error"]["message"].as_str().unwrap_or("");
    assert!(
        text.contains("stdio upstream \"py1\"") && text.contains(&format!("{limit} = {max}")),
        "{msg}"
    );
    assert!(!text.contains("not MCP"), "{msg}");
}

/// Parks `call` (its one sampling round); gives its `requestState` and the ask's key.
async fn park(call: &Call, url: &str) -> (String, String) {
    let r = call.send(&http(), url, json!({})).await;
    let key = r.input_requests().keys().next().cloned().expect("one ask");
    (r.state(), key)
}

/// Answers a parked call's ask; asserts its result.
async fn answer(call: &Call, url: &str, (state, key): (String, String), text: &str) {
    let done = call
        .send(
            &http(),
            url,
            retry(json!({key: sample("fine", "m")}), &state),
        )
        .await;
    assert_eq!(
        done.text(),
        format!("ask_once[{text}] via post: fine (model=m)")
    );
}

/// Sends `call` until it parks: each try before a process is free is a full pool's 503
/// naming `max_processes` = `max`; gives its round.
async fn park_once_freed(call: &Call, url: &str, what: &str, max: usize) -> (String, String) {
    let round = std::sync::Mutex::new(None);
    crate::support::eventually_async(what, || async {
        let (status, retry_after, msg) = send(call, url, json!({})).await;
        if status == 503 {
            assert_full(status, retry_after, &msg, "max_processes", max);
            return false;
        }
        assert_eq!(msg["result"]["resultType"], "input_required", "{msg}");
        let key = msg["result"]["inputRequests"]
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .expect("one ask");
        *round.lock().unwrap() = Some((
            msg["result"]["requestState"]
                .as_str()
                .expect("a requestState")
                .to_owned(),
            key,
        ));
        true
    })
    .await;
    let taken = round.lock().unwrap().take();
    taken.expect("a round")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principals_parked_calls_hold_only_its_share_of_a_stdio_upstream_and_another_principal_is_served(
) {
    // max_processes = 4: under [auth] one principal's share is a quarter of it, one process.
    let gw = gateway(py1("share", &[("max_processes", 4)])).await;
    let url = gw.url();
    // Alice's first call parks and holds her one process; her client does not come back.
    let first = ask(ALICE_KEY, "a0").id(json!(0));
    let first_round = park(&first, &url).await;
    // Her next call needs a process: the exchange she parked longest is cancelled for it (not
    // a 503 until park_ms has passed), so she never holds more than her share.
    let second = ask(ALICE_KEY, "a1").id(json!(1));
    let second_round = park(&second, &url).await;
    let (status, _, msg) = send(
        &first,
        &url,
        retry(
            json!({first_round.1.clone(): sample("late", "m")}),
            &first_round.0,
        ),
    )
    .await;
    assert_eq!(
        status, 400,
        "the cancelled exchange's retry is refused: {msg}"
    );
    assert_eq!(msg["error"]["data"]["reason"], "unknown_exchange", "{msg}");
    // Bob is served while alice's second call stays parked: his call parks and completes.
    let bob = ask(BOB_KEY, "b");
    let round = park(&bob, &url).await;
    answer(&bob, &url, round, "b").await;
    answer(&second, &url, second_round, "a1").await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_whose_share_serves_a_running_call_is_refused_503_naming_max_processes_per_principal(
) {
    let gw = gateway(py1("share-busy", &[("max_processes", 4)])).await;
    let url = gw.url();
    // Alice's slow call runs upstream: her one process is leased, nothing of hers is parked.
    let started = peers::scratch()
        .join("stdio-shares-share-busy")
        .join("slow-a");
    let slow = Call::new("py1__slow", json!({"ms": 60_000, "tag": "slow-a"})).token(ALICE_KEY);
    let running = {
        let url = url.clone();
        tokio::spawn(async move { send(&slow, &url, json!({})).await })
    };
    crate::support::eventually("alice's slow call started upstream", || {
        std::fs::read_to_string(&started).is_ok_and(|s| s.contains("start"))
    })
    .await;
    let (status, retry_after, msg) = send(&ask(ALICE_KEY, "a1"), &url, json!({})).await;
    assert_full(status, retry_after, &msg, "max_processes_per_principal", 1);
    running.abort();
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_process_serving_parked_calls_a_third_principal_gets_503_naming_max_processes_and_is_served_once_one_is_answered(
) {
    let gw = gateway(py1(
        "pool",
        &[("max_processes", 2), ("max_processes_per_principal", 1)],
    ))
    .await;
    let url = gw.url();
    let (alice, bob, carol) = (ask(ALICE_KEY, "a"), ask(BOB_KEY, "b"), ask(CAROL_KEY, "c"));
    let alice_round = park(&alice, &url).await;
    let _bob_round = park(&bob, &url).await;
    let (status, retry_after, msg) = send(&carol, &url, json!({})).await;
    assert_full(status, retry_after, &msg, "max_processes", 2);
    // Alice's call is answered: her process is idle again (its lease is given back just after
    // the answer is sent), and carol's call gets it.
    answer(&alice, &url, alice_round, "a").await;
    let carol_round =
        park_once_freed(&carol, &url, "carol's call gets alice's freed process", 2).await;
    answer(&carol, &url, carol_round, "c").await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_that_find_every_process_in_use_leave_the_upstream_up_and_its_calls_refused_503_max_processes(
) {
    // One process, probed every 100 ms: alice's parked call holds it through several probes.
    let up = py1(
        "probed",
        &[("max_processes", 1), ("max_processes_per_principal", 1)],
    );
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .named("stdio_shares_probed.toml")
        .top("prefix", "always")
        .two_keys()
        .timeout("refresh_ms", 100)
        .upstream_spec(up)
        .all_legacy()
        .start()
        .await;
    let url = gw.url();
    let alice = ask(ALICE_KEY, "a");
    let alice_round = park(&alice, &url).await;
    let py1 = gw
        .gateway
        .catalog
        .upstreams
        .iter()
        .find(|u| u.name == "py1")
        .expect("py1")
        .clone();
    let mut probed = py1.health.probed.subscribe();
    for _ in 0..3 {
        tokio::time::timeout(std::time::Duration::from_secs(20), probed.changed())
            .await
            .expect("a probe within 20 s")
            .expect("the upstream is still there");
        let s = py1.status();
        assert!(
            s.healthy,
            "a probe that found its one process in use marked it down: {:?}",
            s.error
        );
    }
    // Bob is told the pool is full (503 -31020 naming max_processes), not that py1 is down.
    let bob = ask(BOB_KEY, "b");
    let (status, retry_after, msg) = send(&bob, &url, json!({})).await;
    assert_full(status, retry_after, &msg, "max_processes", 1);
    answer(&alice, &url, alice_round, "a").await;
    let bob_round = park_once_freed(
        &bob,
        &url,
        "bob's call gets the process alice's answer freed",
        1,
    )
    .await;
    answer(&bob, &url, bob_round, "b").await;
    drop(probed);
    drop(py1);
    gw.stop().await;
}
