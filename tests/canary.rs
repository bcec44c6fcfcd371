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

#[path = "ops/client.rs"]
mod client;
#[path = "ops/mock.rs"]
mod mock;

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine as _;
use serde_json::{json, Value};

use client::{body, call, http, request, send};
use mock::Answer;

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
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
        );
        Canaries(kinds.iter().map(|(slug, what)| Canary { what, text: format!("canary-{slug}-{nonce} \"q\"/é+&") }).collect())
    }

    fn get(&self, what: &str) -> String {
        self.0.iter().find(|c| c.what == what).map(|c| c.text.clone()).unwrap_or_else(|| panic!("no canary {what}"))
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
                .map(|ch| if ch.is_ascii() { ch.to_string() } else { format!("\\u{:04x}", ch as u32) })
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
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            b' ' if plus_for_space => "+".into(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Removes ANSI colour sequences (a value is never split by them, but field names are).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' && it.peek() == Some(&'[') {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The `sluice` binary running with `RUST_LOG=trace`, its stdout and stderr collected.
struct Sluice {
    child: std::process::Child,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Sluice {
    fn start(config: &str) -> Sluice {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("canary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sluice.toml");
        std::fs::write(&path, config).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--config"])
            .arg(&path)
            .env("RUST_LOG", "trace")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the sluice binary");
        let (out, err) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        let collect = |mut pipe: Box<dyn Read + Send>, into: Arc<Mutex<Vec<u8>>>| {
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    into.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            })
        };
        let readers = vec![
            collect(Box::new(child.stdout.take().unwrap()), out.clone()),
            collect(Box::new(child.stderr.take().unwrap()), err.clone()),
        ];
        Sluice { child, out, err, readers }
    }

    /// The address from its `sluice listening addr=…` line (waits at most 10 s).
    fn addr(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = strip_ansi(&String::from_utf8_lossy(&self.err.lock().unwrap()));
            if let Some(line) = text.lines().find(|l| l.contains("sluice listening")) {
                let addr = line.split("addr=").nth(1).and_then(|r| r.split_whitespace().next()).expect("addr= in the listening line");
                return addr.to_owned();
            }
            assert!(Instant::now() < deadline, "sluice did not log that it listens:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops it with SIGTERM; gives everything it wrote.
    fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let out = String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned();
        let err = String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned();
        strip_ansi(&format!("{out}\n{err}"))
    }
}

/// A legacy upstream: tests/peers/py1_upstream.py, killed when dropped.
struct Py1 {
    child: std::process::Child,
    url: String,
}

impl Drop for Py1 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn py1() -> Py1 {
    let python = std::env::var_os("SLUICE_PY1").map(PathBuf::from).unwrap_or_else(|| {
        panic!("SLUICE_PY1 is not set: the canary test needs the real legacy peer; run `eval \"$(bash scripts/peers.sh)\"` first")
    });
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Named by pid and time: pids repeat, and the upstream appends to its event files.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let events = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("canary-{}-{nanos}-events", std::process::id()));
    let mut child = Command::new(python)
        .arg(root.join("tests/peers/py1_upstream.py"))
        .arg("--events")
        .arg(&events)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tests/peers/py1_upstream.py");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("py1 prints LISTENING <port>");
    let port = line.trim().strip_prefix("LISTENING ").unwrap_or_else(|| panic!("py1 printed {line:?}")).to_owned();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut out, &mut std::io::sink());
    });
    Py1 { child, url: format!("http://127.0.0.1:{port}/mcp") }
}

