//! 2024-11-05 HTTP+SSE upstreams (issue 12): a FastMCP `mcp==1.30.0` server on
//! `transport="sse"` behind Sluice (`transport = "sse"`), its mid-call sampling served to a
//! 2026-07-28 client as `input_required` rounds, one GET stream per session; the same URL found
//! to be HTTP+SSE by the default `transport = "auto"`, and not by `"streamable-http"`.

use serde_json::{json, Value};

use crate::support::call::{http, sample, Call};
use crate::support::client::Req;
use crate::support::gateway::{keys, Gateway, Upstream};
use crate::support::peers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fastmcp_over_sse_lists_and_completes_two_sampling_rounds() {
    let up = peers::own_py1_sse("py1-sse").await;
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .named("sse.toml")
        .top("prefix", "always")
        .upstream_spec(Upstream::new("old", &up.url).key("transport", "sse"))
        .all_legacy()
        .start()
        .await;
    let list = Req::new("tools/list")
        .send(&gw.url())
        .await
        .result(&json!(1));
    let names: Vec<&str> = list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"old__two_rounds") && names.contains(&"old__slow"),
        "{names:?}"
    );

    let call = Call::new("old__two_rounds", json!({"topic": "sse", "tag": "sse-two"}));
    let r1 = call.send(&http(), &gw.url(), json!({})).await;
    let key = r1.input_requests().keys().next().cloned().expect("an ask");
    assert_eq!(
        r1.input_requests()[&key]["method"],
        "sampling/createMessage"
    );
    let r2 = call
        .send(
            &http(),
            &gw.url(),
            json!({"requestState": r1.state(), "inputResponses": {key: sample("ONE", "m")}}),
        )
        .await;
    let key2 = r2
        .input_requests()
        .keys()
        .next()
        .cloned()
        .expect("a second ask");
    let done = call
        .send(
            &http(),
            &gw.url(),
            json!({"requestState": r2.state(), "inputResponses": {key2: sample("TWO", "m")}}),
        )
        .await;
    let text = done.text();
    assert!(
        text.contains("first: ONE") && text.contains("second: TWO"),
        "{text}"
    );
    assert_eq!(up.events("sse-two"), ["start", "done"]);

    let slept = Call::new("old__slow", json!({"ms": 1, "tag": "sse-slow"}))
        .caps(json!({}))
        .send(&http(), &gw.url(), json!({}))
        .await;
    assert_eq!(slept.text(), "slept 1");
    // Progress arrives over the upstream's SSE stream and reaches the client on its call's stream.
    let msgs = Call::new("old__steps", json!({"n": 3}))
        .caps(json!({}))
        .with_progress(&http(), &gw.url(), "p-sse")
        .await;
    let progress: Vec<Value> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].clone())
        .collect();
    assert_eq!(progress, [json!(1.0), json!(2.0), json!(3.0)], "{msgs:?}");
    let last = msgs.last().expect("a final message");
    assert_eq!(
        last["result"]["content"][0]["text"], "did 3 steps",
        "{last}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_url_configured_as_sse_is_unhealthy_with_a_clear_reason() {
    let up = peers::py1().await;
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .upstream_spec(Upstream::new("old", &up.url).key("transport", "sse"))
        .unchecked()
        .start()
        .await;
    let s = gw.gateway.catalog.upstreams[0].status();
    let why = s.error.clone().unwrap_or_default();
    assert!(
        !s.healthy && why.contains("upstream 'old'") && why.contains("2024-11-05 SSE endpoint"),
        "{why}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_url_is_found_as_such_by_the_default_transport_and_not_by_streamable_http() {
    let up = peers::own_py1_sse("py1-sse-auto").await;
    // No transport key: `auto` finds that the URL is a 2024-11-05 SSE endpoint.
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .top("prefix", "always")
        .upstream("sseauto", &up.url)
        .all_legacy()
        .start()
        .await;
    assert!(
        gw.gateway.catalog.upstreams[0].is_sse(),
        "found to be HTTP+SSE"
    );
    // Found so is no failure: no warning names it (issue 29: the failed 2025-11-25 handshake
    // before the stream was found was logged at warn).
    let warned = crate::support::logs::lines_with(&["WARN", "upstream=sseauto"]);
    assert!(
        warned.is_empty(),
        "a successful detection warns: {warned:?}"
    );
    let call = Call::new(
        "sseauto__two_rounds",
        json!({"topic": "auto", "tag": "sse-auto"}),
    );
    let r1 = call.send(&http(), &gw.url(), json!({})).await;
    let key = r1
        .input_requests()
        .keys()
        .next()
        .cloned()
        .expect("an ask over the found transport");
    assert_eq!(
        r1.input_requests()[&key]["method"],
        "sampling/createMessage"
    );
    gw.stop().await;
    // `transport = "streamable-http"` asks for that transport only: the same URL is unhealthy.
    let only = Upstream::new("old", &up.url).key("transport", "streamable-http");
    let gw = Gateway::bridge(keys::BRIDGE_A)
        .upstream_spec(only)
        .unchecked()
        .start()
        .await;
    let (s, sse) = (
        gw.gateway.catalog.upstreams[0].status(),
        gw.gateway.catalog.upstreams[0].is_sse(),
    );
    assert!(!s.healthy && !sse, "{s:?}");
    gw.stop().await;
}
