//! Issue 2 item 3, the edge and framing: POST only, Accept, body limit, JSON-RPC framing,
//! notifications, Host/Origin, ids on every error, stamped results, compact bodies, SSE framing.

use serde_json::{json, Value};

use super::prelude::*;

#[tokio::test]
async fn get_without_session_is_405_with_allow_post() {
    let (_demo, s) = one_demo("fd-get").await;
    let resp = client()
        .get(s.url())
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(
        resp.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
}

#[tokio::test]
async fn delete_is_405_with_allow_post() {
    let (_demo, s) = one_demo("fd-delete").await;
    let resp = client()
        .delete(s.url())
        .header("mcp-session-id", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert_eq!(
        resp.headers().get("allow").and_then(|v| v.to_str().ok()),
        Some("POST")
    );
}

#[tokio::test]
async fn post_whose_accept_lacks_either_media_type_is_406() {
    let (_demo, s) = one_demo("fd-accept").await;
    for accept in [
        "application/json",
        "text/event-stream",
        "*/*",
        "application/*, text/*",
    ] {
        let r = Req::new("server/discover")
            .header("accept", accept)
            .send(&s.url())
            .await;
        assert_eq!(r.status, 406, "Accept: {accept}");
    }
    let r = Req::new("server/discover")
        .without("accept")
        .send(&s.url())
        .await;
    assert_eq!(r.status, 406, "no Accept");
}

#[tokio::test]
async fn accept_listing_both_types_with_parameters_and_case_is_served() {
    let (_demo, s) = one_demo("fd-accept-ok").await;
    let r = Req::new("server/discover")
        .header("accept", "Text/Event-Stream;q=0.5, APPLICATION/JSON;q=1")
        .send(&s.url())
        .await;
    r.result(&json!(1));
}

#[tokio::test]
async fn body_over_the_configured_limit_is_413_with_or_without_content_length() {
    let demo = sluice_testkit::demo::upstream::start("fd-413", ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let s = Gateway::e2e()
        .upstream("fd-413", &demo.url())
        .limit("max_body_bytes", 1024)
        .start()
        .await;
    let pad = "x".repeat(2000);
    let big = Req::new("server/discover").params(json!({"pad": pad}));
    assert_eq!(
        big.send(&s.url()).await.status,
        413,
        "declared Content-Length over the limit"
    );
    // Chunked: no Content-Length, the limit must still hold while reading.
    let (headers, body) = Req::new("server/discover")
        .params(json!({"pad": "y".repeat(2000)}))
        .build();
    let mut rb = client().post(s.url());
    for (k, v) in headers {
        rb = rb.header(k, reqwest::header::HeaderValue::from_bytes(&v).unwrap());
    }
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        body.chunks(100).map(|c| Ok(c.to_vec())).collect();
    let resp = rb
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413, "chunked body over the limit");
    // Under the limit is served.
    Req::new("server/discover")
        .send(&s.url())
        .await
        .result(&json!(1));
}

#[tokio::test]
async fn default_body_limit_is_4_mib() {
    let (_demo, s) = one_demo("fd-4mib").await;
    let over = Req::new("server/discover").params(json!({"pad": "z".repeat(4 << 20)}));
    assert_eq!(over.send(&s.url()).await.status, 413);
    let under = Req::new("server/discover").params(json!({"pad": "z".repeat((4 << 20) - 4096)}));
    under.send(&s.url()).await.result(&json!(1));
}

#[tokio::test]
async fn body_that_is_not_json_is_400_parse_error_with_null_id() {
    let (_demo, s) = one_demo("fd-32700").await;
    for body in [
        "{\"jsonrpc\":\"2.0\",\"id\":1,",
        "not json",
        "[{\"jsonrpc\":\"2.0\"",
        "\u{0}",
    ] {
        let r = Req::new("server/discover")
            .raw_body(body)
            .send(&s.url())
            .await;
        r.error(400, -32700, &Value::Null);
    }
}

#[tokio::test]
async fn batch_is_400_invalid_request() {
    let (_demo, s) = one_demo("fd-batch").await;
    let one = Req::new("server/discover").body_json();
    let r = Req::new("server/discover")
        .raw_body(json!([one, one]).to_string())
        .send(&s.url())
        .await;
    r.error(400, -32600, &Value::Null);
}

#[tokio::test]
async fn posted_response_object_is_400_invalid_request() {
    let (_demo, s) = one_demo("fd-response").await;
    for body in [
        json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": 1, "message": "x"}}),
    ] {
        let r = Req::new("server/discover")
            .raw_body(body.to_string())
            .send(&s.url())
            .await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].as_i64()),
            (400, Some(-32600)),
            "{}",
            r.text
        );
    }
}

