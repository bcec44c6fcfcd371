//! Sluice in-process for governance tests: two API-key principals, a `[budget]` a test chooses,
//! shipped policy files loaded the way `--policy FILE` loads them, and a modern mock upstream
//! whose tools ask for input round after round.

use std::time::Duration;

use serde_json::{json, Value};
use sluice::config::{Config, Overrides};

use crate::e2e::{self, MockSpec, Seen};
use crate::gateway::{Call, Reply};

/// Alice's API key (principal `alice`, group `eng`).
pub(crate) const ALICE: &str = "alice-governance-key-0123456789";
/// Bob's API key (principal `bob`, no group).
pub(crate) const BOB: &str = "bob-governance-key-9876543210";

/// The sealing key of every test gateway.
const STATE_KEY: &str = "1:Z292ZXJuYW5jZS10ZXN0cy1zdGF0ZS1rZXktMzJieSE=";

/// Starts Sluice in front of `upstreams` (name, url) with `budget` (lines of the `[budget]`
/// table, may hold `[[budget.override]]` tables after them) and the shipped `policies` (file
/// names under policies/, passed as `--policy` would). Waits until every upstream is healthy.
pub(crate) async fn start(upstreams: &[(&str, &str)], budget: &str, policies: &[&str]) -> sluice::Running {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "sluice=warn".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    let hash = sluice::auth::api_keys::hash_key;
    let mut text = format!(
        "listen = \"127.0.0.1:0\"\n\n[timeouts]\nconnect_ms = 500\nresponse_ms = 5000\nrefresh_ms = 60000\nshutdown_ms = 500\nlisten_retry_ms = 250\n\n\
         [bridge]\ngather_ms = 20\npark_ms = 10000\nsession_idle_ms = 60000\n\n[state]\nkeys = [\"{STATE_KEY}\"]\n\n\
         [auth]\n[[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"alice\"\ngroups = [\"eng\"]\n[[auth.api_keys]]\nsha256 = \"{}\"\nprincipal = \"bob\"\n\n\
         [budget]\n{budget}\n",
        hash(ALICE),
        hash(BOB)
    );
    for (name, url) in upstreams {
        text.push_str(&format!("\n[[upstream]]\nname = \"{name}\"\nurl = \"{url}\"\n"));
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let over = Overrides { policies: policies.iter().map(|p| dir.join(p).display().to_string()).collect(), ..Default::default() };
    let cfg = Config::from_toml(&text, "governance.toml", &over).unwrap_or_else(|e| panic!("config: {e}\n{text}"));
    let running = sluice::start(cfg).await.unwrap_or_else(|e| panic!("sluice starts: {e}"));
    tokio::time::timeout(Duration::from_secs(10), running.ready()).await.expect("sluice probed its upstreams within 10 s");
    for up in &running.gateway.upstreams {
        let s = up.status();
        assert!(s.healthy, "upstream {} is not healthy behind sluice: {:?}", up.name, s.error);
    }
    running
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
    assert_eq!(reqs.keys().collect::<Vec<_>>(), ["sluice_approval"], "expected only the approval round: {}", reply.msg);
    let req = &reqs["sluice_approval"];
    assert_eq!(req["method"], "elicitation/create", "{}", reply.msg);
    assert_eq!(req["params"]["mode"], "form", "{}", reply.msg);
    assert_eq!(req["params"]["requestedSchema"]["properties"]["approve"]["type"], "boolean", "{}", reply.msg);
    req["params"]["message"].as_str().expect("an approval message").to_owned()
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
                    Some(e2e::Reply::Sse { chunks: vec![e2e::ev(&progress), e2e::ev(&result)], every: Duration::ZERO, hang: false })
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
    mock.seen("tools/call").into_iter().filter(|s| s.params["name"] == tool).collect()
}

/// Waits (at most 2 s) until the py1 upstream recorded, under `tag`, one of `ends`; gives all it
/// recorded.
pub(crate) async fn wait_any(peer: &crate::peers::Peer, tag: &str, ends: &[&str]) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let seen = peer.events(tag);
        if seen.iter().any(|e| ends.contains(&e.as_str())) {
            return seen;
        }
        assert!(std::time::Instant::now() < deadline, "the upstream recorded none of {ends:?} for {tag:?} within 2 s: {seen:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
