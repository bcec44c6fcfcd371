//! The canary test (issue 5 item 3): no value that travels through Sluice ever reaches its
//! output, at any log level.
//!
//! Sluice runs as a separate process (the built `sluice` binary, `serve --config FILE`,
//! `RUST_LOG=trace`, audit records on stderr) in front of a modern upstream (a mock in this
//! process) and a legacy one (tests/peers/py1_upstream.py on `mcp==1.30.0`, from
//! `eval "$(bash scripts/peers.sh)"`). Unique canary strings travel every path Sluice has:
//!
//! - modern upstream: tool arguments (one mirrored into `Mcp-Param-Region` through an
//!   `x-mcp-header` argument), an `input_required` round's elicitation message, sampling
//!   messages and system prompt, the upstream's `requestState` (sealed inside Sluice's), the
//!   client's elicitation and sampling answers, tool results and resource contents;
//! - bridge A (legacy upstream): tool arguments, a sampling ask's messages and system prompt, an
//!   elicitation's message, and the client's answers, each coming back in a tool result;
//! - bridge B (a 2025-11-25 client on the same endpoint): tool arguments, the server→client
//!   elicitation and sampling requests on the POST's SSE stream, the client's answers POSTed
//!   back, and the result.
//!
//! Then the process's whole stdout and stderr are searched for each canary in plain,
//! JSON-escaped, percent-encoded and Base64 form (standard and URL-safe, each with 0, 1 and 2
//! leading bytes so every alignment is covered, the alignment-dependent edge characters
//! stripped), and none is found, while the audit records in the same output show the methods,
//! names and input keys.
//!
//! It fails if a debug log of arguments is added. With
//! `tracing::debug!(arguments = ?env.param("arguments"), "tools/call arguments");` put into
//! `src/pipeline.rs` just before `validated(..)` is called (then removed again), it failed with:
//!
//! ```text
//! 5 of 19 canaries leaked:
//! canary "canary-modern-arg-3f55167570f0 \"q\"/é+&" (modern tool argument) leaked into sluice's output as plain core:
//!   2026-11-29T23:03:42.777281Z DEBUG sluice::pipeline: tools/call arguments arguments=Some("{\"region\":\"canary-modern-header-3f55167570f0 \\\"q\\\"/é+&\",\"note\":\"canary-modern-arg-3f55167570f0 \\\"q\\\"/é+&\"}")
//! canary "canary-modern-header-3f55167570f0 \"q\"/é+&" (modern x-mcp-header argument) leaked into sluice's output as plain core:
//!   (the same line)
//! canary "canary-legacy-arg-3f55167570f0 \"q\"/é+&" (bridge A tool argument) leaked into sluice's output as plain core:
//!   2026-11-29T23:03:42.796887Z DEBUG sluice::pipeline: tools/call arguments arguments=Some("{\"text\":\"canary-legacy-arg-3f55167570f0 …
//! canary "canary-legacy-system-3f55167570f0 \"q\"/é+&" (bridge A system prompt) leaked into sluice's output as plain core: …
//! canary "canary-legacy-question-3f55167570f0 \"q\"/é+&" (bridge A elicitation message) leaked into sluice's output as plain core: …
//! ```

use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine as _;
use serde_json::{json, Value};

use crate::support::gateway::Gateway;
use crate::support::legacy_client::Legacy;
use crate::support::modern::{self, Reply};
use crate::support::peers;
use crate::support::process::Sluice;
use crate::support::rpc::{body, call, http, request, send};

/// One canary: a unique core (letters, digits and dashes) and a tail whose characters change
/// under JSON escaping and percent-encoding.
struct Canary {
    what: &'static str,
    text: String,
}

/// All canaries of one run.
struct Canaries(Vec<Canary>);

impl Canaries {
    fn new(kinds: &[(&'static str, &'static str)]) -> Canaries {
        let nonce = format!(
            "{:x}{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        Canaries(
            kinds
                .iter()
                .map(|(slug, what)| Canary {
                    what,
                    text: format!("canary-{slug}-{nonce} \"q\"/é+&"),
                })
                .collect(),
        )
    }

    fn get(&self, what: &str) -> String {
        self.0
            .iter()
            .find(|c| c.what == what)
            .map(|c| c.text.clone())
            .unwrap_or_else(|| panic!("no canary {what}"))
    }
}

