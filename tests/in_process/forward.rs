//! Issue 2 item 7: the modern upstream client — mirrored headers, progress and log relaying,
//! error statuses, `input_required` pass-through, stamping of non-conforming results,
//! cancellation on disconnect, and timeouts that name the upstream.

use std::time::Duration;

use serde_json::{json, Value};

use super::prelude::*;

fn call(name: &str, args: Value) -> Req {
    Req::new("tools/call").params(json!({"name": name, "arguments": args}))
}

fn with_meta(extra: Value) -> Value {
    let mut m = meta();
    for (k, v) in extra.as_object().unwrap() {
        m[k] = v.clone();
    }
    m
}

fn log(level: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "logger": "mock", "data": format!("{level} line")}})
}

fn progress(token: &Value, n: u64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": n, "total": 3}})
}

fn methods(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            e["method"]
                .as_str()
                .map(|m| {
                    format!(
                        "{m}{}",
                        e["params"]["level"]
                            .as_str()
                            .map(|l| format!(":{l}"))
                            .unwrap_or_default()
                    )
                })
                .unwrap_or_else(|| "result".into())
        })
        .collect()
}

#[tokio::test]
async fn progress_is_relayed_over_sse_with_the_token_unchanged() {
    let a = sluice_testkit::demo::upstream::start("pa", ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let b = sluice_testkit::demo::upstream::start("pb", ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let s = Gateway::e2e()
        .upstream("pa", &a.url())
        .upstream("pb", &b.url())
        .start()
        .await;
    for token in [json!("tok-ä-1"), json!(12345), json!(0)] {
        let r = call("pb__progress", json!({}))
            .id(json!("pr"))
            .meta(with_meta(json!({"progressToken": token})))
            .send(&s.url())
            .await;
        assert_eq!((r.status, r.header("x-accel-buffering")), (200, Some("no")));
        let ev = r.events();
        assert_eq!(
            methods(&ev),
            [
                "notifications/progress",
                "notifications/progress",
                "notifications/progress",
                "result"
            ]
        );
        for (i, e) in ev[..3].iter().enumerate() {
            assert_eq!(e["params"]["progressToken"], token, "token unchanged: {e}");
            assert_eq!(e["params"]["progress"], i as u64 + 1);
        }
        assert_eq!(ev[3]["id"], "pr");
        assert_result_stamped(&ev[3]["result"]);
    }
    // Without a token there is nothing to relay: one JSON answer.
    let r = call("pb__progress", json!({})).send(&s.url()).await;
    assert_eq!(r.result(&json!(1))["content"][0]["text"], "done");
}

fn chatty() -> Spec {
    Spec::new("chatty").on(|seen| {
        (seen.method == "tools/call").then(|| {
            let t = seen.params["_meta"]["progressToken"].clone();
            let mut chunks = vec![ev(&log("debug")), ev(&log("info"))];
            if !t.is_null() {
                chunks.push(ev(&progress(&t, 1)));
            }
            chunks.extend([ev(&log("warning")), ev(&log("error"))]);
            chunks.push(ev(&json!({"jsonrpc": "2.0", "id": seen.id, "result": {"resultType": "complete", "content": []}})));
            sse(chunks, Duration::ZERO, false)
        })
    })
}

#[tokio::test]
async fn log_messages_are_relayed_only_when_asked_and_at_or_above_the_level() {
    let m = chatty().start().await;
    let s = Gateway::e2e().upstream("chatty", &m.url()).start().await;
    let ask = |extra: Value| call("echo", json!({})).meta(with_meta(extra));
    let ev = ask(json!({"progressToken": "t"}))
        .send(&s.url())
        .await
        .events();
    assert_eq!(
        methods(&ev),
        ["notifications/progress", "result"],
        "no logLevel, no log messages"
    );
    let ev = ask(json!({"progressToken": "t", "io.modelcontextprotocol/logLevel": "warning"}))
        .send(&s.url())
        .await
        .events();
    assert_eq!(
        methods(&ev),
        [
            "notifications/progress",
            "notifications/message:warning",
            "notifications/message:error",
            "result"
        ]
    );
    let ev = ask(json!({"io.modelcontextprotocol/logLevel": "debug"}))
        .send(&s.url())
        .await
        .events();
    assert_eq!(
        methods(&ev),
        [
            "notifications/message:debug",
            "notifications/message:info",
            "notifications/message:warning",
            "notifications/message:error",
            "result"
        ]
    );
    assert_eq!(ev[0]["params"]["data"], "debug line");
    let ev = ask(json!({"io.modelcontextprotocol/logLevel": "emergency"}))
        .send(&s.url())
        .await;
    assert_eq!(
        ev.header("content-type"),
        Some("application/json"),
        "nothing to relay: the answer is plain JSON"
    );
    ev.result(&json!(1));
}

#[tokio::test]
async fn with_nothing_to_relay_the_answer_is_json_without_committing_a_stream() {
    let m = chatty().start().await;
    let s = Gateway::e2e().upstream("chatty", &m.url()).start().await;
    let r = call("echo", json!({})).send(&s.url()).await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    r.result(&json!(1));
}

#[tokio::test]
async fn upstream_errors_keep_the_status_their_code_fixes() {
    let m = Spec::new("errs")
        .on(|seen| {
            let name = seen.params["name"].as_str().unwrap_or("");
            let (status, code, data) = match name {
                "e32020" => (400, -32020, None),
                "e32601" => (404, -32601, None),
                "e32022" => (400, -32022, Some(json!({"supported": [V], "requested": "x"}))),
                "e32021" => (400, -32021, Some(json!({"requiredCapabilities": {"elicitation": {}}}))),
                "e32020-200" => (200, -32020, None),
                "e32602" => (200, -32602, None),
                "sse32601" => {
                    let e = json!({"jsonrpc": "2.0", "id": "upstream-id", "error": {"code": -32601, "message": "nope"}});
                    return Some(sse(vec![ev(&e)], Duration::ZERO, false));
                }
                _ => return None,
            };
            let mut e = json!({"code": code, "message": format!("upstream says {code}")});
            if let Some(d) = data {
                e["data"] = d;
            }
            Some(Reply::Json(status, json!({"jsonrpc": "2.0", "id": seen.id, "error": e}).to_string()))
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("errs", &m.url()).start().await;
    let cases = [
        ("e32020", 400, -32020),
        ("e32601", 404, -32601),
        ("e32022", 400, -32022),
        ("e32021", 400, -32021),
        ("e32020-200", 400, -32020),
        ("e32602", 200, -32602),
        ("sse32601", 404, -32601),
    ];
    for (name, status, code) in cases {
        let id = json!(format!("id-{name}"));
        let e = call(name, json!({}))
            .id(id.clone())
            .send(&s.url())
            .await
            .error(status, code, &id);
        if code == -32021 {
            assert_eq!(
                e["data"],
                json!({"requiredCapabilities": {"elicitation": {}}})
            );
        }
    }
}

#[tokio::test]
async fn retired_and_undefined_upstream_codes_are_mapped() {
    let m = Spec::new("retired")
        .on(|seen| match seen.method.as_str() {
            "resources/read" => Some(err(200, &seen.id, -32002, "Resource not found")),
            "tools/call" => Some(err(200, &seen.id, -32042, "URL elicitation required")),
            _ => None,
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("retired", &m.url()).start().await;
    let e = Req::new("resources/read")
        .params(json!({"uri": "mock://retired/doc"}))
        .send(&s.url())
        .await;
    let v = e.json();
    assert_eq!(
        (
            v["error"]["code"].as_i64(),
            v["error"]["data"]["uri"].as_str()
        ),
        (Some(-32602), Some("mock://retired/doc")),
        "{}",
        e.text
    );
    let e = call("echo", json!({})).send(&s.url()).await;
    assert_eq!(e.json()["error"]["code"], -32603, "{}", e.text);
}

fn asker() -> Spec {
    Spec::new("asker").on(|seen| {
        if seen.method != "tools/call" {
            return None;
        }
        Some(match seen.params.get("requestState") {
            None => ok(&seen.id, json!({"resultType": "input_required",
                "inputRequests": {"q1": {"method": "elicitation/create", "params": {"mode": "form", "message": "Which city?",
                    "requestedSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}}},
                "requestState": "opaque+/=state.v1"})),
            Some(state) => ok(&seen.id, json!({"resultType": "complete", "content": [{"type": "text", "text": format!("state={state} city={}", seen.params["inputResponses"]["q1"]["content"]["city"])}]})),
        })
    })
}

#[tokio::test]
async fn input_required_rounds_are_sealed_by_sluice_and_the_upstream_state_goes_back_byte_for_byte()
{
    let m = asker().start().await;
    let other = Spec::new("bystander").start().await;
    let s = Gateway::e2e()
        .upstream("asker", &m.url())
        .upstream("bystander", &other.url())
        .start()
        .await;
    let caps = with_meta(
        json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}),
    );
    let r = call("asker__echo", json!({"x": 1}))
        .id(json!("round-1"))
        .meta(caps.clone())
        .send(&s.url())
        .await
        .result(&json!("round-1"));
    assert_eq!(r["resultType"], "input_required");
    // Sluice's own sealed state replaces the upstream's, which it carries.
    let token = r["requestState"]
        .as_str()
        .expect("a requestState")
        .to_owned();
    assert_ne!(token, "opaque+/=state.v1");
    assert_eq!(r["inputRequests"]["q1"]["params"]["message"], "Which city?");
    assert!(
        r.get("ttlMs").is_none() && r.get("cacheScope").is_none(),
        "no cache hints on input_required: {r}"
    );
    // The retry: a new id, the same params plus inputResponses and Sluice's requestState.
    let responses = r#"{"q1":{"action":"accept","content":{"city":"Zürich","n":1.50}}}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"round-2","method":"tools/call","params":{{"name":"asker__echo","arguments":{{"x":1}},"inputResponses":{responses},"requestState":"{token}","_meta":{caps}}}}}"#
    );
    let r = call("asker__echo", json!({}))
        .id(json!("round-2"))
        .raw_body(body.clone())
        .send(&s.url())
        .await
        .result(&json!("round-2"));
    assert_eq!(
        r["content"][0]["text"],
        "state=\"opaque+/=state.v1\" city=\"Zürich\""
    );
    let retry = m.last("tools/call");
    assert_eq!(retry.id, "round-2");
    assert!(
        retry.body.contains(&format!(
            r#""inputResponses":{responses},"requestState":"opaque+/=state.v1""#
        )),
        "the upstream's state did not go back byte for byte: {}",
        retry.body
    );
    assert_eq!(retry.params["name"], "echo");
    // The state is bound to the request: other arguments fail the check.
    let changed = body.replace(r#""arguments":{"x":1}"#, r#""arguments":{"x":2}"#);
    let e = call("asker__echo", json!({}))
        .id(json!("round-3"))
        .raw_body(changed)
        .send(&s.url())
        .await;
    assert_eq!(
        (e.status, e.json()["error"]["data"]["reason"].as_str()),
        (400, Some("request_changed")),
        "{}",
        e.text
    );
}

#[tokio::test]
async fn input_required_from_resources_read_gets_no_cache_hints() {
    let m = Spec::new("readask")
        .on(|seen| {
            (seen.method == "resources/read").then(|| {
                ok(
                    &seen.id,
                    json!({"resultType": "input_required", "requestState": "s"}),
                )
            })
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("readask", &m.url()).start().await;
    let r = Req::new("resources/read")
        .params(json!({"uri": "mock://readask/doc"}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["resultType"], "input_required");
    assert!(
        r.get("ttlMs").is_none() && r.get("cacheScope").is_none(),
        "{r}"
    );
}

#[tokio::test]
async fn an_upstream_result_without_result_type_or_cache_hints_gets_them() {
    let m = Spec::new("sloppy")
        .on(|seen| match seen.method.as_str() {
            "tools/call" => Some(ok(&seen.id, json!({"content": [{"type": "text", "text": "hi"}], "_meta": {"com.example/trace": 1, "io.modelcontextprotocol/serverInfo": {"name": "sloppy", "version": "0"}}}))),
            "resources/read" => Some(ok(&seen.id, json!({"contents": [{"uri": "mock://sloppy/doc", "text": "t"}], "ttlMs": -5}))),
            "prompts/get" => Some(ok(&seen.id, json!({"messages": []}))),
            _ => None,
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("sloppy", &m.url()).start().await;
    let r = call("echo", json!({}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["resultType"], "complete");
    assert_eq!(
        r["_meta"]["com.example/trace"], 1,
        "other _meta members are kept"
    );
    assert!(
        r.get("ttlMs").is_none(),
        "tools/call results are not cacheable: {r}"
    );
    let r = Req::new("resources/read")
        .params(json!({"uri": "mock://sloppy/doc"}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(
        (
            r["resultType"].as_str(),
            r["ttlMs"].as_u64(),
            r["cacheScope"].as_str()
        ),
        (Some("complete"), Some(0), Some("private")),
        "{r}"
    );
    let r = Req::new("prompts/get")
        .params(json!({"name": "greet"}))
        .send(&s.url())
        .await
        .result(&json!(1));
    assert_eq!(r["resultType"], "complete");
}

#[tokio::test]
async fn mirrored_headers_reach_the_upstream_with_its_own_host_and_nothing_else_of_the_client() {
    let schema = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
    let m = Spec::new("mirror")
        .tools(vec![
            json!({"name": "locate", "inputSchema": schema}).to_string()
        ])
        .start()
        .await;
    let other = Spec::new("mirror-b").start().await;
    let s = Gateway::e2e()
        .upstream("mirror", &m.url())
        .upstream("mirror-b", &other.url())
        .start()
        .await;
    let r = call("mirror__locate", json!({"region": "Zürich"}))
        .header("mcp-param-region", &sluice::mcp::headers::encode("Zürich"))
        .header("mcp-param-unknown", "=?base64?kept as is")
        .header(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )
        .header("authorization", "Bearer client-token")
        .header("cookie", "sid=1")
        .header("mcp-session-id", "legacy-session");
    r.send(&s.url()).await.result(&json!(1));
    let seen = m.last("tools/call");
    assert_eq!(
        seen.header("host"),
        Some(m.addr.to_string().as_str()),
        "the upstream's own Host"
    );
    assert_eq!(seen.header("mcp-protocol-version"), Some(V));
    assert_eq!(seen.header("mcp-method"), Some("tools/call"));
    assert_eq!(seen.header("mcp-name"), Some("locate"));
    assert_eq!(
        seen.header("mcp-param-region"),
        Some(&*sluice::mcp::headers::encode("Zürich"))
    );
    assert_eq!(
        seen.header("mcp-param-unknown"),
        Some("=?base64?kept as is"),
        "unknown Mcp-Param-* forwarded unchanged"
    );
    assert_eq!(
        seen.header("traceparent"),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    );
    let accept = seen.header("accept").unwrap_or("");
    assert!(
        accept.contains("application/json") && accept.contains("text/event-stream"),
        "{accept}"
    );
    for h in ["authorization", "cookie", "mcp-session-id"] {
        assert!(
            seen.header(h).is_none(),
            "client header {h} must not reach the upstream"
        );
    }
}

#[tokio::test]
async fn a_client_disconnect_closes_the_upstream_stream() {
    let m = Spec::new("cancel")
        .on(|seen| {
            (seen.method == "tools/call").then(|| {
                let t = seen.params["_meta"]["progressToken"].clone();
                sse(
                    (1..=40).map(|i| ev(&progress(&t, i))).collect(),
                    Duration::from_millis(50),
                    true,
                )
            })
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("cancel", &m.url()).start().await;
    let mut st = call("echo", json!({}))
        .meta(with_meta(json!({"progressToken": "c"})))
        .stream(&s.url())
        .await;
    assert_eq!(
        st.next().await.expect("first progress")["params"]["progressToken"],
        "c"
    );
    assert_eq!(
        m.streams_closed(),
        0,
        "the upstream stream is open while the client reads"
    );
    drop(st);
    m.until("the upstream stream closed after the client left", |m| {
        m.streams_closed() == 1
    })
    .await;
}

#[tokio::test]
async fn an_upstream_response_timeout_gives_an_error_naming_the_upstream() {
    let m = Spec::new("slow")
        .on(|seen| (seen.method == "tools/call").then_some(Reply::Hang))
        .start()
        .await;
    let s = Gateway::e2e()
        .timeout("response_ms", 1000)
        .upstream("slow", &m.url())
        .start()
        .await;
    // Sluice's clock, paused: it runs to the response timeout as soon as everything waits.
    tokio::time::pause();
    let started = std::time::Instant::now();
    let r = call("echo", json!({})).id(json!("t")).send(&s.url()).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(r.status, 504, "{}", r.text);
    let e = r.error(504, -32603, &json!("t"));
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("'slow'") && msg.contains("1000 ms"), "{msg}");
}

#[tokio::test]
async fn an_upstream_that_stalls_mid_stream_ends_the_stream_with_an_error_naming_it() {
    let m = Spec::new("stall")
        .on(|seen| {
            (seen.method == "tools/call").then(|| {
                sse(
                    vec![ev(&progress(&seen.params["_meta"]["progressToken"], 1))],
                    Duration::ZERO,
                    true,
                )
            })
        })
        .start()
        .await;
    let s = Gateway::e2e()
        .timeout("response_ms", 1000)
        .upstream("stall", &m.url())
        .start()
        .await;
    tokio::time::pause();
    let mut st = call("echo", json!({}))
        .id(json!("st"))
        .meta(with_meta(json!({"progressToken": 5})))
        .stream(&s.url())
        .await;
    assert_eq!(
        st.next().await.expect("progress")["method"],
        "notifications/progress"
    );
    let e = st.next().await.expect("an error event");
    assert_eq!(
        (e["id"].clone(), e["error"]["code"].clone()),
        (json!("st"), json!(-32603)),
        "{e}"
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("'stall'"),
        "{e}"
    );
    assert!(st.next().await.is_none());
}

#[tokio::test]
async fn an_upstream_stream_that_ends_before_answering_gives_an_error_naming_it() {
    let m = Spec::new("quitter")
        .on(|seen| {
            (seen.method == "tools/call")
                .then(|| sse(vec![ev(&log("info"))], Duration::ZERO, false))
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("quitter", &m.url()).start().await;
    let r = call("echo", json!({})).id(json!("q")).send(&s.url()).await;
    assert!(r.status >= 500, "{} {}", r.status, r.text);
    let v = r.json();
    assert_eq!(
        (v["id"].clone(), v["error"]["code"].clone()),
        (json!("q"), json!(-32603))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'quitter'"),
        "{}",
        r.text
    );
}

#[tokio::test]
async fn an_upstream_answer_that_is_not_mcp_gives_an_error_naming_it() {
    let m = Spec::new("html")
        .on(|seen| {
            (seen.method == "tools/call").then(|| Reply::Json(200, "<html>oops</html>".into()))
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("html", &m.url()).start().await;
    let r = call("echo", json!({})).id(json!("h")).send(&s.url()).await;
    assert_eq!(r.status, 502, "{}", r.text);
    let e = r.error(502, -32603, &json!("h"));
    assert!(e["message"].as_str().unwrap().contains("'html'"), "{e}");
}

#[tokio::test]
async fn multi_line_upstream_sse_data_is_relayed_as_one_data_line() {
    let m = Spec::new("multiline")
        .on(|seen| {
            (seen.method == "tools/call").then(|| {
                let t = serde_json::to_string_pretty(&progress(&seen.params["_meta"]["progressToken"], 1)).unwrap();
                let split: String = t.lines().map(|l| format!("data: {l}\n")).collect::<String>() + "\n";
                let done = serde_json::to_string_pretty(
                    &json!({"jsonrpc": "2.0", "id": seen.id, "result": {"resultType": "complete", "content": []}}),
                )
                .unwrap();
                let done: String = done.lines().map(|l| format!("data: {l}\n")).collect::<String>() + "\n";
                sse(vec![split, done], Duration::ZERO, false)
            })
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("multiline", &m.url()).start().await;
    let r = call("echo", json!({}))
        .meta(with_meta(json!({"progressToken": "ml"})))
        .send(&s.url())
        .await;
    let ev = r.events();
    assert_eq!(
        methods(&ev),
        ["notifications/progress", "result"],
        "{}",
        r.text
    );
    assert_eq!(ev[0]["params"]["progressToken"], "ml");
}

#[tokio::test]
async fn an_upstream_connect_timeout_gives_an_error_naming_it() {
    let hole = stalled();
    let up = Spec::new("ct-up").start().await;
    // Paused: the probe of the stalled upstream runs to its connect timeout at once.
    tokio::time::pause();
    let started = std::time::Instant::now();
    let s = Gateway::e2e()
        .timeout("connect_ms", 1000)
        .upstream("ct-up", &up.url())
        .upstream("ct-hole", &hole.url)
        .start()
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the probe gave up after the connect timeout: {:?}",
        started.elapsed()
    );
    let r = call("ct-hole__echo", json!({}))
        .id(json!("ct"))
        .send(&s.url())
        .await;
    // Down since its probe: 503 naming it and why (issue 29).
    let e = r.error(503, -31030, &json!("ct"));
    assert!(e["message"].as_str().unwrap().contains("'ct-hole'"), "{e}");
    call("ct-up__echo", json!({}))
        .send(&s.url())
        .await
        .result(&json!(1));
}

#[tokio::test]
async fn mrtr_retries_and_reads_are_never_served_from_a_cache() {
    let m = Spec::new("nocache")
        .on(|seen| {
            (seen.method == "resources/read").then(|| match seen.params.get("requestState") {
                None => ok(&seen.id, json!({"resultType": "input_required", "requestState": "rs"})),
                Some(_) => ok(&seen.id, json!({"resultType": "complete", "contents": [{"uri": seen.params["uri"], "text": seen.id.to_string()}], "ttlMs": 60000, "cacheScope": "public"})),
            })
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("nocache", &m.url()).start().await;
    let uri = "mock://nocache/doc";
    let round = Req::new("resources/read")
        .id(json!("r0"))
        .params(json!({"uri": uri}))
        .send(&s.url())
        .await
        .result(&json!("r0"));
    let token = round["requestState"]
        .as_str()
        .expect("sealed state")
        .to_owned();
    let retry = |id: &str, token: &str| {
        Req::new("resources/read")
            .id(json!(id))
            .params(json!({"uri": uri, "inputResponses": {}, "requestState": token}))
    };
    let first = retry("r1", &token)
        .send(&s.url())
        .await
        .result(&json!("r1"));
    // Each round state is single use: the second retry answers a round of its own.
    let round = Req::new("resources/read")
        .id(json!("r0b"))
        .params(json!({"uri": uri}))
        .send(&s.url())
        .await
        .result(&json!("r0b"));
    let token = round["requestState"]
        .as_str()
        .expect("sealed state")
        .to_owned();
    let second = retry("r2", &token)
        .send(&s.url())
        .await
        .result(&json!("r2"));
    assert_eq!(
        (
            first["contents"][0]["text"].as_str(),
            second["contents"][0]["text"].as_str()
        ),
        (Some("\"r1\""), Some("\"r2\""))
    );
    assert_eq!(
        m.count("resources/read"),
        4,
        "each retry reached the upstream"
    );
}
