//! The scripted client of `sluice demo --walkthrough`: each step prints what it sent, what came
//! back, and whether it held.
//!
//! Takes the gateway URL and the tallies of what the `repo` and `alpha` upstreams saw; gives
//! `true` only when every step held. Refuses nothing.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

use super::upstream::Seen;
use super::MAX_ROUNDS;

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// A raw answer: status, the body's length and the last JSON message in it.
struct Answer {
    status: u16,
    len: usize,
    body: Value,
}

fn meta() -> Value {
    meta_with(json!({"elicitation": {}}))
}

fn meta_with(caps: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": caps,
           "io.modelcontextprotocol/clientInfo": {"name": "sluice-walkthrough", "version": "1"}})
}

async fn post(c: &HttpClient, url: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
    let mut b = http::Request::post(url).header("content-type", "application/json").header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let Ok(req) = b.body(Full::new(Bytes::from(body.to_string()))) else {
        return Answer { status: 0, len: 0, body: Value::Null };
    };
    let Ok(resp) = c.request(req).await else {
        return Answer { status: 0, len: 0, body: Value::Null };
    };
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let last = text.lines().filter_map(|l| l.strip_prefix("data: ")).next_back().map(str::to_owned).unwrap_or_else(|| text.to_string());
    Answer { status, len: bytes.len(), body: serde_json::from_str(&last).unwrap_or(Value::Null) }
}