#[tokio::test]
async fn wrong_or_missing_jsonrpc_version_is_400_invalid_request() {
    let (_demo, s) = one_demo("fd-jsonrpc").await;
    let good = Req::new("server/discover").body_json();
    for version in [json!("1.0"), json!(2.0), Value::Null] {
        let mut b = good.clone();
        match &version {
            Value::Null => {
                b.as_object_mut().unwrap().remove("jsonrpc");
            }
            v => b["jsonrpc"] = v.clone(),
        }
        let r = Req::new("server/discover")
            .raw_body(b.to_string())
            .send(&s.url())
            .await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].as_i64()),
            (400, Some(-32600)),
            "jsonrpc {version}: {}",
            r.text
        );
    }
    // A non-object params, a missing method and an object id are not requests either.
    for bad in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": [1]}),
        json!({"jsonrpc": "2.0", "id": 1}),
        json!({"jsonrpc": "2.0", "id": {}, "method": "x"}),
    ] {
        let r = Req::new("server/discover")
            .raw_body(bad.to_string())
            .send(&s.url())
            .await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].as_i64()),
            (400, Some(-32600)),
            "{bad}: {}",
            r.text
        );
    }
}

#[tokio::test]
async fn notification_is_202_with_an_empty_body() {
    let (_demo, s) = one_demo("fd-202").await;
    for method in [
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/whatever",
    ] {
        let r = Req::new(method).notification().send(&s.url()).await;
        assert_eq!(r.status, 202, "{method}");
        assert!(
            r.text.is_empty(),
            "202 must have an empty body: {:?}",
            r.text
        );
    }
}

#[tokio::test]
async fn foreign_host_on_a_loopback_listener_is_403() {
    let (_demo, s) = one_demo("fd-host").await;
    for host in [
        "evil.example.com",
        "evil.example.com:80",
        "127.0.0.2",
        "localhost.evil.example.com",
    ] {
        let (h, body) = discover_head(host, None);
        let r = raw_post(s.addr, "/mcp", &h, &body).await;
        assert_eq!(r.status, 403, "Host: {host}");
    }
}

#[tokio::test]
async fn foreign_origin_on_a_loopback_listener_is_403() {
    let (_demo, s) = one_demo("fd-origin").await;
    // The conformance dns-rebinding-protection scenario: both foreign.
    let (h, body) = discover_head("evil.example.com", Some("http://evil.example.com"));
    assert_eq!(raw_post(s.addr, "/mcp", &h, &body).await.status, 403);
    for origin in [
        "http://evil.example.com",
        "https://localhost.evil.example.com",
        "null",
        "http://127.0.0.1.evil.example.com:80",
    ] {
        let (h, body) = discover_head(&s.addr.to_string(), Some(origin));
        assert_eq!(
            raw_post(s.addr, "/mcp", &h, &body).await.status,
            403,
            "Origin: {origin}"
        );
    }
}

#[tokio::test]
async fn loopback_host_and_origin_names_are_accepted_on_any_port() {
    let (_demo, s) = one_demo("fd-loopback").await;
    let hosts = [
        "localhost",
        "localhost:1",
        "LOCALHOST:65535",
        "127.0.0.1",
        "127.0.0.1:8080",
        "[::1]",
        "[::1]:3000",
    ];
    let origins = [
        None,
        Some("http://localhost:5173"),
        Some("https://127.0.0.1"),
        Some("http://[::1]:9"),
    ];
    for host in hosts {
        for origin in origins {
            let (h, body) = discover_head(host, origin);
            let r = raw_post(s.addr, "/mcp", &h, &body).await;
            assert_eq!(r.status, 200, "Host {host} Origin {origin:?}: {}", r.body);
        }
    }
}

