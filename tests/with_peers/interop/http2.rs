//! `http2 = true` on an upstream (issue 14): the official Rust SDK's server (rmcp 3.11) served
//! HTTP/2-only with prior knowledge, in front of which Sluice multiplexes every request on one
//! connection; without the key, the same server cannot be spoken to (an HTTP/1.1 request fails),
//! so what makes it work is the key. Bridge A over HTTP/2 (many parked exchanges, one
//! connection) and reloads are in `tests/in_process/http2.rs`.

use std::sync::atomic::Ordering;

use serde_json::json;

use super::{gateway, rmcp_upstream};
use crate::support::gateway::{Gateway, Upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_only_sdk_server_is_served_over_one_multiplexed_connection_when_http2_is_set() {
    let rs = rmcp_upstream::start_h2_only().await;
    let gw = Gateway::interop()
        .upstream_spec(Upstream::new("rs", &rs.url()).key("http2", true))
        .start()
        .await;
    let url = gw.url();
    let (status, list) = gateway::post(&url, "tools/list", None, json!({})).await;
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, rmcp_upstream::TOOLS, "{list}");
    // 24 calls at once: each its own stream on the one connection.
    let calls = (0..24).map(|i| {
        let url = url.clone();
        tokio::spawn(async move {
            let text = format!("h2-{i}");
            let (status, v) = gateway::post(
                &url,
                "tools/call",
                Some("reverse"),
                json!({"name": "reverse", "arguments": {"text": text}}),
            )
            .await;
            (
                status,
                v["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
                text.chars().rev().collect::<String>(),
            )
        })
    });
    for c in calls {
        let (status, got, want) = c.await.unwrap();
        assert_eq!((status, got), (200, want));
    }
    assert_eq!(
        rs.accepted.load(Ordering::SeqCst),
        1,
        "probe, list and 24 concurrent calls share one HTTP/2 connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_http2_an_http2_only_server_is_unhealthy_and_its_tools_are_not_served() {
    let rs = rmcp_upstream::start_h2_only().await;
    let gw = Gateway::interop()
        .unchecked()
        .upstream_spec(Upstream::new("rs", &rs.url()))
        .start()
        .await;
    crate::support::eventually("the probe to end", || {
        gw.gateway.catalog.upstreams[0].status().probed
    })
    .await;
    let s = gw.gateway.catalog.upstreams[0].status();
    assert!(
        !s.healthy,
        "an HTTP/1.1 request to an HTTP/2-only server fails"
    );
    assert!(
        s.error.as_deref().is_some_and(|e| e.contains("rs")),
        "the reason names the upstream: {:?}",
        s.error
    );
    let (status, v) = gateway::post(
        &gw.url(),
        "tools/call",
        Some("reverse"),
        json!({"name": "reverse", "arguments": {"text": "x"}}),
    )
    .await;
    // Only a down upstream could serve it: 503 naming it (issue 29), not 404 -32601.
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (503, json!(-31030)),
        "nothing serves it now: {v}"
    );
    assert_eq!(v["error"]["data"]["down"][0]["upstream"], "rs", "{v}");
}
