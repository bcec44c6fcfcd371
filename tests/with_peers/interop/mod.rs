//! Interop through Sluice with the official SDKs (issue 2, item 8 and its acceptance points).
//!
//! ```text
//!  Python mcp==2.3.0 client ─┐              ┌─ py: Python mcp==2.3.0 upstream (one process, shared)
//!  (2026-07-28 mode)         ├─ Sluice ─────┤
//!  rmcp 3.11 client ─────────┘  (in-proc)   └─ rs: rmcp 3.11 upstream (in-process)
//!  (Discover mode)                          (or bare: a spec-breaking upstream)
//! ```
//!
//! Everything binds 127.0.0.1 port 0. The Python peers come from `eval "$(bash scripts/peers.sh)"`
//! (`SLUICE_PY2`); without it these tests fail and say so. Peer scripts live in `tests/peers/`.

mod bare_upstream;
mod gateway;
mod http2;
mod rmcp_upstream;

use serde_json::{json, Value};

use crate::support::peers::{self, Run};
use crate::support::rmcp_client;

/// The federated tool list with upstreams `py` then `rs`: config order, each upstream's own order.
fn expected_tools() -> Vec<String> {
    let py = [
        "echo",
        "add",
        "trace_seen",
        "ask_llm",
        "ask_llm_legacy",
        "ask_raw",
    ]
    .map(|t| format!("py__{t}"));
    let rs = rmcp_upstream::TOOLS.map(|t| format!("rs__{t}"));
    py.into_iter().chain(rs).collect()
}