#[tokio::test]
async fn allowed_origins_from_config_are_accepted_and_others_refused() {
    let demo = sluice_testkit::demo::upstream::start("fd-allowed", ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let s = Gateway::e2e()
        .top("allowed_origins", strings(&["https://app.example.com"]))
        .upstream("fd-allowed", &demo.url())
        .start()
        .await;
    let (h, body) = discover_head("localhost", Some("https://app.example.com"));
    assert_eq!(raw_post(s.addr, "/mcp", &h, &body).await.status, 200);
    for other in [
        "https://app.example.com:444",
        "http://app.example.com",
        "https://other.example.com",
    ] {
        let (h, body) = discover_head("localhost", Some(other));
        assert_eq!(
            raw_post(s.addr, "/mcp", &h, &body).await.status,
            403,
            "Origin {other}"
        );
    }
}

#[tokio::test]
async fn every_error_carries_the_request_id_string_or_number() {
    let (_demo, s) = one_demo("fd-ids").await;
    for id in [
        json!("req-ä-1"),
        json!(0),
        json!(-7),
        json!(9007199254740993_u64),
        json!(1.5),
    ] {
        // -32602 (_meta), -32020 (headers), -32022 (version), -32601 (method), -32602 (unknown URI).
        Req::new("tools/list")
            .id(id.clone())
            .no_meta()
            .send(&s.url())
            .await
            .error(400, -32602, &id);
        Req::new("tools/list")
            .id(id.clone())
            .without("mcp-method")
            .send(&s.url())
            .await
            .error(400, -32020, &id);
        let old = Req::new("tools/list").id(id.clone()).meta_member(
            "io.modelcontextprotocol/protocolVersion",
            json!("2025-11-25"),
        );
        old.header("mcp-protocol-version", "2025-11-25")
            .send(&s.url())
            .await
            .error(400, -32022, &id);
        Req::new("ping")
            .id(id.clone())
            .send(&s.url())
            .await
            .error(404, -32601, &id);
        let r = Req::new("resources/read")
            .id(id.clone())
            .params(json!({"uri": "nowhere://x"}))
            .send(&s.url())
            .await;
        r.error(400, -32602, &id);
    }
}

#[tokio::test]
async fn results_carry_result_type_and_sluice_server_info() {
    let (_demo, s) = one_demo("fd-stamp").await;
    let id = json!("r");
    Req::new("server/discover")
        .id(id.clone())
        .send(&s.url())
        .await
        .result(&id);
    Req::new("tools/list")
        .id(id.clone())
        .send(&s.url())
        .await
        .result(&id);
    Req::new("prompts/list")
        .id(id.clone())
        .send(&s.url())
        .await
        .result(&id);
    Req::new("resources/templates/list")
        .id(id.clone())
        .send(&s.url())
        .await
        .result(&id);
    let call = Req::new("tools/call")
        .id(id.clone())
        .params(json!({"name": "echo", "arguments": {"text": "hi"}}))
        .send(&s.url())
        .await
        .result(&id);
    assert_eq!(call["resultType"], "complete");
    assert_eq!(call["content"][0]["text"], "hi");
    let read = Req::new("resources/read")
        .id(id.clone())
        .params(json!({"uri": "demo://fd-stamp/readme"}))
        .send(&s.url())
        .await
        .result(&id);
    assert_eq!(
        read["contents"][0]["text"],
        "fd-stamp: demo://fd-stamp/readme"
    );
    let got = Req::new("prompts/get")
        .id(id.clone())
        .params(json!({"name": "greet", "arguments": {"who": "Ada"}}))
        .send(&s.url())
        .await
        .result(&id);
    assert_eq!(got["messages"][0]["content"]["text"], "Hello, Ada!");
}

#[tokio::test]
async fn bodies_are_one_compact_json_object_even_when_the_upstream_pretty_prints() {
    let pretty_tool = serde_json::to_string_pretty(
        &json!({"name": "echo", "description": "two  spaces", "inputSchema": {"type": "object"}}),
    )
    .unwrap();
    let mock = Spec::new("pretty")
        .tools(vec![pretty_tool])
        .on(|seen| {
            (seen.method == "tools/call").then(|| {
                let pretty = serde_json::to_string_pretty(&json!({"jsonrpc": "2.0", "id": seen.id,
                    "result": {"resultType": "complete", "content": [{"type": "text", "text": "a\nb"}], "structuredContent": {"k": [1, 2]}}}))
                .unwrap();
                Reply::Json(200, pretty)
            })
        })
        .start()
        .await;
    let s = Gateway::e2e().upstream("pretty", &mock.url()).start().await;
    let r = Req::new("tools/call")
        .params(json!({"name": "echo", "arguments": {}}))
        .send(&s.url())
        .await;
    let result = r.result(&json!(1));
    assert_eq!(result["content"][0]["text"], "a\nb");
    assert_eq!(result["structuredContent"]["k"], json!([1, 2]));
    let list = Req::new("tools/list").send(&s.url()).await;
    assert!(
        list.text.contains(
            r#"{"name":"echo","description":"two  spaces","inputSchema":{"type":"object"}}"#
        ),
        "{}",
        list.text
    );
    list.result(&json!(1));
}

#[tokio::test]
async fn sse_answers_carry_x_accel_buffering_no_and_one_data_line_per_event() {
    let (_demo, s) = one_demo("fd-sse").await;
    let r = Req::new("tools/call")
        .params(json!({"name": "progress", "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}, "progressToken": "p1"}}))
        .send(&s.url())
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let events = r.events();
    assert_eq!(
        events.len(),
        4,
        "three progress notifications and the result: {}",
        r.text
    );
    assert_result_stamped(&events[3]["result"]);
}

#[tokio::test]
async fn unknown_path_is_404_and_health_endpoints_answer() {
    let (_demo, s) = one_demo("fd-paths").await;
    let base = format!("http://{}", s.addr);
    assert_eq!(
        client()
            .post(format!("{base}/other"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        404
    );
    assert_eq!(
        client()
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let ready = client().get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let v: Value = ready.json().await.unwrap();
    assert_eq!(v["upstreams"][0]["healthy"], true);
}