/// Every form a canary could take in a log: plain, its alphanumeric core, JSON-escaped,
/// percent-encoded, and Base64 (standard and URL-safe) at every alignment.
fn forms(c: &str) -> Vec<(&'static str, String)> {
    let core = c.split(' ').next().unwrap().to_owned();
    let json = serde_json::to_string(c).unwrap();
    let mut out = vec![
        ("plain", c.to_owned()),
        ("plain core", core),
        ("JSON-escaped", json[1..json.len() - 1].to_owned()),
        (
            "JSON-escaped (ASCII only)",
            c.chars()
                .map(|ch| {
                    if ch.is_ascii() {
                        ch.to_string()
                    } else {
                        format!("\\u{:04x}", ch as u32)
                    }
                })
                .collect::<String>()
                .replace('"', "\\\""),
        ),
        ("percent-encoded", percent(c, false)),
        ("percent-encoded (form)", percent(c, true)),
    ];
    let bytes = c.as_bytes();
    for lead in 0..3usize {
        let mut buf = vec![0xA5u8; lead];
        buf.extend_from_slice(bytes);
        // Characters fully determined by the canary's bits: from ceil(8*lead/6) to floor(8*(lead+n)/6).
        let (from, to) = ((8 * lead).div_ceil(6), 8 * (lead + bytes.len()) / 6);
        for (name, engine) in [("Base64", &STANDARD), ("Base64url", &URL_SAFE)] {
            let enc = engine.encode(&buf);
            out.push((name, enc[from..to].to_owned()));
        }
    }
    out
}