/// Sluice in front of the shared Python upstream (`py`) and a fresh rmcp upstream (`rs`).
async fn two_upstreams() -> (sluice::Running, rmcp_upstream::RmcpUpstream) {
    let py = peers::py2().await;
    let rs = rmcp_upstream::start().await;
    let gw = gateway::start(&[("py", py.url.clone()), ("rs", rs.url())]).await;
    (gw, rs)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_lists_prefixed_tools_stably_and_calls_both_upstreams_including_input_required(
) {
    let (gw, _rs) = two_upstreams().await;
    let plan = json!({
        "url": gw.url(),
        "expect_tools": expected_tools(),
        "calls": [
            {"name": "py__echo", "arguments": {"text": "hello"}, "expect": "hello"},
            {"name": "py__add", "arguments": {"a": 2, "b": 3}, "expect": "5"},
            {"name": "py__ask_llm", "arguments": {"prompt": "py-q1"}, "expect": "llm said: ECHO[py-q1] (model=fake-llm-py)"},
            {"name": "py__ask_raw", "arguments": {"prompt": "py-q2"}, "expect": "raw said: ECHO[py-q2]"},
            {"name": "rs__reverse", "arguments": {"text": "sluice"}, "expect": "eciuls"},
            {"name": "rs__multiply", "arguments": {"a": 6, "b": 7}, "expect": "42"},
            {"name": "rs__confirm", "arguments": {"question": "ship it?"}, "expect": "confirmed: yes-from-python (asked: ship it?)"},
        ],
    });
    let Run {
        status,
        summary,
        transcript,
        ..
    } = peers::py_client(&plan).await;
    assert!(
        status.success(),
        "the Python client's checks failed: {:#}\n{transcript}",
        summary["failures"]
    );
    assert_eq!(summary["protocol_version"], "2026-07-28", "{transcript}");
    assert_eq!(
        summary["discover"]["server_info"]["name"], "sluice",
        "{transcript}"
    );
    assert!(
        strings(&summary["discover"]["supported_versions"]).contains(&"2026-07-28".to_owned()),
        "{transcript}"
    );
    assert_eq!(
        strings(&summary["tools_first"]),
        expected_tools(),
        "{transcript}"
    );
    assert_eq!(
        strings(&summary["tools_second"]),
        expected_tools(),
        "{transcript}"
    );
    // Each input_required round reached the client's own callbacks exactly once.
    assert_eq!(
        strings(&summary["sampled"]),
        ["py-q1", "py-q2"],
        "{transcript}"
    );
    assert_eq!(strings(&summary["elicited"]), ["ship it?"], "{transcript}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_lists_prefixed_tools_stably_and_calls_both_upstreams_including_input_required()
{
    let (gw, _rs) = two_upstreams().await;
    let asked = rmcp_client::Asked::default();
    let client = rmcp_client::connect(&gw.url(), asked.clone(), false).await;
    let info = client.peer().peer_info().expect("discover result");
    assert_eq!(
        info.protocol_version,
        rmcp::model::ProtocolVersion::V_2026_07_28
    );
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("sluice")
    );

    assert_eq!(rmcp_client::tool_names(&client).await, expected_tools());
    assert_eq!(
        rmcp_client::tool_names(&client).await,
        expected_tools(),
        "the second listing changed order"
    );

    for (name, args, expect) in [
        ("py__echo", json!({"text": "hello"}), "hello"),
        ("py__add", json!({"a": 2, "b": 3}), "5"),
        (
            "py__ask_llm",
            json!({"prompt": "rs-q1"}),
            "llm said: ECHO-RS[rs-q1] (model=fake-llm-rs)",
        ),
        (
            "py__ask_raw",
            json!({"prompt": "rs-q2"}),
            "raw said: ECHO-RS[rs-q2]",
        ),
        ("rs__reverse", json!({"text": "sluice"}), "eciuls"),
        ("rs__multiply", json!({"a": 6, "b": 7}), "42"),
        (
            "rs__confirm",
            json!({"question": "ship it?"}),
            "confirmed: yes-from-rust (asked: ship it?)",
        ),
    ] {
        let (text, is_error) = rmcp_client::call(&client, name, args).await;
        assert!(
            !is_error && text.contains(expect),
            "{name} answered {text:?} (isError {is_error}); expected it to contain {expect:?}"
        );
    }
    assert_eq!(asked.sampled(), ["rs-q1", "rs-q2"]);
    assert_eq!(asked.elicited(), ["ship it?"]);
    let _ = client.cancel().await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_succeed_through_sluice_when_the_upstream_omits_result_type_and_cache_hints() {
    let bare = bare_upstream::start().await;
    let gw = gateway::start(&[("bare", bare.url())]).await;
    let url = gw.url();

    // On the wire: Sluice's answers hold the spec the upstream's do not.
    for (method, name, params) in [
        ("server/discover", None, json!({})),
        ("tools/list", None, json!({})),
        (
            "tools/call",
            Some("shout"),
            json!({"name": "shout", "arguments": {"text": "quiet"}}),
        ),
    ] {
        let (status, msg) = gateway::post(&url, method, name, params).await;
        let r = &msg["result"];
        assert_eq!(status, 200, "{method}: {msg}");
        assert_eq!(r["resultType"], "complete", "{method}: {msg}");
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sluice",
            "{method}: {msg}"
        );
        if method != "tools/call" {
            assert!(r["ttlMs"].is_u64(), "{method} without ttlMs: {msg}");
            assert!(
                matches!(r["cacheScope"].as_str(), Some("public" | "private")),
                "{method} without cacheScope: {msg}"
            );
        }
    }

    let plan = |url: &str| {
        json!({
            "url": url,
            "expect_tools": bare_upstream::TOOLS,
            "calls": [
                {"name": "shout", "arguments": {"text": "quiet"}, "expect": "QUIET"},
                {"name": "count", "arguments": {"text": "abcd"}, "expect": "4"},
            ],
        })
    };
    // Control: pointed straight at the bare upstream, the same client refuses its tools/list.
    let (through, straight) = (plan(&url), plan(&bare.url()));
    let (
        Run {
            status,
            summary,
            transcript,
            ..
        },
        Run {
            status: direct_status,
            summary: direct,
            ..
        },
    ) = tokio::join!(peers::py_client(&through), peers::py_client(&straight));
    assert!(
        status.success(),
        "the Python client failed through sluice: {:#}\n{transcript}",
        summary["failures"]
    );
    assert!(
        !direct_status.success() && direct["failures"].to_string().contains("ttlMs"),
        "the bare upstream no longer breaks the Python client: {direct:#}"
    );

    let client = rmcp_client::connect(&url, rmcp_client::Asked::default(), false).await;
    assert_eq!(rmcp_client::tool_names(&client).await, bare_upstream::TOOLS);
    assert_eq!(
        rmcp_client::call(&client, "shout", json!({"text": "quiet"})).await,
        ("QUIET".to_owned(), false)
    );
    let _ = client.cancel().await;
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_required_rounds_are_sealed_by_sluice_and_upstream_state_returns_byte_for_byte() {
    let (gw, rs) = two_upstreams().await;
    let url = gw.url();
    let call = |name: &str, extra: Value| {
        let mut p = json!({"name": name, "arguments": {"question": "ship it?", "prompt": "p"}});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        p
    };

    // rmcp upstream: Sluice's round equals the upstream's own one, but for serverInfo and the
    // requestState, which Sluice seals (carrying the upstream's byte for byte).
    let (_, direct) = gateway::post(
        &rs.url(),
        "tools/call",
        Some("confirm"),
        call("confirm", json!({})),
    )
    .await;
    let (status, round) = gateway::post(
        &url,
        "tools/call",
        Some("rs__confirm"),
        call("rs__confirm", json!({})),
    )
    .await;
    assert_eq!((status, &round["id"]), (200, &json!(7)), "{round}");
    for member in ["resultType", "inputRequests"] {
        assert_eq!(
            round["result"][member], direct["result"][member],
            "{member} changed on the way: {round} vs {direct}"
        );
    }
    assert_eq!(
        direct["result"]["requestState"],
        rmcp_upstream::CONFIRM_STATE
    );
    assert_ne!(
        round["result"]["requestState"],
        rmcp_upstream::CONFIRM_STATE,
        "Sluice seals every round"
    );
    assert_eq!(
        round["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "sluice"
    );
    let answer = json!({"inputResponses": {"answer": {"action": "accept", "content": {"answer": "by-hand"}}}, "requestState": round["result"]["requestState"]});
    let (status, done) = gateway::post(
        &url,
        "tools/call",
        Some("rs__confirm"),
        call("rs__confirm", answer),
    )
    .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "confirmed: by-hand (asked: ship it?)",
        "{done}"
    );

    // Python upstream: its requestState is sealed by the SDK, so only an unchanged echo completes.
    let (status, round) = gateway::post(
        &url,
        "tools/call",
        Some("py__ask_raw"),
        call("py__ask_raw", json!({})),
    )
    .await;
    assert_eq!(status, 200, "{round}");
    assert_eq!(round["result"]["resultType"], "input_required", "{round}");
    assert_eq!(
        round["result"]["inputRequests"]["llm"]["method"], "sampling/createMessage",
        "{round}"
    );
    let state = round["result"]["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    let sample =
        json!({"role": "assistant", "content": {"type": "text", "text": "by-hand"}, "model": "m"});
    let retry = |state: &str| {
        call(
            "py__ask_raw",
            json!({"inputResponses": {"llm": sample}, "requestState": state}),
        )
    };
    let (status, done) =
        gateway::post(&url, "tools/call", Some("py__ask_raw"), retry(&state)).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "raw said: by-hand (state=raw-round-1)",
        "{done}"
    );
    // A tampered state fails Sluice's own check first: -32602 "tampered" with the client's id.
    let (status, refused) = gateway::post(
        &url,
        "tools/call",
        Some("py__ask_raw"),
        retry(&format!("{state}x")),
    )
    .await;
    assert_eq!(
        (refused["id"].clone(), refused["error"]["code"].clone()),
        (json!(7), json!(-32602)),
        "{refused}"
    );
    assert_eq!(refused["error"]["data"]["reason"], "tampered", "{refused}");
    assert_eq!(status, 400, "{refused}");
    gw.stop().await;
}
