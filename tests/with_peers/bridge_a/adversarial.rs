//! Adversarial retries and abandoned exchanges: each refusal is a 400 `-32602` with its
//! `data.reason` (never a fresh round), and every exchange that is abandoned, disconnected or
//! whose upstream died is cancelled upstream and leaves nothing behind.

use std::time::Duration;

use serde_json::{json, Value};

use super::gateway::{self, eventually, retry, sample, Bridge, Call};
use crate::support::gateway::{ApiKey, Gateway};
use crate::support::peers;

/// Sluice in front of the shared `mcp==1.30.0` upstream.
async fn with_py1(bridge: Bridge) -> (sluice::Running, &'static peers::Peer, reqwest::Client) {
    let py1 = peers::py1().await;
    (
        gateway::start(&[("py1", &py1.url)], bridge).await,
        py1,
        gateway::http(),
    )
}

/// The `keyed` tool: one sampling ask whose input key is "llm".
fn keyed(text: &str, tag: &str) -> Call {
    Call::new("keyed", json!({"text": text, "tag": tag}))
}

fn llm(text: &str) -> Value {
    json!({"llm": sample(text, "m")})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_state_is_refused_as_tampered_and_the_exchange_stays_for_the_genuine_one() {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    let call = keyed("t", "adv-tampered");
    let state = call.send(&http, &url, json!({})).await.state();

    // One character changed in the middle (the payload), one at the end (the tag), garbage, a number.
    let mid = state.len() / 2;
    let flip = |s: &str, at: usize| {
        let mut b = s.as_bytes().to_vec();
        b[at] = if b[at] == b'A' { b'B' } else { b'A' };
        String::from_utf8(b).unwrap()
    };
    for bad in [
        json!(flip(&state, mid)),
        json!(flip(&state, state.len() - 1)),
        json!("not-a-state"),
        json!(42),
    ] {
        let reply = call
            .send(
                &http,
                &url,
                json!({"inputResponses": llm("x"), "requestState": bad}),
            )
            .await;
        reply.refused_for("tampered");
    }
    assert_eq!(
        gw.gateway.bridge.parked.len(),
        1,
        "a refused state leaves the exchange parked"
    );
    let done = call.send(&http, &url, retry(llm("genuine"), &state)).await;
    assert_eq!(done.text(), "keyed[t]: genuine (model=m)");
    assert_eq!(py1.events("adv-tampered"), ["start", "done"]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_state_is_refused_as_unknown_exchange() {
    let (gw, _py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    let call = keyed("r", "adv-replay");
    let state = call.send(&http, &url, json!({})).await.state();
    assert_eq!(
        call.send(&http, &url, retry(llm("once"), &state))
            .await
            .text(),
        "keyed[r]: once (model=m)"
    );
    for _ in 0..2 {
        call.send(&http, &url, retry(llm("twice"), &state))
            .await
            .refused_for("unknown_exchange");
    }
    assert_eq!(gw.gateway.bridge.parked.len(), 0);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_arguments_or_tool_are_refused_as_request_changed() {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    let call = keyed("original", "adv-changed");
    let state = call.send(&http, &url, json!({})).await.state();
    let changed = keyed("changed", "adv-changed");
    changed
        .send(&http, &url, retry(llm("x"), &state))
        .await
        .refused_for("request_changed");
    let other_tool = Call::new(
        "two_rounds",
        json!({"topic": "original", "tag": "adv-changed"}),
    );
    other_tool
        .send(&http, &url, retry(llm("x"), &state))
        .await
        .refused_for("request_changed");
    // The original request with the state still completes: the refusals touched nothing.
    assert_eq!(
        call.send(&http, &url, retry(llm("kept"), &state))
            .await
            .text(),
        "keyed[original]: kept (model=m)"
    );
    assert_eq!(
        py1.events("adv-changed"),
        ["start", "done"],
        "the refused retries never reached the upstream"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_state_is_refused_as_expired() {
    let (gw, _py1, http) = with_py1(Bridge {
        park_ms: 300,
        ..Bridge::default()
    })
    .await;
    let url = gw.url();
    let call = keyed("e", "adv-expired");
    let state = call.send(&http, &url, json!({})).await.state();
    tokio::time::sleep(Duration::from_millis(400)).await;
    call.send(&http, &url, retry(llm("late"), &state))
        .await
        .refused_for("expired");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_another_principal_is_refused_as_wrong_principal_and_principals_never_share_a_session(
) {
    const ALICE: &str = "alice-bridge-a-key-0123456789";
    const BOB: &str = "bob-bridge-a-key-9876543210";
    let auth = |g: Gateway| {
        g.api_key(ApiKey::new(ALICE, "alice"))
            .api_key(ApiKey::new(BOB, "bob"))
    };
    let py1 = peers::py1().await;
    let gw = gateway::start_with(&[("py1", &py1.url)], Bridge::default(), auth).await;
    let (url, http) = (gw.url(), gateway::http());
    let alice = keyed("mine", "adv-principal").token(ALICE);
    let bob = keyed("mine", "adv-principal").token(BOB);
    let state = alice.send(&http, &url, json!({})).await.state();
    // Bob presents Alice's state for the very same request: refused, and Alice's exchange stays.
    bob.send(&http, &url, retry(llm("bob's answer"), &state))
        .await
        .refused_for("wrong_principal");
    assert_eq!(gw.gateway.bridge.parked.len(), 1);
    assert_eq!(
        alice
            .send(&http, &url, retry(llm("alice's answer"), &state))
            .await
            .text(),
        "keyed[mine]: alice's answer (model=m)"
    );
    assert_eq!(
        py1.events("adv-principal"),
        ["start", "done"],
        "bob's retry never reached the upstream"
    );

    // Alice's session is idle in the pool now; Bob's call opens a session of his own.
    let before = gw.gateway.bridge.pool.open_sessions();
    let bob_state = keyed("his", "")
        .token(BOB)
        .send(&http, &url, json!({}))
        .await
        .state();
    assert_eq!(
        gw.gateway.bridge.pool.open_sessions(),
        before + 1,
        "bob's call did not reuse alice's idle session"
    );
    let done = keyed("his", "")
        .token(BOB)
        .send(&http, &url, retry(llm("bob's"), &bob_state))
        .await;
    assert_eq!(done.text(), "keyed[his]: bob's (model=m)");
    gw.stop().await;
}

#[test]
fn sealed_state_binds_the_principal_unit_check() {
    // The same check without HTTP: the principal binding of the `Keys` the bridge uses.
    use sluice::state::{Key, Keys, Sealed, StateError};
    let keys = Keys::new(vec![Key::new(1, vec![7u8; 32]).unwrap()]).unwrap();
    let now = sluice::state::now_ms();
    // Built from its wire form, so that fields added later (with serde defaults) keep their defaults.
    let sealed: Sealed = serde_json::from_value(json!({
        "p": "alice", "m": "tools/call", "n": "keyed", "d": "d1", "u": "py1", "r": 1,
        "e": now + 60_000, "o": "r1", "h": "h",
    }))
    .expect("a Sealed payload");
    let token = keys.seal(&sealed);
    assert_eq!(
        keys.open(&token, "alice", "tools/call", "keyed", "d1", now),
        Ok(sealed)
    );
    let err = keys
        .open(&token, "bob", "tools/call", "keyed", "d1", now)
        .unwrap_err();
    assert_eq!(
        (err, err.reason()),
        (StateError::WrongPrincipal, "wrong_principal")
    );
    // The principal is checked before the request: bob with another request is still wrong_principal.
    assert_eq!(
        keys.open(&token, "bob", "tools/call", "other", "d2", now),
        Err(StateError::WrongPrincipal)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_response_is_refused_and_the_exchange_stays_for_a_correct_retry() {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    let call = keyed("m", "adv-malformed");
    let state = call.send(&http, &url, json!({})).await.state();
    for bad in [
        json!({"llm": {"role": "assistant"}}),
        json!({"llm": {"role": "robot", "content": {"type": "text", "text": "x"}, "model": "m"}}),
        json!({"llm": "just text"}),
    ] {
        let reply = call.send(&http, &url, retry(bad.clone(), &state)).await;
        reply.refused(-32602);
        assert!(
            reply.msg["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("llm"),
            "the refusal names the input key: {}",
            reply.msg
        );
        assert_eq!(
            gw.gateway.bridge.parked.len(),
            1,
            "the exchange stays parked after {bad}"
        );
    }
    let reply = call
        .send(
            &http,
            &url,
            json!({"inputResponses": ["not", "an", "object"], "requestState": state}),
        )
        .await;
    reply.refused(-32602);
    assert_eq!(
        call.send(&http, &url, retry(llm("fine"), &state))
            .await
            .text(),
        "keyed[m]: fine (model=m)"
    );
    assert_eq!(py1.events("adv-malformed"), ["start", "done"]);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_response_gets_a_new_round_for_what_is_missing_and_unknown_keys_are_ignored() {
    // The two concurrent asks must land in one round: gather for 200 ms (the most the config
    // allows), not 20, so a stall between them on a loaded machine does not split them.
    let (gw, py1, http) = with_py1(Bridge {
        gather_ms: 200,
        ..Bridge::default()
    })
    .await;
    let url = gw.url();
    let call = Call::new("pair", json!({"topic": "p", "tag": "adv-missing"}));
    let first = call.send(&http, &url, json!({})).await;
    let mut keys: Vec<&String> = first.input_requests().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["confirm", "llm"],
        "one round with both asks under their hinted keys: {}",
        first.msg
    );
    assert_eq!(
        first.input_requests()["confirm"]["method"],
        "elicitation/create"
    );
    assert!(
        first.input_requests()["llm"]["params"]
            .get("_meta")
            .is_none(),
        "the input-key hint is stripped: {}",
        first.msg
    );

    // Only "llm" (and a key nobody asked for): a new round asks for "confirm" alone.
    let answers = json!({"llm": sample("sampled", "m"), "nobody-asked": {"x": 1}});
    let second = call.send(&http, &url, retry(answers, &first.state())).await;
    let keys: Vec<&String> = second.input_requests().keys().collect();
    assert_eq!(keys, ["confirm"], "{}", second.msg);
    assert_ne!(second.state(), first.state(), "each round's state is new");
    call.send(
        &http,
        &url,
        retry(json!({"confirm": {"action": "accept"}}), &first.state()),
    )
    .await
    .refused_for("unknown_exchange");

    let done = call
        .send(
            &http,
            &url,
            retry(
                json!({"confirm": {"action": "accept", "content": {"answer": "ok"}}}),
                &second.state(),
            ),
        )
        .await;
    assert_eq!(
        done.text(),
        "pair[p] llm: sampled (model=m) | confirm: accept ok"
    );
    assert_eq!(py1.events("adv-missing"), ["start", "done"]);
    assert_eq!(gw.gateway.bridge.parked.len(), 0);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_responses_without_request_state_start_a_fresh_exchange_using_answers_under_the_asked_key(
) {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    // The pre-supplied answer under the key the upstream's ask names ("llm") is used: no round.
    let done = keyed("pre", "adv-presupplied")
        .send(&http, &url, json!({"inputResponses": llm("pre-supplied")}))
        .await;
    assert_eq!(done.text(), "keyed[pre]: pre-supplied (model=m)");
    assert_eq!(py1.events("adv-presupplied"), ["start", "done"]);
    // A malformed pre-supplied answer is checked like any other: 400 -32602, the upstream call cancelled.
    let bad = keyed("bad", "adv-presupplied-bad")
        .send(
            &http,
            &url,
            json!({"inputResponses": {"llm": {"role": "assistant"}}}),
        )
        .await;
    bad.refused(-32602);
    let events = py1.wait_event("adv-presupplied-bad", "cancelled").await;
    assert_eq!(events, ["start", "cancel-notified", "cancelled"]);
    // Answers under keys nobody asks for: a fresh exchange with its round, never an error.
    let call = Call::new("two_rounds", json!({"topic": "fresh", "tag": "adv-fresh"}));
    let round = call
        .send(
            &http,
            &url,
            json!({"inputResponses": {"stale-key": sample("stale", "m")}}),
        )
        .await;
    let key = round
        .input_requests()
        .keys()
        .next()
        .expect("an ask")
        .clone();
    let round2 = call
        .send(
            &http,
            &url,
            retry(json!({ key.as_str(): sample("one", "m") }), &round.state()),
        )
        .await;
    let key2 = round2
        .input_requests()
        .keys()
        .next()
        .expect("an ask")
        .clone();
    let done = call
        .send(
            &http,
            &url,
            retry(
                json!({ key2.as_str(): sample("two", "m") }),
                &round2.state(),
            ),
        )
        .await;
    assert_eq!(
        done.text(),
        "two_rounds[fresh] first: one (model=m) | second: two (model=m)"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_comes_back_is_cancelled_upstream_when_the_park_expires() {
    // park_ms 1000: long enough that the checks of the parked state below run before it expires.
    let (gw, py1, http) = with_py1(Bridge {
        park_ms: 1000,
        ..Bridge::default()
    })
    .await;
    let url = gw.url();
    let baseline = gw.gateway.bridge.pool.open_sessions();
    let call = Call::new("sample_forever", json!({"tag": "adv-abandoned"}));
    let round = call.send(&http, &url, json!({}));
    let round = round.await;
    assert_eq!(round.input_requests().len(), 1);
    assert_eq!(gw.gateway.bridge.parked.len(), 1);
    assert_eq!(
        gw.gateway.bridge.pool.open_sessions(),
        baseline + 1,
        "the call leased a session of its own"
    );
    // Nobody answers: past park_ms the upstream sees notifications/cancelled for its call.
    let events = py1
        .wait_event_within("adv-abandoned", "cancelled", Duration::from_secs(3))
        .await;
    assert_eq!(
        events,
        ["start", "cancel-notified", "cancelled"],
        "the upstream was cancelled by notifications/cancelled"
    );
    eventually("the park table is empty", || {
        gw.gateway.bridge.parked.is_empty()
    })
    .await;
    eventually("the abandoned call's session is closed", || {
        gw.gateway.bridge.pool.open_sessions() == baseline
    })
    .await;
    call.send(
        &http,
        &url,
        retry(
            json!({"sampling/createMessage-1": sample("late", "m")}),
            &round.state(),
        ),
    )
    .await
    .refused_for("expired");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_call_cancels_the_upstream_and_frees_the_session() {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    let baseline = gw.gateway.bridge.pool.open_sessions();
    let call = Call::new("slow", json!({"ms": 10_000, "tag": "adv-disconnect"}));
    let pending = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { call.send(&http, &url, json!({})).await }
    });
    // The upstream is working on the call; then the client goes away.
    py1.wait_event("adv-disconnect", "start").await;
    pending.abort();
    let _ = pending.await;
    let events = py1.wait_event("adv-disconnect", "cancelled").await;
    assert_eq!(
        events,
        ["start", "cancel-notified", "cancelled"],
        "the upstream was cancelled by notifications/cancelled"
    );
    eventually("the disconnected call's session is closed", || {
        gw.gateway.bridge.pool.open_sessions() == baseline
    })
    .await;
    assert_eq!(gw.gateway.bridge.parked.len(), 0);
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_dies_mid_round_fails_the_retry_naming_it_and_empties_the_park_table() {
    let doomed = peers::own_py1("py1-doomed").await;
    let gw = gateway::start(&[("doomed", &doomed.url)], Bridge::default()).await;
    let (url, http) = (gw.url(), gateway::http());
    let call = keyed("d", "adv-dies");
    let state = call.send(&http, &url, json!({})).await.state();
    assert_eq!(gw.gateway.bridge.parked.len(), 1);
    doomed.kill();
    let reply = call.send(&http, &url, retry(llm("too late"), &state)).await;
    assert_eq!(
        (reply.status, &reply.msg["error"]["code"]),
        (502, &json!(-32603)),
        "a retry on a dead upstream fails: {}",
        reply.msg
    );
    let message = reply.msg["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("doomed"),
        "the error names the upstream: {}",
        reply.msg
    );
    assert_eq!(gw.gateway.bridge.parked.len(), 0, "the park table is empty");
    // A second retry with the same state finds nothing.
    call.send(&http, &url, retry(llm("again"), &state))
        .await
        .refused_for("unknown_exchange");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_sampling_capability_gets_missing_capability_and_the_upstream_call_ends(
) {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let url = gw.url();
    let call = keyed("c", "adv-nocap").caps(json!({"elicitation": {"form": {}}}));
    let reply = call.send(&http, &url, json!({})).await;
    assert_eq!(
        reply.refused(-32021)["requiredCapabilities"],
        json!({"sampling": {}}),
        "{}",
        reply.msg
    );
    // The upstream's ask was refused and its call cancelled: it ends one way or the other.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let events = py1.events("adv-nocap");
        if events.len() >= 2 {
            assert_eq!(events[0], "start");
            assert!(
                events[1] == "cancelled" || events[1].starts_with("error"),
                "the upstream call ended: {events:?}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the upstream call did not end within 2 s: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(gw.gateway.bridge.parked.len(), 0, "nothing was parked");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_the_gateway_cancels_parked_exchanges_upstream() {
    let (gw, py1, http) = with_py1(Bridge::default()).await;
    let round = Call::new("sample_forever", json!({"tag": "adv-shutdown"}))
        .send(&http, &gw.url(), json!({}))
        .await;
    assert_eq!(round.input_requests().len(), 1);
    gw.stop().await;
    let events = py1.wait_event("adv-shutdown", "cancelled").await;
    assert_eq!(
        events,
        ["start", "cancel-notified", "cancelled"],
        "the upstream was cancelled by notifications/cancelled"
    );
}
