//! The scripted client of `sluice demo --walkthrough`: each step prints what it sent, what came
//! back, and whether it held.
//!
//! Takes the gateway URL; gives `true` only when every step held. Refuses nothing.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// A raw answer: status, content type and the last JSON message in the body.
struct Answer {
    status: u16,
    body: Value,
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
           "io.modelcontextprotocol/clientInfo": {"name": "sluice-walkthrough", "version": "1"}})
}

async fn post(c: &HttpClient, url: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
    let mut b = http::Request::post(url).header("content-type", "application/json").header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let Ok(req) = b.body(Full::new(Bytes::from(body.to_string()))) else {
        return Answer { status: 0, body: Value::Null };
    };
    let Ok(resp) = c.request(req).await else {
        return Answer { status: 0, body: Value::Null };
    };
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes);
    let last = text.lines().filter_map(|l| l.strip_prefix("data: ")).last().map(str::to_owned).unwrap_or_else(|| text.to_string());
    Answer { status, body: serde_json::from_str(&last).unwrap_or(Value::Null) }
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

/// Runs every step against `url`.
pub async fn run(url: &str) -> bool {
    let c: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let mut s = Steps { ok: true, n: 0 };
    let h = |m: &'static str| vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", m)];

    let a = post(&c, url, &h("server/discover"), &request(1, "server/discover", json!({}))).await;
    let r = &a.body["result"];
    s.check(
        "server/discover is answered by Sluice from its upstreams",
        a.status == 200
            && r["supportedVersions"] == json!(["2026-07-28"])
            && r["ttlMs"].is_u64()
            && r["cacheScope"].is_string()
            && r["capabilities"]["tools"].is_object(),
        format!(
            "HTTP {} supportedVersions={} capabilities={} ttlMs={} cacheScope={}",
            a.status, r["supportedVersions"], r["capabilities"], r["ttlMs"], r["cacheScope"]
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
        "tools/list federates both upstreams with prefixed names, in a stable order",
        names.contains(&"alpha__add".to_owned())
            && names.contains(&"beta__echo".to_owned())
            && names == again
            && a.body["result"]["resultType"] == "complete",
        format!("{names:?}"),
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
        "an unsupported version gets -32022 with data.supported and data.requested, HTTP 400",
        a.status == 400
            && error_code(&a) == Some(-32022)
            && a.body.pointer("/error/data/requested") == Some(&json!("1900-01-01"))
            && a.body.pointer("/error/data/supported") == Some(&json!(["2026-07-28"])),
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
    s.check("a notification gets 202 and no JSON-RPC answer", a.status == 202 && a.body.is_null(), format!("HTTP {}", a.status));

    s.ok
}
