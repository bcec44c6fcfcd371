//! Class 5: the work one request (or one principal) can cause is bounded, and `/healthz`
//! answers within 1 s throughout. Sluice runs as a process; its CPU time (/proc/<pid>/stat) is
//! measured around the hostile request.
//!
//! - resource templates: matching a 1 MiB URI against `test://{+a}{+b}{+c}/x`, `x{+a}y{+b}z` and
//!   `file:///{+path}` is linear (the matcher backtracked: cubic for three `{+…}`);
//! - SSE: one 1 MiB event arriving one byte per HTTP chunk costs at most 5× (+50 ms) the same
//!   bytes in 4 chunks (the reader re-scanned its whole buffer per chunk: quadratic);
//! - asks: more than `budget.max_asks_per_round` (16) asks in one round are refused with -31016
//!   without collecting them all (CPU for 10,000, memory for 300 × 200 KB);
//! - /metrics: label values are bounded (made-up methods and upstream error codes are `other`),
//!   the body stays small, a foreign Host is refused, `require_auth` is enforced; /readyz tells
//!   nothing an upstream said;
//! - per-principal caps: 2025-11-25 client sessions (16), legacy upstream sessions (capabilities
//!   normalized), resource subscriptions (256), streams (`max_streams_per_principal`, 429).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::gateway::{ApiKey, Gateway};
use crate::support::legacy::{self, Step};
use crate::support::legacy_client::Legacy;
use crate::support::modern::{
    self as hostile, chunks, event, result, result_text, tool_args as tool, Reply, Spec,
};
use crate::support::process::Sluice;
use crate::support::text::{self as client, call, http};
use crate::support::unique;

/// The slowest `/healthz` probe allowed while a hostile request runs.
const PROBE_LIMIT: Duration = Duration::from_secs(1);

