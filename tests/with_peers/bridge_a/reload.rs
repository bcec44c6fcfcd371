//! A config reload under bridge A (issue 15 item 2): a round parked before a reload that
//! removes its upstream is finished after it (the parked exchange drains rather than failing),
//! its state stays single use across the reload, a made-up state does not reach it, and the
//! upstream's tools are gone for new calls.

use serde_json::json;

use super::gateway::{self, retry, sample, Bridge, Call};
use crate::support::gateway::Gateway;
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_parked_before_its_upstream_is_removed_finishes_after_the_reload_once() {
    let py1 = peers::py1().await;
    let always = |g: Gateway| g.top("prefix", "always");
    let gw = gateway::start_with(
        &[("py1", &py1.url), ("other", &py1.url)],
        Bridge::default(),
        always,
    )
    .await;
    let (url, http) = (gw.url(), gateway::http());
    let call = Call::new("py1__keyed", json!({"text": "t", "tag": "reload-parked"}));
    let state = call.send(&http, &url, json!({})).await.state();
    assert_eq!(gw.gateway.bridge.parked.len(), 1);

    // py1 removed; "other" (the same server under another name) kept.
    let next = gateway::config(&[("other", &py1.url)], Bridge::default(), always);
    let applied = gw.reload(next.config()).await.expect("the reload applies");
    assert_eq!(applied.removed, ["py1"]);

    let answer = json!({"llm": sample("after", "m")});
    // A made-up state does not open the way to the retired upstream: its name is unknown.
    let made_up = call
        .send(&http, &url, retry(answer.clone(), "not-a-state"))
        .await;
    assert_eq!(made_up.msg["error"]["code"], -32602, "{}", made_up.msg);
    assert!(
        made_up.msg["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool")),
        "{}",
        made_up.msg
    );
    let done = call.send(&http, &url, retry(answer.clone(), &state)).await;
    assert_eq!(
        done.text(),
        "keyed[t]: after (model=m)",
        "the parked round finishes on its upstream"
    );
    call.send(&http, &url, retry(answer, &state))
        .await
        .refused_for("unknown_exchange");
    assert_eq!(py1.events("reload-parked"), ["start", "done"]);
    // A new call of the removed upstream's tool is an unknown name.
    let fresh = Call::new("py1__keyed", json!({"text": "n", "tag": "reload-new"}))
        .send(&http, &url, json!({}))
        .await;
    assert_eq!(fresh.msg["error"]["code"], -32602, "{}", fresh.msg);
    // The kept one still serves.
    let kept = Call::new("other__keyed", json!({"text": "k", "tag": "reload-kept"}));
    let state = kept.send(&http, &url, json!({})).await.state();
    assert_eq!(
        kept.send(
            &http,
            &url,
            retry(json!({"llm": sample("kept", "m")}), &state)
        )
        .await
        .text(),
        "keyed[k]: kept (model=m)"
    );
    gw.stop().await;
}
