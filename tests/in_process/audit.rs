//! The audit log and `/metrics` (issue 5 items 2 and 4).
//!
//! - `every_path_writes_exactly_one_content_free_record`: one request of each kind (success, an
//!   `input_required` round and its retry, a resource read, a list, a legacy upstream's round,
//!   every error class: 401, 403, 405, 406, 413, -32700, -32600, -32602, -32020, -32022,
//!   -32601, an unknown tool, a policy denial, an upstream failure (502), the request deadline
//!   (504), a notification (202) and a client that disconnects mid-request (499)) gives exactly one
//!   record in the configured file sink, with the documented fields (method, name, upstream and
//!   era, input keys as `key=method`, round, policy rule and decision, status, error code,
//!   latency, bytes in and out) and none of the values that travelled.
//! - `a_stuck_sink_never_blocks_requests`: a capacity-1 channel whose sink never accepts a
//!   byte (a FIFO nobody reads): a burst of requests is served in full while all records past
//!   the first are dropped and counted (`sluice_audit_dropped`).
//! - `metrics_show_requests_latency_rounds_parked_exchanges_and_refusals`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::support::gateway::{keys, strings, ApiKey, Gateway};
use crate::support::modern::{self, Reply};
use crate::support::rpc::{body, call, http, request, send};

const KEY: &str = "audit-test-key-0123456789";
/// A value that travels in arguments, answers and results and must never reach the audit log.
const SECRET: &str = "audit-secret-value-7d1f";

/// Every field an audit record may have (docs/operations.md's schema).
const FIELDS: &[&str] = &[
    "time_ms",
    "principal",
    "client_era",
    "method",
    "name",
    "upstream",
    "upstream_era",
    "input_keys",
    "round",
    "policy_rule",
    "decision",
    "budget_left",
    "status",
    "error_code",
    "latency_us",
    "bytes_in",
    "bytes_out",
];

