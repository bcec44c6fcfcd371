//! Sluice in-process for governance tests: two API-key principals, a `[budget]` a test chooses,
//! shipped policy files loaded the way `--policy FILE` loads them, and a modern mock upstream
//! whose tools ask for input round after round.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::call::{Call, Reply};
use crate::support::gateway::{keys, ApiKey, Gateway};
use crate::support::modern::{self as e2e, Seen, Spec as MockSpec};
use crate::support::peers::Peer;

/// Alice's API key (principal `alice`, group `eng`).
pub(crate) const ALICE: &str = "alice-governance-key-0123456789";
/// Bob's API key (principal `bob`, no group).
pub(crate) const BOB: &str = "bob-governance-key-9876543210";

/// Starts Sluice in front of `upstreams` (name, url) with the `[budget]` keys `budget` sets
/// and the shipped `policies` (file names under policies/, passed as `--policy` would). Waits
/// until every upstream is healthy.
pub(crate) async fn start(
    upstreams: &[(&str, &str)],
    budget: impl FnOnce(Gateway) -> Gateway,
    policies: &[&str],
) -> sluice::Running {
    let mut g = Gateway::bridge(keys::GOVERNANCE)
        .named("governance.toml")
        .api_key(ApiKey::new(ALICE, "alice").groups(&["eng"]))
        .api_key(ApiKey::new(BOB, "bob"))
        .shipped_policies(policies);
    g = budget(g);
    for (name, url) in upstreams {
        g = g.upstream(name, url);
    }
    g.start().await
}

/// No `[budget]` keys: the defaults.
pub(crate) fn defaults(g: Gateway) -> Gateway {
    g
}

/// Capabilities with everything a governance test needs: sampling with tools, form
/// elicitation (for approval rounds), roots.
pub(crate) fn caps() -> Value {
    json!({"sampling": {"tools": {}}, "elicitation": {"form": {}}, "roots": {}})
}

/// A call of `name` with `arguments` by Alice, declaring [`caps`].
pub(crate) fn alice(name: &str, arguments: Value) -> Call {
    Call::new(name, arguments).token(ALICE).caps(caps())
}

/// The same call by Bob.
pub(crate) fn bob(name: &str, arguments: Value) -> Call {
    Call::new(name, arguments).token(BOB).caps(caps())
}

/// The answer that grants an approval round.
pub(crate) fn approve() -> Value {
    json!({"sluice_approval": {"action": "accept", "content": {"approve": true}}})
}

/// The answer that declines an approval round.
pub(crate) fn decline() -> Value {
    json!({"sluice_approval": {"action": "decline"}})
}

/// Asserts `reply` is an approval round (one input request, Sluice's form elicitation with one
/// boolean field) and gives its message.
pub(crate) fn approval_message(reply: &Reply) -> String {
    let reqs = reply.input_requests();
    assert_eq!(
        reqs.keys().collect::<Vec<_>>(),
        ["sluice_approval"],
        "expected only the approval round: {}",
        reply.msg
    );
    let req = &reqs["sluice_approval"];
    assert_eq!(req["method"], "elicitation/create", "{}", reply.msg);
    assert_eq!(req["params"]["mode"], "form", "{}", reply.msg);
    assert_eq!(
        req["params"]["requestedSchema"]["properties"]["approve"]["type"], "boolean",
        "{}",
        reply.msg
    );
    req["params"]["message"]
        .as_str()
        .expect("an approval message")
        .to_owned()
}

/// Asserts an HTTP status and JSON-RPC error code; gives `error.data`.
pub(crate) fn refused(reply: &Reply, status: u16, code: i64) -> Value {
    assert_eq!(
        (reply.status, reply.msg["error"]["code"].as_i64()),
        (status, Some(code)),
        "expected HTTP {status} with {code}: {}",
        reply.msg
    );
    reply.msg["error"]["data"].clone()
}

/// A sampling input request as a modern upstream writes it.
pub(crate) fn sampling_request(text: &str, max_tokens: u64) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens}})
}

/// A tool descriptor with annotations.
pub(crate) fn annotated_tool(name: &str, annotations: Value) -> String {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object"}, "annotations": annotations})
        .to_string()
}

/// A modern (2026-07-28) mock upstream whose tools are:
///
/// - `loop`: answers every call `input_required` with one sampling ask, forever. Its own
///   `requestState` is `up-<n>` where `n` counts the rounds it was retried through (so a test
///   sees whether its state came back byte for byte);
/// - `shaped`: answers a call without `inputResponses` `input_required` with the input request in
///   `arguments.ask` (under the key `ask`, state `shaped-state`), and a retry `complete` with the
///   answers it got;
/// - `streamed`: like `shaped` without `inputResponses`, but as an SSE stream that sends a
///   progress notification first;
/// - `wipe` (`destructiveHint: true`), `look` (`readOnlyHint: true`) and `echo`: plain tools
///   answered "modern ran <name>".
pub(crate) async fn modern_mock() -> e2e::Mock {
    MockSpec::new("modern")
        .tools(vec![
            e2e::tool("loop"),
            e2e::tool("shaped"),
            e2e::tool("streamed"),
            annotated_tool("wipe", json!({"destructiveHint": true})),
            annotated_tool("look", json!({"readOnlyHint": true})),
            e2e::tool("echo"),
        ])
        .on(|seen: &Seen| {
            if seen.method != "tools/call" {
                return None;
            }
            let p = &seen.params;
            match p["name"].as_str() {
                Some("loop") => {
                    let n = p["requestState"].as_str().and_then(|s| s.strip_prefix("up-")).and_then(|n| n.parse::<u64>().ok());
                    let next = n.map_or(1, |n| n + 1);
                    Some(e2e::ok(
                        &seen.id,
                        json!({"resultType": "input_required", "requestState": format!("up-{next}"),
                            "inputRequests": {"llm": sampling_request(&format!("loop round {next}"), 50)}}),
                    ))
                }
                Some("shaped") if p.get("inputResponses").is_none() => Some(e2e::ok(
                    &seen.id,
                    json!({"resultType": "input_required", "requestState": "shaped-state",
                        "inputRequests": {"ask": p["arguments"]["ask"]}}),
                )),
                Some("streamed") => {
                    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                        "params": {"progressToken": "p1", "progress": 1}});
                    let result = json!({"jsonrpc": "2.0", "id": seen.id, "result": {"resultType": "input_required",
                        "requestState": "streamed-state", "inputRequests": {"ask": p["arguments"]["ask"]}}});
                    Some(e2e::sse(vec![e2e::ev(&progress), e2e::ev(&result)], Duration::ZERO, false))
                }
                Some("shaped") => Some(e2e::ok(
                    &seen.id,
                    json!({"resultType": "complete", "content": [{"type": "text",
                        "text": format!("shaped got {}", p["inputResponses"])}]}),
                )),
                _ => None,
            }
        })
        .start()
        .await
}

/// How many `tools/call` of `tool` the mock received.
pub(crate) fn calls_of(mock: &e2e::Mock, tool: &str) -> Vec<Seen> {
    mock.seen("tools/call")
        .into_iter()
        .filter(|s| s.params["name"] == tool)
        .collect()
}

/// Waits (at most 2 s) until the py1 upstream recorded, under `tag`, one of `ends`; gives all it
/// recorded.
pub(crate) async fn wait_any(peer: &Peer, tag: &str, ends: &[&str]) -> Vec<String> {
    peer.wait_any(tag, ends).await
}