/// The modern mock: `locate(region, note)` (region mirrored in `Mcp-Param-Region`), `ask`
/// (one round: an elicitation and a sampling ask with a system prompt, its own requestState),
/// and the resource `mock://alpha/doc`.
async fn modern(c: &Arc<Canaries>) -> mock::Mock {
    let tools = json!([
        {"name": "locate", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}, "note": {"type": "string"}}}},
        mock::tool("ask", &["question"]),
        mock::tool("escaped", &["question"]),
        mock::tool("malformed", &["question"]),
        mock::tool("erroring", &["question"]),
    ]);
    let resources = json!([{"uri": "mock://alpha/doc", "name": "doc"}]);
    let c = c.clone();
    mock::start("alpha", tools, resources, move |r| {
        let text = |t: String| json!({"content": [{"type": "text", "text": t}]});
        match (r.method.as_str(), r.params["name"].as_str().unwrap_or("")) {
            ("tools/call", "locate") => {
                let region = r.headers.get("mcp-param-region").and_then(|v| sluice::mcp::headers::decode(v).ok());
                if region.as_deref() != r.params["arguments"]["region"].as_str() {
                    return Answer::Error(400, -32020, "Mcp-Param-Region does not mirror the argument");
                }
                Answer::Result(text(format!("located: {}", c.get("modern tool result"))))
            }
            ("tools/call", "ask") if r.params.get("inputResponses").is_none() => Answer::Result(json!({
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
                    return Answer::Error(400, -32602, "requestState was not given back byte for byte");
                }
                let answer = r.params["inputResponses"]["answer"]["content"]["answer"].as_str().unwrap_or("-").to_owned();
                let llm = r.params["inputResponses"]["llm"]["content"]["text"].as_str().unwrap_or("-").to_owned();
                Answer::Result(text(format!("asked: {answer} | {llm} | {}", c.get("modern round result"))))
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
                Answer::Raw(200, "application/json", bytes::Bytes::from(text))
            }
            ("tools/call", "escaped") => Answer::Result(text("escaped done".into())),
            ("tools/call", "malformed") => Answer::Result(json!({"resultType": "input_required", "inputRequests": {"llm": {
                "method": "sampling/createMessage", "params": {"maxTokens": 1.5, "systemPrompt": c.get("malformed ask system prompt"),
                "messages": [{"role": "user", "content": {"type": "text", "text": c.get("malformed ask message")}}]}}}})),
            ("tools/call", "erroring") => {
                let e = json!({"jsonrpc": "2.0", "id": r.id, "error": {"code": -32099, "message": c.get("upstream error message"),
                    "data": {"detail": c.get("upstream error data")}}});
                Answer::Raw(200, "application/json", bytes::Bytes::from(e.to_string()))
            }
            ("resources/read", _) => Answer::Result(json!({"contents": [{"uri": "mock://alpha/doc", "mimeType": "text/plain",
                "text": c.get("resource contents")}], "ttlMs": 0, "cacheScope": "private"})),
            _ => Answer::Error(200, -32602, "unknown"),
        }
    })
    .await
}

const CAPS: fn() -> Value = || json!({"sampling": {}, "elicitation": {"form": {}}});

/// Calls `name` with `args`; answers each round from `answer` until complete; gives the text.
/// Every sealed value the client was handed (requestState, Mcp-Session-Id): none may be logged.
static TOKENS: Mutex<Vec<String>> = Mutex::new(Vec::new());

