//! Sluice in-process in front of the given upstreams ([`Gateway::interop`]), and a raw modern
//! POST for wire-level checks.

use serde_json::{json, Value};

use crate::support::gateway::Gateway;
use crate::support::rpc;

/// Starts Sluice in front of `upstreams` (name, url) in that order; waits until each was probed
/// and fails the test if one is not healthy.
pub(crate) async fn start(upstreams: &[(&str, String)]) -> sluice::Running {
    let mut g = Gateway::interop();
    for (name, url) in upstreams {
        g = g.upstream(name, url);
    }
    g.start().await
}

/// POSTs one modern request (id 7, declaring sampling and form elicitation) to `url` with
/// matching headers; returns the HTTP status and the JSON-RPC message (the last `data:` line of
/// an SSE answer).
pub(crate) async fn post(
    url: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (u16, Value) {
    let body = rpc::body(
        7,
        method,
        params,
        json!({"sampling": {}, "elicitation": {"form": {}}}),
    );
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(n) = name {
        req = req.header("mcp-name", n);
    }
    let a = rpc::read(
        req.body(body.to_string())
            .send()
            .await
            .expect("POST to sluice"),
    )
    .await;
    assert!(
        !a.msg.is_null(),
        "sluice answered {method} with non-JSON: {}",
        a.text
    );
    (a.status, a.msg)
}