fn percent(s: &str, plus_for_space: bool) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b' ' if plus_for_space => "+".into(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The modern mock: `locate(region, note)` (region mirrored in `Mcp-Param-Region`), `ask`
/// (one round: an elicitation and a sampling ask with a system prompt, its own requestState),
/// and the resource `mock://alpha/doc`.
async fn modern(c: &Arc<Canaries>) -> modern::Mock {
    let tools = json!([
        {"name": "locate", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}, "note": {"type": "string"}}}},
        modern::tool_args("ask", &["question"]),
        modern::tool_args("escaped", &["question"]),
        modern::tool_args("malformed", &["question"]),
        modern::tool_args("erroring", &["question"]),
    ]);
    let resources = json!([{"uri": "mock://alpha/doc", "name": "doc"}]);
    let c = c.clone();
    modern::start("alpha", tools, resources, move |r| {
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        match (r.method.as_str(), r.params["name"].as_str().unwrap_or("")) {
            ("tools/call", "locate") => {
                let region = r.headers.get("mcp-param-region").and_then(|v| sluice::mcp::headers::decode(v).ok());
                if region.as_deref() != r.params["arguments"]["region"].as_str() {
                    return Reply::Error(400, -32020, "Mcp-Param-Region does not mirror the argument");
                }
                Reply::Result(text(format!("located: {}", c.get("modern tool result"))))
            }
            ("tools/call", "ask") if r.params.get("inputResponses").is_none() => Reply::Result(json!({
                "resultType": "input_required",
                "inputRequests": {
                    "answer": {"method": "elicitation/create", "params": {"mode": "form", "message": c.get("modern elicitation message"),
                        "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}},
                    "llm": {"method": "sampling/createMessage", "params": {"maxTokens": 20, "systemPrompt": c.get("modern system prompt"),
                        "messages": [{"role": "user", "content": {"type": "text", "text": c.get("modern sampling message")}}]}}
                },
                "requestState": c.get("modern requestState"),
            })),
            ("tools/call", "ask") => {
                if r.params["requestState"].as_str() != Some(c.get("modern requestState").as_str()) {
                    return Reply::Error(400, -32602, "requestState was not given back byte for byte");
                }
                let answer = r.params["inputResponses"]["answer"]["content"]["answer"].as_str().unwrap_or("-").to_owned();
                let llm = r.params["inputResponses"]["llm"]["content"]["text"].as_str().unwrap_or("-").to_owned();
                Reply::Result(text(format!("asked: {answer} | {llm} | {}", c.get("modern round result"))))
            }
            // Hostile shapes (issue 10): an escaped resultType (sealed and judged all the same), a
            // malformed ask (the upstream's 502), an error message carrying content.
            ("tools/call", "escaped") if r.params.get("inputResponses").is_none() => {
                let result = json!({"inputRequests": {"q": {"method": "elicitation/create", "params": {"mode": "form",
                    "message": c.get("hostile elicitation message"), "requestedSchema": {"type": "object"}}}},
                    "requestState": c.get("hostile requestState")});
                // The key and the value both escaped: every JSON reader reads `resultType: input_required`.
                let text = json!({"jsonrpc": "2.0", "id": r.id, "result": result}).to_string();
                let text = text.replacen("\"result\":{", "\"result\":{\"result\\u0054ype\":\"input\\u005frequired\",", 1);
                Reply::Raw(200, "application/json", bytes::Bytes::from(text))
            }
            ("tools/call", "escaped") => Reply::Result(text("escaped done".into())),
            ("tools/call", "malformed") => Reply::Result(json!({"resultType": "input_required", "inputRequests": {"llm": {
                "method": "sampling/createMessage", "params": {"maxTokens": 1.5, "systemPrompt": c.get("malformed ask system prompt"),
                "messages": [{"role": "user", "content": {"type": "text", "text": c.get("malformed ask message")}}]}}}})),
            ("tools/call", "erroring") => {
                let e = json!({"jsonrpc": "2.0", "id": r.id, "error": {"code": -32099, "message": c.get("upstream error message"),
                    "data": {"detail": c.get("upstream error data")}}});
                Reply::Raw(200, "application/json", bytes::Bytes::from(e.to_string()))
            }
            ("resources/read", _) => Reply::Result(json!({"contents": [{"uri": "mock://alpha/doc", "mimeType": "text/plain",
                "text": c.get("resource contents")}], "ttlMs": 0, "cacheScope": "private"})),
            _ => Reply::Error(200, -32602, "unknown"),
        }
    })
    .await
}

const CAPS: fn() -> Value = || json!({"sampling": {}, "elicitation": {"form": {}}});

/// Calls `name` with `args`; answers each round from `answer` until complete; gives the text.
/// Every sealed value the client was handed (requestState, Mcp-Session-Id): none may be logged.
static TOKENS: Mutex<Vec<String>> = Mutex::new(Vec::new());

async fn modern_call(
    h: &reqwest::Client,
    url: &str,
    name: &str,
    args: Value,
    answer: impl Fn(&str, &Value) -> Value,
) -> String {
    let mut b = body(
        1,
        "tools/call",
        json!({"name": name, "arguments": args}),
        CAPS(),
    );
    let mut extra: Vec<(String, String)> = Vec::new();
    if let Some(region) = args.get("region").and_then(Value::as_str) {
        extra.push((
            "mcp-param-region".into(),
            sluice::mcp::headers::encode(region).into_owned(),
        ));
    }
    for _round in 0..4 {
        let hdrs: Vec<(&str, &str)> = extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let a = send(request(h, url, &b, None, &hdrs)).await;
        assert_eq!(a.status, 200, "{name}: {}", a.text);
        let result = &a.msg["result"];
        if result["resultType"] == "complete" {
            assert_ne!(result["isError"], true, "{name}: {}", a.text);
            return result["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned();
        }
        assert_eq!(result["resultType"], "input_required", "{name}: {}", a.text);
        let responses: serde_json::Map<String, Value> = result["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, req)| {
                (
                    k.clone(),
                    answer(req["method"].as_str().unwrap_or(""), &req["params"]),
                )
            })
            .collect();
        b["params"]["inputResponses"] = Value::Object(responses);
        b["params"]["requestState"] = result["requestState"].clone();
        TOKENS
            .lock()
            .unwrap()
            .push(result["requestState"].as_str().unwrap_or("").to_owned());
    }
    panic!("{name}: more than 4 rounds");
}

/// A 2025-11-25 client (bridge B): initialize, then `tools/call name(args)`, answering the
/// server→client requests on the POST's SSE stream from `answer`; gives the result text.
async fn legacy_client_call(
    h: &reqwest::Client,
    url: &str,
    name: &str,
    args: Value,
    answer: impl Fn(&str, &Value) -> Value,
) -> String {
    let mut c = Legacy::with(h, url, None);
    c.initialize(json!({"sampling": {}, "elicitation": {}}))
        .await;
    TOKENS.lock().unwrap().push(c.sid());
    let mut sse = c
        .stream(1, "tools/call", json!({"name": name, "arguments": args}))
        .await;
    assert_eq!(sse.status, 200);
    loop {
        let msg = sse.next_message().await;
        if let Some(method) = msg["method"].as_str() {
            if msg.get("id").is_some() {
                let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": answer(method, &msg["params"])});
                assert_eq!(
                    c.post(&reply).await.status(),
                    202,
                    "{name}: the answer to {method}"
                );
            }
            continue;
        }
        if msg["id"] == 1 {
            assert!(msg.get("error").is_none(), "{name}: {msg}");
            assert_ne!(msg["result"]["isError"], true, "{name}: {msg}");
            return msg["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_canary_reaches_sluices_output_on_any_path() {
    let c = Arc::new(Canaries::new(&[
        ("modern-arg", "modern tool argument"),
        ("modern-header", "modern x-mcp-header argument"),
        ("modern-result", "modern tool result"),
        ("modern-elicit-msg", "modern elicitation message"),
        ("modern-sampling-msg", "modern sampling message"),
        ("modern-system", "modern system prompt"),
        ("modern-state", "modern requestState"),
        ("modern-elicit-answer", "modern elicitation answer"),
        ("modern-sampling-answer", "modern sampling answer"),
        ("modern-round-result", "modern round result"),
        ("resource", "resource contents"),
        ("legacy-arg", "bridge A tool argument"),
        ("legacy-system", "bridge A system prompt"),
        ("legacy-sampling-answer", "bridge A sampling answer"),
        ("legacy-question", "bridge A elicitation message"),
        ("legacy-elicit-answer", "bridge A elicitation answer"),
        ("b-arg", "bridge B tool argument"),
        ("b-elicit-answer", "bridge B elicitation answer"),
        ("b-sampling-answer", "bridge B sampling answer"),
        ("hostile-elicit-msg", "hostile elicitation message"),
        ("hostile-state", "hostile requestState"),
        ("hostile-elicit-answer", "hostile elicitation answer"),
        ("malformed-system", "malformed ask system prompt"),
        ("malformed-msg", "malformed ask message"),
        ("upstream-error", "upstream error message"),
        ("upstream-error-data", "upstream error data"),
        ("unknown-method-param", "unknown method param"),
        ("deep-body", "too deep body"),
    ]));
    let up = modern(&c).await;
    let legacy = peers::own_py1("canary-py1").await;
    let config = Gateway::new()
        .timeouts(&[
            ("connect_ms", 1000),
            ("response_ms", 10_000),
            ("refresh_ms", 60_000),
            ("shutdown_ms", 1000),
        ])
        .set("audit", "sink", "stderr")
        .upstream("alpha", &up.url())
        .upstream("legacy", &legacy.url);
    // Up once /readyz answers 200: every upstream was probed.
    let sluice = Sluice::start(&config.text()).await;
    let url = sluice.url();
    let h = http();

    // Modern upstream: arguments (one in Mcp-Param-Region) and the result.
    let t = modern_call(
        &h,
        &url,
        "alpha__locate",
        json!({"region": c.get("modern x-mcp-header argument"), "note": c.get("modern tool argument")}),
        |_, _| json!({}),
    )
    .await;
    assert!(t.contains(&c.get("modern tool result")), "{t}");
    // Modern upstream: a round (elicitation, sampling with a system prompt, its requestState) and the answers.
    let answer = |method: &str, _: &Value| match method {
        "elicitation/create" => {
            json!({"action": "accept", "content": {"answer": c.get("modern elicitation answer")}})
        }
        _ => {
            json!({"role": "assistant", "content": {"type": "text", "text": c.get("modern sampling answer")}, "model": "m"})
        }
    };
    let t = modern_call(
        &h,
        &url,
        "alpha__ask",
        json!({"question": c.get("modern tool argument")}),
        answer,
    )
    .await;
    assert!(
        t.contains(&c.get("modern elicitation answer"))
            && t.contains(&c.get("modern sampling answer")),
        "{t}"
    );
    // Resource contents.
    let a = call(
        &h,
        &url,
        &body(
            2,
            "resources/read",
            json!({"uri": "mock://alpha/doc"}),
            json!({}),
        ),
        None,
    )
    .await;
    assert_eq!(
        a.msg["result"]["contents"][0]["text"],
        json!(c.get("resource contents")),
        "{}",
        a.text
    );

    // Hostile upstream shapes and refused requests (issue 10): nothing of them is logged.
    let t = modern_call(
        &h,
        &url,
        "alpha__escaped",
        json!({"question": c.get("modern tool argument")}),
        |_, _| json!({"action": "accept", "content": {"a": c.get("hostile elicitation answer")}}),
    )
    .await;
    assert_eq!(t, "escaped done");
    let a = call(
        &h,
        &url,
        &body(
            3,
            "tools/call",
            json!({"name": "alpha__malformed", "arguments": {"question": "q"}}),
            CAPS(),
        ),
        None,
    )
    .await;
    assert_eq!(
        (a.status, a.msg["error"]["code"].as_i64()),
        (502, Some(-32603)),
        "{}",
        a.text
    );
    let a = call(
        &h,
        &url,
        &body(
            4,
            "tools/call",
            json!({"name": "alpha__erroring", "arguments": {"question": "q"}}),
            CAPS(),
        ),
        None,
    )
    .await;
    assert_eq!(
        a.msg["error"]["code"].as_i64(),
        Some(-32603),
        "an undefined code is mapped: {}",
        a.text
    );
    let a = call(
        &h,
        &url,
        &body(
            5,
            "x/unknown",
            json!({"p": c.get("unknown method param")}),
            CAPS(),
        ),
        None,
    )
    .await;
    assert_eq!(a.status, 404, "{}", a.text);
    let deep = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "alpha__locate", "arguments":
        {"note": c.get("too deep body"), "pad": (0..70).fold(json!(1), |v, _| json!([v]))}}});
    let a = send(request(&h, &url, &deep, None, &[])).await;
    assert_eq!(
        (a.status, a.msg["error"]["code"].as_i64()),
        (400, Some(-32600)),
        "{}",
        a.text
    );

    // Bridge A: a sampling ask with a system prompt, and an elicitation; each answer comes
    // back in the tool's result.
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let answers = |seen: Arc<Mutex<Vec<String>>>,
                   c: Arc<Canaries>,
                   elicited: &'static str,
                   sampled: &'static str| {
        move |method: &str, params: &Value| {
            seen.lock().unwrap().push(params.to_string());
            match method {
                "elicitation/create" => {
                    json!({"action": "accept", "content": {"answer": c.get(elicited)}})
                }
                _ => {
                    json!({"role": "assistant", "content": {"type": "text", "text": c.get(sampled)}, "model": "m"})
                }
            }
        }
    };
    let a = answers(
        asked.clone(),
        c.clone(),
        "bridge A elicitation answer",
        "bridge A sampling answer",
    );
    let args =
        json!({"text": c.get("bridge A tool argument"), "system": c.get("bridge A system prompt")});
    let t = modern_call(&h, &url, "legacy__sample_system", args, a).await;
    assert!(t.contains(&c.get("bridge A sampling answer")), "{t}");
    let a = answers(
        asked.clone(),
        c.clone(),
        "bridge A elicitation answer",
        "bridge A sampling answer",
    );
    let t = modern_call(
        &h,
        &url,
        "legacy__elicit",
        json!({"question": c.get("bridge A elicitation message")}),
        a,
    )
    .await;
    assert!(t.contains(&c.get("bridge A elicitation answer")), "{t}");
    let asked_text = asked.lock().unwrap().join("\n");
    for what in [
        "bridge A tool argument",
        "bridge A system prompt",
        "bridge A elicitation message",
    ] {
        assert!(
            asked_text.contains(
                &serde_json::to_string(&c.get(what)).unwrap()[1..]
                    .trim_end_matches('"')
                    .to_owned()
            ),
            "the client was asked with the {what}: {asked_text}"
        );
    }

    // Bridge B: a 2025-11-25 client calls the modern round tool; the asks come as real
    // server->client requests on its POST's SSE stream.
    let b_seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let a = answers(
        b_seen.clone(),
        c.clone(),
        "bridge B elicitation answer",
        "bridge B sampling answer",
    );
    let t = legacy_client_call(
        &h,
        &url,
        "alpha__ask",
        json!({"question": c.get("bridge B tool argument")}),
        a,
    )
    .await;
    assert!(
        t.contains(&c.get("bridge B elicitation answer"))
            && t.contains(&c.get("bridge B sampling answer")),
        "{t}"
    );
    let b_text = b_seen.lock().unwrap().join("\n");
    assert!(
        b_text.contains("canary-modern-system") && b_text.contains("canary-modern-elicit-msg"),
        "bridge B relayed the asks: {b_text}"
    );

    let output = sluice.terminate().await;
    drop(legacy);

    // The audit records (one JSON object per line in the same output) show methods, names and
    // input keys.
    let records: Vec<Value> = output
        .lines()
        .filter(|l| l.starts_with('{') && l.contains("\"client_era\""))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line {l}: {e}")))
        .collect();
    let has = |f: &dyn Fn(&Value) -> bool, what: &str| {
        assert!(
            records.iter().any(f),
            "no audit record {what} in {records:#?}"
        )
    };
    has(
        &|r| {
            r["method"] == "tools/call"
                && r["name"] == "alpha__locate"
                && r["upstream"] == "alpha"
                && r["status"] == 200
        },
        "for alpha__locate",
    );
    has(
        &|r| {
            r["name"] == "alpha__ask"
                && r["input_keys"]
                    == json!(["answer=elicitation/create", "llm=sampling/createMessage"])
        },
        "with alpha__ask's input keys",
    );
    has(
        &|r| r["name"] == "alpha__ask" && r["round"] == 1 && r["status"] == 200,
        "for alpha__ask's retry (round 1)",
    );
    has(
        &|r| r["method"] == "resources/read" && r["name"] == "mock://alpha/doc",
        "for the resource read",
    );
    has(
        &|r| {
            r["name"] == "legacy__sample_system"
                && r["upstream_era"] == "legacy"
                && r["input_keys"].as_array().is_some_and(|k| {
                    k.len() == 1
                        && k[0]
                            .as_str()
                            .unwrap_or("")
                            .ends_with("=sampling/createMessage")
                })
        },
        "with legacy__sample_system's input key",
    );
    has(
        &|r| {
            r["name"] == "legacy__elicit"
                && r["input_keys"].as_array().is_some_and(|k| {
                    k.iter()
                        .any(|k| k.as_str().unwrap_or("").ends_with("=elicitation/create"))
                })
        },
        "with legacy__elicit's input key",
    );
    has(
        &|r| r["client_era"] == "legacy" && r["method"] == "initialize",
        "for bridge B's initialize",
    );
    has(
        &|r| {
            r["client_era"] == "legacy" && r["method"] == "tools/call" && r["name"] == "alpha__ask"
        },
        "for bridge B's tools/call",
    );
    assert!(output.contains(" TRACE "), "RUST_LOG=trace was in effect");

    // No canary in any form, anywhere in the output.
    let mut leaks = Vec::new();
    for canary in &c.0 {
        for (form, text) in forms(&canary.text) {
            if let Some(at) = output.find(&text) {
                let line_start = output[..at].rfind('\n').map_or(0, |i| i + 1);
                let line_end = output[at..].find('\n').map_or(output.len(), |i| at + i);
                let line: String = output[line_start..line_end].chars().take(400).collect();
                leaks.push(format!(
                    "canary {:?} ({}) leaked into sluice's output as {form}:\n  {line}",
                    canary.text, canary.what
                ));
                break;
            }
        }
    }
    let tokens = TOKENS.lock().unwrap().clone();
    assert!(
        tokens.len() >= 4,
        "the client was handed requestStates and a session id: {tokens:?}"
    );
    for t in &tokens {
        assert!(
            t.len() >= 16 && !output.contains(t.as_str()),
            "a sealed value the client was handed is in sluice's output: {t}"
        );
    }
    assert!(
        leaks.is_empty(),
        "{} of {} canaries leaked:\n{}",
        leaks.len(),
        c.0.len(),
        leaks.join("\n")
    );
    eprintln!(
        "canary: {} canaries in {} forms each, {} bytes of output, {} audit records: none leaked",
        c.0.len(),
        forms(&c.0[0].text).len(),
        output.len(),
        records.len()
    );
}
