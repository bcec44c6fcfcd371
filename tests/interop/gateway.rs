//! Sluice in-process in front of the given upstreams, on 127.0.0.1 port 0, with small timeouts,
//! and a raw modern POST for wire-level checks.

use std::time::Duration;

use serde_json::{json, Value};
use sluice::config::{Config, Overrides};

/// Starts Sluice in front of `upstreams` (name, url) in that order; waits until each was probed
/// and fails the test if one is not healthy.
pub(crate) async fn start(upstreams: &[(&str, String)]) -> sluice::Running {
    // Sluice's warnings go to the test's captured output: shown when a test fails.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "sluice=warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    let mut text = String::from(
        "listen = \"127.0.0.1:0\"\n\n[timeouts]\nconnect_ms = 500\nresponse_ms = 5000\nrefresh_ms = 60000\nshutdown_ms = 500\nlisten_retry_ms = 250\n",
    );
    for (name, url) in upstreams {
        text.push_str(&format!("\n[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\n"));
    }
    let cfg = Config::from_toml(&text, "interop.toml", &Overrides::default()).unwrap_or_else(|e| panic!("config: {e}\n{text}"));
    let running = sluice::start(cfg).await.expect("start sluice");
    tokio::time::timeout(Duration::from_secs(10), running.ready()).await.expect("sluice probed its upstreams within 10 s");
    for up in &running.gateway.upstreams {
        let s = up.status();
        assert!(s.healthy, "upstream {} is not healthy behind sluice: {:?}", up.name, s.error);
    }
    running
}

/// POSTs one modern request (id 7, declaring sampling and form elicitation) to `url` with
/// matching headers; returns the HTTP status and the JSON-RPC message (the last `data:` line of
/// an SSE answer).
pub(crate) async fn post(url: &str, method: &str, name: Option<&str>, mut params: Value) -> (u16, Value) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {"form": {}}},
    });
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(n) = name {
        req = req.header("mcp-name", n);
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let resp = req.body(body.to_string()).send().await.expect("POST to sluice");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("sluice body");
    let json_text = text.lines().rev().find_map(|l| l.strip_prefix("data:")).map(str::trim).unwrap_or(&text).to_owned();
    let msg = serde_json::from_str(&json_text).unwrap_or_else(|e| panic!("sluice answered {method} with non-JSON ({e}): {text}"));
    (status, msg)
}