/// Awaits `fut` and gives its answer with the CPU Sluice spent meanwhile. Fails the test as
/// soon as that CPU passes `cpu` (when given: the bound is broken, no need to wait for the
/// answer), or when no answer came within `wall`.
async fn costed<T>(
    sluice: &Sluice,
    what: &str,
    cpu: Option<Duration>,
    wall: Duration,
    fut: impl std::future::Future<Output = T>,
) -> (T, Duration) {
    let before = sluice.cpu_time();
    let spent = || sluice.cpu_time().saturating_sub(before);
    let watch = async {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(limit) = cpu.filter(|l| spent() > *l) {
                return format!(
                    "sluice spent {:?} of CPU, more than {limit:?}, and had not answered yet",
                    spent()
                );
            }
        }
    };
    tokio::select! {
        v = fut => (v, spent()),
        why = watch => panic!("{what}: {why}"),
        _ = tokio::time::sleep(wall) => panic!("{what}: no answer within {wall:?}; sluice had spent {:?} of CPU on it", spent()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
// The bound is wide: a debug build spends 60 to 120 ms reading the URI twice (its header and the
// body, 1 MiB each) and forwarding the read; matching quadratic in the URI would spend minutes.
async fn matching_a_1_mib_uri_against_resource_templates_costs_under_half_a_second_of_cpu() {
    let _measured = crate::support::process::measured().await;
    let templates = json!([
        {"uriTemplate": "test://{+a}{+b}{+c}/x", "name": "three"},
        {"uriTemplate": "x{+a}y{+b}z", "name": "two"},
        {"uriTemplate": "file:///{+path}", "name": "path"},
    ]);
    let up = Spec::raw("tpl")
        .templates_json(templates)
        .fallback(|s| {
            (s.method == "resources/read").then(|| {
                result(
                    &s.id,
                    r#"{"resultType":"complete","contents":[{"uri":"file:///x","text":"read"}],"ttlMs":0,"cacheScope":"private"}"#,
                )
            })
        })
        .start()
        .await;
    let cfg = Gateway::hostile()
        .set("limits", "max_header_bytes", 8388608)
        .upstream("tpl", &up.url());
    let sluice = Sluice::start(&cfg.text()).await;
    let probe = sluice.prober();
    let h = http();
    const MIB: usize = 1 << 20;
    let read = |uri: String| {
        let (h, url) = (h.clone(), sluice.url());
        async move {
            let body = client::body(1, "resources/read", json!({"uri": uri}), &json!({}));
            client::post(&h, &url, "resources/read", Some(&uri), body, None, &[]).await
        }
    };
    for (what, uri) in [
        (
            "test:// + 1 MiB against test://{+a}{+b}{+c}/x",
            format!("test://{}", "a".repeat(MIB)),
        ),
        (
            "x + 1 MiB of y against x{+a}y{+b}z",
            format!("x{}", "y".repeat(MIB)),
        ),
        (
            "file:/// + 1 MiB against file:///{+path}",
            format!("file:///{}", "a".repeat(MIB)),
        ),
    ] {
        let (a, cpu) = costed(
            &sluice,
            what,
            Some(Duration::from_millis(500)),
            Duration::from_secs(10),
            read(uri),
        )
        .await;
        assert!(
            !matches!(a.status, 413 | 431),
            "{what}: refused at the edge ({}), not matched",
            a.status
        );
        assert!(
            !a.msg.is_null(),
            "{what}: a JSON-RPC answer: {}",
            client::cut(&a.text)
        );
        assert!(
            cpu < Duration::from_millis(500),
            "{what}: sluice spent {cpu:?} of CPU"
        );
    }
    let two = async {
        tokio::join!(
            read(format!("test://{}", "b".repeat(MIB))),
            read(format!("test://{}", "c".repeat(MIB)))
        )
    };
    let ((a, b), cpu) = costed(
        &sluice,
        "two 1 MiB URIs at once",
        Some(Duration::from_millis(200)),
        Duration::from_secs(10),
        two,
    )
    .await;
    assert!(!a.msg.is_null() && !b.msg.is_null(), "both answered");
    assert!(
        cpu < Duration::from_millis(200),
        "two 1 MiB URIs at once: sluice spent {cpu:?} of CPU"
    );
    probe.assert_within(PROBE_LIMIT).await;
}

/// A tool `big` answering with about 1 MiB of SSE, in chunks of `arguments.chunk` bytes ("0":
/// a quarter of the answer each): `arguments.shape` "one" sends it as one event on one `data:`
/// line, "lines" as one event of 16,384 short `data:` lines (no line longer than 64 bytes).
async fn streamer() -> hostile::Mock {
    Spec::raw("streamer")
        .tools_json(json!([tool("big", &["shape", "chunk"])]))
        .fallback(|s| {
            let size: usize = s.params["arguments"]["chunk"].as_str()?.parse().ok()?;
            let bytes = match s.params["arguments"]["shape"].as_str()? {
                "one" => {
                    let text = "z".repeat(1 << 20);
                    event(&result_text(&s.id, &format!(r#"{{"resultType":"complete","content":[{{"type":"text","text":"{text}"}}]}}"#)))
                }
                _ => {
                    // The JSON split at whitespace between items: each `data:` line is one item.
                    let mut ev =
                        format!("data: {{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":{{\"resultType\":\"complete\",\"content\":[\n", s.id);
                    for i in 0..16384 {
                        let sep = if i + 1 < 16384 { "," } else { "" };
                        ev.push_str(&format!("data: {{\"type\":\"text\",\"text\":\"{}\"}}{sep}\n", "z".repeat(26)));
                    }
                    ev.push_str("data: ]}}\n\n");
                    ev
                }
            }
            .into_bytes();
            let size = if size == 0 { bytes.len().div_ceil(4) } else { size };
            Some(hostile::chunked(chunks(&bytes, size)))
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_mib_sse_event_one_byte_per_chunk_costs_at_most_5x_as_many_bytes_in_short_lines() {
    let _measured = crate::support::process::measured().await;
    let up = streamer().await;
    let cfg = Gateway::hostile()
        .set("limits", "max_sse_event_bytes", 4194304)
        .upstream("streamer", &up.url());
    let sluice = Sluice::start(&cfg.text()).await;
    let probe = sluice.prober();
    let h = client::http_with(Duration::from_secs(300));
    let big = |shape: &'static str, chunk: &'static str| {
        let (h, url) = (h.clone(), sluice.url());
        async move {
            call(
                &h,
                &url,
                1,
                "big",
                &json!({"shape": shape, "chunk": chunk}).to_string(),
                "",
                None,
            )
            .await
        }
    };
    let minute = Duration::from_secs(120);
    // Information for the message: the same event in 4 chunks.
    let (a, four) = costed(
        &sluice,
        "one event in 4 chunks",
        None,
        minute,
        big("one", "0"),
    )
    .await;
    assert_eq!(
        a.msg["result"]["content"][0]["text"].as_str().map(str::len),
        Some(1 << 20),
        "{}",
        client::cut(&a.text)
    );
    // The baseline: as many one-byte chunks, in lines short enough that no reader rescans much.
    let (a, lines) = costed(
        &sluice,
        "short lines, one byte per chunk",
        None,
        minute,
        big("lines", "1"),
    )
    .await;
    assert_eq!(
        a.msg["result"]["content"].as_array().map(Vec::len),
        Some(16384),
        "{}",
        client::cut(&a.text)
    );
    eprintln!("one 1 MiB event in 4 chunks cost {four:?} of CPU; as many bytes in short lines, one byte per chunk, {lines:?}");
    let limit = lines * 5 + Duration::from_millis(50);
    let what = format!(
        "one 1 MiB event one byte per chunk (short lines cost {lines:?}, 4 chunks {four:?})"
    );
    let (a, one) = costed(&sluice, &what, Some(limit), minute * 2, big("one", "1")).await;
    assert_eq!(
        a.msg["result"]["content"][0]["text"].as_str().map(str::len),
        Some(1 << 20),
        "{}",
        client::cut(&a.text)
    );
    assert!(one <= limit, "{what}: cost {one:?} of CPU");
    eprintln!("one 1 MiB event one byte per chunk cost {one:?} of CPU");
    probe.assert_within(PROBE_LIMIT).await;
}

/// A legacy upstream whose tool `flood` sends `arguments.n` elicitation asks with a message of
/// `arguments.size` bytes (the canary, padded), then waits for an answer to the first.
async fn flooder(canary: &str) -> legacy::Legacy {
    let canary = canary.to_owned();
    legacy::start(json!([tool("flood", &["n", "size"])]), move |s| {
        let n: usize = s.params["arguments"]["n"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
        let size: usize = s.params["arguments"]["size"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
        let message = format!("{canary}{}", "m".repeat(size.saturating_sub(canary.len())));
        let mut steps: Vec<Step> = (0..n)
            .map(|i| {
                Step::Send(format!(
                    r#"{{"jsonrpc":"2.0","id":"e-{i}","method":"elicitation/create","params":{{"mode":"form","message":"{message}","requestedSchema":{{"type":"object","properties":{{"a":{{"type":"string"}}}}}}}}}}"#
                ))
            })
            .collect();
        steps.push(Step::Await(vec!["\"e-0\"".into()]));
        steps.push(Step::Send(result_text("{id}", r#"{"content":[{"type":"text","text":"flood done"}]}"#)));
        steps
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tiny_legacy_asks_in_one_round_are_refused_with_31016_cheaply() {
    let _measured = crate::support::process::measured().await;
    let canary = unique("ask");
    let up = flooder(&canary).await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("flooder", &up.url()).text()).await;
    let probe = sluice.prober();
    let h = http();
    let args = json!({"n": "10000", "size": "0"}).to_string();
    let (a, cpu) = costed(
        &sluice,
        "10,000 asks",
        Some(Duration::from_millis(250)),
        Duration::from_secs(20),
        call(&h, &sluice.url(), 1, "flood", &args, "", None),
    )
    .await;
    let data = a.refused(400, -31016, "10,000 asks in one round");
    assert_eq!(data["limit"], 16, "{}", a.text);
    assert!(
        cpu < Duration::from_millis(250),
        "10,000 asks cost sluice {cpu:?} of CPU"
    );
    probe.assert_within(PROBE_LIMIT).await;
    sluice.assert_no_leak(&[&canary]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_200_kb_legacy_asks_are_refused_without_holding_them() {
    let _measured = crate::support::process::measured().await;
    let canary = unique("ask");
    let up = flooder(&canary).await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("flooder", &up.url()).text()).await;
    let probe = sluice.prober();
    let h = http();
    let rss = sluice.rss();
    let args = json!({"n": "300", "size": "200000"}).to_string();
    let (a, _) = costed(
        &sluice,
        "300 asks of 200 KB",
        None,
        Duration::from_secs(20),
        call(&h, &sluice.url(), 1, "flood", &args, "", None),
    )
    .await;
    let data = a.refused(400, -31016, "300 asks of 200 KB in one round");
    assert_eq!(data["limit"], 16, "{}", client::cut(&a.text));
    let grown = sluice.rss().saturating_sub(rss);
    assert!(grown < 64 << 20, "sluice's RSS grew by {} MiB", grown >> 20);
    probe.assert_within(PROBE_LIMIT).await;
    sluice.assert_no_leak(&[&canary]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_round_with_17_input_requests_is_refused_with_31016() {
    let _measured = crate::support::process::measured().await;
    let canary = unique("ask");
    let c = canary.clone();
    let up = Spec::raw("many")
        .tools_json(json!([tool("ask", &[])]))
        .fallback(move |s| {
            let asks: serde_json::Map<String, Value> = (0..17)
                .map(|i| {
                    (
                        format!("q{i}"),
                        json!({"method": "elicitation/create", "params": {"mode": "form", "message": c,
                        "requestedSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}}),
                    )
                })
                .collect();
            Some(result(&s.id, &json!({"resultType": "input_required", "inputRequests": asks, "requestState": "s"}).to_string()))
        })
        .start()
        .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("many", &up.url()).text()).await;
    let a = call(&http(), &sluice.url(), 1, "ask", "{}", "", None).await;
    assert_eq!(
        a.refused(400, -31016, "17 input requests in one round")["limit"],
        16,
        "{}",
        client::cut(&a.text)
    );
    sluice.assert_no_leak(&[&canary]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_labels_stay_bounded_whatever_methods_and_error_codes_arrive() {
    let _measured = crate::support::process::measured().await;
    let canary = unique("upstream-error");
    let c = canary.clone();
    let up = Spec::raw("errs")
        .tools_json(json!([tool("fail", &["code"])]))
        .fallback(move |s| {
            let code: i64 = s.params["arguments"]["code"].as_str()?.parse().ok()?;
            Some(hostile::error(
                &s.id,
                code,
                &format!("failed on purpose {c}"),
            ))
        })
        .start()
        .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("errs", &up.url()).text()).await;
    let probe = sluice.prober();
    let h = http();
    for i in 0..300 {
        let method = format!("x/hostile-method-{i}");
        let a = client::post(
            &h,
            &sluice.url(),
            &method,
            None,
            client::body(i, &method, json!({}), &json!({})),
            None,
            &[],
        )
        .await;
        assert_eq!(a.status, 404, "{method}: {}", a.text);
    }
    for i in 0..100 {
        let args = json!({"code": (777_000 + i).to_string()}).to_string();
        call(&h, &sluice.url(), i, "fail", &args, "", None).await;
    }
    let m = h
        .get(sluice.at("/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("its body");
    assert!(
        !m.contains("hostile-method-"),
        "a made-up method became a label value: {}",
        client::cut(&m)
    );
    assert!(
        !m.contains("7770"),
        "an upstream's error code became a label value: {}",
        client::cut(&m)
    );
    assert!(
        m.contains("\"other\""),
        "made-up methods are counted as `other`: {}",
        client::cut(&m)
    );
    assert!(m.len() < 64 << 10, "/metrics is {} bytes", m.len());
    probe.assert_within(PROBE_LIMIT).await;
    sluice.assert_no_leak(&[&canary]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_readyz_refuse_a_foreign_host_and_readyz_repeats_nothing_an_upstream_said() {
    let _measured = crate::support::process::measured().await;
    let canary = unique("upstream-error");
    let broken = Spec::raw("broken")
        .discover(Reply::Json(200, format!(
            r#"{{"jsonrpc":"2.0","id":{{id}},"error":{{"code":-32022,"message":"no versions for you {canary}","data":{{"supported":["1999-01-01"],"requested":"2026-07-28","why":"{canary}"}}}}}}"#
        )))
        .start()
        .await;
    let fine = Spec::raw("fine")
        .tools_json(json!([tool("t", &[])]))
        .start()
        .await;
    let cfg = Gateway::hostile()
        .upstream("fine", &fine.url())
        .upstream("broken", &broken.url());
    let sluice = Sluice::start(&cfg.text()).await;
    let probe = sluice.prober();
    let h = http();
    for path in ["/metrics", "/readyz"] {
        let r = h
            .get(sluice.at(path))
            .header("host", "evil.example.com")
            .send()
            .await
            .expect("GET");
        assert_eq!(r.status(), 403, "{path} with Host: evil.example.com");
    }
    let body = h
        .get(sluice.at("/readyz"))
        .send()
        .await
        .expect("GET /readyz")
        .text()
        .await
        .expect("its body");
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let has_error = v["upstreams"]
        .as_array()
        .map_or(false, |u| u.iter().any(|u| u.get("error").is_some()))
        || v.get("error").is_some();
    assert!(!has_error, "/readyz carries an error member: {body}");
    assert!(
        !body.contains(&canary),
        "/readyz repeats what the upstream said: {body}"
    );
    probe.assert_within(PROBE_LIMIT).await;
    sluice.assert_no_leak(&[&canary]);
}

const KEY_A: &str = "hostile-principal-a-key-0123456789";
const KEY_B: &str = "hostile-principal-b-key-9876543210";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_require_auth_asks_for_the_key() {
    let _measured = crate::support::process::measured().await;
    let up = Spec::raw("u")
        .tools_json(json!([tool("t", &[])]))
        .start()
        .await;
    let cfg = Gateway::hostile()
        .api_key(ApiKey::new(KEY_A, "a").scopes(&[]))
        .set("metrics", "require_auth", true)
        .upstream("u", &up.url());
    let sluice = Sluice::start(&cfg.text()).await;
    sluice.ready_for(KEY_A).await;
    let h = http();
    for path in ["/metrics", "/readyz"] {
        assert_eq!(
            h.get(sluice.at(path)).send().await.unwrap().status(),
            401,
            "{path} without a credential"
        );
        assert_eq!(
            h.get(sluice.at(path))
                .bearer_auth(KEY_A)
                .send()
                .await
                .unwrap()
                .status(),
            200,
            "{path} with the key"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_legacy_initializes_of_one_principal_leave_another_principals_session_alone() {
    let _measured = crate::support::process::measured().await;
    let up = Spec::raw("u")
        .tools_json(json!([tool("t", &[])]))
        .start()
        .await;
    let cfg = Gateway::hostile()
        .api_key(ApiKey::new(KEY_A, "a").scopes(&[]))
        .api_key(ApiKey::new(KEY_B, "b").scopes(&[]))
        .upstream("u", &up.url());
    let sluice = Sluice::start(&cfg.text()).await;
    let probe = sluice.prober();
    let h = http();
    let mut b = Legacy::with(&h, &sluice.url(), Some(KEY_B));
    b.handshake(json!({})).await;
    let mut sessions = Vec::new();
    for _ in 0..1000 {
        let mut a = Legacy::with(&h, &sluice.url(), Some(KEY_A));
        a.handshake(json!({})).await;
        sessions.push(a);
    }
    let ping = |c: &Legacy| {
        let c = c.clone();
        async move { c.answer(1, "ping", json!({})).await.status }
    };
    assert_eq!(
        ping(&b).await,
        200,
        "principal b's session survived a's 1000 initializes"
    );
    assert_eq!(
        ping(&sessions[16]).await,
        404,
        "a's 17th-oldest session is gone"
    );
    assert_eq!(
        ping(&sessions[1000 - 17]).await,
        404,
        "a's 17th-newest session is gone (16 per principal)"
    );
    assert_eq!(ping(&sessions[999]).await, 200, "a's newest session works");
    probe.assert_within(PROBE_LIMIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_declaring_junk_inside_sampling_share_legacy_upstream_sessions() {
    let _measured = crate::support::process::measured().await;
    let up = legacy::start(json!([tool("echo", &[])]), |_| {
        vec![Step::Send(result_text(
            "{id}",
            r#"{"content":[{"type":"text","text":"echoed"}]}"#,
        ))]
    })
    .await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("oldone", &up.url()).text()).await;
    let probe = sluice.prober();
    let internal = up.initializes().len();
    let h = http();
    for i in 0..20 {
        let caps = json!({"sampling": {"x": format!("junk-{i}-{}", unique("cap"))}});
        let body = client::tool_body(i, "echo", "{}", "", &caps);
        let a = client::post(
            &h,
            &sluice.url(),
            "tools/call",
            Some("echo"),
            body,
            None,
            &[],
        )
        .await;
        assert_eq!(a.status, 200, "call {i}: {}", client::cut(&a.text));
    }
    let inits = up.initializes();
    assert!(
        inits.len() - internal <= 2,
        "20 calls of one principal opened {} legacy sessions: {inits:?}",
        inits.len() - internal
    );
    for caps in &inits {
        assert!(
            !caps.to_string().contains("junk-"),
            "a client's junk capability reached the upstream: {caps}"
        );
    }
    probe.assert_within(PROBE_LIMIT).await;
}

/// An upstream serving `test://item/{id}` resources, subscribable.
async fn items() -> hostile::Mock {
    Spec::raw("items")
        .templates_json(json!([{"uriTemplate": "test://item/{id}", "name": "item"}]))
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_subscribing_257_uris_gets_32602_on_the_257th() {
    let _measured = crate::support::process::measured().await;
    let up = items().await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("items", &up.url()).text()).await;
    let probe = sluice.prober();
    let mut c = Legacy::with(&http(), &sluice.url(), None);
    c.handshake(json!({})).await;
    for i in 0..256u64 {
        let a = c
            .answer(
                i + 1,
                "resources/subscribe",
                json!({"uri": format!("test://item/{i}")}),
            )
            .await;
        assert!(
            a.msg.get("result").is_some(),
            "subscription {i} is accepted: {}",
            a.text
        );
    }
    let a = c
        .answer(
            1000,
            "resources/subscribe",
            json!({"uri": "test://item/256"}),
        )
        .await;
    assert_eq!(a.code(), Some(-32602), "the 257th subscription: {}", a.text);
    probe.assert_within(PROBE_LIMIT).await;
}

/// POSTs a `subscriptions/listen` for `key` with `filter`; gives the open response.
async fn open_listen(
    h: &reqwest::Client,
    url: &str,
    id: u64,
    key: Option<&str>,
    filter: Value,
) -> reqwest::Response {
    let mut r = h
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen");
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    r.body(client::body(
        id,
        "subscriptions/listen",
        json!({"notifications": filter}),
        &json!({}),
    ))
    .send()
    .await
    .expect("POST a listen")
}

/// Reads a listen's acknowledgement.
async fn acked(resp: reqwest::Response, what: &str) -> client::Events {
    assert_eq!(resp.status(), 200, "{what}");
    let mut ev = client::Events::of(resp);
    let ack = ev
        .next(Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("{what}: the stream ended"));
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{what}: {ack}"
    );
    ev
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_with_257_resource_subscriptions_is_refused_with_32602() {
    let _measured = crate::support::process::measured().await;
    let up = items().await;
    let sluice = Sluice::start(&Gateway::hostile().upstream("items", &up.url()).text()).await;
    let probe = sluice.prober();
    let h = http();
    let uris = |n: usize| {
        (0..n)
            .map(|i| format!("test://item/{i}"))
            .collect::<Vec<_>>()
    };
    let ok = acked(
        open_listen(
            &h,
            &sluice.url(),
            1,
            None,
            json!({"resourceSubscriptions": uris(256)}),
        )
        .await,
        "256 subscriptions",
    )
    .await;
    drop(ok);
    let a = client::first(
        open_listen(
            &h,
            &sluice.url(),
            2,
            None,
            json!({"resourceSubscriptions": uris(257)}),
        )
        .await,
    )
    .await;
    a.refused(400, -32602, "a listen with 257 resource subscriptions");
    probe.assert_within(PROBE_LIMIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fourth_concurrent_listen_of_one_principal_is_429_and_another_principal_still_listens() {
    let _measured = crate::support::process::measured().await;
    let up = Spec::raw("u")
        .tools_json(json!([tool("t", &[])]))
        .start()
        .await;
    let cfg = Gateway::hostile()
        .api_key(ApiKey::new(KEY_A, "a").scopes(&[]))
        .api_key(ApiKey::new(KEY_B, "b").scopes(&[]))
        .set("limits", "max_streams_per_principal", 3);
    let sluice = Sluice::start(&cfg.upstream("u", &up.url()).text()).await;
    let probe = sluice.prober();
    let h = http();
    let filter = json!({"toolsListChanged": true});
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(
            acked(
                open_listen(&h, &sluice.url(), i, Some(KEY_A), filter.clone()).await,
                &format!("a's listen {i}"),
            )
            .await,
        );
    }
    let resp = open_listen(&h, &sluice.url(), 9, Some(KEY_A), filter.clone()).await;
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let a = client::first(resp).await;
    a.refused(429, -31018, "a's fourth listen");
    assert!(
        retry_after
            .as_deref()
            .is_some_and(|v| v.parse::<u64>().is_ok()),
        "a Retry-After in seconds: {retry_after:?}"
    );
    let _b = acked(
        open_listen(&h, &sluice.url(), 10, Some(KEY_B), filter).await,
        "b's listen",
    )
    .await;
    drop(held);
    probe.assert_within(PROBE_LIMIT).await;
}