fn scratch(name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let p = dir.join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// The modern mock `alpha`: `echo` answers its text, `ask` asks for an elicitation and a
/// sampling answer (one round, upstream state carrying the secret), `boom` answers HTTP 500 with
/// HTML, `hang` never answers, `forbidden` is denied by policy, `doc` is a resource.
async fn alpha() -> modern::Mock {
    let tools = json!([
        modern::tool_args("echo", &["text"]),
        modern::tool_args("ask", &["question"]),
        modern::tool_args("boom", &[]),
        modern::tool_args("hang", &[]),
        modern::tool_args("forbidden", &[]),
    ]);
    let resources = json!([{"uri": "mock://alpha/doc", "name": "doc"}]);
    modern::start("alpha", tools, resources, |r| {
        let tool = r.params["name"].as_str().unwrap_or("");
        match (r.method.as_str(), tool) {
            ("tools/call", "echo") => {
                Reply::Result(json!({"content": [{"type": "text", "text": r.params["arguments"]["text"].clone()}]}))
            }
            ("tools/call", "ask") if r.params.get("inputResponses").is_none() => Reply::Result(json!({
                "resultType": "input_required",
                "inputRequests": {
                    "answer": {"method": "elicitation/create", "params": {"mode": "form", "message": SECRET,
                        "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}},
                    "llm": {"method": "sampling/createMessage", "params": {"messages": [{"role": "user", "content": {"type": "text", "text": SECRET}}], "maxTokens": 10}}
                },
                "requestState": format!("{SECRET}-state")
            })),
            ("tools/call", "ask") => Reply::Result(json!({"content": [{"type": "text", "text": format!("done {SECRET}")}]})),
            ("tools/call", "boom") => Reply::Raw(500, "text/html", Bytes::from_static(b"<html>oops</html>")),
            ("tools/call", "hang") => Reply::Hang,
            ("resources/read", _) => {
                Reply::Result(json!({"contents": [{"uri": "mock://alpha/doc", "text": SECRET}], "ttlMs": 0, "cacheScope": "private"}))
            }
            _ => Reply::Error(200, -32602, "unknown"),
        }
    })
    .await
}

const POLICY: &str = "[[rule]]\nname = \"no-forbidden\"\nmatch = { tool = [\"forbidden\"] }\neffect = \"deny\"\nreason = \"not here\"\n";

/// Sluice in front of `alpha` and the built-in legacy demo `repo`, API key auth, a policy
/// denying `forbidden`, the audit log in `sink` with `capacity`.
async fn gateway(sink: &Path, capacity: usize, alpha_url: &str, repo_url: &str) -> sluice::Running {
    let policy = sink.with_extension("policy.toml");
    std::fs::write(&policy, POLICY).expect("write the policy");
    Gateway::new()
        .named("audit.toml")
        .policy_file(&policy)
        .timeouts(&[
            ("connect_ms", 500),
            ("response_ms", 5000),
            ("request_ms", 3000),
            ("refresh_ms", 60_000),
            ("shutdown_ms", 500),
        ])
        .limit("max_body_bytes", 65536)
        .set("state", "keys", strings(&[keys::BRIDGE_A]))
        .bridge_key("park_ms", 10_000)
        .audit_to(sink)
        .set("audit", "capacity", capacity as i64)
        .api_key(ApiKey::new(KEY, "alice"))
        .upstream("alpha", alpha_url)
        .upstream("repo", repo_url)
        .healthy()
        .start()
        .await
}

/// Reads audit records as they are appended.
struct Records {
    reader: BufReader<std::fs::File>,
    pending: String,
}

impl Records {
    /// Opens the sink once Sluice's writer created it (polled: the file has no event to wait on).
    async fn open(path: &Path) -> Records {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            if let Ok(f) = std::fs::File::open(path) {
                return Records {
                    reader: BufReader::new(f),
                    pending: String::new(),
                };
            }
            assert!(
                Instant::now() < deadline,
                "the audit sink {} was not created",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The next record (waits at most 2 s).
    async fn next(&mut self, what: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let mut chunk = String::new();
            let _ = self.reader.read_line(&mut chunk);
            self.pending.push_str(&chunk);
            if self.pending.ends_with('\n') {
                let line = std::mem::take(&mut self.pending);
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {line}"));
                for k in v.as_object().expect("a record is an object").keys() {
                    assert!(
                        FIELDS.contains(&k.as_str()),
                        "undocumented audit field {k:?} in {v}"
                    );
                }
                for k in [
                    "time_ms",
                    "client_era",
                    "status",
                    "latency_us",
                    "bytes_in",
                    "bytes_out",
                ] {
                    assert!(v.get(k).is_some(), "audit record without {k}: {v}");
                }
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "no audit record for {what} within 2 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Asserts that no further record arrives within `wait`.
    async fn none_within(&mut self, wait: Duration) {
        tokio::time::sleep(wait).await;
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.reader, &mut rest);
        assert!(
            self.pending.is_empty() && rest.is_empty(),
            "unexpected extra audit records: {}{rest}",
            self.pending
        );
    }
}

/// What one record must say (fields not listed must be absent unless `any` names them).
#[derive(Default)]
struct Expect {
    status: u16,
    code: Option<i64>,
    method: Option<&'static str>,
    name: Option<&'static str>,
    upstream: Option<(&'static str, &'static str)>,
    input_keys: Vec<&'static str>,
    round: Option<u32>,
    policy: Option<(&'static str, &'static str)>,
    principal: bool,
}

fn check(rec: &Value, e: &Expect, what: &str, bytes_in: Option<usize>) {
    let s = |k: &str| rec.get(k).and_then(Value::as_str).map(str::to_owned);
    assert_eq!(rec["status"], e.status, "{what}: status in {rec}");
    assert_eq!(
        rec.get("error_code").and_then(Value::as_i64),
        e.code,
        "{what}: error_code in {rec}"
    );
    assert_eq!(s("method").as_deref(), e.method, "{what}: method in {rec}");
    assert_eq!(s("name").as_deref(), e.name, "{what}: name in {rec}");
    assert_eq!(
        s("upstream").as_deref(),
        e.upstream.map(|u| u.0),
        "{what}: upstream in {rec}"
    );
    assert_eq!(
        s("upstream_era").as_deref(),
        e.upstream.map(|u| u.1),
        "{what}: upstream_era in {rec}"
    );
    let keys: Vec<&str> = rec
        .get("input_keys")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys, e.input_keys, "{what}: input_keys in {rec}");
    assert_eq!(
        rec.get("round").and_then(Value::as_u64),
        e.round.map(u64::from),
        "{what}: round in {rec}"
    );
    assert_eq!(
        s("policy_rule").as_deref(),
        e.policy.map(|p| p.0),
        "{what}: policy_rule in {rec}"
    );
    if let Some((_, decision)) = e.policy {
        assert_eq!(
            s("decision").as_deref(),
            Some(decision),
            "{what}: decision in {rec}"
        );
    }
    if e.principal {
        assert_eq!(
            s("principal").as_deref(),
            Some("alice"),
            "{what}: principal in {rec}"
        );
    }
    assert_eq!(rec["client_era"], "modern", "{what}: client_era in {rec}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let t = rec["time_ms"].as_u64().expect("time_ms");
    assert!(
        t <= now && now - t < 60_000,
        "{what}: time_ms {t} is not recent (now {now})"
    );
    assert!(
        rec["latency_us"].as_u64().is_some(),
        "{what}: latency_us in {rec}"
    );
    if let Some(n) = bytes_in {
        assert_eq!(
            rec["bytes_in"].as_u64(),
            Some(n as u64),
            "{what}: bytes_in in {rec}"
        );
    }
    if e.status == 200 {
        assert!(
            rec["bytes_out"].as_u64().unwrap_or(0) > 0,
            "{what}: bytes_out in {rec}"
        );
    }
}

#[tokio::test]
async fn every_path_writes_exactly_one_content_free_record() {
    let sink = scratch("paths.jsonl");
    let up = alpha().await;
    let repo = sluice_testkit::demo::legacy::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("legacy demo upstream");
    let gw = gateway(&sink, 1024, &up.url(), &repo.url()).await;
    let (url, h) = (gw.url(), http());
    let mut log = Records::open(&sink).await;
    let caps = json!({"elicitation": {"form": {}}, "sampling": {}});
    let key = Some(KEY);
    let ok = |method, name, upstream| Expect {
        status: 200,
        method: Some(method),
        name,
        upstream,
        principal: true,
        ..Default::default()
    };

    // Success: a tool call with its bytes in and out.
    let b = body(
        1,
        "tools/call",
        json!({"name": "alpha__echo", "arguments": {"text": SECRET}}),
        json!({}),
    );
    let a = call(&h, &url, &b, key).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let rec = log.next("a tool call").await;
    check(
        &rec,
        &ok("tools/call", Some("alpha__echo"), Some(("alpha", "modern"))),
        "a tool call",
        Some(b.to_string().len()),
    );
    assert_eq!(
        rec["bytes_out"].as_u64(),
        Some(a.text.len() as u64),
        "bytes_out of a JSON answer: {rec}"
    );

    // A modern upstream's input_required round: its input keys and methods; the retry: round 1.
    let b = body(
        2,
        "tools/call",
        json!({"name": "alpha__ask", "arguments": {"question": SECRET}}),
        caps.clone(),
    );
    let a = call(&h, &url, &b, key).await;
    assert_eq!(
        a.msg["result"]["resultType"], "input_required",
        "{}",
        a.text
    );
    let state = a.msg["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    let e = Expect {
        input_keys: vec!["answer=elicitation/create", "llm=sampling/createMessage"],
        ..ok("tools/call", Some("alpha__ask"), Some(("alpha", "modern")))
    };
    check(
        &log.next("an input_required round").await,
        &e,
        "an input_required round",
        None,
    );
    let mut b = body(
        3,
        "tools/call",
        json!({"name": "alpha__ask", "arguments": {"question": SECRET}}),
        caps.clone(),
    );
    b["params"]["inputResponses"] = json!({"answer": {"action": "accept", "content": {"answer": SECRET}},
        "llm": {"role": "assistant", "content": {"type": "text", "text": SECRET}, "model": "m"}});
    b["params"]["requestState"] = json!(state);
    let a = call(&h, &url, &b, key).await;
    assert_eq!(a.msg["result"]["resultType"], "complete", "{}", a.text);
    let e = Expect {
        round: Some(1),
        ..ok("tools/call", Some("alpha__ask"), Some(("alpha", "modern")))
    };
    check(&log.next("a retry").await, &e, "a retry", None);

    // A resource read (its name is the URI) and a federated list (no upstream).
    let b = body(
        4,
        "resources/read",
        json!({"uri": "mock://alpha/doc"}),
        json!({}),
    );
    assert_eq!(call(&h, &url, &b, key).await.status, 200);
    check(
        &log.next("a resource read").await,
        &ok(
            "resources/read",
            Some("mock://alpha/doc"),
            Some(("alpha", "modern")),
        ),
        "a read",
        None,
    );
    let b = body(5, "tools/list", Value::Null, json!({}));
    assert_eq!(call(&h, &url, &b, key).await.status, 200);
    check(
        &log.next("a list").await,
        &ok("tools/list", None, None),
        "a list",
        None,
    );

    // A legacy upstream's mid-call ask (bridge A): its input key and method.
    let b = body(
        6,
        "tools/call",
        json!({"name": "repo__summarize_repo", "arguments": {"audience": SECRET}}),
        caps.clone(),
    );
    let a = call(&h, &url, &b, key).await;
    assert_eq!(
        a.msg["result"]["resultType"], "input_required",
        "{}",
        a.text
    );
    let e = Expect {
        input_keys: vec!["pick_files=sampling/createMessage"],
        ..ok(
            "tools/call",
            Some("repo__summarize_repo"),
            Some(("repo", "legacy")),
        )
    };
    check(
        &log.next("a bridge A round").await,
        &e,
        "a bridge A round",
        None,
    );

    // Error classes.
    let err = |status, code: Option<i64>, method| Expect {
        status,
        code,
        method,
        principal: method.is_some(),
        ..Default::default()
    };
    let list = body(7, "tools/list", Value::Null, json!({}));
    let a = call(&h, &url, &list, None).await;
    assert_eq!(a.status, 401);
    check(
        &log.next("401").await,
        &err(401, Some(-31001), None),
        "no credentials",
        None,
    );
    let a = send(request(
        &h,
        &url,
        &list,
        key,
        &[("origin", "http://evil.example")],
    ))
    .await;
    assert_eq!(a.status, 403);
    check(
        &log.next("403").await,
        &err(403, None, None),
        "a foreign Origin",
        None,
    );
    let a = send(h.get(&url).bearer_auth(KEY)).await;
    assert_eq!(a.status, 405);
    check(&log.next("405").await, &err(405, None, None), "GET", None);
    let a = send(request(
        &h,
        &url,
        &list,
        key,
        &[("accept", "application/json")],
    ))
    .await;
    assert_eq!(a.status, 406);
    check(
        &log.next("406").await,
        &err(406, None, None),
        "a bad Accept",
        None,
    );
    let big = body(
        8,
        "tools/call",
        json!({"name": "alpha__echo", "arguments": {"text": "x".repeat(70_000)}}),
        json!({}),
    );
    let a = call(&h, &url, &big, key).await;
    assert_eq!(a.status, 413);
    check(
        &log.next("413").await,
        &err(413, None, None),
        "a large body",
        None,
    );
    let raw = |text: &'static str| {
        h.post(&url)
            .bearer_auth(KEY)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(text)
    };
    assert_eq!(send(raw("{nope")).await.status, 400);
    check(
        &log.next("-32700").await,
        &err(400, Some(-32700), None),
        "not JSON",
        Some(5),
    );
    assert_eq!(
        send(raw(
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}]"
        ))
        .await
        .status,
        400
    );
    check(
        &log.next("-32600").await,
        &err(400, Some(-32600), None),
        "a batch",
        None,
    );
    let mut no_meta = body(9, "tools/list", Value::Null, json!({}));
    no_meta["params"].as_object_mut().unwrap().remove("_meta");
    assert_eq!(call(&h, &url, &no_meta, key).await.status, 400);
    check(
        &log.next("-32602").await,
        &err(400, Some(-32602), Some("tools/list")),
        "no _meta",
        None,
    );
    let a = send(request(
        &h,
        &url,
        &list,
        key,
        &[("mcp-method", "tools/call")],
    ))
    .await;
    assert_eq!(a.status, 400);
    check(
        &log.next("-32020").await,
        &err(400, Some(-32020), Some("tools/list")),
        "a header mismatch",
        None,
    );
    let mut old = list.clone();
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let a = send(request(
        &h,
        &url,
        &old,
        key,
        &[("mcp-protocol-version", "2099-01-01")],
    ))
    .await;
    assert_eq!(a.status, 400, "{}", a.text);
    check(
        &log.next("-32022").await,
        &err(400, Some(-32022), Some("tools/list")),
        "an unsupported version",
        None,
    );
    let a = call(&h, &url, &body(10, "foo/bar", Value::Null, json!({})), key).await;
    assert_eq!(a.status, 404);
    check(
        &log.next("-32601").await,
        &err(404, Some(-32601), Some("foo/bar")),
        "an unknown method",
        None,
    );
    let a = call(
        &h,
        &url,
        &body(
            11,
            "tools/call",
            json!({"name": "alpha__nope", "arguments": {}}),
            json!({}),
        ),
        key,
    )
    .await;
    let code = a.msg["error"]["code"].as_i64();
    assert!(code.is_some(), "an unknown tool is an error: {}", a.text);
    // A name that resolved to nothing is not recorded (issue 28 F12: it may be any text).
    let e = Expect {
        name: None,
        ..err(a.status, code, Some("tools/call"))
    };
    check(
        &log.next("an unknown tool").await,
        &e,
        "an unknown tool",
        None,
    );
    let a = call(
        &h,
        &url,
        &body(
            12,
            "tools/call",
            json!({"name": "alpha__forbidden", "arguments": {}}),
            json!({}),
        ),
        key,
    )
    .await;
    assert_eq!(a.msg["error"]["code"], -31014, "{}", a.text);
    let e = Expect {
        name: Some("alpha__forbidden"),
        upstream: Some(("alpha", "modern")),
        policy: Some(("no-forbidden", "deny")),
        ..err(a.status, Some(-31014), Some("tools/call"))
    };
    check(
        &log.next("a policy denial").await,
        &e,
        "a policy denial",
        None,
    );
    let a = call(
        &h,
        &url,
        &body(
            13,
            "tools/call",
            json!({"name": "alpha__boom", "arguments": {}}),
            json!({}),
        ),
        key,
    )
    .await;
    assert_eq!(a.status, 502, "{}", a.text);
    let e = Expect {
        name: Some("alpha__boom"),
        upstream: Some(("alpha", "modern")),
        ..err(502, a.msg["error"]["code"].as_i64(), Some("tools/call"))
    };
    check(
        &log.next("an upstream failure").await,
        &e,
        "an upstream failure",
        None,
    );
    let started = Instant::now();
    // Paused: Sluice's request deadline (a tokio timer) fires as soon as everything waits on it.
    tokio::time::pause();
    let a = call(
        &h,
        &url,
        &body(
            14,
            "tools/call",
            json!({"name": "alpha__hang", "arguments": {}}),
            json!({}),
        ),
        key,
    )
    .await;
    tokio::time::resume();
    assert_eq!(a.status, 504, "{}", a.text);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the request deadline took {:?}",
        started.elapsed()
    );
    let e = Expect {
        name: Some("alpha__hang"),
        upstream: Some(("alpha", "modern")),
        ..err(504, None, Some("tools/call"))
    };
    check(
        &log.next("the request deadline").await,
        &e,
        "the request deadline",
        None,
    );
    let mut note = body(
        0,
        "notifications/cancelled",
        json!({"requestId": 1}),
        json!({}),
    );
    note.as_object_mut().unwrap().remove("id");
    assert_eq!(call(&h, &url, &note, key).await.status, 202);
    check(
        &log.next("a notification").await,
        &err(202, None, None),
        "a notification",
        None,
    );

    // A client that goes away mid-request: one record, status 499, once hyper sees the close.
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let hang = body(
        15,
        "tools/call",
        json!({"name": "alpha__hang", "arguments": {}}),
        json!({}),
    );
    assert!(
        request(&quick, &url, &hang, key, &[]).send().await.is_err(),
        "the hanging call timed out on the client"
    );
    drop(quick);
    let e = Expect {
        name: Some("alpha__hang"),
        upstream: Some(("alpha", "modern")),
        ..err(499, None, Some("tools/call"))
    };
    check(
        &log.next("a client disconnect").await,
        &e,
        "a client disconnect",
        None,
    );

    // Exactly one record each: nothing more arrives.
    log.none_within(Duration::from_millis(300)).await;
    let all = std::fs::read_to_string(&sink).unwrap();
    assert!(
        !all.contains(SECRET) && !all.contains("audit-secret"),
        "a value reached the audit log:\n{all}"
    );
    assert!(!all.contains(KEY), "the API key reached the audit log");
    gw.stop().await;
}

#[tokio::test]
async fn a_stuck_sink_never_blocks_requests() {
    // A FIFO nobody reads: opening it for writing blocks the audit writer forever, so the
    // channel (capacity 1) fills with the first record and every later one must be dropped.
    let fifo = scratch("stuck.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let up = alpha().await;
    let repo = sluice_testkit::demo::legacy::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("legacy demo upstream");
    let gw = gateway(&fifo, 1, &up.url(), &repo.url()).await;
    let (url, h) = (gw.url(), http());
    const N: usize = 200;
    let started = Instant::now();
    let calls = (0..N).map(|i| {
        let (h, url) = (h.clone(), url.clone());
        async move {
            let b = body(
                i as u64,
                "tools/call",
                // Arguments of their own: the same ones 200 times is a loop the breaker stops.
                json!({"name": "alpha__echo", "arguments": {"text": format!("hi {i}")}}),
                json!({}),
            );
            call(&h, &url, &b, Some(KEY)).await.status
        }
    });
    let statuses = futures_util::future::join_all(calls).await;
    assert!(
        statuses.iter().all(|s| *s == 200),
        "every request of the burst is served: {statuses:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the burst took {:?}",
        started.elapsed()
    );
    assert_eq!(
        gw.gateway.rt.audit.dropped(),
        N as u64 - 1,
        "all records but the one in the channel are dropped and counted"
    );
    let metrics = h
        .get(format!("http://{}/metrics", gw.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == format!("sluice_audit_dropped {}", N - 1)),
        "sluice_audit_dropped in:\n{metrics}"
    );
    // Unblock the writer: the one buffered record arrives.
    let reader = std::thread::spawn(move || std::fs::read_to_string(&fifo).unwrap_or_default());
    gw.stop().await;
    let got = tokio::task::spawn_blocking(move || reader.join().unwrap())
        .await
        .unwrap();
    assert_eq!(got.lines().count(), 1, "the one buffered record: {got}");
}

fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (n, rest) = series
            .split_once('{')
            .map(|(n, r)| (n, r.trim_end_matches('}')))
            .unwrap_or((series, ""));
        if n != name
            || !labels
                .iter()
                .all(|(k, v)| rest.split(',').any(|p| p == format!("{k}=\"{v}\"")))
        {
            return None;
        }
        value.parse().ok()
    })
}

