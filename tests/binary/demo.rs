//! `sluice demo --walkthrough` as a newcomer runs it, and the wire of the built-in legacy
//! (2025-11-25) demo upstream.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

#[test]
fn the_walkthrough_exits_0_and_shows_every_step() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["demo", "--walkthrough"])
        .env("RUST_LOG", "warn")
        .output()
        .expect("the sluice binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "walkthrough failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("FAILED"), "{stdout}");
    for step in [
        "server/discover is answered by Sluice from its upstreams: complete, with ttlMs and cacheScope",
        "tools/list federates the three upstreams",
        "repo__summarize_repo, in a list result with resultType, ttlMs and cacheScope",
        "tools/call alpha__add is routed",
        "without _meta gets -32602",
        "gets -32020",
        "gets -32022 with exactly data",
        "initialize on the modern wire gets -32601",
        "a notification gets 202 and no JSON-RPC answer",
        "without the sampling capability gets -32021 with exactly data.requiredCapabilities",
        "input_required round keyed pick_files",
        "changes `audience` fails the state check",
        "a new round keyed summarize",
        "complete with the chosen files and the summary",
        "the three requests of the call have different ids",
        "notes__suggest_title (a stdio server Sluice started as a child process) asks the model mid-call: an input_required round",
        "answering the round completes the call with the model's title",
        "replaying the last requestState finds no exchange",
        "Sluice relays its tool error",
        "repo__loop_forever (a loop bomb) asks the model again after every answer: the client receives exactly 3 input_required rounds",
        "the retry answering round 3 gets -31010 with HTTP 400, its message naming the limit",
        "the repo upstream sent exactly 3 sampling asks for the call, and Sluice cancelled the call there",
        "alpha__delete_branch is listed with annotations.destructiveHint; called without the elicitation capability it gets -32021",
        "an approval round first: input_required keyed sluice_approval, a form naming alpha and delete_branch; alpha was not called",
        "answering approve: false gets -31015 with HTTP 400; alpha was still not called",
        "answering approve: true runs the tool",
        "an approval is single use",
    ] {
        assert!(stdout.contains(step), "no step {step:?} in:\n{stdout}");
    }
    assert_eq!(stdout.matches("✓ held").count(), 27, "{stdout}");
}

async fn send(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    sid: Option<&str>,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut r = c
        .request(method, url)
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = sid {
        r = r
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    if let Some(b) = body {
        r = r
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = r.send().await.expect("the legacy demo upstream answers");
    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
    let text = if headers
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"))
    {
        String::new() // a stream: the caller reads it separately
    } else {
        resp.text().await.unwrap_or_default()
    };
    (status, headers, text)
}

#[tokio::test]
async fn the_legacy_demo_upstream_speaks_the_2025_11_25_wire() {
    let up = sluice_testkit::demo::legacy::start(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let url = up.url();
    let c = reqwest::Client::new();
    let post = reqwest::Method::POST;

    // A modern probe without a session: 400 -32600 with a null id, as the legacy SDKs answer.
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
    let (status, _, text) = send(&c, post.clone(), &url, None, Some(discover)).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (status, &v["id"], &v["error"]["code"]),
        (400, &Value::Null, &json!(-32600))
    );

    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let (status, headers, text) = send(&c, post.clone(), &url, None, Some(init)).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (status, &v["result"]["protocolVersion"]),
        (200, &json!("2025-11-25"))
    );
    let sid = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("an Mcp-Session-Id")
        .to_owned();

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, text) = send(&c, post.clone(), &url, Some(&sid), Some(note)).await;
    assert_eq!((status, text.as_str()), (202, ""));

    let (status, headers, _) = send(&c, reqwest::Method::GET, &url, Some(&sid), None).await;
    assert_eq!(
        (
            status,
            headers.get("content-type").map(|v| v.to_str().unwrap())
        ),
        (200, Some("text/event-stream"))
    );

    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let (_, _, text) = send(&c, post.clone(), &url, Some(&sid), Some(list)).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["result"]["tools"][0]["name"], "summarize_repo");
    assert_eq!(v["result"]["tools"][1]["name"], "loop_forever");

    // tools/call: the ask comes on the call's SSE stream, the answer is POSTed back (202).
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "summarize_repo", "arguments": {"audience": "t"}}});
    let mut stream = c
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    let ask: Value = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(2), stream.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(line) = seen.lines().find_map(|l| l.strip_prefix("data: ")) {
            break serde_json::from_str(line).unwrap();
        }
    };
    assert_eq!(ask["method"], "sampling/createMessage");
    assert_eq!(ask["params"]["_meta"]["dev.sluice/inputKey"], "pick_files");
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "not a list"}}});
    let (status, _, _) = send(&c, post.clone(), &url, Some(&sid), Some(answer)).await;
    assert_eq!(status, 202);
    let rest = tokio::time::timeout(Duration::from_secs(2), stream.text())
        .await
        .unwrap()
        .unwrap();
    let last: Value = serde_json::from_str(
        rest.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .next_back()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (&last["id"], &last["result"]["isError"]),
        (&json!(2), &json!(true))
    );
    assert!(last["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("not a JSON array"));

    let (status, _, _) = send(&c, reqwest::Method::DELETE, &url, Some(&sid), None).await;
    assert_eq!(status, 200);
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    let (status, _, _) = send(&c, post, &url, Some(&sid), Some(ping)).await;
    assert_eq!(status, 404, "a request on an ended session gets 404");
}

/// Reads SSE chunks from `stream` until a complete `data:` line holds a JSON message.
async fn next_message(stream: &mut reqwest::Response, seen: &mut String) -> Option<Value> {
    loop {
        if let Some(end) = seen.find("\n\n") {
            let frame: String = seen.drain(..end + 2).collect();
            if let Some(line) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                return Some(serde_json::from_str(line).unwrap());
            }
            continue;
        }
        let chunk = tokio::time::timeout(Duration::from_secs(2), stream.chunk())
            .await
            .unwrap()
            .unwrap()?;
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

#[tokio::test]
async fn the_legacy_loop_forever_asks_after_every_answer_until_cancelled() {
    let up = sluice_testkit::demo::legacy::start(([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let url = up.url();
    let c = reqwest::Client::new();
    let post = reqwest::Method::POST;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "t", "version": "1"}}});
    let (_, headers, _) = send(&c, post.clone(), &url, None, Some(init)).await;
    let sid = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("an Mcp-Session-Id")
        .to_owned();

    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "loop_forever", "arguments": {"topic": "t"}}});
    let mut stream = c
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    for n in 1..=4 {
        let ask = next_message(&mut stream, &mut seen)
            .await
            .expect("another ask");
        assert_eq!(ask["method"], "sampling/createMessage");
        assert_eq!(ask["params"]["_meta"]["dev.sluice/inputKey"], "next");
        assert!(ask["params"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Idea #{n} ")));
        assert_eq!(up.seen.count("ask loop_forever"), n);
        let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "one more"}}});
        let (status, _, _) = send(&c, post.clone(), &url, Some(&sid), Some(answer)).await;
        assert_eq!(status, 202);
    }
    let _ = next_message(&mut stream, &mut seen)
        .await
        .expect("the fifth ask");
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "enough"}});
    let (status, _, _) = send(&c, post, &url, Some(&sid), Some(cancel)).await;
    assert_eq!(status, 202);
    assert_eq!(
        next_message(&mut stream, &mut seen).await,
        None,
        "the call's stream ends, with no result, once cancelled"
    );
    assert_eq!(
        (
            up.seen.count("ask loop_forever"),
            up.seen.count("cancelled loop_forever")
        ),
        (5, 1)
    );
}