fn request(id: u64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

struct Steps {
    ok: bool,
    n: usize,
}

impl Steps {
    fn check(&mut self, what: &str, held: bool, detail: String) {
        self.n += 1;
        self.ok &= held;
        println!("\n{}. {what}\n   {detail}\n   {}", self.n, if held { "✓ held" } else { "✗ FAILED" });
    }
}

fn error_code(a: &Answer) -> Option<i64> {
    a.body.pointer("/error/code").and_then(Value::as_i64)
}

/// Runs every step against `url`; `repo` and `alpha` are what those upstreams saw.
pub async fn run(url: &str, repo: &Seen, alpha: &Seen) -> bool {
    let c: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let mut s = Steps { ok: true, n: 0 };
    let h = |m: &'static str| vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", m)];

    let a = post(&c, url, &h("server/discover"), &request(1, "server/discover", json!({}))).await;
    let r = &a.body["result"];
    s.check(
        "server/discover is answered by Sluice from its upstreams: complete, with ttlMs and cacheScope",
        a.status == 200
            && r["resultType"] == "complete"
            && r["supportedVersions"] == json!(["2026-07-28"])
            && r["ttlMs"].is_u64()
            && r["cacheScope"].is_string()
            && r["capabilities"]["tools"].is_object(),
        format!(
            "HTTP {} resultType={} supportedVersions={} capabilities={} ttlMs={} cacheScope={}",
            a.status, r["resultType"], r["supportedVersions"], r["capabilities"], r["ttlMs"], r["cacheScope"]
        ),
    );

    let a = post(&c, url, &h("tools/list"), &request(2, "tools/list", json!({}))).await;
    let names: Vec<String> = a
        .body
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let b = post(&c, url, &h("tools/list"), &request(3, "tools/list", json!({}))).await;
    let again: Vec<String> = b
        .body
        .pointer("/result/tools")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    s.check(
        "tools/list federates the three upstreams with prefixed names, in a stable order",
        names.contains(&"alpha__add".to_owned())
            && names.contains(&"beta__echo".to_owned())
            && names.contains(&"repo__summarize_repo".to_owned())
            && names == again
            && a.body["result"]["resultType"] == "complete",
        format!("{names:?}"),
    );

    let tool =
        b.body.pointer("/result/tools").and_then(Value::as_array).and_then(|t| t.iter().find(|t| t["name"] == "repo__summarize_repo"));
    let r = &b.body["result"];
    s.check(
        "the legacy (2025-11-25) upstream's tool is listed as repo__summarize_repo, in a list result with resultType, ttlMs and cacheScope",
        tool.is_some_and(|t| t.pointer("/inputSchema/properties/audience").is_some())
            && r["resultType"] == "complete"
            && r["ttlMs"].is_u64()
            && r["cacheScope"].is_string(),
        format!(
            "descriptor={} resultType={} ttlMs={} cacheScope={}",
            tool.map_or(Value::Null, |t| json!({"name": t["name"], "inputSchema": t["inputSchema"]})),
            r["resultType"],
            r["ttlMs"],
            r["cacheScope"]
        ),
    );

    let mut hh = h("tools/call");
    hh.push(("mcp-name", "alpha__add"));
    let a = post(&c, url, &hh, &request(4, "tools/call", json!({"name": "alpha__add", "arguments": {"a": 2, "b": 3}}))).await;
    s.check(
        "tools/call alpha__add is routed to alpha as `add`",
        a.status == 200 && a.body.pointer("/result/content/0/text") == Some(&json!("5")) && a.body["result"]["resultType"] == "complete",
        format!("HTTP {} result={}", a.status, a.body["result"]["content"]),
    );

    let a = post(&c, url, &h("tools/list"), &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}})).await;
    s.check(
        "a request without _meta gets -32602 and HTTP 400",
        a.status == 400 && error_code(&a) == Some(-32602) && a.body["id"] == 5,
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let mut hh = h("tools/call");
    hh.push(("mcp-name", "beta__add"));
    let a = post(&c, url, &hh, &request(6, "tools/call", json!({"name": "alpha__add", "arguments": {"a": 1, "b": 1}}))).await;
    s.check(
        "an Mcp-Name header that disagrees with the body gets -32020 and HTTP 400",
        a.status == 400 && error_code(&a) == Some(-32020),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let mut body = request(7, "tools/list", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "1900-01-01".into();
    let a = post(&c, url, &[("mcp-protocol-version", "1900-01-01"), ("mcp-method", "tools/list")], &body).await;
    s.check(
        "an unsupported version gets -32022 with exactly data {supported, requested}, HTTP 400",
        a.status == 400
            && error_code(&a) == Some(-32022)
            && a.body["id"] == 7
            && a.body.pointer("/error/data") == Some(&json!({"supported": ["2026-07-28"], "requested": "1900-01-01"})),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let a = post(&c, url, &h("initialize"), &request(8, "initialize", json!({}))).await;
    s.check(
        "initialize on the modern wire gets -32601 and HTTP 404",
        a.status == 404 && error_code(&a) == Some(-32601),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let a = post(&c, url, &h("notifications/initialized"), &note).await;
    s.check(
        "a notification gets 202 and no JSON-RPC answer (an empty body)",
        a.status == 202 && a.len == 0,
        format!("HTTP {}, {} body bytes", a.status, a.len),
    );

    summarize(&c, url, &mut s).await;
    loop_bomb(&c, url, &mut s, repo).await;
    approval(&c, url, &mut s, alpha).await;
    s.ok
}

/// A `tools/call` of `tool` with `arguments`, declaring `caps`, with `extra` params members.
async fn call(c: &HttpClient, url: &str, id: u64, tool: &str, arguments: Value, caps: Value, extra: Value) -> Answer {
    let mut params = json!({"name": tool, "arguments": arguments, "_meta": meta_with(caps)});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", tool)];
    post(c, url, &headers, &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})).await
}

/// Waits (up to two seconds) until `seen` counted `event` at least `n` times; gives the count.
async fn settled(seen: &Seen, event: &str, n: usize) -> usize {
    for _ in 0..40 {
        if seen.count(event) >= n {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    seen.count(event)
}

/// The loop bomb: `repo__loop_forever` asks again after every answer; Sluice cuts it at the cap.
async fn loop_bomb(c: &HttpClient, url: &str, s: &mut Steps, repo: &Seen) {
    let caps = || json!({"sampling": {}});
    let args = json!({"topic": "names for a key-value store"});
    let ideas = ["kvlet", "tinykv", "dewdrop"];
    let mut a = call(c, url, 40, "repo__loop_forever", args.clone(), caps(), json!({})).await;
    let mut rounds = Vec::new();
    let mut states: Vec<String> = Vec::new();
    for (i, idea) in ideas.iter().enumerate() {
        let (keys, state) = round(&a);
        let is_round = a.status == 200 && a.body["result"]["resultType"] == "input_required" && keys == ["next"] && !state.is_empty();
        rounds.push(format!("round {}: HTTP {} resultType={} inputRequests={keys:?}", i + 1, a.status, a.body["result"]["resultType"]));
        if !is_round || states.contains(&state) {
            break;
        }
        states.push(state.clone());
        let answer = json!({"inputResponses": {"next": sampled(idea)}, "requestState": state});
        a = call(c, url, 41 + i as u64, "repo__loop_forever", args.clone(), caps(), answer).await;
    }
    s.check(
        &format!(
            "repo__loop_forever (a loop bomb) asks the model again after every answer: the client receives exactly {MAX_ROUNDS} input_required rounds (budget.max_rounds = {MAX_ROUNDS})"
        ),
        states.len() == MAX_ROUNDS as usize,
        format!("answered {ideas:?} in turn; {}", rounds.join("; ")),
    );

    let message = a.body.pointer("/error/message").and_then(Value::as_str).unwrap_or("");
    s.check(
        &format!("the retry answering round {MAX_ROUNDS} gets -31010 with HTTP 400, its message naming the limit"),
        a.status == 400
            && error_code(&a) == Some(-31010)
            && a.body["id"] == 40 + MAX_ROUNDS as u64
            && a.body.pointer("/error/data/limit") == Some(&json!(MAX_ROUNDS))
            && message.contains(&format!("limit of {MAX_ROUNDS} input rounds"))
            && message.contains("max_rounds"),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let cancelled = settled(repo, "cancelled loop_forever", 1).await;
    let asked = repo.count("ask loop_forever");
    s.check(
        &format!("the repo upstream sent exactly {MAX_ROUNDS} sampling asks for the call, and Sluice cancelled the call there (notifications/cancelled)"),
        asked == MAX_ROUNDS as usize && cancelled == 1,
        format!("repo saw: {asked} asks, {cancelled} notifications/cancelled for loop_forever"),
    );
}

/// The approval round: a destructive tool runs only once the user approved it.
async fn approval(c: &HttpClient, url: &str, s: &mut Steps, alpha: &Seen) {
    let tool = "alpha__delete_branch";
    let args = json!({"name": "old-parser"});
    let elicit = || json!({"elicitation": {}});
    let deletes = || alpha.count("call delete_branch");

    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
    let list = post(c, url, &headers, &request(49, "tools/list", json!({}))).await;
    let listed = list.body.pointer("/result/tools").and_then(Value::as_array).and_then(|t| t.iter().find(|t| t["name"] == tool));
    let annotations = listed.map_or(Value::Null, |t| t["annotations"].clone());
    let a = call(c, url, 50, tool, args.clone(), json!({}), json!({})).await;
    s.check(
        "alpha__delete_branch is listed with annotations.destructiveHint; called without the elicitation capability it gets -32021, HTTP 400: the policy's approval cannot be asked",
        annotations["destructiveHint"] == true && a.status == 400 && error_code(&a) == Some(-32021) && a.body["id"] == 50 && deletes() == 0,
        format!("annotations={annotations}; HTTP {} error={}; alpha's delete_branch calls: {}", a.status, a.body["error"], deletes()),
    );

    let first = call(c, url, 51, tool, args.clone(), elicit(), json!({})).await;
    let (keys, state) = round(&first);
    let ask = &first.body["result"]["inputRequests"]["sluice_approval"];
    let message = ask.pointer("/params/message").and_then(Value::as_str).unwrap_or("");
    s.check(
        "calling it gets an approval round first: input_required keyed sluice_approval, a form naming alpha and delete_branch; alpha was not called",
        first.status == 200
            && first.body["result"]["resultType"] == "input_required"
            && keys == ["sluice_approval"]
            && !state.is_empty()
            && ask["method"] == "elicitation/create"
            && ask.pointer("/params/requestedSchema/properties/approve/type") == Some(&json!("boolean"))
            && message.contains("\"alpha\"")
            && message.contains("\"delete_branch\"")
            && deletes() == 0,
        format!(
            "HTTP {} resultType={} inputRequests={keys:?} message={message:?}; alpha's delete_branch calls: {}",
            first.status,
            first.body["result"]["resultType"],
            deletes()
        ),
    );

    let no = json!({"inputResponses": {"sluice_approval": {"action": "accept", "content": {"approve": false}}}, "requestState": state});
    let a = call(c, url, 52, tool, args.clone(), elicit(), no).await;
    s.check(
        "answering approve: false gets -31015 with HTTP 400; alpha was still not called",
        a.status == 400 && error_code(&a) == Some(-31015) && a.body["id"] == 52 && deletes() == 0,
        format!("HTTP {} error={}; alpha's delete_branch calls: {}", a.status, a.body["error"], deletes()),
    );

    let again = call(c, url, 53, tool, args.clone(), elicit(), json!({})).await;
    let (keys, state) = round(&again);
    let yes = json!({"inputResponses": {"sluice_approval": {"action": "accept", "content": {"approve": true}}}, "requestState": state});
    let a = call(c, url, 54, tool, args.clone(), elicit(), yes.clone()).await;
    let r = &a.body["result"];
    let text = r.pointer("/content/0/text").and_then(Value::as_str).unwrap_or("");
    s.check(
        "calling again and answering approve: true runs the tool: alpha deletes the branch, its first delete_branch call",
        keys == ["sluice_approval"]
            && a.status == 200
            && r["resultType"] == "complete"
            && r["isError"] != true
            && text.starts_with("deleted branch \"old-parser\"")
            && deletes() == 1,
        format!("HTTP {} resultType={} text={text:?}; alpha's delete_branch calls: {}", a.status, r["resultType"], deletes()),
    );

    let a = call(c, url, 55, tool, args, elicit(), yes).await;
    s.check(
        "an approval is single use: replaying the accepted answer gets -32602 with data.reason unknown_exchange; alpha is not called again",
        a.status == 400
            && error_code(&a) == Some(-32602)
            && a.body.pointer("/error/data/reason") == Some(&json!("unknown_exchange"))
            && deletes() == 1,
        format!("HTTP {} error={}; alpha's delete_branch calls: {}", a.status, a.body["error"], deletes()),
    );
}

/// A `tools/call` of `repo__summarize_repo` declaring `caps`, with `extra` params members.
async fn summarize_call(c: &HttpClient, url: &str, id: u64, caps: Value, audience: &str, extra: Value) -> Answer {
    let mut params = json!({"name": "repo__summarize_repo", "arguments": {"audience": audience}, "_meta": meta_with(caps)});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "repo__summarize_repo")];
    post(c, url, &headers, &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})).await
}

/// What the client's model answers to a sampling request.
fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "walkthrough-model"})
}

