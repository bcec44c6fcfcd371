//! Real 2024-11-05 HTTP+SSE clients through Sluice (issue 29, point 6): the Python SDK's
//! `sse_client` (`mcp==1.30.0` and `mcp==2.3.0`) and the MCP Inspector's CLI (`--transport sse`)
//! open `/sse` with an API key, list the tools and call them; the Python clients' sampling
//! and elicitation callbacks answer mid-call asks of a 2026-07-28 upstream (bridge B) and of a
//! 2025-11-25 one (bridge A behind bridge B), every one of them arriving on the SSE stream. Refused: no key
//! (401), another principal's session (404), an unknown one (404).

use serde_json::{json, Value};

use crate::support::gateway::{Gateway, Upstream, ALICE_KEY, BOB_KEY};
use crate::support::peers;

/// Sluice (API keys for alice and bob) in front of the shared `py` (`mcp==2.3.0`, kept on its
/// 2026-07-28 wire: its rounds are bridge B's) and `py1` (`mcp==1.30.0`, 2025-11-25: its
/// mid-call asks are bridge A's) upstreams.
async fn gateway() -> sluice::Running {
    let (py2, py1) = tokio::join!(peers::py2(), peers::py1());
    let py = Upstream::new("py", &py2.url).key("era", "2026-07-28");
    Gateway::bridge_b()
        .two_keys()
        .upstream_spec(py)
        .upstream("py1", &py1.url)
        .start()
        .await
}

fn sse_url(gw: &sluice::Running) -> String {
    gw.url().replace("/mcp", "/sse")
}

/// Lists, a plain call, a bridge B round, two bridge A sampling rounds and a bridge A
/// elicitation; the sampling callback answers `ECHO1[<prompt>]` from `fake-llm-sse`, the
/// elicitation callback `accept yes-over-sse`.
fn plan(url: &str, token: Option<&str>, tag: &str) -> Value {
    let e = |p: &str| format!("ECHO1[{p}] (model=fake-llm-sse)");
    json!({
        "url": url,
        "token": token,
        "calls": [
            {"name": "py__echo", "arguments": {"text": "hello"}, "expect": ["hello"]},
            {"name": "py__ask_llm", "arguments": {"prompt": format!("{tag}-llm")}, "expect": [format!("llm said: {}", e(&format!("{tag}-llm")))]},
            {"name": "py1__two_rounds", "arguments": {"topic": tag, "tag": format!("{tag}-two")},
             "expect": [format!("first: {}", e(&format!("pick files for {tag}"))),
                        format!("second: {}", e(&format!("summarize {tag} given {}", e(&format!("pick files for {tag}")))))]},
            {"name": "py1__elicit", "arguments": {"question": format!("{tag} ok?"), "tag": format!("{tag}-elicit")},
             "expect": [format!("elicit[{tag} ok?]: accept yes-over-sse")]},
        ],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sse_clients_list_and_call_through_sluice_with_their_sampling_answered_mid_call()
{
    let gw = gateway().await;
    for (var, tag) in [("SLUICE_PY1", "sse1"), ("SLUICE_PY2", "sse2")] {
        let run = peers::py_sse_client(var, &plan(&sse_url(&gw), Some(ALICE_KEY), tag)).await;
        assert!(
            run.success,
            "{var}: {:#}\n{}",
            run.summary["failures"], run.transcript
        );
        assert_eq!(run.summary["server_name"], "sluice", "{}", run.transcript);
        let tools: Vec<&str> = run.summary["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            tools.contains(&"py__ask_llm") && tools.contains(&"py1__two_rounds"),
            "{tools:?}"
        );
        let asked: Vec<&str> = run.summary["asked"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a["prompt"].as_str())
            .collect();
        assert_eq!(
            asked.len(),
            3,
            "one bridge B round and two bridge A rounds reached the callback: {asked:?}"
        );
        assert_eq!(asked[0], format!("{tag}-llm"));
        assert_eq!(
            run.summary["elicited"],
            json!([format!("{tag} ok?")]),
            "the 2025-11-25 upstream's elicitation reached the callback"
        );
        // The transport on the wire: one GET stream, every message a POST answered 202.
        let http = run.summary["http"].as_array().unwrap();
        assert_eq!(http[0]["verb"], "GET", "{}", run.transcript);
        assert!(
            http[0]["content_type"]
                .as_str()
                .unwrap()
                .starts_with("text/event-stream"),
            "{}",
            run.transcript
        );
        assert!(
            http[1..]
                .iter()
                .all(|h| h["verb"] == "POST" && h["status"] == 202),
            "{}",
            run.transcript
        );
    }

    // Without a key the stream is not opened.
    let anonymous = peers::py_sse_client("SLUICE_PY1", &plan(&sse_url(&gw), None, "anon")).await;
    assert!(
        !anonymous.success && anonymous.summary["calls"] == json!([]),
        "{}",
        anonymous.transcript
    );
    assert_eq!(
        anonymous.summary["http"][0]["status"], 401,
        "{}",
        anonymous.transcript
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_cli_lists_and_calls_over_sse_with_an_api_key() {
    let gw = gateway().await;
    let url = sse_url(&gw);
    let auth = format!("Authorization: Bearer {ALICE_KEY}");
    let listed = peers::inspector(&[
        &url,
        "--transport",
        "sse",
        "--header",
        &auth,
        "--method",
        "tools/list",
    ])
    .await;
    assert!(listed.success, "{}", listed.transcript);
    let tools: Value = serde_json::from_str(&listed.stdout)
        .unwrap_or_else(|e| panic!("tools/list is not JSON ({e}): {}", listed.transcript));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"py__echo") && names.contains(&"py1__two_rounds"),
        "{names:?}"
    );

    let args = [
        "--transport",
        "sse",
        "--header",
        &auth,
        "--method",
        "tools/call",
        "--tool-name",
        "py__echo",
        "--tool-arg",
        "text=via-inspector",
    ];
    let called = peers::inspector(&[&[url.as_str()][..], &args[..]].concat()).await;
    assert!(called.success, "{}", called.transcript);
    let result: Value = serde_json::from_str(&called.stdout)
        .unwrap_or_else(|e| panic!("tools/call is not JSON ({e}): {}", called.transcript));
    assert_eq!(result["content"][0]["text"], "via-inspector", "{result}");

    // Another principal's key gets its own session; no key, none at all.
    let bob = peers::inspector(&[
        &url,
        "--transport",
        "sse",
        "--header",
        &format!("Authorization: Bearer {BOB_KEY}"),
        "--method",
        "tools/list",
    ])
    .await;
    assert!(bob.success, "{}", bob.transcript);
    let anonymous = peers::inspector(&[&url, "--transport", "sse", "--method", "tools/list"]).await;
    assert!(!anonymous.success, "no key: {}", anonymous.transcript);
    gw.stop().await;
}