async fn modern_call(h: &reqwest::Client, url: &str, name: &str, args: Value, answer: impl Fn(&str, &Value) -> Value) -> String {
    let mut b = body(1, "tools/call", json!({"name": name, "arguments": args}), CAPS());
    let mut extra: Vec<(String, String)> = Vec::new();
    if let Some(region) = args.get("region").and_then(Value::as_str) {
        extra.push(("mcp-param-region".into(), sluice::mcp::headers::encode(region)));
    }
    for _round in 0..4 {
        let hdrs: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let a = send(request(h, url, &b, None, &hdrs)).await;
        assert_eq!(a.status, 200, "{name}: {}", a.text);
        let result = &a.msg["result"];
        if result["resultType"] == "complete" {
            assert_ne!(result["isError"], true, "{name}: {}", a.text);
            return result["content"][0]["text"].as_str().unwrap_or("").to_owned();
        }
        assert_eq!(result["resultType"], "input_required", "{name}: {}", a.text);
        let responses: serde_json::Map<String, Value> = result["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, req)| (k.clone(), answer(req["method"].as_str().unwrap_or(""), &req["params"])))
            .collect();
        b["params"]["inputResponses"] = Value::Object(responses);
        b["params"]["requestState"] = result["requestState"].clone();
        TOKENS.lock().unwrap().push(result["requestState"].as_str().unwrap_or("").to_owned());
    }
    panic!("{name}: more than 4 rounds");
}

/// A 2025-11-25 client (bridge B): initialize, then `tools/call name(args)`, answering the
/// server→client requests on the POST's SSE stream from `answer`; gives the result text.
async fn legacy_client_call(h: &reqwest::Client, url: &str, name: &str, args: Value, answer: impl Fn(&str, &Value) -> Value) -> String {
    let post = |session: Option<&str>, msg: &Value| {
        let mut r = h
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(msg.to_string());
        if let Some(s) = session {
            r = r.header("mcp-session-id", s).header("mcp-protocol-version", "2025-11-25");
        }
        r
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "elicitation": {}}, "clientInfo": {"name": "canary", "version": "1"}}});
    let r = post(None, &init).send().await.expect("initialize");
    assert_eq!(r.status(), 200);
    let session = r.headers().get("mcp-session-id").expect("an Mcp-Session-Id").to_str().unwrap().to_owned();
    TOKENS.lock().unwrap().push(session.clone());
    let _ = r.text().await;
    let r = post(Some(&session), &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).send().await.unwrap();
    assert_eq!(r.status(), 202);
    let mut resp =
        post(Some(&session), &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}}))
            .send()
            .await
            .expect("tools/call");
    assert_eq!(resp.status(), 200);
    let mut buf = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), resp.chunk()).await.expect("the SSE stream goes on").unwrap();
        let Some(chunk) = chunk else { panic!("{name}: the stream ended without a result: {buf}") };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let data: String = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
            if data.is_empty() {
                continue;
            }
            let msg: Value = serde_json::from_str(&data).unwrap_or_else(|e| panic!("{e}: {data}"));
            if let Some(method) = msg["method"].as_str() {
                if msg.get("id").is_some() {
                    let reply = json!({"jsonrpc": "2.0", "id": msg["id"], "result": answer(method, &msg["params"])});
                    let r = post(Some(&session), &reply).send().await.unwrap();
                    assert_eq!(r.status(), 202, "{name}: the answer to {method}");
                }
                continue;
            }
            if msg["id"] == 1 {
                assert!(msg.get("error").is_none(), "{name}: {msg}");
                assert_ne!(msg["result"]["isError"], true, "{name}: {msg}");
                return msg["result"]["content"][0]["text"].as_str().unwrap_or("").to_owned();
            }
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
    let legacy = tokio::task::spawn_blocking(py1).await.unwrap();
    let config = format!(
        "listen = \"127.0.0.1:0\"\n[timeouts]\nconnect_ms = 1000\nresponse_ms = 10000\nrefresh_ms = 60000\nshutdown_ms = 1000\n\
         [audit]\nsink = \"stderr\"\n\
         [[upstream]]\nname = \"alpha\"\nurl = \"{}\"\n[[upstream]]\nname = \"legacy\"\nurl = \"{}\"\n",
        up.url(),
        legacy.url
    );
    let sluice = Sluice::start(&config);
    let base = format!("http://{}", tokio::task::block_in_place(|| sluice.addr()));
    let url = format!("{base}/mcp");
    let h = http();
    let deadline = Instant::now() + Duration::from_secs(15);
    while h.get(format!("{base}/readyz")).send().await.map(|r| r.status() != 200).unwrap_or(true) {
        if Instant::now() > deadline {
            let ready = h.get(format!("{base}/readyz")).send().await.map(|r| format!("{r:?}")).unwrap_or_else(|e| e.to_string());
            let out = tokio::task::block_in_place(|| sluice.stop());
            let tail: String = out.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            panic!("sluice at {base} did not become ready ({ready}); its output ends:\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

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
        "elicitation/create" => json!({"action": "accept", "content": {"answer": c.get("modern elicitation answer")}}),
        _ => json!({"role": "assistant", "content": {"type": "text", "text": c.get("modern sampling answer")}, "model": "m"}),
    };
    let t = modern_call(&h, &url, "alpha__ask", json!({"question": c.get("modern tool argument")}), answer).await;
    assert!(t.contains(&c.get("modern elicitation answer")) && t.contains(&c.get("modern sampling answer")), "{t}");
    // Resource contents.
    let a = call(&h, &url, &body(2, "resources/read", json!({"uri": "mock://alpha/doc"}), json!({})), None).await;
    assert_eq!(a.msg["result"]["contents"][0]["text"], json!(c.get("resource contents")), "{}", a.text);

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
    let a = call(&h, &url, &body(3, "tools/call", json!({"name": "alpha__malformed", "arguments": {"question": "q"}}), CAPS()), None).await;
    assert_eq!((a.status, a.msg["error"]["code"].as_i64()), (502, Some(-32603)), "{}", a.text);
    let a = call(&h, &url, &body(4, "tools/call", json!({"name": "alpha__erroring", "arguments": {"question": "q"}}), CAPS()), None).await;
    assert_eq!(a.msg["error"]["code"].as_i64(), Some(-32603), "an undefined code is mapped: {}", a.text);
    let a = call(&h, &url, &body(5, "x/unknown", json!({"p": c.get("unknown method param")}), CAPS()), None).await;
    assert_eq!(a.status, 404, "{}", a.text);
    let deep = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "alpha__locate", "arguments":
        {"note": c.get("too deep body"), "pad": (0..70).fold(json!(1), |v, _| json!([v]))}}});
    let a = send(request(&h, &url, &deep, None, &[])).await;
    assert_eq!((a.status, a.msg["error"]["code"].as_i64()), (400, Some(-32600)), "{}", a.text);

    // Bridge A: a sampling ask with a system prompt, and an elicitation; each answer comes
    // back in the tool's result.
    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let answers = |seen: Arc<Mutex<Vec<String>>>, c: Arc<Canaries>, elicited: &'static str, sampled: &'static str| {
        move |method: &str, params: &Value| {
            seen.lock().unwrap().push(params.to_string());
            match method {
                "elicitation/create" => json!({"action": "accept", "content": {"answer": c.get(elicited)}}),
                _ => json!({"role": "assistant", "content": {"type": "text", "text": c.get(sampled)}, "model": "m"}),
            }
        }
    };
    let a = answers(asked.clone(), c.clone(), "bridge A elicitation answer", "bridge A sampling answer");
    let args = json!({"text": c.get("bridge A tool argument"), "system": c.get("bridge A system prompt")});
    let t = modern_call(&h, &url, "legacy__sample_system", args, a).await;
    assert!(t.contains(&c.get("bridge A sampling answer")), "{t}");
    let a = answers(asked.clone(), c.clone(), "bridge A elicitation answer", "bridge A sampling answer");
    let t = modern_call(&h, &url, "legacy__elicit", json!({"question": c.get("bridge A elicitation message")}), a).await;
    assert!(t.contains(&c.get("bridge A elicitation answer")), "{t}");
    let asked_text = asked.lock().unwrap().join("\n");
    for what in ["bridge A tool argument", "bridge A system prompt", "bridge A elicitation message"] {
        assert!(
            asked_text.contains(&serde_json::to_string(&c.get(what)).unwrap()[1..].trim_end_matches('"').to_owned()),
            "the client was asked with the {what}: {asked_text}"
        );
    }

    // Bridge B: a 2025-11-25 client calls the modern round tool; the asks come as real
    // server->client requests on its POST's SSE stream.
    let b_seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let a = answers(b_seen.clone(), c.clone(), "bridge B elicitation answer", "bridge B sampling answer");
    let t = legacy_client_call(&h, &url, "alpha__ask", json!({"question": c.get("bridge B tool argument")}), a).await;
    assert!(t.contains(&c.get("bridge B elicitation answer")) && t.contains(&c.get("bridge B sampling answer")), "{t}");
    let b_text = b_seen.lock().unwrap().join("\n");
    assert!(b_text.contains("canary-modern-system") && b_text.contains("canary-modern-elicit-msg"), "bridge B relayed the asks: {b_text}");

    let output = tokio::task::block_in_place(|| sluice.stop());
    drop(legacy);

    // The audit records (one JSON object per line in the same output) show methods, names and
    // input keys.
    let records: Vec<Value> = output
        .lines()
        .filter(|l| l.starts_with('{') && l.contains("\"client_era\""))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line {l}: {e}")))
        .collect();
    let has = |f: &dyn Fn(&Value) -> bool, what: &str| assert!(records.iter().any(f), "no audit record {what} in {records:#?}");
    has(
        &|r| r["method"] == "tools/call" && r["name"] == "alpha__locate" && r["upstream"] == "alpha" && r["status"] == 200,
        "for alpha__locate",
    );
    has(
        &|r| r["name"] == "alpha__ask" && r["input_keys"] == json!(["answer=elicitation/create", "llm=sampling/createMessage"]),
        "with alpha__ask's input keys",
    );
    has(&|r| r["name"] == "alpha__ask" && r["round"] == 1 && r["status"] == 200, "for alpha__ask's retry (round 1)");
    has(&|r| r["method"] == "resources/read" && r["name"] == "mock://alpha/doc", "for the resource read");
    has(
        &|r| {
            r["name"] == "legacy__sample_system"
                && r["upstream_era"] == "legacy"
                && r["input_keys"]
                    .as_array()
                    .is_some_and(|k| k.len() == 1 && k[0].as_str().unwrap_or("").ends_with("=sampling/createMessage"))
        },
        "with legacy__sample_system's input key",
    );
    has(
        &|r| {
            r["name"] == "legacy__elicit"
                && r["input_keys"].as_array().is_some_and(|k| k.iter().any(|k| k.as_str().unwrap_or("").ends_with("=elicitation/create")))
        },
        "with legacy__elicit's input key",
    );
    has(&|r| r["client_era"] == "legacy" && r["method"] == "initialize", "for bridge B's initialize");
    has(&|r| r["client_era"] == "legacy" && r["method"] == "tools/call" && r["name"] == "alpha__ask", "for bridge B's tools/call");
    assert!(output.contains(" TRACE "), "RUST_LOG=trace was in effect");

    // No canary in any form, anywhere in the output.
    let mut leaks = Vec::new();
    for canary in &c.0 {
        for (form, text) in forms(&canary.text) {
            if let Some(at) = output.find(&text) {
                let line_start = output[..at].rfind('\n').map_or(0, |i| i + 1);
                let line_end = output[at..].find('\n').map_or(output.len(), |i| at + i);
                let line: String = output[line_start..line_end].chars().take(400).collect();
                leaks.push(format!("canary {:?} ({}) leaked into sluice's output as {form}:\n  {line}", canary.text, canary.what));
                break;
            }
        }
    }
    let tokens = TOKENS.lock().unwrap().clone();
    assert!(tokens.len() >= 4, "the client was handed requestStates and a session id: {tokens:?}");
    for t in &tokens {
        assert!(t.len() >= 16 && !output.contains(t.as_str()), "a sealed value the client was handed is in sluice's output: {t}");
    }
    assert!(leaks.is_empty(), "{} of {} canaries leaked:\n{}", leaks.len(), c.0.len(), leaks.join("\n"));
    eprintln!(
        "canary: {} canaries in {} forms each, {} bytes of output, {} audit records: none leaked",
        c.0.len(),
        forms(&c.0[0].text).len(),
        output.len(),
        records.len()
    );
}