/// An `input_required` round: its input keys and its requestState.
fn round(a: &Answer) -> (Vec<String>, String) {
    let r = &a.body["result"];
    let keys = r["inputRequests"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    (keys, r["requestState"].as_str().unwrap_or("").to_owned())
}

fn first_line(a: &Answer, key: &str) -> String {
    let ask = &a.body["result"]["inputRequests"][key];
    let prompt = ask.pointer("/params/messages/0/content/text").and_then(Value::as_str).unwrap_or("");
    format!("{} \"{}…\"", ask["method"].as_str().unwrap_or("?"), prompt.lines().next().unwrap_or(""))
}

/// The legacy upstream's two-round tool through bridge A.
async fn summarize(c: &HttpClient, url: &str, s: &mut Steps) {
    let sampling = || json!({"sampling": {}});
    let audience = "new contributors";
    let picked = r#"["README.md", "src/server.rs", "src/store.rs"]"#;

    let a = summarize_call(c, url, 20, json!({}), audience, json!({})).await;
    s.check(
        "repo__summarize_repo without the sampling capability gets -32021 with exactly data.requiredCapabilities {sampling}, HTTP 400",
        a.status == 400
            && error_code(&a) == Some(-32021)
            && a.body["id"] == 20
            && a.body.pointer("/error/data") == Some(&json!({"requiredCapabilities": {"sampling": {}}})),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let first = summarize_call(c, url, 21, sampling(), audience, json!({})).await;
    let (keys1, state1) = round(&first);
    s.check(
        "summarize_repo (request id 21): the upstream's first sampling ask becomes an input_required round keyed pick_files",
        first.status == 200 && first.body["result"]["resultType"] == "input_required" && keys1 == ["pick_files"] && !state1.is_empty(),
        format!(
            "HTTP {} resultType={} inputRequests={:?}: {}",
            first.status,
            first.body["result"]["resultType"],
            keys1,
            first_line(&first, "pick_files")
        ),
    );

    let answer1 = json!({"inputResponses": {"pick_files": sampled(picked)}, "requestState": state1});
    let a = summarize_call(c, url, 22, sampling(), "investors", answer1.clone()).await;
    s.check(
        "a retry that changes `audience` fails the state check: -32602 with data.reason request_changed, HTTP 400",
        a.status == 400 && error_code(&a) == Some(-32602) && a.body.pointer("/error/data/reason") == Some(&json!("request_changed")),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let retry1 = summarize_call(c, url, 23, sampling(), audience, answer1).await;
    let (keys2, state2) = round(&retry1);
    s.check(
        "retry 1 (request id 23) answers pick_files with a JSON array of three files; the next ask is a new round keyed summarize",
        retry1.status == 200
            && retry1.body["result"]["resultType"] == "input_required"
            && keys2 == ["summarize"]
            && !state2.is_empty()
            && state2 != state1,
        format!(
            "answered {picked}; HTTP {} resultType={} inputRequests={:?}: {}",
            retry1.status,
            retry1.body["result"]["resultType"],
            keys2,
            first_line(&retry1, "summarize")
        ),
    );

    let summary = "tinykv is a small in-memory key-value store spoken to over a line-based TCP protocol. Start in src/server.rs for the commands and src/store.rs for the data and snapshots.";
    let answer2 = json!({"inputResponses": {"summarize": sampled(summary)}, "requestState": state2});
    let last = summarize_call(c, url, 24, sampling(), audience, answer2.clone()).await;
    let r = &last.body["result"];
    let files = json!(["README.md", "src/server.rs", "src/store.rs"]);
    s.check(
        "retry 2 (request id 24) answers summarize; the result is complete with the chosen files and the summary",
        last.status == 200
            && r["resultType"] == "complete"
            && r["isError"] != true
            && r.pointer("/structuredContent/files") == Some(&files)
            && r.pointer("/structuredContent/summary") == Some(&json!(summary))
            && r.pointer("/content/0/text").and_then(Value::as_str).is_some_and(|t| t.contains("src/store.rs") && t.contains(summary)),
        format!("HTTP {} resultType={} structuredContent={}", last.status, r["resultType"], r["structuredContent"]),
    );

    let ids = [&first.body["id"], &retry1.body["id"], &last.body["id"]];
    s.check(
        "the three requests of the call have different ids, and each answer carries its own",
        ids == [&json!(21), &json!(23), &json!(24)],
        format!("ids {} → {} → {}", ids[0], ids[1], ids[2]),
    );

    let a = summarize_call(c, url, 25, sampling(), audience, answer2).await;
    s.check(
        "replaying the last requestState finds no exchange: -32602 with data.reason unknown_exchange",
        a.status == 400 && error_code(&a) == Some(-32602) && a.body.pointer("/error/data/reason") == Some(&json!("unknown_exchange")),
        format!("HTTP {} error={}", a.status, a.body["error"]),
    );

    let bad = summarize_call(c, url, 26, sampling(), audience, json!({})).await;
    let (_, state) = round(&bad);
    let wrong = r#"["README.md", "secrets.txt", "LICENSE"]"#;
    let a =
        summarize_call(c, url, 27, sampling(), audience, json!({"inputResponses": {"pick_files": sampled(wrong)}, "requestState": state}))
            .await;
    let text = a.body.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or("");
    s.check(
        "a round-1 answer naming a file the repository lacks is refused by the tool; Sluice relays its tool error",
        bad.body["result"]["resultType"] == "input_required"
            && a.status == 200
            && a.body["result"]["resultType"] == "complete"
            && a.body["result"]["isError"] == true
            && text.contains("secrets.txt"),
        format!("answered {wrong}; HTTP {} isError={} text={text:?}", a.status, a.body["result"]["isError"]),
    );
}