#[tokio::test]
async fn metrics_show_requests_latency_rounds_parked_exchanges_and_refusals() {
    let sink = scratch("metrics.jsonl");
    let up = alpha().await;
    let repo = sluice_testkit::demo::legacy::start(([127, 0, 0, 1], 0).into())
        .await
        .expect("legacy demo upstream");
    let gw = gateway(&sink, 1024, &up.url(), &repo.url()).await;
    let (url, h) = (gw.url(), http());
    let caps = json!({"elicitation": {"form": {}}, "sampling": {}});
    for i in 0..3 {
        let b = body(
            i,
            "tools/call",
            json!({"name": "alpha__echo", "arguments": {"text": "x"}}),
            json!({}),
        );
        assert_eq!(call(&h, &url, &b, Some(KEY)).await.status, 200);
    }
    let a = call(
        &h,
        &url,
        &body(
            4,
            "tools/call",
            json!({"name": "alpha__ask", "arguments": {"question": "q"}}),
            caps.clone(),
        ),
        Some(KEY),
    )
    .await;
    assert_eq!(a.msg["result"]["resultType"], "input_required");
    let a = call(
        &h,
        &url,
        &body(
            5,
            "tools/call",
            json!({"name": "repo__summarize_repo", "arguments": {"audience": "ops"}}),
            caps,
        ),
        Some(KEY),
    )
    .await;
    assert_eq!(
        a.msg["result"]["resultType"], "input_required",
        "{}",
        a.text
    );
    let a = call(
        &h,
        &url,
        &body(
            6,
            "tools/call",
            json!({"name": "alpha__forbidden", "arguments": {}}),
            json!({}),
        ),
        Some(KEY),
    )
    .await;
    assert_eq!(a.msg["error"]["code"], -31014);
    assert_eq!(
        call(
            &h,
            &url,
            &body(7, "tools/list", Value::Null, json!({})),
            None
        )
        .await
        .status,
        401
    );
    assert_eq!(
        call(
            &h,
            &url,
            &body(
                8,
                "tools/call",
                json!({"name": "alpha__boom", "arguments": {}}),
                json!({})
            ),
            Some(KEY)
        )
        .await
        .status,
        502
    );

    let r = h
        .get(format!("http://{}/metrics", gw.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .contains("openmetrics-text"));
    let m = r.text().await.unwrap();
    let ok = [
        ("mcp_method_name", "tools/call"),
        ("upstream", "alpha"),
        ("error_type", "ok"),
    ];
    assert_eq!(
        metric(&m, "sluice_requests_total", &ok),
        Some(4.0),
        "requests by method, upstream, outcome:\n{m}"
    );
    assert_eq!(
        metric(&m, "mcp_server_operation_duration_seconds_count", &ok),
        Some(4.0),
        "latency histogram count:\n{m}"
    );
    assert!(
        metric(
            &m,
            "mcp_server_operation_duration_seconds_bucket",
            &[("mcp_method_name", "tools/call"), ("le", "+Inf")]
        )
        .is_some(),
        "buckets:\n{m}"
    );
    assert_eq!(
        metric(
            &m,
            "sluice_requests_total",
            &[
                ("mcp_method_name", "tools/call"),
                ("upstream", "alpha"),
                ("error_type", "-31014")
            ]
        ),
        Some(1.0),
        "a denial by outcome:\n{m}"
    );
    assert_eq!(
        metric(&m, "sluice_input_rounds_total", &[]),
        Some(2.0),
        "rounds:\n{m}"
    );
    assert_eq!(
        metric(&m, "sluice_parked_exchanges", &[]),
        Some(1.0),
        "parked exchanges:\n{m}"
    );
    assert!(
        metric(&m, "sluice_legacy_sessions", &[]).is_some_and(|n| n >= 1.0),
        "legacy sessions:\n{m}"
    );
    assert_eq!(
        metric(&m, "sluice_refusals_total", &[("kind", "-31014")]),
        Some(1.0),
        "policy refusals:\n{m}"
    );
    assert_eq!(
        metric(&m, "sluice_refusals_total", &[("kind", "-31001")]),
        Some(1.0),
        "authentication refusals:\n{m}"
    );
    assert_eq!(
        metric(&m, "sluice_upstream_errors_total", &[("kind", "alpha")]),
        Some(1.0),
        "upstream errors:\n{m}"
    );
    assert_eq!(
        metric(&m, "sluice_audit_dropped", &[]),
        Some(0.0),
        "audit drops:\n{m}"
    );
    gw.stop().await;
}
